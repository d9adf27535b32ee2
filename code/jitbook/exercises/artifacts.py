"""Exercises of the chapter "Keeping, reusing and shipping compiled programs": donation,
export, compile cost.

Each is judged on the answer's exported program, read and run here on inputs drawn
per student: donation, a symbolic batch dimension, a rolled loop and a parameter
that stays an input all show in the program itself.
"""

import re

import numpy as np

from jitbook.evidence import read

from . import Wrong, ask, exercise, expect, judge

_CONSTANT = re.compile(r"stablehlo\.constant dense<[^>]*>\s*:\s*tensor<([0-9x]+)x\w+>")


def _largest_constant(text: str) -> int:
    """Elements of the program's largest array constant (0 when it has none)."""
    sizes = [
        int(np.prod([int(d) for d in s.split("x")])) for s in _CONSTANT.findall(text)
    ]
    return max(sizes, default=0)


@exercise("artifacts.donate-update", "donating_update", "buffer donation", 1)
def _donate_update(rng):
    """jax.jit(artifacts.sgd_update, donate_argnums=0) (or donate_argnames='state')
    hands the state's memory to the result.
    """
    shape = (int(rng.integers(8, 200)), int(rng.integers(2, 50)))
    state = rng.normal(size=shape).astype(np.float32)
    grad = rng.normal(size=shape).astype(np.float32)
    (program,) = yield [ask.export(ask.spec(shape), ask.spec(shape))]
    head = program.text.split("func.func public @main", 1)[-1].split("{\n", 1)[0]
    params = head.split(") ->", 1)[0].split("%arg")[1:]
    donated = [
        i
        for i, p in enumerate(params)
        if "tf.aliasing_output" in p or "jax.buffer_donor" in p
    ]
    expect(
        donated == [0],
        "the program hands the state's buffer to its result",
        "the exported program donates "
        + (f"argument(s) {donated}" if donated else "no argument")
        + ": donate argument 0 (the state), and only it, e.g. "
        "jax.jit(artifacts.sgd_update, donate_argnames='state').",
    )
    got = program(state, grad)
    expect(
        judge.agrees(got, state - np.float32(0.1) * grad, atol=1e-5),
        "computes the same step as sgd_update",
        f"on a {shape[0]} x {shape[1]} state its result is not sgd_update(state, grad) "
        "= state - 0.1 * grad.",
    )


@exercise("artifacts.any-batch", "exported_predict", "shape-polymorphic export", 2)
def _any_batch(rng):
    """export.export(jax.jit(artifacts.predict))(weights_spec,
    artifacts.batch_spec(3)): a symbolic batch dimension from export.symbolic_shape.
    """
    (shipped,) = yield [ask.probe("serialized")]
    if shipped["bytes"] is None:
        raise Wrong(
            f"exported_predict is a {shipped['type']}; build it with "
            "export.export(jax.jit(artifacts.predict))(...)."
        )
    try:
        program = read.Program(np.asarray(shipped["bytes"], np.uint8).tobytes())
    except Exception as err:  # bytes that are not an exported program
        raise Wrong(f"its serialized bytes could not be loaded back ({err}).") from None
    w = rng.normal(size=(3, 2)).astype(np.float32)
    for batch in (1, int(rng.integers(2, 16)), int(rng.integers(17, 300))):
        x = rng.normal(size=(batch, 3)).astype(np.float32)
        try:
            got = program(w, x)
        except Exception as err:  # the export refused this batch size
            raise Wrong(
                f"calling it with a batch of {batch} raised "
                f"{type(err).__name__}: {str(err).splitlines()[0][:200]}; export with "
                "a symbolic batch dimension (artifacts.batch_spec(3))."
            ) from None
        expect(
            judge.agrees(got, np.tanh(x.astype(np.float64) @ w), atol=1e-5),
            f"batch of {batch}: same result as predict",
            f"for a batch of {batch} the result differs from predict(w, x) = "
            "tanh(x @ w).",
        )


def _damped(x: np.ndarray, n: int) -> np.ndarray:
    """The reference: ``artifacts.unrolled_steps`` in float32 NumPy."""
    for _ in range(n):
        x = (np.sin(x) * np.float32(0.99)).astype(np.float32)
    return x


@exercise("artifacts.scan-loop", "damped_steps", "compile cost of loops", 2)
def _scan_loop(rng):
    """Write the loop as jax.lax.scan (or fori_loop) so the body is traced once,
    whatever n is; jit it (n static or traced).
    """
    size = int(rng.integers(3, 40))
    short, long = int(rng.integers(5, 20)), int(rng.integers(600, 1200))
    x = rng.uniform(-1.5, 1.5, size).astype(np.float32)
    programs = yield [ask.export(ask.spec((size,)), n) for n in (short, long)]
    for n, program in zip((short, long), programs, strict=True):
        args = (x,) if len(program.in_avals) == 1 else (x, np.int32(n))
        expect(
            judge.agrees(program(*args), _damped(x, n), atol=1e-4),
            f"n={n}: same result as unrolled_steps",
            f"damped_steps(x, {n}) differs from artifacts.unrolled_steps(x, {n}).",
        )
    small, large = (sum(p.ops().values()) for p in programs)
    expect(
        large <= small + 2 and programs[1].ops()["while"] >= 1,
        f"its program is one loop, as long for n={long} as for n={short} ({large} and "
        f"{small} operations)",
        f"its program grows with n: {small} operations for n={short}, {large} for "
        f"n={long}; the loop is unrolled. Keep it rolled with lax.fori_loop or "
        "lax.scan.",
    )


@exercise("artifacts.table-argument", "apply_weights", "constants versus arguments", 2)
def _table_argument(rng):
    """Take the weights as an argument of the jitted function instead of closing over
    them.
    """
    rows, cols = int(rng.integers(16, 80)), int(rng.integers(16, 80))
    (program,) = yield [ask.export(ask.spec((rows, cols)), ask.spec((cols,)))]
    kept = program.exported.module_kept_var_idx
    baked = _largest_constant(program.text)
    expect(
        0 in kept and baked < rows * cols,
        "the weights stay an input of the program, not a constant baked into it",
        f"the exported program ignores its weights argument and carries a constant of "
        f"{baked} numbers: the weights are closed over, not passed."
        if 0 not in kept
        else f"the program carries a constant of {baked} numbers: a weight matrix is "
        "baked in; pass it as an argument.",
    )
    x = rng.normal(size=cols).astype(np.float32)
    weights = [rng.normal(size=(rows, cols)).astype(np.float32) for _ in range(2)]
    expect(
        all(
            judge.agrees(program(w, x), w.astype(np.float64) @ x, atol=1e-3)
            for w in weights
        ),
        "one program computes weights @ x for two new weight matrices",
        f"for new {rows} x {cols} weight matrices the program does not compute "
        "weights @ x.",
    )
