"""What a grading kernel runs: the set-up, the cells a student wrote, the checks."""

import copy
import dataclasses
import functools
import secrets
from pathlib import Path

import nbformat

from jitbook.classroom.handout import (
    check_calls,
    checked_exercise,
    only_checks,
    student_notebook,
)
from jitbook.exercises import registry
from jitbook.site import harness

GRADER_MODULE = "_jitbook_grader"


@dataclasses.dataclass
class Step:
    """A cell the grading kernel runs: the grader's set-up, a student's cell, or a
    verdict.
    """

    kind: str  # "prelude", "student" or "verdict"
    cell: nbformat.NotebookNode
    exercise: str | None = None
    index: int | None = None  # the cell's place in the submission
    failure: str = ""  # why it did not finish: a time limit or a dead kernel
    after: int | None = None  # a verdict for a check inside a cell that also runs
    nonce: str = ""  # a verdict's: the kernel first sees it when this cell runs


def chapter_of(
    path: Path, nb: nbformat.NotebookNode | None, stems: list[str]
) -> str | None:
    """The chapter a submission belongs to: notebook metadata first, else the longest
    chapter stem in its name.
    """
    source = (nb or {}).get("metadata", {}).get("jitbook", {}).get("source")
    if source and Path(source).stem in stems:
        return Path(source).stem
    named = [s for s in stems if s in path.stem]
    return max(named, key=len) if named else None


def chapter_exercises(stem: str) -> list[str]:
    """The exercise ids of a chapter, in the order its check cells appear, then any
    others registered for it.
    """
    ids = [id for id, ex in registry().items() if ex.chapter == stem]
    qmd = next((p for p in harness.chapter_files() if p.stem == stem), None)
    order = (
        [checked_exercise(c) for c in harness.to_notebook(qmd).cells]
        if qmd and qmd.exists()
        else []
    )
    return sorted(ids, key=lambda id: order.index(id) if id in order else len(order))


def _sections(cell) -> list[str]:
    """The ``##`` headings in a Markdown cell (a cell may hold several, and prose around
    them).
    """
    if cell.cell_type != "markdown":
        return []
    return [line for line in cell.source.splitlines() if line.startswith("## ")]


def body_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Code cells of the chapter's body: after its set-up (the cells before the first
    ``##`` section) and

    before ``## Exercises``. Grading skips those the student left as handed out: the
    exercises need only the set-up, and the body holds the chapter's measurements,
    which would make grading a class take hours.
    """
    sections = [(i, h) for i, c in enumerate(nb.cells) for h in _sections(c)]
    exercises = next((i for i, h in sections if h.startswith("## Exercises")), None)
    if exercises is None:
        return []
    return [
        i for i in range(sections[0][0], exercises) if nb.cells[i].cell_type == "code"
    ]


def _code(source: str) -> str:
    """A cell's code without Quarto options and blank lines, for comparing a submission
    with its handout.
    """
    return "\n".join(
        l.rstrip() for l in source.splitlines() if l.strip() and not l.startswith("#|")
    )


@dataclasses.dataclass(frozen=True)
class Handout:
    """What a chapter's student notebook held: its solution stubs and its body cells."""

    stubs: frozenset[str]
    body: frozenset[str]
    cells: frozenset[str] = frozenset()  # every code cell, as handed out


@functools.cache
def handed_out(qmd: Path) -> Handout:
    """The solution cells (stubs in place) and body cells of a chapter's student
    notebook.
    """
    nb = student_notebook(qmd)
    return Handout(
        frozenset(
            _code(c.source)
            for c in nb.cells
            if c.metadata.get("jitbook", {}).get("role") == "solution"
        ),
        frozenset(_code(nb.cells[i].source) for i in body_cells(nb)),
        frozenset(_code(c.source) for c in nb.cells if c.cell_type == "code"),
    )


def verdict_source(exercise_id: str, check_limit: float | None, nonce: str) -> str:
    """The grader's cell for one exercise: the sealed checker, never the notebook's
    ``check``, answering with a nonce no earlier cell could know.
    """
    return (
        f'__import__("sys").modules["{GRADER_MODULE}"].GRADER.grade('
        f"{exercise_id!r}, time_limit={check_limit!r}, nonce={nonce!r})"
    )


def _verdict(exercise_id: str, check_limit, index=None, after=None) -> Step:
    nonce = secrets.token_hex(16)
    cell = nbformat.v4.new_code_cell(verdict_source(exercise_id, check_limit, nonce))
    return Step("verdict", cell, exercise_id, index, after=after, nonce=nonce)


def plan(
    nb: nbformat.NotebookNode,
    exercises: list[str],
    handout: Handout,
    prelude: str,
    check_limit: float | None = None,
) -> list[Step]:
    """What a grading kernel runs, in order: the grader's set-up, every cell the student
    wrote or kept (body cells left as handed out are skipped), and the grader's own
    check where the notebook last checks each exercise, as Run All would leave it (a
    scratch check above the solution decides nothing); exercises whose check cell is
    gone are checked at the end.
    """
    steps = [Step("prelude", nbformat.v4.new_code_cell(prelude))]
    body = set(body_cells(nb))
    last = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for exercise_id in check_calls(cell.source):
                last[exercise_id] = i
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        here = [e for e in exercises if last.get(e) == i]
        if only_checks(cell.source):
            steps += [_verdict(e, check_limit, index=i) for e in here[:1]]
            steps += [_verdict(e, check_limit, after=i) for e in here[1:]]
            continue
        if not (i in body and _code(cell.source) in handout.body):
            steps.append(Step("student", _fresh(cell), None, i))
            steps += [_verdict(e, check_limit, after=i) for e in here]
    steps += [_verdict(e, check_limit) for e in exercises if e not in last]
    return steps


def _fresh(cell) -> nbformat.NotebookNode:
    """A copy of a code cell without its stored outputs: a stored output counts for
    nothing.
    """
    copied = nbformat.v4.new_code_cell(cell.source)
    copied.metadata = copy.deepcopy(cell.get("metadata", {}))
    return copied
