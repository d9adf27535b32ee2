"""The benchmark command runs and prints its tables (speed itself is not asserted: that is its output)."""

import json

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
    bench.main(
        [
            "pln",
            "--n-repeat",
            "1",
            "--iters",
            "5",
            "--rounds",
            "5",
            "--levels",
            "eager,jit_iteration,scan,namedtuple,fast",
            "--eager-iters",
            "2",
            "--newton-iters",
            "20",
        ]
    )
    out, err = capsys.readouterr()
    assert (
        "116 x 114, 5 iterations per fit" in out
        and "OpenBLAS limited inside every fit" in out
    )
    assert "minimum, median and maximum over interleaved rounds" in out
    assert "ms / iter (min)" in out and "ms / iter (max)" in out
    for level in ("eager", "scan", "fast"):
        assert f"| {level} |" in out
    assert "... levels eager, jit_iteration, scan, namedtuple, fast: done in " in err
    assert "    first fit of namedtuple: " in err and " s so far)" in err
    assert "2 iterations, raced alone" in out
    assert "scan, namedtuple: one compiled loop written differently; they " in out
    assert "fast was " in out and " scan (warm; JAX against JAX)." in out
    assert "Donating the state of jit_iteration" in out and "donated was " in out
    assert "Two thread pools" in out and "(limited, as in fit)" in out
    assert "Limited, the loop was " in out
    assert "Newton fit, time to the pyPLNmodels reference loss" in out
    assert "... Newton fit, 20 iterations, then raced to the target: done in" in err
    assert "Profile of the scan level" in out and "Profile of the fast level" in out


BAD_FLAGS = [
    (
        ["--iters", "0"],
        "argument --iters: must be a whole number >= 1 (iterations per fit), got '0'",
    ),
    (
        ["--rounds", "0"],
        "argument --rounds/--repeats: must be a whole number >= 1 (interleaved rounds)",
    ),
    (["--n-repeat", "0"], "argument --n-repeat: must be a whole number >= 1"),
    (["--min-time", "-1"], "argument --min-time: must be seconds >= 0, got '-1'"),
    (
        ["--newton-iters", "-5"],
        "argument --newton-iters: must be a whole number >= 0 (iterations of the "
        "Newton fit; 0 skips it), got '-5'",
    ),
    (
        ["--peers-python", "/nonexistent"],
        "argument --peers-python: '/nonexistent' is not an executable file",
    ),
    (
        ["--profile-levels", "eager"],
        "argument --profile-levels: 'eager' cannot be profiled; choose from "
        "scan, namedtuple, fast (comma-separated)",
    ),
    (
        ["--levels", "scan,warp"],
        "argument --levels: 'warp' cannot be raced; choose from eager, jit_step",
    ),
    (
        ["--cores", "0"],
        "argument --cores: must be a whole number >= 1 (cores both sides are pinned to)",
    ),
    (
        ["--iters", "ten"],
        "argument --iters: must be a whole number >= 1 (iterations per fit), got 'ten'",
    ),
]


@pytest.mark.parametrize(
    "flags, message", BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS]
)
def test_bench_refuses_a_bad_flag_by_its_name_before_any_work(
    flags, message, capsys, monkeypatch
):
    def no_work(*args):
        raise AssertionError("work started before the flags were checked")

    monkeypatch.setattr("jitbook.chapters.pln.load_oaks", no_work)
    with pytest.raises(SystemExit) as stop:
        bench.main(["pln", *flags])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("usage: python -m jitbook.bench pln") and "Traceback" not in err
    )
    assert (
        message in err.strip().splitlines()[-1]
    )  # usage, then one line naming the flag


def test_record_without_peers_is_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(
        "jitbook.chapters.pln.load_oaks", lambda *a: pytest.fail("work started")
    )
    with pytest.raises(
        SystemExit, match="--record writes the peers' run: add --peers-python"
    ):
        bench.main(["pln", "--record"])


def test_force_record_without_record_and_too_many_cores_are_refused_before_any_work(
    monkeypatch,
):
    monkeypatch.setattr(
        "jitbook.chapters.pln.load_oaks", lambda *a: pytest.fail("work started")
    )
    with pytest.raises(
        SystemExit, match="--force-record forces --record: add --record NAME"
    ):
        bench.main(["pln", "--peers", "--force-record"])
    with pytest.raises(SystemExit, match="--cores must be between 1 and the "):
        bench.main(["pln", "--peers", "--cores", "4096"])


def test_a_long_step_says_it_is_still_running(capsys):
    import time

    from jitbook.bench.pln import _step

    assert _step("a slow step", lambda: time.sleep(0.35) or 7, every=0.1) == 7
    err = capsys.readouterr().err
    assert (
        err.startswith("... a slow step\n")
        and "    a slow step: still running, 0 s" in err
    )
    assert err.count("still running") >= 2 and "... a slow step: done in 0." in err


def test_help_gives_every_default_and_how_long_a_run_took(capsys):
    with pytest.raises(SystemExit):
        bench.main(["pln", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for default in (
        "(default: 100)",
        "(default: 200)",
        "(default: 5)",
        "(default: 0.0)",
        "(default: 5 x --iters)",
        "(default: scan,fast)",
    ):
        assert default in out
    from jitbook.chapters.pln.peers import latest

    recorded = latest()
    assert recorded is not None, "data/peers/ holds no recorded run"
    said = f"The recorded run `{recorded['command']}` took"  # wrapped at any hyphen
    assert "".join(said.split()) in "".join(out.split())


def test_benchmark_rows_report_compiles_and_per_iteration_times():
    rows, raced = benchmark_levels(
        load_oaks(1), 4, ["eager", "scan", "fast"], rounds=5, eager_iters=2
    )
    eager, scan, fast = rows
    assert scan["note"] == "" and eager["note"].startswith(
        "2 iterations, raced alone (warm); a first fit, "
    )
    once = float(
        eager["note"].split("compiles included: ")[1].split()[0]
    )  # the eager fit a user runs
    assert (
        once == float(f"{eager['first call s'] / 2 * 1e3:.3g}")
        and eager["compiles"] > 0
    )
    assert (
        scan["ms / iter (min)"] <= scan["ms / iter (median)"] <= scan["ms / iter (max)"]
    )
    assert raced.names == ["scan", "fast"] and raced.rounds >= 5 and raced.per == 4
    assert scan["ms / iter (min)"] == round(raced.min("scan") * 1e3, 2)
    with pytest.raises(ValueError, match="rounds must be a positive whole number"):
        benchmark_levels(load_oaks(1), 4, ["scan"], rounds=0)


def test_every_level_starts_from_cold_caches():
    """Compile counts do not depend on the order: each level's first fit clears the caches."""
    (first,), _ = benchmark_levels(load_oaks(1), 3, ["scan"], rounds=5)
    (again,), _ = benchmark_levels(load_oaks(1), 3, ["scan"], rounds=5)
    assert first["compiles"] == again["compiles"] >= 1


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
    np.testing.assert_array_equal(
        fit_jit_iteration_donated(data, 3).losses,
        pln.fit(data, 3, "jit_iteration").losses,
    )
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


def test_newton_time_to_target_reports_first_hit_and_races_the_fit_that_stops_there():
    calls = []
    out, raced = newton_time_to_target(
        load_oaks(1), target=1e12, n_iter=5, rounds=5, pypln=lambda: calls.append(1)
    )
    assert out["iterations to target"] == 1  # every loss is below a huge target
    assert raced.names == ["Newton", "pyPLNmodels fit()"] and raced.rounds == 5 == len(
        calls
    )
    assert out["seconds to target"] == round(raced.min("Newton"), 3)
    out, raced = newton_time_to_target(load_oaks(1), target=0.0, n_iter=5, rounds=2)
    assert out["iterations to target"] is None and out["seconds to target"] is None
    assert raced.names == ["Newton"] and out["ms / iter"] == round(
        raced.min("Newton") / 5 * 1e3, 2
    )


def test_the_donated_iteration_hands_its_state_buffers_to_the_next_state():
    """Donation is honoured on CPU: the state given to the call is deleted after it."""
    import jax.numpy as jnp

    from jitbook.chapters import pln
    from jitbook.chapters.pln.levels import FitState, one_iteration_donated

    data = pln.device_data(load_oaks(1))
    params = pln.init_params(data)
    p = data.Y.shape[1]
    state = FitState(
        params, jnp.eye(p), jnp.eye(p), pln.make_optimizer(1.0).init(params)
    )
    new_state, _ = one_iteration_donated(state, data, 1.0)
    assert state.params.M.is_deleted() and not new_state.params.M.is_deleted()
    assert not data.Y.is_deleted()


# --- a race against another process knows when it cannot tell (fake conditions, passed in)

from jitbook.bench import conditions  # noqa: E402
from jitbook.chapters.pln import peers  # noqa: E402

TIES = [0.100, 0.102, 0.099, 0.101, 0.100]  # one variant's rounds, and its control's


def fit_record(**changes) -> dict:
    """A recording fit to compare: quiet, both sides on cores 0-1 with 2 threads, the
    controls tied, the peer's Timer agreeing with the race."""
    record = {
        "cpu": {"model": "test", "cores": 2},
        "per": 10,
        "race": {
            "fast": [0.050, 0.051, 0.050, 0.052, 0.050],
            "fast (control)": [0.051, 0.050, 0.050, 0.050, 0.052],
            "torch.compile": TIES,
            "torch.compile (control)": TIES[::-1],
            "PyTorch eager": [0.5, 0.51, 0.5, 0.52, 0.5],
        },
        "conditions": {
            "load": {
                "before": [0.4, 0.5, 0.6],
                "after": [0.5, 0.5, 0.6],
                "highest 1-minute": 0.9,
                "readings": 12,
            },
            "JAX": {
                "cores": [0, 1],
                "XLA intra-op threads": 2,
                "OpenBLAS threads inside a fit": 1,
                "env": {"OMP_WAIT_POLICY": "PASSIVE"},
            },
            "peer": {
                "cores": [0, 1],
                "torch threads": 2,
                "torch interop threads": 1,
                "env": {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "2"},
            },
        },
        "cross-check": {
            "torch.compile": {
                "race median s / iter": 0.0100,
                "timer median s / iter": 0.0098,
            }
        },
    }
    for path, value in changes.items():
        *outer, last = path.split(">")
        target = record
        for key in outer:
            target = target[key]
        target[last] = value
    return record


def test_a_quiet_matched_race_with_tied_controls_is_fit_to_compare():
    assert conditions.unfit_reasons(fit_record()) == []
    rows = peers.verdict_rows(fit_record())
    assert [r["warm verdict"] for r in rows] == [
        "fast was 2.0 times faster than torch.compile",
        "fast was 10 times faster than PyTorch eager",
    ]


UNFIT = [
    (
        {"conditions>load>highest 1-minute": 2.0},
        "the load average reached 2 on 2 cores",
    ),
    (
        {"conditions>load>before": [3.5, 1, 1]},
        "the load average reached 3.5 on 2 cores",
    ),
    ({"conditions>load>after": [2.1, 1, 1]}, "the load average reached 2.1 on 2 cores"),
    ({"conditions>peer>cores": [0]}, "JAX ran on cores [0, 1], the peer on [0]"),
    (
        {"conditions>peer>torch threads": 1},
        "the intra-op pools differ: XLA 2 threads, PyTorch 1",
    ),
    (
        {"race>fast (control)": [0.1] * 5},
        "the control failed: fast was 2.0 times faster than itself",
    ),
    (
        {"race>torch.compile (control)": [0.2] * 5},
        "the control failed: torch.compile was 2.0 times faster",
    ),
    (
        {"cross-check>torch.compile>timer median s / iter": 0.003},
        "torch.compile timed alone by torch.utils.benchmark.Timer differs from its time in the race by 3.3",
    ),
]


@pytest.mark.parametrize("changes, why", UNFIT, ids=[w[:40] for _, w in UNFIT])
def test_a_race_unfit_to_compare_says_why_and_draws_no_verdict(changes, why):
    record = fit_record(**changes)
    reasons = conditions.unfit_reasons(record)
    assert any(why in r for r in reasons), reasons
    assert all(
        r["warm verdict"] == "none: not fit to compare"
        for r in peers.verdict_rows(record)
    )


def test_a_race_without_controls_cannot_tell():
    record = fit_record()
    del record["race"]["fast (control)"], record["race"]["torch.compile (control)"]
    assert conditions.unfit_reasons(record) == [
        "no control was raced (no side raced against itself)"
    ]


def test_the_load_is_read_before_during_and_after_a_race():
    readings = iter(
        [(0.5, 0.4, 0.3), (1.7, 0, 0), (2.5, 0, 0), (2.6, 0, 0), (0.8, 0.7, 0.6)]
    )
    last = (0.8, 0.7, 0.6)
    import time

    with conditions.LoadWatch(every=0.05, read=lambda: next(readings, last)) as load:
        time.sleep(0.3)
    got = load.record()
    assert got["before"] == [0.5, 0.4, 0.3] and got["highest 1-minute"] == 2.6
    assert got["readings"] >= 4


def test_an_unfit_race_is_not_recorded_unless_forced_and_then_marked(tmp_path):
    unfit = fit_record(
        **{"conditions>load>highest 1-minute": 9.0, "date": "2026-01-01"}
    )
    with pytest.raises(
        ValueError, match="not recorded, the race was not fit to compare: the load"
    ):
        peers.write_record(unfit, "x", folder=tmp_path)
    assert not (tmp_path / "x.json").exists()
    written = json.loads(
        peers.write_record(unfit, "x", forced=True, folder=tmp_path).read_text()
    )
    assert written["fit to compare"] is False and written["unfit because"][
        0
    ].startswith("the load")
    fit = json.loads(
        peers.write_record(fit_record(date="d"), "y", folder=tmp_path).read_text()
    )
    assert fit["fit to compare"] is True and fit["unfit because"] == []


def test_a_recording_without_conditions_is_unfit_and_draws_no_verdict():
    record = fit_record()
    del record["conditions"]
    assert conditions.unfit_reasons(record) == [
        "the load was not recorded during the race",
        "neither side's cores nor thread pools were recorded",
    ]
    assert all(
        r["warm verdict"] == "none: not fit to compare"
        for r in peers.verdict_rows(record)
    )


def test_xla_pools_are_counted_by_their_threads_names_as_the_backend_sized_them():
    """XLA sizes its intra-op and execute pools from NPROC when its backend starts; the
    count reads the threads themselves, in a fresh process per size."""
    import os
    import subprocess
    import sys

    count = (
        "import json, jax.numpy as jnp; jnp.ones(3).block_until_ready(); "
        "from jitbook.bench.conditions import xla_threads; "
        "print(json.dumps(xla_threads()))"
    )
    for n in (1, 3):
        done = subprocess.run(
            [sys.executable, "-c", count],
            env=os.environ | {"NPROC": str(n)},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(done.stdout) == {
            "XLA intra-op threads": n,
            "XLA inter-op threads": n,
        }
    rows = conditions.conditions_rows(
        fit_record(**{"conditions>JAX>XLA inter-op threads": 2})
    )
    assert rows[0]["inter-op threads"] == 2
    assert conditions.conditions_rows(fit_record())[0]["inter-op threads"] == (
        "not recorded"
    )
