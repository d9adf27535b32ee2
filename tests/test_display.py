import pytest

import jitbook
from jitbook import display, guard
from jitbook.chapters import why_compile


def test_show_source_is_the_exact_source_in_a_python_block():
    shown = jitbook.show_source(why_compile.tiny, folded=False)._repr_markdown_()
    with open(why_compile.__file__) as f:
        module_text = f.read()
    body = shown.removeprefix("```python\n").removesuffix("\n```")
    assert shown.startswith("```python\n") and body in module_text
    assert body.startswith("def tiny(")


def test_show_source_refuses_a_value_with_a_hint():
    with pytest.raises(TypeError, match="pass the object itself"):
        jitbook.show_source(3.0)


def test_table_renders_markdown_and_rejects_bad_rows():
    md = jitbook.table(
        [{"a": 1, "b": 0.123456}, {"a": 2, "b": "x|y"}], caption="cap"
    ).text
    assert md.splitlines()[:3] == ["| a | b |", "|--:|:-----|", "| 1 | 0.1235 |"], (
        "as wide as the column, numbers right"
    )
    assert r"x\|y" in md and md.endswith(": cap")
    with pytest.raises(ValueError, match="list of dicts"):
        jitbook.table([])


def test_versions_lists_the_stack_and_device():
    rows = {r["component"]: r["version"] for r in display.version_rows()}
    import jax

    assert rows["jax"] == jax.__version__
    assert set(rows) >= {"Python", "jax", "jaxlib", "equinox", "optax", "device"}
    assert rows["device"].startswith("cpu")


def test_pick_follows_the_switch(monkeypatch):
    monkeypatch.setenv("JITBOOK_SMALL", "1")
    assert jitbook.pick(full=100, small=2) == 2
    monkeypatch.setenv("JITBOOK_SMALL", "0")
    assert jitbook.pick(full=100, small=2) == 100
    monkeypatch.setenv("JITBOOK_SMALL", "yes please")
    with pytest.raises(ValueError, match="JITBOOK_SMALL must be 1"):
        jitbook.size.is_small()


def test_fit_wraps_long_lines_at_spaces_with_a_hanging_indent():
    text = "short\n  hint: " + "word " * 30
    lines = display.fit(text, width=40).splitlines()
    assert lines[0] == "short" and all(len(line) <= 40 for line in lines)
    assert lines[1].startswith("  hint: word") and all(
        line.startswith("      word") for line in lines[2:]
    )
    assert " ".join(" ".join(lines[1:]).split()) == " ".join(
        text.splitlines()[1].split()
    ), "no word is lost"
    assert display.fit("x" * 50, width=40) == "x" * 50, (
        "a long word is kept whole rather than cut"
    )


def test_clip_lines_cuts_each_line_to_the_column_and_says_so():
    text = "short\n" + "x" * 200
    lines = display.clip_lines(text).splitlines()
    assert (
        lines[0] == "short"
        and len(lines[1]) == display.COLUMN
        and lines[1].endswith("…")
    )
    assert display.clip_lines("abcdef", width=4) == "abc…"


def test_a_table_column_of_prose_counts_as_wide_as_a_wrapped_line_not_its_longest_cell():
    rows = [{"id": "`recompilation.static-coeffs`", "judged on": "its values " * 30}]
    rule = display.table(rows).text.splitlines()[1]
    id_dashes, prose_dashes = (len(cell) for cell in rule.strip("|").split("|"))
    assert id_dashes == len(rows[0]["id"]) and prose_dashes == display.WRAPS_AT


def test_table_escapes_tags_outside_code_so_markdown_keeps_the_words():
    md = jitbook.table(
        [{"result": "no: <Error>", "code": "`<lambda>`"}],
        caption="'no: <Error>' raised",
    ).text
    assert r"| no: \<Error\> | `<lambda>` |" in md and md.endswith(
        r": 'no: \<Error\>' raised"
    )


def test_the_xla_flags_row_is_a_code_span_so_its_dashes_stay_two(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", guard.XLA_FLAG)
    rows = {r["component"]: r["version"] for r in display.version_rows()}
    assert rows["XLA_FLAGS"] == f"`{guard.XLA_FLAG}`"


def test_numbers_carry_thousands_separators_except_four_digit_ones():
    assert (
        display.number(16008000) == "16,008,000"
        and display.number(-50_000) == "-50,000"
    )
    assert display.number(1024) == "1,024" and display.number(1024.0) == "1,024"
    assert display.number(3.2e9) == "3,200,000,000", (
        "no exponent form for large numbers"
    )
    assert display.number(0.000123) == "0.000123" and display.number(3.14159) == "3.142"
    assert display.number(123456.7) == "123,457"
    assert "| 16,008,000 |" in jitbook.table([{"bytes": 16008000}]).text
    with pytest.raises(TypeError, match="int or a float"):
        display.number("12")


def test_words_read_as_a_person_writes_them():
    assert display.plural(1, "compile") == "1 compile"
    assert display.plural(3, "compile") == "3 compiles"
    assert display.plural(12000, "iteration") == "12,000 iterations"
    assert display.plural(2, "body run", "body runs") == "2 body runs"
    assert display.duration(35e-6) == "35 µs" and display.duration(1.234e-3) == "1.2 ms"
    assert display.duration(4.31) == "4.3 s" and display.duration(126.0) == "2.1 min"
    assert display.duration(0.0123) == "12 ms" and display.duration(0.5) == "500 ms"
    assert display.span(0.0121, 0.0124) == "12 ms", "equal once written: one value"
    assert display.span(0.012, 0.015) == "between 12 ms and 15 ms"
    assert display.agreement(0.0) == "identical"
    assert display.agreement(2.1e-5) == "within 2.1e-05"
    with pytest.raises(ValueError, match=">= 0"):
        display.duration(-1.0)
    with pytest.raises(ValueError, match="count must be a whole number >= 0"):
        display.plural(1.5, "compile")


def test_a_column_of_numbers_has_one_format():
    assert display.numbers([93.5, 99.53, 142.8]) == ["93.5", "99.5", "142.8"]
    assert display.numbers([0.53, 0.49]) == ["0.53", "0.49"] and display.numbers(
        [1.0, 2.5]
    ) == ["1.0", "2.5"]
    assert display.numbers([0.0012, 93.5]) == ["0.0012", "93.5"], (
        "a thousandfold apart: each its own digits"
    )
    assert display.numbers([1.2e-5, 3.4e-5]) == ["1.2e-05", "3.4e-05"]
    assert display.numbers([16008000, 2.5]) == ["16,008,000", "2.5"], (
        "ints as number() writes them"
    )
    assert (
        "| 93.5 |\n| 99.5 |\n| 142.8 |"
        in jitbook.table([{"ms": v} for v in (93.5, 99.53, 142.8)]).text
    )
