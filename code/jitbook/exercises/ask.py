"""What a checker asks of an answer, as plain data the student's kernel answers.

A checker yields one list of requests and gets back, in the same order, what each
produced: a value copied out as builtin types and NumPy arrays (``call``, ``probe``),
an exported program it can inspect and run on its own inputs (``export``), or a
program's text (``lower``). Inputs are drawn by the checker from the ``rng`` it is
given, so a grader draws them per student at grading time.

``probe`` answers come from code that runs beside the student's (a compile count,
whether a result was waited on): a checker marks what it concludes from them
``self_reported``.
"""

import numpy as np

from jitbook.evidence.collect import encode


class _Tagged(dict):
    """An argument the collector builds itself (a shape, a key, a NumPy array)."""


def spec(shape, dtype="float32") -> _Tagged:
    """A shape and dtype to export or lower at (``jax.ShapeDtypeStruct``)."""
    return _Tagged(spec=[list(shape), str(np.dtype(dtype))])


def key(seed: int) -> _Tagged:
    """``jax.random.key(seed)``, made in the kernel."""
    return _Tagged(key=int(seed))


def numpy(array) -> _Tagged:
    """A NumPy array passed as it is (plain arrays arrive as JAX arrays)."""
    return _Tagged(numpy=encode(np.asarray(array))["npy"])


def _arg(value):
    return dict(value) if isinstance(value, _Tagged) else encode(value)


def _request(kind: str, args, answer: str | None, **more) -> dict:
    found = {"kind": kind, "args": [_arg(a) for a in args], **more}
    return found if answer is None else {**found, "answer": answer}


def call(
    *args,
    jit: bool = False,
    then: tuple = (),
    answer: str | None = None,
    allow_error: bool = False,
) -> dict:
    """The answer called on ``args`` (``jit``: through ``jax.jit``), then each
    ``(method, args)`` of ``then`` called on the result; its result copied out."""
    chain = [[name, [_arg(a) for a in more]] for name, more in then]
    return _request("call", args, answer, jit=jit, then=chain, allow_error=allow_error)


def export(
    *args, platforms=None, answer: str | None = None, allow_error: bool = False
) -> dict:
    """``jax.export.export(answer)(*args)``, serialized: the answer must be jitted."""
    more = {"platforms": list(platforms)} if platforms else {}
    return _request("export", args, answer, allow_error=allow_error, **more)


def lower(*args, answer: str | None = None, allow_error: bool = False) -> dict:
    """The answer's StableHLO text at ``args`` (host callbacks included)."""
    return _request("lower", args, answer, allow_error=allow_error)


def probe(
    name: str, *args, answer: str | None = None, allow_error: bool = False
) -> dict:
    """A probe of ``jitbook.evidence.probes`` run on the answer: self-reported."""
    return _request("probe", args, answer, probe=name, allow_error=allow_error)
