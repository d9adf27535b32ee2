"""Type hints in jitted code: what `jax.typing.ArrayLike` and `jax.Array` say, and
that `jax.jit` reads neither (the 2023 tutorial's NamedTuple fields are `ArrayLike`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike


def doubled(x: ArrayLike) -> jax.Array:
    """Twice ``x``; its hints say: a caller may pass anything array-like, it returns
    a ``jax.Array``.

    Taught in Jitting methods and classes, Type hints: `ArrayLike` in, `jax.Array` out.
    """
    return x * 2


class Moments(NamedTuple):
    """A state carried by jitted steps: its fields hold ``jax.Array`` after one step."""

    total: jax.Array
    count: jax.Array


@jax.jit
def add_sample(state: Moments, sample: ArrayLike) -> Moments:
    """One jitted step: the state goes in and comes out as a pytree of arrays."""
    return Moments(state.total + sample, state.count + 1)


def hint_rows() -> list[dict]:
    """What reaches ``doubled`` under ``jax.jit`` for arguments its hint allows and one
    it does not (a list), and what comes back."""
    rows = []
    for label, arg in (
        ("NumPy array", np.ones(2, np.float32)),
        ("Python float", 1.5),
        ("list (not ArrayLike)", [1.0, 2.0]),
    ):
        seen: list[tuple[int, bool]] = []

        def spy(x, seen=seen):
            leaves = jax.tree.leaves(x)
            seen.append((len(leaves), all(isinstance(v, jax.Array) for v in leaves)))
            return doubled(x)

        out = jax.jit(spy)(arg)
        rows.append(
            {
                "argument": label,
                "isinstance(arg, ArrayLike)": isinstance(arg, ArrayLike),
                "inside jit": f"{seen[0][0]} leaf, a jax.Array: {seen[0][1]}"
                if seen[0][0] == 1
                else f"{seen[0][0]} leaves, each a jax.Array: {seen[0][1]}",
                "returned": "jax.Array"
                if isinstance(out, jax.Array)
                else f"{type(out).__name__} of {len(out)}",
            }
        )
    return rows


def state_field_types() -> dict[str, list[str]]:
    """The types of a ``Moments`` state's fields before and after one jitted step."""
    start = Moments(np.zeros(2, np.float32), np.int32(0))
    after = add_sample(start, np.ones(2, np.float32))
    return {
        "built from NumPy": [type(v).__name__ for v in start],
        "after one jitted step": [
            "jax.Array" if isinstance(v, jax.Array) else type(v).__name__ for v in after
        ],
    }


def same_program_whatever_the_hint() -> bool:
    """True when ``doubled`` and a copy hinted ``str`` trace to the same jaxpr."""

    def mislabelled(x: str) -> str:
        return x * 2

    arg = jnp.ones(3)
    return str(jax.make_jaxpr(doubled)(arg)) == str(jax.make_jaxpr(mislabelled)(arg))
