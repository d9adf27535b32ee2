"""What checkers say, in one place: run the answer on these inputs, compare with the
reference.

Every result a checker compares is copied out of the student's objects first
(``plain``): exact builtin numbers, strings and containers, NumPy arrays copied,
JAX's own arrays copied to NumPy. A subclass whose ``==`` always holds, or an object
whose ``__array__`` reads the checker's frame, is refused before any reference
exists. Checkers judge evidence (``jitbook.evidence``): these copy and compare what
it holds.
"""

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from jitbook.evidence.read import Other

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


def expect_agrees(got, want, passed: str, failed: str, atol: float = 1e-5) -> None:
    """Expect ``got`` (copied out) to agree with the reference ``want``."""
    expect(agrees(got, want, atol=atol), passed, failed)
