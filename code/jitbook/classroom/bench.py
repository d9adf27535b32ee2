"""``python -m jitbook.classroom bench``: a synthetic class graded with 1, 2, ...
workers; notebooks per minute, each notebook's time, the speed-up over one worker.

Recorded to ``data/classroom-bench/NAME.json`` with the machine, its load before and
after each run, and the date; the teachers' page reads the recording.
"""

import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from jitbook.classroom import cluster
from jitbook.classroom.grading import GRADING_ENV
from jitbook.classroom.handout import write_notebooks
from jitbook.classroom.sandbox import Kernel, sandbox_mode
from jitbook.ledger.data import machine
from jitbook.site import harness

RECORDINGS = harness.ROOT / "data" / "classroom-bench"
CHAPTER = "why-compile"  # the chapter whose notebooks make the class


def synthetic_class(folder: Path, copies: int) -> list[cluster.Job]:
    """``copies`` students handing in the instructor notebook (every exercise solved)
    and as many handing in the handout untouched, interleaved.
    """
    made = folder / "notebooks"
    write_notebooks(made, [harness.ROOT / "chapters" / f"{CHAPTER}.qmd"], values=False)
    jobs = []
    for n in range(copies):
        for kind in ("instructor", "student"):
            name = f"{kind}-{n + 1:03d}/{CHAPTER}.ipynb"
            content = (made / kind / f"{CHAPTER}.ipynb").read_bytes()
            jobs.append(cluster.Job(Path(name), name, content))
    return jobs


def grade_with(jobs: list[cluster.Job], workers: int, kernel: Kernel) -> dict:
    """One run of the class on a local cluster of ``workers``: wall time (cluster
    start included), each notebook's time, the load before and after.
    """
    with tempfile.TemporaryDirectory(prefix="jitbook-bench-") as tmp:
        sheet = cluster.Sheet(Path(tmp) / "grades.csv", resume=False)
        load = os.getloadavg()
        start = time.perf_counter()
        seconds = cluster.grade_class(
            jobs, sheet, kernel=kernel, options={}, workers=workers, log=_quiet
        )
        wall = time.perf_counter() - start
        rows = sheet.close([j.name for j in jobs])
    passed = sum(g.passed for g in rows)
    times = sorted(seconds.values())
    return {
        "workers": workers,
        "notebooks": len(jobs),
        "wall s": round(wall, 1),
        "notebooks per minute": round(len(jobs) / wall * 60, 2),
        "notebook s quartiles": [round(q, 1) for q in _quartiles(times)],
        "exercises passed": passed,
        "load average before": [round(x, 2) for x in load],
        "load average after": [round(x, 2) for x in os.getloadavg()],
    }


def _quartiles(times: list[float]) -> list[float]:
    if len(times) < 2:
        return times * 3
    q1, q2, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return [q1, q2, q3]


def _quiet(*args, **kwargs) -> None:
    """The bench prints one line per run, not the class's progress."""


def run(copies: int, workers: list[int], name: str, log=print) -> Path:
    """Grade the synthetic class once per worker count; record it."""
    kernel = Kernel(sandbox_mode(), env=GRADING_ENV)
    with tempfile.TemporaryDirectory(prefix="jitbook-bench-") as tmp:
        jobs = synthetic_class(Path(tmp), copies)
    record = {
        "command": f"python -m jitbook.classroom bench --copies {copies} --workers "
        + " ".join(map(str, workers)),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "book commit": _commit(),
        "machine": platform.node(),
        "cpu": machine(),
        "chapter": CHAPTER,
        "class": f"{copies} instructor and {copies} handout notebooks",
        "sandbox": kernel.sandbox,
        "sizes": "small (JITBOOK_SMALL=1), as grading runs by default",
        "runs": [],
    }
    for n in workers:
        log(f"grading {len(jobs)} notebooks with {n} worker(s) ...", flush=True)
        done = grade_with(jobs, n, kernel)
        record["runs"].append(done)
        log(
            f"  {done['wall s']:.0f} s, {done['notebooks per minute']:g} notebooks a "
            f"minute, each {done['notebook s quartiles'][1]:.0f} s (median); load "
            f"{done['load average before'][0]:g} -> {done['load average after'][0]:g}",
            flush=True,
        )
    one = next((r["wall s"] for r in record["runs"] if r["workers"] == 1), None)
    for done in record["runs"]:
        done["speed-up over one worker"] = one and round(one / done["wall s"], 2)
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    path = RECORDINGS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=harness.ROOT, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip() or "unknown"


def recording(name: str = "") -> dict | None:
    """The named recording, else the newest; None when there is none."""
    paths = [RECORDINGS / f"{name}.json"] if name else sorted(RECORDINGS.glob("*.json"))
    found = [json.loads(p.read_text()) for p in paths if p.exists()]
    return max(found, key=lambda r: r["date"]) if found else None


def cores(record: dict) -> int:
    """The recording machine's cores (its ``cpu`` line says them)."""
    return int(record["cpu"].split(" cores")[0].rsplit(", ", 1)[-1])


def table_rows(record: dict) -> list[dict]:
    """The recording as a table: one row per worker count."""
    return [
        {
            "workers": run["workers"],
            "notebooks": run["notebooks"],
            "class took": _minutes(run["wall s"] / 60),
            "notebooks a minute": f"{run['notebooks per minute']:.1f}",
            "one notebook (quartiles)": " / ".join(
                f"{q:.0f} s" for q in run["notebook s quartiles"]
            ),
            "speed-up over one worker": f"{run['speed-up over one worker']:.2f}×",
            "load average (1 min) before, after": (
                f"{run['load average before'][0]:.1f}, "
                f"{run['load average after'][0]:.1f}"
            ),
        }
        for run in record["runs"]
    ]


def course_rows(record: dict, students: int, cores: tuple[int, ...]) -> list[dict]:
    """What ``students`` notebooks would take on each count of ``cores``."""
    return [
        {
            "cores (one worker each)": n,
            "notebooks": students,
            "would take about": _minutes(course_estimate(record, students, n)),
        }
        for n in cores
    ]


def _minutes(minutes: float) -> str:
    """A duration as a person writes it."""
    if minutes < 1.5:
        return f"{minutes * 60:.0f} s"
    if minutes < 90:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h"


def course_estimate(record: dict, students: int, cores: int) -> float:
    """Minutes a course of ``students`` notebooks would take on ``cores`` workers:
    an extrapolation, assuming each worker grades as fast as one did in the
    recording's run with the most workers.
    """
    widest = max(record["runs"], key=lambda r: r["workers"])
    per_worker = widest["notebooks per minute"] / widest["workers"]
    return students / (per_worker * cores)
