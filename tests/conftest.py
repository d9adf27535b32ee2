"""Test settings: small problem sizes everywhere, including the kernels that execute chapters."""

import os

os.environ.setdefault("JITBOOK_SMALL", "1")

import nbformat  # noqa: E402
import pytest  # noqa: E402

import jitbook  # noqa: E402,F401  (sets the XLA flag before any test starts JAX)
import processes  # noqa: E402  (tests/processes.py)
from jitbook.site import downloads, harness  # noqa: E402

processes.mark_this_run()


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_suite():
    """At the end of the session, no process the suite started is still running (or unreaped):
    any such process is killed and the session fails, naming it."""
    yield
    left = processes.leftovers()
    processes.kill(left)
    assert not left, "processes the tests started outlived them (now killed):\n" + "\n".join(
        left.values()
    )


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """The executed notebook of a chapter, as a reader downloads it: the copy tests/test_chapters.py kept when
    it ran this session, else executed now (and kept), so no test runs a chapter twice."""
    folder = tmp_path_factory.getbasetemp() / "executed-chapters"
    folder.mkdir(exist_ok=True)

    def get(page) -> nbformat.NotebookNode:
        path = folder / f"{page.stem}.ipynb"
        if not path.exists():
            nbformat.write(downloads.reader_notebook(harness.execute(page)), path)
        return nbformat.read(path, as_version=4)

    return get


# The claim ledger's plugin: records each claim test's outcome and, at the end of the session,
# checks them against data/ledger.json's column for the installed JAX (see jitbook.ledger).
def pytest_configure(config):
    from jitbook import ledger

    if not config.pluginmanager.is_registered(ledger):
        config.pluginmanager.register(ledger, "jitbook-ledger")
