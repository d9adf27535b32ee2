"""The chapter harness: a chapter ``.qmd`` becomes a notebook, runs in a fresh kernel,
and is saved.

This is what Quarto's Jupyter engine does when it renders, done in Python so that the
tests, the downloadable notebooks and the classroom notebooks all come from one code
path.

    python -m jitbook.site run chapters/why-compile.qmd     # one chapter
    python -m jitbook.site run --all # every chapter listed in _quarto.yml
    python -m jitbook.site site # Quarto's post-render step (see _quarto.yml)

One execution per build: without Quarto, the harness executes the chapters; with Quarto,
``quarto render`` executes each chapter once (``keep-ipynb`` keeps the executed
notebook) and ``site`` turns those notebooks into the downloads and strips the page of
anything that would load from the network.
"""

import argparse
import ast
import json
import os
import re
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from jitbook import size

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "_build" / "notebooks"
SITE = ROOT / "_book"
CHUNK_START = re.compile(r"^```+\s*\{python[^}]*\}\s*$")
INLINE = re.compile(r"`\{python\}\s+([^`]+)`")
_INLINE_MARK = "__jitbook_inline__"
# The kernel warns on every start that its local TCP sockets are unencrypted; that is
# noise here.
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]


class ChapterError(RuntimeError):
    """A chapter cell failed: names the chapter, the cell, its line in the .qmd and the
    traceback."""


def book_config(root: Path = ROOT) -> dict:
    """The parsed ``_quarto.yml``."""
    return yaml.safe_load((root / "_quarto.yml").read_text())


def chapter_files(root: Path = ROOT) -> list[Path]:
    """Every page listed in the book's ``chapters:`` and ``appendices:``, parts walked,
    in order."""
    book = book_config(root)["book"]
    paths: list[str] = []
    for entry in book.get("chapters", []) + book.get("appendices", []):
        if isinstance(entry, str):
            paths.append(entry)
        else:
            paths.extend(c for c in entry.get("chapters", []))
            if "part" in entry and entry["part"].endswith(".qmd"):
                paths.append(entry["part"])
    return [root / p for p in paths]


def chapter_label(qmd: Path) -> str | None:
    """The cross-reference id of a page's title, ``sec-tracing`` for ``# Tracing
    {#sec-tracing}``."""
    heading = re.search(r"^# .*\{#(sec-[\w-]+)[^}]*\}\s*$", Path(qmd).read_text(), re.M)
    return heading.group(1) if heading else None


def contents(summaries: dict[str, str], root: Path = ROOT) -> str:
    """The preface's list of what the book holds, one item per part of ``_quarto.yml``,
    in order.

    ``summaries`` maps a page's label to what it does (``"sec-tracing": "follows
    ..."``); a page without one is listed by its title, so a chapter added to
    ``_quarto.yml`` is never left out.
    """
    book = book_config(root)["book"]
    parts = [
        (entry["part"], entry.get("chapters", []))
        for entry in book.get("chapters", [])
        if isinstance(entry, dict)
    ]
    if book.get("appendices"):
        parts.append(("Appendices", book["appendices"]))
    items = []
    for part, pages in parts:
        said = []
        for page in pages:
            label = chapter_label(root / page)
            if label is None:
                continue
            summary = summaries.get(label)
            title = chapter_titles(root).get(Path(page).stem, "")
            said.append(f"@{label} {summary}" if summary else f"@{label}, *{title}*")
        item = f"- **{part}.** " + "; ".join(said) + "."
        # Markdown output: lines that fit the column, continued under the bullet
        items.append(
            textwrap.fill(item, 88, subsequent_indent="  ", break_on_hyphens=False)
        )
    return "\n".join(items)


def _split_front_matter(text: str) -> tuple[dict, list[str], int]:
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        return yaml.safe_load("\n".join(lines[1:end])) or {}, lines[end + 1 :], end + 1
    return {}, lines, 0


def _cell_options(source: list[str]) -> dict:
    option_lines = []
    for line in source:
        if not line.startswith("#|"):
            break
        option_lines.append(line[2:].strip())
    return (yaml.safe_load("\n".join(option_lines)) if option_lines else None) or {}


def to_notebook(qmd: Path) -> nbformat.NotebookNode:
    """Turn a ``.qmd`` into a notebook: Markdown and Python cells in order, ``#|``
    options as metadata."""
    qmd = Path(qmd)
    front, lines, offset = _split_front_matter(qmd.read_text())
    cells = []
    if front.get("title"):
        cells.append(nbformat.v4.new_markdown_cell(f"# {front['title']}"))
    markdown: list[str] = []

    def flush_markdown():
        text = "\n".join(markdown).strip("\n")
        if text.strip():
            cells.append(nbformat.v4.new_markdown_cell(text))
        markdown.clear()

    i = 0
    while i < len(lines):
        if CHUNK_START.match(lines[i]):
            flush_markdown()
            fence = lines[i][: len(lines[i]) - len(lines[i].lstrip("`"))]
            start = i
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i])
                i += 1
            cells.append(_code_cell(body, line=offset + start + 1))
        else:
            markdown.append(lines[i])
        i += 1
    flush_markdown()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["jitbook"] = {"source": qmd.name}
    return nb


def _code_cell(body: list[str], line: int) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("\n".join(body))
    options = _cell_options(body)
    cell.metadata["jitbook"] = {"qmd_line": line, "options": options}
    tags = []
    if options.get("eval") is False:
        tags.append("skip-execution")  # nbclient skips cells with this tag
    if options.get("error") is True:
        tags.append("raises-exception")  # nbclient lets cells with this tag raise
    if tags:
        cell.metadata["tags"] = tags
    return cell


def _with_inline_cells(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """After each Markdown cell with inline ``{python}`` expressions, add a cell that
    evaluates them."""
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        exprs = INLINE.findall(cell.source) if cell.cell_type == "markdown" else []
        if exprs:
            values = ", ".join(f"str({e.strip()})" for e in exprs)
            helper = nbformat.v4.new_code_cell(
                f"print({_INLINE_MARK!r}, __import__('json').dumps([{values}]))"
            )
            helper.metadata["jitbook"] = {"inline_helper": True}
            cells.append(helper)
    nb.cells = cells
    return nb


def _escape_markdown(text: str) -> str:
    """Quarto shows an inline value as text, not Markdown: ``**x**`` stays literal. Do
    the same."""
    return re.sub(r"([\\`*_\[\]<>|])", r"\\\1", text)


def _fill_inline(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Put the evaluated inline values into the Markdown, as Quarto does, and drop the
    helper cells."""
    cells = []
    for cell in nb.cells:
        if cell.metadata.get("jitbook", {}).get("inline_helper"):
            text = "".join(
                o.get("text", "") for o in cell.outputs if o.get("name") == "stdout"
            )
            values = iter(json.loads(text.split(_INLINE_MARK, 1)[1]))
            markdown = cells[-1]
            markdown.source = INLINE.sub(
                lambda m, values=values: _escape_markdown(next(values)), markdown.source
            )
        else:
            cells.append(cell)
    nb.cells = cells
    return nb


def _cell_failure(qmd: Path, nb, err: CellExecutionError) -> ChapterError:
    failed = next(
        (
            c
            for c in nb.cells
            if c.cell_type == "code"
            and any(o.get("output_type") == "error" for o in c.get("outputs", []))
        ),
        None,
    )
    if failed is not None and failed.metadata.get("jitbook", {}).get("inline_helper"):
        where = "an inline `{python} ...` expression in the Markdown just above"
        index = nb.cells.index(failed)
        line = "?"
    elif failed is not None:
        index = nb.cells.index(failed)
        line = failed.metadata["jitbook"]["qmd_line"]
        where = f"cell {index} (the code chunk at line {line})"
    else:
        where, line = "a cell", "?"
    return ChapterError(f"{qmd.name}: {where} of {qmd} failed:\n{err}")


def execute(qmd: Path, timeout: int = 3600) -> nbformat.NotebookNode:
    """Run a chapter top to bottom in a fresh ``python3`` kernel and return the executed
    notebook.

    ``timeout`` is per cell: the PLN chapter's full-size benchmark cells take minutes on
    a small machine.
    """
    qmd = Path(qmd).resolve()
    if not qmd.exists() or qmd.suffix != ".qmd":
        raise FileNotFoundError(
            f"no chapter at {qmd}; give the path of a .qmd file, "
            "e.g. chapters/why-compile.qmd."
        )
    nb = _with_inline_cells(to_notebook(qmd))
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        extra_arguments=QUIET_KERNEL,
        resources={"metadata": {"path": str(qmd.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as err:
        raise _cell_failure(qmd, nb, err) from None
    return _fill_inline(nb)


def run(qmd: Path, out_dir: Path | None = None) -> Path:
    """Execute a chapter and write its reader's notebook to ``out_dir``
    (``_build/notebooks``); return its path."""
    nb = reader_notebook(execute(qmd))
    out_dir = out_dir or BUILD
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (Path(qmd).stem + ".ipynb")
    nbformat.write(nb, path)
    return path


# ---- what a reader downloads: cross-references as words, the problem size said -------

REF = re.compile(r"\[?-?@((sec|fig|tbl|lst|exr)-[\w-]*\w)\]?")
HEADING_LABEL = re.compile(r"^#+\s+(.+?)\s*\{#((?:sec|exr)-[\w-]+)[^}]*\}\s*$", re.M)
HEADING_ATTRIBUTES = re.compile(
    r"^(#+ .*?)\s*\{[#.][^}]*\}[ \t]*$", re.M
)  # `{#sec-x}`, `{.unnumbered}`
QUARTO_FENCE = re.compile(
    r"^:::+[^\n]*(?:\n|$)", re.M
)  # `::: {#exr-x}` and its closing `:::`
KINDS = {
    "sec": "section",
    "exr": "exercise",
    "tbl": "table",
    "fig": "figure",
    "lst": "listing",
}
SMALL_NOTE = (
    "*This notebook ran at the small problem sizes (`JITBOOK_SMALL=1`), "
    "so its numbers are not the "
    "full-size ones the book describes.*"
)


def label_titles(root: Path = ROOT) -> dict[str, str]:
    """Every cross-reference label of the book with its words: a heading's title or a
    table's caption."""
    titles = {}
    for qmd in chapter_files(root):
        if not qmd.exists():
            continue
        titles.update(
            {
                label: title.strip()
                for title, label in HEADING_LABEL.findall(qmd.read_text())
            }
        )
        for cell in to_notebook(qmd).cells:
            options = (
                cell.metadata.get("jitbook", {}).get("options", {})
                if cell.cell_type == "code"
                else {}
            )
            label = str(options.get("label", ""))
            caption = options.get(f"{label.split('-')[0]}-cap")
            if label and caption:
                titles[label] = str(caption)
    return titles


def words_for(label: str, titles: dict[str, str]) -> str:
    """``@sec-tracing-loops`` as a Jupyter reader reads it: ``section “Python loops
    unroll”``."""
    kind = KINDS[label.split("-")[0]]
    title = titles.get(label, label.split("-", 1)[1].replace("-", " "))
    return f"{kind} “{title.rstrip('.')}”"


def _inline_values(cell) -> str:
    """Quarto keeps inline ``{python}`` results in a Markdown cell's
    ``user_expressions``: put them in the text."""
    results = iter(cell.metadata.get("user_expressions", []))

    def value(match):
        result = next(results, {}).get("result", {})
        text = result.get("data", {}).get("text/plain", match.group(0))
        try:
            text = ast.literal_eval(text) if text[:1] in "'\"" else text
        except (ValueError, SyntaxError):
            pass
        return _escape_markdown(str(text))

    return INLINE.sub(value, cell.source)


def _without_options(source: str) -> str:
    """Code without its leading ``#|`` lines: Quarto's cell options read as noise in
    Jupyter."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if not line.startswith("#|")), 0)
    return "\n".join(lines[start:])


def _without_plotly_js(out) -> None:
    """An explorer's HTML without plotly.js: JupyterLab draws the figure from Plotly's
    own MIME type (the ``jupyterlab-plotly`` extension bundles plotly.js), so the 4.8 MB
    copy is dead weight."""
    html = out.get("data", {}).get("text/html")
    if html is None:
        return
    text = "".join(html) if isinstance(html, list) else html
    inline = f"<script>{_plotly_js()}</script>"
    if inline in text:
        out["data"]["text/html"] = text.replace(inline, "")


def _reader_metadata(metadata: dict) -> dict:
    """Notebook metadata a reader can use: the kernel's name and language, no build
    machine's paths."""
    kernel = metadata.get("kernelspec", {})
    kept = {
        "kernelspec": {
            "name": "python3",
            "display_name": kernel.get("display_name", "Python 3"),
            "language": "python",
        },
        "language_info": {"name": "python"},
    }
    version = metadata.get("language_info", {}).get("version")
    if version:
        kept["language_info"]["version"] = version
    if "jitbook" in metadata:
        kept["jitbook"] = metadata["jitbook"]
    return kept


def _plotly_js() -> str:
    from jitbook.site.explore import plotly_js

    return plotly_js()


def reader_notebook(
    nb: nbformat.NotebookNode, titles: dict[str, str] | None = None
) -> nbformat.NotebookNode:
    """The executed notebook as a Jupyter reader gets it: inline values filled,
    cross-references in words."""
    titles = label_titles() if titles is None else titles
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = (
                _inline_values(cell)
                if cell.metadata.get("user_expressions")
                else cell.source
            )
            source = QUARTO_FENCE.sub("", HEADING_ATTRIBUTES.sub(r"\1", source))
            cell.source = REF.sub(lambda m: words_for(m.group(1), titles), source)
            cell.metadata.pop("user_expressions", None)
        elif cell.cell_type == "code":
            cell.source = _without_options(cell.source)
            for out in cell.get("outputs", []):
                _without_plotly_js(out)
    nb.metadata = _reader_metadata(nb.metadata)
    if size.is_small() and not any(SMALL_NOTE in c.source for c in nb.cells):
        nb.cells.insert(
            1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0,
            nbformat.v4.new_markdown_cell(SMALL_NOTE),
        )
    return nb


# ---- the site: offline, with a download for every chapter ----------------------------

# Quarto 1.7 adds require.js and jQuery from a CDN to a page whose notebook has any of
# these outputs (src/core/jupyter/widgets.ts); the site step removes those tags, so the
# book's HTML outputs must not need them.
CDN_TRIGGERS = (
    "text/html",
    "application/javascript",
    "application/vnd.jupyter.widget-view+json",
)
REMOTE_TAG = re.compile(
    r"""<script\b[^>]*\bsrc=["']?(?:https?:)?//[^>]*>\s*</script>\s*"""
    r"""|<link\b[^>]*\bhref=["']?(?:https?:)?//[^>]*>\s*""",
    re.I,
)
JQUERY_SHIM = re.compile(
    r"""<script type="application/javascript">define\('jquery'.*?</script>\s*""", re.S
)
REMOTE_LOAD = re.compile(
    r"""<(?:script|img|iframe|audio|video|source|embed)\b[^>]*"""
    r"""\bsrc=["']?((?:https?:)?//[^"'\s>]+)"""
    r"""|<link\b[^>]*\bhref=["']?((?:https?:)?//[^"'\s>]+)""",
    re.I,
)
NEEDS_REQUIRE = re.compile(
    r"\brequire(?:js)?\s*[(.\[]|\bdefine\s*\(|\bjQuery\b|\$\s*\("
)


def cdn_triggers(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """The (cell index, MIME type) of each output that makes Quarto add its CDN scripts
    to the page."""
    return [
        (i, mime)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        for mime in out.get("data", {})
        if mime in CDN_TRIGGERS
    ]


def remote_loads(html: str) -> list[str]:
    """The URLs a page (or an HTML output) would load from the network: scripts, styles,
    images, frames."""
    return [a or b for a, b in REMOTE_LOAD.findall(html)]


def needs_require_or_jquery(html: str) -> bool:
    """Whether an HTML output's scripts use require.js or jQuery, which the offline site
    does not ship."""
    from jitbook.site.explore import plotly_js

    vendored = (
        plotly_js().strip()
    )  # minified plotly.js has "$(" but no AMD branch (tests/test_browser.py)
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S | re.I)
    return any(NEEDS_REQUIRE.search(s) for s in scripts if s.strip() != vendored)


def offline_html(html: str) -> str:
    """A built page without its remote ``<script src>`` and ``<link href>`` tags and
    Quarto's jQuery shim."""
    return JQUERY_SHIM.sub("", REMOTE_TAG.sub("", html))


PLOTLY_LIB = "site_libs/plotly/plotly.min.js"


def _inline_plotly(html: str) -> re.Match | None:
    """The ``<script>`` holding plotly.js in a page, as Quarto wrote it (Pandoc turns
    the tabs of plotly.js into spaces, so the text is not the package's file byte for
    byte)."""
    head = re.escape(_plotly_js()[:200])
    return re.search(rf"<script>{head}.*?</script>", html, re.S)


def shared_plotly(html: str, page: Path, site: Path) -> str:
    """A page whose explorers point at the site's one copy of plotly.js instead of
    embedding it.

    The browser caches ``site_libs/plotly/plotly.min.js`` once for every page; the copy
    is written, the package's file unchanged, the first time a page needs it. ``page``
    is the page's path inside ``site``.
    """
    found = _inline_plotly(html)
    if found is None:
        return html
    lib = site / PLOTLY_LIB
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_text(_plotly_js(), encoding="utf-8")
    up = "../" * (len(Path(page).parts) - 1)
    tag = f'<script src="{up}{PLOTLY_LIB}"></script>'
    return html[: found.start()] + tag + html[found.end() :]


def solution_lines(root: Path = ROOT) -> list[str]:
    """Every line of code between the exercises' ``### BEGIN SOLUTION`` markers."""
    lines = []
    for qmd in chapter_pages(root):
        for cell in to_notebook(qmd).cells:
            for part in cell.source.split("### BEGIN SOLUTION")[1:]:
                body = part.split("### END SOLUTION")[0]
                lines += [line.strip() for line in body.splitlines() if line.strip()]
    return lines


def unsearchable(site: Path, root: Path = ROOT) -> None:
    """The site's search index without the exercises' solutions.

    The solutions are folded on the page, but Quarto 1.7 indexes every text of a page,
    so a search would show them; this runs after Quarto wrote ``search.json``.
    """
    index = Path(site) / "search.json"
    if not index.exists():
        return
    solutions = sorted(set(solution_lines(root)), key=len, reverse=True)
    docs = json.loads(index.read_text())
    for doc in docs:
        text = doc.get("text", "")
        for line in solutions:
            text = text.replace(line, "")
        doc["text"] = "\n".join(t for t in text.splitlines() if t.strip())
    index.write_text(json.dumps(docs, indent=1, ensure_ascii=False))


def chapter_pages(root: Path = ROOT) -> list[Path]:
    """The pages under ``chapters/``: each links to its notebook
    (filters/notebook-link.lua)."""
    return [p for p in chapter_files(root) if p.parent.name == "chapters"]


def quarto_notebook(qmd: Path) -> Path | None:
    """The executed notebook Quarto kept for a chapter (``keep-ipynb``), newest first if
    several were left."""
    kept = sorted(
        qmd.parent.glob(f"{qmd.stem}.quarto_ipynb*"), key=lambda p: p.stat().st_mtime
    )
    return kept[-1] if kept else None


def has_code(qmd: Path) -> bool:
    return any(c.cell_type == "code" for c in to_notebook(qmd).cells)


def build_site(site: Path, root: Path = ROOT) -> list[Path]:
    """Quarto's post-render step: make every page offline and put every chapter's
    notebook beside it.

    A chapter's notebook is the one Quarto just executed; a chapter without code gets
    its unexecuted notebook; a chapter with code and no executed notebook (nor one from
    an earlier render) stops the build.
    """
    site = Path(site)
    if not site.is_dir():
        raise FileNotFoundError(
            f"no rendered site at {site}; run `quarto render` (or `make book`) first."
        )
    for page in site.rglob("*.html"):
        text = page.read_text()
        light = shared_plotly(offline_html(text), page.relative_to(site), site)
        if light != text:
            page.write_text(light)
    unsearchable(site, root)
    titles, written, missing = label_titles(root), [], []
    target = site / "notebooks"
    target.mkdir(exist_ok=True)
    for qmd in chapter_pages(root):
        kept, path = quarto_notebook(qmd), target / f"{qmd.stem}.ipynb"
        if kept is not None:
            nb = nbformat.read(kept, as_version=4)
            for stale in qmd.parent.glob(f"{qmd.stem}.quarto_ipynb*"):
                stale.unlink()
        elif not has_code(qmd):
            nb = to_notebook(qmd)
        elif path.exists():
            # a partial render (quarto preview re-rendering one page): the others
            # keep their notebooks
            continue
        else:
            missing.append(qmd)
            continue
        nb = reader_notebook(nb, titles)
        nb.metadata["jitbook"] = {"source": qmd.name}
        nbformat.write(nb, path)
        BUILD.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, BUILD / path.name)
        written.append(path)
    for page in chapter_files(
        root
    ):  # pages without a download (the preface) leave theirs too
        for stale in page.parent.glob(f"{page.stem}.quarto_ipynb*"):
            stale.unlink()
    if missing:
        names = ", ".join(str(q.relative_to(root)) for q in missing)
        raise FileNotFoundError(
            f"no executed notebook for {names}: Quarto keeps one as "
            "chapters/<name>.quarto_ipynb only with `execute: keep-ipynb: true` in "
            "_quarto.yml; render the whole book with `make book`."
        )
    return written


# ---- docstring back-links: one form, for readers -------------------------------------

# Every form the package's docstrings used: `Taught in "Tracing", "Explore it"
# (sec-tracing-explore).`, `Taught in recompilation.qmd, "Static arguments".`, `Defined
# in chapter "X", section "Y".`
OLD_BACKLINK = re.compile(
    r"""(?:Taught|Defined) in (?:chapter )?"""
    r"""(?:"(?P<chapter>[^"]+)"|(?P<stem>[\w-]+)\.qmd),"""
    r"""(?P<gap>\s+)(?:section )?"(?P<section>[^"]+)"(?:\s*\(sec-[\w-]+\))?\.?"""
)
BACKLINK = re.compile(
    r"Taught in (?P<chapter>[^,\n]+(?:,[^,\n]+)*?), (?P<section>[^.\n]+)\."
)


def chapter_titles(root: Path = ROOT) -> dict[str, str]:
    """Each chapter's file stem and the title of its page, cross-reference id left
    out."""
    titles = {}
    for qmd in chapter_pages(root):
        heading = re.search(r"^# (.+?)\s*(?:\{[^}]*\})?\s*$", qmd.read_text(), re.M)
        if heading:
            titles[qmd.stem] = heading.group(1)
    return titles


def reader_backlinks(text: str, titles: dict[str, str]) -> str:
    """``text`` with every old-style back-link rewritten as ``Taught in Chapter,
    Section.``"""

    def new(match: re.Match) -> str:
        chapter = match["chapter"] or titles.get(match["stem"], match["stem"])
        chapter, section = (" ".join(w.split()) for w in (chapter, match["section"]))
        gap = " " if "\n" not in match["gap"] else match["gap"]
        end = "" if section[-1] in ".?!" else "."
        return f"Taught in {chapter},{gap}{section}{end}"

    return OLD_BACKLINK.sub(new, text)


def backlink_files(root: Path = ROOT) -> list[Path]:
    """The package's modules whose docstrings still carry an old-style back-link."""
    package = root / "code" / "jitbook"
    return sorted(
        p
        for p in package.rglob("*.py")
        if p != Path(__file__) and OLD_BACKLINK.search(p.read_text())
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.site", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser(
        "run", help="execute chapters and write notebooks to _build/notebooks/"
    )
    run_p.add_argument("chapters", nargs="*", type=Path)
    run_p.add_argument(
        "--all", action="store_true", help="every chapter listed in _quarto.yml"
    )
    site_p = sub.add_parser(
        "site", help="Quarto's post-render step: offline pages, a notebook per chapter"
    )
    site_p.add_argument(
        "site",
        type=Path,
        nargs="?",
        default=Path(os.environ.get("QUARTO_PROJECT_OUTPUT_DIR", SITE)),
    )
    links_p = sub.add_parser(
        "backlinks",
        help="rewrite docstring back-links as 'Taught in Chapter, Section.'",
    )
    links_p.add_argument("--check", action="store_true", help="list files, change none")
    args = parser.parse_args(argv)
    if args.command == "backlinks":
        files, titles = backlink_files(), chapter_titles()
        for path in files:
            print(_shown(path))
            if not args.check:
                path.write_text(reader_backlinks(path.read_text(), titles))
        return 1 if args.check and files else 0
    if args.command == "site":
        try:
            written = build_site(ROOT / args.site)
        except FileNotFoundError as err:
            print(err, file=sys.stderr)
            return 1
        print(
            f"site: {len(written)} chapter notebooks written to {args.site}/notebooks, "
            "remote scripts removed"
        )
        return 0
    chapters = chapter_files() if args.all else args.chapters
    if not chapters:
        parser.error("name chapters to run, or pass --all")
    sizes = (
        "small problem sizes (JITBOOK_SMALL=1)"
        if size.is_small()
        else "full problem sizes"
    )
    print(
        f"Executing {len(chapters)} chapter(s) at {sizes}, one fresh kernel each.",
        flush=True,
    )
    total = time.perf_counter()
    for n, qmd in enumerate(chapters, 1):
        start = time.perf_counter()
        print(f"[{n}/{len(chapters)}] {Path(qmd).name} ...", flush=True)
        try:
            path = run(qmd)
        except (ChapterError, FileNotFoundError) as err:
            print(err, file=sys.stderr)
            return 1
        print(
            f"[{n}/{len(chapters)}] {Path(qmd).name}: "
            f"ran in {time.perf_counter() - start:.1f} s -> "
            f"{_shown(path)}",
            flush=True,
        )
    print(
        f"All {len(chapters)} chapter(s) ran in {time.perf_counter() - total:.1f} s.",
        flush=True,
    )
    return 0


def _shown(path: Path) -> str:
    """A path relative to the project when it is inside it: what a reader types, not the
    build machine's."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
