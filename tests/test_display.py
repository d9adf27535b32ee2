import pytest

import jitbook
from jitbook import display, why_compile


def test_show_source_is_the_exact_source_in_a_python_block():
    shown = jitbook.show_source(why_compile.tiny)._repr_markdown_()
    with open(why_compile.__file__) as f:
        module_text = f.read()
    body = shown.removeprefix("```python\n").removesuffix("\n```")
    assert shown.startswith("```python\n") and body in module_text
    assert body.startswith("def tiny(")


def test_show_source_refuses_a_value_with_a_hint():
    with pytest.raises(TypeError, match="pass the object itself"):
        jitbook.show_source(3.0)


def test_table_renders_markdown_and_rejects_bad_rows():
    md = jitbook.table([{"a": 1, "b": 0.123456}, {"a": 2, "b": "x|y"}], caption="cap").text
    assert md.splitlines()[:3] == ["| a | b |", "|---|---|", "| 1 | 0.1235 |"]
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
        jitbook.is_small()
