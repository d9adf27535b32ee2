"""How the pages read: the JAX code a section is about on the page, the book's plumbing out of sight."""

import ast
import re
from pathlib import Path

import pytest

from jitbook import display
from jitbook.site import harness

# Calls that only display, pick a size or run a process: the book's plumbing, not the JAX a page teaches.
PLUMBING = re.compile(
    r"^(jitbook\.)?(table|pick|show_source|executed_on)$"
    r"|^(jitbook\.)?(display|explore)\.\w+$"
    r"|(^|\.)(in_fresh_process|run_cold)$"
)
MOST_PLUMBING = 0.10


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a call's function, ``""`` for anything not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


def plumbing_lines(source: str) -> set[int]:
    """The (1-based) lines of ``source`` that a plumbing call spans."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and PLUMBING.search(dotted(node.func)):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def shown_sources(source: str, namespace: dict) -> list[str]:
    """The source text of each ``show_source(obj, folded=False)`` in a hidden cell: code the page shows."""
    shown = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and dotted(node.func).endswith("show_source")
            and any(
                k.arg == "folded" and getattr(k.value, "value", True) is False
                for k in node.keywords
            )
        ):
            obj = eval(compile(ast.Expression(node.args[0]), "<qmd>", "eval"), namespace)
            shown.append(display.source(obj))
    return shown


def chapter_imports(cells) -> dict:
    """A namespace holding every name the chapter's cells import."""
    namespace: dict = {}
    for cell in cells:
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                exec(compile(ast.Module([node], []), "<qmd>", "exec"), namespace)
    return namespace


def code_lines(text: str) -> list[tuple[int, str]]:
    """Non-blank lines with their numbers, Quarto's ``#|`` options left out."""
    return [
        (n, line)
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#|")
    ]


def visible_code(page: Path) -> tuple[int, int]:
    """(visible code lines, of which plumbing) on a page: cells neither hidden (``echo: false``) nor folded,
    plus the listings that hidden cells show unfolded."""
    cells = [c for c in harness.to_notebook(page).cells if c.cell_type == "code"]
    namespace = None
    visible = plumbing = 0
    for cell in cells:
        options = cell.metadata["jitbook"]["options"]
        if options.get("echo") is False or options.get("include") is False:
            if "folded=False" in cell.source.replace(" ", ""):
                namespace = namespace or chapter_imports(cells)
                for text in shown_sources(cell.source, namespace):
                    visible += len(code_lines(text))
            continue
        if options.get("code-fold") is True:
            continue
        lines = code_lines(cell.source)
        calls = plumbing_lines(cell.source)
        visible += len(lines)
        plumbing += sum(n in calls for n, _ in lines)
    return visible, plumbing


def test_plumbing_lines_are_the_lines_a_plumbing_call_spans():
    source = (
        "x = jnp.ones(3)\n"
        "rows = jitbook.pick(full=1,\n"
        "                    small=2)\n"
        "sweep = why_compile.size_sweep(\n"
        "    jitbook.pick(full=[1], small=[2])\n"
        ")\n"
        "display.duration(1.0), fresh.in_fresh_process('a', 'b')\n"
        "jitbook.table(rows)\n"
    )
    assert plumbing_lines(source) == {2, 3, 5, 7, 8}


def test_a_hidden_cell_that_shows_a_listing_unfolded_counts_its_lines(tmp_path):
    page = tmp_path / "p.qmd"
    page.write_text(
        "# P {#sec-p}\n\n```{python}\nfrom jitbook import timing\n```\n\n"
        "```{python}\n#| echo: false\njitbook.show_source(timing.verdict_from_rounds, folded=False)\n```\n\n"
        "```{python}\n#| echo: false\njitbook.show_source(timing.race)\n```\n\n"
        "```{python}\n#| code-fold: true\nx = 1\n```\n\n"
        "```{python}\njitbook.table([])\n```\n"
    )
    from jitbook import timing

    listing = len(code_lines(display.source(timing.verdict_from_rounds)))
    assert visible_code(page) == (1 + listing + 1, 1)


@pytest.mark.parametrize(
    "page", harness.chapter_files(), ids=lambda p: p.stem
)
def test_no_page_shows_more_than_a_tenth_plumbing_among_its_visible_code(page):
    visible, plumbing = visible_code(page)
    share = plumbing / visible if visible else 0.0
    print(f"{page.stem}: {plumbing} of {visible} visible code lines are plumbing ({share:.0%})")
    assert share <= MOST_PLUMBING, (
        f"{page.name}: {plumbing} of {visible} visible code lines ({share:.0%}) call the book's "
        "plumbing (tables, display, sizes, fresh processes, explorers): hide them (`#| echo: false`) "
        "and show the JAX code instead"
    )
