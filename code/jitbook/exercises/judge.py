"""What checkers say, in one place: run the answer on these inputs, compare with the
reference, count this object's compiles.

Every result a checker compares is copied out of the student's objects first
(``plain``): exact builtin numbers, strings and containers, NumPy arrays copied,
JAX's own arrays copied to NumPy. A subclass whose ``==`` always holds, or an object
whose ``__array__`` reads the checker's frame, is refused before any reference
exists. Compiles are counted by the object (a jitted function's own cache), or, for
an answer that is not a jitted function, every compile while it runs: never by a
name the student picks.
"""

import contextlib
import dataclasses
import math
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles
from jitbook.evidence.read import Other

_JIT = type(jax.jit(abs))
_ARRAY = type(jnp.zeros(0))
_EXACT = (bool, int, float, complex, str, type(None))


@dataclasses.dataclass
class _Progress:
    passed: list[str] = dataclasses.field(default_factory=list)
    self_reported: list[str] = dataclasses.field(default_factory=list)


_current: list[_Progress] = []


def expect(
    condition: bool, passed: str, failed: str, *, self_reported: bool = False
) -> None:
    """Record ``passed`` if ``condition`` holds, else stop the checker with
    ``failed``. ``self_reported``: the condition rests on a probe that ran beside the
    student's code, which a grader cannot trust."""
    if not condition:
        raise Wrong(failed)
    if _current:
        _current[-1].passed.append(passed)
        if self_reported:
            _current[-1].self_reported.append(passed)


class Wrong(Exception):
    """Raised by a checker to stop with a plain-words explanation of what is off."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


def is_jitted(fn) -> bool:
    """Whether ``fn`` was made by ``jax.jit`` (or a JAX/Equinox jit): its class, not
    the object, must carry ``lower``, so ``f.lower = None`` on a plain function fails.
    """
    if type(fn) is _JIT:
        return True
    kind = type(fn)
    lower = getattr(kind, "lower", None)
    home = kind.__module__.split(".")[0]
    return callable(lower) and home in ("jax", "jaxlib", "equinox")


def is_array(value) -> bool:
    """Whether ``value`` is one of JAX's own arrays (not a look-alike class)."""
    return type(value) is _ARRAY


def plain(value, what: str = "your function"):
    """``value`` as exact builtin types and NumPy copies; anything else is Wrong.

    Nothing of the student's runs here but JAX's and NumPy's own conversion.
    """
    kind = type(value)
    if kind in _EXACT:
        return value
    if kind is np.ndarray or kind is _ARRAY:
        return np.array(value, copy=True)
    if isinstance(value, np.generic) and kind.__module__ == "numpy":
        return value.item()
    if kind in (tuple, list):
        return kind(plain(v, what) for v in value)
    if kind is Other:
        raise Wrong(
            f"{what} returned a {value.type_name}; return plain numbers, tuples, "
            "lists, dicts or arrays (a subclass of them is not accepted)."
        )
    if kind is dict:
        return {plain(k, what): plain(v, what) for k, v in value.items()}
    raise Wrong(
        f"{what} returned a {kind.__name__}; return plain numbers, tuples, lists, "
        "dicts or arrays (a subclass of them is not accepted)."
    )


def number(value, what: str = "your function"):
    """A plain ``int``, ``float`` or ``bool`` out of ``value`` (a 0-d array too)."""
    got = plain(value, what)
    if isinstance(got, np.ndarray) and got.shape == ():
        got = got.item()
    if type(got) not in (bool, int, float):
        raise Wrong(f"{what} returned {type(value).__name__}, not a number.")
    return got


def array(value, what: str = "your function") -> np.ndarray:
    """A float64 NumPy copy of ``value`` (an array, or numbers in lists)."""
    got = plain(value, what)
    try:
        return np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise Wrong(f"{what} returned {type(value).__name__}, not an array.") from None


def agrees(got, want, atol: float = 1e-5, rtol: float = 1e-5) -> bool:
    """Same shape and every entry close; ``got`` is copied out first, never raises."""
    try:
        got = array(got)
        want = np.asarray(want, dtype=np.float64)
    except (Wrong, TypeError, ValueError):
        return False
    same = got.shape == want.shape
    return same and bool(np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True))


def whole(value, what: str) -> int | float:
    """A whole number of something (``math.inf`` allowed), from exact types only."""
    got = number(value, what)
    if type(got) is float and got.is_integer():
        got = int(got)
    if type(got) is not int and got != math.inf:
        raise Wrong(f"{what} returned {value!r}; return a whole number (math.ceil).")
    return got


def _own_cache(answer):
    """The jit cache that belongs to ``answer``: its own (``jax.jit``), the one inside
    an Equinox ``filter_jit``, or None for anything else.
    """
    if type(answer) is _JIT:
        return answer
    cached = getattr(answer, "_cached", None)
    if type(answer).__module__.startswith("equinox") and type(cached) is _JIT:
        return cached
    return None


class Compiles:
    """Compiles counted by the object: the fewer of a jitted answer's new cache
    entries and all compiles in the block, or every compile while a plain function
    runs (a wrapper hides nothing).
    """

    def __init__(self, answer) -> None:
        self.cache, self.count, self.compiles = _own_cache(answer), 0, []

    def _size(self) -> int:
        return self.cache._cache_size() if self.cache is not None else 0


@contextlib.contextmanager
def compiles_of(answer) -> Iterator[Compiles]:
    """Count ``answer``'s compiles in the block: ``with compiles_of(f) as c: ...``."""
    counted = Compiles(answer)
    before = counted._size()
    with count_compiles() as log:
        yield counted
    counted.compiles = list(log.compiles)
    own = counted._size() - before
    # Both bound the object's compiles from above, and no name the student picks
    # lowers either: the cache grows by one per new signature, the log counts all.
    counted.count = min(own, log.count) if counted.cache is not None else log.count


def expect_jitted(answer, name: str) -> None:
    """The expectation every "jit it" exercise starts with, in one wording."""
    expect(
        is_jitted(answer),
        "is a jitted function",
        f"{name} is {type(answer).__name__}, not a function compiled by jax.jit (a "
        "jitted function's class has .lower).",
    )


def expect_function(answer, name: str) -> None:
    """The expectation every "write a function" exercise starts with."""
    expect(
        callable(answer),
        "is a function",
        f"{name} is a {type(answer).__name__}, not a function.",
    )


def expect_agrees(got, want, passed: str, failed: str, atol: float = 1e-5) -> None:
    """Expect ``got`` (copied out) to agree with the reference ``want``."""
    expect(agrees(got, want, atol=atol), passed, failed)


def expect_compiles(counted: Compiles, at_most: int, passed: str, failed: str) -> None:
    """Expect at most ``at_most`` compiles of the object ``counted`` watched;
    ``failed`` may name ``{count}``, ``{times}`` and ``{programs}``.
    """
    from jitbook.display import plural

    programs = ", ".join(sorted(set(counted.compiles))) or "none"
    words = {"count": counted.count, "times": plural(counted.count, "time")}
    expect(counted.count <= at_most, passed, failed.format(**words, programs=programs))


def run(answer, calls: list[tuple], what: str = "your function") -> list:
    """The answer on each argument tuple of ``calls``, each result copied out."""
    from . import call_answer

    return [plain(call_answer(answer, *args), what) for args in calls]
