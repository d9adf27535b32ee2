import time

import jax
import jax.numpy as jnp
import pytest

from jitbook import timing


def square_sum(x):
    return jnp.sum(x * x)


# --- verdicts from synthetic rounds


def test_a_clear_win_is_faster_by_the_ratio_of_minimums():
    a = [1.0, 1.1, 1.05, 1.0, 1.2, 1.0, 1.1]
    b = [2.6, 2.8, 2.7, 3.0, 2.6, 2.9, 2.7]
    v = timing.verdict_from_rounds(a, b)
    assert v.faster is True and v.factor == pytest.approx(2.6) and v.wins == 7
    assert str(v) == v.phrase == "2.6 times faster than"
    assert f"jit was {v} op by op" == "jit was 2.6 times faster than op by op"


def test_a_clear_loss_is_slower():
    a = [1.4, 1.5, 1.45, 1.6, 1.4, 1.5]
    b = [1.0, 1.05, 1.0, 1.1, 1.02, 1.0]
    v = timing.verdict_from_rounds(a, b)
    assert v.faster is False and v.phrase == "1.4 times slower than" and v.decisive


def test_overlapping_ranges_are_a_tie_even_when_the_minimums_differ():
    a = [1.0, 2.0, 1.5, 2.5, 1.2, 2.2, 1.8]
    b = [1.4, 2.4, 1.9, 2.9, 1.6, 2.6, 2.2]  # b is slower in every round, by noise
    v = timing.verdict_from_rounds(a, b)
    assert v.faster is None and v.phrase == "about the same here as"
    assert "overlap" in v.reason


def test_a_few_lost_rounds_make_a_tie():
    a = [1.0] * 6 + [3.0] * 2
    b = [2.0] * 8
    v = timing.verdict_from_rounds(a, b)
    assert v.faster is None and "won only 6 of 8" in v.reason


def test_a_tiny_difference_is_a_tie():
    a = [1.00, 1.001, 1.002, 1.0, 1.001, 1.0]
    b = [1.05, 1.051, 1.052, 1.05, 1.051, 1.05]
    v = timing.verdict_from_rounds(a, b)
    assert v.faster is None and "less than 10%" in v.reason


def test_too_few_rounds_make_no_verdict():
    v = timing.verdict_from_rounds([1.0, 1.0], [5.0, 5.0])
    assert v.faster is None and "only 2 rounds" in v.reason


def test_identical_rounds_are_a_tie_and_big_factors_read_whole():
    assert timing.verdict_from_rounds([1.0] * 5, [1.0] * 5).faster is None
    v = timing.verdict_from_rounds([0.01] * 5, [1.234] * 5)
    assert v.phrase == "123 times faster than"


def test_verdict_refuses_bad_rounds():
    with pytest.raises(ValueError, match="same rounds"):
        timing.verdict_from_rounds([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="empty"):
        timing.verdict_from_rounds([], [])
    with pytest.raises(ValueError, match="positive"):
        timing.verdict_from_rounds([1.0, -1.0], [1.0, 1.0])
    with pytest.raises(TypeError, match="list of round times"):
        timing.verdict_from_rounds(1.0, [1.0])
    with pytest.raises(TypeError, match="numbers of seconds"):
        timing.verdict_from_rounds(["1"], [1.0])


# --- races


def test_race_interleaves_rounds_after_one_untimed_call_each():
    calls = []
    r = timing.race(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
        rounds=4,
        min_time=0.0,
    )
    assert calls[:2] == ["a", "b"]  # the warm-up calls, untimed
    timed = calls[2:]
    assert len(timed) == 8 and r.rounds == 4 and r.names == ["a", "b"]
    # every round calls each variant once, starting one later each round
    assert [sorted(timed[i : i + 2]) for i in range(0, 8, 2)] == [["a", "b"]] * 4
    assert timed[:4] == ["a", "b", "b", "a"]


def test_race_runs_more_rounds_until_its_time_budget_is_spent():
    r = timing.race({"nap": lambda: time.sleep(0.005)}, rounds=2, min_time=0.05)
    assert 8 <= r.rounds <= 12
    capped = timing.race({"nap": lambda: time.sleep(0.005)}, 2, 1.0, max_rounds=3)
    assert capped.rounds == 3


def test_race_times_the_work_and_blocks_on_the_result():
    waited = []

    class Result:
        def block_until_ready(self):
            time.sleep(0.01)
            waited.append(True)
            return self

    r = timing.race({"r": Result}, rounds=3, min_time=0.0)
    assert len(waited) == 4 and r.min("r") >= 0.01


def test_race_table_picks_one_unit_and_shows_the_spread():
    r = timing.Race({"slow": [0.002, 0.003, 0.004], "fast": [0.0005, 0.0006, 0.0009]})
    text = r.table.text
    assert "| variant | min (µs) | median (µs) | max (µs) | rounds |" in text
    assert (
        "| slow | 2,000 | 3,000 | 4,000 | 3 |" in text
    )  # display.number: thousands separated
    per_iter = timing.Race({"fit": [0.2, 0.3]}, per=100, per_what="iter")
    assert "min (ms / iter)" in per_iter.table.text and per_iter.min("fit") == 0.002


def test_race_verdict_and_agreement():
    r = timing.Race({"jit": [1.0] * 6, "same": [1.01, 0.99] * 3, "eager": [3.0] * 6})
    assert str(r.verdict("jit", "eager")) == "3.0 times faster than"
    assert r.verdict("eager", "jit").faster is False
    assert r.agree(["jit", "same"]) and not r.agree()
    with pytest.raises(KeyError, match="no variant 'warp'"):
        r.verdict("jit", "warp")


def test_race_compiles_outside_the_rounds():
    f = jax.jit(square_sum)
    x = jnp.ones((50, 50))
    with __import__("jitbook").count_compiles() as log:
        r = timing.race({"f": lambda: f(x)}, rounds=3, min_time=0.0)
    assert log.count_for("square_sum") == 1 and r.rounds == 3


def test_race_bad_input_names_the_mistake():
    with pytest.raises(TypeError, match="dict of named variants"):
        timing.race([lambda: 1])
    with pytest.raises(
        ValueError,
        match=r"race got an empty dict: give at least one named variant, e\.g\. \{'op by op'",
    ):
        timing.race({})
    with pytest.raises(ValueError, match="warmup must be a whole number >= 0"):
        timing.race({"f": lambda: 1}, warmup=-1)
    with pytest.raises(TypeError, match=r"write lambda: f\(x\), not f\(x\)"):
        timing.race({"f": jnp.ones(3)})
    with pytest.raises(ValueError, match="rounds must be a positive whole number"):
        timing.race({"f": lambda: 1}, rounds=0)
    with pytest.raises(ValueError, match="min_time"):
        timing.race({"f": lambda: 1}, min_time=-1)
    with pytest.raises(ValueError, match="max_rounds"):
        timing.race({"f": lambda: 1}, rounds=5, max_rounds=2)


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


def test_a_value_given_for_a_function_names_the_mistake():
    with pytest.raises(TypeError, match=r"write stages\(f, x\), not stages\(f\(x\)\)"):
        timing.stages(jnp.ones(3))


def test_a_verdict_reads_as_its_phrase_however_a_page_prints_it():
    """Quarto writes an inline value's repr, the harness its str: both must be the words."""
    verdict = timing.verdict_from_rounds([1.0] * 9, [2.0] * 9, "a", "b")
    assert repr(verdict) == str(verdict) == verdict.phrase == "2.0 times faster than"
