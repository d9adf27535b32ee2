"""Verdicts to rows: the grade sheet, the per-student summary, the executed notebook.

A row is the verdict the grader's judging process reached on the evidence the
notebook's answers produced (``jitbook.classroom.verdict``); the notebook's own
outputs count for nothing. Checks that rest on a probe beside the student's code are
named in the row's ``self_reported`` column.
"""

import copy
import csv
import dataclasses
import re
from pathlib import Path

import nbformat

from jitbook.classroom.plan import Handout, Step, _code, jitbook_meta
from jitbook.exercises import registry


@dataclasses.dataclass(frozen=True)
class Grade:
    """One row of the grade sheet."""

    student_file: str
    exercise: str
    passed: bool
    message: str
    self_reported: str = ""
    points: float = 0.0


FIELDS = ("student_file", "exercise", "passed", "points", "message", "self_reported")
SUMMARY_FIELDS = (
    "student",
    "points",
    "max_points",
    "passed",
    "exercises",
    "self_reported",
)
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
    its message (read from a bounded piece of the traceback: no pattern here can take
    long on a long text).
    """
    text = ANSI.sub("", "\n".join(map(str, error.get("traceback", [])))[-20_000:])
    lines = re.findall(r"(?:Cell In\[\d+\], line|line) (\d{1,9})", text)
    where = f" at line {lines[-1]}" if lines else ""
    message = (str(error.get("evalue", ""))[:500].strip().splitlines() or [""])[0]
    message = re.sub(r"\s*\([^()]{0,300}, line \d{1,9}\)$", "", message)
    return f"{shown(str(error.get('ename', 'error'))[:100])}{where}: {shown(message)}"


def _solution_problem(steps: list[Step], nb, exercise_id: str) -> str:
    """Why the exercise's solution did not run through, in one line ("" when it did):
    its solution cell's error, else the first error in a cell the student wrote.
    """
    other = ""
    for step in steps:
        if step.kind != "student" or step.index is None:
            continue
        meta = jitbook_meta(nb.cells[step.index])
        mine = meta.get("exercise") == exercise_id and meta.get("role") == "solution"
        errors = _errors(step.cell)
        if mine and step.failure:
            return f"your solution cell {step.failure} and was stopped"
        if mine and errors:
            return f"your solution cell raised {error_summary(errors[-1])}"
        if errors and not meta.get("role") and not other:
            other = f"cell {step.index + 1} raised {error_summary(errors[-1])}"
    return other


def rows_for(
    name: str,
    nb: nbformat.NotebookNode,
    steps: list[Step],
    exercises: list[str],
    handout: Handout,
    reports: dict[str, dict],
) -> list[Grade]:
    """One row per exercise, from the judging process's report on its evidence."""
    rows = []
    for exercise_id in exercises:
        report = reports[exercise_id]
        solutions = [
            c
            for c in nb.cells
            if jitbook_meta(c).get("exercise") == exercise_id
            and jitbook_meta(c).get("role") == "solution"
        ]
        untouched = bool(solutions) and all(
            _code(str(c.get("source", ""))) in handout.stubs for c in solutions
        )
        problem = _solution_problem(steps, nb, exercise_id)
        passed = report.get("passed") is True
        message = shown(str(report.get("message", "")))
        if not passed and untouched and not problem:
            message = "not attempted: its solution cell is as it was handed out"
        elif not passed and problem and message.startswith("I could not find"):
            answer = registry()[exercise_id].answer
            message = f"{problem}, so `{answer}` was never defined"
        elif not passed and problem:
            message = f"{problem}; {message}"
        own = "; ".join(map(str, report.get("self_reported", []))) if passed else ""
        worth = points(exercise_id)
        rows.append(
            Grade(name, exercise_id, passed, message, own, worth if passed else 0.0)
        )
    return rows


def executed_notebook(
    nb: nbformat.NotebookNode, steps: list[Step]
) -> nbformat.NotebookNode:
    """The submission as grading ran it, with the grader's collector at the end."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.get("cell_type") == "code":
            cell.outputs, cell.execution_count = [], None
    for step in steps:
        cell = copy.deepcopy(step.cell)
        if step.failure:
            note = f"[grader] this cell {step.failure}\n"
            cell.outputs.append(
                nbformat.v4.new_output("stream", name="stderr", text=note)
            )
        if step.index is None:
            cell.metadata["jitbook"] = {"role": "grader", "exercise": step.exercise}
            out.cells.append(cell)
        else:
            out.cells[step.index] = cell
    return out


def write_csv(rows: list[Grade], out: Path) -> None:
    """The grade sheet, a row per exercise, and beside it ``<name>-summary.csv``, a
    row per student with points an LMS can import; no cell starts a formula.
    """
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        writer.writerows(map(sheet_row, rows))
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
                        sum(bool(g.self_reported) for g in scored),
                    ],
                )
            )


def sheet_row(g: Grade) -> list[str]:
    """A grade as the sheet's cells, in the order of ``FIELDS``."""
    values = [g.student_file, g.exercise, "yes" if g.passed else "no", f"{g.points:g}"]
    return list(map(cell_text, [*values, g.message, g.self_reported]))


def read_sheet(out: Path) -> list[Grade]:
    """The rows of a grade sheet, as ``write_csv`` or a stopped class wrote them."""
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != FIELDS:
            raise ValueError(
                f"{out} is not a grade sheet of this grader (its columns should be "
                f"{', '.join(FIELDS)}); give another --out, or grade without --resume."
            )
        return [
            Grade(
                *(_unquoted(r[k]) for k in ("student_file", "exercise")),
                r["passed"] == "yes",
                _unquoted(r["message"]),
                _unquoted(r["self_reported"]),
                float(r["points"]),
            )
            for r in reader
        ]


def _unquoted(text: str) -> str:
    """A cell as it was before ``cell_text`` guarded it against formulas."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA) else text


def summary_path(out: Path) -> Path:
    """``grades.csv`` -> ``grades-summary.csv``."""
    return Path(out).with_name(Path(out).stem + "-summary.csv")


def _by_student(rows: list[Grade]) -> dict[str, list[Grade]]:
    """Rows by student: the first folder of a submission's path, else its file."""
    found: dict[str, list[Grade]] = {}
    for g in rows:
        found.setdefault(g.student_file.split("/")[0], []).append(g)
    return found
