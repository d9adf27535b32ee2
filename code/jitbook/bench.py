"""Benchmarks that print tables: ``python -m jitbook.bench pln --n-repeat 100 --iters 1000 --repeats 3``.

Speed claims live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import functools
import sys

import jitbook  # noqa: F401  (sets the XLA flag before JAX computes)

from .display import table


def _pln(args: argparse.Namespace) -> None:
    from .pln import levels as levels_mod
    from .pln import load_oaks
    from .pln.bench import benchmark_levels, newton_time_to_target
    from .pln.converge import PYPLN_REFERENCE_NEG_ELBO, PYPLN_REFERENCE_REPEAT
    from .pln.levels import LEVELS

    levels = args.levels.split(",") if args.levels else list(LEVELS)
    unknown = [lv for lv in levels if lv not in LEVELS]
    unknown += [lv for lv in filter(None, args.profile_levels.split(",")) if lv not in ("scan", "fast")]
    if unknown:
        raise SystemExit(f"unknown level(s) {unknown}; choose from {', '.join(LEVELS)}")
    from .pln.threads import set_blas_threads

    if args.blas_threads:
        set_blas_threads(args.blas_threads)
    data = load_oaks(args.n_repeat)
    n, p = data.Y.shape
    blas = f"SciPy OpenBLAS threads: {args.blas_threads}" if args.blas_threads else "SciPy OpenBLAS threads: default"
    print(f"PLN levels, {n:,} x {p}, {args.iters} iterations, {args.repeats} repeats; {blas}\n")
    rows, caption, pypln_loss = benchmark_levels(data, args.iters, levels, args.repeats, args.eager_iters), None, None
    if args.peers or args.peers_python:
        from .pln.peers import add_peers

        caption, pypln_loss = add_peers(rows, data, args.iters, args.repeats, args.peers_python)
    print(table(rows, caption))
    for level in filter(None, args.profile_levels.split(",")):
        import jax.numpy as jnp

        from .pln.data import PLNData
        from .pln.profile import op_profile

        jdata = PLNData(*map(jnp.asarray, data))
        fit_fn = {"scan": levels_mod._fit_scan, "fast": levels_mod._fit_fast}[level]
        fit_fn(jdata, 20, 1.0)
        print(f"\nProfile of the {level} level: most expensive XLA operations, ms per iteration\n")
        print(table(op_profile(functools.partial(fit_fn, jdata, 20, 1.0), 20)))
    if args.newton_iters:
        target = pypln_loss or PYPLN_REFERENCE_NEG_ELBO * args.n_repeat / PYPLN_REFERENCE_REPEAT
        print(f"\nNewton fit, time to the pyPLNmodels reference loss {target:,.0f}\n")
        print(table([newton_time_to_target(data, target, args.newton_iters, args.repeats)]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jitbook.bench", description=__doc__)
    sub = parser.add_subparsers(dest="benchmark", required=True)
    pln = sub.add_parser("pln", help="the PLN worked example: every level, compile and run time")
    pln.add_argument("--n-repeat", type=int, default=100, help="rows of the oaks data repeated (100: 11,600 x 114)")
    pln.add_argument("--iters", type=int, default=1000, help="iterations per fit")
    pln.add_argument("--repeats", type=int, default=3, help="timed runs per level, after one compiling run")
    pln.add_argument("--eager-iters", type=int, default=3, help="iterations actually run by the eager level")
    pln.add_argument("--levels", default="", help="comma-separated subset of levels (default: all)")
    pln.add_argument("--newton-iters", type=int, default=1000, help="iterations of the Newton fit (0: skip)")
    pln.add_argument("--profile-levels", default="scan,fast",
                     help="levels to profile per XLA operation (scan, fast; empty: none)")
    pln.add_argument("--blas-threads", type=int, default=1,
                     help="threads for the LAPACK calls JAX makes through SciPy's OpenBLAS (0: leave as is)")
    pln.add_argument("--peers", action="store_true", help="add PyTorch eager, torch.compile and pyPLNmodels rows")
    pln.add_argument("--peers-python", default=None, help="run the peers in this interpreter (e.g. a venv with torch)")
    pln.set_defaults(run=_pln)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
