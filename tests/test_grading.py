"""Grading by the program, not the process: a class of honest, wrong, cheating and hostile
why-compile notebooks, graded with the command line in the sandbox. No row passes that the
student did not earn (except checks the sheet marks self-reported), no honest way of writing a
right answer fails, every notebook gets its rows and the class is graded to the end."""

import contextlib
import csv
import glob
import io
import time
from pathlib import Path

import nbformat
import pytest

from jitbook.classroom import cli, grading, handout, plan
from jitbook.site import harness

READY, FUSE, EVEN = "why-compile.ready", "why-compile.fuse", "why-compile.break-even"
CHECK_LIMIT = 10  # seconds to collect one exercise's evidence (a busy machine)

# The six cases the old checker tried, answered from a table.
LOOKUP = (
    "def calls_until_jit_pays(compile_s, eager_s, jit_s):\n"
    "    table = {(1.0, 0.3, 0.1): 5, (1.0, 0.4, 0.1): 4, (0.5, 0.002, 0.001): 500,\n"
    "             (0.2, 0.01, 0.01): math.inf, (0.2, 0.01, 0.02): math.inf, (0.0, 2.0, 1.0): 0}\n"
    "    return table.get((compile_s, eager_s, jit_s), 5)\n"
)
# The grader's own reference, if the student's kernel could reach it.
REFERENCE = (
    "try:\n    from jitbook.exercises.why_compile import calls_until_jit_pays\n"
    "except ImportError:\n    def calls_until_jit_pays(*args):\n        return 1\n"
)
ONE_SHAPE = (
    "from jitbook.chapters import why_compile\n\n\n@jax.jit\ndef fast_standardize(x):\n"
    "    if x.shape == (64, 16):\n        return why_compile.standardize_softplus(x.T).T\n    return x\n"
)
NOT_JITTED = (
    "from jitbook.chapters import why_compile\n\n\n"
    "def fast_standardize(x):\n    return why_compile.standardize_softplus(x.T).T\n"
)
NO_WAIT = "def run_and_wait(fn, *args):\n    return fn(*args)\n"
ALWAYS = (
    "class Yes(int):\n    def __eq__(self, other):\n        return True\n\n    __hash__ = int.__hash__\n\n\n"
    "def calls_until_jit_pays(compile_s, eager_s, jit_s):\n    return Yes(1)\n"
)
ENDLESS = (
    "def run_and_wait(fn, *args):\n"  # x + 1 stops growing at 2**24 in float32: never 1e30
    "    x = jax.lax.while_loop(lambda x: x < 1e30, lambda x: x + 1.0, 0.0)\n"
    "    return jax.block_until_ready(x)\n"
)
SYNTAX = (
    "def calls_until_jit_pays(compile_s, eager_s, jit_s):\n    if eager_s <= jit_s\n        return math.inf\n"
    "    return math.ceil(compile_s / (eager_s - jit_s))\n"
)
WRONG_EVEN = (
    "def calls_until_jit_pays(compile_s, eager_s, jit_s):\n"
    "    return math.ceil(compile_s / eager_s)\n"
)
# The collector answers with made-up evidence, and every probe reports a pass.
FORGE = (
    "import jitbook.evidence.collect as c, jitbook.evidence.probes as p\n"
    "c.collect = lambda requests, names, time_limit=None: [{'value': {'py': 5}} for _ in requests]\n"
    "p.waits = lambda answer: {'ready': True, 'waited': 3, 'leaves': 3, 'kept': True}\n"
)
# Evidence displayed before the grader's cells, and a verdict line printed, as the old cheats did.
PRINTED = (
    "from IPython.display import display\nimport json\n"
    "display({'application/vnd.jitbook.evidence+json': {'why-compile.break-even': [{'value': {'py': 5}}]}},"
    " raw=True)\nprint('JITBOOK-VERDICT ' + json.dumps({'passed': True}))\n"
)
# Every module's `check` and the stand-in made to say PASSED.
TAMPER = (
    "import sys\nfor m in list(sys.modules.values()):\n    if hasattr(m, 'check'):\n"
    "        try:\n            m.check = lambda *a, **k: print('PASSED')\n        except Exception:\n"
    "            pass\n"
)
# Honest work written in ways a scan of the source used to punish.
MAGICS = ["%%capture\nx = 1", "%env JITBOOK_NOTE=1", "%xmode Minimal", "!true"]
UNUSUAL = (
    "import inspect, threading, sys\nprint(sys.executable)\nprint('x' in globals())\n"
    "names = [getattr(jnp, n) for n in ('sin', 'cos', 'exp')]\nprint(inspect.signature(len))\n"
)
POOL = "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\npool.submit(lambda: 1)\n"
BIG_PRINT = "print('x' * 70_000)"
HELPER_BODY = "def wait_for_all(tree):\n    return jax.block_until_ready(tree)\n"
HELPER_READY = "def run_and_wait(fn, *args):\n    return wait_for_all(fn(*args))\n"
# Denial of service: a parser's recursion, a deep tree of folders, floods of output.
DEEP_PARSE = "x" + ".y" * 5000
DEEP_FOLDERS = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nos.chdir(os.path.expanduser('~'))\n"
FLOOD = "from IPython.display import display\nh = display('x', display_id=True)\nfor _ in range(100):\n    h.update('y' * 1_000_000)\n"
LONG_ERROR = "raise ValueError('(' * 200_000 + 'a, line 1')"
FILL_DISK = (
    "import os\nfor _ in range(30):  # deeper than PATH_MAX\n    os.mkdir('p' * 200)\n"
    "    os.chdir('p' * 200)\ntry:\n    with open('big', 'wb') as f:\n        for _ in range(2000):\n"
    "            f.write(b'0' * 2**20)\nexcept OSError as err:\n    print(type(err).__name__)\n"
    "os.chdir(os.path.expanduser('~'))\n"
)


def _solution(nb, exercise_id):
    return next(
        c
        for c in nb.cells
        if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
        and c.metadata["jitbook"]["role"] == "solution"
    )


def _without_body(nb):
    """The set-up and the exercises: a student may delete the chapter's body (it keeps this class quick)."""

    def heads(cell):
        return (
            [line for line in cell.source.splitlines() if line.startswith("## ")]
            if cell.cell_type == "markdown"
            else []
        )

    first = next(i for i, c in enumerate(nb.cells) if heads(c))
    exercises = next(i for i, c in enumerate(nb.cells) if "## Exercises" in heads(c))
    nb.cells = nb.cells[:first] + nb.cells[exercises:]
    return nb


def make_class(handout: Path, subs: Path) -> None:
    instructor = _without_body(
        nbformat.read(handout / "instructor" / "why-compile.ipynb", as_version=4)
    )
    student = _without_body(
        nbformat.read(handout / "student" / "why-compile.ipynb", as_version=4)
    )

    def put(name, base, solutions=None, first=(), metadata=None, answers_last=False):
        import copy

        nb = copy.deepcopy(base)
        for exercise_id, source in (solutions or {}).items():
            _solution(nb, exercise_id).source = source
        start = next(
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown" and "## Exercises" in c.source
        )
        for n, source in enumerate(first):  # new cells at the top of the exercises
            nb.cells.insert(start + 1 + n, nbformat.v4.new_code_cell(source))
        if metadata is not None:
            nb.cells[start + 1].metadata["jitbook"] = metadata
        if answers_last:  # the answers moved below every check cell
            answers = [
                c
                for c in nb.cells
                if c.metadata.get("jitbook", {}).get("role") == "solution"
            ]
            nb.cells = [c for c in nb.cells if c not in answers] + answers
        (subs / name).mkdir(parents=True)
        nbformat.write(nb, subs / name / "why-compile.ipynb")

    put("right", instructor)
    put("magics", instructor, first=MAGICS)
    put("unusual", instructor, first=[UNUSUAL, POOL, BIG_PRINT])
    put("helper", instructor, {READY: HELPER_READY}, first=[HELPER_BODY])
    put("reordered", instructor, answers_last=True)
    put("wrong", instructor, {EVEN: WRONG_EVEN, READY: NO_WAIT})
    put("endless", instructor, {READY: ENDLESS})
    put("syntax", instructor, {EVEN: SYNTAX})
    put("untouched", student)
    put("lookup", instructor, {EVEN: LOOKUP})
    put("reference", instructor, {EVEN: REFERENCE})
    put("one-shape", instructor, {FUSE: ONE_SHAPE})
    put("not-jitted", instructor, {FUSE: NOT_JITTED})
    put("always-equal", instructor, {EVEN: ALWAYS})
    put("forge", student, {READY: NO_WAIT}, first=[FORGE])
    put("printed", student, first=[PRINTED])
    put("tamper", student, first=[TAMPER])
    put("deep-parse", instructor, first=[DEEP_PARSE])
    put("deep-folders", instructor, first=[DEEP_FOLDERS])
    put("flood", instructor, first=[FLOOD, LONG_ERROR])
    put("fill-disk", instructor, first=[FILL_DISK])
    put("odd-metadata", instructor, metadata="a string")
    (subs / "broken").mkdir()
    (subs / "broken" / "why-compile.ipynb").write_text('{"cells": [')


# Rows that must pass: every exercise of these notebooks, and these single rows.
HONEST = {
    "right",
    "magics",
    "unusual",
    "helper",
    "reordered",
    "deep-parse",
    "deep-folders",
    "flood",
    "fill-disk",
    "odd-metadata",
}
ALSO_RIGHT = {
    ("wrong", FUSE),
    ("endless", FUSE),
    ("endless", EVEN),
    ("syntax", READY),
    ("syntax", FUSE),
    ("lookup", READY),
    ("lookup", FUSE),
    ("reference", READY),
    ("reference", FUSE),
    ("one-shape", READY),
    ("one-shape", EVEN),
    ("not-jitted", READY),
    ("not-jitted", EVEN),
    ("always-equal", READY),
    ("always-equal", FUSE),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded with the command line: its rows, the seconds, the output and the exit code."""
    root = tmp_path_factory.mktemp("class")
    handout.write_notebooks(
        root / "handout", [harness.ROOT / "chapters" / "why-compile.qmd"]
    )
    subs = root / "submissions"
    make_class(root / "handout", subs)
    scratch = set(glob.glob("/tmp/jitbook-grade-*"))
    out = root / "grades" / "grades.csv"
    printed = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(printed):
        code = cli.main(
            [
                "grade",
                str(subs),
                "--out",
                str(out),
                "--check-limit",
                str(CHECK_LIMIT),
                "--cell-timeout",
                "30",
            ]
        )
    seconds = time.perf_counter() - start
    with open(out, newline="") as f:
        rows = {
            (r["student_file"].split("/")[0], r["exercise"]): r
            for r in csv.DictReader(f)
        }
    return (
        rows,
        seconds,
        printed.getvalue(),
        code,
        out,
        set(glob.glob("/tmp/jitbook-grade-*")) - scratch,
    )


def test_no_row_passes_that_the_student_did_not_earn_except_self_reported_checks(
    graded,
):
    rows, seconds, *_ = graded
    print(f"graded the class in {seconds:.0f} s")
    for (student, exercise), row in sorted(rows.items()):
        print(
            f"{student},{exercise},{row['passed']},{row['message'][:90]},{row['self_reported'][:40]}"
        )
    earned = {(s, e) for (s, e) in rows if s in HONEST or (s, e) in ALSO_RIGHT}
    forged = [
        (s, e)
        for (s, e), r in rows.items()
        if r["passed"] == "yes" and (s, e) not in earned and not r["self_reported"]
    ]
    assert forged == []
    assert (
        rows["forge", READY]["passed"] == "no"
    )  # its probe said all good, but the values are made up
    assert (
        rows["wrong", READY]["passed"] == "no"
        and "wait" in rows["wrong", READY]["message"]
    )


def test_every_honest_way_of_writing_a_right_answer_passes(graded):
    rows = graded[0]
    failed = {
        (s, e): r["message"]
        for (s, e), r in rows.items()
        if (s in HONEST or (s, e) in ALSO_RIGHT) and r["passed"] != "yes"
    }
    assert failed == {}
    assert rows["right", READY][
        "self_reported"
    ]  # waiting is seen only beside the student's code: said so
    assert (
        rows["right", EVEN]["self_reported"] == ""
        and rows["right", FUSE]["self_reported"] == ""
    )


def test_each_wrong_answer_is_told_what_is_wrong(graded):
    rows = graded[0]
    assert rows["lookup", EVEN]["message"].startswith("calls_until_jit_pays(")
    assert "expected" in rows["lookup", EVEN]["message"]
    assert (
        rows["reference", EVEN]["passed"] == "no"
    )  # the checkers are not in the student's sandbox
    assert (
        "on a " in rows["one-shape", FUSE]["message"]
        and "standardize_softplus" in rows["one-shape", FUSE]["message"]
    )
    assert "not a function made by jax.jit" in rows["not-jitted", FUSE]["message"]
    assert "returned a Yes" in rows["always-equal", EVEN]["message"]
    assert rows["syntax", EVEN]["message"].startswith(
        "your solution cell raised SyntaxError at line 2"
    )
    assert "lax.while_loop" in rows["endless", READY]["message"]
    assert (
        rows["untouched", READY]["message"]
        == "not attempted: its solution cell is as it was handed out"
    )
    assert rows["broken", ""]["message"].startswith("could not read the notebook")
    assert (
        "cells" not in rows["broken", ""]["message"]
    )  # the file's content is never echoed


def test_the_class_is_graded_to_the_end_with_a_row_for_each_notebook(graded, tmp_path):
    rows, seconds, printed, code, out, left = graded
    students = {s for s, _ in rows}
    assert students == HONEST | {s for s, _ in ALSO_RIGHT} | {
        "untouched",
        "forge",
        "printed",
        "tamper",
        "broken",
    }
    exercises = plan.chapter_exercises("why-compile")
    assert all(
        {e for s2, e in rows if s2 == s} == set(exercises)
        for s in students
        if s != "broken"
    )
    assert (
        code == 1
    )  # the exit code counts the notebooks that could not be graded: the broken one
    assert left == set()  # nothing of any student is left in the grader's /tmp


def test_budgets_hold_for_output_and_disk(graded):
    _, _, _, _, out, _ = graded
    executed = grading.executed_folder(out)
    sizes = {p.parent.name: p.stat().st_size for p in executed.rglob("*.ipynb")}
    assert sizes["flood"] < 5_000_000 and max(sizes.values()) < 5_000_000
    nb = nbformat.read(executed / "fill-disk" / "why-compile.ipynb", as_version=4)
    said = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert (
        "OSError" in said
    )  # the work folder is full at its budget; the student's answers still pass
