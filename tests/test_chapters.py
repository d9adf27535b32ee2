"""Every page listed in _quarto.yml runs top to bottom in a fresh kernel, and its exercises pass."""

import pytest

from jitbook import book, exercises
from jitbook.exercises import registry


@pytest.mark.chapter
@pytest.mark.parametrize("page", book.chapter_files(), ids=lambda p: p.name)
def test_page_executes_and_its_exercises_pass(page, tmp_path):
    nb = book.execute(page)
    reports = {r["exercise"]: r for r in exercises.reports(nb.cells)}
    expected = {id for id, ex in registry().items() if ex.chapter == page.stem}
    assert set(reports) >= expected, f"exercises never checked in {page.name}: {sorted(expected - set(reports))}"
    failed = {id: r["message"] for id, r in reports.items() if not r["passed"]}
    assert not failed, f"reference solutions that fail their checker in {page.name}: {failed}"


def test_every_exercise_belongs_to_a_listed_chapter():
    stems = {p.stem for p in book.chapter_files()}
    orphans = [id for id, ex in registry().items() if ex.chapter not in stems]
    assert not orphans, f"exercises whose chapter is not in the book: {orphans}"
