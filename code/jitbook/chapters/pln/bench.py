"""Measuring the levels with the book's one timing method (``timing.race``): compile
time apart from run time, the thread contention, time to a target ELBO."""

from __future__ import annotations

from time import perf_counter

import numpy as np
from threadpoolctl import threadpool_limits

from jitbook.arguments import whole_number
from jitbook.bench.conditions import CONTROL, control_of
from jitbook.cache import count_compiles
from jitbook.chapters.pln.converge import fit_newton, newton_program
from jitbook.chapters.pln.data import PLNData, check_n_iter, device_data
from jitbook.chapters.pln.levels import LEVELS, fit, fit_jit_iteration_donated
from jitbook.chapters.pln.model import neg_elbo_numpy
from jitbook.chapters.pln.profile import PROGRAMS
from jitbook.chapters.pln.threads import blas_limited, blas_threads
from jitbook.display import plural
from jitbook.fresh import run_cold
from jitbook.timing import Race, race

# Levels known to be the same compiled loop written differently (their HLO differs only
# in extra outputs): a page shows them agreeing, or says the machine was too noisy.
SAME_LOOP = ("scan", "namedtuple", "pytree", "equinox")
PYPLN = "pyPLNmodels fit()"
# The one-off race's sides: each a fit run once, in a fresh process, imports included.
NEWTON_COLD, PYPLN_COLD = "Newton, cold", "pyPLNmodels fit(), cold"


def _check_rounds(rounds: int, eager_iters: int) -> None:
    for name, value in (("rounds", rounds), ("eager_iters", eager_iters)):
        whole_number(value, name)


def first_fit(data: PLNData, n_iter: int, level: str) -> dict:
    """A level's first fit from cold caches: XLA compiles, compile and call seconds.

    Runs in a fresh process (``run_cold``), so no level reuses programs an earlier one
    compiled and the caller's caches are left alone.
    """
    return run_cold(_first_fit, data, n_iter, level)


def _first_fit(data: PLNData, n_iter: int, level: str) -> dict:
    """``first_fit`` in a process whose caches are empty."""
    with count_compiles() as log:
        start = perf_counter()
        fit(data, n_iter, level)
        first = perf_counter() - start
    return {
        "level": level,
        "compiles": log.count,
        "compile s": round(log.compile_seconds, 2),
        "first call s": round(first, 2),
    }


def benchmark_levels(
    data,
    n_iter: int,
    levels=tuple(LEVELS),
    rounds: int = 5,
    eager_iters: int = 3,
    min_time: float = 0.0,
    peer=None,
    say=None,
    controls=(),
) -> tuple[list[dict], Race]:
    """Every level's first fit (cold caches), then warm fits raced in rounds.

    The eager level runs `eager_iters` iterations, in a race of its own; its times are
    per iteration like the others' (the note says so). With a `peers.Peer`, its
    variants (PyTorch in another interpreter) get a first call each and join the same
    rounds. `say` (a function of one string) hears each first fit and round. Returns
    one row per level and peer variant, and the race (``per=n_iter``: times per
    iteration). Taught in A worked example, What each level costs.
    """
    _check_rounds(rounds, eager_iters)
    n_iter, data = check_n_iter(n_iter), device_data(data)
    say = say or (lambda text: None)
    k = min(eager_iters, n_iter)
    rows = []
    for lv in levels:
        rows.append(first_fit(data, k if lv == "eager" else n_iter, lv))
        say(f"first fit of {lv}: {rows[-1]['first call s']} s")
    variants = {
        lv: lambda lv=lv: fit(data, n_iter, lv).losses for lv in levels if lv != "eager"
    }
    if peer is not None:
        rows += [_peer_first(peer, name, say) for name in peer.variants]
        variants |= {
            name: lambda name=name: peer.call(name)
            for name in [*peer.variants, *map(control_of, controls)]
            if name.removesuffix(CONTROL) in peer.variants
        }
    variants |= {
        control_of(lv): variants[lv]
        for lv in controls
        if lv in levels and lv != "eager"
    }
    # the first fits ran in processes of their own: the race warms every level here
    raced = race(talking(variants, say), rounds=rounds, min_time=min_time, per=n_iter)
    eager = None
    if "eager" in levels:
        eager = race(
            {"eager": lambda: fit(data, k, "eager").losses},
            rounds=rounds,
            min_time=0.0,
            max_rounds=rounds,
            per=k,
        )
    for row in rows:
        lv = row["level"]
        row.update(_per_iter(eager if lv == "eager" else raced, lv))
        if lv == "eager":
            # an eager fit compiles as it goes: a real one pays its first fit's rate
            once = row["first call s"] / k * 1e3
            row["note"] = (
                f"{k} iterations, raced alone (warm); a first fit, compiles included: "
                f"{once:.3g} ms / iter"
            )
        elif lv in getattr(peer, "variants", ()):
            _peer_columns(row, peer, raced.median(lv) * n_iter)
        else:
            row["note"] = ""
    return rows, raced


def _peer_first(peer, name: str, say) -> dict:
    start = perf_counter()
    peer.call(name)
    first = perf_counter() - start
    say(f"first call of {name}: {first:.1f} s")
    return {
        "level": name,
        "compiles": "",
        "compile s": "",
        "first call s": round(first, 2),
    }


def _peer_columns(row: dict, peer, median_fit: float) -> None:
    """Where a peer ran; torch.compile's compile is its first call minus the median."""
    threads = plural(peer.info["torch threads"], "thread")
    row["note"] = f"torch {peer.info['torch']}, {threads}"
    if row["level"].startswith("torch.compile"):
        row["compile s"] = round(row["first call s"] - median_fit, 2)
        row["note"] += ", compile s = first call minus the median fit"


def talking(variants: dict, say, every: float = 5.0) -> dict:
    """The same variants, saying through `say` how far a race has got, at most once
    every `every` seconds (a long race is never silent for long)."""
    done, start, last = [0], perf_counter(), [perf_counter()]

    def wrap(fn):
        def run():
            out = fn()
            done[0] += 1
            now = perf_counter()
            if done[0] % len(variants) == 0 and now - last[0] >= every:
                last[0] = now
                fits = plural(done[0] // len(variants), "fit")
                say(f"race: {fits} of each, {now - start:.0f} s")
            return out

        return run

    return {name: wrap(fn) for name, fn in variants.items()}


def level_row(
    data: PLNData, n_iter: int, level: str, rounds: int = 5, eager_iters: int = 3
) -> dict:
    """One level's row of `benchmark_levels`, raced alone."""
    return benchmark_levels(data, n_iter, [level], rounds, eager_iters)[0][0]


def donation_race(data, n_iter: int, rounds: int = 5, min_time: float = 0.0) -> Race:
    """The Python loop over one jitted iteration, without and with donating its state,
    raced against the scan level (per iteration).

    Taught in A worked example, What each level costs.
    """
    n_iter, data = check_n_iter(n_iter), device_data(data)
    with blas_limited():
        return race(
            {
                "jit_iteration": lambda: fit(data, n_iter, "jit_iteration").losses,
                "jit_iteration, state donated": lambda: (
                    fit_jit_iteration_donated(data, n_iter).losses
                ),
                "scan": lambda: fit(data, n_iter, "scan").losses,
            },
            rounds=rounds,
            min_time=min_time,
            per=n_iter,
        )


def thread_contention(
    data, n_iter: int, level: str = "scan", rounds: int = 5, min_time: float = 0.0
) -> tuple[list[dict], Race]:
    """The compiled loop of `level` with OpenBLAS's pool as the process has it, raced
    against the same loop with the pool limited as `fit` limits it.

    Taught in The PLN model, made fast, Two thread pools.
    """
    n_iter, data = check_n_iter(n_iter), device_data(data)
    program = PROGRAMS[level]
    default_threads = blas_threads()
    with blas_limited():
        limited_threads = blas_threads()

    def limited():
        with blas_limited():
            return program(data, n_iter, 1.0)[0]

    def default():
        # threadpool_limits acts when it is built: build it at every call
        with threadpool_limits(limits=None):
            return program(data, n_iter, 1.0)[0]

    names = {
        f"{default_threads} (as the process has it)": default,
        f"{limited_threads} (limited, as in fit)": limited,
    }
    raced = race(names, rounds=rounds, min_time=min_time, per=n_iter)
    rows = [
        {"OpenBLAS threads": name, "level": level, **_per_iter(raced, name)}
        for name in names
    ]
    return rows, raced


def _per_iter(raced: Race, name: str) -> dict:
    return {
        "ms / iter (min)": round(raced.min(name) * 1e3, 2),
        "ms / iter (median)": round(raced.median(name) * 1e3, 2),
        "ms / iter (max)": round(raced.max(name) * 1e3, 2),
        "rounds": raced.rounds,
    }


def time_to_target(losses, ms_per_iter: float, target: float) -> dict:
    """When a loss curve first reaches `target`: the iteration, and the seconds at
    `ms_per_iter` per iteration (rounded here, once, for the table)."""
    losses = np.asarray(losses)
    hit = np.flatnonzero(losses <= target)
    first = int(hit[0]) + 1 if hit.size else None
    return {
        "iterations": len(losses),
        "ms / iter": round(ms_per_iter, 2),
        "iterations to target": first,
        "seconds to target": None
        if first is None
        else round(first * ms_per_iter / 1e3, 3),
        "final loss": f"{float(losses[-1]):,.1f}",
        "target loss": f"{float(target):,.1f}",
    }


def target_curves(
    fits: dict[str, tuple[np.ndarray, float]], target: float
) -> tuple[dict, list[dict]]:
    """For each fit (its losses and ms per iteration): the gap to ``target`` against
    seconds, and its ``time_to_target`` row; the explorer of the converging fit draws
    them.

    Taught in The PLN model, made fast and convergent, Explore it.
    """
    series, rows = {}, []
    for name, (losses, ms_per_iter) in fits.items():
        losses = np.asarray(losses, dtype=np.float64)
        seconds = np.arange(1, len(losses) + 1) * ms_per_iter / 1e3
        # |gap| on a log axis: a loss at (or a rounding below) the reference is drawn at
        # 1e-8, not dropped
        series[name] = (seconds, np.maximum(np.abs(losses / target - 1), 1e-8))
        rows.append({"fit": name, **time_to_target(losses, ms_per_iter, target)})
    return series, rows


def newton_time_to_target(
    data, target: float, n_iter: int, rounds: int = 5, pypln=None, say=None
) -> tuple[dict, Race]:
    """Run the Newton fit for `n_iter` iterations to find when it first reaches
    `target`, then race the fit that stops there (or the whole fit, if it never does)
    against `pypln` (a function running pyPLNmodels' fit), or alone; see
    `time_to_target`."""
    n_iter, data = check_n_iter(n_iter), device_data(data)
    say = say or (lambda text: None)
    with blas_limited():
        with count_compiles() as log:
            losses, state = newton_program(data, n_iter)
            losses.block_until_ready()
        say(f"Newton fit, {n_iter} iterations, compiled and run")
        stop = time_to_target(losses, 0.0, target)["iterations to target"] or n_iter
        newton_program(data, stop)[0].block_until_ready()  # the loop that stops there
        variants = {"Newton": lambda: newton_program(data, stop)[0]}
        if pypln is not None:
            variants[PYPLN] = pypln
        raced = race(
            talking(variants, say),
            rounds=rounds,
            min_time=0.0,
            max_rounds=rounds,
            warmup=0,
        )
    Omega64 = np.linalg.inv(np.asarray(state.gram, np.float64) / data.Y.shape[0])
    row = time_to_target(losses, raced.min("Newton") / stop * 1e3, target)
    if row["iterations to target"] is not None:  # the loop that stops there was raced
        row["seconds to target"] = round(raced.min("Newton"), 3)
    return {
        "compile s": round(log.compile_seconds, 2),
        **row,
        "final loss, float64": f"{neg_elbo_numpy(state.params, data, Omega64):,.1f}",
    }, raced


def newton_cold(data, n_iter: int) -> dict:
    """A user's first Newton fit, run in a fresh process by the one-off race: the data
    to the device, the compile and `n_iter` iterations; its final loss."""
    return {"final loss": float(fit_newton(data, n_iter).losses[-1])}


def one_off_race(data, n_iter: int, pypln_cold, rounds: int = 5, say=None) -> Race:
    """Time to a result for a fit run once, compiles and imports included: in each
    round the Newton fit (`n_iter` iterations) in a fresh Python process that imports
    JAX, compiles and fits (`fresh.run_cold`), and `pypln_cold` (pyPLNmodels' fit in a
    fresh process of the peers' interpreter), each also raced against itself as a
    control. Seconds per fit, not per iteration."""
    _check_rounds(rounds, 1)
    variants = {
        NEWTON_COLD: lambda: run_cold(newton_cold, data, n_iter),
        PYPLN_COLD: pypln_cold,
    }
    variants |= {control_of(name): fn for name, fn in variants.items()}
    return race(
        talking(variants, say or (lambda text: None), every=0.0),
        rounds=rounds,
        min_time=0.0,
        max_rounds=rounds,
        warmup=0,
    )
