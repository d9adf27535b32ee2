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
            obj = eval(
                compile(ast.Expression(node.args[0]), "<qmd>", "eval"), namespace
            )
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


@pytest.mark.parametrize("page", harness.chapter_files(), ids=lambda p: p.stem)
def test_no_page_shows_more_than_a_tenth_plumbing_among_its_visible_code(page):
    visible, plumbing = visible_code(page)
    share = plumbing / visible if visible else 0.0
    print(
        f"{page.stem}: {plumbing} of {visible} visible code lines are plumbing ({share:.0%})"
    )
    assert share <= MOST_PLUMBING, (
        f"{page.name}: {plumbing} of {visible} visible code lines ({share:.0%}) call the book's "
        "plumbing (tables, display, sizes, fresh processes, explorers): hide them (`#| echo: false`) "
        "and show the JAX code instead"
    )


# ---- diagrams -------------------------------------------------------------------------------------------

IMAGES = harness.ROOT / "chapters" / "images"
DIAGRAMS = {"jit-road": "why-compile", "jit-caches": "cache-key"}
# The light drawing's colours and the dark drawing's, in order: the dark one is the light one repainted.
LIGHT = ["#333333", "#222222", "#ffffff", "#dbe8fb", "#fdf1d6", "#18652b"]
DARK = ["#d0d0d0", "#e8e8e8", "#2b2b2b", "#1d3557", "#4a3b16", "#6fd08a"]
PAGE = {"light": "#ffffff", "dark": "#222222"}  # cosmo's and darkly's page backgrounds


def repainted(svg: str) -> str:
    for light, dark in zip(LIGHT, DARK, strict=True):
        svg = svg.replace(light, dark)
    return svg


def luminance(colour: str) -> float:
    """WCAG's relative luminance of ``#rrggbb``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = [
        c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels
    ]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def text_and_backgrounds(svg: str) -> tuple[set[str], set[str]]:
    """The colours text is drawn in, and those it lies on (box fills and the page)."""
    texts = set(re.findall(r'<(?:text|g)[^>]*fill="(#[0-9a-f]{6})"', svg))
    boxes = set(re.findall(r'<rect[^>]*fill="(#[0-9a-f]{6})"', svg))
    return texts, boxes


@pytest.mark.parametrize("name", DIAGRAMS)
def test_each_diagram_has_a_dark_variant_that_is_the_light_one_repainted(name):
    light = (IMAGES / f"{name}.svg").read_text()
    dark = (IMAGES / f"{name}-dark.svg").read_text()
    assert dark == repainted(light), (
        f"{name}-dark.svg is not {name}.svg with the palette swapped"
    )
    assert not set(LIGHT) & set(re.findall(r"#[0-9a-f]{6}", dark))


@pytest.mark.parametrize("name", [f"{n}{v}" for n in DIAGRAMS for v in ("", "-dark")])
def test_each_diagram_is_offline_scalable_described_and_legible(name):
    svg = (IMAGES / f"{name}.svg").read_text()
    assert re.search(r'viewBox="0 0 \d+ \d+"', svg), (
        "a viewBox, so it scales to a phone"
    )
    assert re.search(r"<title[^>]*>\w", svg) and re.search(r"<desc[^>]*>\w", svg)
    assert not re.search(
        r"https?://(?!www\.w3\.org/2000/svg)|<image|<script|@import", svg
    )
    page = PAGE["dark" if name.endswith("-dark") else "light"]
    texts, boxes = text_and_backgrounds(svg)
    assert texts and boxes
    low = [(t, b) for t in texts for b in boxes | {page} if contrast(t, b) < 4.5]
    assert not low, (
        f"{name}: text colour on background below WCAG AA contrast 4.5: {low}"
    )


@pytest.mark.parametrize("name,chapter", DIAGRAMS.items())
def test_each_diagram_sits_in_the_chapter_that_teaches_it_with_alt_text_and_a_light_pdf(
    name, chapter
):
    page = (harness.ROOT / "chapters" / f"{chapter}.qmd").read_text()
    figure = re.search(
        rf"::: \{{#fig-{name}\}}\n(.*?)\n:::\n\n(.+?)\n:::\n", page, re.S
    )
    assert figure, f"{chapter}.qmd has no figure #fig-{name}"
    body = figure.group(1)
    assert f"![](images/{name}.svg){{.light-content fig-alt=" in body
    # the PDF (Typst) has no dark mode: the dark drawing is for the site only
    assert (
        f'::: {{.content-visible when-format="html"}}\n![](images/{name}-dark.svg){{.dark-content fig-alt='
        in body
    )
    svg = (IMAGES / f"{name}.svg").read_text()
    described = (
        re.search(r"<desc[^>]*>(.*?)</desc>", svg, re.S).group(1).replace('"', "'")
    )
    assert body.count(f'fig-alt="{described}"') == 2, (
        "the figure's alt text is the drawing's description"
    )


@pytest.mark.parametrize("name,chapter", DIAGRAMS.items())
def test_a_downloaded_notebook_carries_the_light_drawing_as_an_attachment(
    name, chapter
):
    import base64

    import nbformat

    from jitbook.site import downloads

    nb = downloads.reader_notebook(
        harness.to_notebook(harness.ROOT / "chapters" / f"{chapter}.qmd"), titles={}
    )
    nbformat.validate(nb)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert f"](attachment:{name}.svg)" in text
    assert (
        "images/" not in text
        and "-dark.svg" not in text
        and "light-content" not in text
    )
    (cell,) = [c for c in nb.cells if f"{name}.svg" in c.get("attachments", {})]
    carried = base64.b64decode(cell.attachments[f"{name}.svg"]["image/svg+xml"])
    assert carried == (IMAGES / f"{name}.svg").read_bytes()
