import dataclasses

import jax
import jax.numpy as jnp
import pytest

from jitbook import cache, capture_jax_logs, count_compiles, display
from jitbook.chapters import recompilation_wrappers


def scale(x):
    return 3.0 * x


def shift(x):
    return x - 1.0


@pytest.mark.claim("sec-recompilation", "clm-recompilation-first-call-compiles")
def test_first_call_compiles_once_second_call_not_at_all():
    f = jax.jit(lambda x: scale(x) + 0.5)
    x = jnp.ones(5)
    with count_compiles() as first:
        f(x)
    with count_compiles() as second:
        f(x)
    assert first.count == 1
    assert second.count == 0


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
    assert log.trace_events.count("scale") == 1 and log.lowerings.count("shift") == 1
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


@pytest.mark.claim(
    "sec-recompilation-diagnose", "clm-recompilation-explain-cache-misses"
)
def test_captured_logs_explain_a_cache_miss_and_config_is_restored():
    f = jax.jit(shift)
    f(jnp.ones(3))
    before = jax.config.jax_explain_cache_misses
    with capture_jax_logs() as messages:
        f(jnp.ones(4))
    assert jax.config.jax_explain_cache_misses == before
    assert any("TRACING CACHE MISS" in m and "f32[4]" in m for m in messages)
    # log_compiles: each of the three stages, tracing, lowering and compiling
    for stage in (
        "Finished tracing",
        "to MLIR module conversion",
        "XLA compilation of",
    ):
        assert any(stage in m and "shift" in m for m in messages), stage
    # a miss explained against the closest previous key: here f32[3], the only one
    (miss,) = [m for m in messages if m.startswith("TRACING CACHE MISS")]
    assert "closest previous key" in miss and "f32[3]" in miss


def test_messages_about_strips_paths_and_addresses_and_wraps():
    message = (
        "TRACING CACHE MISS at /home/someone/project/code/mod.py:12 (f):\n"
        "  for step defined at /home/someone/project/code/mod.py:3 id=140234 at 0x7f3a2b1c9d"
    )
    text = cache.messages_about([message], "step")
    assert (
        "/home" not in text
        and "mod.py:3" in text
        and "0x7f" not in text
        and "140234" not in text
    )
    assert all(
        len(line) <= display.COLUMN
        for line in cache.messages_about(["x " * 90 + "jit(step)"], "step").splitlines()
    )
    glued = cache.messages_about(
        [
            "  * at x, now f32[] and before f32[]{weak_type=True}https://docs.jax.dev/x.html "
            "in jit(step)"
        ],
        "step",
    )
    assert "{weak_type=True} https://docs.jax.dev/x.html" in glued, (
        "a glued link is set apart, so it wraps whole"
    )


@dataclasses.dataclass(frozen=True)
class ScaleBy:
    factor: float

    def __call__(self, x):
        return x * self.factor


@pytest.mark.claim("sec-recompilation-function", "clm-rec-equal-callables-one-body-run")
def test_equal_callables_fire_a_trace_event_each_but_run_the_body_once():
    """The trace event fires per new callable; the tracing cache, keyed by equality,
    runs the body and compiles once."""
    x = jnp.ones(3)
    objects = [ScaleBy(2.0) for _ in range(100)]  # kept alive: no id reused
    with count_compiles() as log, cache.count_body_runs(ScaleBy(2.0)) as runs:
        for obj in objects:
            jax.jit(obj)(x)
    # the objects' own events: jnp functions jitted inside fire their own on 0.9.2
    own = log.trace_events.count(log.trace_events[-1])
    assert (own, runs.count, log.count) == (100, 1, 1)
    # the chapter's own count, with its own class
    assert recompilation_wrappers.equal_objects_counts(100) == {
        "objects": 100,
        "trace events": 100,
        "body runs": 1,
        "compiles": 1,
    }


def test_body_runs_count_traces_not_calls_and_nest():
    def add(x):
        return x + 1.0

    f = jax.jit(add)
    with cache.count_body_runs(add) as outer:
        f(jnp.ones(2))
        f(jnp.ones(2))
        with cache.count_body_runs(add, scale) as inner:
            f(jnp.ones(3))
            scale(1.0)
    assert outer.count == 2 and inner.count_for(add) == 1 and inner.count == 2
    with cache.count_body_runs(add) as after:
        add(1.0)
    assert after.count == 1  # the events of the closed blocks were switched off cleanly
    with cache.count_body_runs(f) as through_the_wrapper:
        add(1.0)
    assert through_the_wrapper.count == 1  # a jitted wrapper counts what it wraps
    with pytest.raises(TypeError, match="no Python body"):
        with cache.count_body_runs(len):
            pass
    with pytest.raises(TypeError, match="takes the functions"):
        with cache.count_body_runs():
            pass


def test_count_compiles_misuse_says_how_to_write_it():
    with pytest.raises(TypeError, match=r"write `with count_compiles\(\) as log:`"):
        with count_compiles as log:  # noqa: F841
            pass
    counter = count_compiles()
    with counter:
        pass
    with pytest.raises(RuntimeError, match="a new `with count_compiles"):
        with counter:
            pass


def test_count_for_a_name_jit_never_saw_lists_what_compiled():
    jax.jit(scale)(jnp.ones(4))
    with count_compiles() as log:
        jax.jit(shift)(jnp.ones(13))
    assert log.count_for("scale") == 0  # a real function, no compile here: zero
    with pytest.raises(ValueError, match=r"'doubel'.*compiled: .*shift"):
        log.count_for("doubel")
