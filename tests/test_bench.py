"""The benchmark command runs and prints its tables (speed itself is not asserted: that is its output)."""

import pytest

import jitbook  # noqa: F401
from jitbook import bench
from jitbook.pln import load_oaks
from jitbook.pln.bench import benchmark_levels, newton_time_to_target


def test_bench_pln_prints_tables(capsys):
    bench.main(["pln", "--n-repeat", "1", "--iters", "5", "--repeats", "1", "--levels", "eager,scan,fast",
                "--eager-iters", "2", "--newton-iters", "20"])
    out = capsys.readouterr().out
    assert "116 x 114, 5 iterations" in out and "OpenBLAS threads: 1" in out
    for level in ("eager", "scan", "fast"):
        assert f"| {level} |" in out
    assert "extrapolated from 2 iterations" in out
    assert "Newton fit, time to the pyPLNmodels reference loss" in out
    assert "Profile of the scan level" in out and "Profile of the fast level" in out


def test_bench_rejects_unknown_level():
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan,warp"])
    with pytest.raises(SystemExit, match="unknown level"):
        bench.main(["pln", "--n-repeat", "1", "--iters", "2", "--levels", "scan", "--profile-levels", "pytree"])


def test_benchmark_rows_are_consistent():
    rows = benchmark_levels(load_oaks(1), 4, ["scan"], repeats=2)
    (row,) = rows
    assert row["run s (min)"] <= row["run s (median)"] <= row["run s (max)"]
    assert row["ms / iter"] == pytest.approx(row["run s (median)"] / 4 * 1e3, rel=0.02, abs=0.15)  # run s is rounded to 1 ms
    with pytest.raises(ValueError, match=">= 1"):
        benchmark_levels(load_oaks(1), 4, ["scan"], repeats=0)


def test_newton_time_to_target_reports_first_hit():
    out = newton_time_to_target(load_oaks(1), target=1e12, n_iter=5, repeats=1)
    assert out["iterations to target"] == 1  # every loss is below a huge target
    out = newton_time_to_target(load_oaks(1), target=0.0, n_iter=5, repeats=1)
    assert out["iterations to target"] is None and out["seconds to target"] is None
