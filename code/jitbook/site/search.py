"""The site's search, tuned after Quarto wrote ``search.json``: snippets of prose, and
the section that teaches a name found first.

Quarto's search (Fuse.js) weighs a page's title and a section's title twice its text,
and a short field above a long one (``quarto-search.js``), so a name a section teaches
at length ranks under every short section that mentions it. Each name written as code
in the book's prose goes, as a keyword, into the title field of the section that uses
it most, prose and code (at least twice): ``Static arguments · static_argnums``.
Code blocks, outputs and listings leave the text, so a snippet is prose.

Readers search in their own words ("why is my function slow", "if statement"), which a
heading seldom uses: ``READER_WORDS`` gives them to the sections that answer them, and
they join the section's title field too. Each row of the symptom index's table
(``ROW_SECTIONS``) is an entry of its own, titled by the error class its message starts
with, so an error's name finds its row first rather than the long pages that mention it.
"""

import html
import json
import re
from collections import Counter, defaultdict
from html.parser import HTMLParser
from pathlib import Path

# A name worth a keyword: an identifier or dotted path with an underscore or a dot.
NAME = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*$")
MOST_KEYWORDS = 4
KEYS = " · "
# Names of the libraries the book teaches; other names count only where a heading names
# them.
API = ("jax.", "jax_", "lax.", "jnp.", "eqx.", "optax.")
LEAST_MENTIONS = 2
# The questions a reader types, by the section (its label) that answers them.
READER_WORDS = {
    "sec-why-compile-measured": ["why is my function slow", "first call slow"],
    "sec-recompilation-diagnose": ["slow on every call", "compiles every call"],
    "sec-tracing-control": ["if statement", "if on a traced value", "while loop"],
}
# Sections whose table rows are entries of their own.
ROW_SECTIONS = ("sec-symptoms-index",)
# An entry made of a table row: its section's href and the row's number.
ROW = "#row-"
ERROR_CLASS = re.compile(r"^\s*([A-Z]\w*(?:Error|Warning|Exception))\b")


class _Page(HTMLParser):
    """One page's level-2 sections: the inline code of their prose, and the lines of
    every code block and output (to drop from the text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        # ids of the open level-2 <section> elements, None for other sections
        self.stack: list[str | None] = []
        self.names: dict[str, Counter] = defaultdict(Counter)
        self.code_lines: set[str] = set()
        self.text: dict[str, list[str]] = defaultdict(list)
        self.headings: dict[str, str] = {}
        # the table rows of the ROW_SECTIONS (each a list of its cells' text)
        self.rows: dict[str, list[list[str]]] = defaultdict(list)
        self._row_sections: set[str] = set()
        self._cell: list[str] | None = None
        self.first: str | None = (
            None  # the first section, which Quarto indexes as the page
        )
        self._heading: list[str] | None = None
        self._pre = 0
        self._code: list[str] | None = None
        self._block: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            level2 = "level2" in (attrs.get("class") or "").split()
            self.stack.append(attrs.get("id") if level2 else None)
            if level2 and self.first is None:
                self.first = attrs.get("id")
            if level2 and attrs.get("id") in ROW_SECTIONS:
                self._row_sections.add(attrs.get("id"))
        elif tag == "tr" and self._section() in self._row_sections:
            self.rows[self._section()].append([])
        elif tag == "td" and self._section() in self._row_sections:
            self._cell = []
        elif tag == "pre":
            self._pre += 1
        elif tag == "code" and not self._pre:
            self._code = []
        elif tag == "h2":
            self._heading = []

    def handle_endtag(self, tag):
        if tag == "section" and self.stack:
            self.stack.pop()
        elif tag == "pre" and self._pre:
            self._pre -= 1
            if not self._pre:
                text = "".join(self._block)
                self.code_lines |= {
                    ln.strip() for ln in text.splitlines() if ln.strip()
                }
                self._block = []
        elif tag == "td" and self._cell is not None:
            self.rows[self._section()][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "h2" and self._heading is not None:
            section = self._section()
            if section:
                self.headings[section] = "".join(self._heading)
            self._heading = None
        elif tag == "code" and self._code is not None:
            name, section = "".join(self._code).strip(), self._section()
            if section and NAME.match(name) and ("_" in name or "." in name):
                self.names[section][name] += 1
            self._code = None

    def handle_data(self, data):
        section = self._section()
        if section:
            self.text[section].append(data)
        if self._heading is not None:
            self._heading.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._pre:
            self._block.append(data)
        elif self._code is not None:
            self._code.append(data)

    def _section(self) -> str | None:
        return next((s for s in reversed(self.stack) if s), None)


def read_page(path: Path) -> _Page:
    """The sections' code names and the code lines of one built page."""
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _names_it(heading: str, name: str) -> bool:
    """Whether a heading's words share a stem (5 letters) with a part of ``name``:
    "Static arguments" and ``static_argnums``, "Buffer donation" and ``donate``."""
    words = re.findall(r"[a-z]{5,}", heading.lower())
    parts = [p for p in re.split(r"[_.]", name.lower()) if len(p) >= 5]
    return any(w[:5] == p[:5] for w in words for p in parts)


def keywords(pages: dict[str, _Page]) -> dict[str, list[str]]:
    """``page#section`` -> the names it teaches: each name to the section whose prose
    writes it most (the first such in the book's order on a tie)."""
    best: dict[str, tuple[tuple[bool, int], str]] = {}
    for href, page in pages.items():
        for section, counts in page.names.items():
            text = "".join(page.text[section])
            heading = page.headings.get(section, "")
            for name in counts:
                # a heading that names it ("Buffer donation" for donate_argnums) first,
                # then mentions in prose and code alike
                count = len(re.findall(rf"(?<![\w.]){re.escape(name)}(?!\w)", text))
                rank = (_names_it(heading, name), count)
                if not (rank[0] or name.startswith(API)):
                    continue  # the package's own helpers are found by their section
                if (
                    count >= LEAST_MENTIONS
                    and rank > best.get(name, ((False, 0), ""))[0]
                ):
                    best[name] = (rank, f"{href}#{section}")
    taught: dict[str, Counter] = defaultdict(Counter)
    for name, ((_, count), where) in best.items():
        taught[where][name] = count
    return {w: [n for n, _ in c.most_common(MOST_KEYWORDS)] for w, c in taught.items()}


def tune(site: Path, order: list[str], drop: list[str] = ()) -> None:
    """Rewrite ``site/search.json``: code and ``drop`` lines out of the text, taught
    names into their section's title. ``order``: the pages (hrefs) in book order."""
    index = Path(site) / "search.json"
    if not index.exists():
        return
    pages = {href: read_page(site / href) for href in order if (site / href).exists()}
    taught = keywords(pages)
    docs = json.loads(index.read_text(encoding="utf-8"))
    for doc in docs:
        href = doc.get("href", "")
        page = pages.get(href.split("#")[0])
        if (
            page and "#" not in href and page.first
        ):  # the page's entry is its first section
            href = f"{href}#{page.first}"
        gone = set(drop) | (page.code_lines if page else set())
        gone = {html.escape(line, quote=False) for line in gone} | gone
        text = doc.get("text", "")
        for line in sorted(
            set(drop), key=len, reverse=True
        ):  # solutions, even in prose
            text = text.replace(html.escape(line, quote=False), "").replace(line, "")
        lines = [t for t in text.splitlines() if t.strip() not in gone]
        doc["text"] = "\n".join(t for t in lines if t.strip())
        section = doc.get("section", "").split(KEYS)[0]  # a partial render tunes again
        keys = READER_WORDS.get(href.split("#")[-1], []) + taught.get(href, [])
        if keys and not section and page:
            section = page.headings.get(href.split("#")[-1], "")
        doc["section"] = section + (KEYS + ", ".join(keys) if keys else "")
    docs = [d for d in docs if ROW not in d.get("objectID", "")]  # a partial render
    docs += row_entries(pages, docs)
    index.write_text(json.dumps(docs, indent=1, ensure_ascii=False), encoding="utf-8")


def row_title(first_cell: str) -> str:
    """What a table row's entry is titled by: the error class its message starts with,
    or its first words."""
    found = ERROR_CLASS.match(first_cell)
    if found:
        return found.group(1)
    words = first_cell.split()
    return " ".join(words[:8]) + (" …" if len(words) > 8 else "")


def row_entries(pages: dict[str, _Page], docs: list[dict]) -> list[dict]:
    """An entry for each row of the tables of the sections marked search-rows, under its
    section's page title."""
    entries = []
    for href, page in pages.items():
        for section, rows in page.rows.items():
            where = f"{href}#{section}"
            base = next(
                (d for d in docs if d.get("href") == where),
                next((d for d in docs if d.get("href") == href), {}),
            )
            for n, cells in enumerate((r for r in rows if r), start=1):
                entries.append(
                    {
                        "objectID": f"{href}{ROW}{section}-{n}",
                        "href": where,
                        "title": base.get("title", ""),
                        "section": row_title(cells[0]),
                        "text": " · ".join(cells),
                        "crumbs": base.get("crumbs", []),
                    }
                )
    return entries
