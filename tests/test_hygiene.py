"""The package and the tests pass ruff with the project's configuration (pyproject.toml); every process a
test starts is stopped and reaped inside it."""

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import processes
from jitbook.site.harness import ROOT


def ruff() -> str | None:
    local = Path(sys.executable).with_name("ruff")
    return str(local) if local.exists() else shutil.which("ruff")


@pytest.mark.skipif(
    ruff() is None,
    reason="ruff is not installed (it is in requirements.lock: run make setup)",
)
def test_ruff_is_clean():
    out = subprocess.run(
        [ruff(), "check", "code", "tests"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout[-3000:]


# ---- processes: every one a test starts is stopped and reaped inside it (tests/processes.py) ----------

STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
hold = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", hold], start_new_session=True)  # as Jupyter starts kernels
print(child.pid, flush=True)
time.sleep(600)
"""


def test_a_server_that_ignores_terminate_is_killed_with_what_it_started():
    """Like a JupyterLab that hangs on shutdown, with a kernel in a session of its own."""
    started = time.monotonic()
    with processes.running(
        [sys.executable, "-c", STUBBORN], grace=1, stdout=subprocess.PIPE, text=True
    ) as proc:
        child = int(proc.stdout.readline())
        assert processes._stat(child) is not None
    assert proc.returncode == -signal.SIGKILL, (
        "terminate was ignored, so it had to be killed"
    )
    assert proc.stdout.closed
    deadline = time.monotonic() + 10
    while (
        (stat := processes._stat(child)) is not None
        and stat[0] != "Z"
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert stat is None or stat[0] == "Z", f"the server's child {child} outlived it"
    assert time.monotonic() - started < 30


def test_the_session_check_finds_an_orphan_of_this_run():
    """A grandchild whose parent has exited is adopted by init; the mark in its environment still names
    this run, so the check at the end of the session (conftest.py) would fail on it."""
    orphan = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
        "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\nos._exit(0)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", orphan],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    pid = int(out.stdout)
    try:
        found = processes.leftovers(wait=0)
        assert pid in found and "time.sleep(600)" in found[pid]
    finally:
        processes.kill([pid])


def test_an_unwaited_child_is_a_leftover():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while processes._stat(proc.pid)[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.pid in processes.leftovers(wait=0)
    proc.wait()
    assert proc.pid not in processes.leftovers(wait=0)
