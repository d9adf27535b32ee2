"""The grading sandbox: a student's kernel sees its own folder and a scrubbed
environment, no network, no privileges, one budget of time, memory and disk; a cell
that hangs, crashes or floods is stopped and noted, and grading goes on.

No Dask here: the sandbox's claim runs in the older releases' venvs, which lack it.
"""

import sys
import time
from pathlib import Path

import nbformat
import pytest

from jitbook import classroom
from jitbook.classroom import plan, sandbox, session
from jitbook.site import harness


def student_cells(*sources: str) -> list:
    """Cells of a student's notebook, as the grader plans them."""
    return [plan.Step("student", nbformat.v4.new_code_cell(s)) for s in sources]


@pytest.mark.parametrize("mode", sorted({"none", classroom.sandbox_mode()}))
def test_the_kernel_sees_its_own_folder_and_a_scrubbed_environment(monkeypatch, mode):
    monkeypatch.setenv("GRADER_SECRET", "submissions-folder")
    steps = student_cells(
        "import os, pathlib\nprint(sorted(os.environ))\nprint(os.getcwd())\n"
        "print(pathlib.Path(f'/proc/{os.getppid()}/cmdline').read_bytes())"
    )
    kernel = sandbox.Kernel(mode, env={"JITBOOK_SMALL": "1"})
    assert (
        session.run_steps(
            steps, kernel, cell_timeout=60, collect_timeout={}, time_limit=120
        )
        == ""
    )
    names, cwd, parent = steps[0].cell.outputs[0]["text"].splitlines()
    assert (
        "GRADER_SECRET" not in names
        and "JPY_PARENT_PID" not in names
        and "'JITBOOK_SMALL'" in names
    )
    assert Path(cwd).name == "work" and "submissions-folder" not in parent


def test_a_sandboxed_kernel_has_no_network():
    import socket

    if classroom.sandbox_mode() != "bwrap":
        pytest.skip("bubblewrap is not installed or cannot make namespaces here")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        steps = student_cells(
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
            "    print('connected')\nexcept OSError as err:\n    print(type(err).__name__)"
        )
        kernel = sandbox.Kernel("bwrap")
        assert (
            session.run_steps(
                steps, kernel, cell_timeout=60, collect_timeout={}, time_limit=120
            )
            == ""
        )
    assert steps[0].cell.outputs[0]["text"].strip() != "connected"


def test_a_cell_that_kills_its_kernel_is_noted_and_grading_goes_on_after_it():
    steps = student_cells("x = 1", "import os\nos._exit(1)", "print(x + 1)")
    kernel = sandbox.Kernel(classroom.sandbox_mode())
    assert (
        session.run_steps(
            steps, kernel, cell_timeout=60, collect_timeout={}, time_limit=120
        )
        == ""
    )
    assert steps[1].failure == "killed the kernel"
    assert steps[2].cell.outputs[0]["text"] == "2\n"


def test_a_hanging_cell_is_stopped_and_grading_goes_on_after_it():
    steps = student_cells("x = 1", "while True:\n    pass", "print(x + 1)")
    kernel = sandbox.Kernel(classroom.sandbox_mode())
    assert (
        session.run_steps(
            steps, kernel, cell_timeout=3, collect_timeout={}, time_limit=60
        )
        == ""
    )
    assert steps[1].failure == "ran longer than 3 s"
    assert (
        steps[2].cell.outputs[0]["text"] == "2\n"
    )  # the restarted kernel replayed x = 1


def test_a_notebook_over_its_time_limit_stops_between_cells():
    steps = student_cells(*["import time\ntime.sleep(1.5)"] * 4)
    reason = session.run_steps(
        steps, sandbox.Kernel(), cell_timeout=30, collect_timeout={}, time_limit=1
    )
    assert reason == "the notebook ran out of its 1 s time limit"
    assert steps[0].cell.outputs == [] and steps[3].cell.get("execution_count") is None


def _bwrap_only():
    if classroom.sandbox_mode() != "bwrap":
        pytest.skip("bubblewrap is not installed or cannot make namespaces here")


@pytest.mark.claim("sec-teachers-grading", "clm-teachers-sandbox-no-privileges")
def test_the_sandbox_refuses_a_remount_and_runs_as_nobody_without_capabilities(
    measured,
):
    """As uid 65534 with no capability: the book's code cannot be remounted, and the book's
    code, the venv and the system cannot be written."""
    _bwrap_only()
    code = str(harness.ROOT / "code")
    targets = [
        code + "/jitbook/cache.py",
        sys.prefix + "/jitbook-probe",
        "/usr/jitbook-probe",
    ]
    steps = student_cells(
        "import os, subprocess\nprint(os.getuid(), os.getgid())\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
        f"r = subprocess.run(['mount', '-o', 'remount,rw,bind', {code!r}, {code!r}], capture_output=True)\n"
        "print(r.returncode)\n"
        f"for target in {targets!r}:\n"
        "    try:\n        open(target, 'a').write('# changed')\n        print('wrote')\n"
        "    except OSError as err:\n        print(type(err).__name__)"
    )
    before = (harness.ROOT / "code" / "jitbook" / "cache.py").read_bytes()
    assert (
        session.run_steps(
            steps,
            sandbox.Kernel("bwrap"),
            cell_timeout=60,
            collect_timeout={},
            time_limit=120,
        )
        == ""
    )
    ids, caps, mounted, *wrote = steps[0].cell.outputs[0]["text"].splitlines()[:6]
    measured("user and group ids inside the sandbox", ids)
    measured(
        "writes refused, of 3 (book's code, venv, system)",
        sum(w != "wrote" for w in wrote),
    )
    assert ids == "65534 65534"
    assert int(caps, 16) == 0 and mounted != "0"
    assert len(wrote) == 3 and set(wrote) <= {"OSError", "PermissionError"}, wrote
    assert (harness.ROOT / "code" / "jitbook" / "cache.py").read_bytes() == before


def test_memory_is_one_budget_for_all_of_a_students_processes():
    """Three children of 1 GiB each fit one process's limit but not a 2.5 GiB budget together."""
    hog = (
        "import os, time, warnings\nwarnings.simplefilter('ignore')\nfor _ in range(3):\n"
        "    if os.fork() == 0:\n        x = bytearray(2**30)\n        x[::4096] = b'x' * len(x[::4096])\n"
        "        time.sleep(60)\ntime.sleep(30)"
    )
    steps = student_cells("x = 1", hog, "print(x + 1)")
    kernel = sandbox.Kernel(classroom.sandbox_mode(), memory_gib=2.5)
    start = time.monotonic()
    assert (
        session.run_steps(
            steps, kernel, cell_timeout=50, collect_timeout={}, time_limit=120
        )
        == ""
    )
    assert steps[1].failure.startswith(
        "used more than 2.5 GiB of memory (all its processes together)"
    )
    assert time.monotonic() - start < 45 and steps[2].cell.outputs[0]["text"] == "2\n"


def test_disk_and_tmp_are_capped_and_output_is_cut_with_a_note():
    _bwrap_only()
    fill_tmp = (
        "try:\n    open('/tmp/big', 'wb').write(b'0' * 200 * 2**20)\n    print('wrote')\n"
        "except OSError as err:\n    print(type(err).__name__, err.errno)"
    )
    fill_work = (
        "try:\n    with open('big', 'wb') as f:\n        for _ in range(200):\n"
        "            f.write(b'0' * 2**20)\n    print('wrote')\nexcept OSError as err:\n"
        "    print(type(err).__name__, err.errno)"
    )
    shout = "print('x' * 5_000_000)\nprint('after')"
    steps = student_cells(fill_tmp, fill_work, shout)
    kernel = sandbox.Kernel("bwrap", disk_gib=0.1, output_chars=10_000)
    assert (
        session.run_steps(
            steps, kernel, cell_timeout=60, collect_timeout={}, time_limit=120
        )
        == ""
    )
    assert (
        steps[0].cell.outputs[0]["text"].startswith("OSError 28")
    )  # ENOSPC: the tmpfs is full
    work = "".join(o.get("text", "") for o in steps[1].cell.outputs)
    assert (
        "wrote" not in work or steps[1].failure
    )  # EFBIG past the file limit, or the watcher's stop
    shown = "".join(o.get("text", "") for o in steps[2].cell.outputs)
    assert (
        len(shown) < 20_000
        and "output cut: this cell's output passed 10,000 characters" in shown
    )


def test_replays_after_crashes_stay_inside_the_one_time_budget():
    """Slow cells, then a crash: each restart replays them, and the notebook still stops at its limit."""
    steps = student_cells(
        *["import time\ntime.sleep(2)"] * 3,
        "import os\nos._exit(1)",
        "import os\nos._exit(1)",
        "import os\nos._exit(1)",
        "print('end')",
    )
    start = time.monotonic()
    reason = session.run_steps(
        steps,
        sandbox.Kernel(classroom.sandbox_mode()),
        cell_timeout=30,
        collect_timeout={},
        time_limit=12,
    )
    took = time.monotonic() - start
    assert reason == "the notebook ran out of its 12 s time limit" and took < 12 + 15, (
        took
    )


def test_a_long_cell_reports_progress_while_it_runs(monkeypatch):
    monkeypatch.setattr(classroom.session.Watch, "speak_after", 2.0)
    said = []
    steps = student_cells("import time\ntime.sleep(5)")
    session.run_steps(
        steps,
        sandbox.Kernel(classroom.sandbox_mode()),
        cell_timeout=30,
        collect_timeout={},
        time_limit=60,
        progress=said.append,
    )
    assert said and said[0].startswith(
        "step 1 of 1, a cell of the notebook, running for "
    )
