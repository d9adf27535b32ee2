"""The symptom index: its entries, its message finder, and the index held against every
executed chapter (a chapter that shows a message the index lacks fails here)."""

import nbformat
import pytest

from jitbook import display
from jitbook.chapters import symptoms, symptoms_producers
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


# --- the meanings the page reads closely, each measured at its source


@pytest.mark.claim("sec-symptoms-read-closely", "clm-symptoms-integer-conversion")
def test_integer_conversion_comes_from_index_not_int():
    import operator

    import jax
    import jax.numpy as jnp

    from jitbook.errors import raised

    said = symptoms_producers.integer_conversion_sources()
    assert said == {
        "range(x)": "TracerIntegerConversionError",
        "operator.index(x)": "TracerIntegerConversionError",
        "[1, 2, 3][x]": "TracerIntegerConversionError",
        "int(x)": "ConcretizationTypeError",
    }
    err = raised(jax.jit(lambda x: operator.index(x) and x), jnp.int32(2))
    assert "__index__" in str(err)  # the hook all three go through
    (row,) = [s for s in symptoms.INDEX if s.kind == "TracerIntegerConversionError"]
    assert "ConcretizationTypeError" in row.meaning and "operator.index" in row.meaning
    assert row.produce() != "TracerIntegerConversionError"  # a message, not a class


@pytest.mark.claim("sec-symptoms-read-closely", "clm-symptoms-never-seen")
def test_never_seen_function_is_about_the_function_object_not_the_wrapper():
    logged = symptoms_producers.never_seen_logs()
    assert logged == {
        "a new jax.jit wrapper of a traced function": False,
        "a new lambda": True,
    }
    (row,) = [s for s in symptoms.INDEX if s.pattern == r"^never seen function"]
    assert "logs nothing" in row.meaning


@pytest.mark.claim("sec-symptoms-read-closely", "clm-symptoms-re-tracing")
def test_re_tracing_function_refuses_calls_that_do_not_trace():
    from jitbook.chapters import jaxprs

    (printing,) = [r for r in jaxprs.no_tracing_rows() if "debug.print" in r["call"]]
    assert printing["body runs"] == 0 and printing["compiles"] == 0
    assert printing["under no_tracing"].startswith("RuntimeError: re-tracing function")
    (row,) = [s for s in symptoms.INDEX if "re-tracing" in s.pattern]
    assert "does not trace" in row.meaning


def test_no_row_shows_only_a_class_name():
    bare = [
        r["message"] for r in symptoms.rows() if r["message"].strip("` ").isidentifier()
    ]
    assert not bare


def test_read_closely_rows_match_the_claims():
    said = {r["what was done"]: r["what JAX said"] for r in symptoms.read_closely()}
    assert said["`int(x)` on a traced int"] == "ConcretizationTypeError"
    assert said["a new lambda, called"] == "never seen function"
