"""The benchmark command runs and prints its tables (speed itself is not asserted: that is its output)."""

import pytest

import jitbook
from jitbook import bench
from jitbook.chapters.pln import load_oaks
from jitbook.chapters.pln.bench import (
    SAME_LOOP,
    benchmark_levels,
    donation_race,
    newton_time_to_target,
    thread_contention,
    time_to_target,
)


def test_bench_pln_prints_tables_and_progress(capsys):
    bench.main(["pln", "--n-repeat", "1", "--iters", "5", "--rounds", "5", "--levels",
                "eager,jit_iteration,scan,namedtuple,fast", "--eager-iters", "2",
                "--newton-iters", "20"])
    out, err = capsys.readouterr()
    assert "116 x 114, 5 iterations per fit" in out and "OpenBLAS limited inside every fit" in out
    assert "minimum, median and maximum over interleaved rounds" in out
    assert "ms / iter (min)" in out and "ms / iter (max)" in out
    for level in ("eager", "scan", "fast"):
        assert f"| {level} |" in out
    assert "... levels eager, jit_iteration, scan, namedtuple, fast done in " in err
    assert "2 iterations, raced alone" in out
    assert "scan, namedtuple: one compiled loop written differently; they " in out
    assert "fast was " in out and " scan." in out
    assert "Donating the state of jit_iteration" in out and "donated was " in out
    assert "Two thread pools" in out and "(limited, as in fit)" in out
    assert "Limited, the loop was " in out
    assert "Newton fit, time to the pyPLNmodels reference loss" in out
    assert "Profile of the scan level" in out and "Profile of the fast level" in out


def test_bench_rejects_unknown_level():
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan,warp"])
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan", "--profile-levels", "pytree"])


def test_benchmark_rows_report_compiles_and_per_iteration_times():
    rows, raced = benchmark_levels(load_oaks(1), 4, ["eager", "scan", "fast"], rounds=5,
                                   eager_iters=2)
    eager, scan, fast = rows
    assert scan["note"] == "" and eager["note"] == "2 iterations, raced alone"
    assert scan["ms / iter (min)"] <= scan["ms / iter (median)"] <= scan["ms / iter (max)"]
    assert raced.names == ["scan", "fast"] and raced.rounds >= 5 and raced.per == 4
    assert scan["ms / iter (min)"] == round(raced.min("scan") * 1e3, 2)
    with pytest.raises(ValueError, match="rounds must be a whole number >= 1"):
        benchmark_levels(load_oaks(1), 4, ["scan"], rounds=0)


def test_every_level_starts_from_cold_caches():
    """Compile counts do not depend on the order: each level's first fit clears the caches."""
    (first,), _ = benchmark_levels(load_oaks(1), 3, ["scan"], rounds=5)
    (again,), _ = benchmark_levels(load_oaks(1), 3, ["scan"], rounds=5)
    assert first["compiles"] == again["compiles"] >= 1


@pytest.mark.claim("sec-pln-cost")
def test_jit_step_compiles_once_whatever_the_learning_rate():
    from jitbook.chapters import pln

    data = pln.device_data(load_oaks(1))
    pln.fit(data, 2, "jit_step")
    with jitbook.count_compiles() as log:
        pln.fit(data, 2, "jit_step")
        pln.fit(data, 2, "jit_step", lr=0.5)
    assert log.count == 0


def test_same_loop_levels_are_levels():
    from jitbook.chapters.pln import LEVELS

    assert set(SAME_LOOP) <= set(LEVELS)


def test_donation_race_gives_the_same_fit_and_three_variants():
    import numpy as np

    from jitbook.chapters import pln
    from jitbook.chapters.pln.levels import fit_jit_iteration_donated

    data = pln.device_data(load_oaks(1))
    np.testing.assert_array_equal(fit_jit_iteration_donated(data, 3).losses,
                                  pln.fit(data, 3, "jit_iteration").losses)
    raced = donation_race(load_oaks(1), 3, rounds=5)
    assert raced.names == ["jit_iteration", "jit_iteration, state donated", "scan"]


def test_thread_contention_reports_both_settings():
    (default, limited), raced = thread_contention(load_oaks(1), 3, "scan", rounds=5)
    assert "(as the process has it)" in default["OpenBLAS threads"]
    assert limited["OpenBLAS threads"].startswith("1 (limited")
    assert raced.rounds >= 5 and len(raced.names) == 2


def test_time_to_target_finds_the_first_hit():
    row = time_to_target([5.0, 3.0, 1.0, 0.5], ms_per_iter=2.0, target=1.0)
    assert row["iterations to target"] == 3 and row["seconds to target"] == 0.006
    assert time_to_target([5.0, 3.0], 2.0, 1.0)["seconds to target"] is None


def test_newton_time_to_target_reports_first_hit():
    out = newton_time_to_target(load_oaks(1), target=1e12, n_iter=5, rounds=2)
    assert out["iterations to target"] == 1  # every loss is below a huge target
    out = newton_time_to_target(load_oaks(1), target=0.0, n_iter=5, rounds=2)
    assert out["iterations to target"] is None and out["seconds to target"] is None


@pytest.mark.claim("sec-pln-cost")
def test_the_donated_iteration_hands_its_state_buffers_to_the_next_state():
    """Donation is honoured on CPU: the state given to the call is deleted after it."""
    import jax.numpy as jnp

    from jitbook.chapters import pln
    from jitbook.chapters.pln.levels import FitState, one_iteration_donated

    data = pln.device_data(load_oaks(1))
    params = pln.init_params(data)
    p = data.Y.shape[1]
    state = FitState(params, jnp.eye(p), jnp.eye(p), pln.make_optimizer(1.0).init(params))
    new_state, _ = one_iteration_donated(state, data, 1.0)
    assert state.params.M.is_deleted() and not new_state.params.M.is_deleted()
    assert not data.Y.is_deleted()
