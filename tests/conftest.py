"""Test settings: small problem sizes everywhere, including the kernels that execute chapters."""

import os

os.environ.setdefault("JITBOOK_SMALL", "1")

from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import jupyter_core.utils  # noqa: E402
import nbformat  # noqa: E402
import pytest  # noqa: E402

import jitbook  # noqa: E402,F401  (sets the XLA flag before any test starts JAX)
import processes  # noqa: E402  (tests/processes.py)
from jitbook.site import downloads, harness  # noqa: E402

processes.mark_this_run()
RUNS = pytest.StashKey["ChapterRuns"]()


class ChapterRuns:
    """Every chapter the selected tests read, executed in the background while other tests run: one
    kernel at a time, so the suite keeps one core for itself. Each executed notebook is kept, as a reader
    downloads it, so no test runs a chapter twice."""

    def __init__(self, folder: Path, pages: list[Path]):
        self.folder = folder
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chapters")
        self.runs = {
            page.resolve(): self.pool.submit(self._run, page) for page in pages
        }

    def _run(self, page: Path) -> Path:
        path = self.folder / f"{page.stem}.ipynb"
        try:
            nbformat.write(downloads.reader_notebook(harness.execute(page)), path)
        finally:  # the event loop nbclient made for this thread: a loop left open warns at exit
            jupyter_core.utils.ensure_event_loop().close()
        return path

    def get(self, page: Path) -> nbformat.NotebookNode:
        run = self.runs.get(Path(page).resolve())
        if run is None:  # a page no collected test named: run it now, once
            run = self.runs[Path(page).resolve()] = self.pool.submit(
                self._run, Path(page)
            )
        return nbformat.read(run.result(), as_version=4)

    def close(self) -> None:
        """Drop the chapters nobody asked for yet (a run stopped early) and wait for the one running."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def _pages_read(item: pytest.Item) -> list[Path] | None:
    """The chapters a test reads through ``executed``: its page parameter, [] when it names
    none (it asks for the chapters it wants when it runs), None if it reads no executed chapter."""
    if "executed" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    page = params.get("page", params.get("page_path"))
    return [page] if isinstance(page, Path) else []


def pytest_itemcollected(item):
    """A test that reads an executed chapter is a chapter test too: `-m "not chapter"` (make
    test-fast) runs the suite without executing any chapter."""
    if _pages_read(item) is not None:
        item.add_marker(pytest.mark.chapter)


def _by_size(pages) -> list[Path]:
    """Chapters, longest page first: a proxy for the longest run, so the last to finish is short."""
    unique = {Path(page).resolve(): Path(page) for page in pages}
    return [unique[key] for key in sorted(unique, key=lambda key: -key.stat().st_size)]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Tests that read executed chapters go last, in the order the background runs those chapters,
    so the rest of the suite runs while the kernels work (last: after -k, -m and the ledger's
    release runs have deselected theirs)."""
    reads = {item: _pages_read(item) for item in items}
    rank = {
        page.resolve(): n
        for n, page in enumerate(_by_size(p for ps in reads.values() if ps for p in ps))
    }
    last = len(rank)  # tests that name no page: after all the others
    items.sort(
        key=lambda item: (
            -1
            if reads[item] is None
            else max((rank[p.resolve()] for p in reads[item]), default=last)
        )
    )


def pytest_collection_finish(session):
    """Start the chapters' kernels as soon as the tests are known."""
    pages = [page for item in session.items for page in _pages_read(item) or []]
    if pages and not session.config.option.collectonly:
        _start(session.config, _by_size(pages))


def _start(config, pages: list[Path]) -> "ChapterRuns":
    folder = config._tmp_path_factory.getbasetemp() / "executed-chapters"
    folder.mkdir(exist_ok=True)
    config.stash[RUNS] = ChapterRuns(folder, pages)
    return config.stash[RUNS]


@pytest.fixture(scope="session")
def executed(request):
    """The executed notebook of a chapter, as a reader downloads it (``executed(page)``); see ChapterRuns."""
    runs = request.config.stash.get(RUNS, None) or _start(request.config, [])
    return runs.get


def _stop_resource_tracker() -> None:
    """multiprocessing's resource tracker, which a Dask local cluster starts, lives as long as this
    process; stop it as the interpreter's exit would, so that only real leftovers remain."""
    import contextlib
    from multiprocessing import resource_tracker

    with contextlib.suppress(Exception):
        resource_tracker._resource_tracker._stop()


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_suite(request):
    """At the end of the session, no process the suite started is still running (or unreaped):
    any such process is killed and the session fails, naming it."""
    yield
    runs = request.config.stash.get(RUNS, None)
    if runs is not None:
        runs.close()
    _stop_resource_tracker()
    left = processes.leftovers()
    processes.kill(left)
    assert not left, (
        "processes the tests started outlived them (now killed):\n"
        + "\n".join(left.values())
    )


# The claim ledger's plugin: records each claim test's outcome and, at the end of the session,
# checks them against data/ledger.json's column for the installed JAX (see jitbook.ledger).
def pytest_configure(config):
    from jitbook.ledger import plugin

    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "jitbook-ledger")
