"""The grader's own copy of the checkers, inside a grading kernel, out of the student's
reach by name.

``jitbook.classroom`` loads this module in each grading kernel before any student
cell runs, from bytes it verified by hash. It loads the chapter's checkers the same
way, under a private package name, so a student who rebinds ``check``, a checker or a
``jitbook`` function changes nothing the grader uses; it also notes such rebinding,
and the grade sheet flags it. Code that sets out to reach into the grader's objects
in memory can still do so: the teachers' page says how to grade in a container when
that matters.
"""

import hashlib
import hmac
import importlib.abc
import importlib.util
import json
import sys
import types
from pathlib import Path

PACKAGE = "jitbook._sealed_exercises"
MARK = "JITBOOK-VERDICT "
# Modules whose functions a checker leans on: rebinding one of their names is flagged.
WATCHED = (
    "builtins",
    "math",
    "numpy",
    "jax",
    "jax.numpy",
    "jax.lax",
    "jax.tree_util",
    "jax.sharding",
    "jax.export",
    "jax.random",
    "equinox",
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
    return {
        name: _fingerprint(value)
        for name, value in list(vars(module).items())
        if isinstance(value, kinds) or name == "_REGISTRY"
    }


def snapshot() -> dict[str, dict[str, tuple]]:
    """Who is who among the functions of ``jitbook`` and of the modules checkers use."""
    names = [n for n in list(sys.modules) if n == "jitbook" or n.startswith("jitbook.")]
    names = [n for n in names if not n.startswith(PACKAGE)] + list(WATCHED)
    return {n: _watched_attributes(sys.modules[n]) for n in names if n in sys.modules}


def _same_code(a, b) -> bool:
    a, b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return (
        a is not None
        and b is not None
        and a.co_code == b.co_code
        and a.co_names == b.co_names
    )


class Grader:
    """Checks exercises with the sealed checkers; reports what the notebook rebound."""

    def __init__(self, package, key: bytes) -> None:
        self.package, self._key = package, key
        self.before = snapshot()
        self.sealed = {
            (m, name): _fingerprint(v)
            for m in [package, *self._modules()]
            for name, v in vars(m).items()
        }
        self._print = print

    def _modules(self) -> list:
        prefix = PACKAGE + "."
        return [m for n, m in list(sys.modules.items()) if n.startswith(prefix)]

    def changes(self) -> list[str]:
        """What the notebook rebound since the grader loaded: names of the grading code
        it touched.
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
                    found.append(f"rebinds {module}.{name}")
        for m in [self.package, *self._modules()]:
            for name, value in list(vars(m).items()):
                if self.sealed.get((m, name), _fingerprint(value)) != _fingerprint(
                    value
                ):
                    found.append(f"changes the grader's copy ({m.__name__}.{name})")
        return sorted(set(found))

    def grade(self, exercise_id: str, time_limit: float | None = None) -> None:
        """Check one exercise against the notebook's names; print the report and a
        signed verdict.
        """
        report = self.package.check(exercise_id, time_limit=time_limit)
        self._print(report.text())
        verdict = dict(vars(report), changes=self.changes())
        payload = json.dumps(verdict, sort_keys=True)
        signature = hmac.new(self._key, payload.encode(), "sha256").hexdigest()
        self._print(MARK + json.dumps({"verdict": payload, "signature": signature}))


def read_verdict(text: str, key: bytes) -> dict | None:
    """The verdict a grading cell printed, if its signature holds (None otherwise)."""
    for line in reversed(text.splitlines()):
        if not line.startswith(MARK):
            continue
        try:
            signed = json.loads(line[len(MARK) :])
            payload, signature = signed["verdict"], signed["signature"]
        except (ValueError, KeyError, TypeError):
            return None
        want = hmac.new(key, payload.encode(), "sha256").hexdigest()
        return json.loads(payload) if hmac.compare_digest(want, signature) else None
    return None


def install(folder: str, hashes: dict[str, str], chapter: str, key: str) -> Grader:
    """Load the chapter's checkers from verified bytes; return the kernel's grader."""
    sources = verified(Path(folder), hashes)
    sys.meta_path.insert(0, _Sealed(Path(folder), sources))
    package = importlib.import_module(PACKAGE)
    module = chapter.replace("-", "_")
    if f"{module}.py" in sources:
        importlib.import_module(f"{PACKAGE}.{module}")
    return Grader(package, bytes.fromhex(key))
