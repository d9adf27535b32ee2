"""Exercises of the chapter "jit on a GPU": each checker reads the answer's compiled or
lowered program on the CPU (trip count, precision per dot, kernels)."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import gpu

from . import Wrong, call_answer, exercise, expect


def _text(fn, *args, compiled: bool = True) -> str:
    if not hasattr(fn, "lower"):
        raise Wrong(
            f"the answer is a {type(fn).__name__}, not a function compiled by jax.jit "
            "(it has no .lower)."
        )
    try:
        lowered = fn.lower(*args)
        return lowered.compile().as_text() if compiled else lowered.as_text()
    except Exception as err:  # noqa: BLE001  a failed lowering is the student's
        raise Wrong(
            f"jit could not lower your function: {err}".split("\n")[0]
        ) from None


@exercise(
    "gpu.static-trip-count",
    answer="decay",
    topic="static against traced trip counts",
    difficulty=1,
    hint="A fori_loop whose bounds are Python ints at trace time has a known trip "
    "count: make n static (static_argnums) so it is a Python int inside.",
)
def _static_trip_count(answer):
    x = jnp.ones(16, jnp.float32)
    text = _text(answer, x, 50)
    got = np.asarray(call_answer(answer, x, 50))
    want = np.asarray(x) * np.float32(0.999) ** 50
    expect(
        np.allclose(got, want, rtol=1e-5),
        "decays x by 0.999 per iteration, n times",
        "decay(x, 50) is not x * 0.999**50.",
    )
    try:
        count = gpu.trip_count(text)
    except ValueError:
        raise Wrong(
            "the compiled program has no while loop: keep the loop (lax.fori_loop), "
            "so the trip count is something XLA reads."
        ) from None
    expect(
        count == 50,
        "XLA knows the loop runs 50 times",
        "the compiled while loop has no known trip count: n reached the loop as a "
        "traced value. Mark it static when you jit decay.",
    )


@exercise(
    "gpu.one-exact-dot",
    answer="gram_and_step",
    topic="matmul precision for one dot",
    difficulty=2,
    hint="jnp.matmul(a, b, precision='highest') sets the precision of that one "
    "product; a jax.default_matmul_precision block would set both.",
)
def _one_exact_dot(answer):
    rng = np.random.default_rng(0)
    M = jnp.asarray(rng.standard_normal((8, 4)), jnp.float32)
    Omega = jnp.asarray(rng.standard_normal((4, 4)), jnp.float32)
    gram, step = call_answer(answer, M, Omega)
    expect(
        np.allclose(gram, M.T @ M, atol=1e-4)
        and np.allclose(step, M @ Omega, atol=1e-4),
        "returns M^T M and M Omega",
        "gram_and_step(M, Omega) must return (M.T @ M, M @ Omega).",
    )
    lines = [ln for ln in _text(answer, M, Omega, compiled=False).splitlines()]
    found = {}
    for line in lines:
        if "dot_general" in line and "->" in line:
            prec = re.search(r"precision = \[(\w+), (\w+)\]", line)
            shape = re.search(r"->\s*tensor<(\d+(?:x\d+)*)xf32>", line)
            key = shape.group(1) if shape else "?"
            found[key] = prec.group(1) if prec else "DEFAULT"
    expect(
        found.get("4x4") == "HIGHEST",
        "M^T M is computed at precision HIGHEST",
        f"the product M.T @ M has precision {found.get('4x4', 'DEFAULT')}; ask for "
        "'highest' on that one product.",
    )
    expect(
        found.get("8x4") == "DEFAULT",
        "M Omega keeps the default precision",
        f"the product M @ Omega has precision {found.get('8x4')}: only M^T M should "
        "change.",
    )


def _programs() -> list[tuple[str, str]]:
    x = jnp.ones((64, 64), jnp.float32)
    fns = {
        "one elementwise kernel": jax.jit(lambda x: jnp.tanh(x) * 2 + 1),
        "a product and a sum": jax.jit(lambda x: jnp.sum(x @ x, axis=0) + x[0]),
        "a sort between two passes": jax.jit(lambda x: jnp.sort(jnp.exp(x)) - x),
        "a loop of walled kernels": jax.jit(
            lambda x: gpu.scan_unrolled(x, 8, unroll=4, fusable=False)
        ),
    }
    return [(name, fn.lower(x).compile().as_text()) for name, fn in fns.items()]


@exercise(
    "gpu.kernel-count",
    answer="count_fusions",
    topic="kernels in a compiled program",
    difficulty=2,
    hint="In compiled.as_text(), find the block that starts with ENTRY and count its "
    "lines whose instruction is fusion(...).",
)
def _kernel_count(answer):
    for name, text in _programs():
        want = sum(gpu.opcode(ln) == "fusion" for ln in gpu.kernels(text))
        got = call_answer(answer, text)
        expect(
            isinstance(got, (int, np.integer)) and not isinstance(got, bool),
            "returns a whole number",
            f"count_fusions returned a {type(got).__name__}; return an int.",
        )
        expect(
            got == want,
            f"{name}: {want} fusions in the entry computation",
            f"for {name}, count_fusions says {got}; the ENTRY computation has {want} "
            "fusion instructions (count only the ENTRY block, not the fused "
            "computations it calls).",
        )
