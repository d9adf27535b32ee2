"""The grader's own copy of the checkers, inside a grading kernel, out of the student's
reach by name.

``jitbook.classroom`` loads this module in each grading kernel before any student
cell runs, from bytes it verified by hash. It loads the chapter's checkers the same
way, under a private package name, so a student who rebinds ``check``, a checker or a
``jitbook`` function changes nothing the grader uses. Before any student code runs it
takes a snapshot of what a checker relies on: the functions and classes of
``jitbook``, NumPy, JAX and the standard modules checkers use, the checkers' own
modules, the interpreter's trace, profile and monitoring hooks, JAX's compile-event
listeners, the import system and the threads; every verdict lists what differs, and
the grade sheet flags it. It holds no key: each verdict cell carries a nonce that the
kernel first sees when that cell runs, and the grader outside the kernel decides the
grade (``jitbook.classroom.report``), after reading the student's code itself
(``jitbook.classroom.scan``).
"""

import gc
import hashlib
import importlib.abc
import importlib.util
import json
import sys
import types
from pathlib import Path

PACKAGE = "jitbook._sealed_exercises"
MARK = "JITBOOK-VERDICT "
# Modules (and their submodules) whose functions a checker leans on.
WATCHED = (
    "builtins",
    "math",
    "operator",
    "functools",
    "numpy",
    "jax",
    "equinox",
    "json",
    "hmac",
    "hashlib",
    "signal",
    "threading",
    "traceback",
    "inspect",
)
KERNEL_OWNED = {("builtins", "input"), ("builtins", "getpass"), ("builtins", "_")}


class Tampered(RuntimeError):
    """A file of the checkers differs from the one the grader hashed."""


def digests(folder: Path) -> dict[str, str]:
    """The sha256 of every ``.py`` file in ``folder``, by file name."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(folder).glob("*.py"))
    }


def verified(folder: Path, hashes: dict[str, str]) -> dict[str, bytes]:
    """The bytes of each file named in ``hashes``, after checking each one's hash."""
    sources = {}
    for name, digest in hashes.items():
        data = (Path(folder) / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise Tampered(f"{name} changed on disk since grading began.")
        sources[name] = data
    return sources


class _Sealed(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the private package's modules from verified bytes, never from the file
    system.
    """

    def __init__(self, folder: Path, sources: dict[str, bytes]) -> None:
        self.folder, self.sources = Path(folder), sources

    def _file(self, name: str) -> str | None:
        if name == PACKAGE:
            return "__init__.py"
        short = name.removeprefix(PACKAGE + ".")
        return f"{short}.py" if f"{short}.py" in self.sources else None

    def find_spec(self, name, path=None, target=None):
        if not (name == PACKAGE or name.startswith(PACKAGE + ".")):
            return None
        file = self._file(name)
        if file is None:
            return None
        origin = str(self.folder / file)
        spec = importlib.util.spec_from_loader(
            name, self, origin=origin, is_package=name == PACKAGE
        )
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        file = self._file(module.__name__)
        module.__file__ = str(self.folder / file)
        code = compile(self.sources[file], module.__file__, "exec")
        exec(code, module.__dict__)


def _fingerprint(value) -> tuple:
    code = getattr(value, "__code__", None)
    return id(value), id(code) if code is not None else None


def _watched_attributes(module) -> dict[str, tuple]:
    kinds = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)
    found = {}
    for name, value in list(vars(module).items()):
        if isinstance(value, kinds) or name == "_REGISTRY":
            found[name] = _fingerprint(value)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in list(vars(value).items()):
                if isinstance(member, types.FunctionType | classmethod | staticmethod):
                    found[f"{name}.{attr}"] = _fingerprint(member)
    return found


def _watched(name: str) -> bool:
    return (
        (name == "jitbook" or name.startswith("jitbook."))
        and not name.startswith(PACKAGE)
        or any(name == w or name.startswith(w + ".") for w in WATCHED)
    )


def hooks() -> dict[str, tuple]:
    """The interpreter's hooks and JAX's compile listeners, by identity."""
    import threading

    found = {
        "sys.settrace": (id(sys.gettrace()),),
        "sys.setprofile": (id(sys.getprofile()),),
        "threading.settrace": (id(getattr(threading, "_trace_hook", None)),),
        "threading.setprofile": (id(getattr(threading, "_profile_hook", None)),),
        "sys.meta_path": tuple(map(id, sys.meta_path)),
        "sys.path_hooks": tuple(map(id, sys.path_hooks)),
        "gc.callbacks": tuple(map(id, gc.callbacks)),
        "threads": (
            sum(not t.name.startswith("jitbook-") for t in threading.enumerate()),
        ),
    }
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        found["sys.monitoring"] = tuple(monitoring.get_tool(tool) for tool in range(6))
    events = sys.modules.get("jax._src.monitoring")
    for name in dir(events) if events is not None else []:
        if name.endswith("_listeners"):
            found[f"jax.monitoring {name}"] = tuple(map(id, getattr(events, name)))
    return found


def snapshot() -> dict[str, dict[str, tuple]]:
    """Who is who among the functions a checker relies on, and the hooks."""
    names = [n for n in list(sys.modules) if _watched(n)]
    taken = {n: _watched_attributes(sys.modules[n]) for n in names if n in sys.modules}
    taken["sys.modules"] = {n: (id(sys.modules[n]),) for n in names}
    taken["hooks"] = hooks()
    return taken


def _same_code(a, b) -> bool:
    a, b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return (
        a is not None
        and b is not None
        and a.co_code == b.co_code
        and a.co_names == b.co_names
    )


class Grader:
    """Checks exercises with the sealed checkers; reports what the notebook changed."""

    def __init__(self, package) -> None:
        self.package = package
        self.sealed = {
            (m, name): _fingerprint(v)
            for m in [package, *self._modules()]
            for name, v in vars(m).items()
        }
        self._print, self._dumps = print, json.dumps
        self.before = snapshot()

    def _modules(self) -> list:
        prefix = PACKAGE + "."
        return [m for n, m in list(sys.modules.items()) if n.startswith(prefix)]

    def changes(self) -> list[str]:
        """What the notebook changed since the grader loaded: names of the grading
        code, the functions checkers use and the hooks.
        """
        found = []
        main = sys.modules.get("__main__")
        real = sys.modules.get("jitbook.exercises")
        sealed_check = self.package.check
        if main is not None and "check" in vars(main):
            bound = vars(main)["check"]
            original = getattr(real, "check", None) if real else None
            if not (bound is original and _same_code(bound, sealed_check)):
                found.append("rebinds check")
        if real is not None:
            for id, ex in dict(getattr(real, "_REGISTRY", {})).items():
                sealed = self.package._REGISTRY.get(id)
                if sealed is not None and not _same_code(ex.checker, sealed.checker):
                    found.append(f"replaces the checker of {id}")
        now = snapshot()
        for module, attributes in self.before.items():
            current = now.get(module, {})
            for name, fingerprint in attributes.items():
                if (module, name) in KERNEL_OWNED:
                    continue
                if current.get(name) != fingerprint:
                    what = "changes" if module == "hooks" else "rebinds"
                    where = (
                        name
                        if module in ("hooks", "sys.modules")
                        else f"{module}.{name}"
                    )
                    found.append(f"{what} {where}")
        for m in [self.package, *self._modules()]:
            for name, value in list(vars(m).items()):
                if self.sealed.get((m, name), _fingerprint(value)) != _fingerprint(
                    value
                ):
                    found.append(f"changes the grader's copy ({m.__name__}.{name})")
        return sorted(set(found))

    def grade(
        self, exercise_id: str, time_limit: float | None = None, nonce: str = ""
    ) -> None:
        """Check one exercise against the notebook's names; print the report and the
        measurement, with the nonce, for the grader outside to judge.
        """
        changed = self.changes()
        report = self.package.check(exercise_id, time_limit=time_limit)
        self._print(report.text())
        verdict = dict(vars(report), changes=sorted(set(changed + self.changes())))
        self._print(MARK + self._dumps({"nonce": nonce, "verdict": verdict}))


def read_verdict(text: str, nonce: str) -> dict | None:
    """The verdict a grading cell printed, if it carries the cell's nonce."""
    for line in reversed(text.splitlines()):
        if not line.startswith(MARK):
            continue
        try:
            signed = json.loads(line[len(MARK) :])
            verdict = signed["verdict"]
            return verdict if signed["nonce"] == nonce and nonce else None
        except (ValueError, KeyError, TypeError):
            return None
    return None


def install(folder: str, hashes: dict[str, str], chapter: str) -> Grader:
    """Load the chapter's checkers from verified bytes; return the kernel's grader."""
    sources = verified(Path(folder), hashes)
    sys.meta_path.insert(0, _Sealed(Path(folder), sources))
    package = importlib.import_module(PACKAGE)
    module = chapter.replace("-", "_")
    if f"{module}.py" in sources:
        importlib.import_module(f"{PACKAGE}.{module}")
    return Grader(package)
