"""Tracing, the two sections that answer the sources: jitting only part of a function,
and PyTorch's tracing JIT beside JAX's ways out."""

import jax
import jax.numpy as jnp
import pytest

from jitbook import count_compiles
from jitbook.chapters import tracing, tracing_part, tracing_torch

X = jnp.linspace(-1.0, 1.0, 5)


@pytest.mark.claim("sec-tracing-part", "clm-tracing-part-jit")
def test_a_function_jitted_only_below_its_branch_compiles_once_per_part_and_stays_right():
    ts = (1.0, 2.0, -1.0, -2.0, 0.0, 3)
    for t in ts:
        assert jnp.allclose(
            tracing_part.sin_or_cos_partly(X, t), tracing.sin_or_cos(X, t)
        )
    held = tracing_part.programs_held()
    # new values of t of either sign, a Python int, a concrete jax.Array: nothing new
    with count_compiles() as log:
        for t in (5.0, -7.0, 4, jnp.asarray(-0.5)):
            tracing_part.sin_or_cos_partly(X, t)
    parts_compiled = log.count_for("sin_part") + log.count_for("cos_part")
    assert parts_compiled == 0 and tracing_part.programs_held() == held
    rows = tracing_part.part_rows(X, ts)
    assert all(r["outcome"].endswith("True") for r in rows[: len(ts)])
    assert tracing_part.sin_part._cache_size() >= 1
    assert tracing_part.cos_part._cache_size() >= 1
    with pytest.raises(ValueError, match="at least one value"):
        tracing_part.part_rows(X, ())


@pytest.mark.claim("sec-tracing-part", "clm-tracing-part-not-whole")
def test_the_function_as_a_whole_cannot_be_jitted_or_vmapped_over_t():
    *_, jitted, vmapped = tracing_part.part_rows(X, (1.0, -1.0))
    for row in (jitted, vmapped):
        assert row["outcome"].startswith("TracerBoolConversionError")
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda x, t: tracing_part.sin_or_cos_partly(x, t))(X, -1.0)


@pytest.fixture(scope="module")
def facts():
    return tracing_torch.four_functions(X)


@pytest.mark.claim("sec-tracing-torch", "clm-tracing-torch-refuses")
def test_jit_refuses_a_branch_on_a_traced_value_before_compiling_anything(facts):
    branch = facts["branch on a value"]
    assert branch["as written"].startswith("TracerBoolConversionError")
    assert branch["compiled before the error"] == 0
    with count_compiles() as log, pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(tracing.sin_or_cos)(X, -1.0)  # either sign: refused, not recorded
    assert log.count == 0


@pytest.mark.claim("sec-tracing-torch", "clm-tracing-torch-ways-out")
def test_each_way_out_keeps_what_a_trace_would_lose(facts):
    branch, loop = facts["branch on a value"], facts["Python loop"]
    assert branch["way out compiles"] == 1 and branch["way out right"] is True
    assert loop["way out"][0] == loop["way out"][1]  # one loop, whatever n
    assert loop["as written"][1] == 10 * loop["as written"][0]  # unrolled
    size = facts["size read in Python"]
    assert size["compiles"] == 3 and size["right"] is True
    tree = facts["class argument"]
    assert tree["way out compiles"] == 1 and tree["way out right"] is True


@pytest.mark.claim("sec-tracing-torch", "clm-tracing-torch-two-refused")
def test_of_the_four_functions_as_written_jit_refuses_the_branch_and_the_plain_class(
    facts,
):
    refused = {
        name: row["as written"]
        for name, row in facts.items()
        if isinstance(row.get("as written"), str)
    }
    assert set(refused) == {"branch on a value", "class argument"}
    assert refused["class argument"].startswith("TypeError")
    # the other two are taken as written: the loop traces, the size reads a Python int
    assert jax.jit(lambda x: tracing.python_loop(x, 3))(X).shape == X.shape
    assert float(jax.jit(tracing_torch.mean_by_size)(jnp.arange(4.0))) == 1.5
    rows = tracing_torch.comparison_rows(facts)
    assert len(rows) == 4 and all(r["torch.jit.trace (documented)"] for r in rows)
