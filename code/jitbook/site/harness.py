"""The chapter harness: a chapter ``.qmd`` becomes a notebook, runs in a fresh kernel,
and is saved; what Quarto's Jupyter engine does, in Python, so that the tests, the
downloads and the classroom notebooks come from one code path.
"""

import contextlib
import json
import re
import tempfile
import textwrap
from pathlib import Path
from typing import TextIO

import nbformat
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from jitbook.paths import ROOT
from jitbook.site.talk import CellProgress

BUILD = ROOT / "_build" / "notebooks"
SITE = ROOT / "_book"
CHUNK_START = re.compile(r"^```+\s*\{python[^}]*\}\s*$")
INLINE = re.compile(r"`\{python\}\s+([^`]+)`")
_INLINE_MARK = "__jitbook_inline__"
# Only the kernel's errors reach the output (its start-up notices are noise here).
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


@contextlib.contextmanager
def kernel_manager():
    """A manager for one fresh ``python3`` kernel that talks over Unix sockets in a
    folder of its own. Over TCP, jupyter_client picks free ports, frees them and lets
    the kernel bind them later, so two kernels started at once (the tests run chapters
    beside other kernels) can pick the same port and one dies
    (jupyter/jupyter_client#487); socket files in separate folders never collide."""
    from jupyter_client.manager import AsyncKernelManager

    with tempfile.TemporaryDirectory(prefix="jitbook-kernel-") as folder:
        yield AsyncKernelManager(
            kernel_name="python3", transport="ipc", ip=str(Path(folder) / "kernel")
        )


def execute(
    qmd: Path, timeout: int = 3600, progress: TextIO | None = None
) -> nbformat.NotebookNode:
    """Run a chapter top to bottom in a fresh ``python3`` kernel and return the executed
    notebook.

    ``timeout`` is per cell: the PLN chapter's full-size benchmark cells take minutes on
    a small machine. With ``progress`` (a stream), say there which cell runs and for how
    long whenever ten seconds pass in silence.
    """
    qmd = Path(qmd).resolve()
    if not qmd.exists() or qmd.suffix != ".qmd":
        raise FileNotFoundError(
            f"no chapter at {qmd}; give the path of a .qmd file, "
            "e.g. chapters/why-compile.qmd."
        )
    nb = _with_inline_cells(to_notebook(qmd))
    talk = contextlib.nullcontext()
    if progress is not None:
        talk = CellProgress(qmd.name, nb, progress)
    try:
        with talk, kernel_manager() as km:
            client = NotebookClient(
                nb,
                km=km,
                timeout=timeout,
                extra_arguments=QUIET_KERNEL,
                resources={"metadata": {"path": str(qmd.parent)}},
                on_cell_execute=getattr(talk, "on_cell_execute", None),
            )
            client.execute(cleanup_kc=True)  # the kernel is ours to shut down
    except CellExecutionError as err:
        raise _cell_failure(qmd, nb, err) from None
    return _fill_inline(nb)


def chapter_pages(root: Path = ROOT) -> list[Path]:
    """The pages under ``chapters/``: each links to its notebook
    (filters/notebook-link.lua)."""
    return [p for p in chapter_files(root) if p.parent.name == "chapters"]


def chapter_titles(root: Path = ROOT) -> dict[str, str]:
    """Each chapter's file stem and the title of its page, cross-reference id left
    out."""
    titles = {}
    for qmd in chapter_pages(root):
        heading = re.search(r"^# (.+?)\s*(?:\{[^}]*\})?\s*$", qmd.read_text(), re.M)
        if heading:
            titles[qmd.stem] = heading.group(1)
    return titles
