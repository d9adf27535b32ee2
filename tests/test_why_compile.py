"""The first chapter's claims about JAX, and its exercises' wrong answers."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import count_compiles, why_compile
from jitbook.exercises import check


def test_jit_gives_the_op_by_op_result():
    x = jax.random.normal(jax.random.key(0), (50, 20))
    y = why_compile.standardize_softplus(x)
    np.testing.assert_allclose(jax.jit(why_compile.standardize_softplus)(x), y, atol=1e-5)
    x64 = np.asarray(x, dtype=np.float64)  # independent reference
    sp = np.log1p(np.exp(x64))
    ref = (sp - sp.mean(1, keepdims=True)) / np.sqrt(sp.var(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, ref, atol=1e-4)


def test_dispatch_returns_before_the_result_is_ready():
    product = why_compile.heavy_matmul(1500)
    assert not product.is_ready()
    product.block_until_ready()
    assert product.is_ready()


def test_block_until_ready_waits_for_every_array_in_a_tree():
    tree = (why_compile.heavy_matmul(1500), {"b": why_compile.heavy_matmul(1500)})
    assert not all(leaf.is_ready() for leaf in jax.tree_util.tree_leaves(tree))
    waited = jax.block_until_ready(tree)
    assert waited is tree
    assert all(leaf.is_ready() for leaf in jax.tree_util.tree_leaves(tree))


def test_the_cache_belongs_to_the_function_not_the_wrapper():
    def local(x):
        return x * 5.0

    x = jnp.ones(6)
    with count_compiles() as first:
        jax.jit(local)(x)
    with count_compiles() as second:
        jax.jit(local)(x)
    assert (first.count_for("local"), second.count_for("local")) == (1, 0)


def test_break_even_calls():
    assert why_compile.break_even_calls(1.0, 0.3, 0.1) == pytest.approx(5.0)
    assert why_compile.break_even_calls(1.0, 0.1, 0.3) == math.inf
    with pytest.raises(ValueError, match="compile_s must be a non-negative number"):
        why_compile.break_even_calls(-1.0, 0.1, 0.3)


def test_ready_wrong_answer_that_does_not_wait():
    report = check("why-compile.ready", lambda fn, *args: fn(*args))
    assert not report.passed


def test_fuse_wrong_answers():
    by_columns = lambda x: why_compile.standardize_softplus(x.T).T  # noqa: E731
    assert "not compiled by jax.jit" in check("why-compile.fuse", by_columns).message
    assert "applied to the columns" in check("why-compile.fuse", jax.jit(why_compile.standardize_softplus)).message

    assert "compiled 2 times" in check("why-compile.fuse", _RejitEachCall()).message


class _RejitEachCall:
    """A plausible wrong answer: builds a new jitted lambda on every call, so every call compiles."""

    lower = None

    def __call__(self, x):
        return jax.jit(lambda v: why_compile.standardize_softplus(v.T).T)(x)


def test_break_even_wrong_answers():
    no_ceil = check("why-compile.break-even", lambda c, e, j: c / (e - j) if e > j else math.inf)
    assert not no_ceil.passed
    no_inf = check("why-compile.break-even", lambda c, e, j: math.ceil(c / (e - j)) if e > j else 0)
    assert "never pays: return math.inf" in no_inf.message
