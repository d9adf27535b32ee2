import time

import jax
import jax.numpy as jnp
import pytest

from jitbook import timing


def square_sum(x):
    return jnp.sum(x * x)


def test_time_call_counts_repeats_and_excludes_the_warmup():
    calls = []
    t = timing.time_call(lambda: calls.append(1) or jnp.ones(2), repeats=5, warmup=2)
    assert len(calls) == 7 and len(t.times) == 5
    assert "median (ms)" in t._repr_markdown_()


def test_timing_statistics_are_read_from_the_times():
    t = timing.Timing("f", [0.3, 0.1, 0.2, 0.5])
    assert (t.min, t.median, t.max) == (0.1, 0.25, 0.5)
    assert t.row()["repeats"] == 4 and t.row()["median (ms)"] == 250.0


def test_time_call_times_the_work_not_the_dispatch():
    def sleepy():
        time.sleep(0.02)
        return jnp.ones(2)

    assert timing.time_call(sleepy, repeats=2, warmup=0).min >= 0.02


def test_time_call_blocks_on_the_result():
    waited = []

    class Result:
        def block_until_ready(self):
            waited.append(True)
            return self

    timing.time_call(lambda: Result(), repeats=3, warmup=1)
    assert len(waited) == 4


def test_stages_split_a_true_first_call_even_after_warm_cache():
    x = jnp.ones((30, 30))
    jax.jit(square_sum)(x)  # warm the cache of square_sum itself
    s = timing.stages(square_sum, x)
    assert s.compile > 0 and s.trace > 0 and s.lower > 0 and s.run > 0
    assert "reduce_sum" in str(s.jaxpr)
    assert float(s.compiled(x)) == 900.0
    assert [r["stage"] for r in s.rows()] == ["trace", "lower", "compile", "run"]


def test_stages_with_a_static_argument():
    s = timing.stages(lambda x, n: x * n, jnp.ones(3), 4, static_argnums=1)
    assert list(s.compiled(jnp.ones(3))) == [4.0, 4.0, 4.0]


def test_bad_input_names_the_mistake():
    with pytest.raises(TypeError, match=r"write time_call\(f, x\), not time_call\(f\(x\)\)"):
        timing.time_call(jnp.ones(3))
    with pytest.raises(ValueError, match="repeats >= 1"):
        timing.time_call(square_sum, jnp.ones(3), repeats=0)
