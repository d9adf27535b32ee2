"""Dataclasses as pytrees: what the libraries the 2023 tutorial lists automate, done by
JAX's `register_dataclass` and by an Equinox module, side by side.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jitbook.chapters.methods import EqxLayer
from jitbook.chapters.methods_layers import DataclassLayer
from jitbook.errors import raised


def dataclass_rows(weight: jax.Array) -> list[dict]:
    """For ``DataclassLayer`` (``register_dataclass``) and ``EqxLayer`` (Equinox): is
    it a dataclass, its leaves, whether the static field is in the tree structure, and
    whether assigning a field raises.

    Taught in Classes as pytrees, Dataclass pytrees and the libraries that make
    them.
    """
    rows = []
    for cls in (DataclassLayer, EqxLayer):
        relu, tanh = cls(weight, "relu"), cls(weight, "tanh")
        leaves = jax.tree.leaves(relu)
        assigned = raised(setattr, relu, "weight", -weight)
        rows.append(
            {
                "class": cls.__name__,
                "a dataclass": dataclasses.is_dataclass(relu),
                "leaves": f"{len(leaves)}: weight"
                if len(leaves) == 1 and leaves[0] is weight
                else str(len(leaves)),
                "activation in the structure": jax.tree.structure(relu)
                != jax.tree.structure(tanh),
                "assigning a field": type(assigned).__name__ if assigned else "allowed",
            }
        )
    return rows


def same_leaves(weight: jax.Array) -> bool:
    """True when both classes flatten a layer to the same leaves, in the same order."""
    a, b = DataclassLayer(weight, "relu"), EqxLayer(weight, "relu")
    return all(
        x is y for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    ) and bool(jnp.array_equal(a.predict(weight), b.predict(weight)))
