"""A class on Dask: real scheduler and worker processes, a worker killed mid-class, --resume, the worker check."""

import os
import shutil
import subprocess
import sys
import threading
import time
from multiprocessing import resource_tracker
from pathlib import Path

import nbformat
import pytest
from distributed import Client

import processes
from jitbook import classroom
from jitbook.classroom import cli, cluster, handout
from jitbook.classroom.report import Grade, read_sheet
from jitbook.site import harness

DASK = str(Path(sys.executable).with_name("dask"))
CHAPTER = harness.ROOT / "chapters" / "why-compile.qmd"  # the cheapest chapter to grade


@pytest.fixture(scope="module", autouse=True)
def resource_tracker_stopped():
    """A local Dask cluster's processes start multiprocessing's resource tracker, which lives as long as the
    process that asked for it: stopped once the cluster is gone, so no process outlives the suite."""
    yield
    resource_tracker._resource_tracker._stop()


@pytest.fixture(scope="module")
def handouts(tmp_path_factory) -> dict[str, Path]:
    """why-compile's instructor and student notebooks, cut to the first code cell and the exercises (a student
    may delete cells; grading then takes seconds, not a minute)."""
    out = tmp_path_factory.mktemp("notebooks")
    handout.write_notebooks(out, [CHAPTER], values=False)
    found = {}
    for kind in ("instructor", "student"):
        nb = nbformat.read(out / kind / "why-compile.ipynb", as_version=4)
        first = next(  # the chapter's first cell, below the handout's setup cell
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and not c.metadata.get("jitbook", {}).get("setup")
        )
        nb.cells = [
            c
            for i, c in enumerate(nb.cells)
            if i == first
            or "exercise" in c.metadata.get("jitbook", {})
            or c.metadata.get("jitbook", {}).get("setup")
        ]
        found[kind] = out / f"{kind}.ipynb"
        nbformat.write(nb, found[kind])
    return found


def a_class(folder: Path, handouts: dict[str, Path], kinds: list[str]) -> Path:
    for n, kind in enumerate(kinds, 1):
        (folder / f"s{n}").mkdir(parents=True)
        shutil.copy(handouts[kind], folder / f"s{n}" / "why-compile.ipynb")
    return folder


def scheduler(tmp_path: Path):
    file = tmp_path / "scheduler.json"
    command = [
        DASK,
        "scheduler",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-dashboard",
        "--scheduler-file",
        str(file),
    ]
    return processes.running(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ), file


def worker(file: Path, env: dict | None = None):
    command = [
        DASK,
        "worker",
        "--scheduler-file",
        str(file),
        "--nthreads",
        "1",
        "--memory-limit",
        "0",
        "--no-dashboard",
    ]
    return processes.running(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )


def address(file: Path, workers: int) -> str:
    deadline = time.monotonic() + 60
    while not file.exists() or not file.read_text():
        assert time.monotonic() < deadline, "the scheduler did not start"
        time.sleep(0.2)
    with Client(scheduler_file=str(file)) as client:
        client.wait_for_workers(workers, timeout=90)
        return client.scheduler.address


def _grade_on(scheduler: str, subs: Path, sheet: Path) -> int:
    """``python -m jitbook.classroom grade SUBS --scheduler ADDRESS --out SHEET``."""
    return cli.main(["grade", str(subs), "--scheduler", scheduler, "--out", str(sheet)])


def test_a_worker_killed_mid_class_costs_nothing_and_the_sheet_is_a_one_worker_runs(
    tmp_path, handouts, capsys
):
    subs = a_class(tmp_path / "subs", handouts, ["instructor", "student"])
    started, file = scheduler(tmp_path)
    with started, worker(file) as first, worker(file) as second:
        where = address(file, 2)
        codes = []
        run = threading.Thread(
            target=lambda: codes.append(
                _grade_on(where, subs, tmp_path / "two" / "g.csv")
            )
        )
        run.start()
        with Client(where) as watcher:
            deadline = time.monotonic() + 300
            while sum(bool(keys) for keys in watcher.processing().values()) < 2:
                assert time.monotonic() < deadline and run.is_alive(), (
                    "the two notebooks never ran at once"
                )
                time.sleep(0.5)
            busy = watcher.processing()
            time.sleep(
                3
            )  # both kernels are starting: kill one worker (its nanny and all) in the middle
            processes.kill(
                [second.pid, *(pid for pid, _ in processes.descendants(second.pid))]
            )
            run.join(timeout=600)
            assert not run.is_alive() and codes == [0], capsys.readouterr()
            assert len(watcher.scheduler_info()["workers"]) == 1, (
                "the killed worker is gone"
            )
        assert all(len(keys) == 1 for keys in busy.values()), (
            "each worker held one notebook when one was killed"
        )
        assert _grade_on(where, subs, tmp_path / "one" / "g.csv") == 0
        assert first.poll() is None
    two, one = (read_sheet(tmp_path / run / "g.csv") for run in ("two", "one"))
    assert two == one
    assert [g.student_file for g in two] == ["s1/why-compile.ipynb"] * 3 + [
        "s2/why-compile.ipynb"
    ] * 3
    assert [g.passed for g in two] == [True] * 3 + [False] * 3
    assert (tmp_path / "two" / "g-executed" / "s2" / "why-compile.ipynb").exists()
    out = capsys.readouterr().out
    assert "[2/2]" in out and "2 worker(s) on" in out and "1 worker(s) on" in out


def test_resume_grades_only_the_notebooks_the_sheet_lacks_and_a_lost_one_again(
    tmp_path, capsys
):
    subs = tmp_path / "subs"
    for n in (1, 2, 3):
        (subs / f"s{n}").mkdir(parents=True)
        (subs / f"s{n}" / "why-compile.ipynb").write_text(
            "{not json"
        )  # graded in no time: it cannot be read
    sheet = tmp_path / "g.csv"
    kept = [
        Grade(
            "s1/why-compile.ipynb",
            "why-compile.ready",
            True,
            "=a formula, kept as text",
            "",
            1.0,
        )
    ]
    lost = [
        Grade(
            "s3/why-compile.ipynb",
            "",
            False,
            f"{cluster.LOST} (KilledWorker); --resume grades it again",
        )
    ]
    classroom.report.write_csv(kept + lost, sheet)
    code = cli.main(
        ["grade", str(subs), "--out", str(sheet), "--resume", "--workers", "1"]
    )
    out = capsys.readouterr().out
    assert code == 2, out  # the two unreadable notebooks could not be graded
    assert (
        "--resume: 1 notebook(s) already in" in out
        and "2 to grade" in out
        and "[2/2]" in out
    )
    rows = read_sheet(sheet)
    assert rows[0] == kept[0], "the row already in the sheet is kept as it was"
    assert [g.student_file for g in rows] == [
        f"s{n}/why-compile.ipynb" for n in (1, 2, 3)
    ]
    assert all(g.message.startswith("could not read") for g in rows[1:])


def test_rows_are_in_the_sheet_as_soon_as_their_notebook_comes_back(tmp_path):
    sheet = cluster.Sheet(tmp_path / "g.csv", resume=False)
    row = Grade(
        "s1/why-compile.ipynb", "why-compile.fuse", False, "no evidence", "", 0.0
    )
    sheet.add([row])
    sheet.add([row])  # the same notebook again (a task run twice) adds nothing
    assert read_sheet(tmp_path / "g.csv") == [row], (
        "written before the class ends, once"
    )
    assert sheet.close(["s1/why-compile.ipynb"]) == [row]


def test_a_worker_with_another_book_is_named_and_nothing_is_graded(tmp_path, capsys):
    book = (
        tmp_path / "other"
    )  # the book with one checker's file changed, as a worker's out-of-date checkout
    other = book / "code"
    shutil.copytree(
        harness.ROOT / "code" / "jitbook",
        other / "jitbook",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(
        harness.ROOT / "chapters",
        book / "chapters",
        ignore=shutil.ignore_patterns("*_files", ".*"),
    )
    shutil.copy(harness.ROOT / "_quarto.yml", book)
    with open(other / "jitbook" / "classroom" / "verdict.py", "a") as f:
        f.write("\n# changed\n")
    subs = tmp_path / "subs"
    (subs / "s1").mkdir(parents=True)
    (subs / "s1" / "why-compile.ipynb").write_text("{not json")
    started, file = scheduler(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(other)}
    with started, worker(file, env):
        where = address(file, 1)
        with Client(where) as client:
            (bad,) = client.scheduler_info()["workers"]
        assert _grade_on(where, subs, tmp_path / "g.csv") == 2
    err = capsys.readouterr().err
    assert (
        f"worker {bad} on" in err
        and "has another book" in err
        and "Nothing was graded" in err
    )
    assert read_sheet(tmp_path / "g.csv") == []


def test_workers_are_for_the_local_cluster_only(tmp_path, capsys):
    (tmp_path / "s1").mkdir()
    code = cli.main(
        [
            "grade",
            str(tmp_path),
            "--scheduler",
            "tcp://127.0.0.1:1",
            "--workers",
            "2",
            "--out",
            str(tmp_path / "g.csv"),
        ]
    )
    assert code == 1 and "--workers sizes the local cluster" in capsys.readouterr().err
