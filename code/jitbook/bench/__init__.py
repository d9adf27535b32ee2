"""Benchmarks that print tables: ``python -m jitbook.bench pln --iters 200 --rounds 7``.

Speed claims live here, not in timed tests. Every time comes from the book's one timing
method (``timing.race``: interleaved rounds, compile excluded, minimum and spread).
Progress (what runs, how long it took) goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from time import perf_counter

import jitbook  # noqa: F401  (sets the XLA flag before JAX computes)
from jitbook.display import table


def _step(what: str, run: Callable):
    """Run one step of a benchmark, saying on stderr what it is and how long it took."""
    print(f"... {what}", end="", file=sys.stderr, flush=True)
    start = perf_counter()
    out = run()
    print(f" done in {perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return out


def _pln(args: argparse.Namespace) -> None:
    if args.peers and not args.peers_python:
        from jitbook.chapters.pln import peers

        missing = peers.peers_missing()
        # said first, so nobody waits for the JAX levels to learn the peers are missing
        if missing:
            print(
                f"--peers: {missing}\nThe JAX levels follow, without the peers.\n",
                flush=True,
            )
            args.peers = False
    from jitbook.chapters.pln import TUTORIAL_REPEAT, device_data, load_oaks
    from jitbook.chapters.pln.bench import (
        SAME_LOOP,
        benchmark_levels,
        donation_race,
        newton_time_to_target,
        thread_contention,
    )
    from jitbook.chapters.pln.converge import (
        PYPLN_REFERENCE_NEG_ELBO,
        PYPLN_REFERENCE_REPEAT,
    )
    from jitbook.chapters.pln.levels import LEVELS
    from jitbook.chapters.pln.profile import PROGRAMS, op_profile
    from jitbook.chapters.pln.threads import blas_limited

    levels = args.levels.split(",") if args.levels else list(LEVELS)
    profiled = [lv for lv in args.profile_levels.split(",") if lv]
    unknown = [lv for lv in levels if lv not in LEVELS] + [
        lv for lv in profiled if lv not in PROGRAMS
    ]
    if unknown:
        raise SystemExit(
            f"unknown level(s) {unknown}; choose from {', '.join(LEVELS)} "
            f"(profiles: {', '.join(PROGRAMS)})"
        )
    raw = load_oaks(args.n_repeat)
    data = device_data(raw)
    n, p = data.Y.shape
    print(
        f"PLN levels, {n:,} x {p}, {args.iters} iterations per fit, ms per iteration: "
        f"minimum, median and maximum over interleaved rounds (at least {args.rounds}, "
        "OpenBLAS limited inside every fit, as pln.fit does)\n"
    )
    rows, raced = _step(
        f"levels {', '.join(levels)}",
        lambda: benchmark_levels(
            data, args.iters, levels, args.rounds, args.eager_iters, args.min_time
        ),
    )
    caption, pypln_loss = None, None
    if args.peers or args.peers_python:
        from jitbook.chapters.pln.peers import add_peers

        caption, pypln_loss = _step(
            "peers (PyTorch eager, torch.compile, pyPLNmodels)",
            lambda: add_peers(rows, raw, args.iters, args.rounds, args.peers_python),
        )
    print(table(rows, caption))
    same = [lv for lv in SAME_LOOP if lv in raced.names]
    if len(same) > 1:
        agree = raced.agree(same)
        print(
            f"\n{', '.join(same)}: one compiled loop written differently; "
            + ("they agree here." if agree else "they disagree: the machine was noisy.")
        )
    for a, b in (("fast", "scan"), ("scan", "jit_iteration"), ("scan", "jit_step")):
        if a in raced.names and b in raced.names:
            print(f"{a} was {raced.verdict(a, b)} {b}.")
    contention_iters = min(args.iters, 50)
    if "jit_iteration" in levels:
        print(f"\nDonating the state of jit_iteration, {contention_iters} iterations\n")
        donated = _step(
            "donation", lambda: donation_race(data, contention_iters, args.rounds)
        )
        print(donated.table)
        print(
            "donated was "
            f"{donated.verdict('jit_iteration, state donated', 'jit_iteration')} "
            "not donated."
        )
    print(f"\nTwo thread pools: the scan level's loop, {contention_iters} iterations\n")
    contention, pools = _step(
        "thread contention",
        lambda: thread_contention(data, contention_iters, "scan", args.rounds),
    )
    print(table(contention))
    limited_verdict = pools.verdict(*reversed(pools.names))
    print(
        f"Limited, the loop was {limited_verdict} with the pool as the process has it."
    )
    for level in profiled:

        def profile(level=level):
            with blas_limited():
                PROGRAMS[level](data, 20, 1.0)[0].block_until_ready()
                return op_profile(lambda: PROGRAMS[level](data, 20, 1.0)[0], 20)

        rows = _step(f"profile of {level}", profile)
        print(
            f"\nProfile of the {level} level: most expensive XLA operations, ms per "
            "iteration\n"
        )
        print(table(rows))
    if args.newton_iters:
        target = (
            pypln_loss
            or PYPLN_REFERENCE_NEG_ELBO * args.n_repeat / PYPLN_REFERENCE_REPEAT
        )
        row = _step(
            f"Newton fit, {args.newton_iters} iterations",
            lambda: newton_time_to_target(data, target, args.newton_iters, args.rounds),
        )
        print(
            f"\nNewton fit, time to the pyPLNmodels reference loss {target:,.0f} "
            f"(reference measured at repeat {TUTORIAL_REPEAT}, scaled)\n"
        )
        print(table([row]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.bench", description=__doc__
    )
    sub = parser.add_subparsers(dest="benchmark", required=True)
    pln = sub.add_parser(
        "pln", help="the PLN worked example: every level, compile and run time"
    )
    pln.add_argument(
        "--n-repeat",
        type=int,
        default=100,
        help="rows of the oaks data repeated (100: the tutorial's size)",
    )
    pln.add_argument("--iters", type=int, default=200, help="iterations per fit")
    pln.add_argument(
        "--rounds",
        "--repeats",
        type=int,
        default=5,
        help="interleaved rounds at least, after one compiling fit per level",
    )
    pln.add_argument(
        "--min-time",
        type=float,
        default=0.0,
        help="seconds of timed fits to reach, in more rounds if needed",
    )
    pln.add_argument(
        "--eager-iters",
        type=int,
        default=3,
        help="iterations actually run by the eager level",
    )
    pln.add_argument(
        "--levels", default="", help="comma-separated subset of levels (default: all)"
    )
    pln.add_argument(
        "--newton-iters",
        type=int,
        default=1000,
        help="iterations of the Newton fit (0: skip)",
    )
    pln.add_argument(
        "--profile-levels",
        default="scan,fast",
        help="levels to profile per XLA operation (scan, fast, ...; empty: none)",
    )
    pln.add_argument(
        "--peers",
        action="store_true",
        help="also time PyTorch eager, torch.compile and pyPLNmodels (optional: pip "
        "install -e .[peers])",
    )
    pln.add_argument(
        "--peers-python",
        default=None,
        help="run the peers in this interpreter (e.g. a venv with torch)",
    )
    pln.set_defaults(run=_pln)
    from jitbook.bench import gpu

    gpu.add_parser(sub)
    args = parser.parse_args(argv)
    args.run(args)
