"""Docstring back-links, which name the chapter and section that teach an object, kept
in the form readers see; ``python -m jitbook.site backlinks`` checks and rewrites
them."""

import re
from pathlib import Path

from jitbook.site.harness import ROOT

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
