"""Exercises of the chapter "jaxprs and the road to XLA"."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook import programs
from jitbook.cache import count_compiles
from jitbook.chapters import jaxprs, tracing

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _affine(a, b):
    return jnp.tanh(a @ b) + 1.0


_TABLE = jnp.arange(12.0).reshape(3, 4)


def _closure(x):
    return x * _TABLE.sum() + 2.0


@exercise("jaxprs.count-equations", "count_equations", "reading a jaxpr", 1)
def _count_equations(answer):
    """jax.make_jaxpr(fn)(*args) returns a jaxpr; its .eqns list holds one entry per
    equation.
    """
    x, m = jnp.ones(3), jnp.ones((3, 3))
    cases = [
        ("x ** 2 + 1", lambda v: v**2 + 1.0, (x,)),
        ("tanh(a @ b) + 1", _affine, (m, m)),
        ("a closure", _closure, (x,)),
        ("fori_loop of 4 steps", lambda v: tracing.fori_version(v, 4), (x,)),
    ]
    for label, fn, args in cases:
        got = judge.number(call_answer(answer, fn, *args), "count_equations")
        jaxpr = jax.make_jaxpr(fn)(*args)
        want = len(jaxpr.eqns)
        if got == len(list(programs.equations(jaxpr))) and got != want:
            raise Wrong(
                f"for {label} you returned {got}, counting the equations inside the "
                "loop body too; "
                f"count only the top level ({want}): the loop is one equation."
            )
        if got == len(str(jaxpr).splitlines()) - 2 and got != want:
            raise Wrong(
                f"for {label} you returned {got}, the number of printed lines; an "
                "equation can span "
                "several lines (dot_general prints its parameters on their own), "
                f"there are {want}."
            )
        expect(
            got == want,
            f"{label}: {want} equations",
            f"for {label} you returned {got!r}, expected {want}.",
        )


@exercise("jaxprs.keep-dtype", "halve", "weak-typed literals", 1)
def _keep_dtype(answer):
    """A Python float is weak-typed: it takes the dtype of the array it meets. A
    jnp.float32 is not.
    """
    for dtype in (jnp.float16, jnp.bfloat16, jnp.float32):
        x = jnp.arange(4, dtype=dtype)
        out = call_answer(answer, x)
        expect(
            judge.is_array(out) and judge.agrees(out, np.arange(4) / 2),
            f"halves {jnp.dtype(dtype).name}",
            f"halve(x) returned {out!r} for x = {np.asarray(x)!r}; expected each "
            "value halved, as a JAX array.",
        )
        expect(
            out.dtype == dtype,
            f"keeps {jnp.dtype(dtype).name}",
            f"for a {jnp.dtype(dtype).name} input the result is {out.dtype}: the "
            "constant you multiply by has "
            f"its own dtype and promotes x; use a Python number, which is weak-typed.",
        )
        prims = programs.stats(answer, x, lower=False).primitives
        expect(
            prims.get("convert_element_type", 0) == 0,
            f"no dtype conversion in the jaxpr ({jnp.dtype(dtype).name})",
            f"for a {jnp.dtype(dtype).name} input the jaxpr converts dtypes "
            "(convert_element_type); "
            f"multiply by a weak-typed Python float instead.",
        )


@exercise("jaxprs.fixed-size", "trajectory", "loops in jaxprs", 2)
def _fixed_size(answer):
    """lax.scan(body, x, length=steps) traces body once; body(carry, _) returns (new
    carry, value to stack).
    """
    x = jnp.linspace(-1.0, 1.0, 5)
    for steps in (3, 30):
        got = judge.array(call_answer(answer, x, steps), "trajectory")
        want, current = [], x
        for _ in range(steps):
            current = jaxprs.update(current)
            want.append(np.asarray(current))
        want = np.stack(want)
        expect(
            judge.agrees(got, want),
            f"stacks the {steps} iterates for {steps} steps",
            f"trajectory(x, {steps}) should have shape {want.shape} and row i equal to "
            "x after i + 1 steps "
            f"of jaxprs.update; got shape {np.shape(got)}"
            + ("" if np.shape(got) != want.shape else " with other values")
            + ".",
        )
    try:
        small, large = (
            programs.stats(answer, x, n, static_argnums=1, lower=False) for n in (3, 30)
        )
    except Exception as err:
        raise Wrong(
            f"tracing trajectory(x, steps) with steps as a Python int raised "
            f"{error_line(err)}"
        ) from None
    expect(
        small.all_equations == large.all_equations,
        "the jaxpr has the same size for 3 and 30 steps",
        f"the jaxpr has {small.all_equations} equations for 3 steps and "
        f"{large.all_equations} for 30: a Python "
        f"loop is unrolled while tracing; use lax.scan.",
    )


@exercise("jaxprs.flops", "flops_of", "compile and cost analysis", 2)
def _flops(answer):
    """jax.jit(fn).trace(*args).lower().compile().cost_analysis() is a dict with a
    'flops' entry.
    """
    cases = [
        (
            "a (8, 16) @ (16, 4) matmul",
            lambda a, b: a @ b,
            (jnp.ones((8, 16)), jnp.ones((16, 4))),
        ),
        ("tanh(a @ b) + 1 on 3x3", _affine, (jnp.ones((3, 3)), jnp.ones((3, 3)))),
        ("x * 2 + 1 on 100 numbers", lambda v: v * 2.0 + 1.0, (jnp.ones(100),)),
    ]
    for label, fn, args in cases:
        got = call_answer(answer, fn, *args)
        if type(got) is dict:
            raise Wrong(
                f"for {label} you returned the whole cost analysis; return its 'flops' "
                "entry as a number."
            )
        got = judge.number(got, "flops_of")
        want = programs.cost_summary(jax.jit(fn).trace(*args).lower().compile())[
            "flops"
        ]
        expect(
            float(got) == want,
            f"{label}: {want:g} flops",
            f"for {label} you returned {got!r}; XLA's cost analysis says {want:g} "
            "flops.",
        )


@exercise("jaxprs.precompile", "precompile", "ahead-of-time compilation", 2)
def _precompile(answer):
    """jax.ShapeDtypeStruct(shape, jnp.float32) stands in for an array when you trace
    and lower.
    """
    shapes = [(2,), (5,), (3, 4)]

    def fresh_step(x):  # a new function each check, so no earlier compilation is reused
        return jaxprs.update(x)

    with count_compiles() as ahead:
        table = call_answer(answer, fresh_step, shapes)
    expect(
        type(table) is dict and set(table) == set(shapes),
        "returns one entry per shape",
        f"precompile returned {type(table).__name__} with keys "
        f"{sorted(table) if type(table) is dict else '-'};"
        f" return a dict from each shape to its compiled function.",
    )
    expect(
        ahead.count >= len(shapes),
        "compiles ahead of time",
        f"only {ahead.count} compilations happened inside precompile for {len(shapes)} "
        "shapes; compile each one "
        f"there, with .trace(...).lower().compile().",
    )
    inputs = {
        shape: jnp.full(shape, 0.3, jnp.float32) for shape in shapes
    }  # made before counting
    with count_compiles() as later:
        outputs = {shape: call_answer(table[shape], x) for shape, x in inputs.items()}
    for shape, x in inputs.items():
        judge.expect_agrees(
            judge.array(outputs[shape], f"the function for {shape}"),
            jaxprs.update(x),
            f"{shape}: right values",
            f"the function for shape {shape} does not compute jaxprs.update.",
            atol=1e-6,
        )
    expect(
        later.count == 0,
        "no compilation when called",
        f"calling the functions compiled {later.count} times; they should be "
        "executables compiled in advance.",
    )
    other = jnp.full((7,), 0.3, jnp.float32)
    with count_compiles() as extra:
        try:
            table[shapes[0]](other)
        # noqa: BLE001 - an executable refuses another shape: what we want
        except Exception:
            refused = True
        else:
            refused = False
    expect(
        refused and extra.count == 0,
        "each entry is an executable for its one shape",
        f"the entry for {shapes[0]} also ran on a (7,) array, compiling for it: it is "
        "a jitted function warmed up, not an executable. Return "
        "jax.jit(fn).trace(...).lower().compile() for each shape.",
    )
