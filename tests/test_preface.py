"""The preface promises only what the book keeps: its opening says why to read on, its
list of stored measurements names every one the book holds, and every chapter opens with
a list of what it shows and ends with exercises that a checker answers."""

import re
from pathlib import Path

import pytest

from jitbook.site import harness

ROOT = Path(__file__).resolve().parents[1]
PREFACE = (ROOT / "index.qmd").read_text()


def _chapters_in_parts() -> list[Path]:
    book = harness.book_config(ROOT)["book"]
    return [
        ROOT / page
        for entry in book["chapters"]
        if isinstance(entry, dict)
        for page in entry.get("chapters", [])
    ]


def test_the_opening_says_why_to_read_on_before_any_provenance():
    opening = re.sub(r"```\{python\}.*?```", "", PREFACE.split("\n## ")[0], flags=re.S)
    for jargon in ("stored measurement", "ledger", "make ledger", "claim"):
        assert jargon not in opening.lower(), jargon
    assert "@sec-preface-evidence" in opening
    assert "{#sec-preface-evidence}" in PREFACE


def test_the_preface_names_every_stored_measurement_the_book_holds():
    data = ROOT / "data"
    stored = [
        p.name for p in data.iterdir() if p.name not in {"README.md", "oaks"}
    ]  # oaks is the input data set, not a measurement
    assert stored, "data/ holds the stored measurements"
    evidence = PREFACE.split("{#sec-preface-evidence}")[1].split("\n## ")[0]
    for name in stored:
        suffix = "" if (data / name).is_file() else "/"
        assert f"`data/{name}{suffix}`" in evidence, (
            f"data/{name} is not in the preface"
        )
    assert "pyPLNmodels reference fit" in evidence  # stored in data/README.md
    assert not re.search(r"\b(two|three|four|five|six) kinds\b", evidence)


@pytest.mark.parametrize("page", _chapters_in_parts(), ids=lambda p: p.stem)
def test_every_chapter_opens_with_a_linked_list_and_ends_with_checked_exercises(page):
    text = page.read_text()
    opening = text.split("\n## ")[0]
    assert re.search(r"^- .*\]\(#sec-", opening, re.M), "no list of what it shows"
    exercises = re.findall(r"^::: \{#exr-", text, re.M)
    assert exercises, "no exercises"
    assert text.count('check("') >= len(exercises), "an exercise without a checker"
    assert text.index("## Exercises") > text.index(opening.splitlines()[-1])
