"""Verdicts to rows: the grade sheet, the per-student summary, the executed notebook.

The grade is decided here, in the grader's process: the kernel only reports what the
sealed checker measured, with the nonce of its cell; a row passes when that report
passed and neither the scan of the student's code nor the kernel's snapshot found
anything that could have changed it.
"""

import copy
import csv
import dataclasses
import re
from pathlib import Path

import nbformat

from jitbook.classroom.plan import Handout, Step, _code
from jitbook.classroom.sealed import read_verdict
from jitbook.exercises import registry


@dataclasses.dataclass(frozen=True)
class Grade:
    """One row of the grade sheet."""

    student_file: str
    exercise: str
    passed: bool
    message: str
    flags: str = ""
    points: float = 0.0


FIELDS = ("student_file", "exercise", "passed", "points", "message", "flags")
SUMMARY_FIELDS = ("student", "points", "max_points", "passed", "exercises", "flagged")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads these as a formula


def points(exercise_id: str) -> float:
    """An exercise's points: its difficulty (1 to 3 stars)."""
    ex = registry().get(exercise_id)
    return float(ex.difficulty) if ex else 0.0


def shown(name: str) -> str:
    """A file or folder name as it may be printed: no escape codes, no line breaks."""
    return CONTROL.sub("?", ANSI.sub("", name))


def cell_text(value) -> str:
    """A CSV cell a spreadsheet shows as text: ``=SUM(...)`` is not run."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA) else text


def _errors(cell) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def error_summary(error: dict) -> str:
    """One line for an error a student's cell raised: its kind, its line in the cell,
    its message.
    """
    text = ANSI.sub("", "\n".join(error.get("traceback", [])))
    lines = re.findall(r"(?:Cell In\[\d+\], line|line) (\d+)", text)
    where = f" at line {lines[-1]}" if lines else ""
    message = (error.get("evalue", "").strip().splitlines() or [""])[0]
    message = re.sub(r"\s*\([^()]*, line \d+\)$", "", message)  # "(file, line 2)"
    return f"{error.get('ename', 'error')}{where}: {message}"


def _stdout(cell) -> str:
    return "".join(
        o.get("text", "")
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )


def _solution_problem(steps: list[Step], nb, exercise_id: str, before: int) -> str:
    """Why the exercise's solution did not run through, in one line ("" when it did):
    its solution cell's error, else an error in a cell the student wrote above the
    check (a SyntaxError in a new cell is named too).
    """
    other = ""
    for step in steps[:before]:
        if step.kind != "student" or step.index is None:
            continue
        meta = nb.cells[step.index].metadata.get("jitbook", {})
        mine = meta.get("exercise") == exercise_id and meta.get("role") == "solution"
        errors = _errors(step.cell)
        if mine and step.failure:
            return f"your solution cell {step.failure} and was stopped"
        if mine and errors:
            return f"your solution cell raised {error_summary(errors[-1])}"
        if errors and not meta.get("role"):
            other = f"cell {step.index + 1} raised {error_summary(errors[-1])}"
    return other


def rows_for(
    name: str,
    nb: nbformat.NotebookNode,
    steps: list[Step],
    exercises: list[str],
    handout: Handout,
    stopped: str,
    check_limits: dict[str, float],
    found: list[str] = (),
) -> list[Grade]:
    """One row per exercise, decided here from the sealed checker's report, the scan
    of the student's code (``found``) and the kernel's snapshot; the notebook's own
    outputs count for nothing.
    """
    rows = []
    for exercise_id in exercises:
        at, step = next(
            (n, s)
            for n, s in enumerate(steps)
            if s.kind == "verdict" and s.exercise == exercise_id
        )
        solutions = [
            c
            for c in nb.cells
            if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
            and c.metadata["jitbook"].get("role") == "solution"
        ]
        untouched = bool(solutions) and all(
            _code(c.source) in handout.stubs for c in solutions
        )
        verdict = read_verdict(_stdout(step.cell), step.nonce)
        flags = "; ".join([*found, *(verdict or {}).get("changes", [])])
        problem = _solution_problem(steps, nb, exercise_id, at)
        passed = bool(verdict and verdict.get("passed") is True)
        message = _message(exercise_id, step, verdict, stopped, check_limits)
        if passed and (flags or step.failure):
            passed = False
            message = (
                f"not graded: the notebook changes what grading relies on ({flags})"
            )
        elif not passed and verdict and untouched and not problem:
            message = "not attempted: its solution cell is as it was handed out"
        elif not passed and problem and message.startswith("I could not find"):
            message = (
                f"{problem}, so `{registry()[exercise_id].answer}` was never defined"
            )
        elif not passed and problem and verdict:
            message = f"{problem}; {message}"
        elif flags and not passed:
            message = f"{message} (flagged: {flags})"
        worth = points(exercise_id)
        rows.append(
            Grade(name, exercise_id, passed, message, flags, worth if passed else 0.0)
        )
    return rows


def _message(exercise_id, step, verdict, stopped, check_limits) -> str:
    """The checker's words, or why there are none."""
    if step.failure:
        limit = check_limits.get(exercise_id, 0)
        if not step.failure.startswith("ran longer"):
            return f"the check of {exercise_id} {step.failure}"
        return (
            f"the check of {exercise_id} {step.failure} (its limit is {limit:g} s) "
            "and was stopped; the kernel was restarted and grading went on. Look "
            "for a loop that never ends, such as a lax.while_loop whose condition "
            "stays true"
        )
    if verdict is None:
        if stopped:
            return f"not reached: {stopped}, before this exercise's check"
        errors = _errors(step.cell)
        why = f" ({error_summary(errors[-1])})" if errors else ""
        return f"not checked: the grader's check gave no verdict{why}"
    return "" if verdict.get("passed") is True else str(verdict.get("message", ""))


def executed_notebook(
    nb: nbformat.NotebookNode, steps: list[Step]
) -> nbformat.NotebookNode:
    """The submission as grading ran it: the grader's check in place of each check
    cell (or after the cell that checked), cells grading skipped left without
    outputs, and the checks of missing check cells at the end.
    """
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    inserts: dict[int, list] = {}
    for step in steps:
        if step.kind == "prelude":
            continue
        cell = copy.deepcopy(step.cell)
        if step.failure:
            note = f"[grader] this cell {step.failure}\n"
            cell.outputs.append(
                nbformat.v4.new_output("stream", name="stderr", text=note)
            )
        if step.kind == "verdict":
            cell.metadata.setdefault("jitbook", {}).update(
                exercise=step.exercise, role="grader"
            )
        if step.after is not None:
            inserts.setdefault(step.after, []).append(cell)
        elif step.index is None:
            inserts.setdefault(len(nb.cells), []).append(cell)
        else:
            out.cells[step.index] = cell
    for place in sorted(inserts, reverse=True):
        out.cells[place + 1 : place + 1] = inserts[place]
    return out


def write_csv(rows: list[Grade], out: Path) -> None:
    """The grade sheet, a row per exercise, and beside it ``<name>-summary.csv``, a
    row per student with points an LMS can import; no cell starts a formula.
    """
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for g in rows:
            passed = "yes" if g.passed else "no"
            values = [g.student_file, g.exercise, passed, f"{g.points:g}"]
            writer.writerow(map(cell_text, [*values, g.message, g.flags]))
    with open(summary_path(out), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SUMMARY_FIELDS)
        for student, graded in _by_student(rows).items():
            scored = [g for g in graded if g.exercise]
            writer.writerow(
                map(
                    cell_text,
                    [
                        student,
                        f"{sum(g.points for g in scored):g}",
                        f"{sum(points(g.exercise) for g in scored):g}",
                        sum(g.passed for g in scored),
                        len(scored),
                        sum(bool(g.flags) for g in scored),
                    ],
                )
            )


def summary_path(out: Path) -> Path:
    """``grades.csv`` -> ``grades-summary.csv``."""
    return Path(out).with_name(Path(out).stem + "-summary.csv")


def _by_student(rows: list[Grade]) -> dict[str, list[Grade]]:
    """Rows by student: the first folder of a submission's path, else its file."""
    found: dict[str, list[Grade]] = {}
    for g in rows:
        found.setdefault(g.student_file.split("/")[0], []).append(g)
    return found
