"""Exercises of the chapter "Static arguments and compiling again": each checker counts
the answer's compiles."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles, fresh_jit
from jitbook.chapters import recompilation

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _sgd_step(w, x, y, lr):
    """The chapter's ``sgd_step``: one gradient step of least squares with learning rate
    ``lr``."""
    grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - lr * grad


def _poly_eval(coeffs, x):
    """The chapter's ``poly_eval``: the polynomial with ``coeffs`` (highest power
    first), unrolled."""
    y = jnp.zeros_like(x)
    for c in coeffs:
        y = y * x + c
    return y


@exercise("recompilation.lr-traced", "train_step", "static vs traced arguments", 1)
def _lr_traced(answer):
    """A learning rate is a number that changes, not a choice of program: let jit trace
    it.
    """
    judge.expect_jitted(answer, "train_step")
    rng = np.random.default_rng(0)
    x, y, w = (
        jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((16, 3), (16,), (3,))
    )
    schedule = [0.1, 0.05, 0.01]
    with judge.compiles_of(answer) as counted:
        got = [judge.array(call_answer(answer, w, x, y, lr)) for lr in schedule]
    for lr, g in zip(schedule, got, strict=True):
        expect(
            judge.agrees(g, _sgd_step(w, x, y, lr), atol=1e-6),
            f"lr={lr}: same step as sgd_step",
            f"with lr={lr} your step differs from sgd_step(w, x, y, lr).",
        )
    judge.expect_compiles(
        counted,
        1,
        "compiles at most once for three learning rates",
        f"it compiled {{count}} times for {len(schedule)} learning rates {schedule}: "
        "a static lr makes one program per value; pass it as a traced argument.",
    )


def _clip_reference(v: np.ndarray, max_norm: float) -> np.ndarray:
    norm = np.linalg.norm(v.astype(np.float64))
    return v * min(1.0, max_norm / norm) if norm > 0 else v


@exercise("recompilation.clip-norm", "clip_norm", "jnp.where instead of Python if", 2)
def _clip_norm(answer):
    """Compute both outcomes and choose with jnp.where(norm > max_norm, scaled, v);
    keep max_norm traced.
    """
    judge.expect_jitted(answer, "clip_norm")
    v = jnp.asarray([3.0, 4.0, 0.0], jnp.float32)  # norm 5
    limits = [1.0, 2.5, 10.0]
    with judge.compiles_of(answer) as counted:
        got = [judge.array(call_answer(answer, v, m)) for m in limits]
    for m, g in zip(limits, got, strict=True):
        want = _clip_reference(np.asarray(v), m)
        expect(
            judge.agrees(g, want),
            f"max_norm={m}: right result",
            f"clip_norm([3, 4, 0], {m}) returned {g.tolist()}, expected "
            f"{want.tolist()}.",
        )
    judge.expect_compiles(
        counted,
        1,
        "compiles at most once for three limits",
        "it compiled {count} times for 3 values of max_norm: it must be traced, "
        "not static.",
    )


@exercise("recompilation.buckets", "padded_mean", "padding to buckets", 2)
def _buckets(answer):
    """Pad with NumPy to the next power of two outside jit; pass the true length (or a
    mask) to the jitted part, which divides by it.
    """
    judge.expect_function(answer, "padded_mean")
    lengths = recompilation.stream_lengths(60, 200, seed=3)
    rng = np.random.default_rng(4)
    limit = 10
    with count_compiles() as log:
        for n in lengths:
            x = rng.normal(size=n).astype(np.float32)
            out = call_answer(answer, x)
            if not judge.is_array(out):
                raise Wrong(
                    f"padded_mean returned a {type(out).__name__}, not a jax.Array: "
                    "the mean must come from a jitted JAX function (NumPy only pads), "
                    "since the exercise is about how often that function compiles."
                )
            got = judge.number(out, "padded_mean")
            want = float(np.mean(x.astype(np.float64)))
            if abs(got - want) > 1e-5:
                raise Wrong(
                    f"for a sequence of length {n} padded_mean returned {got:.6g}, the "
                    f"mean is {want:.6g}; "
                    f"divide by the true length, not the padded one."
                )
            if log.count > limit:
                names = sorted(set(log.compiles))
                raise Wrong(
                    f"after {lengths.index(n) + 1} lengths it had already compiled "
                    f"{log.count} times "
                    f"(programs: {', '.join(names)}); pad to a few bucket sizes, and "
                    "pad with NumPy: "
                    f"eager jnp operations compile once per shape too."
                )
    expect(
        log.count <= limit,
        f"right means for {len(lengths)} lengths, with {log.count} compiles "
        f"(at most {limit})",
        f"it compiled {log.count} times; at most {limit} allowed.",
    )


@exercise("recompilation.static-coeffs", "as_static", "hashable static arguments", 2)
def _static_coeffs(answer):
    """A static argument must be hashable and compare equal when it means the same
    thing: a tuple of floats.
    """
    x = jnp.linspace(-1.0, 1.0, 5)
    evaluate = fresh_jit(_poly_eval, static_argnums=0)
    with judge.compiles_of(evaluate) as counted:
        for coeffs in ([1.0, 2.0, 3.0], np.array([1.0, 2.0, 3.0])):
            static = call_answer(answer, coeffs)
            try:
                got = evaluate(static, x)
            except (TypeError, ValueError) as err:
                raise Wrong(
                    f"jit refused as_static({coeffs!r}) as a static argument: "
                    f"{error_line(err)}"
                ) from None
            expect(
                judge.agrees(got, np.polyval([1.0, 2.0, 3.0], np.asarray(x))),
                f"as_static({type(coeffs).__name__}) evaluates 1x^2 + 2x + 3",
                f"evaluating as_static({coeffs!r}) gave {np.asarray(got).tolist()}.",
            )
    judge.expect_compiles(
        counted,
        1,
        "a list and an array of the same coefficients share one compile",
        "the same coefficients, once from a list and once from an array, compiled "
        "{count} times: equal coefficients must give equal, equally hashed static "
        "values.",
    )
    other = evaluate(call_answer(answer, [0.5, -1.0]), x)
    expect(
        judge.agrees(other, 0.5 * np.asarray(x) - 1.0),
        "different coefficients give a new, right result",
        f"as_static([0.5, -1.0]) evaluated to {np.asarray(other).tolist()}: a stale "
        "program was reused.",
    )
