"""The reader's download of a chapter: its executed notebook with inline values filled
in, cross-references written as the titles they point to, no build paths."""

import ast
import base64
import re
from pathlib import Path

import nbformat

from jitbook import size
from jitbook.site import harness
from jitbook.site.harness import (
    INLINE,
    ROOT,
    _escape_markdown,
    chapter_files,
    execute,
    to_notebook,
)

REF = re.compile(r"\[?-?@((sec|fig|tbl|lst|exr)-[\w-]*\w)\]?")
HEADING_LABEL = re.compile(r"^#+\s+(.+?)\s*\{#((?:sec|exr)-[\w-]+)[^}]*\}\s*$", re.M)
HEADING_ATTRIBUTES = re.compile(
    r"^(#+ .*?)\s*\{[#.][^}]*\}[ \t]*$", re.M
)  # `{#sec-x}`, `{.unnumbered}`
CLAIM_SPAN = re.compile(
    r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\{\.claim\s+#clm-[\w-]+\}"
)  # `[the sentence]{.claim #clm-x}`: the sentence stays, its marks go
QUARTO_FENCE = re.compile(
    r"^:::+[^\n]*(?:\n|$)", re.M
)  # `::: {#exr-x}` and its closing `:::`
IMAGE = re.compile(
    r"!\[([^\]]*)\]\((images/[\w.-]+)\)\{([^}]*)\}"
)  # `![](images/x.svg){.light-content fig-alt="..."}`, a drawing beside the chapters
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


def _attach_images(cell, folder: Path = ROOT / "chapters") -> None:
    """The chapter's drawings carried in the Markdown cell as attachments, so the
    notebook shows them wherever it is opened; the dark copies (site only) dropped."""

    def attach(match):
        caption, path, attributes = match.groups()
        if ".dark-content" in attributes:
            return ""
        alt = re.search(r'fig-alt="([^"]*)"', attributes)
        name = Path(path).name
        data = base64.b64encode((folder / path).read_bytes()).decode()
        cell.setdefault("attachments", {})[name] = {"image/svg+xml": data}
        return f"![{alt.group(1) if alt else caption}](attachment:{name})"

    cell.source = IMAGE.sub(attach, cell.source)


def _without_options(source: str) -> str:
    """Code without its leading ``#|`` lines: Quarto's cell options read as noise in
    Jupyter."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if not line.startswith("#|")), 0)
    return "\n".join(lines[start:])


def _titled_markdown(out, titles: dict[str, str]) -> None:
    """A Markdown output's cross-references written as titles, like the prose's: Quarto
    resolves them on the page, Jupyter would show ``@sec-...``."""
    text = out.get("data", {}).get("text/markdown")
    if text is None:
        return
    text = "".join(text) if isinstance(text, list) else text
    out["data"]["text/markdown"] = REF.sub(
        lambda m: words_for(m.group(1), titles), text
    )


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
            source = CLAIM_SPAN.sub(r"\1", source)
            cell.source = REF.sub(lambda m: words_for(m.group(1), titles), source)
            _attach_images(cell)
            cell.metadata.pop("user_expressions", None)
        elif cell.cell_type == "code":
            cell.source = _without_options(cell.source)
            for out in cell.get("outputs", []):
                _titled_markdown(out, titles)
    nb.metadata = _reader_metadata(nb.metadata)
    if size.is_small() and not any(SMALL_NOTE in c.source for c in nb.cells):
        nb.cells.insert(
            1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0,
            nbformat.v4.new_markdown_cell(SMALL_NOTE),
        )
    return nb


SETUP = """\
# Setup: this notebook imports `jitbook`, the book's package, at the versions the
# book ran with. Where it is installed (the book's checkout) this cell does nothing;
# elsewhere (Jupyter, Colab) it installs the wheel beside this notebook or on the site.
import importlib.util
import pathlib
import subprocess
import sys

WHEEL = "{wheel}"
SITE = {site!r}  # the book's public address, if it has one
if importlib.util.find_spec("jitbook") is None:
    local = pathlib.Path(WHEEL)
    if not local.exists() and SITE is None:
        raise FileNotFoundError(
            f"{{WHEEL}} is not in {{pathlib.Path.cwd()}}: download it from the page "
            "this notebook came from (the link beside 'Download this chapter') into "
            "this folder, then run this cell again."
        )
    source = str(local) if local.exists() else SITE + WHEEL
    pip = [sys.executable, "-m", "pip", "install", "--quiet", source]
    subprocess.run(pip, check=True)"""


def site_address(root: Path = ROOT) -> str | None:
    """The site's public address (``site-url`` under ``book:`` in ``_quarto.yml``),
    ending in ``/``; None for a site read only where it was built."""
    url = harness.book_config(root).get("book", {}).get("site-url")
    return str(url).rstrip("/") + "/" if url else None


def with_setup(
    nb: nbformat.NotebookNode, wheel: str, site: str | None
) -> nbformat.NotebookNode:
    """The notebook with a first code cell that installs ``wheel`` where ``jitbook`` is
    missing: from the notebook's folder, else from ``site`` + ``notebooks/``."""
    address = site + "notebooks/" if site else None
    cell = nbformat.v4.new_code_cell(SETUP.format(wheel=wheel, site=address))
    cell.metadata["jitbook"] = {"setup": True}
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    nb.cells.insert(code[0] if code else len(nb.cells), cell)
    return nb


# Quarto 1.7 adds require.js and jQuery from a CDN to a page whose notebook has any of
# these outputs (src/core/jupyter/widgets.ts); the site step removes those tags, so the
# book's HTML outputs must not need them.


def run(qmd: Path, out_dir: Path | None = None, progress=None) -> Path:
    """Execute a chapter and write its reader's notebook to ``out_dir``
    (``_build/notebooks``); return its path. ``progress``: see ``harness.execute``."""
    nb = reader_notebook(execute(qmd, progress=progress))
    out_dir = out_dir or harness.BUILD
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (Path(qmd).stem + ".ipynb")
    nbformat.write(nb, path)
    return path
