"""What a grading kernel runs: the notebook as Run All runs it, then the collector."""

import copy
import dataclasses
import functools
import json
from pathlib import Path

import nbformat

from jitbook.classroom.handout import checked_exercise, student_notebook
from jitbook.exercises import registry
from jitbook.site import harness


@dataclasses.dataclass
class Step:
    """A cell the grading kernel runs: a cell of the submission, or the collector."""

    kind: str  # "student" or "collect"
    cell: nbformat.NotebookNode
    index: int | None = None  # the cell's place in the submission
    exercise: str | None = None  # a collector's
    failure: str = ""  # why it did not finish: a time limit or a dead kernel


def chapter_of(
    path: Path, nb: nbformat.NotebookNode | None, stems: list[str]
) -> str | None:
    """The chapter a submission belongs to: notebook metadata first, else the longest
    chapter stem in its name.
    """
    meta = (nb or {}).get("metadata", {})
    meta = meta.get("jitbook", {}) if isinstance(meta, dict) else {}
    source = meta.get("source") if isinstance(meta, dict) else None
    source = source if isinstance(source, str) else None
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


def _code(source: str) -> str:
    """A cell's code without Quarto options and blank lines, for comparing a submission
    with its handout.
    """
    return "\n".join(
        l.rstrip() for l in source.splitlines() if l.strip() and not l.startswith("#|")
    )


@dataclasses.dataclass(frozen=True)
class Handout:
    """What a chapter's student notebook held: its solution stubs."""

    stubs: frozenset[str]


@functools.cache
def handed_out(qmd: Path) -> Handout:
    """The solution cells (stubs in place) of a chapter's student notebook."""
    nb = student_notebook(qmd)
    return Handout(
        frozenset(
            _code(c.source)
            for c in nb.cells
            if jitbook_meta(c).get("role") == "solution"
        )
    )


def collector_source(exercise_id: str, requests: list[dict], limit: float) -> str:
    """The grader's cell for one exercise: answer its requests from the notebook's
    names and display the evidence. It decides nothing."""
    asked = json.dumps({exercise_id: requests})
    return (
        "from jitbook.evidence.collect import show as _jitbook_show\n"
        f"_jitbook_show(__import__('json').loads({json.dumps(asked)}), "
        f"time_limit={limit!r})"
    )


def plan(
    nb: nbformat.NotebookNode,
    requests: dict[str, list[dict]],
    limits: dict[str, float],
) -> list[Step]:
    """What a grading kernel runs, in order: every code cell of the submission as Run
    All runs it (stored outputs count for nothing), then a collector cell for each
    exercise (one that hangs costs only its own evidence)."""
    steps = [
        Step("student", _fresh(cell), i)
        for i, cell in enumerate(nb.cells)
        if cell.get("cell_type") == "code" and str(cell.get("source", "")).strip()
    ]
    for exercise_id, asked in requests.items():
        source = collector_source(exercise_id, asked, limits[exercise_id])
        cell = nbformat.v4.new_code_cell(source)
        steps.append(Step("collect", cell, exercise=exercise_id))
    return steps


def _fresh(cell) -> nbformat.NotebookNode:
    """A copy of a code cell without its stored outputs: a stored output counts for
    nothing.
    """
    copied = nbformat.v4.new_code_cell(str(cell.get("source", "")))
    metadata = cell.get("metadata", {})
    copied.metadata = copy.deepcopy(metadata) if isinstance(metadata, dict) else {}
    return copied


def jitbook_meta(cell) -> dict:
    """A cell's ``jitbook`` metadata, or {} when it is missing or not a mapping."""
    metadata = cell.get("metadata", {})
    found = metadata.get("jitbook", {}) if isinstance(metadata, dict) else {}
    return found if isinstance(found, dict) else {}
