"""Grading: every submission alone in a fresh, confined kernel, judged outside it from
the evidence its answers produce.

Only regular files inside the submissions folder are read (links are refused, and no
file's content is ever echoed); the code the grader trusts is hashed before the class
and checked after every notebook; the class stops if it changed.
"""

import dataclasses
import hashlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

from jitbook import size
from jitbook.classroom import verdict
from jitbook.classroom.plan import chapter_exercises, chapter_of, handed_out, plan
from jitbook.classroom.report import (
    Grade,
    _errors,
    error_summary,
    executed_notebook,
    rows_for,
    shown,
)
from jitbook.classroom.sandbox import CHECK_MARGIN, Kernel, sandbox_mode
from jitbook.classroom.session import run_steps
from jitbook.evidence.collect import MIME
from jitbook.exercises import registry, start
from jitbook.site import harness
from jitbook.workers import scheduler_address

CELL_TIMEOUT, TIME_LIMIT = 300.0, 1200.0  # seconds per cell, per notebook (all in)
JUDGE_RESERVE = 120.0  # seconds of a notebook's time limit kept for its verdicts
# Grading checks the students' code, not the machine's speed: small problem sizes
# unless the teacher asks for full ones (the PLN chapter's full-size cells take
# minutes).
GRADING_ENV = {size.ENV_VAR: "1"}


class NothingGraded(ValueError):
    """Not one exercise could be graded: the folder held no readable notebook."""


class Tampered(RuntimeError):
    """The code the grader trusts changed on disk while a class was graded."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """How one notebook runs: its kernel, its limits, where its executed copy goes and
    who hears its progress."""

    kernel: Kernel
    cell_timeout: float
    deadline: float  # time.monotonic() when the notebook's time limit is spent
    check_limit: float | None
    executed_to: Path | None
    progress: Callable[[str], None] | None


def grade_notebook(
    path: Path,
    name: str | None = None,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
    kernel: Kernel | None = None,
    check_limit: float | None = None,
    content: bytes | None = None,
    executed_to: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Grade]:
    """Run one submission as Run All runs it, in a fresh, confined kernel; collect the
    evidence its answers produce; judge it in a process of the grader's own. Never
    raises for the notebook: whatever goes wrong becomes its rows, with the reason.

    ``content`` is the submission as read when grading began (the file is never
    written); ``executed_to``, if given, receives the notebook as grading ran it.
    """
    path = Path(path)
    name = name or path.name
    kernel = kernel or Kernel(sandbox_mode(), env=GRADING_ENV if env is None else env)
    if env is not None:
        kernel = dataclasses.replace(kernel, env=env)
    deadline = time.monotonic() + time_limit
    exercises: list[str] = []
    try:
        text = (content if content is not None else path.read_bytes()).decode()
        nb = nbformat.reads(text, as_version=4)
        stems = [p.stem for p in harness.chapter_files() if p.exists()]
        stem = chapter_of(path, nb, stems)
        exercises = chapter_exercises(stem) if stem else []
        if not exercises:
            what = (
                f"chapter {stem!r} has no exercises"
                if stem
                else "could not tell which chapter this notebook belongs to: name "
                "the file after the chapter, e.g. why-compile.ipynb"
            )
            return [Grade(name, "", False, what)]
        budget = Budget(
            kernel, cell_timeout, deadline, check_limit, executed_to, progress
        )
        return _graded(nb, name, stem, exercises, budget)
    except Exception as err:  # noqa: BLE001 (one notebook never stops the class)
        why = (
            _unreadable(err)
            if not exercises
            else (
                f"not graded: the grader could not handle this notebook "
                f"({type(err).__name__}); the other notebooks were graded"
            )
        )
        return [Grade(name, id, False, why) for id in exercises or [""]]


def _unreadable(err: Exception) -> str:
    return (
        f"could not read the notebook ({type(err).__name__}: it is not a Jupyter "
        "notebook in JSON that the grader can read)"
    )


def _graded(
    nb, name: str, stem: str, exercises: list[str], budget: Budget
) -> list[Grade]:
    """One readable notebook of a chapter with exercises: run, collected, judged."""
    registered = registry()
    limits = {id: budget.check_limit or registered[id].time_limit for id in exercises}
    seeds = {id: secrets.randbits(32) for id in exercises}
    requests = {id: start(registered[id], seeds[id])[1] for id in exercises}
    steps = plan(nb, requests, limits)
    left = budget.deadline - time.monotonic()
    judging = min(JUDGE_RESERVE, left / 4)  # the verdicts' share of the time limit
    stopped = run_steps(
        steps,
        budget.kernel,
        cell_timeout=budget.cell_timeout,
        collect_timeout={id: t + CHECK_MARGIN for id, t in limits.items()},
        time_limit=left - judging,
        progress=budget.progress,
    )
    collectors = {s.exercise: s for s in steps if s.kind == "collect"}
    evidence = {id: collected(collectors[id].cell).get(id) for id in exercises}
    job = {
        id: {"seed": seeds[id], "requests": requests[id], "evidence": evidence[id]}
        for id in exercises
        if isinstance(evidence[id], list)
    }
    reports = verdict.run(job, budget.deadline - time.monotonic()) if job else {}
    reports.update(
        {
            id: _report(id, _not_collected(collectors[id], stopped))
            for id in exercises
            if id not in job
        }
    )
    if budget.executed_to is not None:
        budget.executed_to.parent.mkdir(parents=True, exist_ok=True)
        executed = executed_notebook(nb, steps)
        kernel = budget.kernel
        executed.metadata["jitbook"] = {
            "grading": {"sandbox": kernel.sandbox, "memory_gib": kernel.memory_gib}
        }
        nbformat.write(executed, budget.executed_to)
    handout = handed_out(next(p for p in harness.chapter_files() if p.stem == stem))
    return rows_for(name, nb, steps, exercises, handout, reports)


def collected(cell) -> dict:
    """The evidence the collector displayed, by exercise ({} when there is none)."""
    for output in reversed(cell.get("outputs", [])):
        found = output.get("data", {}).get(MIME)
        if isinstance(found, dict):
            return found
    return {}


def _not_collected(step, stopped: str) -> str:
    if step.failure:
        return (
            f"collecting what your answer produces {step.failure} and was stopped; "
            "look for a loop that never ends, such as a lax.while_loop whose "
            "condition stays true"
        )
    errors = _errors(step.cell)
    if stopped and not step.cell.get("outputs"):
        return f"not reached: {stopped}, before the grader collected the evidence"
    why = f" ({error_summary(errors[-1])})" if errors else ""
    return f"no evidence was collected for this exercise{why}"


def _report(exercise_id: str, message: str) -> dict:
    return {
        "exercise": exercise_id,
        "passed": False,
        "message": message,
        "self_reported": [],
    }


def submissions(folder: Path) -> tuple[list[Path], list[str]]:
    """The notebooks in a folder and its subfolders (one per student, say), and what
    was refused: links (to a file or a folder) and anything not a regular file.
    Jupyter checkpoints are left out.
    """
    folder = Path(folder)
    found, refused = [], []
    for dirpath, dirs, files in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        for d in list(dirs):
            if (here / d).is_symlink():
                refused.append(f"{_rel(here / d, folder)} (a link; not followed)")
                dirs.remove(d)
        dirs[:] = sorted(d for d in dirs if d != ".ipynb_checkpoints")
        for name in sorted(files):
            path = here / name
            if not name.endswith(".ipynb"):
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                refused.append(f"{_rel(path, folder)} (a link; only files are graded)")
            elif not stat.S_ISREG(mode):
                refused.append(f"{_rel(path, folder)} (not a regular file)")
            else:
                found.append(path)
    return sorted(found), refused


def _rel(path: Path, folder: Path) -> str:
    return shown(path.relative_to(folder).as_posix())


def read_submission(path: Path) -> bytes:
    """A submission's bytes, refusing a link that appeared since the folder was read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return f.read()


def executed_folder(out: Path) -> Path:
    """Where the executed submissions go: beside the grade sheet, ``<sheet
    name>-executed/``.
    """
    return Path(out).with_name(Path(out).stem + "-executed")


def fingerprint(paths: list[Path]) -> dict[str, str]:
    """sha256 of every file under ``paths``: the code the grader trusts."""
    found = {}
    for root in paths:
        for file in sorted(Path(root).rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                found[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
    return found


def grade_folder(
    folder: Path,
    out: Path,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
    kernel: Kernel | None = None,
    check_limit: float | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = False,
    log=print,
) -> list[Grade]:
    """Grade every notebook under ``folder``, each alone, as tasks on Dask (a local
    cluster unless ``scheduler`` names one); write the grade sheet (and the
    per-student summary) to ``out`` as rows arrive and each executed submission
    beside it. Every submission is read before any kernel runs, and graded from that
    copy; ``resume`` grades only the notebooks the sheet has no rows for.
    """
    from jitbook.classroom import cluster  # imports this module

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no folder at {folder}; give the folder that holds the submitted "
            "notebooks, e.g. make grade SUBMISSIONS=path/to/folder."
        )
    scheduler_address(scheduler, workers)  # a wrong option fails before anything runs
    kernel = kernel or Kernel(sandbox_mode(), env=GRADING_ENV if env is None else env)
    paths, refused = submissions(folder)
    for why in refused:
        log(f"refused: {why}", flush=True)
    sheet = cluster.Sheet(out, resume)
    graded = sheet.graded()
    contents = {}
    for path in paths:
        try:
            contents[path] = read_submission(path)
        except OSError:
            sheet.add([Grade(_rel(path, folder), "", False, "refused: not a file")])
    executed = executed_folder(out)
    if not resume:
        shutil.rmtree(executed, ignore_errors=True)  # the last class's notebooks go
    names = {p: _rel(p, folder) for p in paths}
    jobs = [
        cluster.Job(p.relative_to(folder), names[p], contents[p])
        for p in paths
        if p in contents and names[p] not in graded
    ]
    if resume:
        log(f"--resume: {len(graded)} notebook(s) already in {out}, "
            f"{len(jobs)} to grade", flush=True)  # fmt: skip
    try:
        cluster.grade_class(
            jobs,
            sheet,
            kernel=kernel,
            options=dict(
                cell_timeout=cell_timeout,
                time_limit=time_limit,
                check_limit=check_limit,
            ),
            scheduler=scheduler,
            workers=workers,
            executed=executed,
            log=log,
        )
    finally:
        rows = sheet.close([names[p] for p in paths])
    changed = [p for p in contents if read_submission(p) != contents[p]]
    for path in changed:
        log(
            f"warning: {_rel(path, folder)} changed on disk while grading; it was "
            "graded as it was before (grade in the bwrap sandbox to prevent this)",
            flush=True,
        )
    if not any(g.exercise for g in rows):
        unread = sum(1 for g in rows if g.message.startswith("could not read"))
        raise NothingGraded(
            f"nothing could be graded in {folder}: {len(paths)} notebook(s) found "
            f"({unread} unreadable), {len(refused)} refused; submissions are .ipynb "
            "files named after their chapter (e.g. why-compile.ipynb), one folder per "
            "student. The reasons are in the sheet."
        )
    return rows
