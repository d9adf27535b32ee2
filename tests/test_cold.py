"""Cold is a fresh process: no chapter clears or floods JAX's caches in the reader's process,
and every count a section quotes is the same when the section runs alone.

Three checks. A static scan of the chapters' code and pages for ``clear_caches`` /
``cache_clear`` outside functions that only ``run_cold`` runs (in a new process). A probe
that runs in a chapter's kernel: it records every call that clears JAX's caches and, after
every cell, calls two warm sentinels (one that hits jit's C++ dispatch cache, one with an
effect, which takes the Python path through jit's LRU caches every call): a sentinel that
compiles or misses again means an earlier cell cleared or flooded a cache. And the
section-alone run: each section whose prose quotes values runs in a fresh kernel after the
page's set-up cells and the earlier cells that define the names it reads, and the counts it
quotes must equal those of the top-to-bottom run.

The sweep over every chapter executes each one more than once, far past the 10-minute
suite: it runs with ``JITBOOK_SECTIONS=1`` (``make sections``); the default suite runs the
static scan and the probe's own checks.
"""

import ast
import builtins
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jitbook.site import harness

ROOT = Path(__file__).resolve().parent.parent
CLEARS = {"clear_caches", "cache_clear", "clear_all_caches", "clear_all"}
SWEEP = os.environ.get("JITBOOK_SECTIONS") == "1"
HEADING = re.compile(r"^#{2,3} +(.+?)(?: +\{#([\w-]+)[^}]*\})? *$", re.M)

# --- the static scan -------------------------------------------------------------------


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _cold_functions(trees: list[ast.AST]) -> set[str]:
    """Names of functions passed to ``run_cold`` (its first argument), anywhere."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and _called_name(node) == "run_cold"
                and node.args
            ):
                first = node.args[0]
                name = (
                    first.attr
                    if isinstance(first, ast.Attribute)
                    else getattr(first, "id", None)
                )
                names.add(name)
    return names - {None}


def _called_directly(trees: list[ast.AST]) -> set[str]:
    return {
        _called_name(n) for t in trees for n in ast.walk(t) if isinstance(n, ast.Call)
    }


def _page_trees(page: Path) -> list[ast.AST]:
    trees = []
    for cell in harness.to_notebook(page).cells:
        if cell.cell_type == "code":
            try:
                trees.append(ast.parse(cell.source))
            except SyntaxError:
                pass
    return trees


def clearing_calls(root: Path = ROOT) -> list[str]:
    """Every call that clears a JAX cache in chapter code a reader's process runs: in a page's
    cells, or in a chapter module's function that is not run only by ``run_cold``."""
    modules = {
        p: ast.parse(p.read_text())
        for p in sorted((root / "code/jitbook/chapters").rglob("*.py"))
    }
    pages = {p: _page_trees(p) for p in sorted((root / "chapters").glob("*.qmd"))}
    everything = [*modules.values(), *(t for ts in pages.values() for t in ts)]
    cold = _cold_functions(everything)
    # a function run cold must not also be called directly (a call of its name elsewhere)
    direct = _called_directly(everything)
    found = []
    for page, trees in pages.items():
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and _called_name(node) in CLEARS:
                    found.append(
                        f"{page.relative_to(root)}: a cell calls {ast.unparse(node)}"
                    )
    for path, tree in modules.items():
        for top in tree.body:
            for node in ast.walk(top):
                if not (isinstance(node, ast.Call) and _called_name(node) in CLEARS):
                    continue
                name = getattr(top, "name", None)
                if (
                    isinstance(top, ast.FunctionDef)
                    and name in cold
                    and name not in direct
                ):
                    continue
                where = f"{name}()" if name else "module level"
                found.append(
                    f"{path.relative_to(root)}:{node.lineno}: {where} calls {ast.unparse(node)}"
                )
    return found


def test_no_chapter_code_clears_jax_caches_outside_a_fresh_process():
    assert clearing_calls() == [], (
        "chapter code clears JAX's caches in the reader's process; run the measurement in a "
        "fresh process with jitbook.fresh.run_cold instead"
    )


def test_the_scan_finds_a_clear_in_a_cell_and_in_a_function_called_directly(tmp_path):
    (tmp_path / "code/jitbook/chapters").mkdir(parents=True)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "code/jitbook/chapters/demo.py").write_text(
        "import jax\n"
        "def cold_only():\n    jax.clear_caches()\n"
        "def also_direct():\n    jax.clear_caches()\n"
        "def plain():\n    f.cache_clear()\n"
        "def use():\n    run_cold(cold_only)\n    run_cold(also_direct)\n    also_direct()\n"
    )
    (tmp_path / "chapters/demo.qmd").write_text(
        "---\ntitle: Demo\n---\n\n```{python}\nimport jax\njax.clear_caches()\n```\n"
    )
    found = clearing_calls(tmp_path)
    assert len(found) == 3, found
    assert any("demo.qmd" in f for f in found)
    assert any("also_direct()" in f for f in found) and any(
        "plain()" in f for f in found
    )
    assert not any("cold_only()" in f for f in found)


# --- the probe in a chapter's kernel ---------------------------------------------------

PROBE = """
import jitbook  # first, as every page: the guard's flag before JAX starts
import jax as _jax, traceback as _tb
from jax._src import util as _util
from jitbook.cache import count_compiles as _count, count_dispatch_misses as _misses

_cold_log = []


def _recorded(module, name):
    original = getattr(module, name)

    def clearing(*args, **kwargs):
        where = "".join(_tb.format_stack(limit=3)[:-1]).strip()
        _cold_log.append(f"{module.__name__}.{name}() was called:\\n{where}")
        return original(*args, **kwargs)

    setattr(module, name, clearing)


_recorded(_jax, "clear_caches")
_recorded(_util, "clear_all_caches")


def _sentinel(v):
    return v * 3.0 + 1.0


def _sentinel_noted(v):
    _jax.debug.callback(lambda _: None, v)
    return v - 1.0


def _warm():
    # Warm sentinels for the configuration in force: an option JAX defines or a page sets
    # changes every key (importing jax.extend adds options), which clears nothing.
    global _plain, _noted, _context
    _plain, _noted = _jax.jit(_sentinel), _jax.jit(_sentinel_noted)
    _plain(_sx), _noted(_sx), _jax.effects_barrier()
    _context = _config.trace_context()


from jax._src import config as _config

_context = None  # warmed after the page's first cell: it may set options a backend reads once


def _probe(result):
    global _sx
    if "events.register" in result.info.raw_cell:  # this cell, the probe itself
        return
    if _context is None:
        _sx = _jax.numpy.arange(7.0)
    if _config.trace_context() != _context:
        return _warm()
    with _count() as log, _misses() as dispatch:
        _plain(_sx), _noted(_sx), _jax.effects_barrier()
    if log.count or log.lowerings or dispatch.count_for("_sentinel"):
        cell = result.info.raw_cell.strip().splitlines()
        _cold_log.append(
            f"after the cell starting {cell[0] if cell else ''!r}: the warm sentinels lowered "
            f"{len(log.lowerings)} and compiled {log.count} times and missed the dispatch cache {dispatch.count_for('_sentinel')} "
            "times (a cache was cleared or flooded)"
        )


get_ipython().events.register("post_run_cell", _probe)
"""
REPORT = "print('__cold_log__', __import__('json').dumps(_cold_log))"


def run_cells(cells: list, timeout: int = 3600) -> nbformat.NotebookNode:
    """Run code cells in a fresh kernel, the probe first and its report last; errors are kept
    in the outputs (``cell_error``), not raised."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(PROBE),
            *cells,
            nbformat.v4.new_code_cell(REPORT),
        ]
    )
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    with harness.kernel_manager() as km:
        NotebookClient(
            nb,
            km=km,
            timeout=timeout,
            allow_errors=True,
            extra_arguments=harness.QUIET_KERNEL,
            resources={"metadata": {"path": str(ROOT / "chapters")}},
        ).execute(cleanup_kc=True)
    return nb


def _printed(cell, mark: str):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            for line in out["text"].splitlines():
                if line.startswith(mark + " "):
                    return json.loads(line[len(mark) + 1 :])
    return None


def cold_log(nb) -> list[str]:
    """What the probe recorded: every clearing call, every cell after which a sentinel missed."""
    log = _printed(nb.cells[-1], "__cold_log__")
    if log is None:
        raise AssertionError(
            f"the run stopped before the probe's report: {cell_error(nb)}"
        )
    return log


def cell_error(nb) -> str | None:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out['ename']}: {out['evalue']} in\n{cell.source[:300]}"
    return None


def _cells(*sources: str) -> list:
    return [nbformat.v4.new_code_cell(s) for s in sources]


@pytest.mark.chapter
def test_the_probe_names_a_cell_that_clears_the_caches_and_passes_a_clean_one():
    clean = run_cells(_cells("import jax\nx = jax.jit(lambda v: v + 1)(1.0)"))
    assert cold_log(clean) == [] and cell_error(clean) is None
    dirty = run_cells(
        _cells("import jax\njax.jit(lambda v: v + 1)(1.0)", "jax.clear_caches()")
    )
    log = cold_log(dirty)
    assert any("clear_caches() was called" in entry for entry in log), log
    assert any(
        "after the cell starting 'jax.clear_caches()'" in entry for entry in log
    ), log


@pytest.mark.chapter
@pytest.mark.skipif(
    not SWEEP, reason="2,100 compiles take minutes: JITBOOK_SECTIONS=1 (make sections)"
)
def test_the_probe_sees_the_lru_caches_flooded_by_2100_programs():
    """jit's Python-side caches hold 2,048 entries: a warm effectful call (never in the dispatch
    cache) compiles again once 2,100 other programs, kept alive, went through them."""
    flood = (
        "import jax\nkept = [lambda v, i=i: v + i for i in range(2100)]\n"
        "for f in kept:\n    jax.jit(f)(1.0)"
    )
    log = cold_log(run_cells(_cells(flood)))
    assert any("compiled" in entry for entry in log), log


# --- sections alone --------------------------------------------------------------------


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell binds, names it reads) by its syntax; a cell that does not parse, neither."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else read).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    arguments = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    return bound, read - arguments - set(dir(builtins))


def sections(page: Path) -> tuple[list, list[tuple[str, list]]]:
    """A page as (set-up cells, [(section, its cells)]): the code cells before the first
    ``##`` heading, then each ``##`` or ``###`` section's code cells, inline helpers included."""
    nb = harness._with_inline_cells(harness.to_notebook(page))
    setup, found, current, exprs, home = [], [], None, [], None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            exprs = [e.strip() for e in harness.INLINE.findall(cell.source)]
            first = harness.INLINE.search(cell.source)
            home = (
                current  # the helper goes with the section its first expression is in
            )
            for heading in HEADING.finditer(cell.source):
                current = (heading.group(2) or heading.group(1), [])
                found.append(current)
                if first and heading.start() < first.start():
                    home = current
            continue
        if cell.metadata.get("jitbook", {}).get("inline_helper"):
            cell.metadata["jitbook"]["expressions"] = exprs
            (setup if home is None else home[1]).append(cell)
            continue
        if "skip-execution" in cell.metadata.get("tags", []):
            continue
        (setup if current is None else current[1]).append(cell)
    return setup, found


def alone(setup: list, earlier: list, own: list) -> list:
    """The cells a section needs to run alone: the set-up, the earlier cells that bind a name it
    reads (and theirs, in turn), in page order, then its own."""
    needed = set()
    for cell in own:
        needed |= _names(cell.source)[1]
    chosen = []
    for cell in reversed(earlier):
        bound, read = _names(cell.source)
        if bound & needed:
            chosen.append(cell)
            needed = (needed - bound) | read
    return [*setup, *reversed(chosen), *own]


def inline_values(cells) -> list[tuple[str, str]]:
    """(expression, value) of every inline ``{python}`` expression the cells' helpers printed."""
    out = []
    for cell in cells:
        if not cell.metadata.get("jitbook", {}).get("inline_helper"):
            continue
        exprs = cell.metadata["jitbook"]["expressions"]
        values = _printed(cell, harness._INLINE_MARK) or []
        out += list(zip(exprs, values, strict=True))
    return out


# A quoted count: a whole number, maybe with its noun ("16 programs"); timings, rounds and
# verdicts are measurements of the moment and are not compared (a race's compile count is).
COUNT = re.compile(r"^-?\d[\d,]*( [a-z]+)?$")
MOMENT = re.compile(
    r"time|_s\b|_us|_ms|ms\b|second|speed|\brounds?\b|\.rounds|median|min\(|duration|verdict|faster|slower|ratio",
    re.I,
)


def is_count(expression: str, value: str) -> bool:
    return bool(COUNT.match(value)) and not MOMENT.search(expression)


@pytest.mark.chapter
@pytest.mark.skipif(
    not SWEEP,
    reason="the every-chapter sweep runs with JITBOOK_SECTIONS=1 (make sections)",
)
@pytest.mark.parametrize("page", harness.chapter_files(), ids=lambda p: p.stem)
def test_every_section_quotes_the_same_counts_alone_and_no_cell_clears_or_floods_a_cache(
    page,
):
    setup, found = sections(page)
    whole_cells = [*setup, *(c for _, cells in found for c in cells)]
    whole = run_cells([nbformat.from_dict(c) for c in whole_cells])
    assert cell_error(whole) is None, cell_error(whole)
    assert cold_log(whole) == [], cold_log(whole)
    ran = whole.cells[1:-1]
    by_id = {id(c): r for c, r in zip(whole_cells, ran, strict=True)}
    problems, earlier = [], []
    for name, cells in found:
        quoted = inline_values([by_id[id(c)] for c in cells])
        if any(is_count(e, v) for e, v in quoted):
            solo = run_cells(
                [nbformat.from_dict(c) for c in alone(setup, earlier, cells)]
            )
            error = cell_error(solo)
            if error:
                problems.append(f"{name}: does not run alone: {error}")
            else:
                problems += [f"{name}: the probe: {entry}" for entry in cold_log(solo)]
                got = inline_values(solo.cells[-1 - len(cells) : -1])
                problems += [
                    f"{name}: `{e}` is {v} top to bottom, {w} alone"
                    for (e, v), (_, w) in zip(quoted, got, strict=True)
                    if is_count(e, v) and v != w
                ]
        earlier += cells
    assert problems == [], "\n".join(problems)
