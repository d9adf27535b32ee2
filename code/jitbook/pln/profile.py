"""Where the time goes: XLA's cost estimate and a measured per-operation profile of a compiled fit."""

from __future__ import annotations

import collections
import gzip
import json
import tempfile
from pathlib import Path

import jax


def cost(compiled) -> dict:
    """XLA's static estimate for one compiled program: flops, transcendentals, bytes accessed."""
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return {k: float(analysis.get(k, 0.0)) for k in ("flops", "transcendentals", "bytes accessed")}


def op_profile(run, n_iter: int, top: int = 8) -> list[dict]:
    """Run `run()` under the JAX profiler and total the time of each XLA operation, per iteration.

    Rows are the `top` most expensive operations (fusions, dots, custom calls), as XLA names them.
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
