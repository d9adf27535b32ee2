"""The sources appendix: every row links to a section that exists, and its measured facts hold on this JAX."""

import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from jitbook import methods, raised, recompilation

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "index.qmd", *sorted((ROOT / "chapters").glob("*.qmd"))]


def _labels() -> set[str]:
    return {m for page in PAGES if page.exists() for m in re.findall(r"\{#(sec-[\w-]+)", page.read_text())}


def test_every_cross_reference_of_the_appendix_resolves():
    refs = set(re.findall(r"@(sec-[\w-]*\w)", (ROOT / "chapters" / "sources.qmd").read_text()))
    assert refs, "the appendix links each row to a section"
    assert refs <= _labels(), f"unresolved: {sorted(refs - _labels())}"


def test_the_appendix_is_listed_after_the_teachers_page():
    config = (ROOT / "_quarto.yml").read_text()
    assert re.search(r"- chapters/teachers\.qmd\n\s+- chapters/sources\.qmd", config)


@pytest.mark.claim("sec-sources")
def test_a_method_cache_size_is_not_reachable_from_an_equinox_instance():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert isinstance(raised(lambda: plus.jit_apply._cache_size()), AttributeError)
    assert isinstance(methods.SignedEqx.jit_apply._cache_size(), int)


@pytest.mark.claim("sec-sources")
def test_jax_jit_of_filter_value_and_grad_fails_and_filter_jit_works():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert raised(lambda: jax.jit(eqx.filter_value_and_grad(methods.signed_loss))(plus, 1.0)) is not None
    value, _ = eqx.filter_jit(eqx.filter_value_and_grad(methods.signed_loss))(plus, 1.0)
    assert float(value) == 2.0


def test_rejit_cost_measures_the_slow_path_without_compiling():
    cost = recompilation.rejit_cost(50)
    assert cost["compiles"] == 0 and cost["calls"] == 50
    assert cost["jax.jit(plus_one) per call (us)"] > 0 and cost["reused wrapper (us)"] > 0
    with pytest.raises(ValueError, match="positive int"):
        recompilation.rejit_cost(0)
