"""One submission's kernel session: run the steps, restart on a hang or a crash."""

import contextlib
import copy
import dataclasses
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

from jitbook.classroom.plan import Step
from jitbook.classroom.sandbox import MAX_RESTARTS, Kernel
from jitbook.heartbeat import Heartbeat


def run_steps(
    steps: list[Step],
    kernel: Kernel,
    *,
    cell_timeout: float,
    collect_timeout: dict[str, float],
    time_limit: float,
    progress: Callable[[str], None] | None = None,
) -> str:
    """Run the steps, each once, restarting the kernel when one hangs or kills it: the
    new kernel replays the cells that finished before, then goes on after the one that
    failed. One wall-clock budget covers it all, replays included; a watcher outside
    the kernel holds the student's processes to one memory and one disk budget and
    reports a long cell through ``progress``. Returns why the run stopped early ("" when
    every step ran).
    """
    done: set[int] = set()
    deadline = time.monotonic() + time_limit
    position, restarts = 0, 0
    with _scratch() as root:
        workdir, private = Path(root) / "work", Path(root) / "kernel"
        for folder in (workdir, private, Path(root) / "sockets", private / "ipython"):
            folder.mkdir()
        (private / "ipython" / "profile_default" / "startup").mkdir(parents=True)
        watch = Watch(kernel, workdir, steps, progress)
        run = _Run(steps, done, watch, cell_timeout, collect_timeout, deadline)
        try:
            while position < len(steps):
                if restarts > MAX_RESTARTS:
                    return f"the kernel was restarted {MAX_RESTARTS} times"
                nb = nbformat.v4.new_notebook(cells=[s.cell for s in steps])
                client, env = kernel.client(nb, workdir, private, cell_timeout)
                client.collect_cells = {
                    j for j, s in enumerate(steps) if s.kind == "collect"
                }
                try:
                    position = _session(client, env, workdir, run, position)
                except _OutOfTime:
                    return f"the notebook ran out of its {time_limit:g} s time limit"
                except _KernelFailed as failed:
                    return str(failed)
                restarts += 1
        finally:
            watch.stop()
    return ""


@contextlib.contextmanager
def _scratch():
    """A folder for one submission's kernel, removed afterwards however deep the
    student's files go (``rm -rf`` where Python's recursion gives up)."""
    root = tempfile.mkdtemp(prefix="jitbook-grade-")
    try:
        yield root
    finally:
        try:
            shutil.rmtree(root)
        except (OSError, RecursionError):
            subprocess.run(["rm", "-rf", "--", root], check=False)


class _OutOfTime(Exception):
    """The whole-notebook time limit ran out."""


class _KernelFailed(Exception):
    """The kernel did not start, or the replay after a restart failed."""


@dataclasses.dataclass
class _Run:
    """What every kernel of one submission shares: the steps, those done, the watcher,
    the limits and the one deadline.
    """

    steps: list[Step]
    done: set[int]
    watch: "Watch"
    cell_timeout: float
    collect_timeout: dict[str, float]
    deadline: float


def _session(client, env, workdir: Path, run: _Run, position: int) -> int:
    """One kernel's life: replay what finished, then run on; return where the next
    kernel starts.
    """
    steps, done, watch = run.steps, run.done, run.watch
    cell_timeout, deadline = run.cell_timeout, run.deadline
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    def execute(cell, j: int, limit: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _OutOfTime()
        client.timeout = max(1, math.ceil(min(limit, left)))  # nbclient wants an int
        watch.running(j, client)
        try:
            client.execute_cell(cell, j, store_history=True)
        except CellTimeoutError:
            if client.timeout < limit:
                raise _OutOfTime() from None
            raise
        finally:
            watch.running(None, client)

    try:
        # The kernel's own output goes to a log, not the grader's terminal.
        log = open(workdir.parent / "kernel" / "kernel.log", "ab")  # noqa: SIM115
        with (
            log,
            client.setup_kernel(
                env=env,
                cwd=str(workdir),
                stdout=subprocess.DEVNULL,
                stderr=log,
                cleanup_kc=True,  # the kernel is ours to kill, hung or not
            ),
        ):
            for j in sorted(done):  # a fresh kernel: what finished before runs again
                try:
                    execute(copy.deepcopy(steps[j].cell), j, cell_timeout)
                except (CellTimeoutError, DeadKernelError) as err:
                    raise _KernelFailed(
                        "replaying the cells before it after a restart failed "
                        f"({watch.over or type(err).__name__})"
                    ) from None
            for j in range(position, len(steps)):
                step = steps[j]
                limit = run.collect_timeout.get(step.exercise, cell_timeout)
                try:
                    execute(step.cell, j, limit)
                except CellTimeoutError:
                    step.failure = watch.over or f"ran longer than {limit:g} s"
                    return j + 1
                except DeadKernelError:
                    step.failure = watch.over or "killed the kernel"
                    return j + 1
                if watch.over:
                    step.failure = watch.over
                    return j + 1
                done.add(j)
            return len(steps)
    except (CellTimeoutError, DeadKernelError, _OutOfTime, _KernelFailed):
        raise
    except Exception as err:  # the kernel never started (a broken sandbox, say)
        raise _KernelFailed(
            f"the grading kernel did not start ({type(err).__name__}: "
            f"{(str(err).strip().splitlines() or [''])[0]})"
        ) from None


class Watch:
    """Outside the kernel, every ``every`` seconds: the memory of all the student's
    processes together and the size of the work folder, each against its budget (the
    whole tree is killed past one), and a progress line for a cell that runs long.
    """

    every = 0.5
    speak_after = 20.0  # seconds of silence before a cell's first progress line

    def __init__(self, kernel: Kernel, workdir: Path, steps, progress) -> None:
        self.kernel, self.workdir, self.steps = kernel, workdir, steps
        self.progress, self.over = progress, ""
        self.cell: int | None = None
        self.client, self.started = None, 0.0
        self._heartbeat = Heartbeat(self.speak_after, self._speak).__enter__()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def running(self, cell: int | None, client) -> None:
        self.cell, self.client = cell, client
        self.started = time.monotonic()
        self._heartbeat.heard()
        if cell is not None:
            self.over = ""

    def stop(self) -> None:
        self._heartbeat.__exit__()
        self._done.set()
        self._thread.join(timeout=5)

    def _speak(self, silence: float) -> None:
        """The progress line of a cell that has run ``speak_after`` s or more."""
        cell = self.cell
        if cell is None or not self.progress:
            return
        step = self.steps[cell]
        what = {
            "student": "a cell of the notebook",
            "collect": f"the collection of {step.exercise}'s evidence",
        }[step.kind]
        where = f" (cell {step.index + 1})" if step.index is not None else ""
        self.progress(
            f"step {cell + 1} of {len(self.steps)}, {what}{where}, "
            f"running for {time.monotonic() - self.started:.0f} s"
        )

    def _loop(self) -> None:
        while not self._done.wait(self.every):
            cell, client = self.cell, self.client
            if cell is None or client is None:
                continue
            pids = tree(_kernel_pid(client))
            memory = sum(map(_rss, pids))
            disk = folder_size(self.workdir)
            if memory > self.kernel.memory_gib * 2**30:
                self._kill(
                    pids,
                    f"used more than {self.kernel.memory_gib:g} GiB of "
                    "memory (all its processes together) and was stopped",
                )
            elif disk > self.kernel.disk_gib * 2**30:
                self._kill(
                    pids,
                    f"wrote more than {self.kernel.disk_gib:g} GiB to "
                    "the work folder and was stopped",
                )

    def _kill(self, pids: list[int], why: str) -> None:
        self.over = why
        for pid in reversed(pids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _kernel_pid(client) -> int | None:
    km = getattr(client, "km", None)
    process = getattr(getattr(km, "provisioner", None), "process", None)
    return getattr(process, "pid", None)


def tree(root: int | None) -> list[int]:
    """``root`` and every process below it, parents first (from /proc)."""
    if root is None:
        return []
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


PAGE = os.sysconf("SC_PAGE_SIZE")


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
