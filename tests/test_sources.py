"""The sources appendix: every row links to a section that exists, and its measured facts hold on this JAX."""

import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from jitbook import cache, count_compiles, raised
from jitbook.chapters import methods, recompilation, sources
from jitbook.chapters.pln import load_oaks

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "index.qmd", *sorted((ROOT / "chapters").glob("*.qmd"))]


def _labels() -> set[str]:
    return {
        m
        for page in PAGES
        if page.exists()
        for m in re.findall(r"\{#(sec-[\w-]+)", page.read_text())
    }


def test_every_cross_reference_of_the_appendix_resolves():
    refs = set(
        re.findall(r"@(sec-[\w-]*\w)", (ROOT / "chapters" / "sources.qmd").read_text())
    )
    assert refs, "the appendix links each row to a section"
    assert refs <= _labels(), f"unresolved: {sorted(refs - _labels())}"


def test_the_appendix_is_listed_after_the_teachers_page():
    config = (ROOT / "_quarto.yml").read_text()
    assert re.search(r"- chapters/teachers\.qmd\n\s+- chapters/sources\.qmd", config)


@pytest.mark.claim("sec-sources", "clm-sources-cache-size-out-of-reach")
def test_a_method_cache_size_is_not_reachable_from_an_equinox_instance():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert isinstance(raised(lambda: plus.jit_apply._cache_size()), AttributeError)
    assert isinstance(methods.SignedEqx.jit_apply._cache_size(), int)


@pytest.mark.claim("sec-sources", "clm-sources-jit-of-eqx-gradient-fails")
def test_jax_jit_of_filter_value_and_grad_fails_and_filter_jit_works():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert (
        raised(
            lambda: jax.jit(eqx.filter_value_and_grad(methods.signed_loss))(plus, 1.0)
        )
        is not None
    )
    value, _ = eqx.filter_jit(eqx.filter_value_and_grad(methods.signed_loss))(plus, 1.0)
    assert float(value) == 2.0


@pytest.fixture(scope="module")
def facts():
    return sources.tutorial_facts(load_oaks(1))


@pytest.mark.claim("sec-sources", "clm-sources-pln-bugs-still-show")
def test_tutorial_facts_hold_on_this_jax(facts):
    """The PLN rows: -inf then NaN at the overflow, Omega out of grad M, lr unused, level 4 at Omega = I."""
    assert facts["minus inf from"] == facts["nan from"] > 1
    assert facts["numpy warning"] == "invalid value encountered in log"
    assert facts["Omega out of grad M"] is True and facts["lr ignored"] is True
    assert facts["level 4 is Omega = I"] is True
    assert facts["global holds"] == "DynamicJaxprTracer"
    assert facts["plain scan compiles"] == [1, 1] and facts["after AOT compiles"] == 1
    assert facts["size in carry"].startswith("TypeError: Shapes must be")
    assert (
        "/work" not in facts["size in carry"] and ".py:" not in facts["size in carry"]
    )


def test_tutorial_facts_asks_for_enough_iterations():
    with pytest.raises(ValueError, match="did not overflow"):
        sources.tutorial_facts(load_oaks(1), n_iter=2)


@pytest.mark.claim("sec-sources", "clm-sources-value-hash-strands")
def test_a_value_hash_on_a_mutated_object_strands_its_cache_entry():
    """Right results, but after c.mul = False an object equal to c's first value compiles again."""
    rows = sources.mutation_rows()
    assert [r["compiles"] for r in rows] == [1, 1, 1]
    assert all(r["result"] == r["expected"] for r in rows)
    sources.ValueHashed.calc.clear_cache()
    sources.ValueHashed(2, True).calc(3)
    with (
        count_compiles() as log
    ):  # without the mutation, an equal new object reuses the program
        sources.ValueHashed(2, True).calc(3)
    assert log.count == 0
    with pytest.raises(
        ValueError, match="x .a hashable Python int. must be a positive"
    ):
        sources.mutation_rows(jnp.array(2))


@pytest.mark.claim("sec-sources", "clm-sources-partial-lambda-miss")
def test_blog_loops_partial_and_lambda_miss_every_step_plain_function_never():
    import functools

    assert sources.blog_loop_compiles(3) == {
        "jax.jit(partial(add_one))": 3,
        "jax.jit(lambda i: add_one(i))": 3,
        "jax.jit(add_one)": 0,
    }
    a, b = functools.partial(sources.add_one), functools.partial(sources.add_one)
    assert a != b and hash(a) != hash(
        b
    )  # different hashes, and not equal: a miss, not a collision
    with pytest.raises(ValueError, match="positive whole number"):
        sources.blog_loop_compiles(0)


@pytest.mark.claim("sec-sources-monitoring", "clm-sources-count-compiles-events")
def test_count_compiles_listens_to_these_monitoring_events():
    rows = {r["event"]: r for r in sources.compile_events(sources.add_one, jnp.ones(3))}
    for event in (
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    ):
        assert (
            rows[event]["fired"] == 1 and rows[event]["count_compiles records"] != "-"
        )
    assert (
        "compile"
        in rows["/jax/core/compile/backend_compile_duration"]["count_compiles records"]
    )
    with count_compiles() as log:
        jax.jit(lambda v: v * 3)(jnp.ones(3))
    assert log.count == 1
    with pytest.raises(TypeError, match="takes a function"):
        sources.compile_events(3)


@pytest.mark.claim("sec-sources-qa", "clm-sources-key-holds-object")
def test_the_cache_key_holds_the_mutated_object_itself():
    """After c.mul = False, the stored key is c itself, now unequal to ValueHashed(2, True)."""
    sources.ValueHashed.calc.clear_cache()
    c = sources.ValueHashed(2, True)
    c.calc(3)
    c.mul = False
    with count_compiles() as mutated:
        assert int(c.calc(3)) == 3  # right: a new entry for the new value
    with count_compiles() as equal_to_first:
        assert int(sources.ValueHashed(2, True).calc(3)) == 6
    assert mutated.count == 1 and equal_to_first.count == 1


@pytest.mark.claim("sec-sources-blog", "clm-sources-partial-miss")
def test_each_new_partial_is_a_new_key_not_a_collision():
    import functools

    a, b = functools.partial(sources.add_one), functools.partial(sources.add_one)
    assert a != b and hash(a) != hash(b)
    assert sources.blog_loop_compiles(2)["jax.jit(partial(add_one))"] == 2


@pytest.mark.claim("sec-sources-monitoring", "clm-sources-persistent-load")
def test_a_persistent_cache_load_counts_as_a_compile():
    first, loaded = sources.persistent_cache_counts(sources.add_one, jnp.ones(3))
    key = "count_for('add_one')"
    assert first[key] == 1 and first["persistent_cache_hits"] == 0
    assert loaded[key] == 1 and loaded["persistent_cache_hits"] == 1
    assert jax.config.jax_compilation_cache_dir is None  # restored


def test_ledger_statuses_reads_a_claim_row_and_refuses_an_unknown_test():
    statuses = sources.ledger_statuses(
        "test_a_value_hash_on_a_mutated_object_strands_its_cache_entry"
    )
    assert statuses["0.12.0.1"] == "holds"
    with pytest.raises(KeyError, match="make ledger"):
        sources.ledger_statuses("test_no_such_claim")


def test_every_topic_the_sources_raise_has_a_row_pointing_to_its_home():
    """Type hints, dataclass libraries, PyTorch's tracing JIT, jitting part of a function,
    grad and jaxprs, and the translation: each has a row linking to the section that answers it."""
    page = (ROOT / "chapters" / "sources.qmd").read_text()
    homes = {
        "sec-methods-hints": "ArrayLike",
        "sec-methods-dataclass-libraries": "jax_dataclasses",
        "sec-tracing-torch": "tracing JIT",
        "sec-tracing-part": "only part of the function",
        "sec-jaxprs-grad": "to differentiate it",
        "sec-sources-translation": "translation",
    }
    for section, words in homes.items():
        assert f"@{section}" in page or f"(#{section})" in page, section
        assert words in page, words
    assert {s for s in homes} <= _labels()


@pytest.mark.claim("sec-sources-translation", "clm-sources-translation-config")
def test_the_configuration_the_translation_drops_is_still_in_the_key():
    for name, value in (
        ("jax_default_matmul_precision", "highest"),
        ("jax_numpy_rank_promotion", "raise"),
    ):
        row = recompilation.config_compiles(name, value)
        assert row["compiles when set"] == 1, row
        assert row["compiles when set back"] == 0, row


@pytest.mark.claim("sec-sources-translation", "clm-sources-translation-non-array")
def test_arguments_that_are_not_arrays_are_in_the_key_through_their_tree_structure():
    rows = cache.probe(recompilation.total, recompilation.structure_cases())
    by_case = {r["argument"]: r["compiled"] for r in rows}
    assert by_case["(a, b) (a tuple)"] == 1
    assert by_case["[a, b] (a list)"] == 1  # the same arrays in a list: compiles again
    assert by_case['{"a": a, "c": b} (a new key)'] == 1  # a new dict key, too
    assert by_case['{"b": b, "a": a} (insertion order)'] == 0
