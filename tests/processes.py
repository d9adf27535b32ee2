"""Processes the tests start are stopped for sure and reaped inside the test that started them.

A test starts a server or a child Python with ``running(cmd, ...)``: it runs in a session of its own,
and leaving the ``with`` block stops it and everything it started (its process group and every
descendant), terminating first and killing whatever is left after ``grace`` seconds, then reaping it.
A server that hangs on shutdown (JupyterLab sometimes does) can then never outlive its test, and no
``Popen`` is left to warn from its destructor in an unrelated test.

``leftovers()`` lists this process's descendants (zombies included: a ``Popen`` nobody waited for) and
the processes that carry this test run's mark in their environment: ``conftest.py`` asks it at the
end of the session, so a child that outlives the suite fails it, even one orphaned and adopted by init.
"""

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# Every process the suite starts inherits this variable (unless a test builds an environment from
# nothing): its value is the pid of the pytest process that set it.
MARK = "JITBOOK_TEST_RUN"
PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent pid and start time of a process from /proc, or None once it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def _pids() -> list[int]:
    return (
        [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]
        if PROC.exists()
        else []
    )


def descendants(pid: int) -> list[tuple[int, int]]:
    """Every living descendant of ``pid`` as (pid, start time), so a reused pid is never signalled."""
    children: dict[int, list[tuple[int, int]]] = {}
    for other in _pids():
        stat = _stat(other)
        if stat is not None:
            children.setdefault(stat[1], []).append((other, stat[2]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _signal(proc: subprocess.Popen, tree: list[tuple[int, int]], sig: int) -> None:
    """Send ``sig`` to the process group of ``proc`` and to each process of ``tree`` still alive."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(
            proc.pid, sig
        )  # the group outlives its leader's pid only while a member lives
    for pid, started in tree:
        stat = _stat(pid)
        if stat is not None and stat[2] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def stop(proc: subprocess.Popen, grace: float = 10.0) -> int | None:
    """Terminate ``proc`` and all it started, kill what is left after ``grace`` s; reap it.

    Returns its exit status (negative: the signal that ended it).
    """
    tree = descendants(proc.pid)
    _signal(proc, tree, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _signal(proc, tree + descendants(proc.pid), signal.SIGKILL)
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return proc.returncode


@contextlib.contextmanager
def running(
    cmd: list[str], grace: float = 10.0, **kwargs
) -> Iterator[subprocess.Popen]:
    """``Popen(cmd, **kwargs)`` in a session of its own, stopped and reaped when the block ends."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    try:
        yield proc
    finally:
        stop(proc, grace)


def lines_until(stream, marker: str, timeout: float) -> list[str]:
    """Lines of ``stream`` up to the first holding ``marker``, its end, or ``timeout`` s,
    whichever comes first: a server that prints nothing cannot hang the test."""
    got: queue.Queue = queue.Queue()

    def read() -> None:
        with contextlib.suppress(
            ValueError, OSError
        ):  # stop() may close the stream first
            for line in iter(stream.readline, ""):
                got.put(line)
        got.put("")

    threading.Thread(target=read, daemon=True).start()
    lines, deadline = [], time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = got.get(timeout=left)
        except queue.Empty:
            break
        lines.append(line)
        if not line or marker in line:
            break
    return lines


def mark_this_run() -> None:
    """Mark the environment every child of this process inherits with this process's pid."""
    os.environ[MARK] = str(os.getpid())


def _environ(pid: int) -> bytes:
    try:
        return (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return b""


def leftovers(wait: float = 15.0) -> dict[int, str]:
    """The processes this run started that are still alive (pid: what it is), waiting up to ``wait`` s
    for them to end.

    A kernel nbclient shut down a moment ago may take a few seconds to exit; a zombie child means a
    ``Popen`` nobody waited for.
    """
    me, mark = os.getpid(), f"{MARK}={os.getpid()}".encode()
    deadline = time.monotonic() + wait
    while True:
        # Descendants too: a kernel started with an environment of its own lacks the mark.
        found = [pid for pid, _ in descendants(me)]
        for pid in _pids():
            stat = _stat(pid)
            if pid not in found and pid != me and stat is not None:
                if mark in _environ(pid).split(b"\0"):
                    found.append(pid)
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {pid: _describe(pid) for pid in found}


def kill(pids) -> None:
    """Kill each living process of ``pids`` and reap those that are this process's children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _describe(pid: int) -> str:
    try:
        cmd = (
            (PROC / str(pid) / "cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode()
            .strip()
        )
    except OSError:
        cmd = "?"
    stat = _stat(pid)
    state = f"state {stat[0]}, parent {stat[1]}" if stat else "gone"
    return f"pid {pid} ({state}): {cmd[:200] or '(zombie: nobody waited for it)'}"
