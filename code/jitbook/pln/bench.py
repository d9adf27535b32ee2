"""Measuring the levels: compile time apart from run time, the thread contention, time to a target ELBO."""

from __future__ import annotations

from time import perf_counter

import numpy as np
from threadpoolctl import threadpool_limits

from ..cache import count_compiles
from ..timing import time_call
from .converge import newton_program
from .data import PLNData, check_n_iter, device_data
from .levels import LEVELS, fit
from .model import neg_elbo_numpy
from .profile import PROGRAMS
from .threads import blas_limited, blas_threads


def level_row(
    data: PLNData, n_iter: int, level: str, repeats: int = 3, eager_iters: int = 3
) -> dict:
    """One level: XLA compiles and the first call, then the median and minimum of `repeats` warm fits.

    The eager level runs `eager_iters` iterations and its times are scaled to `n_iter` (the note says so).
    """
    if repeats < 1 or eager_iters < 1:
        raise ValueError(
            f"repeats and eager_iters must be >= 1, got {repeats} and {eager_iters}."
        )
    k = min(eager_iters, n_iter) if level == "eager" else n_iter
    with count_compiles() as log:
        start = perf_counter()
        fit(data, k, level)
        first = perf_counter() - start
    timing = time_call(fit, data, k, level, repeats=repeats, warmup=0)
    per_iter = timing.median / k
    return {
        "level": level,
        "compiles": log.count,
        "compile s": round(log.compile_seconds, 2),
        "first call s": round(
            first + (n_iter - k) * per_iter, 2
        ),  # eager: the k run, plus the rest
        "ms / iter": round(per_iter * 1e3, 2),
        "ms / iter (min)": round(timing.min / k * 1e3, 2),
        "note": f"extrapolated from {k} iterations" if k != n_iter else "",
    }


def benchmark_levels(
    data, n_iter: int, levels=tuple(LEVELS), repeats: int = 3, eager_iters: int = 3
) -> list[dict]:
    """One row per level (see `level_row`), each level timed on the same data and iterations."""
    n_iter, data = check_n_iter(n_iter), device_data(data)
    return [level_row(data, n_iter, level, repeats, eager_iters) for level in levels]


def thread_contention(
    data, n_iter: int, level: str = "scan", repeats: int = 3
) -> list[dict]:
    """The compiled loop of `level` timed with OpenBLAS's default pool, then limited as `fit` limits it."""
    n_iter, data = check_n_iter(n_iter), device_data(data)
    program = PROGRAMS[level]
    program(data, n_iter, 1.0)[0].block_until_ready()  # compile outside the timings
    rows = []
    # threadpool_limits acts when it is built, not when entered: build each inside the loop.
    for setting, limit in (
        ("default", lambda: threadpool_limits(limits=None)),
        ("limited, as in fit", blas_limited),
    ):
        with limit():
            threads = blas_threads()
            timing = time_call(program, data, n_iter, 1.0, repeats=repeats, warmup=0)
        rows.append(
            {
                "OpenBLAS threads": f"{threads} ({setting})",
                "level": level,
                "ms / iter (median)": round(timing.median / n_iter * 1e3, 2),
                "ms / iter (min)": round(timing.min / n_iter * 1e3, 2),
                "repeats": repeats,
            }
        )
    return rows


def time_to_target(losses, ms_per_iter: float, target: float) -> dict:
    """When a loss curve first reaches `target`: the iteration, and the seconds at `ms_per_iter` per iteration."""
    losses = np.asarray(losses)
    hit = np.flatnonzero(losses <= target)
    first = int(hit[0]) + 1 if hit.size else None
    return {
        "iterations": len(losses),
        "ms / iter": ms_per_iter,
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
    """For each fit (its losses and ms per iteration): the gap to ``target`` against seconds, and its
    ``time_to_target`` row; the explorer of the converging fit draws them.

    Taught in The PLN model, made fast and convergent, Explore it.
    """
    series, rows = {}, []
    for name, (losses, ms_per_iter) in fits.items():
        losses = np.asarray(losses, dtype=np.float64)
        seconds = np.arange(1, len(losses) + 1) * ms_per_iter / 1e3
        # |gap| on a log axis: a loss at (or a rounding below) the reference is drawn at 1e-8, not dropped
        series[name] = (seconds, np.maximum(np.abs(losses / target - 1), 1e-8))
        rows.append({"fit": name, **time_to_target(losses, ms_per_iter, target)})
    return series, rows


def newton_time_to_target(data, target: float, n_iter: int, repeats: int = 3) -> dict:
    """Run the Newton fit for `n_iter` iterations (compiled first, then timed); see `time_to_target`."""
    n_iter, data = check_n_iter(n_iter), device_data(data)
    with blas_limited():
        with count_compiles() as log:
            newton_program(data, n_iter)[0].block_until_ready()
        timing = time_call(newton_program, data, n_iter, repeats=repeats, warmup=0)
        losses, state = newton_program(data, n_iter)
    Omega64 = np.linalg.inv(np.asarray(state.gram, np.float64) / data.Y.shape[0])
    return {
        "compile s": round(log.compile_seconds, 2),
        "run s (median)": round(timing.median, 3),
        **time_to_target(losses, round(timing.median / n_iter * 1e3, 2), target),
        "final loss, float64": f"{neg_elbo_numpy(state.params, data, Omega64):,.1f}",
    }
