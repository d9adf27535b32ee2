"""A class on dask.distributed: one notebook is one task, and the sheet is the client's.

By default a ``LocalCluster`` on this machine, one single-threaded worker process per
core; ``--scheduler ADDRESS`` (or ``DASK_SCHEDULER_ADDRESS``) sends the same tasks to
an existing Dask cluster, however it was started. Every worker is checked before the
class (the same book, a working sandbox). A task calls ``grade_notebook`` with the
bytes the client read, so the sandbox, budgets and verdicts are those of one machine;
its rows come back as plain data and the client appends them to the sheet as they
arrive. Dask runs a lost worker's notebooks again elsewhere; a notebook's rows are
written once.
"""

import dataclasses
import hashlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from distributed import Client, get_worker, wait

from jitbook.classroom import grading
from jitbook.classroom.report import (
    FIELDS,
    Grade,
    read_sheet,
    sheet_row,
    shown,
    write_csv,
)
from jitbook.classroom.sandbox import Kernel, sandbox_mode, trusted_paths
from jitbook.site import harness
from jitbook.workers import connect, say_dashboard

TOPIC = "jitbook-grading"  # the workers' events: a notebook started, its progress
PROGRESS_EVERY = 30.0  # seconds between progress lines while nothing finishes
LOST = "not graded: the workers grading this notebook died"  # --resume retries it


class WorkersUnfit(RuntimeError):
    """A worker cannot grade as this machine would: another book, or no sandbox."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One submission as the client read it: where it is, its name, its bytes."""

    path: Path  # relative to the submissions folder
    name: str
    content: bytes


def book_hash() -> str:
    """sha256 of the code the grader trusts and of the chapters, paths relative."""
    digest = hashlib.sha256()
    roots = [*trusted_paths(), harness.ROOT / "chapters"]
    chapters = {str(p) for p in harness.chapter_files()}
    for root in roots:
        for path, sha in sorted(grading.fingerprint([root]).items()):
            if root.name != "chapters" or path in chapters:
                digest.update(f"{Path(path).relative_to(root)} {sha}\n".encode())
    return digest.hexdigest()[:16]


def describe_worker() -> dict:
    """What this worker would grade with: its host, Python, book and sandbox."""
    return {
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "book": book_hash(),
        "sandbox": sandbox_mode("auto"),
    }


def check_workers(client: Client, kernel: Kernel, log=print) -> dict[str, dict]:
    """Every worker's description; refuses the class, naming each worker that would
    grade differently from this machine.
    """
    here = book_hash()
    found = client.run(describe_worker, on_error="return")
    problems = []
    for address, seen in sorted(found.items()):
        if isinstance(seen, BaseException):
            problems.append(
                f"worker {address} could not say what it grades with "
                f"({type(seen).__name__}: {seen}); give it the book's checkout and "
                "environment"
            )
            continue
        where = f"worker {address} on {seen['host']}"
        if seen["book"] != here:
            problems.append(
                f"{where} has another book (hash {seen['book']}, here {here}): "
                "give it the same checkout of the book in the book's environment"
            )
        if kernel.sandbox == "bwrap" and seen["sandbox"] != "bwrap":
            problems.append(
                f"{where} cannot run bubblewrap, and this class is graded in the "
                "bwrap sandbox: install it there (apt-get install bubblewrap) and "
                "allow user namespaces, or stop that worker"
            )
    if problems:
        raise WorkersUnfit(
            "not graded: " + "; ".join(problems) + ". Nothing was graded."
        )
    hosts = sorted({seen["host"] for seen in found.values()})
    log(
        f"{len(found)} worker(s) on {', '.join(hosts)} checked: the same book "
        f"({here}), sandbox {kernel.sandbox}"
    )
    return found


def grade_task(job: Job, kernel: Kernel, options: dict, expected: str) -> dict:
    """One notebook on a worker, graded as on one machine: its rows and executed
    notebook as plain data, and the book's hash before and after.
    """
    worker = get_worker()
    before = book_hash()
    if before != expected:
        return {"name": job.name, "book": before, "worker": worker.address}
    worker.log_event(TOPIC, {"name": job.name, "text": "started"})
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="jitbook-grading-") as tmp:
        executed = Path(tmp) / job.path.name
        rows = grading.grade_notebook(
            job.path,
            job.name,
            kernel=kernel,
            content=job.content,
            executed_to=executed,
            progress=lambda text: worker.log_event(
                TOPIC, {"name": job.name, "text": text}
            ),
            **options,
        )
        notebook = executed.read_bytes() if executed.exists() else None
    return {
        "name": job.name,
        "rows": [dataclasses.asdict(g) for g in rows],
        "executed": notebook,
        "seconds": time.perf_counter() - start,
        "book": book_hash(),
        "worker": worker.address,
    }


class Sheet:
    """The grade sheet while a class runs: rows appended and flushed as each notebook
    comes back, so a stopped client keeps them; written in order at the end.
    """

    def __init__(self, out: Path, resume: bool) -> None:
        self.out = Path(out)
        old = read_sheet(self.out) if resume and self.out.exists() else []
        self.rows = [g for g in old if not g.message.startswith(LOST)]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out, "w", newline="")
        self._write([FIELDS, *map(sheet_row, self.rows)])

    def graded(self) -> set[str]:
        """The notebooks that have rows."""
        return {g.student_file for g in self.rows}

    def add(self, rows: list[Grade]) -> None:
        """One notebook's rows, unless it has some already."""
        if rows and rows[0].student_file not in self.graded():
            self.rows += rows
            self._write(map(sheet_row, rows))

    def _write(self, rows) -> None:
        import csv

        csv.writer(self._file).writerows(rows)
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self, order: list[str]) -> list[Grade]:
        """The sheet in ``order`` of notebooks (and the per-student summary)."""
        self._file.close()
        rank = {name: n for n, name in enumerate(order)}
        rows = sorted(self.rows, key=lambda g: rank.get(g.student_file, len(rank)))
        write_csv(rows, self.out)
        return rows


class Progress:
    """The class as a whole: done of total, failures, the longest notebook running,
    and the time left at the pace so far.
    """

    def __init__(self, total: int, workers: int, log) -> None:
        self.total, self.workers, self.log = total, workers, log
        self.done = self.failed = self.ungraded = 0
        self.start = time.monotonic()
        self.running: dict[str, tuple[float, str]] = {}  # name: (since, last news)
        self.seconds: dict[str, float] = {}  # name: its grading time on its worker

    def event(self, event) -> None:
        """A worker's news about a notebook (Dask's structured events)."""
        _, news = event
        since = self.running.get(news["name"], (time.monotonic(), ""))[0]
        self.running[news["name"]] = (since, shown(str(news["text"]))[:120])

    def finished(self, name: str, rows: list[Grade], took: float, where: str) -> None:
        self.running.pop(name, None)
        self.seconds[name] = took
        self.done += 1
        graded = [g for g in rows if g.exercise]
        passed = sum(g.passed for g in graded)
        self.failed += len(graded) - passed
        self.ungraded += not graded or rows[0].message.startswith("not graded")
        self.log(
            f"[{self.done}/{self.total}] {name}: {passed}/{len(graded)} passed "
            f"({took:.0f} s on {where}); {self.summary()}",
            flush=True,
        )

    def summary(self) -> str:
        parts = [f"{self.failed} exercise(s) failed so far"]
        if self.ungraded:
            parts.append(f"{self.ungraded} notebook(s) not graded")
        if self.running:
            name, (since, news) = min(list(self.running.items()), key=lambda i: i[1][0])
            parts.append(
                f"longest running: {name} ({time.monotonic() - since:.0f} s"
                + (f", {news}" if news and news != "started" else "")
                + ")"
            )
        left = self.total - self.done
        if self.done and left:
            pace = (time.monotonic() - self.start) / self.done
            parts.append(f"about {_duration(pace * left)} left")
        return "; ".join(parts)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def grade_class(
    jobs: list[Job],
    sheet: Sheet,
    *,
    kernel: Kernel,
    options: dict,
    scheduler: str | None = None,
    workers: int | None = None,
    executed: Path | None = None,
    log=print,
) -> dict[str, float]:
    """Grade ``jobs`` on Dask, each notebook a task; its rows go to ``sheet`` and its
    executed notebook under ``executed`` as it comes back; returns each notebook's
    grading seconds. Stops the class if a worker's book changed while it graded
    (``grading.Tampered``).
    """
    if not jobs:
        return {}
    with connect(scheduler, workers, log) as client:
        check_workers(client, kernel, log)
        say_dashboard(client, log)
        expected = book_hash()
        progress = Progress(len(jobs), len(client.scheduler_info()["workers"]), log)
        client.subscribe_topic(TOPIC, progress.event)
        futures = {
            client.submit(
                grade_task, job, kernel, options, expected, pure=False,
                key=f"grade-{n}-{job.path.name}",
            ): job
            for n, job in enumerate(jobs)
        }  # fmt: skip
        pending = set(futures)
        try:
            while pending:
                try:
                    done, pending = wait(
                        pending, timeout=PROGRESS_EVERY, return_when="FIRST_COMPLETED"
                    )
                except TimeoutError:  # nothing finished: say where the class is
                    log(f"[{progress.done}/{len(jobs)}] {progress.summary()}")
                    continue
                for future in done:
                    job = futures[future]
                    _collect(future, job, sheet, executed, progress, expected)
        finally:
            client.unsubscribe_topic(TOPIC)
            client.cancel(list(pending))
    return progress.seconds


def _collect(future, job: Job, sheet, executed, progress, expected) -> None:
    """A finished task's rows into the sheet; its executed notebook beside it."""
    if future.status == "error":
        err = future.exception()
        rows = [Grade(job.name, "", False, f"{LOST} ({type(err).__name__}: {err}"[:300]
                      + "); --resume grades it again")]  # fmt: skip
        sheet.add(rows)
        progress.finished(job.name, rows, 0.0, "no worker")
        return
    result = future.result()
    if "rows" not in result:
        raise grading.Tampered(
            f"stopped: worker {result['worker']} has another book (hash "
            f"{result['book']}, here {expected}); it joined after the check. Grades so "
            "far are in the sheet; give it the book's checkout, or stop it, and grade "
            "again with --resume."
        )
    rows = [Grade(**row) for row in result["rows"]]
    sheet.add(rows)
    if executed is not None and result["executed"] is not None:
        path = executed / job.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(result["executed"])
    progress.finished(job.name, rows, result["seconds"], result["worker"])
    if result["book"] != expected:
        raise grading.Tampered(
            f"stopped: the code the grader trusts changed on disk on worker "
            f"{result['worker']} while {job.name} was graded; grades so far are in "
            "the sheet. Restore the book there (git checkout -- code), grade with "
            "--sandbox bwrap, and look at that submission."
        )
