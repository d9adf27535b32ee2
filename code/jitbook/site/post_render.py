"""Quarto's post-render step: offline pages (no remote scripts), one shared, late
plotly.js, solutions and listings out of search, a download beside every chapter
and the wheel its first cell installs."""

import re
import shutil
from pathlib import Path

import nbformat

from jitbook.explore.page import PLOTLY_FILE, plotly_js
from jitbook.site import claim_tests, search, wheel
from jitbook.site.downloads import (
    label_titles,
    reader_notebook,
    site_address,
    with_setup,
)
from jitbook.site.harness import ROOT, chapter_files, chapter_pages, to_notebook

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
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S | re.I)
    return any(NEEDS_REQUIRE.search(s) for s in scripts)


LEFT_CELL = re.compile(r'<(td|th)( [^>]*?)? style="text-align: left;"')
# Pandoc's empty anchor on every line of code, there for line numbers the book does not
# show; the line's <span id> stays, so a link to a line still lands.
LINE_ANCHOR = re.compile(r'<a href="#cb\d+-\d+" aria-hidden="true" tabindex="-1"></a>')


def offline_html(html: str) -> str:
    """A built page without its remote ``<script src>`` and ``<link href>`` tags and
    Quarto's jQuery shim, without the left alignment Pandoc writes on every table cell
    (the theme aligns cells left; the ledger's matrix weighed 110 kB of it), and without
    the empty anchor on every line of code (15% of a chapter with many listings)."""
    light = LINE_ANCHOR.sub("", JQUERY_SHIM.sub("", REMOTE_TAG.sub("", html)))
    return LEFT_CELL.sub(lambda m: f"<{m.group(1)}{m.group(2) or ''}", light)


# Quarto links the book's PDF from every page (`downloads: [pdf]`) whether or not a PDF
# was made: only `make pdf` makes one.
PDF_TOOL = re.compile(
    r'<a href="[^"]*?([^"/]+\.pdf)"[^>]*\bclass="quarto-navigation-tool[^"]*"[^>]*>'
    r'\s*<i class="bi bi-file-pdf"></i>\s*</a>\s*'
)


def without_missing_pdf(html: str, site: Path) -> str:
    """A page without its "Download PDF" link when the site has no such PDF."""
    return PDF_TOOL.sub(
        lambda m: m.group(0) if (site / m.group(1)).exists() else "", html
    )


PLOTLY_LIB = "site_libs/plotly/" + PLOTLY_FILE
# Where `make pdf` renders the book (`--output-dir`: a render into _book would replace
# the site); the site step copies the PDF from there into every site it builds.
PDF_DIR = ROOT / "_build" / "pdf"
EXPLORER = 'class="jitbook-explorer"'


# plotly.js is asked for once the page is parsed: the page is interactive (its
# DOMContentLoaded) without waiting for 1.5 MB of script, which even `defer` would make
# it wait for; the explorers' controls work at once and the figure draws when it comes.
LOADER = (
    '<script>document.addEventListener("DOMContentLoaded", function () {{ '
    'var s = document.createElement("script"); s.src = "{src}"; '
    "document.head.appendChild(s); }});</script>"
)


def shared_plotly(html: str, page: Path, site: Path) -> str:
    """A page with explorers, loading the site's one plotly.js after the page is
    parsed: the text renders first, and the browser caches the script once for every
    page.

    The copy is written, the vendored file unchanged, the first time a page needs it.
    ``page`` is the page's path inside ``site``.
    """
    if EXPLORER not in html or PLOTLY_LIB in html:
        return html
    lib = site / PLOTLY_LIB
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_text(plotly_js(), encoding="utf-8")
    up = "../" * (len(Path(page).parts) - 1)
    tag = LOADER.format(src=f"{up}{PLOTLY_LIB}")
    head = html.find("</head>")
    at = head if head != -1 else 0
    return html[:at] + tag + html[at:]


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
    """The site's search index with prose only (no solutions, listings, code, outputs)
    and each section found first for the names it teaches (``search.tune``).

    The solutions are folded on the page, but Quarto indexes every text of a page, so a
    search would show them; this runs after Quarto wrote ``search.json``.
    """
    order = [
        page.relative_to(root).with_suffix(".html").as_posix()
        for page in chapter_files(root)
    ]
    search.tune(Path(site), order, drop=solution_lines(root))


def _drop_kept_notebooks(root: Path) -> None:
    """Remove what ``keep-ipynb`` left beside every page, the preface's included."""
    for page in chapter_files(root):
        for stale in page.parent.glob(f"{page.stem}.quarto_ipynb*"):
            stale.unlink()


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
    if not (
        site / "index.html"
    ).exists():  # the PDF (`make pdf`): no pages, no downloads
        _drop_kept_notebooks(root)
        return []
    for pdf in PDF_DIR.glob("*.pdf"):  # the last `make pdf`, linked from the sidebar
        shutil.copy2(pdf, site / pdf.name)
    for page in site.rglob("*.html"):
        text = page.read_text()
        light = shared_plotly(offline_html(text), page.relative_to(site), site)
        light = without_missing_pdf(light, site)
        if light != text:
            page.write_text(light)
    unsearchable(site, root)
    claim_tests.write(site, root)  # the Claims appendix links each claim's test
    titles, written, missing = label_titles(root), [], []
    target = site / "notebooks"
    target.mkdir(exist_ok=True)
    package = wheel.build(target).name  # what each download's first cell installs
    address = site_address(root)
    # `make lab`'s copies, beside the site: _book/ refreshes _build/notebooks/; a render
    # into another folder (the tests') leaves the reader's copies as they were.
    lab = site.parent / "_build" / "notebooks"
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
        lab.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, lab / path.name)  # `make lab`: jitbook installed
        nbformat.write(with_setup(nb, package, address), path)
        written.append(path)
    _drop_kept_notebooks(root)
    if missing:
        names = ", ".join(str(q.relative_to(root)) for q in missing)
        raise FileNotFoundError(
            f"no executed notebook for {names}: Quarto keeps one as "
            "chapters/<name>.quarto_ipynb only with `execute: keep-ipynb: true` in "
            "_quarto.yml; render the whole book with `make book`."
        )
    return written
