"""jit on a GPU: the probes `python -m jitbook.bench gpu` measures, and the chapter's
readers of the recorded runs.

Everything here runs on any device. The probes (loops, dots, the fit shaped for a GPU,
the trace summary) are what the bench times on a GPU and what the tests check on the
CPU; the readers turn a recorded JSON of ``data/gpu/`` into the chapter's tables.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp

from jitbook import timing
from jitbook.chapters.pln import fast
from jitbook.chapters.pln.data import PLNData
from jitbook.chapters.pln.fast import FastState, gram, precision
from jitbook.chapters.pln.model import Params, init_params, log_stirling
from jitbook.chapters.pln.radam import radam_init
from jitbook.display import number

DATA_DIR = Path(__file__).parents[1] / "data" / "gpu"  # package data

# --- compiled loops: what one iteration costs


def _one_kernel(x: jax.Array) -> jax.Array:
    return x * 0.999 + 1e-3


def _walled(x: jax.Array) -> jax.Array:
    """The same kernel behind an optimization barrier: unrolled copies cannot fuse."""
    return jax.lax.optimization_barrier(_one_kernel(x))


def fori_static(x: jax.Array, n: int) -> jax.Array:
    """`n` iterations with a trip count known when tracing (a scan inside)."""
    return jax.lax.fori_loop(0, n, lambda i, x: _one_kernel(x), x)


def fori_traced(x: jax.Array, n: jax.Array) -> jax.Array:
    """`n` iterations, `n` traced: a while loop that tests its condition every turn."""
    return jax.lax.fori_loop(0, n, lambda i, x: _one_kernel(x), x)


def scan_unrolled(x: jax.Array, n: int, unroll: int = 1, fusable: bool = True):
    """`n` iterations of one kernel in `lax.scan`, `unroll` copies of the body per
    turn; ``fusable=False`` walls each copy off so XLA cannot fuse them."""
    body = _one_kernel if fusable else _walled
    return jax.lax.scan(lambda c, _: (body(c), None), x, length=n, unroll=unroll)[0]


def loop_variants(n: int, unrolls=(1, 2, 4, 8, 32)) -> dict:
    """The loop probes, name -> (jitted function, static trip count or None)."""
    out = {
        "fori_loop, static trip count": (jax.jit(fori_static, static_argnums=1), n),
        "fori_loop, traced trip count": (jax.jit(fori_traced), None),
    }
    for k in unrolls:
        out[f"scan, unroll={k}"] = (
            jax.jit(partial(scan_unrolled, unroll=k), static_argnums=1),
            n,
        )
    for k in (unrolls[0], unrolls[-1]):
        fn = partial(scan_unrolled, unroll=k, fusable=False)
        out[f"scan, unroll={k}, body that cannot fuse"] = (
            jax.jit(fn, static_argnums=1),
            n,
        )
    return out


def loop_call(variant: tuple, x: jax.Array, n: int):
    """A zero-argument call of one loop probe on `x`, `n` iterations."""
    fn, static = variant
    if static is None:
        n_traced = jnp.asarray(n)
        return lambda: fn(x, n_traced)
    return lambda: fn(x, n)


# --- reading compiled HLO

_OPCODE = re.compile(r"=\s.*?\s([a-z][\w-]*)\(")
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}


def computations(hlo: str) -> dict[str, list[str]]:
    """The computations of an HLO module's text: name -> its instruction lines."""
    out, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY\s+)?%?([\w.-]+)\s.*\{\s*$", line)
        if head and not line.startswith(" "):
            name = "ENTRY" if line.startswith("ENTRY") else head.group(1)
            out[name] = []
        elif name and line.startswith("  ") and "=" in line:
            out[name].append(line.strip())
    return out


def opcode(line: str) -> str:
    """The opcode of one HLO instruction line (``fusion``, ``while``, ``dot``...)."""
    m = _OPCODE.search(line)
    return m.group(1) if m else "?"


def kernels(hlo: str, computation: str = "ENTRY") -> list[str]:
    """The instructions of `computation` that do work (a fusion, a dot, a library call,
    a loop), not the bookkeeping (parameters, tuples, constants, bitcasts)."""
    comps = computations(hlo)
    if computation not in comps:
        raise KeyError(
            f"no computation {computation!r} in this HLO; it has {sorted(comps)[:8]}."
        )
    return [ln for ln in comps[computation] if opcode(ln) not in _FREE]


def _first_while(hlo: str) -> str:
    for lines in computations(hlo).values():
        for line in lines:
            if opcode(line) == "while":
                return line
    raise ValueError("this program has no while loop: nothing to read a body from.")


def loop_body(hlo: str) -> str:
    """The name of the body computation of the program's first while loop."""
    return re.search(r"body=%?([\w.-]+)", _first_while(hlo)).group(1)


def trip_count(hlo: str) -> int | None:
    """The trip count XLA knows for the first while loop (None: it tests a condition
    at every turn)."""
    m = re.search(r'known_trip_count"?:\{"n":"(\d+)"', _first_while(hlo))
    return int(m.group(1)) if m else None


def _sources(hlo: str) -> dict[str, str]:
    """stack_frame_id -> ``file.py:line`` of the innermost frame, from the module's
    location tables."""
    tables = {}
    for block in ("FileNames", "FileLocations", "StackFrames"):
        m = re.search(rf"^{block}\n(.*?)(?:\n\n|\Z)", hlo, re.M | re.S)
        tables[block] = m.group(1).splitlines() if m else []
    files = {
        ln.split(" ", 1)[0]: Path(ln.split(" ", 1)[1].strip('"')).name
        for ln in tables["FileNames"]
    }
    locs = {}
    for ln in tables["FileLocations"]:
        f = re.search(r"file_name_id=(\d+)", ln)
        line = re.search(r" line=(\d+)", ln)
        locs[ln.split(" ", 1)[0]] = f"{files.get(f.group(1), '?')}:{line.group(1)}"
    frames = {}
    for ln in tables["StackFrames"]:
        loc = re.search(r"file_location_id=(\d+)", ln).group(1)
        frames[ln.split(" ", 1)[0]] = locs.get(loc, "")
    return frames


def _shape(text: str) -> str:
    return text.split("{")[0]


def dots(hlo: str) -> list[dict]:
    """Every matrix product in an HLO text (a ``dot``, or a cuBLAS ``gemm`` call once
    XLA:GPU has rewritten it): shape, precision, algorithm, and the source line."""
    rows, frames = [], _sources(hlo)
    for comp, lines in computations(hlo).items():
        for line in lines:
            op = opcode(line)
            gemm = op == "custom-call" and "gemm" in line
            if op != "dot" and not gemm:
                continue
            shape = _shape(line.split("=", 1)[1].strip().split(" ")[0])
            prec = re.search(r"operand_precision[=\":\[{]+([\w\",]+)", line)
            algo = re.search(r"algorithm[=\":]+\"?([\w]+)", line)
            frame = re.search(r"stack_frame_id=(\d+)", line)
            rows.append(
                {
                    "in": comp,
                    "op": "cuBLAS gemm" if gemm else "dot",
                    "shape": shape,
                    "precision": prec.group(1).replace('"', "").lower()
                    if prec
                    else "default",
                    "algorithm": algo.group(1) if algo else "",
                    "source": frames.get(frame.group(1), "") if frame else "",
                }
            )
    return rows


def lowered_precisions(lowered_text: str) -> list[str]:
    """The precision of every ``dot_general`` in a lowered (StableHLO) program:
    ``DEFAULT`` unless a dot or `jax.default_matmul_precision` asked for more."""
    out = []
    for line in lowered_text.splitlines():
        if "dot_general" in line:
            m = re.search(r"precision = \[(\w+), (\w+)\]", line)
            a = re.search(r"algorithm = <([^>]+)>", line)
            out.append(m.group(1) if m else (a.group(1) if a else "DEFAULT"))
    return out


# --- the fast level shaped for a GPU


fast_iteration = fast.iteration  # the fast level's loop body, for a loop or alone


def fast_start(data: PLNData) -> tuple[FastState, jax.Array, jax.Array]:
    """The fast level's first state and its two loop constants."""
    Y, O, X = data
    n, p = Y.shape
    const = jnp.sum(Y * O) + 0.5 * n * p - jnp.sum(log_stirling(Y))
    params = init_params(data)
    state = FastState(
        params, radam_init(params), gram(params.M, params.S), jnp.eye(p), jnp.zeros(())
    )
    return state, const, X.T @ Y


@partial(jax.jit, static_argnames=("n_iter", "unroll"))
def gpu_program(data: PLNData, n_iter: int, lr, unroll: int = 1):
    """The fast level with `unroll` iterations per loop turn: fewer turns of the loop,
    and XLA may fuse the end of one iteration into the start of the next."""
    state, const, XtY = fast_start(data)
    n = data.Y.shape[0]
    body = partial(fast_iteration, const=const, XtY=XtY, lr=lr, n=n)
    return jax.lax.scan(
        lambda s, _: body(s, data), state, length=n_iter, unroll=unroll
    )[::-1]


def iteration_cost(data: PLNData) -> dict:
    """FLOPs and bytes of one fast iteration, as XLA's cost model counts them."""
    state, const, XtY = fast_start(data)
    step = jax.jit(partial(fast_iteration, n=data.Y.shape[0]))
    cost = step.lower(state, data, const, XtY, 1.0).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {"flops": float(cost["flops"]), "bytes": float(cost["bytes accessed"])}


# --- a profiler trace, summarised

SOLVER = ("getrf", "potrf", "trsm", "xxtrf", "ipiv", "pivot", "cusolver", "lapack")
GEMM = ("gemm", "cutlass", "sgemm", "splitk", "dot")
COPY = ("memcpy", "memset")


def kind_of(name: str) -> str:
    """A kernel's family by its name: solver, matmul, copy or fusion."""
    low = name.lower()
    for label, marks in (("solver", SOLVER), ("matmul", GEMM), ("copy", COPY)):
        if any(m in low for m in marks):
            return label
    return "fusion"


def _device_events(events: list[dict]) -> list[dict]:
    """The trace's kernels: events on a ``/device:`` process, or on the CPU (no device
    process) the events XLA names after an HLO operation."""
    procs = {
        e["pid"]: e["args"].get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    device = {pid for pid, name in procs.items() if name.startswith("/device:")}
    timed = [e for e in events if e.get("ph") == "X" and e.get("dur") is not None]
    if device:
        return [e for e in timed if e["pid"] in device]
    return [e for e in timed if "hlo_op" in e.get("args", {})]


def trace_summary(path: str | Path, n_iter: int, keep: int = 3) -> dict:
    """Kernels per iteration, busy time, gaps and the families of a Perfetto trace of
    an `n_iter`-iteration fit, and `keep` iterations of its timeline."""
    raw = json.load(gzip.open(path))
    events = raw["traceEvents"] if isinstance(raw, dict) else raw
    kern = sorted(_device_events(events), key=lambda e: e["ts"])
    if not kern:
        raise ValueError(f"{path} holds no kernel events to summarise.")
    busy, end = 0.0, kern[0]["ts"]
    for e in kern:  # union of the intervals: overlapping kernels count once
        start, stop = max(e["ts"], end), e["ts"] + e["dur"]
        busy += max(0.0, stop - start)
        end = max(end, stop)
    span = end - kern[0]["ts"]
    by_kind = collections.Counter()
    count_kind = collections.Counter()
    for e in kern:
        by_kind[kind_of(e["name"])] += e["dur"]
        count_kind[kind_of(e["name"])] += 1
    per = max(1, round(len(kern) / n_iter))
    mid = len(kern) // 2
    window = kern[mid : mid + keep * per]
    t0 = window[0]["ts"] if window else 0.0
    return {
        "kernels": len(kern),
        "kernels per iteration": len(kern) / n_iter,
        "span us": span,
        "busy us": busy,
        "gaps us": span - busy,
        "us per iteration": span / n_iter,
        "kinds": {
            k: {"count per iteration": count_kind[k] / n_iter, "us": by_kind[k]}
            for k in by_kind
        },
        "timeline": [
            {
                "start us": round(e["ts"] - t0, 3),
                "us": round(e["dur"], 3),
                "kind": kind_of(e["name"]),
                "name": e["name"][:60],
            }
            for e in window
        ],
    }


# --- where the default matmul precision moves a loss

SCAN_DOTS = ("X @ B", "M^T M in the trace", "(M^T M + D) @ Omega", "M^T M of Sigma")


@partial(jax.jit, static_argnames="exact")
def loss_terms(params: Params, data: PLNData, exact: tuple[str, ...] = ()) -> dict:
    """The scan level's loss at `params` (Omega the closed form's inverse) term by
    term, each of its four matrix products at the default precision unless named in
    `exact`; and the fast level's trace term, taken from one Gram matrix."""
    B, M, S = params
    Y, O, X = data
    n, p = Y.shape

    def mm(name: str, a, b):
        return jnp.matmul(a, b, precision="highest" if name in exact else None)

    S2 = S * S
    D = jnp.diag(jnp.sum(S2, axis=0))
    Omega = jnp.linalg.inv((mm("M^T M of Sigma", M.T, M) + D) / n)
    Z = O + M + mm("X @ B", X, B)
    logdet = n / 2 * jnp.linalg.slogdet(Omega)[1]
    data_term = jnp.sum(Y * Z - jnp.exp(Z + S2 / 2) + 0.5 * jnp.log(S2))
    trace = 0.5 * jnp.trace(
        mm("(M^T M + D) @ Omega", mm("M^T M in the trace", M.T, M) + D, Omega)
    )
    const = 0.5 * n * p - jnp.sum(log_stirling(Y))
    g = gram(M, S)
    fast_trace = 0.5 * jnp.sum(g * precision(g, n)[0])
    return {
        "loss": -(logdet + data_term - trace + const),
        "trace term": trace,
        "n p / 2": jnp.asarray(n * p / 2.0),
        "fast trace term": fast_trace,
    }


# --- reading a recorded run


def load_run(name: str = "h100") -> dict:
    """A recorded run of ``python -m jitbook.bench gpu`` from ``data/gpu/``."""
    path = DATA_DIR / f"{name}.json"
    if not path.exists():
        have = sorted(p.stem for p in DATA_DIR.glob("*.json"))
        raise FileNotFoundError(
            f"no recorded run {name!r} in {DATA_DIR}; it has {have}. Record one with "
            "`python -m jitbook.bench gpu --out data/gpu/NAME.json`."
        )
    return json.loads(path.read_text())


def where(run: dict, section: str = "levels") -> str:
    """The device, versions, date and commit a section of `run` was measured with."""
    prov = run["provenance"]
    for later in run.get("later runs", ()):  # sections measured again, elsewhere
        if section in later["sections"]:
            prov = later["provenance"]
    plugins = ", ".join(f"{k} {v}" for k, v in prov["plugins"].items())
    driver = prov["driver"].split(",")[0]
    return (
        f"{prov['device']}"
        + (f" (driver {driver})" if driver else "")
        + f", jax {prov['jax']}"
        + (f" with {plugins}" if plugins else "")
        + (f", torch {prov['torch']}" if prov.get("torch") else "")
        + f", {prov['date']}, commit {prov['commit']}"
    )


def level_row(run: dict, level: str) -> dict:
    """One level's row of the recorded levels section."""
    for row in run["levels"]["rows"]:
        if row["level"] == level:
            return row
    raise KeyError(f"the recorded run has no level {level!r}.")


def tutorial_rows(run: dict, tutorial: dict) -> list[dict]:
    """The tutorial's GPU seconds beside the recorded run's, level by level: first
    call (compile included, as the tutorial timed) and run alone."""
    iters = run["levels"]["iters"]
    rows = []
    for t in tutorial["levels"]:
        for level in t["book levels"]:
            r = level_row(run, level)
            rows.append(
                {
                    "tutorial": t["tutorial level"],
                    "tutorial s": t["seconds"],
                    "book level": level,
                    "first call s": r["first call s"],
                    "of which compile s": r["compile s"],
                    "run s": round(r["ms / iter (min)"] * iters / 1e3, 2),
                }
            )
    return rows


def race_verdict(race: dict, a: str, b: str) -> timing.Verdict:
    """The book's verdict on two variants of a recorded race."""
    return timing.verdict_from_rounds(race["times"][a], race["times"][b], a, b)


def race_rows(race: dict, names=None, unit: str = "ms") -> list[dict]:
    """Minimum and median per iteration of recorded race variants."""
    scale = {"ms": 1e3, "µs": 1e6}[unit]
    return [
        {
            "variant": name,
            f"{unit} / iter (min)": round(scale * min(t) / race["per"], 3),
            f"{unit} / iter (median)": round(
                scale * sorted(t)[len(t) // 2] / race["per"], 3
            ),
            "rounds": len(t),
        }
        for name, t in race["times"].items()
        if names is None or name in names
    ]


def torch_rows(run: dict) -> list[dict]:
    """PyTorch's first calls and runs, compile apart."""
    rows = []
    for name, r in run["torch"]["rows"].items():
        if "error" in r:
            rows.append({"variant": name, "error": r["error"][:80]})
            continue
        rows.append(
            {
                "variant": name,
                "first call s": round(r["first call s"], 2),
                "first call minus run s": round(
                    r["compile s (first call minus the median run)"], 2
                ),
                "final loss": number(r["final loss"]),
            }
        )
    return rows


def loop_rows(run: dict, section: str = "loops", size: int = 1000) -> list[dict]:
    """The loop probes at one array size: µs per iteration, kernels per loop turn,
    whether XLA knew the trip count."""
    rows = run[section]["rows"] if section == "loops" else run[section]
    return [
        {
            "loop": r["variant"],
            "µs / iter (min)": round(r["us per iter (min)"], 2),
            "kernels per turn": r["kernels per turn"],
            "trip count known": "yes" if r["known trip count"] else "no",
        }
        for r in rows
        if r["size"] == size
    ]


def scaling_series(run: dict) -> tuple[dict, list[dict]]:
    """ms per iteration against n, per level and device (GPU and host CPU)."""
    series, rows = {}, []
    for where_, label in (("device", "GPU"), ("host CPU", "CPU")):
        for level in ("scan", "fast"):
            pts = [
                r
                for r in run["scaling"]["rows"]
                if r["where"] == where_ and r["level"] == level
            ]
            if not pts:
                continue
            name = f"{label} {level}"
            series[name] = (
                [r["n"] for r in pts],
                [r["ms per iter (min)"] for r in pts],
            )
            rows.append(
                {
                    "curve": name,
                    "n from": pts[0]["n"],
                    "n to": pts[-1]["n"],
                    "ms / iter at the smallest n": round(
                        pts[0]["ms per iter (min)"], 3
                    ),
                    "ms / iter at the largest n": round(
                        pts[-1]["ms per iter (min)"], 3
                    ),
                }
            )
    return series, rows


def timeline_series(summary: dict) -> tuple[dict, list[dict]]:
    """A recorded trace's kept iterations as one lane per kernel family: each lane is
    up while a kernel of that family runs."""
    kinds = sorted({e["kind"] for e in summary["timeline"]})
    series, rows = {}, []
    for lane, kind in enumerate(kinds):
        xs, ys = [], []
        for e in summary["timeline"]:
            if e["kind"] == kind:
                end = e["start us"] + e["us"]
                xs += [e["start us"], e["start us"], end, end]
                ys += [lane, lane + 0.8, lane + 0.8, lane]
        series[kind] = (xs, ys)
        info = summary["kinds"][kind]
        rows.append(
            {
                "family": kind,
                "kernels / iteration": round(info["count per iteration"], 1),
                "µs / iteration": round(
                    info["us"] / summary["kernels"] * summary["kernels per iteration"],
                    1,
                ),
            }
        )
    return series, rows


def trace_rows(run: dict) -> list[dict]:
    """Per profiled level: kernels per iteration, busy and idle time per iteration."""
    rows = []
    for level, s in run["profile"].items():
        n = s["iters"]
        fam = s["kinds"]
        rows.append(
            {
                "level": level,
                "kernels / iter": round(s["kernels per iteration"], 1),
                "µs / iter": round(s["us per iteration"], 1),
                "busy µs / iter": round(s["busy us"] / n, 1),
                "gaps µs / iter": round(s["gaps us"] / n, 1),
                "solver kernels / iter": round(
                    fam.get("solver", {}).get("count per iteration", 0), 1
                ),
                "solver µs / iter": round(fam.get("solver", {}).get("us", 0) / n, 1),
            }
        )
    return rows
