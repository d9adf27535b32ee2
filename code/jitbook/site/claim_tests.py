"""The claim tests' code as pages of the site: each test module that asserts a claim,
highlighted, an anchor per line, so a claim's evidence links straight to its test."""

from __future__ import annotations

import html
import re
from pathlib import Path

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from jitbook.ledger import spans
from jitbook.site.harness import ROOT

FOLDER = "tests"  # in the site: tests/test_x.html
# Names, punctuation and spaces, which both styles print in the text's own colour:
# unwrapped, the longest test module's page weighs half as much (each under 300 KB).
PLAIN_TOKEN = re.compile(r'<span class="(?:n|p|w)">([^<]*)</span>')

STYLE = """
body { margin: 0; font: 14px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
header { padding: .6rem 1rem; font-family: system-ui, sans-serif; }
pre { margin: 0; padding: 0 1rem 40vh; white-space: pre-wrap; overflow-wrap: anywhere; }
pre > span[id] { display: block; }
pre > span[id]:target { background: #fff3bf; }
@media (prefers-color-scheme: dark) {
  body { background: #1e1e1e; color: #ddd; } a { color: #8ab4f8; }
  pre > span[id]:target { background: #4a4215; }
}
"""


def _colours() -> str:
    """Pygments' colours: a light style, and a dark one for a reader's dark system."""
    light = HtmlFormatter(style="friendly").get_style_defs(".highlight")
    dark = HtmlFormatter(style="monokai").get_style_defs(".highlight")
    plain = ".highlight { background: none; }"
    dark = f"@media (prefers-color-scheme: dark) {{\n{dark}\n{plain} }}"
    return f"{light}\n{plain}\n{dark}"


def page_of(test: spans.ClaimTest) -> str:
    """Where a claim test's code is, from the Claims appendix (chapters/claims.html):
    its module's page, at the test's first line (its first decorator)."""
    module = Path(test.test.split("::")[0]).stem
    return f"../{FOLDER}/{module}.html#L-{test.line - _decorators(test)}"


def _decorators(test: spans.ClaimTest) -> int:
    """How many lines above its ``def`` a test's decorators start."""
    first = spans.source_of(test).splitlines()
    return next(
        i
        for i, line in enumerate(first)
        if line.lstrip().startswith(("def ", "async def "))
    )


def module_page(path: Path) -> str:
    """One test module as a light HTML page, each line an anchor ``L<n>``."""
    formatter = HtmlFormatter(linespans="L")
    code = PLAIN_TOKEN.sub(r"\1", highlight(path.read_text(), PythonLexer(), formatter))
    name = html.escape(f"{path.parent.name}/{path.name}")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{name}</title><style>{STYLE}{_colours()}</style></head><body>"
        f"<header><a href='../chapters/claims.html'>↩ Claims</a> · <code>{name}</code>"
        " (a claim's test starts at the highlighted line)</header>"
        f"{code}</body></html>"
    )


def write(site: Path, root: Path = ROOT) -> list[Path]:
    """A page per test module holding a claim test, under ``site/tests/``."""
    modules = sorted({t.test.split("::")[0] for t in spans.claim_tests(root)})
    folder = Path(site) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for module in modules:
        out = folder / f"{Path(module).stem}.html"
        out.write_text(module_page(root / module), encoding="utf-8")
        written.append(out)
    return written
