"""The examples of the chapter on jaxprs: small functions whose jaxprs show one thing
each.

The tools that take jaxprs apart (``stats``, ``anatomy``, ``walk``) are in
``jitbook.programs``.
"""

import contextlib
import io
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles
from jitbook.errors import error_line, raised

# what log2_with_side_effects appended; trace-time side effects land here
SEEN: list = []


def log2_with_side_effects(x: jax.Array) -> jax.Array:
    """log2 of x that also prints and appends to a global list: neither shows up in the
    jaxpr.

    Taught in jaxprs, What a jaxpr leaves out.
    """
    SEEN.append(x)
    print("running the Python body with", x)
    return jnp.log(x) / jnp.log(2.0)


def by_rank(x: jax.Array) -> jax.Array:
    """Row sums of a matrix, cosine of anything else: a Python branch on a shape,
    decided while tracing.

    Taught in jaxprs, What a jaxpr leaves out.
    """
    if x.ndim == 2:
        return jnp.sum(x, axis=1)
    return jnp.cos(x)


def update(x: jax.Array) -> jax.Array:
    """One iteration of a toy update: three primitives.

    Taught in jaxprs, Reading a jaxpr.
    """
    return jnp.sin(x) * 0.5 + x


def update_f32_constant(x: jax.Array) -> jax.Array:
    """``update`` with its 0.5 as a float32 array constant: strongly typed, so it
    promotes a float16 ``x``.
    """
    return jnp.sin(x) * np.float32(0.5) + x


def scaled_by(k: float) -> Callable[[jax.Array], jax.Array]:
    """A function that captures the Python number ``k``: it enters the jaxpr as a
    literal, not a constant.
    """

    def scale(x: jax.Array) -> jax.Array:
        return x * k

    return scale


def with_closure(table: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """A function that reads ``table`` from its enclosing scope: the array becomes a
    constant of the jaxpr.

    Taught in jaxprs, Constants and literals.
    """

    def project(x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ table)

    return project


def with_argument(x: jax.Array, table: jax.Array) -> jax.Array:
    """The same computation with ``table`` passed in: an input of the jaxpr, not a
    constant."""
    return jnp.tanh(x @ table)


def captured_scalars() -> list[dict]:
    """What a captured scalar becomes in the jaxpr of ``x * c``, for each kind of
    scalar ``c``: a literal in the equation, or a constvar.

    Taught in jaxprs, Constants and literals.
    """
    kinds = {
        "Python float 3.0": 3.0,
        "NumPy scalar np.float32(3.0)": np.float32(3.0),
        "0-d NumPy array np.array(3.0)": np.array(3.0, np.float32),
        "0-d jax.Array jnp.float32(3.0)": jnp.float32(3.0),
        "NumPy array np.ones(3)": np.ones(3, np.float32),
    }
    rows = []
    for name, c in kinds.items():
        jaxpr = jax.make_jaxpr(lambda x, c=c: x * c)(jnp.ones(3))
        operand = jaxpr.eqns[-1].invars[1]
        rows.append(
            {
                "captured": name,
                "becomes": "literal"
                if type(operand).__name__ == "Literal"
                else "constvar",
            }
        )
    return rows


@jax.jit
def inner(x: jax.Array) -> jax.Array:
    """A jitted function that ``outer`` calls: inside another trace it becomes one
    equation."""
    return jnp.sin(x) * 2.0


def outer(x: jax.Array) -> jax.Array:
    """Calls the jitted ``inner``: its jaxpr holds ``inner`` as one ``jit`` equation
    with a jaxpr inside.

    Taught in jaxprs, A jitted function inside another.
    """
    return inner(x) + 1.0


# jax.Inline.JAX_EARLY where it exists; before it, inline=True inlined in the jaxpr
JAX_EARLY = getattr(getattr(jax, "Inline", None), "JAX_EARLY", True)


def sin_twice(x: jax.Array) -> jax.Array:
    """``inner``'s body, to be jitted with ``inline=jax.Inline.JAX_EARLY``."""
    return jnp.sin(x) * 2.0


# tracing copies its equations into the caller's jaxpr, as for many jnp functions
inner_early = jax.jit(sin_twice, inline=JAX_EARLY)


def outer_early(x: jax.Array) -> jax.Array:
    """``outer`` calling ``inner_early``: its jaxpr has no ``jit`` equation.

    Taught in jaxprs, A jitted function inside another.
    """
    return inner_early(x) + 1.0


# --- explorer


def variants(size: int) -> dict[str, tuple[Callable, tuple, tuple[int, ...]]]:
    """Functions of this chapter with arguments to trace them: name -> (function,
    arguments, static_argnums)."""
    x = jnp.linspace(0.0, 1.0, size, dtype=jnp.float32)
    table = jax.random.normal(jax.random.key(3), (size, size))
    return {
        "update, float32": (update, (x,), ()),
        "update, float16": (update, (x.astype(jnp.float16),), ()),
        "update_f32_constant, float16": (
            update_f32_constant,
            (x.astype(jnp.float16),),
            (),
        ),
        "scaled_by(3.0)": (scaled_by(3.0), (x,), ()),
        "outer (calls a jitted inner)": (outer, (x,), ()),
        "with_closure": (with_closure(table), (x[None, :],), ()),
        "with_argument": (with_argument, (x[None, :], table), ()),
    }


def variant_explorer(size: int) -> tuple[list[dict], list[dict]]:
    """Each of ``variants(size)`` walked through trace, lower, compile: its sizes, XLA's
    costs, and the texts.

    Taught in jaxprs, Explore it.
    """
    from jitbook.programs import COSTS, count_equations, walk

    rows, panels = [], []
    for name, (fn, args, static) in variants(size).items():
        road = walk(fn, *args, static_argnums=static, excerpt_lines=14)
        rows.append(
            {
                "variant": name,
                "equations": count_equations(road.stages.jaxpr),
                "StableHLO characters": len(road.stablehlo),
                **{k: road.cost[k] for k in COSTS},
            }
        )
        costs = "\n".join(f"{k}: {road.cost[k]:g}" for k in COSTS)
        panels.append(
            {
                "jaxpr": road.jaxpr_text,
                "StableHLO (excerpt)": road.excerpt(),
                "cost_analysis": costs,
            }
        )
    return rows, panels


def _shown(x):
    jax.debug.print("x = {}", x)
    return x + 1


def _called_back(x):
    jax.debug.callback(lambda v: None, x)
    return x + 1


def _plain(x):
    return x + 1


def no_tracing_rows() -> list[dict]:
    """Warm jitted calls that do not trace, called without and then with
    ``jax.no_tracing``: which does it let through?

    Taught in jaxprs and the road to XLA, Calling an executable with other shapes.
    """
    x = jnp.ones(3)
    committed = jax.device_put(x, jax.devices()[0])
    cases = [
        ("the same array, warm", _plain, x),
        ("a committed array (compiles, no trace)", _plain, committed),
        ("warm, holds jax.debug.print", _shown, x),
        ("warm, holds jax.debug.callback", _called_back, x),
    ]
    rows = []
    for label, fn, arg in cases:
        body_runs = []

        def counted(v, fn=fn, body_runs=body_runs):
            body_runs.append(1)
            return fn(v)

        counted.__name__ = fn.__name__.lstrip("_")
        jitted = jax.jit(counted)
        with contextlib.redirect_stdout(io.StringIO()):  # the debug prints' lines
            jitted(x)  # warm: traced and compiled for the uncommitted array
            with jax.no_tracing(True):  # first, before the call below fills any cache
                err = raised(jitted, arg)
            body_runs.clear()
            with count_compiles() as log:
                jitted(arg)  # the same call, unguarded
            jax.effects_barrier()
        rows.append(
            {
                "call": label,
                "body runs": len(body_runs),
                "compiles": log.count_for(counted.__name__),
                "under no_tracing": error_line(err).split(" at ")[0] if err else "ran",
            }
        )
    return rows
