"""Exercises of the chapter "Static arguments and compiling again": each is judged on
the compiled program (what stays an input, what it computes on the grader's inputs)
or on plain values, never on a count a student's process reports, except where
padding happens outside any program."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.evidence import read

from . import Wrong, _failed_message, ask, exercise, expect, judge


def _sgd_step(w, x, y, lr):
    """The chapter's ``sgd_step``: one gradient step of least squares with learning rate
    ``lr``."""
    grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - lr * grad


def _program(item, request: dict, argument: str, kind: str = "float32"):
    """The exported program, or a message saying why ``argument`` could not stay an
    input of it (jit holds it static) or why the export failed."""
    if not isinstance(item, read.Failed):
        return item
    if item.missing or item.placeholder or "ShapeDtypeStruct" not in item.message:
        raise Wrong(_failed_message(request, item), details=item.message)
    raise Wrong(
        f"{request['answer']} could not be compiled with {argument} as a traced "
        f"{kind} scalar: jit treats {argument} as static, so it is a constant of each "
        f"program rather than an input; pass {argument} as an ordinary (traced) "
        "argument of jax.jit.",
        details=item.message,
    )


@exercise("recompilation.lr-traced", "train_step", "static vs traced arguments", 1)
def _lr_traced(rng):
    """A learning rate is a number that changes, not a choice of program: let jit trace
    it.
    """
    rows, cols = int(rng.integers(8, 40)), int(rng.integers(2, 8))
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    y = rng.normal(size=rows).astype(np.float32)
    w = rng.normal(size=cols).astype(np.float32)
    shapes = [ask.spec((cols,)), ask.spec((rows, cols)), ask.spec((rows,))]
    asked = ask.export(*shapes, ask.spec(()), answer="train_step", allow_error=True)
    (program,) = yield [asked]
    program = _program(program, asked, "lr")
    expect(
        len(program.in_avals) == 4 and program.in_avals[3].shape == (),
        "lr stays an input of the one compiled program",
        "the exported train_step does not take (w, x, y, lr) as its four inputs; keep "
        "the signature of sgd_step.",
    )
    for lr in np.round(rng.uniform(0.001, 0.5, size=2), 4).astype(np.float32):
        got = program(w, x, y, lr)
        expect(
            judge.agrees(got, _sgd_step(w, x, y, lr), atol=1e-5),
            f"one program, run with lr={lr:g}, takes sgd_step's step",
            f"the compiled train_step, run with lr={lr:g} on a {rows} x {cols} "
            "problem, does not give sgd_step(w, x, y, lr).",
        )


def _clip_reference(v: np.ndarray, max_norm: float) -> np.ndarray:
    norm = np.linalg.norm(v.astype(np.float64))
    return v * min(1.0, max_norm / norm) if norm > 0 else v


def _rounded(values) -> list[float]:
    return [round(float(v), 4) for v in np.ravel(values)]


@exercise("recompilation.clip-norm", "clip_norm", "jnp.where instead of Python if", 2)
def _clip_norm(rng):
    """Compute both outcomes and choose with jnp.where(norm > max_norm, scaled, v);
    keep max_norm traced.
    """
    size = int(rng.integers(3, 12))
    v = rng.normal(size=size).astype(np.float32)
    asked = ask.export(
        ask.spec((size,)), ask.spec(()), answer="clip_norm", allow_error=True
    )
    (program,) = yield [asked]
    program = _program(program, asked, "max_norm")
    norm = float(np.linalg.norm(v))
    for factor in (0.3, 0.8, 1.5, 4.0):
        limit = np.float32(round(norm * factor * float(rng.uniform(0.95, 1.05)), 3))
        got, want = program(v, limit), _clip_reference(v, float(limit))
        side = "below" if limit < norm else "above"
        expect(
            judge.agrees(got, want, atol=1e-5),
            f"one program, max_norm={limit:g} ({side} the norm): right result",
            f"the compiled clip_norm, run with max_norm={limit:g} on a vector of norm "
            f"{norm:.4g}, returned {_rounded(got)}, expected {_rounded(want)}.",
        )


@exercise("recompilation.buckets", "pad_to_bucket", "padding to buckets", 2)
def _buckets(rng):
    """Pad with NumPy (np.zeros, then copy x in) to the next power of two outside jit;
    pass the true length to the jitted bucket_mean, which divides by it.
    """
    lengths = [1, 200, *map(int, rng.integers(1, 201, size=58))]
    xs = [rng.normal(size=n).astype(np.float32) for n in lengths]
    sizes = sorted(int(s) for s in rng.choice([16, 32, 64, 128, 256], 2, replace=False))
    exports = [
        ask.export(
            ask.spec((s,)),
            ask.spec((), "int32"),
            answer="bucket_mean",
            allow_error=True,
        )
        for s in sizes
    ]
    asked = [ask.probe("compiles_during", xs), *map(ask.call, map(ask.numpy, xs))]
    got = yield asked + exports
    compiles, padded, programs = got[0], got[1 : 1 + len(xs)], got[1 + len(xs) :]
    programs = [
        _program(p, r, "n", "int32") for p, r in zip(programs, exports, strict=True)
    ]
    shapes = [_padding_problem(x, out) for x, out in zip(xs, padded, strict=True)]
    expect(
        not any(shapes),
        f"{len(lengths)} sequences padded: x, then zeros, and len(x)",
        next(filter(None, shapes), ""),
    )
    buckets = sorted({len(out[0]) for out in padded})
    expect(
        len(buckets) <= 10,
        f"{len(lengths)} lengths pad to {len(buckets)} shapes (at most 10)",
        f"{len(lengths)} lengths between 1 and 200 were padded to {len(buckets)} "
        f"different lengths ({', '.join(map(str, buckets[:12]))}, ...): each one is "
        "a compile of bucket_mean; pad to the next power of two instead.",
    )
    for size, program in zip(sizes, programs, strict=True):
        expect(
            len(program.in_avals) == 2 and program.in_avals[1].shape == (),
            "the length stays an input of bucket_mean's program",
            "the exported bucket_mean does not take (padded, n) as its two inputs; "
            "pass the true length as a traced argument, not a static one.",
        )
        for n in sorted({size, int(rng.integers(1, size)), int(rng.integers(1, size))}):
            values = rng.normal(size=n).astype(np.float32)
            array = np.zeros(size, np.float32)
            array[:n] = values
            mean = judge.number(program(array, np.int32(n)), "bucket_mean")
            want = float(np.mean(values.astype(np.float64)))
            expect(
                abs(mean - want) <= 1e-5 * max(1.0, abs(want)),
                f"bucket_mean at {size}, n={n}: the mean of the first n entries",
                f"bucket_mean on {n} values padded with zeros to {size} returned "
                f"{mean:.6g}, the mean is {want:.6g}; divide by the true length n, "
                "not the padded one.",
            )
    expect(
        compiles == 0,
        "pad_to_bucket compiles nothing (pads with NumPy)",
        f"pad_to_bucket compiled {compiles} XLA programs over {len(lengths)} "
        "lengths: eager jnp operations compile once per shape too; pad with NumPy "
        "(np.zeros, then padded[:len(x)] = x).",
        self_reported=True,
    )


def _padding_problem(x: np.ndarray, out) -> str:
    """What is wrong with pad_to_bucket's answer for ``x`` ("" if nothing)."""
    if not (
        type(out) is tuple
        and len(out) == 2
        and isinstance(out[0], np.ndarray)
        and out[0].ndim == 1
        and type(out[1]) is int
    ):
        return (
            f"pad_to_bucket returned {type(out).__name__}; return a pair: the padded "
            "1-D array and the true length len(x) as an int."
        )
    array, length, n = *out, len(x)
    if length == n and len(array) >= n and np.array_equal(array[:n], x):
        return "" if not np.any(array[n:]) else "pad with zeros: bucket_mean sums them."
    return (
        f"for a sequence of length {n}, pad_to_bucket returned an array of length "
        f"{len(array)} and length {length}; the array must start with x, the rest "
        "zeros, and the length must be len(x)."
    )
