"""Guard against a CPU miscompile of fused reductions in current XLA.

On jax 0.10.2 to 0.12.0.1, XLA's experimental YNN fusion on CPU can fuse a reduction of
a sum of two elementwise logs into a wrong result. Taking reductions out of that fusion
gives correct numbers. The flag must be in ``XLA_FLAGS`` before JAX starts its CPU
backend, so ``import jitbook`` sets it first thing.

``python -m jitbook.guard probe|probes|price|fingerprints`` runs the measurements the
book shows in a process of its own (see ``in_fresh_process``); ``run_cold`` runs any
cold measurement there, so no page clears its reader's caches.
"""

import argparse
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

# "-reduce" takes reductions out of the YNN fusion types and leaves the rest at XLA's
# default: the narrowest setting that passes the probe below (the empty value, turning
# YNN fusion off entirely, passes it too).
XLA_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"

# The same setting for one program: jax.jit(f, compiler_options=...). There the option
# takes enum names, not the flag's "-reduce"; XLA's default set is these two.
YNN_OPTION = "xla_cpu_experimental_ynn_fusion_type"
GUARDED_OPTIONS = {YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
DEFAULT_OPTIONS = {
    YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"
}


OFF = "JITBOOK_GUARD"  # set to "off" in a process meant to run without the guard


# XLA aborts on a flag it does not know; an older jaxlib has no YNN fusion
# and no such flag (the claim ledger runs those).
FLAG_SINCE = (0, 8, 3)  # the oldest checked that knows it (0.7.2 does not)


def jaxlib_knows_flag() -> bool:
    """Whether the installed jaxlib accepts the flag (the ledger runs older ones)."""
    from importlib import metadata

    try:
        version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return True
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit()) >= FLAG_SINCE


def apply_cpu_guard() -> bool:
    """Add the flag to ``XLA_FLAGS``; return whether it can still take effect.

    ``JITBOOK_GUARD=off`` in the environment leaves the flags alone: the book starts
    such processes to measure what the guard changes, never to compute its numbers.
    A jaxlib older than the flag (the ledger runs them) would abort on it.
    """
    if os.environ.get(OFF) == "off" or not jaxlib_knows_flag():
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if XLA_FLAG not in flags.split():
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_FLAG}".strip()
    if "jax" in sys.modules:
        from jax._src import (
            xla_bridge,
        )  # no public way to ask whether a backend has started

        if xla_bridge.backends_are_initialized() and XLA_FLAG not in flags.split():
            warnings.warn(
                "JAX's CPU backend started before `import jitbook`, so the guard "
                "against the fused-reduction miscompile is off in this process. "
                "Restart the kernel and import jitbook before running any JAX code.",
                stacklevel=3,
            )
            return False
    return True


PROBE_SHAPE = (11_600, 114)  # the PLN problem size, where the miscompile was found


def miscompile_probe(
    n: int = PROBE_SHAPE[0], p: int = PROBE_SHAPE[1], compiler_options=None
) -> dict:
    """Run the known repro and compare with a float64 NumPy sum.

    Taught in Why compile?, What the guard costs.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = np.random.default_rng(0).uniform(0.5, 5.0, size=(n, p)).astype(np.float32)
    summed = jax.jit(
        lambda x: jnp.sum(jnp.log(2 * x) + jnp.log(3 * x)),
        compiler_options=compiler_options,
    )
    got = float(summed(x))
    x64 = x.astype(np.float64)
    expected = float(np.sum(np.log(2 * x64) + np.log(3 * x64)))
    return {
        "jitted": got,
        "numpy float64": expected,
        "relative error": abs(got - expected) / abs(expected),
        "flag set": XLA_FLAG in os.environ.get("XLA_FLAGS", "").split(),
    }


def in_fresh_process(module: str, *args: str, guarded: bool) -> dict:
    """Run ``python -m jitbook.<module> *args`` in a new process, with or without the
    flag, and return the JSON it prints last.

    A new process, because XLA reads its flags once, when the CPU backend starts.
    """
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f != XLA_FLAG]
    guard = [XLA_FLAG] if guarded and jaxlib_knows_flag() else []  # as import jitbook
    env["XLA_FLAGS"] = " ".join(flags + guard)
    env[OFF] = "on" if guarded else "off"
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root, *filter(None, [env.get("PYTHONPATH")])]
    )
    return run_for_json(
        ["-m", f"jitbook.{module}", *map(str, args)],
        f"python -m jitbook.{module} {' '.join(map(str, args))}",
        env=env,
    )


def run_cold(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a new Python process, where JAX's caches start empty.

    A cold measurement runs here, never by clearing or flooding the caches of the
    process that asks for it (a reader's kernel keeps what it compiled). ``fn`` is a
    module-level function, the arguments picklable (arrays are), the result JSON
    (numbers, strings, lists, dicts). The new process has the guard as this one has.
    """
    with tempfile.TemporaryDirectory() as folder:
        call = Path(folder) / "call.pickle"
        call.write_bytes(pickle.dumps((fn, args, kwargs)))
        return in_fresh_process(
            "guard", "call", str(call), guarded=os.environ.get(OFF) != "off"
        )


def _call(path: str):
    """The new process's side of ``run_cold``: unpickle the call and make it."""
    fn, args, kwargs = pickle.loads(Path(path).read_bytes())
    return fn(*args, **kwargs)


def run_for_json(
    argv: list[str], what: str, env: dict | None = None, timeout: float | None = None
):
    """Run ``python *argv`` in a new process and read the JSON on its last line of
    output; a failure raises with the end of its stderr, named by ``what``."""
    out = subprocess.run(
        [sys.executable, *argv],
        env=dict(os.environ) if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def probe_in_fresh_process(guarded: bool, options: str = "none") -> dict:
    """``miscompile_probe`` in a new process, with or without the flag, its program
    compiled with ``OPTIONS[options]``."""
    return in_fresh_process("guard", "probe", "--options", options, guarded=guarded)


# --- what the guard costs


EXPLORER_SHAPE = (8192, 256)  # the largest size why-compile's explorer times


def main_programs(
    rows: int, cols: int, repeat: int, iters: int
) -> dict[str, tuple[Callable, tuple]]:
    """The book's main timed programs, each a function and its arguments (all arrays):
    why-compile's function at the page's size and the explorer's largest, and the PLN
    levels scan and fast."""
    import jax

    from jitbook.chapters.pln import device_data, load_oaks
    from jitbook.chapters.pln.fast import fast_program
    from jitbook.chapters.pln.levels import scan_program
    from jitbook.chapters.why_compile import standardize_softplus

    data = device_data(load_oaks(repeat))
    programs = {}
    for shape in dict.fromkeys([(rows, cols), EXPLORER_SHAPE]):
        x = jax.random.normal(jax.random.key(0), shape)
        name = f"standardize_softplus, {shape[0]:,} x {shape[1]:,}"
        programs[name] = (standardize_softplus, (x,))
    programs[f"PLN scan level, {iters} iterations"] = (
        lambda data, lr: scan_program(data, iters, lr)[0],
        (data, 1.0),
    )
    programs[f"PLN fast level, {iters} iterations"] = (
        lambda data, lr: fast_program(data, iters, lr)[0],
        (data, 1.0),
    )
    return programs


def price(rows: int, cols: int, repeat: int, iters: int, min_time: float) -> dict:
    """Race every main program compiled without the guard against the same program
    compiled with it (``GUARDED_OPTIONS``, the flag's program): {program: rounds}.

    Run it in a process started without the flag, where jit's default is XLA's.
    Taught in Why compile?, What the guard costs.
    """
    import jax

    from jitbook.chapters.pln.threads import blas_limited
    from jitbook.timing import race

    out = {}
    with blas_limited():  # as pln.fit runs the PLN programs
        for name, (fn, args) in main_programs(rows, cols, repeat, iters).items():
            plain = jax.jit(fn)
            guarded = jax.jit(fn, compiler_options=GUARDED_OPTIONS)
            result = race(
                {
                    "without the guard": lambda p=plain, a=args: p(*a),
                    "with the guard": lambda g=guarded, a=args: g(*a),
                },
                rounds=10,
                min_time=min_time,
            )
            out[name] = result.times
    return out


def price_rows(rounds: dict) -> list[dict]:
    """``price``'s rounds as table rows: each program's minimum without and with the
    guard, and the verdict.

    Taught in Why compile?, What the guard costs.
    """
    from jitbook.timing import Race

    rows = []
    for program, times in rounds.items():
        raced = Race(times)
        verdict = raced.verdict("with the guard", "without the guard")
        rows.append(
            {
                "program": program,
                "without the guard, min (ms)": 1e3 * raced.min("without the guard"),
                "with the guard, min (ms)": 1e3 * raced.min("with the guard"),
                "with the guard it was": f"{verdict} without",
                "rounds": raced.rounds,
            }
        )
    return rows


OPTIONS = {"none": None, "guarded": GUARDED_OPTIONS, "default": DEFAULT_OPTIONS}


def fingerprints(rows: int, cols: int, repeat: int, iters: int) -> dict:
    """A hash of each main program's optimized HLO, compiled with each of ``OPTIONS``:
    equal hashes mean XLA built the same program."""
    import jax

    out = {}
    for label, options in OPTIONS.items():
        out[label] = {}
        for name, (fn, args) in main_programs(rows, cols, repeat, iters).items():
            lowered = jax.jit(fn, compiler_options=options).lower(*args)
            text = re.sub(r"HloModule \S+", "", lowered.compile().as_text())
            out[label][name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jitbook.guard")
    parser.add_argument(
        "what", choices=["probe", "probes", "price", "fingerprints", "call"]
    )
    parser.add_argument("call", nargs="?", help="run_cold's pickled call (call)")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=100, help="PLN data repeats")
    parser.add_argument("--iters", type=int, default=20, help="PLN iterations")
    parser.add_argument("--min-time", type=float, default=1.0, help="s per race")
    parser.add_argument("--options", default="none", choices=list(OPTIONS))
    args = parser.parse_args(argv)
    import jitbook  # noqa: F401  (the guard, unless JITBOOK_GUARD=off)

    size = (args.rows, args.cols, args.repeat, args.iters)
    if args.what == "call":
        result = _call(args.call)
    elif args.what == "probe":
        result = miscompile_probe(compiler_options=OPTIONS[args.options])
    elif args.what == "probes":
        result = {k: miscompile_probe(compiler_options=o) for k, o in OPTIONS.items()}
    elif args.what == "price":
        result = price(*size, args.min_time)
    else:
        result = fingerprints(*size)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
