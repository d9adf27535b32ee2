"""Show things on the page: package source, tables, the versions a page was executed
with, measured ratios.

Each object renders as Markdown, which Quarto turns into its own code blocks and tables
and Jupyter shows as rich output, and as plain text anywhere else.
"""

import html
import inspect
import math
import platform
import re
import textwrap
from collections.abc import Sequence
from importlib import metadata

import jax

from jitbook.arguments import whole_number

# Characters of monospace text that fit the site's code column at 1280 px (theme.scss
# sizes the column and the code font for it); ruff formats the package at the same
# width, so shown source fits too.
COLUMN = 88


class Markdown:
    """A piece of Markdown that displays in Jupyter, in Quarto's render, and as text in
    a terminal."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text


def source(obj) -> str:
    """The exact source text of a function, class or module of the package."""
    try:
        return inspect.getsource(obj)
    except (TypeError, OSError) as err:
        raise TypeError(
            "show_source needs a function, class or module defined in a source file, "
            f"got {type(obj).__name__} {obj!r}; pass the object itself "
            "(jitbook.timing.race), not its result."
        ) from err


def summary(obj) -> str:
    """What a listing of ``obj`` does in one line: its name and its docstring's first
    sentence."""
    name = getattr(obj, "__qualname__", None) or obj.__name__
    lines = (inspect.getdoc(obj) or "").strip().split("\n\n")[0].split()
    first = " ".join(lines)
    first = first.split(". ")[0].rstrip(".") if first else "the code the page runs"
    return f"`{name}`: {first}"


def show_source(obj, folded: bool = True) -> Markdown:
    """Display the source of ``obj`` as a highlighted Python code block, so the page
    shows the tested code; folded under a one-line summary unless ``folded=False``
    (where the page is about that code)."""
    text = source(obj).rstrip("\n")
    fence = "````" if "```" in text else "```"
    block = f"{fence}python\n{text}\n{fence}"
    if not folded:
        return Markdown(block)
    # A <details> element Pandoc keeps as HTML around the Markdown code block; the PDF
    # (no HTML) shows the code and the notebook (Jupyter renders it) folds it too.
    return Markdown(
        f'<details class="jitbook-source">\n<summary>{_inline_code(summary(obj))}'
        f"</summary>\n\n{block}\n\n</details>"
    )


def _inline_code(text: str) -> str:
    """Text with code spans (Markdown's and reST's double ones) as HTML ``<code>``:
    inside a raw HTML line Pandoc does not read Markdown."""
    # `@` as an entity: Pandoc would read ``@jax.jit`` as a citation
    escaped = html.escape(text, quote=False).replace("@", "&#64;")
    return re.sub(r"``?([^`]+?)``?", lambda m: f"<code>{m.group(1)}</code>", escaped)


def fit(text: str, width: int = COLUMN, indent: str = "    ") -> str:
    """``text`` with every line longer than ``width`` wrapped at spaces, continuations
    indented: fits the page."""
    lines = []
    for line in text.splitlines():
        lead = line[: len(line) - len(line.lstrip())]
        lines += textwrap.wrap(
            line,
            width,
            subsequent_indent=lead + indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return "\n".join(lines)


def clip_lines(text: str, width: int = COLUMN) -> str:
    """``text`` with each line longer than ``width`` cut to it, ending in ``…``: program
    text (StableHLO, HLO) keeps its layout, where wrapping would misread it, and a 1 MB
    constant stays one short line."""
    return "\n".join(
        line if len(line) <= width else line[: width - 1] + "…"
        for line in text.splitlines()
    )


def number(value: float, digits: int = 4) -> str:
    """A number as a book prints it: thousands separated (``1,024``, ``16,008,000``),
    floats to ``digits`` significant digits, never in exponent form above 1."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"number() takes an int or a float, got {type(value).__name__}."
        )
    if isinstance(value, int):
        return f"{value:,}"
    if math.isfinite(value) and 1_000 <= abs(value) < 10 ** (digits + 9):
        return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:,.{digits}g}"
    return f"{value:.{digits}g}"


def numbers(values: Sequence[float], digits: int = 4) -> list[str]:
    """A table's column as a person writes it: every float with the same decimals
    (``93.5``, ``99.5``, ``142.8``, never ``99.53`` between them), as many as the column
    shows but no more than its largest value has at ``digits`` significant digits. A
    column spanning a thousandfold or more, or needing an exponent, keeps each value's
    own digits, as ``number`` writes them; so do ints."""
    values = list(values)
    texts = [number(v, digits) for v in values]
    floats = [
        (v, t)
        for v, t in zip(values, texts, strict=True)
        if isinstance(v, float) and math.isfinite(v)
    ]
    sizes = [abs(v) for v, _ in floats if v]
    if not sizes or any("e" in t for _, t in floats) or max(sizes) >= 1000 * min(sizes):
        return texts
    most = max(digits - 1 - math.floor(math.log10(max(sizes))), 0)
    places = min(max(len(t.partition(".")[2]) for _, t in floats), most)
    return [
        f"{v:,.{places}f}" if isinstance(v, float) and math.isfinite(v) else t
        for v, t in zip(values, texts, strict=True)
    ]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and its noun as a person writes them: ``1 compile``, ``3 compiles``,
    ``12,000 iterations`` (``nouns`` for an irregular plural)."""
    count = whole_number(count, "plural()'s count", minimum=0, example="3")
    word = noun if count == 1 else (nouns or noun + "s")
    return f"{count:,} {word}"


def duration(seconds: float, digits: int = 2) -> str:
    """A time in the unit a person picks for it: ``35 µs``, ``1.2 ms``, ``4.3 s``,
    ``2.1 min``, to ``digits`` significant digits (at least the whole part)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(
            f"duration() takes seconds as a number, got {type(seconds).__name__}."
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"duration() takes a finite time >= 0, got {seconds!r}.")
    for unit, scale in (("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale or unit == "µs":
            value = seconds / scale
            break
    whole = len(str(int(value)))
    return f"{value:,.{max(digits - whole, 0)}f} {unit}"


def span(low: float, high: float, show=duration) -> str:
    """A measured range: ``between 12 ms and 15 ms``, or one value when both ends read
    the same once written (``12 ms``), never ``between 12 ms and 12 ms``."""
    a, b = show(low), show(high)
    return a if a == b else f"between {a} and {b}"


def agreement(difference: float) -> str:
    """How two results compare: ``identical`` for no difference at all, else ``within
    2.1e-05`` of each other (never ``agree to 0.0e+00``)."""
    if difference == 0:
        return "identical"
    return f"within {difference:.2g}"


def _cell(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        return number(value)
    return _escape_html(str(value).replace("|", r"\|").replace("\n", " "))


def _column(rows: Sequence[dict], column: str) -> list[str]:
    """A column's cells; its numbers in one format when all of them are numbers."""
    values = [r.get(column, "") for r in rows]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return numbers(values)
    return [_cell(v) for v in values]


def _escape_html(text: str) -> str:
    """``<`` and ``>`` outside code spans escaped, so Markdown shows ``<Error>`` instead
    of dropping it as a tag."""
    parts = re.split(r"(`+[^`]*`+)", text)
    return "".join(
        p if p.startswith("`") else p.replace("<", r"\<").replace(">", r"\>")
        for p in parts
    )


WRAPS_AT = 40  # characters: a longer cell wraps, so its column counts as this wide


def table(rows: Sequence[dict], caption: str | None = None) -> Markdown:
    """A list of dicts (one per row, same keys) as a Markdown table."""
    rows = list(rows)
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise ValueError(
            "table() takes a non-empty list of dicts, one dict per row, "
            "e.g. [{'level': 'eager', 's': 1.2}]."
        )
    columns = list(rows[0])
    cells = [_column(rows, c) for c in columns]
    # Dashes as long as a column's widest cell, up to WRAPS_AT: Pandoc sizes the columns
    # of a wide table by them, so a column of short codes is not squeezed by one of
    # prose, which wraps anyway.
    widths = [
        min(WRAPS_AT, max([3, *map(len, name.split()), *map(len, column)]))
        for name, column in zip(columns, cells, strict=True)
    ]
    # Numbers right-aligned, so their digits line up; words left-aligned, as prose
    # reads.
    numeric = [
        all(
            isinstance(r.get(c), int | float) and not isinstance(r.get(c), bool)
            for r in rows
        )
        for c in columns
    ]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|"
        + "|".join(_rule(w, right) for w, right in zip(widths, numeric, strict=True))
        + "|",
    ]
    for row in zip(*cells, strict=True):
        lines.append("| " + " | ".join(row) + " |")
    if caption:  # escaped like a cell, so `<Error>` stays a word instead of an HTML tag
        lines += ["", f": {_escape_html(caption)}"]
    return Markdown("\n".join(lines))


def _rule(width: int, right: bool) -> str:
    return "-" * (width - 1) + ":" if right else ":" + "-" * (width - 1)


def version_of(dist: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_rows() -> list[dict]:
    """Python, JAX, jaxlib, Equinox, optax versions and the device, as rows."""
    import os

    rows = [{"component": "Python", "version": platform.python_version()}]
    rows += [
        {"component": d, "version": version_of(d)}
        for d in ("jax", "jaxlib", "equinox", "optax", "numpy")
    ]
    device = jax.devices()[0]
    rows.append(
        {
            "component": "device",
            "version": f"{device.platform} ({device.device_kind}), "
            f"{len(jax.devices())} device(s)",
        }
    )
    flags = os.environ.get(
        "XLA_FLAGS", ""
    )  # in a code span: Markdown would set `--` as an en dash
    rows.append(
        {"component": "XLA_FLAGS", "version": f"`{flags}`" if flags else "(none)"}
    )
    return rows


def versions() -> Markdown:
    """The versions table that the preface shows."""
    return table(version_rows())
