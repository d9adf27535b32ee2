"""Measuring the levels: compile time apart from run time, and time to a target ELBO."""

from __future__ import annotations

import statistics
from time import perf_counter

import jax.numpy as jnp
import numpy as np

from ..cache import count_compiles
from .converge import _fit_newton
from .data import PLNData, check_data
from .levels import LEVELS, fit
from .model import neg_elbo_numpy


def _device_data(data) -> PLNData:
    return PLNData(*map(jnp.asarray, check_data(*data)))


def benchmark_levels(data, n_iter: int, levels=tuple(LEVELS), repeats: int = 3, eager_iters: int = 3) -> list[dict]:
    """One row per level: XLA compile time (first call), then run time over `repeats` warm calls.

    The eager level runs `eager_iters` iterations and its times are scaled to `n_iter` (marked so).
    """
    if repeats < 1 or n_iter < 1 or eager_iters < 1:
        raise ValueError(f"n_iter, repeats and eager_iters must be >= 1, got {n_iter}, {repeats}, {eager_iters}.")
    data = _device_data(data)
    rows = []
    for level in levels:
        k = min(eager_iters, n_iter) if level == "eager" else n_iter
        with count_compiles() as log:
            start = perf_counter()
            fit(data, k, level)
            first = perf_counter() - start
        times = []
        for _ in range(repeats):
            start = perf_counter()
            fit(data, k, level)
            times.append((perf_counter() - start) * n_iter / k)
        median = statistics.median(times)
        rows.append({
            "level": level,
            "compiles": log.count,
            "compile s": round(log.compile_seconds, 2),
            "first call s": round(first + (n_iter - k) * median / n_iter, 2),  # eager: the k run, plus the rest
            "run s (median)": round(median, 3),
            "run s (min)": round(min(times), 3),
            "run s (max)": round(max(times), 3),
            "ms / iter": round(median / n_iter * 1e3, 2),
            "note": f"extrapolated from {k} iterations" if k != n_iter else "",
        })
    return rows


def _final_float64(data: PLNData, state) -> float:
    n = data.Y.shape[0]
    Omega = np.linalg.inv(np.asarray(state.gram, np.float64) / n)
    return neg_elbo_numpy(state.params, data, Omega)


def newton_time_to_target(data, target: float, n_iter: int, repeats: int = 3) -> dict:
    """Run the Newton fit for `n_iter` iterations; report when its loss first reaches `target`."""
    data = _device_data(data)
    with count_compiles() as log:
        _fit_newton(data, n_iter)[0].block_until_ready()
    times = []
    for _ in range(repeats):
        start = perf_counter()
        losses, state = _fit_newton(data, n_iter)
        losses = np.asarray(losses)
        times.append(perf_counter() - start)
    run = statistics.median(times)
    hit = np.flatnonzero(losses <= target)
    first = int(hit[0]) + 1 if hit.size else None
    return {
        "iterations": n_iter,
        "compile s": round(log.compile_seconds, 2),
        "run s (median)": round(run, 3),
        "ms / iter": round(run / n_iter * 1e3, 2),
        "iterations to target": first,
        "seconds to target": None if first is None else round(run * first / n_iter, 2),
        "final loss": f"{float(losses[-1]):,.1f}",
        "final loss, float64": f"{_final_float64(data, state):,.1f}",
        "target loss": f"{float(target):,.1f}",
    }
