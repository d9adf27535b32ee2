"""What a race against another process ran under, and whether it was fit to compare.

A race against another library is fair only when both sides had the same CPU budget
(the same cores, pinned, and the same thread counts), the machine was not busier than
its cores at any point, and each side raced against itself came out "about the same"
(the controls). `unfit_reasons` reads all of that from a recording's own fields, so the
bench (before `--record` writes) and a page (before it draws a verdict) ask the same
question of the same data. It imports no chapter code.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from jitbook.display import plural
from jitbook.timing import verdict_from_rounds

# Every variable that sizes a thread pool on either side, or how its threads wait.
THREAD_ENV = (
    "XLA_FLAGS",
    "NPROC",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_WAIT_POLICY",
)
CONTROL = " (control)"  # a variant's second name: the same work raced against itself
# XLA:CPU's thread pools, by the name its threads carry: the intra-op pool (the work
# inside an operation) and the execute pool (whole compiled programs). Both are sized
# when the backend starts, from NPROC or else the CPUs the process may run on; XLA_FLAGS
# holds the rest (e.g. --xla_cpu_multi_thread_eigen=false keeps operations on one
# thread). Counted, not assumed: `xla_threads`.
XLA_POOLS = {
    "XLA intra-op threads": "tf_XLAEigen",
    "XLA inter-op threads": "tf_XLAExecute",
}


def control_of(name: str) -> str:
    """The name under which `name` races against itself."""
    return name + CONTROL


def budget(cores: int, allowed: Sequence[int] | None = None) -> list[int]:
    """The first `cores` CPUs this process may run on: the cores both sides are pinned
    to."""
    allowed = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    if not 1 <= cores <= len(allowed):
        raise ValueError(
            f"--cores must be between 1 and the {len(allowed)} CPUs this process may "
            f"use ({allowed}), got {cores}."
        )
    return allowed[:cores]


def peer_env(cores: Sequence[int]) -> dict[str, str]:
    """The environment of the peer's process: every pool it has sized to the budget,
    and threads that sleep rather than spin while they wait (a spinning OpenMP pool
    collapses on a shared machine)."""
    n = str(len(cores))
    return {
        "OMP_NUM_THREADS": n,
        "OPENBLAS_NUM_THREADS": n,
        "MKL_NUM_THREADS": n,
        "OMP_WAIT_POLICY": "PASSIVE",
    }


def pin_jax(cores: Sequence[int]) -> dict:
    """Pin this process to `cores`; XLA sizes its CPU intra-op pool from the CPUs the
    process may run on when its backend starts (or from NPROC), so the pool matches
    the budget when the backend starts after this, or had the same CPUs before it.
    What it got, for the record."""
    from jax._src import xla_bridge

    started = xla_bridge.backends_are_initialized()
    before = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cores)
    pool = len(before) if started else len(cores)
    if os.environ.get("NPROC", "").isdigit():
        pool = int(os.environ["NPROC"])
    return {
        "cores": sorted(os.sched_getaffinity(0)),
        "XLA intra-op threads": pool,
        "XLA backend started before pinning": started,
        "env": {k: os.environ.get(k) for k in THREAD_ENV},
    }


def xla_threads(tasks: str = "/proc/self/task") -> dict:
    """XLA's CPU thread pools as this process has them, counted by their threads'
    names in `tasks` (empty where threads cannot be listed, as off Linux)."""
    try:
        names = [Path(tasks, t, "comm").read_text().strip() for t in os.listdir(tasks)]
    except OSError:
        return {}
    return {key: names.count(name) for key, name in XLA_POOLS.items()}


class LoadWatch:
    """The 1-minute load average, read before, every `every` seconds during, and after
    a race (`with LoadWatch() as load:`); `read` is the reading function (default
    `os.getloadavg`)."""

    def __init__(self, every: float = 5.0, read: Callable | None = None):
        self.every, self.read = every, read or os.getloadavg
        self.samples: list[float] = []
        self.before = self.after = None
        self._done = threading.Event()

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            self.samples.append(round(self.read()[0], 2))

    def __enter__(self) -> LoadWatch:
        self.before = [round(x, 2) for x in self.read()]
        self.samples.append(self.before[0])
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.after = [round(x, 2) for x in self.read()]
        self.samples.append(self.after[0])

    def record(self) -> dict:
        return {
            "before": self.before,
            "after": self.after,
            "highest 1-minute": max(self.samples),
            "readings": len(self.samples),
        }


def _load_reasons(record: dict) -> list[str]:
    cores = record["cpu"]["cores"]
    load = record.get("conditions", {}).get("load")
    if load is None:
        return ["the load was not recorded during the race"]
    readings = [load["highest 1-minute"], load["before"][0], load["after"][0]]
    if max(readings) >= cores:
        return [
            f"the load average reached {max(readings):g} on {cores} cores (a race "
            "needs the load below the cores throughout)"
        ]
    return []


def _budget_reasons(record: dict) -> list[str]:
    cond = record.get("conditions")
    if cond is None:
        return ["neither side's cores nor thread pools were recorded"]
    jax, peer = cond["JAX"], cond.get("peer")
    reasons = []
    if peer is None:
        return reasons
    if peer["cores"] != jax["cores"]:
        reasons.append(f"JAX ran on cores {jax['cores']}, the peer on {peer['cores']}")
    threads = {"XLA": jax["XLA intra-op threads"], "PyTorch": peer["torch threads"]}
    if len(set(threads.values())) > 1:
        reasons.append(
            "the intra-op pools differ: "
            + ", ".join(f"{k} {plural(v, 'thread')}" for k, v in threads.items())
        )
    return reasons


def _control_reasons(record: dict) -> list[str]:
    """The controls of the warm race and, where recorded, of the one-off race."""
    races = [record.get("race", {})]
    if record.get("one-off race"):
        races.append(record["one-off race"]["times"])
    reasons = []
    for race in races:
        controls = [name for name in race if name.endswith(CONTROL)]
        if not controls:
            reasons.append("no control was raced (no side raced against itself)")
        for name in controls:
            base = name.removesuffix(CONTROL)
            v = verdict_from_rounds(race[base], race[name], base, name)
            if v.decisive:
                reasons.append(f"the control failed: {base} was {v} itself")
    return reasons


def _crosscheck_reasons(record: dict, tolerance: float) -> list[str]:
    reasons = []
    for name, alone in record.get("cross-check", {}).items():
        ratio = alone["race median s / iter"] / alone["timer median s / iter"]
        if max(ratio, 1 / ratio) > tolerance:
            reasons.append(
                f"{name} timed alone by torch.utils.benchmark.Timer differs from its "
                f"time in the race by {max(ratio, 1 / ratio):.1f} times"
            )
    return reasons


def unfit_reasons(record: dict, tolerance: float = 1.5) -> list[str]:
    """Why a race recorded as `record` cannot support a verdict (empty: it can).

    Reads only the recording: the load before, during and after, the cores and pools of
    both sides, the controls' rounds, and the peer timed alone (differing from the race
    by more than `tolerance` times).
    """
    return (
        _load_reasons(record)
        + _budget_reasons(record)
        + _control_reasons(record)
        + _crosscheck_reasons(record, tolerance)
    )


def conditions_rows(record: dict) -> list[dict]:
    """The conditions of a recorded race as a table: one row per side."""
    cond = record.get("conditions")
    if cond is None:
        return []
    jax, rows = cond["JAX"], []
    rows.append(
        {
            "side": "JAX",
            "cores pinned": jax["cores"],
            "intra-op threads": jax["XLA intra-op threads"],
            "inter-op threads": jax.get("XLA inter-op threads", "not recorded"),
            "BLAS threads": f"{jax['OpenBLAS threads inside a fit']} inside a fit",
            "OMP_WAIT_POLICY": jax["env"].get("OMP_WAIT_POLICY") or "unset",
        }
    )
    peer = cond.get("peer")
    if peer is not None:
        rows.append(
            {
                "side": "PyTorch",
                "cores pinned": peer["cores"],
                "intra-op threads": peer["torch threads"],
                "inter-op threads": peer["torch interop threads"],
                "BLAS threads": peer["env"].get("OPENBLAS_NUM_THREADS")
                or peer["env"].get("MKL_NUM_THREADS"),
                "OMP_WAIT_POLICY": peer["env"].get("OMP_WAIT_POLICY"),
            }
        )
    return rows
