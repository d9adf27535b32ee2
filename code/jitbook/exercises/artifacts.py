"""Exercises of the chapter "Keeping, reusing and shipping compiled programs": donation,
export, compile cost.

Checkers compile and call the answer on their own arrays; they never change the
student's objects or caches.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jitbook import programs
from jitbook.chapters import artifacts

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _compile(answer, *args):
    try:
        return answer.trace(*args).lower().compile()
    # the student's function failed to trace or compile: say so in plain words
    except Exception as err:
        raise Wrong(f"compiling your function raised {error_line(err)}") from None


@exercise("artifacts.donate-update", "donating_update", "buffer donation", 1)
def _donate_update(answer):
    """jax.jit(artifacts.sgd_update, donate_argnums=0) (or donate_argnames='state')
    hands the state's memory to the result.
    """
    judge.expect_jitted(answer, "donating_update")
    state, grad = jnp.ones((256, 256)), jnp.full((256, 256), 2.0)
    memory = _compile(answer, state, grad).memory_analysis()
    expect(
        memory.alias_size_in_bytes >= state.nbytes,
        "memory_analysis shows the state's bytes aliased to the output",
        f"memory_analysis() reports {memory.alias_size_in_bytes} aliased bytes; "
        f"donating the {state.nbytes}-byte "
        "state would alias all of them. Donate argument 0 (the state), not the "
        "gradient.",
    )
    got = judge.array(call_answer(answer, state, grad), "donating_update")
    judge.expect_agrees(
        got,
        np.full(state.shape, 1.0 - 0.1 * 2.0),
        "computes the same step as sgd_update",
        f"donating_update(ones, 2s) returned {got.ravel()[:1]}, sgd_update gives 0.8.",
    )
    expect(
        state.is_deleted(),
        "the donated state is deleted after the call",
        "after the call the state array is still alive: it was not donated.",
    )


@exercise("artifacts.any-batch", "exported_predict", "shape-polymorphic export", 2)
def _any_batch(answer):
    """export.export(jax.jit(artifacts.predict))(weights_spec,
    artifacts.batch_spec(3)): a symbolic batch dimension from export.symbolic_shape.
    """
    expect(
        type(answer) is export.Exported,
        "is a jax.export.Exported",
        f"exported_predict is a {type(answer).__name__}; build it with "
        "export.export(jax.jit(artifacts.predict))(...).",
    )
    w = jnp.asarray(np.random.default_rng(0).normal(size=(3, 2)), jnp.float32)
    for batch in (1, 7, 64):
        x = jnp.asarray(
            np.random.default_rng(batch).normal(size=(batch, 3)), jnp.float32
        )
        try:
            got = answer.call(w, x)
        except (
            Exception
        ) as err:  # the export refused this batch size: the dimension was not symbolic
            raise Wrong(
                f"calling it with a batch of {batch} raised {error_line(err)}; export "
                "with a symbolic batch dimension."
            ) from None
        expect(
            judge.agrees(got, artifacts.predict(w, x), atol=1e-6),
            f"batch of {batch}: same result as predict",
            f"for a batch of {batch} the result differs from predict.",
        )
    try:
        shipped = export.deserialize(answer.serialize())
    except Exception as err:  # noqa: BLE001 - e.g. a missing serialization dependency, reported in words
        raise Wrong(
            f"it could not be serialized and loaded back: {error_line(err)}"
        ) from None
    expect(
        [str(a) for a in shipped.in_avals] == [str(a) for a in answer.in_avals],
        "survives serialize and deserialize",
        "after serialize/deserialize its input types changed.",
    )


@exercise("artifacts.scan-loop", "damped_steps", "compile cost of loops", 2)
def _scan_loop(answer):
    """Write the loop as jax.lax.scan (or fori_loop) so the body is traced once,
    whatever n is.
    """
    judge.expect_function(answer, "damped_steps")
    x = jnp.linspace(-1.0, 1.0, 8)
    for n in (3, 50):
        got = judge.array(call_answer(answer, x, n), "damped_steps")
        expect(
            judge.agrees(got, artifacts.unrolled_steps(x, n)),
            f"n={n}: same result as unrolled_steps",
            f"damped_steps(x, {n}) differs from artifacts.unrolled_steps(x, {n}).",
        )
    try:
        small, large = (
            programs.count_equations(jax.make_jaxpr(answer, static_argnums=1)(x, n))
            for n in (10, 1000)
        )
    except Exception as err:  # not traceable with a static n
        raise Wrong(
            f"tracing damped_steps(x, n) with n static raised {error_line(err)}"
        ) from None
    expect(
        large <= small + 2,
        f"its program has as many equations for n=1000 as for n=10 ({large} and "
        f"{small})",
        f"its program grows with n: {small} equations for n=10, {large} for n=1000; "
        "the loop is unrolled.",
    )


@exercise("artifacts.table-argument", "apply_weights", "constants versus arguments", 2)
def _table_argument(answer):
    """Take the weights as an argument of the jitted function instead of closing over
    them.
    """
    judge.expect_jitted(answer, "apply_weights")
    rng = np.random.default_rng(1)
    weights = [jnp.asarray(rng.normal(size=(64, 64)), jnp.float32) for _ in range(2)]
    x = jnp.ones(64)
    try:
        jaxpr = answer.trace(
            weights[0], x
        ).jaxpr  # the jitted body's own jaxpr, with its constants
    except Exception as err:  # wrong signature or untraceable body
        raise Wrong(
            f"apply_weights(weights, x) could not be traced: {error_line(err)}"
        ) from None
    baked = sum(np.asarray(c).nbytes for c in jaxpr.consts)
    expect(
        baked < weights[0].nbytes,
        "no weight matrix is baked into the program as a constant",
        f"its program carries {baked} bytes of constants: the weights are closed over, "
        "not passed.",
    )
    with judge.compiles_of(answer) as counted:
        got = [judge.array(call_answer(answer, w, x)) for w in weights]
    right = all(
        judge.agrees(g, w @ x, atol=1e-4) for w, g in zip(weights, got, strict=True)
    )
    expect(
        right, "computes weights @ x", "apply_weights(weights, x) is not weights @ x."
    )
    judge.expect_compiles(
        counted,
        1,
        "two weight matrices, one compile",
        "two weight matrices of the same shape compiled {count} times; the weights "
        "must be a traced argument.",
    )
