"""The site a reader gets, checked on the executed notebooks it is built from (no Quarto needed).

The notebooks come from tests/test_chapters.py, which keeps each chapter it executes in the session's
``executed-chapters`` folder; a chapter it did not run (``-k``, one file) is executed here.
Where ``quarto`` is on PATH, the last test renders the book and checks the built site as served.
"""

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from jitbook import display
from jitbook.explore.page import plotly_js
from jitbook.site import cli, downloads, harness, post_render, wheel

ROOT = harness.ROOT
WIDTH = display.COLUMN
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ADDRESS = re.compile(
    r"\b0x[0-9a-fA-F]{6,}\b|\bid=\d{6,}"
)  # repr()'s hex address, JAX's cache-miss `id=`
# Pages whose outputs break a rule today, each fixed in the chapter (not here): a strict xfail turns red
# the day the page is fixed, so the mark is removed then.
KNOWN_WIDE = {}
KNOWN_WIDE_CODE: dict[
    str, str
] = {}  # none today: every shown code line fits the column
KNOWN_CAPTIONS: dict[
    str, str
] = {}  # none today: methods' strategies caption writes `<Error>` in code
KNOWN_STARS: dict[str, str] = {}
KNOWN_TAGS: dict[
    str, str
] = {}  # none today: methods' `<Error>` is written in code spans
KNOWN_EQUATIONS: dict[str, str] = {}
KNOWN_LEAKS: dict[
    str, str
] = {}  # none today: recompilation's logs and methods' addresses were fixed
BUILD_PATHS = [str(ROOT), "site-packages", "/.venv/", "/tmp/", str(Path.home()) + "/"]
# The head Quarto 1.7 adds to a page whose notebook has text/html output (src/core/jupyter/widgets.ts).
QUARTO_CDN_HEAD = (
    '<script src="https://cdn.jsdelivr.net/npm/requirejs@2.3.6/require.min.js" integrity="sha384-x" '
    'crossorigin="anonymous"></script>\n'
    '<script src="https://cdn.jsdelivr.net/npm/jquery@3.5.1/dist/jquery.min.js" integrity="sha384-y" '
    'crossorigin="anonymous" data-relocate-top="true"></script>\n'
    "<script type=\"application/javascript\">define('jquery', [],function() {return window.jQuery;})</script>\n"
)


def chapters() -> list[Path]:
    return [p for p in harness.chapter_files() if p.exists()]


def known(failing: dict[str, str]) -> list:
    """The chapters as parameters, those in ``failing`` marked as strict expected failures with the reason."""
    return [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=failing[p.name]))
        if p.name in failing
        else p
        for p in chapters()
    ]


def output_texts(nb) -> list[tuple[int, str]]:
    """(cell index, text) of every text a reader sees in the outputs: streams, plain text, errors, Markdown."""
    texts = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "stream":
                texts.append((i, out["text"]))
            elif out.get("output_type") == "error":
                texts.append((i, f"{out['ename']}: {out['evalue']}"))
            else:
                data = out.get("data", {})
                texts += [
                    (i, data[m])
                    for m in ("text/markdown", "text/plain", "text/html")
                    if m in data
                ][:1]
    return texts


def _code_lines(text: str) -> list[str]:
    """The lines shown as preformatted output: all of plain text, every code block of Markdown,
    the package's source that ``show_source`` shows included (ruff formats it at the same column)."""
    if "```" not in text and not text.lstrip().startswith("|"):
        return ANSI.sub("", text).splitlines()
    blocks = re.findall(r"^(`{3,})([^\n]*)\n(.*?)^\1", text, re.M | re.S)
    return [line for _, _, body in blocks for line in body.splitlines()]


@pytest.mark.parametrize("page", known(KNOWN_WIDE_CODE), ids=lambda p: p.name)
def test_every_shown_line_of_chapter_code_fits_the_column(page):
    """The site's code column holds display.COLUMN characters at 1280 px (theme.scss): no cell scrolls."""
    wide = [
        (cell.metadata["jitbook"]["qmd_line"] + 1 + k, len(line))
        for cell in harness.to_notebook(page).cells
        if cell.cell_type == "code"
        and cell.metadata["jitbook"]["options"].get("echo", True)
        for k, line in enumerate(cell.source.splitlines())
        if len(line) > WIDTH and not line.startswith("#|")
    ]
    assert not wide, (
        f"{page.name}: code lines wider than {WIDTH} characters (.qmd line, width): {wide}"
    )


@pytest.mark.chapter
@pytest.mark.parametrize("page", known(KNOWN_WIDE), ids=lambda p: p.name)
def test_no_output_line_is_wider_than_the_column(page, executed):
    nb = executed(page)
    markdown = {
        out["data"]["text/markdown"]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "text/markdown" in out.get("data", {})
    }
    # HTML outputs lay out their own text; a folded listing (show_source's <details>) is Markdown
    preformatted = [
        (i, line)
        for i, text in output_texts(nb)
        if text not in markdown
        and (not text.lstrip().startswith("<") or text.lstrip().startswith("<details"))
        for line in _code_lines(text)
    ]
    # Markdown wraps as prose: only its code blocks are preformatted
    in_markdown = [
        (i, line)
        for i, text in output_texts(nb)
        if text in markdown
        for _, _, body in re.findall(r"^(`{3,})([^\n]*)\n(.*?)^\1", text, re.M | re.S)
        for line in body.splitlines()
    ]
    wide = [
        (i, len(line), line[:60])
        for i, line in preformatted + in_markdown
        if len(line) > WIDTH
    ]
    assert not wide, (
        f"{page.name}: output lines wider than {WIDTH} characters (cell, width, start): {wide}"
    )


@pytest.mark.chapter
@pytest.mark.parametrize("page", known(KNOWN_LEAKS), ids=lambda p: p.name)
def test_outputs_carry_no_build_paths_or_memory_addresses(page, executed):
    nb = executed(page)
    texts = output_texts(nb) + [
        (i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
    ]
    paths = [(i, p) for i, text in texts for p in BUILD_PATHS if p in text]
    addresses = [(i, a) for i, text in texts for a in ADDRESS.findall(text)]
    assert not paths, (
        f"{page.name}: outputs show the build machine's paths (cell, path): {paths}"
    )
    assert not addresses, (
        f"{page.name}: outputs show memory addresses, which change at every run: {addresses}"
    )


@pytest.mark.chapter
@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_html_outputs_need_nothing_from_a_cdn(page, executed):
    """Quarto adds CDN require.js/jQuery for these outputs; the site step drops them, so nothing may need them."""
    nb = executed(page)
    for index, mime in post_render.cdn_triggers(nb):
        for out in nb.cells[index].outputs:
            html = out.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            assert not post_render.remote_loads(html), (
                f"{page.name}, cell {index}: loads {post_render.remote_loads(html)}"
            )
            assert not post_render.needs_require_or_jquery(html), (
                f"{page.name}, cell {index}: a {mime} output uses require.js or jQuery, which the offline site lacks"
            )
            if mime == "application/javascript":
                pytest.fail(
                    f"{page.name}, cell {index}: JavaScript output needs a loader the site does not ship"
                )


@pytest.mark.chapter
@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_notebook_cross_references_read_as_words(page, executed):
    nb = executed(page)
    raw = [
        (i, m.group(0))
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown"
        for m in downloads.REF.finditer(c.source)
    ]
    assert not raw, (
        f"{page.name}: raw Quarto cross-references in the downloaded notebook: {raw}"
    )
    labels = [
        (i, line)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if re.match(r"#+ .*\{[#.][\w-]+\}\s*$", line)
    ]
    assert not labels, (
        f"{page.name}: Quarto heading attributes left in the notebook: {labels}"
    )
    inline = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown" and harness.INLINE.search(c.source)
    ]
    assert not inline, (
        f"{page.name}: inline `{{python}}` expressions left unevaluated in cells {inline}"
    )


# What a page may embed beyond Quarto's own page (navigation, search, the table of contents: about
# 60 KB): its code and outputs, plotly.js left out, which every page loads from site_libs/.
EMBED_BUDGET = 220_000


def embedded_bytes(nb) -> int:
    """Bytes of code and outputs a page built from ``nb`` carries: per output, what HTML shows."""
    total = sum(len(c.source.encode()) for c in nb.cells)
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = out.get("data", {})
            shown = next(
                (
                    data[m]
                    for m in (
                        "text/html",
                        "image/svg+xml",
                        "image/png",
                        "text/markdown",
                        "text/plain",
                    )
                    if m in data
                ),
                out.get("text", ""),
            )
            shown = "".join(shown) if isinstance(shown, list) else shown
            total += len(shown.encode())
    return total


@pytest.mark.chapter
@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_each_page_embeds_little_beyond_the_shared_plotly(page, executed):
    weight = embedded_bytes(executed(page))
    assert weight <= EMBED_BUDGET, (
        f"{page.name}: its code and outputs weigh {weight:,} bytes, over "
        f"{EMBED_BUDGET:,}: the page would pass 300 KB"
    )


@pytest.mark.chapter
@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_downloads_carry_no_quarto_markup_and_no_build_paths(page, executed):
    nb = executed(page)
    fences = [
        (i, line)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith(":::")
    ]
    options = [
        (i, line)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for line in c.source.splitlines()
        if line.startswith("#|")
    ]
    assert not fences, (
        f"{page.name}: Quarto div fences left in the notebook's Markdown: {fences}"
    )
    assert not options, (
        f"{page.name}: Quarto `#|` cell options left in the notebook's code: {options}"
    )
    metadata = str(dict(nb.metadata))
    assert not [p for p in BUILD_PATHS if p in metadata], (
        f"{page.name}: build paths in the metadata"
    )
    plotly = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if plotly_js()[:200] in str(o.get("data", {}).get("text/html", ""))
    ]
    assert not plotly, (
        f"{page.name}: plotly.js embedded in cells {plotly}; JupyterLab draws Plotly's MIME type"
    )


def test_reader_notebook_drops_quarto_markup_and_kernel_paths(monkeypatch):
    monkeypatch.setenv(
        "JITBOOK_SMALL", "0"
    )  # no note about the problem size among the cells
    code = nbformat.v4.new_code_cell("#| label: tbl-x\n#| echo: false\nx = 1")
    prose = nbformat.v4.new_markdown_cell("::: {#exr-a}\n### Do it\n\nText.\n:::")
    nb = nbformat.v4.new_notebook(cells=[prose, code])
    nb.metadata = {
        "kernelspec": {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
            "path": "/home/builder/book/.venv/share/jupyter/kernels/python3",
        },
        "language_info": {"name": "python", "version": "3.12.1"},
        "quarto": {"execute": {"dir": "/home/builder/book/chapters"}},
    }
    reader = downloads.reader_notebook(nb, {})
    assert (
        reader.cells[0].source == "### Do it\n\nText.\n"
        and reader.cells[1].source == "x = 1"
    )
    assert (
        "/home/builder" not in str(dict(reader.metadata))
        and reader.metadata["kernelspec"]["name"] == "python3"
    )


def test_explorer_pages_load_the_sites_one_plotly_js_once_parsed(tmp_path):
    site = tmp_path / "_book"
    page = site / "chapters" / "x.html"
    page.parent.mkdir(parents=True)
    html = (
        '<head><title>x</title></head><body><div class="jitbook-explorer"></div></body>'
    )
    light = post_render.shared_plotly(html, page.relative_to(site), site)
    tag = post_render.LOADER.format(src=f"../{post_render.PLOTLY_LIB}")
    assert (
        light == html.replace("</head>", tag + "</head>") and "DOMContentLoaded" in tag
    )
    assert post_render.shared_plotly(light, page.relative_to(site), site) == light, (
        "once"
    )
    assert (site / post_render.PLOTLY_LIB).read_text() == plotly_js()
    assert (
        post_render.shared_plotly("<body>plain</body>", Path("index.html"), site)
        == "<body>plain</body>"
    )


def test_offline_html_removes_what_quarto_adds_and_keeps_the_rest():
    page = (
        f'<html><head>{QUARTO_CDN_HEAD}<script src="../site_libs/quarto.js"></script>'
        f'<link href="https://fonts.googleapis.com/css?family=Lato" rel="stylesheet"></head>'
        f'<body><a href="https://jax.readthedocs.io">JAX</a></body></html>'
    )
    assert len(post_render.remote_loads(page)) == 3
    offline = post_render.offline_html(page)
    assert post_render.remote_loads(offline) == [] and "define('jquery'" not in offline
    assert '<script src="../site_libs/quarto.js"></script>' in offline
    assert '<a href="https://jax.readthedocs.io">JAX</a>' in offline, (
        "links to read elsewhere are not loads"
    )


def test_offline_html_drops_the_empty_anchor_of_each_code_line_and_keeps_the_code():
    line = (
        '<span id="cb3-2"><a href="#cb3-2" aria-hidden="true" tabindex="-1"></a>'
        '<span class="cf">return</span> x</span>'
    )
    link = '<a href="#cb3-2">line 2</a>'  # a link a reader follows stays
    offline = post_render.offline_html(f"<pre><code>{line}</code></pre>{link}")
    assert offline == (
        '<pre><code><span id="cb3-2"><span class="cf">return</span> x</span></code></pre>'
        + link
    )


def test_the_check_report_is_html_without_scripts():
    from jitbook.exercises import check

    bundle, _ = check("no.such-exercise")._repr_mimebundle_()
    assert "text/html" in bundle and not post_render.needs_require_or_jquery(
        bundle["text/html"]
    )
    assert post_render.needs_require_or_jquery(
        "<script>require(['plotly'], function(p) {})</script>"
    )


def test_cross_references_become_the_titles_they_point_to():
    titles = downloads.label_titles()
    assert titles["sec-miscompile"].startswith("Why `import jitbook` comes first")
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(
                "See @sec-miscompile and [-@tbl-versions], or @sec-nowhere-known."
            )
        ]
    )
    nb.cells.append(
        nbformat.v4.new_markdown_cell(
            "# Preface {.unnumbered}\n\n## Loops {#sec-loops}\nText {#not-a-heading}"
        )
    )
    reader = downloads.reader_notebook(nb, titles)
    assert reader.cells[-1].source == "# Preface\n\n## Loops\nText {#not-a-heading}"
    text = reader.cells[0].source
    assert "@" not in text and "section “Why `import jitbook` comes first" in text
    assert (
        "table “Software and device that executed this page”" in text
        and "section “nowhere known”" in text
    )


def test_markdown_outputs_write_cross_references_as_titles_too(monkeypatch):
    monkeypatch.setenv(
        "JITBOOK_SMALL", "0"
    )  # no note about the problem size among the cells
    code = nbformat.v4.new_code_cell("jitbook.executed_on()")
    code.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/markdown": "Executed on JAX 0.12 (@sec-loops has the loops; see [-@exr-a]).",
                "text/plain": "Executed on JAX 0.12",
            },
        )
    ]
    titles = {"sec-loops": "Python loops unroll", "exr-a": "Count the compiles"}
    reader = downloads.reader_notebook(nbformat.v4.new_notebook(cells=[code]), titles)
    text = reader.cells[0].outputs[0]["data"]["text/markdown"]
    assert text == (
        "Executed on JAX 0.12 (section “Python loops unroll” has the loops; "
        "see exercise “Count the compiles”)."
    )


def test_show_source_folds_under_a_one_line_summary_unless_asked_not_to():
    from jitbook import display

    folded = display.show_source(display.fit).text
    assert folded.startswith(
        '<details class="jitbook-source">\n<summary><code>fit</code>: '
    )
    assert "\n```python\ndef fit(" in folded and folded.endswith("```\n\n</details>")
    summary = folded.split("<summary>")[1].split("</summary>")[0]
    assert "\n" not in summary and "``" not in summary, (
        "one line, reST code spans as <code>"
    )
    assert display.show_source(display.fit, folded=False).text.startswith(
        "```python\ndef fit("
    )
    assert (
        display._inline_code("A class with @jax.jit on it")
        == "A class with &#64;jax.jit on it"
    ), "Pandoc would read @jax.jit as a citation (the PDF fails on it)"


def test_quarto_inline_results_are_filled_in():
    cell = nbformat.v4.new_markdown_cell(
        "It ran `{python} speedup` faster on `{python} n` cores."
    )
    cell.metadata["user_expressions"] = [
        {"expression": "speedup", "result": {"data": {"text/plain": "'3.2 times'"}}},
        {"expression": "n", "result": {"data": {"text/plain": "2"}}},
    ]
    text = (
        downloads.reader_notebook(nbformat.v4.new_notebook(cells=[cell]), {})
        .cells[0]
        .source
    )
    assert text == "It ran 3.2 times faster on 2 cores."


def test_small_runs_say_so_in_the_notebook(monkeypatch):
    monkeypatch.setenv("JITBOOK_SMALL", "1")
    nb = downloads.reader_notebook(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T")]), {}
    )
    assert nb.cells[1].source == downloads.SMALL_NOTE
    monkeypatch.setenv("JITBOOK_SMALL", "0")
    assert downloads.SMALL_NOTE not in [
        c.source
        for c in downloads.reader_notebook(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# T")]), {}
        ).cells
    ]


def _fake_render(root: Path, tmp_path: Path) -> Path:
    """A rendered site as Quarto leaves it: pages with CDN tags, executed notebooks kept beside the chapters."""
    site = tmp_path / "_book"
    (site / "chapters").mkdir(parents=True)
    (site / "index.html").write_text(f"<head>{QUARTO_CDN_HEAD}</head>")
    for qmd in harness.chapter_pages(root):
        (site / "chapters" / f"{qmd.stem}.html").write_text(
            f"<head>{QUARTO_CDN_HEAD}</head><body>x</body>"
        )
    return site


def test_site_step_gives_every_chapter_its_notebook_and_strips_the_cdn(
    tmp_path, monkeypatch
):
    root = tmp_path / "book"
    shutil.copytree(ROOT / "chapters", root / "chapters")
    shutil.copy(ROOT / "_quarto.yml", root / "_quarto.yml")
    shutil.copy(ROOT / "index.qmd", root / "index.qmd")
    site = _fake_render(root, tmp_path)
    with_code = [q for q in harness.chapter_pages(root) if post_render.has_code(q)]
    nbformat.write(harness.to_notebook(root / "index.qmd"), root / "index.quarto_ipynb")
    for qmd in with_code:  # what `keep-ipynb` leaves: a stale copy and the fresh one
        nbformat.write(harness.to_notebook(qmd), qmd.with_suffix(".quarto_ipynb"))
        nbformat.write(
            harness.to_notebook(qmd), qmd.parent / f"{qmd.stem}.quarto_ipynb_1"
        )
    written = post_render.build_site(site, root)
    assert sorted(p.name for p in written) == sorted(
        f"{q.stem}.ipynb" for q in harness.chapter_pages(root)
    )
    assert not list(root.rglob("*.quarto_ipynb*")), "kept notebooks are cleaned up"
    for page in site.rglob("*.html"):
        assert post_render.remote_loads(page.read_text()) == [], page.name
    lab = (
        tmp_path / "_build" / "notebooks"
    )  # beside the site rendered into tmp_path, not the checkout's
    assert sorted(p.name for p in lab.iterdir()) == sorted(p.name for p in written)
    assert (site / "notebooks" / wheel.wheel_name()).is_file(), (
        "the wheel the downloads install lies beside them"
    )
    for path in (
        written
    ):  # the site's download starts with the setup; `make lab`'s copy needs none
        download = nbformat.read(path, as_version=4)
        first = next(c for c in download.cells if c.cell_type == "code")
        assert (
            first.metadata.get("jitbook", {}).get("setup")
            and wheel.wheel_name() in first.source
        ), path.name
        copy = nbformat.read(lab / path.name, as_version=4)
        assert not any(
            c.metadata.get("jitbook", {}).get("setup") for c in copy.cells
        ), path.name

    (site / "notebooks" / f"{with_code[0].stem}.ipynb").unlink()
    with pytest.raises(
        FileNotFoundError,
        match=rf"no executed notebook for chapters/{with_code[0].stem}.qmd",
    ):
        post_render.build_site(site, root)


def test_solutions_leave_the_search_index(tmp_path):
    solutions = post_render.solution_lines()
    assert solutions, "the chapters have exercises with solutions"
    docs = [
        {
            "href": "chapters/x.html",
            "text": f"Prose stays.\n{solutions[0]}\nMore prose.",
        }
    ]
    (tmp_path / "search.json").write_text(json.dumps(docs))
    post_render.unsearchable(tmp_path)
    text = json.loads((tmp_path / "search.json").read_text())[0]["text"]
    assert text == "Prose stays.\nMore prose."


def test_site_command_fails_with_a_message_without_a_site(tmp_path, capsys):
    assert cli.main(["site", str(tmp_path / "nope")]) == 1
    assert "no rendered site at" in capsys.readouterr().err


# ---- typography: what Markdown would change or drop ---------------------------------------------------------


def _outside_code(markdown: str) -> str:
    """Markdown without its code blocks and code spans: the text that smart typography and HTML parsing see."""
    markdown = re.sub(r"^(`{3,}).*?^\1", "", markdown, flags=re.M | re.S)
    return re.sub(r"(`+).+?\1", "", markdown, flags=re.S)


def _markdown_texts(nb) -> list[tuple[int, str]]:
    texts = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    return texts + [
        (i, o["data"]["text/markdown"])
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "text/markdown" in o.get("data", {})
    ]


@pytest.mark.chapter
@pytest.mark.parametrize("page", known(KNOWN_TAGS), ids=lambda p: p.name)
def test_flags_and_tags_are_written_where_markdown_keeps_them(page, executed):
    """`--flag` outside code becomes an en dash (a wrong flag when copied); `<Error>` outside code vanishes as a tag."""
    nb = executed(page)
    dashes = [
        (i, m)
        for i, text in _markdown_texts(nb)
        for m in re.findall(r"(?<![-\w])--[a-z][\w-]*", _outside_code(text))
    ]
    assert not dashes, (
        f"{page.name}: flags outside code spans, which Quarto sets with an en dash: {dashes}"
    )
    tags = [
        (i, m)
        for i, text in _markdown_texts(nb)
        for m in re.findall(r"(?<!\\)<[A-Z][A-Za-z]*>", _outside_code(text))
    ]
    assert not tags, (
        f"{page.name}: <Words> outside code, which HTML drops as unknown tags (escape them): {tags}"
    )


@pytest.mark.parametrize("page", known(KNOWN_CAPTIONS), ids=lambda p: p.name)
def test_captions_keep_their_words(page):
    for cell in harness.to_notebook(page).cells:
        options = (
            cell.metadata.get("jitbook", {}).get("options", {})
            if cell.cell_type == "code"
            else {}
        )
        for key in ("tbl-cap", "fig-cap"):
            caption = _outside_code(str(options.get(key, "")))
            assert not re.search(r"(?<!\\)<[A-Za-z][\w-]*>", caption), (
                f"{page.name}, line {cell.metadata['jitbook']['qmd_line']}: {key} {caption!r} holds a <tag> "
                f"that HTML drops; write it as `<Error>` or \\<Error\\>"
            )


@pytest.mark.parametrize("page", known(KNOWN_STARS), ids=lambda p: p.name)
def test_exercise_titles_carry_their_stars_one_level_under_exercises(page):
    section, problems = None, []
    prose = harness.to_notebook(page).cells
    for cell in prose:
        if cell.cell_type != "markdown":
            continue
        for line in _outside_code(cell.source).splitlines():
            heading = re.match(r"^(#+)\s+(.*)", line)
            if heading and len(heading.group(1)) == 2:
                section = heading.group(2)
            stars = re.search(r"[★☆]{3}", line)
            if stars and not (
                heading
                and len(heading.group(1)) == 3
                and (section or "").startswith("Exercises")
            ):
                problems.append(line.strip()[:80])
    assert not problems, (
        f"{page.name}: difficulty stars belong in the exercise's title, `### Title ★★☆`, "
        f"under `## Exercises`; found: {problems}"
    )


MATH_LINE = (
    50  # printed symbols of one display-math line that fit the column at display size
)


def _printed(tex: str) -> int:
    """Roughly how many symbols a TeX row prints: commands, braces, scripts markers and spaces take none."""
    return len(re.sub(r"\\[a-zA-Z]+|[{}_^&!,;]|\s", "", tex))


@pytest.mark.parametrize("page", known(KNOWN_EQUATIONS), ids=lambda p: p.name)
def test_display_equations_are_broken_into_lines_that_fit(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    for equation in re.findall(r"\$\$(.*?)\$\$", text, re.S):
        wide = [
            r.strip()[:50]
            for r in re.split(r"\\\\", equation)
            if _printed(r) > MATH_LINE
        ]
        assert not wide, (
            f"{page.name}: display-equation lines printing over {MATH_LINE} symbols overflow the "
            f"column; split them with \\\\ in an aligned environment: {wide}"
        )


def test_search_finds_the_teaching_section_first_and_shows_prose(tmp_path):
    from jitbook.site import search

    site = tmp_path / "_book"
    (site / "chapters").mkdir(parents=True)
    teach = (
        '<section id="sec-static" class="level2"><h2>Static arguments</h2><p>Say it with '
        "<code>static_argnums</code> or <code>static_argnames</code>; <code>static_argnums</code> "
        'takes positions.</p><div class="sourceCode"><pre><code>f = jax.jit(g, static_argnums=1)'
        "</code></pre></div></section>"
    )
    other = (
        '<section id="sec-other" class="level2"><h2>Other</h2><p>Once: <code>static_argnums</code>.'
        "</p></section>"
    )
    (site / "chapters" / "a.html").write_text(f"<main>{other}</main>")
    (site / "chapters" / "b.html").write_text(f"<main>{teach}</main>")
    docs = [
        {
            "href": "chapters/a.html#sec-other",
            "section": "Other",
            "text": "Once: static_argnums.",
        },
        {
            "href": "chapters/b.html#sec-static",
            "section": "Static arguments",
            "text": "Say it with static_argnums or static_argnames; static_argnums takes positions.\n"
            "f = jax.jit(g, static_argnums=1)",
        },
    ]
    (site / "search.json").write_text(json.dumps(docs))
    search.tune(site, ["chapters/a.html", "chapters/b.html"])
    a, b = json.loads((site / "search.json").read_text())
    assert b["section"] == "Static arguments · static_argnums", (
        "the section that teaches it, by name"
    )
    assert a["section"] == "Other", "one mention teaches nothing"
    assert "jax.jit(g" not in b["text"] and b["text"].startswith("Say it with"), (
        "code leaves the snippet"
    )


def test_the_pdf_render_writes_no_downloads_and_the_site_links_its_pdf(
    tmp_path, monkeypatch
):
    root = tmp_path / "book"
    shutil.copytree(ROOT / "chapters", root / "chapters")
    shutil.copy(ROOT / "_quarto.yml", root / "_quarto.yml")
    shutil.copy(ROOT / "index.qmd", root / "index.qmd")
    kept = root / "chapters" / "tracing.quarto_ipynb"
    nbformat.write(harness.to_notebook(root / "chapters" / "tracing.qmd"), kept)
    pdf_dir = tmp_path / "_build" / "pdf"
    pdf_dir.mkdir(parents=True)
    (pdf_dir / "JIT-with-JAX.pdf").write_bytes(b"%PDF-1.7")
    assert post_render.build_site(pdf_dir, root) == [] and not kept.exists(), (
        "a PDF render: no downloads"
    )
    monkeypatch.setattr(post_render, "PDF_DIR", pdf_dir)
    site = _fake_render(root, tmp_path)
    for qmd in harness.chapter_pages(root):
        nbformat.write(harness.to_notebook(qmd), qmd.with_suffix(".quarto_ipynb"))
    post_render.build_site(site, root)
    assert (site / "JIT-with-JAX.pdf").read_bytes() == b"%PDF-1.7", (
        "the sidebar's Download PDF resolves"
    )


def test_a_site_without_its_pdf_does_not_link_one(tmp_path):
    tool = (
        '<a href="../JIT-with-JAX.pdf" title="Download PDF" class="quarto-navigation-tool px-1" '
        'aria-label="Download PDF"><i class="bi bi-file-pdf"></i></a>'
    )
    page = f'<div class="sidebar-tools-main">{tool}\n<a href="" class="quarto-color-scheme-toggle"></a></div>'
    assert "Download PDF" not in post_render.without_missing_pdf(page, tmp_path), (
        "`make book` alone: no PDF"
    )
    assert "quarto-color-scheme-toggle" in post_render.without_missing_pdf(
        page, tmp_path
    )
    (tmp_path / "JIT-with-JAX.pdf").write_bytes(b"%PDF-1.7")
    assert post_render.without_missing_pdf(page, tmp_path) == page, (
        "after `make pdf`: the link stays"
    )


def test_pages_drop_the_left_alignment_pandoc_writes_on_every_cell():
    html = (
        '<td style="text-align: left;">x</td><th class="a" style="text-align: left;">y</th>'
        '<td style="text-align: right;">3</td>'
    )
    assert (
        post_render.offline_html(html)
        == '<td>x</td><th class="a">y</th><td style="text-align: right;">3</td>'
    )


def test_search_gives_readers_words_to_their_section_and_each_symptom_row_an_entry(
    tmp_path,
):
    from jitbook.site import search

    site = tmp_path / "_book"
    (site / "chapters").mkdir(parents=True)
    (site / "chapters" / "tracing.html").write_text(
        '<main><section id="sec-tracing-control" class="level2"><h2>Control flow sees tracers</h2>'
        "<p>Python's if runs while tracing.</p></section></main>"
    )
    (site / "chapters" / "symptoms.html").write_text(
        '<main><section id="sec-symptoms-index" class="level2"><h2>The index</h2><table>'
        "<thead><tr><th>message</th><th>what it means</th></tr></thead><tbody>"
        "<tr><td><code>TracerBoolConversionError: Attempted boolean conversion</code></td>"
        "<td>an if on a traced value</td></tr>"
        "<tr><td><code>Finished tracing + transforming f for pjit in 0.1 s</code></td>"
        "<td>a log line</td></tr></tbody></table></section></main>"
    )
    docs = [
        {
            "objectID": "chapters/tracing.html#sec-tracing-control",
            "href": "chapters/tracing.html#sec-tracing-control",
            "title": "2 Tracing",
            "section": "2.5 Control flow sees tracers",
            "text": "Python's if runs while tracing.",
        },
        {
            "objectID": "chapters/symptoms.html#sec-symptoms-index",
            "href": "chapters/symptoms.html#sec-symptoms-index",
            "title": "Symptom index",
            "section": "E.1 The index",
            "text": "TracerBoolConversionError: ...",
            "crumbs": ["E"],
        },
    ]
    (site / "search.json").write_text(json.dumps(docs))
    order = ["chapters/tracing.html", "chapters/symptoms.html"]
    search.tune(site, order)
    search.tune(site, order)  # a partial render tunes the index again
    tuned = json.loads((site / "search.json").read_text())
    assert tuned[0]["section"].startswith(
        "2.5 Control flow sees tracers · if statement, "
    )
    assert tuned[0]["section"].count("if statement") == 1, (
        "tuned once, however often it runs"
    )
    rows = [d for d in tuned if search.ROW in d["objectID"]]
    assert [r["section"] for r in rows] == [
        "TracerBoolConversionError",
        "Finished tracing + transforming f for pjit in …",
    ]
    assert all(r["href"] == "chapters/symptoms.html#sec-symptoms-index" for r in rows)
    assert rows[0]["title"] == "Symptom index" and rows[0]["crumbs"] == ["E"]
    assert "an if on a traced value" in rows[0]["text"]


def test_every_section_search_names_is_in_the_book():
    from jitbook.site import search

    labels = {
        m
        for page in harness.chapter_files()
        for m in re.findall(r"\{#(sec-[\w-]+)", page.read_text())
    }
    named = set(search.READER_WORDS) | set(search.ROW_SECTIONS)
    assert named <= labels, f"search names sections no page has: {named - labels}"
