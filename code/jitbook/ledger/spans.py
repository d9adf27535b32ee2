"""The book's claim sentences, ``[the sentence]{.claim #clm-...}``, and the tests that
name them, read statically (regular expressions for the pages, ``ast`` for the tests)
so that checking them and listing them takes no JAX and no test run."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from jitbook.ledger.data import ROOT

# One level of brackets inside (an inline ``{python} x["key"]``); the sentence may wrap.
SPAN = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\{\.claim\s+#(clm-[\w-]+)\}")
HEADING = re.compile(r"^#+ .*?\{#(sec-[\w-]+)\}", re.MULTILINE)
INLINE = re.compile(r"`\{python\}\s*[^`]*`")


@dataclasses.dataclass(frozen=True)
class Span:
    """One claim sentence: where it is and what it says."""

    id: str
    page: str  # the page's stem, e.g. ``tracing``
    section: str  # the nearest ``{#sec-...}`` above it
    text: str  # the sentence as written, inline code included
    line: int

    @property
    def words(self) -> str:
        """The sentence for a table: one line, each inline computed value as ``…``."""
        return " ".join(INLINE.sub("…", self.text).split())


@dataclasses.dataclass(frozen=True)
class ClaimTest:
    """One test marked ``@pytest.mark.claim(section, span)``."""

    test: str  # pytest's id without parameters: ``tests/test_x.py::test_y``
    section: str
    span: str | None  # None when the marker names no span, which ``problems`` reports
    line: int


def pages(root: Path = ROOT) -> list[Path]:
    """Every page of the book that can hold a claim."""
    return [root / "index.qmd", *sorted((root / "chapters").glob("*.qmd"))]


def spans_of(path: Path) -> list[Span]:
    """The claim spans of one page, in order."""
    text = path.read_text()
    headings = [(m.start(), m.group(1)) for m in HEADING.finditer(text)]
    found = []
    for m in SPAN.finditer(text):
        above = [label for start, label in headings if start < m.start()]
        found.append(
            Span(
                id=m.group(2),
                page=path.stem,
                section=above[-1] if above else "",
                text=m.group(1),
                line=text.count("\n", 0, m.start()) + 1,
            )
        )
    return found


def spans(root: Path = ROOT) -> list[Span]:
    """Every claim span of the book, page by page."""
    return [span for page in pages(root) for span in spans_of(page)]


def _claim_args(decorator: ast.expr) -> list | None:
    """The constant arguments of ``@pytest.mark.claim(...)``, or None for another
    decorator."""
    if not (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == "claim"
        and ast.unparse(decorator.func.value) in ("pytest.mark", "mark")
    ):
        return None
    return [a.value if isinstance(a, ast.Constant) else None for a in decorator.args]


def claim_tests_of(path: Path, root: Path = ROOT) -> list[ClaimTest]:
    """The claim tests of one test module (functions and methods of test classes)."""
    tree = ast.parse(path.read_text())
    module = path.relative_to(root).as_posix()
    found = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for decorator in node.decorator_list:
                    args = _claim_args(decorator)
                    if args:
                        found.append(
                            ClaimTest(
                                test=f"{module}::{prefix}{node.name}",
                                section=args[0],
                                span=args[1] if len(args) > 1 else None,
                                line=node.lineno,
                            )
                        )

    visit(tree.body, "")
    return found


def claim_tests(root: Path = ROOT) -> list[ClaimTest]:
    """Every claim test of the suite, module by module."""
    return [
        test
        for module in sorted((root / "tests").glob("test_*.py"))
        for test in claim_tests_of(module, root)
    ]


def problems(root: Path = ROOT) -> list[str]:
    """What is wrong between the spans and the tests: a span without a test, a test
    naming no span or one no page has, an id used twice. Empty when all is well."""
    found, tests = spans(root), claim_tests(root)
    out = []
    seen: dict[str, Span] = {}
    for span in found:
        if span.id in seen:
            first = seen[span.id]
            out.append(
                f"{span.id} is used twice: {first.page}.qmd line {first.line} and "
                f"{span.page}.qmd line {span.line}; span ids are unique in the book."
            )
        seen.setdefault(span.id, span)
    tested = {test.span for test in tests}
    for span in found:
        if span.id not in tested:
            out.append(
                f"{span.page}.qmd line {span.line}: {span.id} has no test; mark one "
                f"@pytest.mark.claim({span.section!r}, {span.id!r})."
            )
    for test in tests:
        if test.span is None:
            out.append(
                f"{test.test} (line {test.line}) names no claim span; mark its "
                "sentence [the sentence]{.claim #clm-...} and name it: "
                f"@pytest.mark.claim({test.section!r}, 'clm-...')."
            )
        elif test.span not in seen:
            out.append(
                f"{test.test} (line {test.line}) names {test.span}, which no page "
                "has; write [the sentence]{.claim #" + test.span + "} in the prose."
            )
    return out


def in_book_order(root: Path = ROOT) -> list[Span]:
    """Every claim span in reading order: pages as ``_quarto.yml`` lists them, then by
    line (filters/claims.lua numbers the marks the same way)."""
    order = (root / "_quarto.yml").read_text()
    return sorted(spans(root), key=lambda s: (order.find(f"{s.page}.qmd"), s.line))


def numbers(root: Path = ROOT) -> dict[str, int]:
    """Each claim's number, 1 up in reading order: its mark's and evidence's label."""
    found: dict[str, int] = {}
    for span in in_book_order(root):
        found.setdefault(span.id, len(found) + 1)
    return found


def source_of(test: ClaimTest, root: Path = ROOT) -> str:
    """A claim test's code as written, its decorators included."""
    path, _, name = test.test.partition("::")
    text = (root / path).read_text()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == name.split("::")[-1]
            and node.lineno == test.line
        ):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            lines = text.splitlines()[first - 1 : node.end_lineno]
            indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
            return "\n".join(x[indent:] for x in lines)
    raise ValueError(f"{test.test} is not at line {test.line} of {path} any more.")
