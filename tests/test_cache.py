import jax
import jax.numpy as jnp
import pytest

from jitbook import cache, capture_jax_logs, count_compiles, display


def scale(x):
    return 3.0 * x


def shift(x):
    return x - 1.0


@pytest.mark.claim("sec-recompilation")
def test_first_call_compiles_once_second_call_not_at_all():
    f = jax.jit(lambda x: scale(x) + 0.5)
    x = jnp.ones(5)
    with count_compiles() as first:
        f(x)
    with count_compiles() as second:
        f(x)
    assert first.count == 1
    assert second.count == 0


@pytest.mark.claim("sec-recompilation")
def test_new_shape_compiles_again_and_counts_are_per_name():
    f, g = jax.jit(scale), jax.jit(shift)
    a, b = jnp.ones(7), jnp.ones(8)
    f(a)
    with count_compiles() as log:
        f(a)  # cached
        f(b)  # new shape
        g(a)
        g(a)  # cached
    assert log.count_for("scale") == 1
    assert log.count_for("shift") == 1
    assert log.count == 2
    assert log.traces.count("scale") == 1 and log.lowerings.count("shift") == 1
    assert log.compile_seconds > 0


def test_listeners_are_removed_after_the_block():
    with count_compiles() as log:
        pass
    jax.jit(lambda x: x * 11.0)(jnp.ones(2))
    assert log.count == 0


def test_count_for_needs_a_name():
    with count_compiles() as log:
        pass
    with pytest.raises(TypeError, match="function name as a string"):
        log.count_for(scale)


@pytest.mark.claim("sec-recompilation-diagnose")
def test_captured_logs_explain_a_cache_miss_and_config_is_restored():
    f = jax.jit(shift)
    f(jnp.ones(3))
    before = jax.config.jax_explain_cache_misses
    with capture_jax_logs() as messages:
        f(jnp.ones(4))
    assert jax.config.jax_explain_cache_misses == before
    assert any("TRACING CACHE MISS" in m and "f32[4]" in m for m in messages)
    assert any(m.startswith("Finished XLA compilation of jit(shift)") for m in messages)


def test_messages_about_strips_paths_and_addresses_and_wraps():
    message = ("TRACING CACHE MISS at /home/someone/project/code/mod.py:12 (f):\n"
               "  for step defined at /home/someone/project/code/mod.py:3 id=140234 at 0x7f3a2b1c9d")
    text = cache.messages_about([message], "step")
    assert "/home" not in text and "mod.py:3" in text and "0x7f" not in text and "140234" not in text
    assert all(len(line) <= display.COLUMN for line in cache.messages_about(["x " * 90 + "jit(step)"], "step").splitlines())
    glued = cache.messages_about(["  * at x, now f32[] and before f32[]{weak_type=True}https://docs.jax.dev/x.html "
                                  "in jit(step)"], "step")
    assert "{weak_type=True} https://docs.jax.dev/x.html" in glued, "a glued link is set apart, so it wraps whole"
