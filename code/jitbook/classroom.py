"""The classroom: student and instructor notebooks from the chapters, and grading of completed notebooks.

    python -m jitbook.classroom notebooks OUTDIR                     # OUTDIR/student/*.ipynb, OUTDIR/instructor/*.ipynb
    python -m jitbook.classroom grade SUBMISSIONS_DIR --out grades.csv

Solutions sit in the chapters between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, the markers nbgrader
uses, and the cells carry nbgrader's cell metadata, so a teacher who uses nbgrader can take the notebooks as
they are. Grading executes every submission afresh (stored outputs could be edited) and reads the check
reports that ``jitbook.exercises.check`` leaves in the outputs.
"""

import argparse
import copy
import csv
import dataclasses
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from . import book, size
from .exercises import registry, reports

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
# Grading checks the students' code, not the machine's speed: the kernels run the chapters at their small
# problem sizes unless the teacher asks for full ones (the PLN chapter's full-size cells take minutes).
GRADING_ENV = {size.ENV_VAR: "1"}
NBGRADER_SCHEMA = (
    3  # the cell metadata schema of nbgrader 0.9 (nbgrader/nbgraderformat/v3.json)
)
STUDENT_NOTE = (
    "*Student notebook.* Write your code where a cell says `# YOUR CODE HERE` (delete the "
    "`raise NotImplementedError()` line), then run the `check(...)` cell below it for feedback. "
    "Text shown as `{python} ...` is a value the book computes when it is built: run the cells "
    "above it to see it."
)


# ---- notebooks --------------------------------------------------------------------------------------------


def check_markers(source: str) -> None:
    """Raise a ValueError naming the line when a cell's BEGIN/END SOLUTION markers do not pair up."""
    open_at = None
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == BEGIN and open_at is not None:
            raise ValueError(
                f"line {number}: `{BEGIN}` inside another solution region; close it with `{END}`."
            )
        if line.strip() == BEGIN:
            open_at = number
        elif line.strip() == END and open_at is None:
            raise ValueError(f"line {number}: `{END}` without a `{BEGIN}` above it.")
        elif line.strip() == END:
            open_at = None
    if open_at is not None:
        raise ValueError(
            f"line {open_at}: a `{BEGIN}` region is never closed: add `{END}` after the solution."
        )


def clear_solutions(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's ClearSolutions: each solution region, markers included, becomes the stub at its indentation."""
    from nbgrader.preprocessors import ClearSolutions

    nb, _ = ClearSolutions(
        begin_solution_delimeter=BEGIN,
        end_solution_delimeter=END,
        code_stub={"python": "\n".join(STUB)},
    ).preprocess(nb, {})
    return nb


def solution_regions(source: str) -> list[str]:
    """The code between each BEGIN and END SOLUTION marker of a cell (or a chapter), one string per region."""
    return [
        m.strip("\n")
        for m in re.findall(
            rf"^[ \t]*{BEGIN}[ \t]*\n(.*?)^[ \t]*{END}[ \t]*$", source, re.M | re.S
        )
    ]


def _drop_fold_options(source: str) -> str:
    lines = source.splitlines()
    keep = [
        l
        for l in lines
        if not (
            l.startswith("#|") and l[2:].strip().split(":")[0].strip() in FOLD_OPTIONS
        )
    ]
    return "\n".join(keep)


def is_solution_cell(cell) -> bool:
    return cell.cell_type == "code" and any(
        l.strip() == BEGIN for l in cell.source.splitlines()
    )


def checked_exercise(cell) -> str | None:
    """The exercise id a check cell checks, from its ``check("...")`` call (None for other cells)."""
    match = CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
    return match.group(1) if match else None


def _grade_id(exercise_id: str, role: str) -> str:
    return re.sub(
        r"[^A-Za-z0-9_-]", "_", f"{exercise_id}-{role}"
    )  # nbgrader allows letters, digits, _ and -


def _nbgrader(grade_id: str, *, solution: bool) -> dict:
    """nbgrader metadata: solution cells are the student's to edit, check cells are read-only."""
    return {
        "grade": False,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": NBGRADER_SCHEMA,
        "solution": solution,
    }


def mark_exercises(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Tag each solution cell with the exercise whose check cell follows it, and each check cell with its own."""
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
    """The chapter as an unexecuted notebook with its solutions in place, exercise cells marked."""
    return mark_exercises(book.to_notebook(qmd))


def student_notebook(qmd: Path) -> nbformat.NotebookNode:
    """The chapter without its solutions (nbgrader stubs instead), fold options dropped, outputs cleared."""
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
            cell.source = _drop_fold_options(cell.source)
            options = cell.metadata.get("jitbook", {}).get("options", {})
            for key in FOLD_OPTIONS:
                options.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb = clear_solutions(nb)
    nb.cells.insert(
        1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0,
        nbformat.v4.new_markdown_cell(STUDENT_NOTE),
    )
    return nb


def has_exercises(nb: nbformat.NotebookNode) -> bool:
    """Whether a chapter's notebook has solution cells or checks its own exercises (not another chapter's)."""
    stem = Path(nb.metadata.get("jitbook", {}).get("source", "")).stem
    return any(
        is_solution_cell(c) or (checked_exercise(c) or "").split(".")[0] == stem
        for c in nb.cells
    )


def write_notebooks(out_dir: Path, chapters: list[Path] | None = None) -> list[Path]:
    """Write ``student/<stem>.ipynb`` and ``instructor/<stem>.ipynb`` for every chapter with exercises."""
    out_dir = Path(out_dir)
    written = []
    for qmd in chapters if chapters is not None else book.chapter_files():
        qmd = Path(qmd)
        if not qmd.exists():
            raise FileNotFoundError(
                f"no chapter at {qmd}; name a .qmd file listed in _quarto.yml."
            )
        instructor = instructor_notebook(qmd)
        if not has_exercises(instructor):
            continue
        for kind, nb in (
            ("instructor", instructor),
            ("student", student_notebook(qmd)),
        ):
            path = out_dir / kind / f"{qmd.stem}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            written.append(path)
    return written


# ---- grading ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grade:
    """One row of the grade sheet."""

    student_file: str
    exercise: str
    passed: bool
    message: str


FIELDS = ("student_file", "exercise", "passed", "message")


class _OutOfTime(Exception):
    """The whole-notebook time limit ran out between two cells."""


def chapter_of(
    path: Path, nb: nbformat.NotebookNode | None, stems: list[str]
) -> str | None:
    """The chapter a submission belongs to: notebook metadata first, else the longest chapter stem in its name."""
    source = (nb or {}).get("metadata", {}).get("jitbook", {}).get("source")
    if source and Path(source).stem in stems:
        return Path(source).stem
    named = [s for s in stems if s in path.stem]
    return max(named, key=len) if named else None


def chapter_exercises(stem: str) -> list[str]:
    """The exercise ids of a chapter, in the order its check cells appear, then any others registered for it."""
    ids = [id for id, ex in registry().items() if ex.chapter == stem]
    qmd = next((p for p in book.chapter_files() if p.stem == stem), None)
    order = (
        [checked_exercise(c) for c in book.to_notebook(qmd).cells]
        if qmd and qmd.exists()
        else []
    )
    return sorted(ids, key=lambda id: order.index(id) if id in order else len(order))


def _sections(cell) -> list[str]:
    """The ``##`` headings in a Markdown cell (a cell may hold several, and prose around them)."""
    if cell.cell_type != "markdown":
        return []
    return [line for line in cell.source.splitlines() if line.startswith("## ")]


def body_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Code cells of the chapter's body: after its set-up (the cells before the first ``##`` section) and
    before ``## Exercises``. Grading skips them: the exercises need only the set-up, and the body holds the
    chapter's measurements, which would make grading a class take hours."""
    sections = [(i, h) for i, c in enumerate(nb.cells) for h in _sections(c)]
    exercises = next((i for i, h in sections if h.startswith("## Exercises")), None)
    if exercises is None:
        return []
    return [
        i for i in range(sections[0][0], exercises) if nb.cells[i].cell_type == "code"
    ]


def execute_submission(
    nb: nbformat.NotebookNode,
    cell_timeout: float,
    time_limit: float,
    env: dict[str, str] | None = None,
) -> tuple[int | None, str]:
    """Run a notebook in a fresh kernel, errors allowed; return the cell index it stopped at (None: ran to the end).

    ``env`` is added to this process's environment for the kernel only (``GRADING_ENV`` by default).
    """
    from nbclient import NotebookClient

    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = (
                [],
                None,
            )  # never grade what was stored: run it again
    for i in body_cells(nb):
        nb.cells[i].metadata.setdefault("tags", []).append("skip-execution")
    current = {"index": None, "deadline": None}

    def on_cell_start(
        cell, cell_index
    ):  # the clock starts with the first cell, not with the kernel
        current["index"] = cell_index
        current["deadline"] = current["deadline"] or time.monotonic() + time_limit
        if time.monotonic() > current["deadline"]:
            raise _OutOfTime()

    with tempfile.TemporaryDirectory(prefix="jitbook-grade-") as workdir:
        client = NotebookClient(
            nb,
            timeout=cell_timeout,
            kernel_name="python3",
            allow_errors=True,
            extra_arguments=book.QUIET_KERNEL,
            interrupt_on_timeout=False,
            resources={"metadata": {"path": workdir}},
            on_cell_start=on_cell_start,
        )
        try:
            client.execute(env={**os.environ, **(GRADING_ENV if env is None else env)})
        except _OutOfTime:
            return current[
                "index"
            ], f"the notebook ran out of its {time_limit:g} s time limit"
        except Exception as err:  # a dead kernel, a cell over its time limit, a kernel that never started
            return current["index"] or 0, _stop_reason(err, cell_timeout)
    return None, ""


def _stop_reason(err: Exception, cell_timeout: float) -> str:
    """Why execution stopped, in words for the grade sheet."""
    name = type(err).__name__
    if name == "DeadKernelError":
        return "the kernel died (the code crashed or exited the Python process)"
    if name == "CellTimeoutError":
        return f"a cell ran longer than {cell_timeout:g} s and was stopped"
    first_line = (str(err).strip().splitlines() or [""])[0]
    return f"execution stopped with {name}: {first_line}"


def _cell_error(cell) -> str:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    return (
        f" (it raised {errors[-1]['ename']}: {errors[-1]['evalue']})" if errors else ""
    )


def _code(source: str) -> str:
    """A cell's code without Quarto options and blank lines, for comparing a submission with its handout."""
    return "\n".join(
        l.rstrip() for l in source.splitlines() if l.strip() and not l.startswith("#|")
    )


def handed_out(qmd: Path) -> set[str]:
    """The solution cells of a chapter's student notebook, as handed out (stubs in place)."""
    return {
        _code(c.source)
        for c in student_notebook(qmd).cells
        if c.metadata.get("jitbook", {}).get("role") == "solution"
    }


def grade_executed(
    name: str,
    nb: nbformat.NotebookNode,
    exercises: list[str],
    stopped_at: int | None,
    reason: str,
    stubs: set[str] = frozenset(),
) -> list[Grade]:
    """Rows for one executed submission: each exercise's last check report, or why there is none.

    ``stubs`` are the handed-out solution cells: an exercise whose solution cells all still read as handed
    out, and whose check did not pass, was not attempted.
    """
    rows = []
    for exercise_id in exercises:
        checks = [
            i for i, c in enumerate(nb.cells) if checked_exercise(c) == exercise_id
        ]
        solutions = [
            c
            for c in nb.cells
            if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
            and c.metadata["jitbook"].get("role") == "solution"
        ]
        shown = [
            r
            for r in reports(nb.cells[i] for i in checks)
            if r.get("exercise") == exercise_id
        ]
        if shown and shown[-1].get("passed") is True:
            rows.append(Grade(name, exercise_id, True, ""))
        elif solutions and all(_code(c.source) in stubs for c in solutions):
            rows.append(
                Grade(
                    name,
                    exercise_id,
                    False,
                    "not attempted: its solution cell is as it was handed out",
                )
            )
        elif shown:
            rows.append(
                Grade(name, exercise_id, False, str(shown[-1].get("message", "")))
            )
        elif not checks:
            rows.append(
                Grade(
                    name,
                    exercise_id,
                    False,
                    f'not attempted: the notebook has no check("{exercise_id}") cell',
                )
            )
        elif stopped_at is not None and checks[-1] >= stopped_at:
            rows.append(
                Grade(
                    name,
                    exercise_id,
                    False,
                    f"not reached: {reason} at cell {stopped_at + 1} of {len(nb.cells)}, "
                    f"before this exercise's check",
                )
            )
        else:
            error = _cell_error(nb.cells[checks[-1]])
            rows.append(
                Grade(
                    name,
                    exercise_id,
                    False,
                    f"not checked: its check cell ran but showed no report{error}",
                )
            )
    return rows


def grade_notebook(
    path: Path,
    name: str | None = None,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
) -> list[Grade]:
    """Execute one submission in a fresh kernel and grade every exercise of its chapter; never raises for it."""
    path = Path(path)
    name = name or path.name
    stems = [p.stem for p in book.chapter_files() if p.exists()]
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as err:
        return [
            Grade(
                name,
                "",
                False,
                f"could not read the notebook ({type(err).__name__}: {err})",
            )
        ]
    stem = chapter_of(path, nb, stems)
    exercises = chapter_exercises(stem) if stem else []
    if not exercises:
        what = (
            f"chapter {stem!r} has no exercises"
            if stem
            else (
                "could not tell which chapter this notebook belongs to: name the file after the chapter, "
                "e.g. why-compile.ipynb"
            )
        )
        return [Grade(name, "", False, what)]
    stubs = handed_out(next(p for p in book.chapter_files() if p.stem == stem))
    stopped_at, reason = execute_submission(nb, cell_timeout, time_limit, env)
    return grade_executed(name, nb, exercises, stopped_at, reason, stubs)


def submissions(folder: Path) -> list[Path]:
    """The notebooks in a folder and its subfolders (one per student, say), Jupyter checkpoints left out."""
    return sorted(
        p for p in Path(folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
    )


def grade_folder(
    folder: Path,
    out: Path,
    *,
    cell_timeout: float = CELL_TIMEOUT,
    time_limit: float = TIME_LIMIT,
    env: dict[str, str] | None = None,
    log=print,
) -> list[Grade]:
    """Grade every notebook under ``folder`` and write the grade sheet as CSV to ``out``; one line per notebook."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no folder at {folder}; give the folder that holds the submitted notebooks."
        )
    rows: list[Grade] = []
    paths = submissions(folder)
    for n, path in enumerate(paths, 1):
        start, shown = time.perf_counter(), path.relative_to(folder).as_posix()
        log(f"[{n}/{len(paths)}] {shown}: grading ...", flush=True)
        graded = grade_notebook(
            path, shown, cell_timeout=cell_timeout, time_limit=time_limit, env=env
        )
        rows += graded
        passed = sum(g.passed for g in graded if g.exercise)
        log(
            f"[{n}/{len(paths)}] {shown}: {passed}/{sum(1 for g in graded if g.exercise)} passed "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    write_csv(rows, out)
    return rows


def write_csv(rows: list[Grade], out: Path) -> None:
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(FIELDS)
        for g in rows:
            writer.writerow(
                [g.student_file, g.exercise, "yes" if g.passed else "no", g.message]
            )


# ---- the exercise table of the "For teachers" page --------------------------------------------------------


def _chapter_title(qmd: Path) -> tuple[str, str | None]:
    """A chapter's title and its ``sec-`` label, from its first line."""
    first = qmd.read_text().lstrip().splitlines()[0]
    match = re.fullmatch(r"#\s+(.+?)\s*(?:\{#(sec-[\w-]+)[^}]*\})?\s*", first)
    return (match.group(1), match.group(2)) if match else (qmd.stem, None)


def exercise_rows() -> list[dict]:
    """One row per registered exercise, chapters in book order, exercises in chapter order."""
    pages = {p.stem: p for p in book.chapter_files()}
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


# ---- command line -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
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
    grade_p = sub.add_parser(
        "grade", help="execute submitted notebooks and write a CSV of results"
    )
    grade_p.add_argument("submissions", type=Path)
    grade_p.add_argument("--out", type=Path, default=Path("grades.csv"))
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
        "--full-size",
        action="store_true",
        help="run the chapters at full problem sizes (default: small, JITBOOK_SMALL=1; much slower)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "notebooks":
            for path in write_notebooks(args.out_dir, args.chapters or None):
                print(path)
            return 0
        start = time.perf_counter()
        env = {size.ENV_VAR: "0"} if args.full_size else GRADING_ENV
        sizes = "full" if args.full_size else "small (JITBOOK_SMALL=1)"
        print(
            f"Grading {args.submissions} at {sizes} problem sizes, each notebook in a fresh kernel.",
            flush=True,
        )
        rows = grade_folder(
            args.submissions,
            args.out,
            cell_timeout=args.cell_timeout,
            time_limit=args.time_limit,
            env=env,
        )
    except (FileNotFoundError, ValueError) as err:
        print(err, file=sys.stderr)
        return 1
    print(
        f"{sum(g.passed for g in rows)} of {sum(1 for g in rows if g.exercise)} exercises passed -> {args.out} "
        f"({time.perf_counter() - start:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
