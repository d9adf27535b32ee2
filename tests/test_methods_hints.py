"""Methods, the two sections that answer the 2023 tutorial: type hints under jit, and
dataclass pytrees made by JAX or Equinox."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import count_compiles
from jitbook.cache import fresh_jit
from jitbook.chapters import methods_dataclasses, methods_hints
from jitbook.chapters.methods import EqxLayer
from jitbook.chapters.methods_layers import DataclassLayer

WEIGHT = jnp.array([1.0, -2.0, 0.5])


@pytest.mark.claim("sec-methods-hints", "clm-methods-hints-not-read")
def test_jit_reads_no_hint_every_leaf_is_a_jax_array_and_a_list_is_not_refused():
    rows = {r["argument"]: r for r in methods_hints.hint_rows()}
    for label in ("NumPy array", "Python float"):
        assert rows[label]["inside jit"] == "1 leaf, a jax.Array: True"
        assert rows[label]["returned"] == "jax.Array"
    listed = rows["list (not ArrayLike)"]
    assert listed["isinstance(arg, ArrayLike)"] is False
    assert listed["inside jit"] == "2 leaves, each a jax.Array: True"
    assert listed["returned"] == "list of 4"  # x * 2 repeated the list
    assert methods_hints.same_program_whatever_the_hint() is True
    # the tracer itself is a jax.Array (not only the leaves of what comes back)
    seen = []
    jax.jit(lambda x: seen.append(isinstance(x, jax.Array)) or x)(np.ones(2))
    assert seen == [True]


@pytest.mark.claim("sec-methods-hints", "clm-methods-hints-state-fields")
def test_a_state_built_from_numpy_leaves_one_jitted_step_as_jax_arrays():
    types = methods_hints.state_field_types()
    assert types["built from NumPy"] == ["ndarray", "int32"]
    assert types["after one jitted step"] == ["jax.Array", "jax.Array"]
    # also from Python numbers, and the values are right
    after = methods_hints.add_sample(methods_hints.Moments(0.0, 0), 2.5)
    assert all(isinstance(v, jax.Array) for v in after)
    assert float(after.total) == 2.5 and int(after.count) == 1


@pytest.mark.claim("sec-methods-dataclass-libraries", "clm-methods-dataclass-pytrees")
def test_register_dataclass_and_equinox_flatten_a_layer_alike_and_key_on_the_static_field():
    rows = methods_dataclasses.dataclass_rows(WEIGHT)
    assert [r["class"] for r in rows] == ["DataclassLayer", "EqxLayer"]
    for row in rows:
        assert row["a dataclass"] is True and row["leaves"] == "1: weight"
        assert row["activation in the structure"] is True
        assert row["assigning a field"] == "FrozenInstanceError"
    assert methods_dataclasses.same_leaves(WEIGHT)
    x = jnp.array([2.0, 1.0, -4.0])
    for cls in (DataclassLayer, EqxLayer):
        assert dataclasses.is_dataclass(cls)
        predict = fresh_jit(lambda layer, v: layer.weight * v)
        predict(cls(WEIGHT, "relu"), x)
        with count_compiles() as new_weight:
            predict(cls(-WEIGHT, "relu"), x)
        with count_compiles() as new_activation:
            predict(cls(WEIGHT, "tanh"), x)
        assert new_weight.count == 0 and new_activation.count == 1, cls.__name__
