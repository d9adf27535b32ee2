"""The examples of the first chapter: one function run op by op and compiled, and when
jit pays off.

``python -m jitbook.chapters.why_compile headline|price|fingerprints`` races the
chapter's headline comparison, or prices the guard, in a process of its own
(``jitbook.fresh.in_fresh_process`` starts it with or without the guard).
"""

import argparse
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from jitbook import timing
from jitbook.cache import count_compiles, fresh_jit
from jitbook.fresh import run_cold
from jitbook.guard import GUARDED_OPTIONS, OPTIONS
from jitbook.programs import cost_summary


def standardize_softplus(x: jax.Array) -> jax.Array:
    """Softplus of each row standardized to mean 0 and variance 1: elementwise ops and
    reductions, counted by the chapter.

    Op by op, each ``jnp`` function is its own small compiled program that writes its
    whole result; compiled, XLA fuses them into fewer passes over memory.

    Taught in Why compile?, Two ways to run the same function.
    """
    y = jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(
        x, 0.0
    )  # softplus, stable for large |x|
    mean = jnp.mean(y, axis=1, keepdims=True)
    centered = y - mean
    std = jnp.sqrt(jnp.mean(centered**2, axis=1, keepdims=True) + 1e-6)
    return centered / std


def tiny(x: jax.Array) -> jax.Array:
    """A function too small to be worth compiling when it runs once."""
    return x + 1.0


def square(n: int) -> jax.Array:
    """An ``n`` x ``n`` float32 matrix, ready before any stopwatch starts (filling it is
    dispatched asynchronously like any call: it is waited for here, so a timed call
    never times the fill)."""
    return jax.block_until_ready(jax.random.normal(jax.random.key(n), (n, n)))


def heavy_matmul(a: jax.Array) -> jax.Array:
    """``(a @ a) @ a``: a computation long enough that dispatch returns well before it
    ends."""
    return (a @ a) @ a


def ready_when_returned(fn: Callable, *args) -> dict:
    """The floating-point operations XLA's cost analysis counts in ``jax.jit(fn)``'s
    program, and whether its result was ready when a warm call returned.

    On the CPU, XLA runs a program inline, in the call, when that count is below 1,000;
    transcendental functions (``sin``, ``exp``) are not in it. Taught in Why compile?,
    Asynchronous dispatch.
    """
    jitted = jax.jit(fn)
    flops = cost_summary(jitted.lower(*args).compile())["flops"]
    jax.block_until_ready(jitted(*args))  # compiled, and the arguments ready
    start = time.perf_counter()
    out = jitted(*args)
    returned = time.perf_counter() - start
    ready = out.is_ready()
    out.block_until_ready()
    return {
        "flops counted": int(flops),
        "ready when the call returned": ready,
        "call returned after (ms)": 1e3 * returned,
        "result done after (ms)": 1e3 * (time.perf_counter() - start),
    }


def dispatch_and_compute(a: jax.Array) -> tuple[float, float]:
    """Seconds to dispatch ``heavy_matmul(a)`` (no blocking) and to dispatch and compute
    it (blocked), each from a warm start, ``a`` built before either stopwatch.

    Taught in Why compile?, Asynchronous dispatch.
    """
    jax.block_until_ready(heavy_matmul(a))  # compile the matmul program outside both
    start = time.perf_counter()
    pending = heavy_matmul(a)
    dispatch = time.perf_counter() - start
    pending.block_until_ready()
    start = time.perf_counter()
    heavy_matmul(a).block_until_ready()
    return dispatch, time.perf_counter() - start


def break_even_calls(compile_s: float, eager_s: float, jit_s: float) -> float:
    """After how many calls compiling pays off: compile time over the time saved per
    call (inf if none).

    Taught in Why compile?, Op by op against compiled, measured.
    """
    for name, value in (
        ("compile_s", compile_s),
        ("eager_s", eager_s),
        ("jit_s", jit_s),
    ):
        if not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
            raise ValueError(
                f"{name} must be a non-negative number of seconds, got {value!r}."
            )
    saved = eager_s - jit_s
    return math.inf if saved <= 0 else compile_s / saved


def op_by_op_programs(fn: Callable, *args) -> list[str]:
    """The programs one op-by-op ``fn(*args)`` compiles, by name, each once.

    Measured in a fresh process (``run_cold``), where nothing is compiled yet: every
    program ``fn`` needs compiles there, and this process's caches are left as they
    are. ``fn`` is a module-level function. Taught in Why compile?, Two ways to run the
    same function.
    """
    return run_cold(_op_by_op_programs, fn, *args)


def _op_by_op_programs(fn: Callable, *args) -> list[str]:
    """``op_by_op_programs`` in a process whose caches are empty."""
    with count_compiles() as log:
        jax.block_until_ready(fn(*args))
    return log.compiles


def new_wrapper_compiles(fn: Callable, x: jax.Array) -> int:
    """Compiles a new ``jax.jit(fn)`` makes on its first call once ``jax.jit(fn)(x)``
    has compiled: 0 when jit's caches find the executable by the function.

    Warms ``fn`` itself first, so the count does not depend on what an earlier cell
    compiled. Taught in Why compile?, Two ways to run
    the same function.
    """
    jax.block_until_ready(jax.jit(fn)(x))
    with count_compiles() as log:
        jax.block_until_ready(jax.jit(fn)(x))
    return log.count


def headline(x: jax.Array, min_time: float = 1.0) -> timing.Race:
    """``standardize_softplus(x)`` op by op against ``jax.jit``, raced.

    Taught in Why compile?, Op by op against compiled, measured.
    """
    jitted = jax.jit(standardize_softplus)
    return timing.race(
        {
            "op by op": lambda: standardize_softplus(x),
            "jax.jit": lambda: jitted(x),
        },
        rounds=15,
        min_time=min_time,
    )


def cold_and_warm(
    fn: Callable, x: jax.Array, min_time: float = 0.2
) -> tuple[list[dict], timing.Race]:
    """First and later calls of ``fn(x)``, op by op and jitted, each first call cold.

    Pass an ``x`` of a shape nothing has used yet: op by op, the first call compiles
    each primitive for that shape, as the first jitted call compiles the whole
    function. A first call happens once, so it is one measurement; the later calls are
    raced. Taught in Why compile?, A function of one operation.
    """
    ways = {"op by op": fn, "jax.jit": fresh_jit(fn)}
    rows = []
    for way, callable_ in ways.items():
        with count_compiles() as log:
            start = time.perf_counter()
            jax.block_until_ready(callable_(x))
            first = time.perf_counter() - start
        rows.append(
            {
                "way": way,
                "first call (ms)": 1e3 * first,
                "compiles in first call": log.count,
            }
        )
    later = timing.race(
        {way: lambda c=c: c(x) for way, c in ways.items()}, min_time=min_time, warmup=0
    )
    for row in rows:
        row["later calls, min (ms)"] = 1e3 * later.min(row["way"])
    return rows, later


def wrapper_per_call(fn: Callable, x: jax.Array, min_time: float = 0.5) -> timing.Race:
    """One ``jax.jit(fn)`` called again, raced against a new ``jax.jit(fn)`` per call.

    Both find the compiled program in jit's global C++ dispatch cache, the new wrapper
    on its first call too; what the new wrapper adds is the cost of building it.
    Taught in Why compile?, Two ways to run the same function.
    """
    kept = jax.jit(fn)
    return timing.race(
        {
            "one jax.jit, called again": lambda: kept(x),
            "a new jax.jit at every call": lambda: jax.jit(fn)(x),
        },
        min_time=min_time,
    )


HUGE = 3e38  # near float32's largest (3.4e38): its reciprocal is below the normal range


def divide_by_huge(x: jax.Array) -> jax.Array:
    """``x / 3e38``: exact op by op for ``x = 3e38`` (the divisor reaches the division
    as an argument), but compiled, XLA sees a constant, rewrites it, loses the answer.

    Taught in Why compile?, Two ways to run the same function.
    """
    return x / HUGE


# --- explorer


def size_sweep(
    rows: Sequence[int], columns: int = 256, min_time: float = 0.3
) -> list[dict]:
    """``standardize_softplus`` on ``rows`` x ``columns`` arrays: op by op and compiled
    raced, compile time, and the calls after which compiling pays off.

    Taught in Why compile?, Explore it.
    """
    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, Sequence)
        or not rows
        or not all(
            isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rows
        )
    ):
        raise ValueError(
            "rows must be a non-empty list of positive array heights, e.g. "
            f"[16, 256, 4096]; got {rows!r}."
        )
    table = []
    for n in rows:
        x = jax.random.normal(jax.random.key(n), (n, columns))
        first = timing.stages(standardize_softplus, x)
        raced = timing.race(
            {
                "op by op": lambda x=x: standardize_softplus(x),
                "compiled": lambda x=x, c=first.compiled: c(x),  # no second compile
            },
            min_time=min_time,
        )
        compile_s = first.trace + first.lower + first.compile
        verdict = raced.verdict("compiled", "op by op")
        eager_s, jit_s = raced.min("op by op"), raced.min("compiled")
        if verdict.faster:
            pays = math.ceil(break_even_calls(compile_s, eager_s, jit_s))
        else:
            pays = "never" if verdict.faster is False else "no clear saving"
        table.append(
            {
                "rows": n,
                "elements": n * columns,
                "op by op (ms)": 1e3 * eager_s,
                "compiled (ms)": 1e3 * jit_s,
                "compiled was": f"{verdict} op by op",
                "compile (ms)": 1e3 * compile_s,
                "calls to pay off": pays,
            }
        )
    return table


EXPLORER_SHAPE = (8192, 256)  # the largest size why-compile's explorer times


def main_programs(
    rows: int, cols: int, repeat: int, iters: int
) -> dict[str, tuple[Callable, tuple]]:
    """The book's main timed programs, each a function and its arguments (all arrays):
    why-compile's function at the page's size and the explorer's largest, and the PLN
    levels scan and fast."""

    from jitbook.chapters.pln import device_data, load_oaks
    from jitbook.chapters.pln.fast import fast_program
    from jitbook.chapters.pln.levels import scan_program

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
    from jitbook.chapters.pln.threads import blas_limited

    out = {}
    with blas_limited():  # as pln.fit runs the PLN programs
        for name, (fn, args) in main_programs(rows, cols, repeat, iters).items():
            plain = jax.jit(fn)
            guarded = jax.jit(fn, compiler_options=GUARDED_OPTIONS)
            result = timing.race(
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
    rows = []
    for program, times in rounds.items():
        raced = timing.Race(times)
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


def fingerprints(rows: int, cols: int, repeat: int, iters: int) -> dict:
    """A hash of each main program's optimized HLO, compiled with each of ``OPTIONS``:
    equal hashes mean XLA built the same program."""

    out = {}
    for label, options in OPTIONS.items():
        out[label] = {}
        for name, (fn, args) in main_programs(rows, cols, repeat, iters).items():
            lowered = jax.jit(fn, compiler_options=options).lower(*args)
            text = re.sub(r"HloModule \S+", "", lowered.compile().as_text())
            out[label][name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main(argv: list[str] | None = None) -> None:
    """``headline|price|fingerprints --rows R --cols C``: the headline race's rounds,
    the guard's price or its programs' fingerprints, as JSON."""
    parser = argparse.ArgumentParser(prog="python -m jitbook.chapters.why_compile")
    parser.add_argument("what", choices=["headline", "price", "fingerprints"])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=100, help="PLN data repeats")
    parser.add_argument("--iters", type=int, default=20, help="PLN iterations")
    parser.add_argument("--min-time", type=float, default=1.0, help="s per race")
    args = parser.parse_args(argv)
    size = (args.rows, args.cols, args.repeat, args.iters)
    if args.what == "headline":
        x = jax.random.normal(jax.random.key(0), (args.rows, args.cols))
        result = headline(x, args.min_time).times
    elif args.what == "price":
        result = price(*size, args.min_time)
    else:
        result = fingerprints(*size)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
