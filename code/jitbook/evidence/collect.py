"""The evidence an answer produces, collected in the student's kernel as plain data.

The grader asks (requests are plain data: call the answer on these inputs, export
it at these shapes, lower it to text, run a probe) and this module answers with
plain data: JSON values and ``.npy`` bytes, never pickle. It decides nothing and
knows no reference: the verdict is computed from this evidence in a process that
never runs student code (``jitbook.evidence.read`` and the checkers), or, for a
student's own ``check()``, in the student's notebook. It imports no checker, so the
grading sandbox can leave the checkers out.
"""

import base64
import contextlib
import io
import signal
import traceback
from collections.abc import Callable

import jax
import numpy as np

MIME = "application/vnd.jitbook.evidence+json"
TEXT_LIMIT = 2_000_000  # characters of lowered program text kept
_EXACT = (bool, int, str, type(None))


def encode(value, depth: int = 0) -> dict:
    """``value`` as JSON-ready plain data; exact builtin types, NumPy and JAX arrays
    only (a subclass of int is not an int here)."""
    kind = type(value)
    if depth > 20:
        return {"other": "a structure nested more than 20 deep"}
    if kind in _EXACT:
        return {"py": value}
    if kind is float:
        return {"float": repr(value)}
    if kind is np.ndarray or isinstance(value, jax.Array):
        array = np.asarray(value)
        if array.dtype == object:
            return {"other": "an array of Python objects"}
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return {"npy": base64.b64encode(buffer.getvalue()).decode()}
    if isinstance(value, np.generic) and kind.__module__ == "numpy":
        return encode(value.item(), depth + 1)
    if kind in (tuple, list):
        return {kind.__name__: [encode(v, depth + 1) for v in value]}
    if kind is dict and all(type(k) is str for k in value):
        return {"dict": {k: encode(v, depth + 1) for k, v in value.items()}}
    return {"other": kind.__name__}


def decode_arg(data):
    """A request's argument: plain JSON, arrays as ``{"npy": ...}``, shapes as
    ``{"spec": [shape, dtype]}``, keys as ``{"key": seed}``."""
    if isinstance(data, dict) and len(data) == 1:
        ((tag, inner),) = data.items()
        if tag == "py":
            return inner
        if tag == "npy":
            return jax.numpy.asarray(_load(inner))
        if tag == "numpy":
            return _load(inner)
        if tag == "spec":
            return jax.ShapeDtypeStruct(tuple(inner[0]), np.dtype(inner[1]))
        if tag == "key":
            return jax.random.key(int(inner))
        if tag == "float":
            return float(inner)
        if tag in ("tuple", "list"):
            made = [decode_arg(v) for v in inner]
            return tuple(made) if tag == "tuple" else made
        if tag == "dict":
            return {k: decode_arg(v) for k, v in inner.items()}
    return data


def _load(text: str) -> np.ndarray:
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


def collect(
    requests: list[dict], namespace: dict, time_limit: float | None = 30.0
) -> list:
    """Answer each request with plain data: ``{"value": ...}``, ``{"exported": ...}``,
    ``{"text": ...}`` or ``{"error": ..., "line": ...}`` when the answer raised.
    ``time_limit`` holds for each request (None: the caller keeps the time)."""
    return [_answer(r, namespace, time_limit) for r in requests]


def _answer(request: dict, namespace: dict, time_limit: float | None) -> dict:
    name = request.get("answer", "")
    if name and name not in namespace:
        return {"missing": name}
    answer = namespace.get(name)
    if answer is NotImplemented:
        return {"missing": name, "placeholder": True}
    try:
        with limit(time_limit):
            return KINDS[request["kind"]](answer, request)
    except OutOfTime:
        if time_limit is None:  # a whole check's limit: its caller reports it
            raise
        return {"error": f"took longer than {time_limit:g} s and was stopped"}
    except NotImplementedError:
        return {"error": "NotImplementedError", "placeholder": True}
    except Exception as err:  # the student's error is evidence too
        return {"error": _one_line(err), "line": _student_line(err)}


def _call(answer, request: dict) -> dict:
    fn = jax.jit(answer) if request.get("jit") else answer
    result = fn(*[decode_arg(a) for a in request.get("args", [])])
    for method, args in request.get("then", []):
        result = getattr(result, method)(*[decode_arg(a) for a in args])
    if request.get("wait", True):
        result = jax.block_until_ready(result) if _has_arrays(result) else result
    return {"value": encode(result)}


def _has_arrays(tree) -> bool:
    return any(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(tree))


def _export(answer, request: dict) -> dict:
    """``jax.export`` of the answer itself: only a ``jax.jit`` function exports."""
    args = [decode_arg(a) for a in request.get("args", [])]
    platforms = request.get("platforms")
    exported = jax.export.export(answer, platforms=platforms)(*args)
    return {"exported": base64.b64encode(exported.serialize()).decode()}


def _lower(answer, request: dict) -> dict:
    """The program's StableHLO text (a host callback cannot be exported)."""
    fn = answer if hasattr(type(answer), "lower") else jax.jit(answer)
    text = fn.lower(*[decode_arg(a) for a in request.get("args", [])]).as_text()
    return {"text": text[:TEXT_LIMIT]}


def _probe(answer, request: dict) -> dict:
    from jitbook.evidence import probes

    found = getattr(probes, request["probe"])
    return {"value": encode(found(answer, *map(decode_arg, request.get("args", []))))}


KINDS: dict[str, Callable] = {
    "call": _call,
    "export": _export,
    "lower": _lower,
    "probe": _probe,
}


class OutOfTime(BaseException):
    """BaseException: a student's ``except Exception`` cannot swallow it."""


@contextlib.contextmanager
def limit(seconds: float | None):
    """Stop the block after ``seconds`` (in the main thread; elsewhere no limit): one
    home for the time limit of a request here and of a whole check (``exercises``)."""
    import threading

    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(*_):
        raise OutOfTime()

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _one_line(err: BaseException) -> str:
    """``TypeError: first line``, going on past a first line that ends in a colon."""
    from jitbook.errors import error_line

    return error_line(err)[:600]


def _student_line(err: BaseException) -> str:
    """Where the student's code raised: its last frame outside libraries."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if not any(p in f.filename for p in ("site-packages", "/lib/python", "jitbook"))
    ]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f"your line {frame.lineno}{code}"


def show(requests: dict[str, list[dict]], time_limit: float = 30.0) -> None:
    """The grader's collector cell: answer each exercise's requests from the
    notebook's names and display the evidence under its own MIME type (the grader
    reads nothing else of the notebook's outputs)."""
    from IPython.display import display

    import __main__

    names = vars(__main__)
    evidence = {id: collect(asked, names, time_limit) for id, asked in requests.items()}
    shown = {MIME: evidence, "text/plain": f"evidence for {len(evidence)} exercises"}
    display(shown, raw=True)
