"""The benchmark command runs and prints its tables (speed itself is not asserted: that is its output)."""

import pytest

import jitbook  # noqa: F401
from jitbook import bench
from jitbook.pln import load_oaks
from jitbook.pln.bench import (
    benchmark_levels,
    newton_time_to_target,
    thread_contention,
    time_to_target,
)


def test_bench_pln_prints_tables_and_progress(capsys):
    bench.main(["pln", "--n-repeat", "1", "--iters", "5", "--repeats", "1", "--levels", "eager,scan,fast",
                "--eager-iters", "2", "--newton-iters", "20"])
    out, err = capsys.readouterr()
    assert "116 x 114, 5 iterations" in out and "OpenBLAS limited inside every fit" in out
    for level in ("eager", "scan", "fast"):
        assert f"| {level} |" in out
        assert f"... level {level} done in " in err  # progress: which level, how long
    assert "extrapolated from 2 iterations" in out
    assert "Two thread pools" in out and "(limited, as in fit)" in out
    assert "Newton fit, time to the pyPLNmodels reference loss" in out
    assert "Profile of the scan level" in out and "Profile of the fast level" in out


def test_bench_rejects_unknown_level():
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan,warp"])
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan", "--profile-levels", "pytree"])


def test_benchmark_rows_report_compiles_and_per_iteration_times():
    (eager, scan) = benchmark_levels(load_oaks(1), 4, ["eager", "scan"], repeats=2, eager_iters=2)
    assert scan["note"] == "" and eager["note"] == "extrapolated from 2 iterations"
    assert scan["ms / iter (min)"] <= scan["ms / iter"] + 0.01  # the minimum of the repeats, then their median
    with pytest.raises(ValueError, match=">= 1"):
        benchmark_levels(load_oaks(1), 4, ["scan"], repeats=0)


def test_thread_contention_reports_both_settings():
    default, limited = thread_contention(load_oaks(1), 3, "scan", repeats=1)
    assert "(default)" in default["OpenBLAS threads"] and limited["OpenBLAS threads"].startswith("1 (limited")


def test_time_to_target_finds_the_first_hit():
    row = time_to_target([5.0, 3.0, 1.0, 0.5], ms_per_iter=2.0, target=1.0)
    assert row["iterations to target"] == 3 and row["seconds to target"] == 0.006
    assert time_to_target([5.0, 3.0], 2.0, 1.0)["seconds to target"] is None


def test_newton_time_to_target_reports_first_hit():
    out = newton_time_to_target(load_oaks(1), target=1e12, n_iter=5, repeats=1)
    assert out["iterations to target"] == 1  # every loss is below a huge target
    out = newton_time_to_target(load_oaks(1), target=0.0, n_iter=5, repeats=1)
    assert out["iterations to target"] is None and out["seconds to target"] is None

