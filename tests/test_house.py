"""The package's folder tree says which code is which (DESIGN.md): the reader's tools at the
top, one module per chapter under ``chapters/`` and its checkers under ``exercises/``, and
the book's machinery in subpackages, each a command with a README of its own."""

import ast
from pathlib import Path

import pytest

from jitbook.site.harness import ROOT, chapter_pages

PACKAGE = ROOT / "code" / "jitbook"
TOOLS = {
    "cache",
    "timing",
    "programs",
    "errors",
    "guard",
    "display",
    "size",
    "fresh",
    "paths",
    "arguments",
    "heartbeat",
    "workers",  # where Dask's tasks run (a class, the ledger's releases): one home for both
}
TOOL_PACKAGES = {
    "explore"
}  # a reader's tool in several modules: `from jitbook import explore`
MACHINERY = {"site", "classroom", "ledger", "bench"}
ROOMS = {"chapters", "exercises", "evidence"} | TOOL_PACKAGES | MACHINERY
LONGEST_MODULE = 700


def test_the_top_of_the_package_holds_only_the_readers_tools():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == TOOLS, (
        f"top-level modules {sorted(modules - TOOLS)} are not tools: a chapter's examples go "
        f"in jitbook/chapters/, the book's machinery in one of {sorted(MACHINERY)}"
    )
    rooms = {
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert rooms == ROOMS


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {
                f"{node.module}.{alias.name}" for alias in node.names
            }
    return found


def test_the_readers_tools_are_a_base_layer_that_imports_no_chapter_code():
    files = [PACKAGE / f"{tool}.py" for tool in TOOLS]
    files += [p for package in TOOL_PACKAGES for p in (PACKAGE / package).glob("*.py")]
    leaks = {
        str(p.relative_to(PACKAGE)): sorted(
            m
            for m in _imports(p)
            if m.startswith(("jitbook.chapters", "jitbook.exercises"))
        )
        for p in files
    }
    leaks = {name: modules for name, modules in leaks.items() if modules}
    assert not leaks, (
        f"a reader's tool imports chapter code (move what it needs into the tool, or the tool's use into the chapter): {leaks}"
    )


@pytest.mark.parametrize("room", sorted(MACHINERY))
def test_each_room_of_machinery_is_a_command_with_a_readme(room):
    assert (PACKAGE / room / "__main__.py").exists(), (
        f"python -m jitbook.{room} must run"
    )
    readme = PACKAGE / room / "README.md"
    assert readme.exists() and len(readme.read_text().split()) > 20, (
        f"{room}/README.md says what the room holds"
    )


def _module_stem(page: Path) -> str:
    return page.stem.replace("-", "_")


def test_chapter_modules_and_checkers_are_named_by_their_page():
    stems = {_module_stem(p) for p in chapter_pages()}
    chapters = {
        p.stem
        for p in (PACKAGE / "chapters").iterdir()
        if p.suffix == ".py" or p.is_dir()
    }
    chapters -= {"__init__", "__pycache__"}
    # a chapter may split its examples into <stem>_<part>.py modules
    orphans = {
        c for c in chapters if not any(c == s or c.startswith(s + "_") for s in stems)
    }
    assert not orphans, (
        f"modules in jitbook/chapters/ named for no page: {sorted(orphans)}"
    )
    checkers = {
        p.stem
        for p in (PACKAGE / "exercises").glob("*.py")
        if not p.stem.startswith("_")
    }
    checkers -= {
        "__init__",
        "judge",
        "ask",
    }  # the checkers' vocabulary and their requests
    assert checkers <= stems, (
        f"checker modules named for no page: {sorted(checkers - stems)}"
    )


def test_no_module_is_longer_than_a_room():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > LONGEST_MODULE
    }
    assert not long, (
        f"split these along their seams (at most {LONGEST_MODULE} lines): {long}"
    )


# ---- what a package's __init__ exports


def _reexports(package: Path) -> set[str]:
    """The names a package's ``__init__`` takes from other jitbook modules (not the
    submodules it imports as modules): what ``package.name`` offers readers."""
    tree = ast.parse((package / "__init__.py").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "jitbook"
        ):
            names |= {
                alias.asname or alias.name
                for alias in node.names
                if not (package / alias.name).exists()
                and not (package / f"{alias.name}.py").exists()
            }
    return names


@pytest.mark.parametrize(
    "package",
    ["jitbook", "classroom", "ledger", "explore"],
)
def test_a_package_exports_only_what_the_pages_use(package):
    """Machinery stays in its module: each name re-exported is one a page calls."""
    import re

    folder = PACKAGE if package == "jitbook" else PACKAGE / package
    pages = "\n".join(p.read_text() for p in [ROOT / "index.qmd", *chapter_pages()])
    used_internally = {"apply_cpu_guard"}  # run by jitbook/__init__.py, not exported
    unused = sorted(
        name
        for name in _reexports(folder) - used_internally
        if not re.search(
            rf"\b{package}\.{name}\b|from jitbook(\.{package})? import [^\n]*\b{name}\b",
            pages,
        )
    )
    assert not unused, (
        f"jitbook.{package} re-exports {unused}, which no page uses: import them from "
        "their module where they are needed (tests, other machinery)."
    )
