"""Where the time goes: the compiled program of a one-program level, and a measured
per-operation profile."""

from __future__ import annotations

import collections
import gzip
import json
import tempfile
from pathlib import Path

import jax

from jitbook.chapters.pln.data import device_data
from jitbook.chapters.pln.fast import fast_program
from jitbook.chapters.pln.levels import namedtuple_program, scan_program

PROGRAMS = {
    "scan": scan_program,
    "namedtuple": namedtuple_program,
    "fast": fast_program,
}


def compiled_fit(data, n_iter: int, level: str = "scan") -> jax.stages.Compiled:
    """The compiled XLA program of a one-program level (scan, namedtuple, fast), for its
    cost or HLO text."""
    if level not in PROGRAMS:
        raise ValueError(
            "compiled_fit covers the one-program levels "
            f"{', '.join(map(repr, PROGRAMS))}, got {level!r}."
        )
    return PROGRAMS[level].lower(device_data(data), int(n_iter), 1.0).compile()


def op_profile(run, n_iter: int, top: int | None = 8) -> list[dict]:
    """Run `run()` under the JAX profiler and total the time of each XLA operation, per
    iteration.

    Rows are the `top` most expensive operations (fusions, dots, custom calls), as XLA
    names them; None: all.
    """
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            jax.block_until_ready(run())
        traces = list(Path(tmp).rglob("*.trace.json.gz")) or list(
            Path(tmp).rglob("*.json.gz")
        )
        if not traces:
            raise RuntimeError(
                "the profiler wrote no perfetto trace; is this jax build missing "
                "profiler support?"
            )
        events = json.load(gzip.open(traces[0]))
    events = events["traceEvents"] if isinstance(events, dict) else events
    total = collections.Counter()
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and not name.startswith(
            ("$", "Thunk", "PjitFunction", "Common", "while")
        ):
            total[name] += e.get("dur", 0)
    rows = [
        {"operation": name, "ms / iter": round(us / 1e3 / n_iter, 3)}
        for name, us in total.most_common(top)
    ]
    return rows


def ms_of(rows: list[dict], prefixes: tuple[str, ...]) -> float:
    """Total ms / iter of the profiled operations whose names start with one of
    `prefixes` (e.g. LAPACK calls)."""
    return round(
        sum(r["ms / iter"] for r in rows if r["operation"].startswith(tuple(prefixes))),
        3,
    )


def big_sum_in_fresh_process(xla_flags: str, shape: tuple[int, int]) -> dict:
    """How XLA compiles `jnp.sum` of a `shape` array in a new process run with
    `xla_flags` (the guard's effect).

    A new process, because XLA reads its flags once, when the CPU backend starts.
    """
    import os
    import subprocess
    import sys

    code = (
        "import jax, jax.numpy as jnp\n"
        f"print(jax.jit(jnp.sum).lower(jnp.ones({tuple(shape)!r})).compile().as_text())"
    )
    env = {**os.environ, "XLA_FLAGS": xla_flags}
    text = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flags = (
        f"`{xla_flags}`" if xla_flags else "(none)"
    )  # in a code span "--" stays two hyphens on the site
    return {
        "XLA_FLAGS": flags,
        "reduce-window": "reduce-window" in text,
        "fusions": text.count(" fusion("),
    }
