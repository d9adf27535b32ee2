"""PyTorch's tracing JIT set beside `jax.jit`: four ordinary Python functions, what
`jax.jit` does with each as written, and JAX's way out for each, measured here (the
PyTorch side is quoted from its documentation: PyTorch is not installed with the book).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jitbook.cache import count_compiles, fresh_jit
from jitbook.chapters import tracing
from jitbook.errors import error_line, raised
from jitbook.programs import count_equations

TORCH_TRACE_DOCS = "https://pytorch.org/docs/stable/generated/torch.jit.trace.html"


class Scale:
    """A plain class holding an array: not a pytree, so not a valid jit argument."""

    def __init__(self, factor: jax.Array) -> None:
        self.factor = factor


class ScaleTree(NamedTuple):
    """The same data as a NamedTuple: a pytree, whose array jit traces."""

    factor: jax.Array


def scaled(scale, x: jax.Array) -> jax.Array:
    """``x`` times the object's ``factor``."""
    return scale.factor * x


def mean_by_size(x: jax.Array) -> jax.Array:
    """The mean, dividing by ``x.shape[0]``: a Python int while tracing."""
    return x.sum() / x.shape[0]


def _compiles(calls) -> int:
    with count_compiles() as log:
        for call in calls:
            jax.block_until_ready(call())
    return log.count


def four_functions(x: jax.Array) -> dict[str, dict]:
    """What ``jax.jit`` does with four functions as written, and with JAX's way out.

    Taught in Tracing: what jit sees, PyTorch's tracing JIT, and JAX's ways out.
    """
    ts = (1.0, -1.0)
    with count_compiles() as refused:
        branch_error = raised(jax.jit(tracing.sin_or_cos), x, 1.0)
    cond = fresh_jit(tracing.sin_or_cos_cond)
    loops = {
        name: [
            count_equations(jax.make_jaxpr(fn, static_argnums=1)(x, n)) for n in (5, 50)
        ]
        for name, fn in (
            ("python", tracing.python_loop),
            ("fori", tracing.fori_version),
        )
    }
    sizes = [jnp.arange(n, dtype=jnp.float32) for n in (3, 4, 5)]
    by_size = fresh_jit(mean_by_size)
    trees = [ScaleTree(jnp.asarray(f)) for f in (2.0, 3.0)]
    by_tree = fresh_jit(scaled)
    return {
        "branch on a value": {
            "as written": error_line(branch_error),
            "compiled before the error": refused.count,
            "way out compiles": _compiles([lambda t=t: cond(x, t) for t in ts]),
            "way out right": all(
                bool(jnp.allclose(cond(x, t), tracing.sin_or_cos(x, t))) for t in ts
            ),
        },
        "Python loop": {
            "as written": loops["python"],
            "way out": loops["fori"],
        },
        "size read in Python": {
            "compiles": _compiles([lambda v=v: by_size(v) for v in sizes]),
            "right": all(float(by_size(v)) == float(v.mean()) for v in sizes),
        },
        "class argument": {
            "as written": error_line(
                raised(jax.jit(scaled), Scale(jnp.asarray(2.0)), x)
            ),
            "way out compiles": _compiles([lambda s=s: by_tree(s, x) for s in trees]),
            "way out right": all(
                bool(jnp.allclose(by_tree(s, x), s.factor * x)) for s in trees
            ),
        },
    }


def comparison_rows(facts: dict[str, dict]) -> list[dict]:
    """The section's table: PyTorch's tracer as documented, ``jax.jit`` measured."""
    branch, loop = facts["branch on a value"], facts["Python loop"]
    size, tree = facts["size read in Python"], facts["class argument"]
    return [
        {
            "the function": "`if t > 0:` on an argument",
            "torch.jit.trace (documented)": "records the branch the example input took "
            "and runs that graph on any input",
            "jax.jit, as written": branch["as written"].split(":")[0]
            + ", at the first "
            f"call ({branch['compiled before the error']} compiles)",
            "JAX's way out, measured": f"`lax.cond`: {branch['way out compiles']} "
            f"compile for t = 1 and -1, both right: {branch['way out right']}",
        },
        {
            "the function": "a Python `for` loop, n turns",
            "torch.jit.trace (documented)": "records no loop: the operations of the "
            "turns the example ran",
            "jax.jit, as written": f"unrolled: {loop['as written'][0]} equations at "
            f"n = 5, {loop['as written'][1]} at n = 50",
            "JAX's way out, measured": f"`lax.fori_loop`: {loop['way out'][0]} "
            f"equations at n = 5, {loop['way out'][1]} at n = 50",
        },
        {
            "the function": "divides by `x.shape[0]`",
            "torch.jit.trace (documented)": "one graph, run on other shapes if its "
            "operations support them",
            "jax.jit, as written": f"traced again per shape: {size['compiles']} "
            f"compiles for 3 shapes, all right: {size['right']}",
            "JAX's way out, measured": "none needed; pad to a few sizes to bound the "
            "compiles",
        },
        {
            "the function": "takes an object of a plain class",
            "torch.jit.trace (documented)": "made for tensors and lists, dicts and "
            "tuples of tensors",
            "jax.jit, as written": tree["as written"].split(":")[0],
            "JAX's way out, measured": "a NamedTuple (a pytree): "
            f"{tree['way out compiles']} compile for two values, both right: "
            f"{tree['way out right']}",
        },
    ]
