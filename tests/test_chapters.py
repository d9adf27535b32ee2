"""Every page listed in _quarto.yml runs top to bottom in a fresh kernel, and its exercises pass.

Each executed notebook is kept, as a reader downloads it, in one folder per test session
(``executed_dir``), so that tests/test_site.py checks these notebooks instead of running every chapter again.
"""

from pathlib import Path

import nbformat
import pytest

from jitbook import book, exercises
from jitbook.exercises import registry


def executed_dir(tmp_path_factory) -> Path:
    """The session's folder of executed chapter notebooks (shared with tests/test_site.py)."""
    path = tmp_path_factory.getbasetemp() / "executed-chapters"
    path.mkdir(exist_ok=True)
    return path


@pytest.mark.chapter
@pytest.mark.parametrize("page", book.chapter_files(), ids=lambda p: p.name)
def test_page_executes_and_its_exercises_pass(page, tmp_path_factory):
    nb = book.execute(page)
    nbformat.write(book.reader_notebook(nb), executed_dir(tmp_path_factory) / f"{page.stem}.ipynb")
    reports = {r["exercise"]: r for r in exercises.reports(nb.cells)}
    expected = {id for id, ex in registry().items() if ex.chapter == page.stem}
    assert set(reports) >= expected, f"exercises never checked in {page.name}: {sorted(expected - set(reports))}"
    failed = {id: r["message"] for id, r in reports.items() if not r["passed"]}
    assert not failed, f"reference solutions that fail their checker in {page.name}: {failed}"


def test_every_exercise_belongs_to_a_listed_chapter():
    stems = {p.stem for p in book.chapter_files()}
    orphans = [id for id, ex in registry().items() if ex.chapter not in stems]
    assert not orphans, f"exercises whose chapter is not in the book: {orphans}"
