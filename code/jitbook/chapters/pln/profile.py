"""Where the time goes: the compiled program of a one-program level, and a measured
per-operation profile."""

from __future__ import annotations

import collections
import gzip
import json
import os
import re
import tempfile
from pathlib import Path

import jax
from threadpoolctl import threadpool_limits

from jitbook import fresh
from jitbook.chapters.pln.converge import newton_program
from jitbook.chapters.pln.data import check_n_iter, device_data
from jitbook.chapters.pln.fast import fast_program
from jitbook.chapters.pln.levels import namedtuple_program, scan_program
from jitbook.chapters.pln.threads import blas_limited, blas_threads
from jitbook.timing import Race, race

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

    code = (
        "import jax, jax.numpy as jnp\n"
        f"print(jax.jit(jnp.sum).lower(jnp.ones({tuple(shape)!r})).compile().as_text())"
    )
    env = {**os.environ, "XLA_FLAGS": xla_flags}
    text = fresh.python_output(code, env)
    flags = (
        f"`{xla_flags}`" if xla_flags else "(none)"
    )  # in a code span "--" stays two hyphens on the site
    return {
        "XLA_FLAGS": flags,
        "reduce-window": "reduce-window" in text,
        "fusions": text.count(" fusion("),
    }


# XLA bookkeeping inside a fused computation: no arithmetic of its own.
_PLUMBING = {"parameter", "tuple", "bitcast"}


_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%[\w.-]+ = .*? ([\w-]+)\(")


def _computations(hlo: str) -> dict[str, list[str]]:
    """HLO text's computations: name -> the opcodes of its instructions."""
    bodies, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.-]+) \(.*\{$", line)
        if head:
            name, bodies[head.group(1)] = head.group(1), []
        elif name and (op := _INSTRUCTION.match(line)):
            bodies[name].append(op.group(1))
    return bodies


def ynn_fusion_ops(compiled: jax.stages.Compiled) -> dict[str, list[str]]:
    """Each YNN fusion of a compiled program and the operations it computes (XLA's
    bookkeeping left out): the profile's `ynn_fusion` rows read by what they do.

    Taught in The PLN model, made fast, Where the time goes.
    """
    hlo = compiled.as_text()
    bodies = _computations(hlo)
    fusions = re.findall(r"%(ynn_fusion[\w.]*) = .*?calls=%([\w.-]+)", hlo)
    return {
        fusion: sorted({op for op in bodies.get(called, []) if op not in _PLUMBING})
        for fusion, called in fusions
    }


def loops_race(data, n_iter: int, rounds: int = 7, min_time: float = 0.0) -> Race:
    """The compiled loops of the page in one race, per iteration: the scan level with
    OpenBLAS's pool as the process has it and limited to one thread, the fast level
    and the Newton fit (both limited, as `fit` runs them).

    One race, so a change of load on the machine hits every loop alike. Taught in The
    PLN model, made fast, Two thread pools.
    """
    n_iter, data = check_n_iter(n_iter), device_data(data)

    def limited(program):
        def run():
            with blas_limited():
                return program()[0]

        return run

    def as_is():
        with threadpool_limits(limits=None):  # built at each call: it acts when built
            return scan_program(data, n_iter, 1.0)[0]

    loops = {
        f"scan, OpenBLAS as the process has it ({blas_threads()} threads)": as_is,
        "scan, OpenBLAS limited (1 thread)": limited(
            lambda: scan_program(data, n_iter, 1.0)
        ),
        "fast": limited(lambda: fast_program(data, n_iter, 1.0)),
        "newton": limited(lambda: newton_program(data, n_iter)),
    }
    return race(loops, rounds=rounds, min_time=min_time, per=n_iter)


# jax-ml/jax#39103's reproducer (float32 case): a vmapped matrix-vector product, then a
# reduction, wrong under jit on CPU from jaxlib 0.10.2.
_ISSUE_39103 = """
import json, jax, jax.numpy as jnp
i = jnp.arange(32_769, dtype=jnp.float32)
x = jnp.stack((i, jnp.zeros_like(i), jnp.zeros_like(i)), axis=1)
matrix = jnp.eye(3, dtype=jnp.float32)
f = lambda x: jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(x)
print(json.dumps({"jax": jax.__version__, "eager": float(f(x)[-1]),
                  "jit": float(jax.jit(f)(x)[-1])}))
"""


def issue_39103_in_fresh_process() -> dict:
    """The reproducer of jax-ml/jax#39103 in a new process without the book's guard
    flag: its last value eager and jitted, on the installed JAX.

    Taught in The PLN model, made fast, Where the time goes.
    """
    from jitbook.fresh import run_for_json

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return run_for_json(["-c", _ISSUE_39103], "the jax#39103 reproducer", env=env)
