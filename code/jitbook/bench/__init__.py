"""Benchmarks that print tables: ``python -m jitbook.bench pln --iters 200 --rounds 7``.

Speed claims live here, not in timed tests. Every time comes from the book's one timing
method (``timing.race``: interleaved rounds, compile excluded, minimum and spread).
Progress (what runs, how long it took) goes to stderr, the tables to stdout. Each
subcommand is a module of this package: ``pln`` (the PLN levels and their peers) and
``gpu`` (jit on whatever device JAX has, written to a JSON that the GPU chapter reads).
"""

from __future__ import annotations

import argparse

import jitbook  # noqa: F401  (sets the XLA flag before JAX computes)
from jitbook.bench import gpu, pln


def main(argv: list[str] | None = None) -> None:
    """Parse the command line (every flag checked before any work) and run it."""
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.bench", description=__doc__
    )
    sub = parser.add_subparsers(dest="benchmark", required=True)
    pln.add_parser(sub)
    gpu.add_parser(sub)
    args = parser.parse_args(argv)
    args.argv = argv
    args.run(args)
