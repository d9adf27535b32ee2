"""The grader's own copy of the checkers, inside a grading kernel, out of the student's
reach by name.

``jitbook.classroom`` loads this module in each grading kernel before any student
cell runs, from bytes it verified by hash. Before any student code runs it takes a
snapshot of what a checker relies on: the functions and classes of ``jitbook``,
NumPy, JAX and the standard modules checkers use, the interpreter's trace, profile and
monitoring hooks, JAX's compile-event listeners, the import system and the threads.
Each verdict loads a fresh copy of the chapter's checkers from the files hashed when
grading began, under a private package name, so no student code ran while that copy
existed; it lists what differs from the snapshot, and the grade sheet flags it. It
holds no key: each verdict cell carries a nonce that the kernel first sees when that
cell runs, and the grader outside the kernel decides the grade
(``jitbook.classroom.report``), after reading the student's code itself
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
    """Serves one private package's modules from verified bytes, never from the file
    system.
    """

    def __init__(self, folder: Path, sources: dict[str, bytes], package: str) -> None:
        self.folder, self.sources, self.package = Path(folder), sources, package

    def _file(self, name: str) -> str | None:
        if name == self.package:
            return "__init__.py"
        short = name.removeprefix(self.package + ".")
        return f"{short}.py" if f"{short}.py" in self.sources else None

    def find_spec(self, name, path=None, target=None):
        if not (name == self.package or name.startswith(self.package + ".")):
            return None
        file = self._file(name)
        if file is None:
            return None
        origin = str(self.folder / file)
        return importlib.util.spec_from_loader(
            name, self, origin=origin, is_package=name == self.package
        )

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        file = self._file(module.__name__)
        module.__file__ = str(self.folder / file)
        code = compile(self.sources[file], module.__file__, "exec")
        exec(code, module.__dict__)


def load(folder: Path, sources: dict[str, bytes], chapter: str, name: str):
    """A fresh copy of the checkers' package under ``name``, with the chapter's
    module: made when a verdict is due, so no student code ran while it existed.
    """
    finder = _Sealed(folder, sources, name)
    sys.meta_path.insert(0, finder)
    try:
        package = importlib.import_module(name)
        module = chapter.replace("-", "_")
        if f"{module}.py" in sources:
            importlib.import_module(f"{name}.{module}")
    finally:
        sys.meta_path.remove(finder)
    return package


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
        listeners = getattr(events, name)
        if name.endswith("_listeners") and isinstance(listeners, list):
            found[f"jax.monitoring {name}"] = tuple(map(id, listeners))
    return found


GROWING = {"sys.meta_path", "sys.path_hooks"}


def _kept(before: tuple, now: tuple) -> bool:
    """Whether every entry of ``before`` is still in ``now``, in the same order."""
    rest = iter(now)
    return all(any(entry == later for later in rest) for entry in before)


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
    """Checks exercises with a fresh copy of the sealed checkers each time; reports
    what the notebook changed since the snapshot taken before any student code.
    """

    def __init__(self, folder: Path, sources: dict[str, bytes], chapter: str) -> None:
        self._folder, self._sources, self._chapter = folder, sources, chapter
        self._print, self._dumps = print, json.dumps
        self.before = snapshot()

    def changes(self, package) -> list[str]:
        """What the notebook changed since the snapshot: the notebook's ``check`` and
        registry, the functions checkers use and the hooks.
        """
        found = []
        main = sys.modules.get("__main__")
        real = sys.modules.get("jitbook.exercises")
        if main is not None and "check" in vars(main):
            bound = vars(main)["check"]
            original = getattr(real, "check", None) if real else None
            if not (bound is original and _same_code(bound, package.check)):
                found.append("rebinds check")
        if real is not None:
            for id, ex in dict(getattr(real, "_REGISTRY", {})).items():
                sealed = package._REGISTRY.get(id)
                if sealed is not None and not _same_code(ex.checker, sealed.checker):
                    found.append(f"replaces the checker of {id}")
        now = snapshot()
        for module, attributes in self.before.items():
            current = now.get(module, {})
            for name, fingerprint in attributes.items():
                if (module, name) in KERNEL_OWNED:
                    continue
                if name in GROWING and _kept(fingerprint, current.get(name, ())):
                    continue  # an import may add a finder; none may go or move
                if current.get(name) != fingerprint:
                    found.append(_change(module, name))
        return sorted(set(found))

    def grade(
        self, exercise_id: str, time_limit: float | None = None, nonce: str = ""
    ) -> None:
        """Check one exercise against the notebook's names with a fresh copy of the
        checkers; print the report, and the measurement with the nonce for the grader
        outside to judge.
        """
        name = f"{PACKAGE}_{nonce or 'x'}"
        package = load(self._folder, self._sources, self._chapter, name)
        changed = self.changes(package)
        report = package.check(exercise_id, time_limit=time_limit)
        self._print(report.text())
        after = self.changes(package)
        verdict = dict(vars(report), changes=sorted(set(changed + after)))
        self._print(MARK + self._dumps({"nonce": nonce, "verdict": verdict}))


def _change(module: str, name: str) -> str:
    if module == "hooks":
        return f"changes {name}"
    return f"rebinds {name}" if module == "sys.modules" else f"rebinds {module}.{name}"


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
    """Read the checkers' files and check their hashes, take the snapshot; return the
    kernel's grader. No checker is loaded yet: each verdict loads its own copy.
    """
    sources = verified(Path(folder), hashes)
    return Grader(Path(folder), sources, chapter)
