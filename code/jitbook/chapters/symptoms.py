"""The symptom index: every error, warning and log line the book shows, what it means,
and where the book explains it.

Each entry pairs a pattern with a one-line meaning, the section that explains it, and
a function that makes JAX (or the book's package) say it again, so the appendix quotes
text produced when it runs, never typed. ``messages_in`` finds messages in an executed
page's outputs; the tests hold the index against every executed chapter.

The entries live in ``symptoms_table`` (``INDEX``), their producers in
``symptoms_producers``; to add a message, see ``symptoms_table``.

Taught in Symptom index, Looking a message up.
"""

import dataclasses
import re
from collections.abc import Iterable, Iterator

from jitbook.cache import without_paths
from jitbook.chapters.symptoms_table import INDEX, Symptom

# Pages whose messages are not symptoms a reader of this JAX meets, and why.
NOT_INDEXED = {
    "ledger": "it records the claim tests failing on other JAX releases: its "
    "messages are the ledger's data, not errors of the installed JAX",
    "claims": "it quotes each claim test's assertions and the values they compared: "
    "an error's text there is what a test checked, not a message the page printed",
}

# --- finding messages in a page's outputs

_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning)|Exception): (.+)")
_CLASS = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning))\b")
# JAX's log lines (jax.log_compiles, jax_explain_cache_misses, jax_debug_nans) and
# warnings shown without their class.
LOG_STARTS = (
    "TRACING CACHE MISS",
    "never seen function",
    "but seen another function defined on the same line",
    "all previously seen cache keys differ",
    "different input types",
    "Tracing context doesn't match",
    "cache miss explanation unavailable",
    "* at ",
    "* jax_",
    "Finished tracing",
    "Compiling jit(",
    "Finished jaxpr to MLIR module conversion",
    "Finished XLA compilation",
    "Invalid nan value encountered",
    "Some donated buffers were not usable",
)


def logical_lines(text: str) -> Iterator[str]:
    """Lines of ``text`` with the continuations ``display.fit`` wrapped (indented four
    more spaces than the line they continue) joined back."""
    line, indent = None, 0
    for raw in text.splitlines():
        lead = len(raw) - len(raw.lstrip())
        if line is not None and raw.strip() and lead >= indent + 4:
            line += " " + raw.strip()
            continue
        if line is not None:
            yield line
        line, indent = raw.strip(), lead
    if line is not None:
        yield line


def messages_in(text: str) -> list[str]:
    """The error, warning and log messages in one output's text."""
    found = []
    for line in logical_lines(text):
        bare = line.strip("'\"()[], ")
        if bare.startswith(LOG_STARTS):
            found.append(bare)
            continue
        match = _ERROR.search(line)
        if match:
            found.append(f"{match.group(1)}: {match.group(2)}")
    return found


def classes_in(text: str) -> set[str]:
    """Error and warning class names named anywhere in one output's text."""
    return set(_CLASS.findall(text))


def output_texts(cell) -> Iterator[str]:
    """The text of a code cell's outputs, leaving out displayed source code."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield out.get("text", "")
        elif "data" in out:
            data = out["data"]
            text = data.get("text/markdown") or data.get("text/plain") or ""
            # show_source: code, not output (a listing, folded or not)
            if not text.lstrip().startswith(
                ("```", '<details class="jitbook-source">')
            ):
                yield text
        elif out.get("output_type") == "error":
            yield f"{out.get('ename')}: {out.get('evalue')}"


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{#(sec-[\w-]+)[^}]*\})?\s*$")


def section_at(qmd_text: str, line: int) -> tuple[str, str]:
    """Where a ``.qmd`` line sits: the id of the innermost enclosing heading that has
    one (``sec-...``, what a cross-reference names) and the nearest heading's title."""
    stack: list[tuple[int, str, str]] = []
    fenced = False
    for text in qmd_text.splitlines()[:line]:
        if text.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(text)
        if match:
            level = len(match.group(1))
            stack = [h for h in stack if h[0] < level]
            stack.append((level, match.group(2), match.group(3) or ""))
    labelled = [h[2] for h in stack if h[2]]
    return (labelled[-1] if labelled else ""), (stack[-1][1] if stack else "")


@dataclasses.dataclass(frozen=True)
class Shown:
    """What one executed cell shows: its messages, class names, text, and section."""

    section: str
    heading: str
    messages: tuple[str, ...]
    classes: frozenset[str]
    text: str


def shown(nb, qmd_text: str) -> list[Shown]:
    """Every code cell of an executed chapter that shows output, with the messages and
    error classes in it."""
    out = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        texts = list(output_texts(cell))
        messages = tuple(m for t in texts for m in messages_in(t))
        classes = frozenset(c for t in texts for c in classes_in(t))
        if texts:
            line = cell.metadata.get("jitbook", {}).get("qmd_line", 0)
            text = " ".join(" ".join(logical_lines(t)) for t in texts)
            section, heading = section_at(qmd_text, line)
            out.append(Shown(section, heading, messages, classes, text))
    return out


def not_in_index(cells: Iterable[Shown]) -> list[str]:
    """The messages and error classes these cells show that no index entry covers."""
    kinds = {s.kind for s in INDEX}
    missing = []
    for cell in cells:
        missing += [m for m in cell.messages if not any(s.matches(m) for s in INDEX)]
        missing += [f"class {c}" for c in sorted(cell.classes - kinds)]
    return missing


def normalized(message: str) -> str:
    """A message with numbers, addresses and ids blurred: two runs compare equal."""
    message = without_paths(message)
    message = re.sub(r"0x[0-9a-fA-FX.]+", "0x…", message)
    message = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", message)
    return " ".join(message.split())


def lookup(message: str) -> list[Symptom]:
    """The entries that match a pasted message: ``symptoms.lookup("...")``."""
    if not isinstance(message, str) or not message.strip():
        raise TypeError("lookup takes the message as a non-empty string: paste it.")
    line = " ".join(message.split())
    return [s for s in INDEX if s.matches(line)]


def _code(text: str) -> str:
    """``text`` as a Markdown code span, however many backticks it holds."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def read_closely() -> list[dict]:
    """What raises or logs three messages that mean more, or less, than they say:
    ``TracerIntegerConversionError``, ``never seen function``, ``re-tracing function``.

    Taught in Symptom index, Three messages that say less than they seem to.
    """
    from jitbook.chapters import jaxprs, symptoms_producers
    from jitbook.display import plural

    out = [
        {"what was done": f"`{way}` on a traced int", "what JAX said": said}
        for way, said in symptoms_producers.integer_conversion_sources().items()
    ]
    for call, logged in symptoms_producers.never_seen_logs().items():
        said = "never seen function" if logged else "nothing"
        out.append({"what was done": f"{call}, called", "what JAX said": said})
    (printing,) = [r for r in jaxprs.no_tracing_rows() if "debug.print" in r["call"]]
    out.append(
        {
            "what was done": "a warm function holding `jax.debug.print`, called under "
            f"`no_tracing` ({plural(printing['body runs'], 'body run')} unguarded)",
            "what JAX said": printing["under no_tracing"],
        }
    )
    return out


def rows(index: list[Symptom] | None = None) -> list[dict]:
    """One row per entry: the message as JAX says it now, what it means, and where the
    book shows it (a ``@sec-...`` cross-reference and the heading it sits under).

    Taught in Symptom index, Looking a message up.
    """
    from jitbook.site.downloads import label_titles

    titles = label_titles()
    out = []
    for symptom in INDEX if index is None else index:
        message = without_paths(symptom.produce())
        if not symptom.matches(" ".join(message.split())):
            raise RuntimeError(
                f"the message produced for {symptom.pattern!r} no longer matches it: "
                f"{message!r}"
            )
        if _CLASS.fullmatch(symptom.kind) and not message.startswith(symptom.kind):
            message = f"{symptom.kind}: {message}"  # shown in a column of its own there
        where = f"@{symptom.section}"
        if titles.get(symptom.section) != symptom.heading:
            where += f", “{symptom.heading}”"
        out.append(
            {
                "message": _code(message),
                "what it means": symptom.meaning,
                "shown in": where,
            }
        )
    return out


__all__ = [
    "INDEX",
    "NOT_INDEXED",
    "Symptom",
    "classes_in",
    "logical_lines",
    "lookup",
    "messages_in",
    "normalized",
    "not_in_index",
    "output_texts",
    "read_closely",
    "rows",
    "section_at",
    "shown",
]
