"""The classroom: student and instructor notebooks from the chapters, and grading of
completed notebooks.

    # OUTDIR/student/, OUTDIR/instructor/
    .venv/bin/python -m jitbook.classroom notebooks OUTDIR
    # _build/grades/grades.csv
    .venv/bin/python -m jitbook.classroom grade SUBMISSIONS
    # a Lab config without nbgrader
    .venv/bin/python -m jitbook.classroom lab-config FOLDER

Solutions sit in the chapters between ``### BEGIN SOLUTION`` and ``### END
SOLUTION``, the markers nbgrader uses, and the cells carry nbgrader's cell metadata,
so a teacher who uses nbgrader can take the notebooks as they are. Grading runs each
submission alone in a fresh, confined kernel and decides every exercise with the
grader's own copy of the checkers (``jitbook.classroom.sealed``), never with what the
notebook shows.
"""

import argparse
import copy
import csv
import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from jitbook import size
from jitbook.exercises import registry
from jitbook.site import downloads, harness

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
FOLD_OPTIONS = (
    "code-fold",
    "code-summary",
)  # Quarto folds solutions on the site; a student has nothing to unfold
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")
CELL_TIMEOUT, TIME_LIMIT = (
    300.0,
    1200.0,
)  # grading defaults: seconds per cell, seconds per notebook
# Grading checks the students' code, not the machine's speed: the kernels run the
# chapters at their small
# problem sizes unless the teacher asks for full ones (the PLN chapter's full-size cells
# take minutes).
GRADING_ENV = {size.ENV_VAR: "1"}
NBGRADER_SCHEMA = (
    3  # the cell metadata schema of nbgrader 0.9 (nbgrader/nbgraderformat/v3.json)
)
STUDENT_NOTE = (
    "*Student notebook.* Write your code where a cell says `# YOUR CODE HERE`: "
    "replace the `raise NotImplementedError()` line (or the `name = NotImplemented` "
    "placeholder) with your code, then run the `check(...)` cell below it for "
    "feedback. Run All runs every check. Grading runs the set-up cells at the top, "
    "every cell you add or change anywhere, and the Exercises section; the chapter's "
    "own cells, as handed out, are skipped."
)
FENCE = re.compile(r"^:::.*\n?", re.M)  # Quarto's ::: {#exr-...} divs


# ---- notebooks -----------------------------------------------------------------------


def check_markers(source: str) -> None:
    """Raise a ValueError naming the line when a cell's BEGIN/END SOLUTION markers do
    not pair up.
    """
    open_at = None
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == BEGIN and open_at is not None:
            raise ValueError(
                f"line {number}: `{BEGIN}` inside another solution region; close it "
                f"with `{END}`."
            )
        if line.strip() == BEGIN:
            open_at = number
        elif line.strip() == END and open_at is None:
            raise ValueError(f"line {number}: `{END}` without a `{BEGIN}` above it.")
        elif line.strip() == END:
            open_at = None
    if open_at is not None:
        raise ValueError(
            f"line {open_at}: a `{BEGIN}` region is never closed: add `{END}` after "
            "the solution."
        )


def clear_solutions(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's ClearSolutions: each solution region, markers included, becomes the
    stub at its indentation.
    """
    from nbgrader.preprocessors import ClearSolutions

    nb, _ = ClearSolutions(
        begin_solution_delimeter=BEGIN,
        end_solution_delimeter=END,
        code_stub={"python": "\n".join(STUB)},
    ).preprocess(nb, {})
    return nb


def solution_regions(source: str) -> list[str]:
    """The code between each BEGIN and END SOLUTION marker of a cell (or a chapter), one
    string per region.
    """
    return [
        m.strip("\n")
        for m in re.findall(
            rf"^[ \t]*{BEGIN}[ \t]*\n(.*?)^[ \t]*{END}[ \t]*$", source, re.M | re.S
        )
    ]


def is_solution_cell(cell) -> bool:
    return cell.cell_type == "code" and any(
        l.strip() == BEGIN for l in cell.source.splitlines()
    )


def checked_exercise(cell) -> str | None:
    """The exercise id a check cell checks, from its ``check("...")`` call (None for
    other cells).
    """
    match = CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
    return match.group(1) if match else None


def _grade_id(exercise_id: str, role: str) -> str:
    return re.sub(
        r"[^A-Za-z0-9_-]", "_", f"{exercise_id}-{role}"
    )  # nbgrader allows letters, digits, _ and -


def _nbgrader(grade_id: str, *, solution: bool) -> dict:
    """nbgrader metadata: solution cells are the student's to edit, check cells are
    read-only.
    """
    return {
        "grade": False,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": NBGRADER_SCHEMA,
        "solution": solution,
    }


def mark_exercises(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Tag each solution cell with the exercise whose check cell follows it, and each
    check cell with its own.
    """
    pending: list = []
    for _index, cell in enumerate(nb.cells):
        if is_solution_cell(cell):
            pending.append(cell)
        exercise_id = checked_exercise(cell)
        if exercise_id is None:
            continue
        cell.metadata.setdefault("jitbook", {}).update(
            exercise=exercise_id, role="check"
        )
        cell.metadata["nbgrader"] = _nbgrader(
            _grade_id(exercise_id, "check"), solution=False
        )
        for n, solution in enumerate(pending):
            solution.metadata.setdefault("jitbook", {}).update(
                exercise=exercise_id, role="solution"
            )
            suffix = "solution" if len(pending) == 1 else f"solution-{n + 1}"
            solution.metadata["nbgrader"] = _nbgrader(
                _grade_id(exercise_id, suffix), solution=True
            )
        pending = []
    for n, solution in enumerate(
        pending
    ):  # a solution with no check cell after it still needs a unique id
        stem = Path(nb.metadata.get("jitbook", {}).get("source", "chapter")).stem
        solution.metadata["nbgrader"] = _nbgrader(
            _grade_id(stem, f"solution-unchecked-{n + 1}"), solution=True
        )
    return nb


def instructor_notebook(qmd: Path) -> nbformat.NotebookNode:
    """The chapter as an unexecuted notebook with its solutions in place, exercise cells
    marked.
    """
    return mark_exercises(harness.to_notebook(qmd))


def student_notebook(
    qmd: Path, executed: nbformat.NotebookNode | None = None
) -> nbformat.NotebookNode:
    """The chapter without its solutions (stubs that raise when called, not when
    defined), its

    Markdown as a Jupyter reader reads it, outputs cleared.

    ``executed`` is the chapter's executed notebook (``jitbook.site run``): its
    Markdown carries the inline values filled in. Without it, each inline value shows
    as its expression in code.
    """
    nb = copy.deepcopy(instructor_notebook(qmd))
    for cell in nb.cells:
        if is_solution_cell(cell):
            try:
                check_markers(cell.source)
            except ValueError as err:
                line = cell.metadata.get("jitbook", {}).get("qmd_line", "?")
                raise ValueError(
                    f"{Path(qmd).name}, code chunk at line {line}: {err}"
                ) from None
            options = cell.metadata.get("jitbook", {}).get("options", {})
            for key in FOLD_OPTIONS:
                options.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.source = "\n".join(
                line for line in cell.source.splitlines() if not line.startswith("#|")
            )
    nb = clear_solutions(nb)
    _placeholders(nb)
    _reader_markdown(nb, executed)
    nb.cells.insert(
        1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0,
        nbformat.v4.new_markdown_cell(STUDENT_NOTE),
    )
    return nb


def _placeholders(nb: nbformat.NotebookNode) -> None:
    """A stub at the top level of a cell would raise when the cell runs, stopping Run
    All: it

    becomes ``answer = NotImplemented``, which the check reads as "not answered yet".
    """
    for cell in nb.cells:
        exercise_id = cell.metadata.get("jitbook", {}).get("exercise")
        if cell.metadata.get("jitbook", {}).get("role") != "solution":
            continue
        answer = (
            registry()[exercise_id].answer if exercise_id in registry() else "answer"
        )
        cell.source = "\n".join(
            f"{answer} = NotImplemented  # replace this line with your answer"
            if line == STUB[1]
            else line
            for line in cell.source.splitlines()
        )


def _reader_markdown(
    nb: nbformat.NotebookNode, executed: nbformat.NotebookNode | None
) -> None:
    """Markdown without Quarto markup: values filled (from ``executed``),
    cross-references as

    titles, no heading attributes and no ``:::`` fences.
    """
    done = [
        c
        for c in (executed.cells if executed else [])
        if c.source != downloads.SMALL_NOTE
    ]
    aligned = len(done) == len(nb.cells) and all(
        a.cell_type == b.cell_type for a, b in zip(done, nb.cells, strict=True)
    )
    for cell, ran in zip(nb.cells, done if aligned else nb.cells, strict=True):
        if cell.cell_type == "markdown":
            cell.source = harness.INLINE.sub(r"`\1`", ran.source)
    cells = downloads.reader_notebook(nb).cells
    nb.cells = [c for c in cells if c.source != downloads.SMALL_NOTE]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = FENCE.sub("", cell.source).strip("\n")


def has_exercises(nb: nbformat.NotebookNode) -> bool:
    """Whether a chapter's notebook has solution cells or checks its own exercises (not
    another chapter's).
    """
    stem = Path(nb.metadata.get("jitbook", {}).get("source", "")).stem
    return any(
        is_solution_cell(c) or (checked_exercise(c) or "").split(".")[0] == stem
        for c in nb.cells
    )


def executed_copy(
    qmd: Path, folder: Path = harness.BUILD
) -> nbformat.NotebookNode | None:
    """The chapter's executed notebook in ``folder`` if it is newer than the chapter,
    else None.
    """
    path = Path(folder) / f"{Path(qmd).stem}.ipynb"
    if path.exists() and path.stat().st_mtime >= Path(qmd).stat().st_mtime:
        return nbformat.read(path, as_version=4)
    return None


def write_notebooks(
    out_dir: Path,
    chapters: list[Path] | None = None,
    *,
    values: bool = False,
    log=print,
) -> list[Path]:
    """Write ``student/<stem>.ipynb`` and ``instructor/<stem>.ipynb`` for every chapter
    with exercises.

    With ``values``, a chapter without an up-to-date executed copy in
    ``_build/notebooks`` is executed first, so the student notebook shows the values
    the text quotes.
    """
    out_dir = Path(out_dir)
    written = []
    for qmd in chapters if chapters is not None else harness.chapter_files():
        qmd = Path(qmd)
        if not qmd.exists():
            raise FileNotFoundError(
                f"no chapter at {qmd}; name a .qmd file listed in _quarto.yml."
            )
        instructor = instructor_notebook(qmd)
        if not has_exercises(instructor):
            continue
        executed = executed_copy(qmd)
        if executed is None and values:
            log(
                f"executing {qmd.name} to fill in the values its text quotes ...",
                flush=True,
            )
            executed = nbformat.read(downloads.run(qmd), as_version=4)
        for kind, nb in (
            ("instructor", instructor),
            ("student", student_notebook(qmd, executed)),
        ):
            path = out_dir / kind / f"{qmd.stem}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            written.append(path)
    return written


# ---- grading -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grade:
    """One row of the grade sheet."""

    student_file: str
    exercise: str
    passed: bool
    message: str
    flags: str = ""


FIELDS = ("student_file", "exercise", "passed", "message", "flags")


@dataclasses.dataclass
class Step:
    """A cell the grading kernel runs: the grader's set-up, a student's cell, or a
    verdict.
    """

    kind: str  # "prelude", "student" or "verdict"
    cell: nbformat.NotebookNode
    exercise: str | None = None
    index: int | None = None  # the cell's place in the submission
    failure: str = ""  # why it did not finish: a time limit or a dead kernel


def chapter_of(
    path: Path, nb: nbformat.NotebookNode | None, stems: list[str]
) -> str | None:
    """The chapter a submission belongs to: notebook metadata first, else the longest
    chapter stem in its name.
    """
    source = (nb or {}).get("metadata", {}).get("jitbook", {}).get("source")
    if source and Path(source).stem in stems:
        return Path(source).stem
    named = [s for s in stems if s in path.stem]
    return max(named, key=len) if named else None


def chapter_exercises(stem: str) -> list[str]:
    """The exercise ids of a chapter, in the order its check cells appear, then any
    others registered for it.
    """
    ids = [id for id, ex in registry().items() if ex.chapter == stem]
    qmd = next((p for p in harness.chapter_files() if p.stem == stem), None)
    order = (
        [checked_exercise(c) for c in harness.to_notebook(qmd).cells]
        if qmd and qmd.exists()
        else []
    )
    return sorted(ids, key=lambda id: order.index(id) if id in order else len(order))


def _sections(cell) -> list[str]:
    """The ``##`` headings in a Markdown cell (a cell may hold several, and prose around
    them).
    """
    if cell.cell_type != "markdown":
        return []
    return [line for line in cell.source.splitlines() if line.startswith("## ")]


def body_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Code cells of the chapter's body: after its set-up (the cells before the first
    ``##`` section) and

    before ``## Exercises``. Grading skips those the student left as handed out: the
    exercises need only the set-up, and the body holds the chapter's measurements,
    which would make grading a class take hours.
    """
    sections = [(i, h) for i, c in enumerate(nb.cells) for h in _sections(c)]
    exercises = next((i for i, h in sections if h.startswith("## Exercises")), None)
    if exercises is None:
        return []
    return [
        i for i in range(sections[0][0], exercises) if nb.cells[i].cell_type == "code"
    ]


def _code(source: str) -> str:
    """A cell's code without Quarto options and blank lines, for comparing a submission
    with its handout.
    """
    return "\n".join(
        l.rstrip() for l in source.splitlines() if l.strip() and not l.startswith("#|")
    )


@dataclasses.dataclass(frozen=True)
class Handout:
    """What a chapter's student notebook held: its solution stubs and its body cells."""

    stubs: frozenset[str]
    body: frozenset[str]


@functools.cache
def handed_out(qmd: Path) -> Handout:
    """The solution cells (stubs in place) and body cells of a chapter's student
    notebook.
    """
    nb = student_notebook(qmd)
    return Handout(
        frozenset(
            _code(c.source)
            for c in nb.cells
            if c.metadata.get("jitbook", {}).get("role") == "solution"
        ),
        frozenset(_code(nb.cells[i].source) for i in body_cells(nb)),
    )


def verdict_source(exercise_id: str, check_limit: float | None) -> str:
    """The grader's cell for one exercise: the sealed checker, never the notebook's
    ``check``.
    """
    return (
        f'__import__("sys").modules["{GRADER_MODULE}"].GRADER.grade('
        f"{exercise_id!r}, time_limit={check_limit!r})"
    )


def plan(
    nb: nbformat.NotebookNode,
    exercises: list[str],
    handout: Handout,
    prelude: str,
    check_limit: float | None = None,
) -> list[Step]:
    """What a grading kernel runs, in order: the grader's set-up, every cell the student
    wrote or

    kept (body cells left as handed out are skipped), and the grader's own check
    where each check cell stands; exercises whose check cell is gone are checked at
    the end.
    """
    steps = [Step("prelude", nbformat.v4.new_code_cell(prelude))]
    body = set(body_cells(nb))
    checked = set()
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        exercise_id = checked_exercise(cell)
        if exercise_id in exercises:
            checked.add(exercise_id)
            source = verdict_source(exercise_id, check_limit)
            steps.append(
                Step("verdict", nbformat.v4.new_code_cell(source), exercise_id, i)
            )
        elif not (i in body and _code(cell.source) in handout.body):
            steps.append(Step("student", _fresh(cell), None, i))
    for exercise_id in exercises:
        if exercise_id not in checked:
            source = verdict_source(exercise_id, check_limit)
            steps.append(
                Step("verdict", nbformat.v4.new_code_cell(source), exercise_id)
            )
    return steps


def _fresh(cell) -> nbformat.NotebookNode:
    """A copy of a code cell without its stored outputs: a stored output counts for
    nothing.
    """
    copied = nbformat.v4.new_code_cell(cell.source)
    copied.metadata = copy.deepcopy(cell.get("metadata", {}))
    return copied


# ---- the grading kernel: alone, limited, sandboxed -----------------------------------

GRADER_MODULE = "_jitbook_grader"
MEMORY_LIMIT = (
    4.0  # GiB of address space per grading kernel; JAX starts in well under 2
)
CHECK_MARGIN = (
    10.0  # seconds a check may run past its limit before the kernel is killed
)
MAX_RESTARTS = 5
SANDBOXES = ("auto", "bwrap", "none")
# Sets the memory limit, forgets the grader's pid, then becomes the kernel (or bwrap).
LIMITER = (
    "import os, resource, sys; m = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (m, m)); os.environ.pop('JPY_PARENT_PID', "
    "None); os.execvp(sys.argv[2], sys.argv[2:])"
)
KERNEL_ENV = ("PATH", "LANG", "LC_ALL", "JAX_PLATFORMS", "TZ")


def sandbox_mode(requested: str = "auto") -> str:
    """``bwrap`` when bubblewrap is installed and works here (or was asked for), else
    ``none``.
    """
    if requested not in SANDBOXES:
        raise ValueError(
            f"--sandbox must be one of {', '.join(SANDBOXES)}, not {requested!r}."
        )
    if requested == "none":
        return "none"
    works = _bwrap_works()
    if requested == "bwrap" and not works:
        raise ValueError(
            "--sandbox bwrap: bubblewrap is not installed or cannot make namespaces "
            "here; install it (Debian: apt-get install bubblewrap) or pass --sandbox "
            "none."
        )
    return "bwrap" if works else "none"


@functools.cache
def _bwrap_works() -> bool:
    import shutil

    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def _read_only_paths() -> list[str]:
    """What a sandboxed kernel must read: Python, the venv, the book's package and its
    data.
    """
    import jitbook

    code = Path(jitbook.__file__).resolve().parents[1]
    paths = {
        sys.prefix,
        sys.base_prefix,
        str(Path(sys.executable).resolve().parents[1]),
        str(code),
        str(harness.ROOT / "data"),
    }
    system = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
    return sorted(
        p
        for p in paths
        if Path(p).exists() and not any(p == s or p.startswith(s + "/") for s in system)
    )


def bwrap_prefix(workdir: Path, private: Path, env: dict[str, str]) -> list[str]:
    """bubblewrap's command: a read-only system, a private /tmp and /proc, no network,
    only ``workdir`` writable (and the folder of the kernel's sockets).
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid"]
    args += ["--unshare-ipc", "--unshare-uts", "--unshare-net"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--tmpfs", "/tmp"]
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"):
        if Path(top).is_symlink():
            args += ["--symlink", os.readlink(top), top]
        elif Path(top).is_dir():
            args += ["--ro-bind", top, top]
    for path in _read_only_paths():
        args += ["--ro-bind", path, path]
    args += ["--ro-bind", str(private), str(private)]
    # No network: the kernel talks to the grader over Unix sockets in their own folder.
    args += ["--bind", str(private.parent / "sockets"), str(private.parent / "sockets")]
    args += [
        "--bind",
        str(workdir),
        str(workdir),
        "--chdir",
        str(workdir),
        "--clearenv",
    ]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--"]


def kernel_env(workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The grading kernel's whole environment: none of the grader's variables."""
    import jitbook

    env = {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return {
        **env,
        "HOME": str(workdir),
        "TMPDIR": "/tmp",
        "PYTHONPATH": str(Path(jitbook.__file__).resolve().parents[1]),
        "MPLBACKEND": "agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


@dataclasses.dataclass
class Kernel:
    """How grading kernels start: the sandbox, the memory limit and the environment."""

    sandbox: str = "none"
    memory_gib: float = MEMORY_LIMIT
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    def client(self, nb, workdir: Path, private: Path, timeout: float):
        """An nbclient client whose kernel starts in ``workdir`` under this sandbox and
        limit.
        """
        from jupyter_client.manager import AsyncKernelManager
        from nbclient import NotebookClient

        env = kernel_env(workdir, self.env)
        limit = [sys.executable, "-c", LIMITER, str(int(self.memory_gib * 2**30))]
        prefix = limit + (
            bwrap_prefix(workdir, private, env) if self.sandbox == "bwrap" else []
        )

        class Confined(AsyncKernelManager):
            def format_kernel_cmd(self, extra_arguments=None):
                return prefix + super().format_kernel_cmd(extra_arguments)

        km = Confined(kernel_name="python3")
        km.connection_file = str(private / "kernel.json")
        if self.sandbox == "bwrap":
            km.transport, km.ip = "ipc", str(private.parent / "sockets" / "kernel")
        client = NotebookClient(
            nb,
            km=km,
            timeout=timeout,
            allow_errors=True,
            interrupt_on_timeout=False,
            shutdown_kernel="immediate",
            extra_arguments=[*harness.QUIET_KERNEL, "--HistoryManager.enabled=False"],
        )
        return client, env


def prelude_source(chapter: str, key: str) -> str:
    """The grader's first cell: load ``jitbook.classroom.sealed`` and the chapter's
    checkers from hashed bytes.
    """
    import jitbook

    package = Path(jitbook.__file__).resolve().parent
    sealed_file = package / "classroom" / "sealed.py"
    sealed_hash = hashlib.sha256(sealed_file.read_bytes()).hexdigest()
    from jitbook.classroom.sealed import digests

    hashes = digests(package / "exercises")
    return "\n".join(
        [
            "import hashlib as _h, sys as _s, types as _t",
            "import jitbook",
            f"_b = open({str(sealed_file)!r}, 'rb').read()",
            f"if _h.sha256(_b).hexdigest() != {sealed_hash!r}:",
            "    raise RuntimeError('classroom/sealed.py changed during grading')",
            f"_m = _t.ModuleType({GRADER_MODULE!r})",
            f"exec(compile(_b, {str(sealed_file)!r}, 'exec'), _m.__dict__)",
            f"_s.modules[{GRADER_MODULE!r}] = _m",
            f"_m.GRADER = _m.install({str(package / 'exercises')!r}, {hashes!r}, "
            f"{chapter!r}, {key!r})",
            "del _h, _s, _t, _b, _m",
        ]
    )


def run_steps(
    steps: list[Step],
    kernel: Kernel,
    *,
    cell_timeout: float,
    check_timeout: dict[str, float],
    time_limit: float,
) -> str:
    """Run the steps, each once, restarting the kernel when one hangs or kills it: the
    new kernel

    replays the cells that finished before, then goes on after the one that failed.
    Returns why the run stopped early ("" when every step ran).
    """
    done: set[int] = set()
    deadline = time.monotonic() + time_limit
    position, restarts = 0, 0
    with tempfile.TemporaryDirectory(prefix="jitbook-grade-") as root:
        workdir, private = Path(root) / "work", Path(root) / "kernel"
        for folder in (workdir, private, Path(root) / "sockets"):
            folder.mkdir()
        while position < len(steps):
            if restarts > MAX_RESTARTS:
                return f"the kernel was restarted {MAX_RESTARTS} times"
            nb = nbformat.v4.new_notebook(cells=[s.cell for s in steps])
            client, env = kernel.client(nb, workdir, private, cell_timeout)
            try:
                position = _session(
                    client,
                    env,
                    workdir,
                    steps,
                    position,
                    done,
                    cell_timeout,
                    check_timeout,
                    deadline,
                )
            except _OutOfTime:
                return f"the notebook ran out of its {time_limit:g} s time limit"
            except _KernelFailed as failed:
                return str(failed)
            restarts += 1
    return ""


class _OutOfTime(Exception):
    """The whole-notebook time limit ran out between two cells."""


class _KernelFailed(Exception):
    """The kernel did not start, or the replay after a restart failed."""


def _session(
    client, env, workdir, steps, position, done, cell_timeout, check_timeout, deadline
) -> int:
    """One kernel's life: replay what finished, then run on; return where the next
    kernel starts.
    """
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

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
                replayed = copy.deepcopy(steps[j].cell)
                try:
                    client.execute_cell(
                        replayed, j, store_history=steps[j].kind != "prelude"
                    )
                except (CellTimeoutError, DeadKernelError) as err:
                    raise _KernelFailed(
                        "replaying the cells before it after a restart failed "
                        f"({type(err).__name__})"
                    ) from None
            for j in range(position, len(steps)):
                step = steps[j]
                if time.monotonic() > deadline:
                    raise _OutOfTime()
                limit = check_timeout.get(step.exercise, cell_timeout)
                client.timeout = limit if step.kind == "verdict" else cell_timeout
                try:
                    client.execute_cell(
                        step.cell, j, store_history=step.kind != "prelude"
                    )
                except CellTimeoutError:
                    step.failure = f"ran longer than {client.timeout:g} s"
                    return j + 1
                except DeadKernelError:
                    step.failure = "killed the kernel"
                    return j + 1
                if step.kind != "verdict":
                    done.add(j)
            return len(steps)
    except (CellTimeoutError, DeadKernelError, _OutOfTime, _KernelFailed):
        raise
    except (
        Exception
    ) as err:  # the kernel never started (a broken sandbox, a missing Python)
        raise _KernelFailed(
            f"the grading kernel did not start ({type(err).__name__}: "
            f"{(str(err).strip().splitlines() or [''])[0]})"
        ) from None


# ---- verdicts to rows ----------------------------------------------------------------


def _errors(cell) -> list[dict]:
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error_summary(error: dict) -> str:
    """One line for an error a student's cell raised: its kind, its line in the cell,
    its message.
    """
    text = ANSI.sub("", "\n".join(error.get("traceback", [])))
    lines = re.findall(r"(?:Cell In\[\d+\], line|line) (\d+)", text)
    where = f" at line {lines[-1]}" if lines else ""
    message = (error.get("evalue", "").strip().splitlines() or [""])[0]
    message = re.sub(
        r"\s*\([^()]*, line \d+\)$", "", message
    )  # Python's "(file, line 2)"
    return f"{error.get('ename', 'error')}{where}: {message}"


def _stdout(cell) -> str:
    return "".join(
        o.get("text", "")
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )


def _solution_problem(steps: list[Step], nb, exercise_id: str) -> str:
    """Why the exercise's solution cell did not run through, in one line ("" when it
    did).
    """
    for step in steps:
        if step.kind != "student" or step.index is None:
            continue
        meta = nb.cells[step.index].metadata.get("jitbook", {})
        if meta.get("exercise") != exercise_id or meta.get("role") != "solution":
            continue
        if step.failure:
            return f"your solution cell {step.failure} and was stopped"
        errors = _errors(step.cell)
        if errors:
            return f"your solution cell raised {error_summary(errors[-1])}"
    return ""


def rows_for(
    name: str,
    nb: nbformat.NotebookNode,
    steps: list[Step],
    exercises: list[str],
    key: bytes,
    handout: Handout,
    stopped: str,
    check_limits: dict[str, float],
) -> list[Grade]:
    """One row per exercise, from the grader's own verdicts; the notebook's outputs
    count for nothing.
    """
    from jitbook.classroom.sealed import read_verdict

    rows = []
    for exercise_id in exercises:
        step = next(
            s for s in steps if s.kind == "verdict" and s.exercise == exercise_id
        )
        solutions = [
            c
            for c in nb.cells
            if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
            and c.metadata["jitbook"].get("role") == "solution"
        ]
        untouched = bool(solutions) and all(
            _code(c.source) in handout.stubs for c in solutions
        )
        verdict = read_verdict(_stdout(step.cell), key)
        changes = "; ".join(verdict.get("changes", [])) if verdict else ""
        problem = _solution_problem(steps, nb, exercise_id)
        if step.failure:
            limit = check_limits.get(exercise_id, 0)
            message = (
                f"the check of {exercise_id} {step.failure} (its limit is {limit:g} s) "
                "and was stopped; the kernel was restarted and grading went on. Look "
                "for a loop that never ends, such as a lax.while_loop whose condition "
                "stays true"
            )
        elif verdict is None:
            message = (
                f"not reached: {stopped}, before this exercise's check"
                if stopped
                else "not checked: the grader's check gave no verdict"
                + (
                    f" ({error_summary(_errors(step.cell)[-1])})"
                    if _errors(step.cell)
                    else ""
                )
            )
        elif untouched:
            message = "not attempted: its solution cell is as it was handed out"
        elif changes:
            message = f"not graded: the notebook changes the grading code ({changes})"
        elif verdict["passed"]:
            message = ""
        elif problem and verdict["message"].startswith("I could not find"):
            answer = registry()[exercise_id].answer
            message = f"{problem}, so `{answer}` was never defined"
        else:
            message = "; ".join(filter(None, [problem, verdict["message"]]))
        passed = bool(verdict and verdict["passed"]) and not (
            untouched or changes or step.failure
        )
        rows.append(Grade(name, exercise_id, passed, message, changes))
    return rows


def executed_notebook(
    nb: nbformat.NotebookNode, steps: list[Step]
) -> nbformat.NotebookNode:
    """The submission as grading ran it: the grader's check in place of each check cell,
    cells

    grading skipped left without outputs, and the checks of missing check cells at
    the end.
    """
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    for step in steps:
        if step.kind == "prelude":
            continue
        cell = copy.deepcopy(step.cell)
        if step.failure:
            cell.outputs.append(
                nbformat.v4.new_output(
                    "stream", name="stderr", text=f"[grader] this cell {step.failure}\n"
                )
            )
        if step.kind == "verdict":
            cell.metadata.setdefault("jitbook", {}).update(
                exercise=step.exercise, role="grader"
            )
        if step.index is None:
            out.cells.append(cell)
        else:
            out.cells[step.index] = cell
    return out


def grade_notebook(
    path: Path,
    name: str | None = None,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
    kernel: Kernel | None = None,
    check_limit: float | None = None,
    content: bytes | None = None,
    executed_to: Path | None = None,
) -> list[Grade]:
    """Execute one submission in a fresh, confined kernel and grade every exercise of
    its chapter

    with the grader's own checkers; never raises for it.

    ``content`` is the submission as read when grading began (the file is never
    written); ``executed_to``, if given, receives the notebook as grading ran it.
    """
    import secrets

    path = Path(path)
    name = name or path.name
    kernel = kernel or Kernel(sandbox_mode(), env=GRADING_ENV if env is None else env)
    if env is not None:
        kernel = dataclasses.replace(kernel, env=env)
    stems = [p.stem for p in harness.chapter_files() if p.exists()]
    try:
        text = (content if content is not None else path.read_bytes()).decode()
        nb = nbformat.reads(text, as_version=4)
    except Exception as err:
        return [
            Grade(
                name,
                "",
                False,
                f"could not read the notebook ({type(err).__name__}: "
                f"{(str(err).splitlines() or [''])[0]})",
            )
        ]
    stem = chapter_of(path, nb, stems)
    exercises = chapter_exercises(stem) if stem else []
    if not exercises:
        what = (
            f"chapter {stem!r} has no exercises"
            if stem
            else (
                "could not tell which chapter this notebook belongs to: name the file "
                "after the chapter, "
                "e.g. why-compile.ipynb"
            )
        )
        return [Grade(name, "", False, what)]
    handout = handed_out(next(p for p in harness.chapter_files() if p.stem == stem))
    key = secrets.token_hex(32)
    limits = {
        id: registry()[id].time_limit if check_limit is None else check_limit
        for id in exercises
    }
    steps = plan(nb, exercises, handout, prelude_source(stem, key), check_limit)
    stopped = run_steps(
        steps,
        kernel,
        cell_timeout=cell_timeout,
        check_timeout={id: t + CHECK_MARGIN for id, t in limits.items()},
        time_limit=time_limit,
    )
    prelude_errors = _errors(steps[0].cell)
    if prelude_errors and not stopped:
        stopped = f"the grader's set-up failed ({error_summary(prelude_errors[-1])})"
    if executed_to is not None:
        executed_to.parent.mkdir(parents=True, exist_ok=True)
        executed = executed_notebook(nb, steps)
        executed.metadata.setdefault("jitbook", {})["grading"] = {
            "sandbox": kernel.sandbox,
            "memory_gib": kernel.memory_gib,
        }
        nbformat.write(executed, executed_to)
    return rows_for(
        name, nb, steps, exercises, bytes.fromhex(key), handout, stopped, limits
    )


def submissions(folder: Path) -> list[Path]:
    """The notebooks in a folder and its subfolders (one per student, say), Jupyter
    checkpoints left out.
    """
    return sorted(
        p for p in Path(folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )


def executed_folder(out: Path) -> Path:
    """Where the executed submissions go: beside the grade sheet, ``<sheet
    name>-executed/``.
    """
    return Path(out).with_name(Path(out).stem + "-executed")


def grade_folder(
    folder: Path,
    out: Path,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
    kernel: Kernel | None = None,
    check_limit: float | None = None,
    log=print,
) -> list[Grade]:
    """Grade every notebook under ``folder``, each alone; write the grade sheet as CSV
    to ``out`` and

    each executed submission beside it. Every submission is read before any kernel
    runs, and graded from that copy.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no folder at {folder}; give the folder that holds the submitted "
            "notebooks."
        )
    kernel = kernel or Kernel(sandbox_mode(), env=GRADING_ENV if env is None else env)
    paths = submissions(folder)
    contents = {p: p.read_bytes() for p in paths}
    rows: list[Grade] = []
    executed = executed_folder(out)
    for n, path in enumerate(paths, 1):
        start, shown = time.perf_counter(), path.relative_to(folder).as_posix()
        log(f"[{n}/{len(paths)}] {shown}: grading ...", flush=True)
        graded = grade_notebook(
            path,
            shown,
            cell_timeout=cell_timeout,
            time_limit=time_limit,
            kernel=kernel,
            check_limit=check_limit,
            content=contents[path],
            executed_to=executed / shown,
        )
        rows += graded
        passed = sum(g.passed for g in graded if g.exercise)
        log(
            f"[{n}/{len(paths)}] {shown}: "
            f"{passed}/{sum(1 for g in graded if g.exercise)} passed "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    changed = [p for p in paths if not p.exists() or p.read_bytes() != contents[p]]
    for path in changed:
        log(
            f"warning: {path.relative_to(folder).as_posix()} changed on disk while "
            "grading; it was graded as it was before (grade in the bwrap sandbox to "
            "prevent this)",
            flush=True,
        )
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out)
    return rows


def write_csv(rows: list[Grade], out: Path) -> None:
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for g in rows:
            writer.writerow(
                [
                    g.student_file,
                    g.exercise,
                    "yes" if g.passed else "no",
                    g.message,
                    g.flags,
                ]
            )


# ---- the students' JupyterLab --------------------------------------------------------

NBGRADER_SERVER = tuple(
    f"nbgrader.server_extensions.{name}"
    for name in ("formgrader", "validate_assignment", "assignment_list", "course_list")
)


def lab_config(folder: Path) -> Path:
    """A Jupyter config folder (for ``JUPYTER_CONFIG_DIR``) in which JupyterLab shows no
    nbgrader:

    neither its instructor panels and Validate button nor its server extensions,
    whose start-up logs an error outside an nbgrader course.
    """
    folder = Path(folder)
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    server = {
        "ServerApp": {"jpserver_extensions": dict.fromkeys(NBGRADER_SERVER, False)}
    }
    (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=2))
    page = {"disabledExtensions": {"@jupyter/nbgrader": True}}
    (folder / "labconfig" / "page_config.json").write_text(json.dumps(page, indent=2))
    return folder


# ---- the exercise table of the "For teachers" page -----------------------------------


def _chapter_title(qmd: Path) -> tuple[str, str | None]:
    """A chapter's title and its ``sec-`` label, from its first line."""
    first = qmd.read_text().lstrip().splitlines()[0]
    match = re.fullmatch(r"#\s+(.+?)\s*(?:\{#(sec-[\w-]+)[^}]*\})?\s*", first)
    return (match.group(1), match.group(2)) if match else (qmd.stem, None)


def exercise_rows() -> list[dict]:
    """One row per registered exercise, chapters in book order, exercises in chapter
    order.
    """
    pages = {p.stem: p for p in harness.chapter_files()}
    chapters = sorted(
        {ex.chapter for ex in registry().values()},
        key=lambda stem: (
            list(pages).index(stem) if stem in pages else len(pages),
            stem,
        ),
    )
    rows = []
    for stem in chapters:
        qmd = pages.get(stem)
        text = qmd.read_text() if qmd is not None and qmd.exists() else ""
        title, sec = _chapter_title(qmd) if text else (stem, None)
        for id in chapter_exercises(stem):
            ex, label = registry()[id], "exr-" + id.replace(".", "-")
            rows.append(
                {
                    "chapter": f"@{sec}" if sec else title,
                    "exercise": f"@{label}" if f"#{label}" in text else id,
                    "id": f"`{id}`",
                    "topic": ex.topic,
                    "difficulty": "★" * ex.difficulty + "☆" * (3 - ex.difficulty),
                }
            )
    return rows


def exercise_counts() -> dict[str, int]:
    """How many exercises each chapter has, by chapter stem."""
    counts: dict[str, int] = {}
    for ex in registry().values():
        counts[ex.chapter] = counts.get(ex.chapter, 0) + 1
    return counts


# ---- command line --------------------------------------------------------------------


GRADES = harness.ROOT / "_build" / "grades" / "grades.csv"


def parser() -> argparse.ArgumentParser:
    """The command line: ``notebooks``, ``grade`` and ``lab-config``."""
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.classroom", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    nb_p = sub.add_parser("notebooks", help="write student and instructor notebooks")
    nb_p.add_argument("out_dir", type=Path)
    nb_p.add_argument(
        "chapters",
        nargs="*",
        type=Path,
        help="chapter .qmd files (default: every chapter with exercises)",
    )
    nb_p.add_argument(
        "--no-values",
        action="store_true",
        help="do not execute chapters to fill in inline values (they show as code)",
    )
    lab_p = sub.add_parser(
        "lab-config", help="write a Jupyter config folder that hides nbgrader in Lab"
    )
    lab_p.add_argument("folder", type=Path)
    grade_p = sub.add_parser(
        "grade", help="execute submitted notebooks and write a CSV of results"
    )
    grade_p.add_argument("submissions", type=Path)
    grade_p.add_argument(
        "--out",
        type=Path,
        default=GRADES,
        help="the grade sheet (default _build/grades/grades.csv); the executed "
        "submissions go beside it, in <name>-executed/",
    )
    grade_p.add_argument(
        "--cell-timeout",
        type=float,
        default=CELL_TIMEOUT,
        help=f"seconds one cell may run (default {CELL_TIMEOUT:g})",
    )
    grade_p.add_argument(
        "--time-limit",
        type=float,
        default=TIME_LIMIT,
        help=f"seconds one notebook may run (default {TIME_LIMIT:g})",
    )
    grade_p.add_argument(
        "--check-limit",
        type=float,
        default=None,
        help="seconds each check may run (default: each exercise's own limit)",
    )
    grade_p.add_argument(
        "--memory",
        type=float,
        default=MEMORY_LIMIT,
        help=f"GiB of memory each grading kernel may use (default {MEMORY_LIMIT:g})",
    )
    grade_p.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default="auto",
        help="bwrap: run each kernel in a bubblewrap sandbox; auto (default): when "
        "bubblewrap works here; none: a plain process",
    )
    grade_p.add_argument(
        "--full-size",
        action="store_true",
        help="run the chapters at full problem sizes (default: small, JITBOOK_SMALL=1; "
        "much slower)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "lab-config":
            print(lab_config(args.folder))
            return 0
        if args.command == "notebooks":
            chosen = args.chapters or None
            for path in write_notebooks(
                args.out_dir, chosen, values=not args.no_values
            ):
                print(path)
            return 0
        start = time.perf_counter()
        env = {size.ENV_VAR: "0"} if args.full_size else GRADING_ENV
        sizes = "full" if args.full_size else "small (JITBOOK_SMALL=1)"
        kernel = Kernel(sandbox_mode(args.sandbox), args.memory, env)
        confined = (
            "in a bubblewrap sandbox (read-only system, private /tmp, only its own "
            "folder writable)"
            if kernel.sandbox == "bwrap"
            else "as a plain process (no sandbox: bubblewrap is not in use)"
        )
        print(
            f"Grading {args.submissions} at {sizes} problem sizes, each notebook in a "
            f"fresh kernel {confined}, with {kernel.memory_gib:g} GiB of memory.",
            flush=True,
        )
        rows = grade_folder(
            args.submissions,
            args.out,
            cell_timeout=args.cell_timeout,
            time_limit=args.time_limit,
            kernel=kernel,
            check_limit=args.check_limit,
        )
    except (FileNotFoundError, ValueError) as err:
        print(err, file=sys.stderr)
        return 1
    print(
        f"{sum(g.passed for g in rows)} of {sum(1 for g in rows if g.exercise)} "
        f"exercises passed -> {args.out}, executed notebooks in "
        f"{executed_folder(args.out)} ({time.perf_counter() - start:.0f} s)"
    )
    return 0
