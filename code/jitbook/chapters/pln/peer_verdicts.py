"""The recorded peers race read back: each pairing's verdict, the Newton and one-off
races, by the book's verdict rule (`timing.Race`); no verdict from a recording not fit
to compare. Split from `peers`, which also runs as a script in the peers' interpreter.
"""

from __future__ import annotations


def recorded_race(record: dict):
    """The recorded rounds as a `timing.Race`: verdicts by the book's rule."""
    from jitbook.timing import Race

    return Race(record["race"], record["per"], "iter")


# The comparisons the bench and the page make, each named by its pairing: what runs as
# one program on each side. JAX's scan and fast levels compile the whole loop; PyTorch
# offers no compiled whole loop here, so its best is a compiled step in a Python loop.
WHOLE = "whole loop: JAX's one compiled loop against PyTorch's Python loop"
JAX_ONLY = "JAX against JAX"  # the pairings that check JAX's levels among themselves
PAIRS = [
    (
        "jit_iteration",
        "torch.compile, tutorial's algorithm",
        "per step: a compiled iteration called from a Python loop on both sides",
    ),
    (
        "jit_step",
        "PyTorch eager, tutorial's algorithm",
        "per step: a Python loop over "
        "each step's pieces on both sides (JAX's jitted, PyTorch's eager)",
    ),
    ("fast", "torch.compile", WHOLE + ", its step compiled"),
    ("fast", "PyTorch eager", WHOLE + ", eager"),
    ("scan", "torch.compile, tutorial's algorithm", WHOLE + ", its step compiled"),
    ("scan", "PyTorch eager, tutorial's algorithm", WHOLE + ", eager"),
    ("fast", "scan", JAX_ONLY),
    ("scan", "jit_iteration", JAX_ONLY),
    ("scan", "jit_step", JAX_ONLY),
]


def verdicts(raced) -> dict[tuple[str, str], object]:
    """Every pair of `PAIRS` both of whose members ran: its verdict (warm: compiles
    apart)."""
    return {
        (a, b): raced.verdict(a, b)
        for a, b, _ in PAIRS
        if a in raced.names and b in raced.names
    }


def verdict_rows(record: dict) -> list[dict]:
    """The recorded answer, pairing by pairing: each JAX level against the PyTorch
    fits of its algorithm, by the book's verdict rule; no verdict at all when the
    recording was not fit to compare (`unfit_reasons`).

    Taught in The PLN model, made fast and convergent, PyTorch on a CPU.
    """
    from jitbook.bench.conditions import unfit_reasons

    fit, raced = not unfit_reasons(record), recorded_race(record)
    pairing = {(a, b): p for a, b, p in PAIRS}
    return [
        {
            "pairing": pairing[a, b],
            "JAX level": a,
            "PyTorch": b,
            "warm verdict": f"{a} was {v} {b}" if fit else "none: not fit to compare",
        }
        for (a, b), v in verdicts(raced).items()
        if pairing[a, b] != JAX_ONLY
    ]


def newton_verdict(record: dict):
    """The recorded Newton fit against pyPLNmodels' (warm), or None where the run did
    not reach its loss or was not fit to compare."""
    from jitbook.bench.conditions import unfit_reasons

    row = record.get("newton")
    if not row or not row["iterations to target"] or unfit_reasons(record):
        return None
    return newton_race(record).verdict("Newton", "pyPLNmodels fit()")


def one_off_verdict(record: dict):
    """The recorded one-off race, Newton against pyPLNmodels' fit, each run once in a
    fresh process (imports and compiles included); None where the recording has no
    one-off race or was not fit to compare."""
    from jitbook.bench.conditions import unfit_reasons
    from jitbook.chapters.pln.bench import NEWTON_COLD, PYPLN_COLD
    from jitbook.timing import Race

    if not record.get("one-off race") or unfit_reasons(record):
        return None
    return Race(record["one-off race"]["times"]).verdict(NEWTON_COLD, PYPLN_COLD)


def newton_race(record: dict):
    """The recorded race of the Newton fit to pyPLNmodels' loss against its fit."""
    from jitbook.timing import Race

    return Race(record["newton race"])
