"""The symptom index: its entries, its message finder, and the index held against every
executed chapter (a chapter that shows a message the index lacks fails here)."""

import nbformat
import pytest

from jitbook import display
from jitbook.chapters import symptoms
from jitbook.site import downloads, harness


def test_the_index_has_at_least_25_messages_each_with_a_known_section():
    titles = downloads.label_titles()
    assert len(symptoms.INDEX) >= 25
    for s in symptoms.INDEX:
        assert s.section in titles, f"{s.pattern!r} points at unknown {s.section}"
        assert s.meaning and s.heading and "\n" not in s.meaning


# Not a claim in the ledger: it checks the index against this JAX's own words, which
# older releases word differently by design (the chapters' claims cover the behaviour).
def test_every_entry_makes_jax_say_its_message_again():
    rows = symptoms.rows()
    assert len(rows) == len(symptoms.INDEX)
    for row, s in zip(rows, symptoms.INDEX, strict=True):
        assert row["shown in"].startswith(f"@{s.section}")
        assert s.matches(row["message"].strip("` "))


def test_lookup_finds_a_pasted_message_and_refuses_bad_input():
    found = symptoms.lookup(
        "ValueError: Non-hashable static arguments are not supported. An error"
    )
    assert [s.section for s in found] == ["sec-recompilation-static"]
    assert symptoms.lookup("nothing like a JAX message") == []
    with pytest.raises(TypeError, match="paste it"):
        symptoms.lookup("")


def test_messages_are_found_in_wrapped_errors_and_logs_but_not_in_source():
    error = "ValueError: " + "word " * 30
    text = display.fit(error) + "\nFinished XLA compilation of jit(f) in 0.1 sec\n"
    assert symptoms.messages_in(text) == [
        " ".join(error.split()),
        "Finished XLA compilation of jit(f) in 0.1 sec",
    ]
    cell = {
        "outputs": [
            {
                "output_type": "display_data",
                "data": {"text/markdown": "```python\nraise TypeError(\n```"},
            },
            {
                "output_type": "execute_result",
                "data": {"text/plain": "('TypeError: bad', 1)"},
            },
        ]
    }
    texts = list(symptoms.output_texts(cell))
    assert len(texts) == 1 and symptoms.classes_in(texts[0]) == {"TypeError"}


def test_a_message_the_index_lacks_is_reported():
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"jitbook": {"qmd_line": 3}},
                "outputs": [
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": "BrandNewError: nobody has seen this\n"
                        "TRACING CACHE MISS at f.py:1:1 (g):\n",
                    }
                ],
            }
        ]
    }
    cells = symptoms.shown(nbformat.from_dict(nb), "# A {#sec-a}\n\ntext\n")
    assert cells[0].section == "sec-a"
    assert symptoms.not_in_index(cells) == [
        "BrandNewError: nobody has seen this",
        "class BrandNewError",
    ]


def test_section_at_names_the_innermost_labelled_heading():
    qmd = "# A {#sec-a}\n\n## B\n\ntext\n\n```\n# not a heading\n```\n\n## C {#sec-c}\n\nx\n"
    assert symptoms.section_at(qmd, 5) == ("sec-a", "B")
    assert symptoms.section_at(qmd, 9) == ("sec-a", "B")
    assert symptoms.section_at(qmd, 13) == ("sec-c", "C")


@pytest.mark.chapter
def test_every_message_the_chapters_show_is_in_the_index(executed):
    produced = {
        s: symptoms.normalized(symptoms.without_paths(s.produce()))
        for s in symptoms.INDEX
    }
    missing, shown_at = [], {s: set() for s in symptoms.INDEX}
    for page in harness.chapter_files():
        if page.stem in symptoms.NOT_INDEXED:
            continue
        cells = symptoms.shown(executed(page), page.read_text())
        missing += [f"{page.name}: {m}" for m in symptoms.not_in_index(cells)]
        if page.stem == "symptoms":
            continue  # the index itself is no evidence that a chapter shows it
        for cell in cells:
            text = symptoms.normalized(cell.text)
            for s, message in produced.items():
                if message in text:
                    shown_at[s].add((cell.section, cell.heading))
    assert not missing, (
        "messages the chapters show that the index lacks:\n" + "\n".join(missing)
    )
    for s, places in shown_at.items():
        assert (s.section, s.heading) in places, (
            f"{s.pattern!r}: its message, as produced now, is not shown under "
            f"{s.section} “{s.heading}”; shown at {sorted(places)}"
        )
