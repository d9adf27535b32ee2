"""``python -m jitbook.ledger``: fill the ledger, merge runs, or run the canary."""

from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from jitbook.ledger import spans
from jitbook.ledger.data import (
    LEDGER,
    STATUSES,
    _order,
    key,
    load,
    locked_jax,
    machine,
    save,
    title,
    unrun,
)
from jitbook.ledger.plugin import classify, one_line
from jitbook.ledger.venvs import (
    CACHE,
    EXTRAS,
    RELEASES,
    VENV_MB,
    _pip_env,
    _versions,
    collect,
    install,
    megabytes,
    public_index,
    run_release,
    venv_python,
)
from jitbook.workers import connect, say_dashboard


def missing(ledger: dict, release: str) -> list[str]:
    """The claims (ledger keys) without a result on ``release``."""
    return [claim for claim, r in unrun(ledger) if r == release]


def rows(claims: dict, old: dict) -> dict:
    """The ledger's rows for the collected claim tests ({test: [section, span]}): keyed
    by span, titled by the sentence, each keeping the results stored under its key, or
    under its test when the span is new (a renamed span keeps its history too)."""
    words = {span.id: span.words for span in spans.spans()}
    by_test = {row.get("test"): row for row in old.values()}
    out = {}
    for test, (section, span) in claims.items():
        claim = key(test, span)
        before = old.get(claim) or by_test.get(test, {})
        out[claim] = {
            "section": section,
            "title": title(test, words.get(span)),
            "test": test,
            "results": before.get("results", {}),
        }
    return out


def make(args: argparse.Namespace) -> dict:
    """Collect the claims, then fill every release's column that needs it: each
    release a task on Dask's workers; the ledger is written here, release by release
    in the order given, as if they ran one after another.
    """
    ledger = load(args.output)
    lock = locked_jax()
    installed = metadata.version("jax")
    print(f"collecting the claim tests (book's venv, jax {installed})", flush=True)
    claims = collect()
    print(
        f"{len(claims)} claim tests in {len({s for s, _ in claims.values()})} sections",
        flush=True,
    )
    ledger["claims"] = rows(claims, ledger["claims"])
    ledger["lock"] = lock
    work = {}
    releases = [lock if r == "lock" else r for r in args.releases or [*RELEASES, lock]]
    for release in releases:
        known = release in ledger["releases"]
        todo = [
            ledger["claims"][claim]["test"]
            for claim in (
                ledger["claims"]
                if args.force or not known
                else missing(ledger, release)
            )
        ]
        if known and not args.force and not args.only_missing:
            todo = []
        if args.claims:  # a changed claim test: its rows again, whatever they hold
            todo = [
                row["test"]
                for claim, row in ledger["claims"].items()
                if claim.split("[")[0] in args.claims
            ]
        if todo:
            work[release] = todo
        else:
            print(f"jax {release}: nothing to run (--force runs it again)", flush=True)
    if not work:
        return ledger
    with connect(args.scheduler, args.workers) as client:
        say_dashboard(client)
        futures = [
            client.submit(
                run_one, release, todo, args.cache, args.index, args.timeout,
                pure=False, key=f"ledger-jax-{release}",
            )
            for release, todo in work.items()
        ]  # fmt: skip
        for future in futures:  # in the given order: the file grows as it did
            _record(ledger, future.result(), args)
    return ledger


def run_one(release: str, todo: list[str], cache: Path, index, timeout) -> dict:
    """One release's claim tests on a worker: its venv (made if missing), then the
    tests; what the ledger needs as plain data.
    """
    start = time.monotonic()
    if release == metadata.version("jax"):
        python, info = sys.executable, {"released": None, "packages as of": "the lock"}
        info["versions"] = _versions(python)
    else:
        info = install(release, cache, index)
        python = str(venv_python(release, cache))
    setup = time.monotonic() - start
    print(
        f"jax {release}: {len(todo)} claim tests ({setup:.0f} s to set up)", flush=True
    )
    results, seconds = run_release(release, python, todo, timeout)
    return {"release": release, "todo": len(todo), "info": info, "setup": setup,
            "results": results, "seconds": seconds}  # fmt: skip


def _record(ledger: dict, done: dict, args: argparse.Namespace) -> None:
    """One release's results into the ledger, saved at once."""
    release, results, seconds = done["release"], done["results"], done["seconds"]
    if not results:
        print(f"jax {release}: no claim ran; see the errors above", flush=True)
        return
    keys = {row["test"]: claim for claim, row in ledger["claims"].items()}
    for test, row in results.items():
        ledger["claims"][keys[test]]["results"][release] = row
    counts = {s: sum(r["status"] == s for r in results.values()) for s in STATUSES}
    unrun = done["todo"] - len(results)
    print(
        f"jax {release}: {seconds:.0f} s, "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + (f", {unrun} not run" if unrun else ""),
        flush=True,
    )
    previous = ledger["releases"].get(release, {})
    info = done["info"]
    ledger["releases"][release] = info | {
        "run on": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(
            seconds + (previous.get("seconds", 0) if not args.force else 0)
        ),
        "install seconds": info.get("install seconds", round(done["setup"])),
    }
    ledger["made"] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
    }
    ledger["releases"] = dict(sorted(ledger["releases"].items(), key=_order))
    save(ledger, args.output)


def canary(args: argparse.Namespace) -> list[str]:
    """The newest JAX in a scratch venv: which claims change against the lock."""
    ledger = load(args.output)
    lock = ledger.get("lock") or locked_jax()
    folder = args.cache / "canary"
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    python = str(folder / "bin" / "python")
    print(
        f"canary: installing the newest jax, jaxlib, equinox and optax into {folder} "
        f"(about {VENV_MB} MB, replaced at each run; pip also keeps the wheels in "
        "~/.cache/pip; --cache or JITBOOK_LEDGER_CACHE moves the venv)",
        flush=True,
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
         "--index-url", args.index or public_index()[0],
         "jax", "jaxlib", "equinox", "optax", *EXTRAS],
        check=True, env=_pip_env(),
    )  # fmt: skip
    versions = _versions(python)
    print(
        f"canary: jax {versions['jax']}, jaxlib {versions['jaxlib']}; {folder} takes "
        f"{megabytes(folder)} MB (delete it when done)",
        flush=True,
    )
    claims = rows(collect(), ledger["claims"])
    tests = [row["test"] for row in claims.values()]
    results, seconds = run_release(versions["jax"], python, tests, args.timeout)
    moved = []
    for claim, row in claims.items():
        before = row["results"].get(lock)
        now = results.get(row["test"], {"status": "not run", "reason": ""})
        was = before["status"] if before else "no row"
        if was != now["status"]:
            why = f" ({now['reason']})" if now["reason"] else ""
            moved.append(f"  {claim}: {was} on {lock}, {now['status']} on canary{why}")
    print(
        f"canary: jax {versions['jax']} ran {len(results)} claims in {seconds:.0f} s; "
        + (f"{len(moved)} changed against jax {lock}:" if moved else f"none changed "
           f"against jax {lock}."),
        flush=True,
    )  # fmt: skip
    print("\n".join(moved), flush=True)
    return moved


def check(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every claim of the suite has a result on every release of the ledger: the
    check CI runs (``make ledger-check``); ``make test`` only warns about these."""
    ledger = load(args.output)
    ledger["claims"] = rows(collect(), ledger["claims"])
    holes = unrun(ledger)
    for claim, release in holes:
        print(f"  {claim}: not run on jax {release}", flush=True)
    print(
        f"{len(holes)} claim results missing on the ledger's {len(ledger['releases'])} "
        "releases"
        + ('; run make ledger LEDGER_ARGS="--only-missing"' if holes else ""),
        flush=True,
    )
    return holes


def merge(ledgers: list[dict], claims: dict) -> dict:
    """One ledger from several runs: later files add releases and results, for the
    collected claim tests only (``claims``, as ``collect`` gives them): a run made
    before a claim was removed never brings its row back."""
    out = ledgers[0]
    for other in ledgers[1:]:
        out["lock"] = out.get("lock") or other.get("lock")
        out["made"] = other["made"] or out["made"]
        out["releases"].update(other["releases"])
        for test, claim in other["claims"].items():
            mine = out["claims"].setdefault(test, claim | {"results": {}})
            mine["results"].update(
                {
                    r: classify(row | {"reason": one_line(row["reason"])})
                    for r, row in claim["results"].items()
                }
            )
    out["releases"] = dict(sorted(out["releases"].items(), key=_order))
    out["claims"] = rows(claims, out["claims"])
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jitbook.ledger",
        description="Run the book's claim tests on chosen JAX releases; "
        "write data/ledger.json.",
    )
    p.add_argument(
        "--releases", nargs="+", metavar="X.Y.Z",
        help="JAX releases to run, 'lock' for the locked one "
        f"(default: {' '.join(RELEASES)} and the locked one)",
    )  # fmt: skip
    p.add_argument(
        "--force", action="store_true", help="run releases already in the ledger again"
    )
    p.add_argument(
        "--only-missing", action="store_true",
        help="in releases already in the ledger, run only the claims without a row",
    )  # fmt: skip
    p.add_argument(
        "--claims", nargs="+", metavar="CLM",
        help="run only these claims (span ids), rows or not: after changing their test",
    )  # fmt: skip
    p.add_argument(
        "--cache", type=Path, default=CACHE,
        help=f"where the per-release venvs live (default {CACHE}; "
        "env JITBOOK_LEDGER_CACHE)",
    )  # fmt: skip
    p.add_argument(
        "--index",
        default=None,
        help="package index (default: the public one pip knows)",
    )
    p.add_argument(
        "--timeout", type=float, default=1200, help="seconds per release (default 1200)"
    )
    p.add_argument("--output", type=Path, default=LEDGER, help="the ledger file")
    p.add_argument(
        "--scheduler", metavar="ADDRESS", default=None,
        help="a Dask scheduler whose workers run the releases (default: "
        "$DASK_SCHEDULER_ADDRESS, else a local cluster on this machine)",
    )  # fmt: skip
    p.add_argument(
        "--workers", type=int, default=None,
        help="worker processes of the local cluster, one release each at a time "
        "(default: one per core)",
    )  # fmt: skip
    p.add_argument(
        "--merge", nargs="+", type=Path, metavar="JSON",
        help="instead: add the releases and rows of other ledger files (parallel runs)",
    )  # fmt: skip
    p.add_argument(
        "--check", action="store_true",
        help="instead: fail when a claim has no result on a release of the ledger "
        "(what CI runs; make test only warns)",
    )  # fmt: skip
    p.add_argument(
        "--canary", action="store_true",
        help="instead: newest jax from the index in a scratch venv; print claims that "
        "changed against the lock (writes nothing)",
    )  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.merge:
        runs = [load(args.output), *map(load, args.merge)]
        save(merge(runs, collect()), args.output)
    elif args.check:
        return 1 if check(args) else 0
    elif args.canary:
        canary(args)
    else:
        make(args)
    return 0
