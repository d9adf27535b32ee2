"""Every page listed in _quarto.yml runs top to bottom in a fresh kernel, and its exercises pass.

Each executed notebook is kept, as a reader downloads it, for the session (the ``executed`` fixture of
conftest.py), so tests/test_site.py and tests/test_browser.py check these notebooks instead of running every
chapter again.
"""

import pytest

from jitbook import exercises
from jitbook.exercises import registry
from jitbook.site import harness


@pytest.mark.chapter
@pytest.mark.parametrize("page", harness.chapter_files(), ids=lambda p: p.name)
def test_page_executes_and_its_exercises_pass(page, executed):
    nb = executed(
        page
    )  # runs the chapter in a fresh kernel, once per session (see conftest.py)
    reports = {r["exercise"]: r for r in exercises.reports(nb.cells)}
    expected = {id for id, ex in registry().items() if ex.chapter == page.stem}
    assert set(reports) >= expected, (
        f"exercises never checked in {page.name}: {sorted(expected - set(reports))}"
    )
    failed = {id: r["message"] for id, r in reports.items() if not r["passed"]}
    assert not failed, (
        f"reference solutions that fail their checker in {page.name}: {failed}"
    )


def test_every_exercise_belongs_to_a_listed_chapter():
    stems = {p.stem for p in harness.chapter_files()}
    orphans = [id for id, ex in registry().items() if ex.chapter not in stems]
    assert not orphans, f"exercises whose chapter is not in the book: {orphans}"
