"""Handouts: student and instructor notebooks from a chapter, solutions out."""

import ast
import copy
import re
from pathlib import Path
from typing import TextIO

import nbformat

from jitbook.exercises import registry
from jitbook.site import downloads, harness, wheel

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
FOLD_OPTIONS = (
    "code-fold",
    "code-summary",
)  # Quarto folds solutions on the site; a student has nothing to unfold
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")
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


def check_calls(source: str) -> list[str]:
    """The exercise ids of the ``check("...")`` calls a cell makes, in order: calls in
    code, never in a comment or a string.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
        return CHECK_CALL.findall(code)
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
        == "check"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def only_checks(source: str) -> bool:
    """Whether a cell only calls ``check`` (the grader's check replaces it)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return bool(body) and all(
        isinstance(s, ast.Expr) and check_calls(ast.unparse(s)) for s in body
    )


def checked_exercise(cell) -> str | None:
    """The exercise id a check cell checks, from its ``check("...")`` call (None for
    other cells).
    """
    found = check_calls(cell.source) if cell.cell_type == "code" else []
    return found[0] if found else None


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
    students_only: bool = False,
    full_size: bool = False,
    log=print,
    progress: TextIO | None = None,
) -> list[Path]:
    """Write ``student/<stem>.ipynb`` (and, unless ``students_only``,
    ``instructor/<stem>.ipynb``) for every chapter with exercises; the student notebooks
    install the package, its wheel written beside them, as the site's downloads do.

    With ``values``, a chapter without an up-to-date executed copy in
    ``_build/notebooks`` is executed first, at the small sizes unless ``full_size``
    (its values then read as the small run gives them), so the student notebook shows
    the values the text quotes; how many chapters that takes is said first, and
    ``progress`` (a stream) hears which cell runs whenever a chapter is silent for 10 s.
    """
    out_dir = Path(out_dir)
    qmds = [
        Path(q) for q in (chapters if chapters is not None else harness.chapter_files())
    ]
    for qmd in qmds:
        if not qmd.exists():
            raise FileNotFoundError(
                f"no chapter at {qmd}; name a .qmd file listed in _quarto.yml."
            )
    log(f"reading {len(qmds)} chapter(s) for their exercises ...", flush=True)
    chosen = [(q, instructor_notebook(q)) for q in qmds]
    chosen = [(q, nb) for q, nb in chosen if has_exercises(nb)]
    to_run = [q for q, _ in chosen if values and executed_copy(q) is None]
    if to_run:
        sizes = "full" if full_size else "small (JITBOOK_SMALL=1)"
        log(
            f"{len(to_run)} chapter(s) have no executed copy: running them at {sizes} "
            f"sizes to fill in the values their text quotes (about "
            f"{len(to_run) * (5 if full_size else 1)} minute(s) here; --no-values "
            "skips it) ...",
            flush=True,
        )
    written = []
    if chosen:
        # as the site's downloads: the package's wheel beside the student notebooks,
        # and a first cell that installs it where jitbook is missing (Jupyter, Colab)
        package = wheel.build(out_dir / "student").name
    for qmd, instructor in chosen:
        executed = executed_copy(qmd)
        if executed is None and values:
            log(f"executing {qmd.name} ...", flush=True)
            executed = _execute(qmd, full_size, progress)
        student = downloads.with_setup(
            student_notebook(qmd, executed), package, downloads.site_address()
        )
        kinds = [("student", student)]
        if not students_only:
            kinds.insert(0, ("instructor", instructor))
        for kind, nb in kinds:
            path = out_dir / kind / f"{qmd.stem}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            written.append(path)
            log(str(path), flush=True)
    return written


def _execute(qmd: Path, full_size: bool, progress=None) -> nbformat.NotebookNode:
    """The chapter executed at the sizes asked for, into a scratch folder (the
    reader's full-size notebooks in ``_build/notebooks`` are left alone).
    """
    import os
    import tempfile

    from jitbook import size

    before = os.environ.get(size.ENV_VAR)
    os.environ[size.ENV_VAR] = "0" if full_size else "1"
    try:
        with tempfile.TemporaryDirectory() as scratch:
            path = downloads.run(qmd, Path(scratch), progress=progress)
            return nbformat.read(path, as_version=4)
    finally:
        if before is None:
            os.environ.pop(size.ENV_VAR, None)
        else:
            os.environ[size.ENV_VAR] = before
