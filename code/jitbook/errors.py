"""Read errors from the exceptions JAX raises, so a page quotes the real message instead
of a typed one.
"""

from collections.abc import Callable

import jax

from jitbook.cache import without_paths
from jitbook.timing import check_callable


def raised(fn: Callable, *args, **kwargs) -> BaseException | None:
    """Call ``fn`` and return the exception it raised (``None`` if it returned): errors
    shown are read, not typed.
    """
    check_callable(fn, "raised")
    try:
        jax.block_until_ready(fn(*args, **kwargs))
    except Exception as err:  # noqa: BLE001 - the point is to hand the error back
        return err
    return None


def error_of(fn: Callable, *args, **kwargs) -> BaseException:
    """The exception that ``fn(*args)`` raises; a ``ValueError`` if it raises none,
    since the page expects one.
    """
    err = raised(fn, *args, **kwargs)
    if err is None:
        raise ValueError(
            f"{getattr(fn, '__name__', fn)!r} did not raise for these arguments."
        )
    return err


def error_line(err: BaseException | None) -> str:
    """``"TypeError: <first line of the message>"``, the way a page quotes an error: no
    build paths or memory addresses, and a first line ending in a colon ("The error
    was:") goes on with the line it introduces."""
    if err is None:
        return "no error"
    if not isinstance(err, BaseException):
        raise TypeError(
            "error_line takes an exception (e.g. from raised()), got "
            f"{type(err).__name__}."
        )
    lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [""]
    first = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    return f"{type(err).__name__}: {without_paths(first)}"


def short_type(value) -> str:
    """Short type of an argument, as jaxprs print it: ``f32[4,3]``; Python scalars by
    their type."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return jax.typeof(value).str_short(short_dtypes=True)
    return type(value).__name__


def call_outcome(fn: Callable, *args) -> dict:
    """Call ``fn(*args)`` and report what happened: the result's type, or the error's
    class, first and last line.

    Taught in jaxprs, Calling an executable with other shapes.
    """
    check_callable(fn, "call_outcome")
    called = ", ".join(short_type(a) for a in args)
    try:
        out = jax.block_until_ready(
            fn(*args)
        )  # called once: a second call could compile or fail anew
    except Exception as err:  # noqa: BLE001 - the point is to report the error
        lines = str(err).strip().splitlines() or [""]
        return {
            "called with": called,
            "outcome": type(err).__name__,
            "first line": lines[0],
            "last line": lines[-1] if len(lines) > 1 else "",
        }
    return {
        "called with": called,
        "outcome": "returned " + short_type(out),
        "first line": "",
        "last line": "",
    }
