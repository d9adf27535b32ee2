"""``python -m jitbook.bench gpu``: jit on whatever device JAX has, as one JSON.

Sections (each one's failure is recorded, not fatal, so one run on a borrowed GPU
keeps what it measured): provenance, the PLN levels, the fits at several n (and on
the host CPU), matmul precision, the loop-cost probes, PyTorch eager and
torch.compile, a profiler trace summary, the fast level shaped for the device against
its physical floor, and memory. ``--small`` runs the same code at toy sizes (the test
suite runs it on the CPU). Every time comes from ``timing.race``.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata as md
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from time import perf_counter

import jax
import jax.numpy as jnp
import numpy as np

from jitbook import timing
from jitbook.chapters import gpu
from jitbook.chapters.pln import bench as pln_bench
from jitbook.chapters.pln import device_data, fit, load_oaks
from jitbook.chapters.pln.fast import gram, loss_and_grads, precision
from jitbook.chapters.pln.model import (
    Params,
    closed_form_sigma,
    neg_elbo,
    neg_elbo_numpy,
)
from jitbook.chapters.pln.profile import PROGRAMS
from jitbook.chapters.pln.threads import blas_limited
from jitbook.paths import ROOT

SIZES = {
    "full": dict(
        repeat=100, iters=1000, rounds=5, eager_iters=20,
        scaling=(1, 10, 100, 1000, 4000), scaling_iters=200,
        cpu_scaling=(1, 10, 100), cpu_iters=50, loop_iters=20000,
        loop_sizes=(1000, 1_000_000), profile_iters=50, unrolls=(1, 2, 4, 8),
        matmul=4096, stream=1 << 28,
        levels=("eager", "jit_step", "jit_iteration", "scan", "namedtuple", "pytree",
                "equinox", "fast"),
    ),
    "small": dict(
        repeat=1, iters=20, rounds=5, eager_iters=2, scaling=(1, 2), scaling_iters=10,
        cpu_scaling=(), cpu_iters=5, loop_iters=200, loop_sizes=(1000,),
        profile_iters=5, unrolls=(1, 2), matmul=128, stream=1 << 16,
        levels=("jit_step", "scan", "fast"),
    ),
}  # fmt: skip
SECTIONS = (
    "levels", "dispatch", "precision", "precision_terms", "presets", "torch",
    "loops", "profile", "gpu_level", "scaling", "memory", "command_buffers",
)  # fmt: skip


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
            text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def provenance(argv: list[str], commit: str | None) -> dict:
    """Where, when and with what the run was made: the first thing a page cites."""
    dev = jax.devices()[0]
    smi = ""
    if dev.platform == "gpu":
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            smi = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,memory.total",
                 "--format=csv,noheader"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
    plugins = {
        d.metadata["Name"]: d.version
        for d in md.distributions()
        if d.metadata["Name"]
        and d.metadata["Name"].startswith(("jax-cuda", "jax_cuda"))
    }
    return {
        "device": dev.device_kind,
        "platform": dev.platform,
        "platform version": getattr(dev.client, "platform_version", ""),
        "driver": smi,
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "plugins": plugins,
        "torch": _version("torch"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu cores": os.cpu_count(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m jitbook.bench gpu " + " ".join(argv),
        "commit": commit or _git_commit(),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
    }


def _race_record(raced: timing.Race) -> dict:
    return {"per": raced.per, "times": raced.times}


# --- sections


def levels(cfg: dict, data) -> dict:
    """Every PLN level: first call from cold caches, then interleaved rounds."""
    rows, raced = pln_bench.benchmark_levels(
        data, cfg["iters"], cfg["levels"], cfg["rounds"], cfg["eager_iters"]
    )
    return {"iters": cfg["iters"], "rows": rows, "race": _race_record(raced)}


def dispatch(cfg: dict, data) -> dict:
    """How long the call takes to return, against how long until its result is
    ready: JAX returns before the device has finished."""
    rows = []
    for level in ("scan", "fast"):
        program = PROGRAMS[level]
        with blas_limited():
            jax.block_until_ready(program(data, cfg["iters"], 1.0))
            for _ in range(cfg["rounds"]):
                start = perf_counter()
                out = program(data, cfg["iters"], 1.0)
                returned = perf_counter() - start
                jax.block_until_ready(out)
                rows.append(
                    {"level": level, "returned s": returned,
                     "ready s": perf_counter() - start}
                )  # fmt: skip
    return {"iters": cfg["iters"], "rows": rows}


def _scaling_rows(cfg: dict, repeats, iters: int, where: str) -> list[dict]:
    rows = []
    for r in repeats:
        data = device_data(load_oaks(r))
        for level in ("scan", "fast"):

            def call(level=level, data=data):
                with blas_limited():
                    return PROGRAMS[level](data, iters, 1.0)[0]

            start = perf_counter()
            jax.block_until_ready(call())
            first = perf_counter() - start
            one = timing.race(
                {level: call},
                rounds=cfg["rounds"], min_time=0.0, max_rounds=cfg["rounds"],
                per=iters,
            )  # fmt: skip
            rows.append(
                {"where": where, "level": level, "n": int(data.Y.shape[0]),
                 "iters": iters, "first call s": first,
                 "ms per iter (min)": 1e3 * one.min(level),
                 "ms per iter (median)": 1e3 * one.median(level)}
            )  # fmt: skip
    return rows


def scaling(cfg: dict, data) -> dict:
    """scan and fast at several n on the device, and on the host CPU beside it."""
    rows = _scaling_rows(cfg, cfg["scaling"], cfg["scaling_iters"], "device")
    if jax.devices()[0].platform != "cpu" and cfg["cpu_scaling"]:
        with jax.default_device(jax.devices("cpu")[0]):
            rows += _scaling_rows(cfg, cfg["cpu_scaling"], cfg["cpu_iters"], "host CPU")
    return {"rows": rows}


def _setting(name: str):
    return (
        contextlib.nullcontext()
        if name == "default"
        else jax.default_matmul_precision(name)
    )


def _float64_loss(params, data) -> float:
    B, M, S = (np.asarray(a, np.float64) for a in params)
    Omega = np.linalg.inv((M.T @ M + np.diag(np.sum(S * S, axis=0))) / M.shape[0])
    return neg_elbo_numpy((B, M, S), data, Omega)


@jax.jit
def _fast_loss(params: Params, data):
    """The fast level's loss at `params` (its state rebuilt from them)."""
    state, const, XtY = gpu.fast_start(data)
    g = gram(params.M, params.S)
    Omega, logdet = precision(g, data.Y.shape[0])
    state = state._replace(params=params, gram=g, Omega=Omega, logdet_Omega=logdet)
    return loss_and_grads(params, data, state, const, XtY)[0]


@jax.jit
def _scan_loss(params: Params, data):
    """The scan level's loss at `params`, Omega the closed form's inverse."""
    return neg_elbo(params, data, jnp.linalg.inv(closed_form_sigma(params.M, params.S)))


def precision_section(cfg: dict, data) -> dict:
    """scan and fast under the default matmul precision and under "highest": losses,
    the same loss evaluated at fixed parameters, times, and the HLO's dots."""
    iters, out, finals = cfg["iters"], {"fits": [], "dots": {}}, {}
    for setting in ("default", "highest"):
        for level in ("scan", "fast"):
            with _setting(setting), blas_limited():
                text = PROGRAMS[level].lower(data, iters, 1.0).compile().as_text()
                result = fit(data, iters, level)
            out["dots"][f"{level}, {setting}"] = gpu.dots(text)
            finals[level, setting] = result.params
            out["fits"].append(
                {"level": level, "precision": setting,
                 "final loss": float(result.losses[-1]),
                 "float64 loss of the final parameters":
                     _float64_loss(result.params, data)}
            )  # fmt: skip
    params = finals["scan", "highest"]
    rows = []
    for name, fn in (("scan", _scan_loss), ("fast", _fast_loss)):
        for setting in ("default", "highest"):
            with _setting(setting):
                rows.append({"loss": name, "precision": setting,
                             "value": float(fn(params, data))})  # fmt: skip
    rows.append(
        {"loss": "float64 NumPy", "precision": "float64",
         "value": _float64_loss(params, data)}
    )  # fmt: skip
    out["same parameters"] = rows

    def run(level, setting):
        with _setting(setting), blas_limited():
            return PROGRAMS[level](data, iters, 1.0)[0]

    raced = timing.race(
        {f"{lv}, {s}": (lambda lv=lv, s=s: run(lv, s))
         for lv in ("scan", "fast") for s in ("default", "highest")},
        rounds=cfg["rounds"], min_time=0.0, per=iters,
    )  # fmt: skip
    out["race"] = _race_record(raced)
    return out


PRESETS = ("DEFAULT", "F32_F32_F32", "TF32_TF32_F32", "TF32_TF32_F32_X3",
           "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6")  # fmt: skip


def presets(cfg: dict, data) -> dict:
    """One square float32 matmul under each dot algorithm preset: time, error
    against float64, and whether this backend accepts it."""
    k = cfg["matmul"]
    rng = np.random.default_rng(0)
    a64, b64 = rng.standard_normal((2, k, k))
    exact = a64 @ b64
    a, b = jnp.asarray(a64, jnp.float32), jnp.asarray(b64, jnp.float32)
    calls, rows = {}, []
    for name in PRESETS:
        algo = getattr(jax.lax.DotAlgorithmPreset, name)
        fn = jax.jit(lambda x, y, algo=algo: jnp.matmul(x, y, precision=algo))
        try:
            got = np.asarray(fn(a, b), np.float64)
        except Exception as err:  # noqa: BLE001  an unsupported preset is a finding
            rows.append({"preset": name, "error": str(err).splitlines()[0][:200]})
            continue
        calls[name] = lambda fn=fn: fn(a, b)
        rel = float(np.max(np.abs(got - exact)) / np.max(np.abs(exact)))
        rows.append({"preset": name, "max error / max |entry|": rel})
    raced = timing.race(calls, rounds=cfg["rounds"], min_time=0.0)
    for row in rows:
        if row["preset"] in calls:
            row["ms (min)"] = 1e3 * raced.min(row["preset"])
            row["TFLOP/s"] = 2 * k**3 / raced.min(row["preset"]) / 1e12
    return {"size": k, "rows": rows, "race": _race_record(raced)}


def loops(cfg: dict, data) -> dict:
    """What one turn of a compiled loop costs: static or traced trip count, unroll,
    and a body that cannot fuse across iterations."""
    n, out = cfg["loop_iters"], []
    for size in cfg["loop_sizes"]:
        x = jnp.ones(size, jnp.float32)
        variants = gpu.loop_variants(n)
        calls, info = {}, {}
        for name, variant in variants.items():
            call = gpu.loop_call(variant, x, n)
            fn, static = variant
            args = (x, static if static is not None else jnp.asarray(n))
            text = fn.lower(*args).compile().as_text()
            start = perf_counter()
            jax.block_until_ready(call())
            info[name] = {
                "first call s": perf_counter() - start,
                "kernels per turn": len(gpu.kernels(text, gpu.loop_body(text))),
                "known trip count": gpu.trip_count(text),
            }
            calls[name] = call
        raced = timing.race(calls, rounds=cfg["rounds"], min_time=0.0, per=n)
        for name in calls:
            out.append(
                {"size": size, "variant": name, **info[name],
                 "us per iter (min)": 1e6 * raced.min(name),
                 "us per iter (median)": 1e6 * raced.median(name)}
            )  # fmt: skip
    return {"iters": n, "rows": out}


CB_FLAGS = {
    "default flags": "",
    "command buffers off": "--xla_gpu_enable_command_buffer=",
    "command buffers with loops": "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL",
}


def command_buffers(cfg: dict, data, args) -> dict:
    """The loop probes again in fresh processes under each command-buffer flag (XLA
    reads its flags once, when the backend starts)."""
    if jax.devices()[0].platform != "gpu":
        return {"skipped": "command buffers are an XLA:GPU feature"}
    out = {}
    for label, flag in CB_FLAGS.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "loops.json")
            cmd = [sys.executable, "-m", "jitbook.bench", "gpu", "--only",
                   "loops", "--out", str(path), *["--small"] * args.small]  # fmt: skip
            env = {**os.environ, "XLA_FLAGS": flag}
            subprocess.run(cmd, env=env, check=True, timeout=240)
            out[label] = {"XLA_FLAGS": flag, **json.loads(path.read_text())["loops"]}
    return out


def torch_section(cfg: dict, data) -> dict:
    """PyTorch eager and torch.compile on the same device, raced with JAX."""
    from jitbook.bench import gpu_torch

    missing = gpu_torch.missing()
    if missing:
        return {"skipped": missing}
    return gpu_torch.compare(data, cfg["iters"], cfg["rounds"], _setting)


def profile(cfg: dict, data) -> dict:
    """A profiler trace of scan and fast fits, summarised: kernels per iteration,
    their families, the gaps between them."""
    n, out = cfg["profile_iters"], {}
    for level in ("scan", "fast"):
        with blas_limited():
            jax.block_until_ready(PROGRAMS[level](data, n, 1.0))
            with tempfile.TemporaryDirectory() as tmp:
                start = perf_counter()
                with jax.profiler.trace(tmp, create_perfetto_trace=True):
                    jax.block_until_ready(PROGRAMS[level](data, n, 1.0))
                traced = perf_counter() - start
                path = next(Path(tmp).rglob("perfetto_trace.json.gz"))
                out[level] = {"iters": n, "traced s": traced,
                              **gpu.trace_summary(path, n)}  # fmt: skip
    return out


def _stream_bytes_per_s(cfg: dict, rounds: int) -> float:
    x = jnp.ones(cfg["stream"], jnp.float32)
    copy = jax.jit(lambda x: x * 2.0 + 1.0)
    raced = timing.race({"stream": lambda: copy(x)}, rounds=rounds, min_time=0.0)
    return 2 * x.nbytes / raced.min("stream")


def gpu_level(cfg: dict, data, measured: dict) -> dict:
    """The fast level with its loop unrolled, raced against `fast`, beside the
    physical floor of one iteration on this device (measured bandwidth and matmul
    rate, XLA's count of bytes and FLOPs)."""
    iters = cfg["iters"]
    calls = {"fast": lambda: PROGRAMS["fast"](data, iters, 1.0)[0]}
    for k in cfg["unrolls"]:
        calls[f"unroll={k}"] = lambda k=k: gpu.gpu_program(data, iters, 1.0, k)[0]
    first = {}
    for name, call in calls.items():
        start = perf_counter()
        jax.block_until_ready(call())
        first[name] = perf_counter() - start
    with blas_limited():
        raced = timing.race(calls, rounds=cfg["rounds"], min_time=0.0, per=iters)
    reference = np.asarray(calls["fast"]())
    rows = [
        {"variant": name, "first call s": first[name],
         "ms per iter (min)": 1e3 * raced.min(name),
         "final loss": float(np.asarray(call())[-1]),
         "largest loss difference from fast":
             float(np.max(np.abs(np.asarray(call()) - reference)))}
        for name, call in calls.items()
    ]  # fmt: skip
    cost = gpu.iteration_cost(data)
    bandwidth = _stream_bytes_per_s(cfg, cfg["rounds"])
    rates = {
        r["preset"]: r["TFLOP/s"]
        for r in measured.get("presets", {}).get("rows", [])
        if "TFLOP/s" in r
    }
    flops_rate = 1e12 * rates.get("F32_F32_F32", rates.get("DEFAULT", 1.0))
    floor = max(
        cost["bytes"] / bandwidth, cost["flops"] / flops_rate if flops_rate else 0
    )
    return {
        "rows": rows, "race": _race_record(raced), "cost": cost,
        "bandwidth bytes per s": bandwidth, "float32 flops per s": flops_rate,
        "floor ms per iter": 1e3 * floor,
    }  # fmt: skip


MEMORY_CHILD = (
    "import json, jax, jax.numpy as jnp\n"
    "x = jnp.ones((1 << 28,), jnp.float32).block_until_ready()\n"
    "print(json.dumps(jax.devices()[0].memory_stats()))\n"
)
MEMORY_ENVS = {
    "default": {},
    "XLA_PYTHON_CLIENT_PREALLOCATE=false": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    "XLA_PYTHON_CLIENT_MEM_FRACTION=.25": {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".25"},
}


DONATION_CHILD = (
    "import json, sys, jax\n"
    "from jitbook.chapters.pln import device_data, load_oaks\n"
    "from jitbook.chapters.pln import levels\n"
    "data = device_data(load_oaks(int(sys.argv[2])))\n"
    "getattr(levels, sys.argv[1])(data, 5)\n"
    "print(json.dumps(jax.devices()[0].memory_stats()))\n"
)


def _child_stats(code: str, env: dict, *argv: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XLA_PYTHON")} | env
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
        timeout=180, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory(cfg: dict, data) -> dict:
    """This process's memory_stats, and a fresh process holding a 1 GiB array under
    each preallocation setting."""
    out = {"this process": jax.devices()[0].memory_stats()}
    if jax.devices()[0].platform != "gpu":
        return out | {"children": "memory_stats is None on this backend"}
    children = {k: _child_stats(MEMORY_CHILD, e) for k, e in MEMORY_ENVS.items()}
    repeat = str(cfg["scaling"][-1])
    no_pool = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    donation = {
        name: _child_stats(DONATION_CHILD, no_pool, name, repeat)
        for name in ("fit_jit_iteration", "fit_jit_iteration_donated")
    }
    return out | {"children": children, "donation repeat": repeat, "donation": donation}


# --- the run

# Under the build folder (git ignores _build/): a trial run never shows in `git status`;
# a run the book cites is written with --out data/gpu/NAME.json.
DEFAULT_OUT = Path("_build") / "gpu" / "run.json"


def run(args) -> dict:
    """Every section asked for, in order, the JSON rewritten after each one."""
    cfg = SIZES["small" if args.small else "full"]
    only = [s for s in args.only.split(",") if s] or list(SECTIONS)
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; choose from {SECTIONS}")
    out_path = Path(args.out or DEFAULT_OUT)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    _say(f"writing {out_path}")
    argv = (["--small"] if args.small else []) + (
        ["--only", args.only] if args.only else []
    )
    result = {"provenance": provenance(argv, args.commit), "small": args.small}
    data = device_data(load_oaks(cfg["repeat"]))
    result["shape"] = list(data.Y.shape)
    sections: dict[str, Callable] = {
        "levels": levels, "dispatch": dispatch, "scaling": scaling,
        "precision": precision_section, "precision_terms": precision_terms,
        "presets": presets, "loops": loops,
        "command_buffers": lambda c, d: command_buffers(c, d, args),
        "torch": torch_section, "profile": profile,
        "gpu_level": lambda c, d: gpu_level(c, d, result), "memory": memory,
    }  # fmt: skip
    for name in only:
        start = perf_counter()
        _say(f"... {name}")
        try:
            result[name] = sections[name](cfg, data)
        except Exception:  # noqa: BLE001  one failed section must not cost the rest
            result[name] = {"error": traceback.format_exc()[-3000:]}
            _say(result[name]["error"])
        result.setdefault("seconds", {})[name] = perf_counter() - start
        _say(f"    {name} done in {perf_counter() - start:.1f} s")
        out_path.write_text(json.dumps(result, indent=1, default=_plain))
    return result


def _plain(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def add_parser(sub) -> None:
    """The ``gpu`` subcommand of ``python -m jitbook.bench``."""
    p = sub.add_parser("gpu", help="jit on this device (a GPU if JAX has one): JSON")
    p.add_argument("--small", action="store_true", help="toy sizes (the CPU tests)")
    p.add_argument("--out", default="", help=f"the JSON to write ({DEFAULT_OUT})")
    p.add_argument("--only", default="", help=f"comma-separated of {SECTIONS}")
    p.add_argument("--commit", default="", help="the book's commit, if no git here")
    p.set_defaults(run=lambda args: run(args))


def precision_terms(cfg: dict, data) -> dict:
    """The scan loss at the parameters of a "highest" fit, with its matrix products
    made exact one at a time: which product moves the loss."""
    with _setting("highest"), blas_limited():
        params = PROGRAMS["scan"](data, cfg["iters"], 1.0)[1]
    cases = [("none", ())] + [(d, (d,)) for d in gpu.SCAN_DOTS]
    cases.append(("all four", gpu.SCAN_DOTS))
    rows = []
    for label, exact in cases:
        terms = gpu.loss_terms(params, data, exact)
        rows.append({"exact products": label, "setting": "default"} | _floats(terms))
    with _setting("highest"):
        terms = gpu.loss_terms(params, data)
    rows.append({"exact products": "none", "setting": "highest"} | _floats(terms))
    return {"rows": rows}


def _floats(terms: dict) -> dict:
    return {k: float(v) for k, v in terms.items()}
