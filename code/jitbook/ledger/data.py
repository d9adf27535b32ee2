"""The ledger file: where it lives, reading and writing it, and merging runs."""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from pathlib import Path

from jitbook.paths import DATA, ROOT

LEDGER = DATA / "ledger.json"


# holds, fails (JAX behaves otherwise), n/a (the API is not in that release), could not
# run (the test's own means failed there: it says nothing of JAX's behaviour).
STATUSES = ("holds", "fails", "n/a", "could not run")


def load(path: Path = LEDGER) -> dict:
    """The ledger as stored, or an empty one."""
    if path.exists():
        return json.loads(path.read_text())
    return {"made": {}, "lock": None, "releases": {}, "claims": {}}


def save(ledger: dict, path: Path = LEDGER) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ledger, indent=1, sort_keys=False) + "\n")


def locked_jax(root: Path = ROOT) -> str:
    """The JAX version requirements.lock pins: the book's own release."""
    for line in (root / "requirements.lock").read_text().splitlines():
        if line.startswith("jax=="):
            return line.split("==")[1].strip()
    raise ValueError(
        "requirements.lock pins no jax==...; the ledger needs the book's JAX."
    )


def key(test: str, span: str) -> str:
    """A claim's row in the ledger: the span of its sentence, with the case of a
    parametrised test (``clm-x[case]``): renaming the test keeps the row's history."""
    _, bracket, case = test.rpartition("::")[2].partition("[")
    return span + bracket + case


def unrun(ledger: dict) -> list[tuple[str, str]]:
    """(claim, release) pairs of the ledger without a result: what ``--only-missing``
    runs and ``--check`` refuses."""
    return [
        (claim, release)
        for claim, row in ledger["claims"].items()
        for release in ledger["releases"]
        if release not in row.get("results", {})
    ]


def older_gaps(outcomes: dict, path: Path = LEDGER) -> list[str]:
    """The claims of ``outcomes`` (keyed like the ledger) that some release of the
    ledger has no result for."""
    ledger = load(path)
    return [
        claim
        for claim in sorted(outcomes)
        if any(
            release not in ledger["claims"].get(claim, {}).get("results", {})
            for release in ledger["releases"]
        )
    ]


def lock_disagreements(outcomes: dict, path: Path = LEDGER) -> list[str]:
    """Claims whose status in this run differs from the ledger's column for this JAX;
    ``outcomes`` is keyed like the ledger (``key``)."""
    ledger = load(path)
    lock = metadata.version("jax")  # the column of the JAX this session ran on
    problems = []
    for test, row in sorted(outcomes.items()):
        stored = ledger["claims"].get(test, {}).get("results", {}).get(lock)
        if stored is None:
            problems.append(
                f"  {test}: no row for jax {lock} (make ledger "
                'LEDGER_ARGS="--releases lock --only-missing", a minute or two)'
            )
        elif stored["status"] != row["status"]:
            problems.append(
                f"  {test}: ledger says {stored['status']}, this run {row['status']}"
                + (f" ({row['reason']})" if row["reason"] else "")
            )
    return problems


def machine() -> str:
    """The machine, in words: CPU model, cores, memory, OS."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{model}, {os.cpu_count()} cores, {memory:.0f} GiB, "
        f"{platform.system()} {platform.machine()}"
    )


def title(test: str, words: str | None = None) -> str:
    """A claim's words: its sentence's, else its test's name (``test_a_b[x]`` ->
    ``a b [x]``), with the case of a parametrised test."""
    name = test.split("::")[-1].removeprefix("test_")
    base, _, param = name.partition("[")
    return (words or base.replace("_", " ")) + (f" [{param}" if param else "")


def _order(item) -> tuple:
    return tuple(int(part) for part in item[0].split("."))
