"""Where the time goes: XLA's cost estimate and a measured per-operation profile of a compiled fit."""

from __future__ import annotations

import collections
import gzip
import json
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

from .data import PLNData, check_data
from .fast import _fit_fast
from .levels import _fit_namedtuple, _fit_scan

_PROGRAMS = {"scan": _fit_scan, "namedtuple": _fit_namedtuple, "fast": _fit_fast}


def compiled_fit(data, n_iter: int, level: str = "scan") -> jax.stages.Compiled:
    """The compiled XLA program of a one-program level (scan, namedtuple, fast), for its cost or HLO text."""
    if level not in _PROGRAMS:
        raise ValueError(f"compiled_fit covers the one-program levels {', '.join(map(repr, _PROGRAMS))}, got {level!r}.")
    data = PLNData(*map(jnp.asarray, check_data(*data)))
    return _PROGRAMS[level].lower(data, int(n_iter), 1.0).compile()


def cost(compiled) -> dict:
    """XLA's static estimate for one compiled program: flops, transcendentals, bytes accessed."""
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return {k: float(analysis.get(k, 0.0)) for k in ("flops", "transcendentals", "bytes accessed")}


def op_profile(run, n_iter: int, top: int | None = 8) -> list[dict]:
    """Run `run()` under the JAX profiler and total the time of each XLA operation, per iteration.

    Rows are the `top` most expensive operations (fusions, dots, custom calls), as XLA names them; None: all.
    """
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            jax.block_until_ready(run())
        traces = list(Path(tmp).rglob("*.trace.json.gz")) or list(Path(tmp).rglob("*.json.gz"))
        if not traces:
            raise RuntimeError("the profiler wrote no perfetto trace; is this jax build missing profiler support?")
        events = json.load(gzip.open(traces[0]))
    events = events["traceEvents"] if isinstance(events, dict) else events
    total = collections.Counter()
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and not name.startswith(("$", "Thunk", "PjitFunction", "Common", "while")):
            total[name] += e.get("dur", 0)
    rows = [{"operation": name, "ms / iter": round(us / 1e3 / n_iter, 3)} for name, us in total.most_common(top)]
    return rows


def ms_of(rows: list[dict], prefixes: tuple[str, ...]) -> float:
    """Total ms / iter of the profiled operations whose names start with one of `prefixes` (e.g. LAPACK calls)."""
    return round(sum(r["ms / iter"] for r in rows if r["operation"].startswith(tuple(prefixes))), 3)
