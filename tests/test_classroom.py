"""The classroom: student notebooks hold no solutions, grading re-runs the checks, and the chapters keep the form."""

import copy
import csv
import re
from pathlib import Path

import nbformat
import pytest

from jitbook import book, classroom, why_compile
from jitbook.exercises import check, registry

NBGRADER_KEYS = {"schema_version", "grade", "locked", "solution", "task", "grade_id", "points", "checksum",
                 "cell_type"}  # nbgrader/nbgraderformat/v3.json (nbgrader 0.9) allows no other key


def chapters() -> list[Path]:
    return [p for p in book.chapter_files() if p.exists()]


def code_lines(nb) -> list[str]:
    return [line.strip() for c in nb.cells if c.cell_type == "code" for line in c.source.splitlines() if line.strip()]


# ---- solutions out, stubs in ------------------------------------------------------------------------------

def test_clear_solutions_keeps_the_region_indentation():
    source = ("def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\n"
              "### BEGIN SOLUTION\ng = jax.jit(f)\n### END SOLUTION\nprint('kept')")
    nb = classroom.mark_exercises(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(source), nbformat.v4.new_code_cell('check("demo.f")')]))
    assert classroom.clear_solutions(nb).cells[0].source == (
        "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n"
        "# YOUR CODE HERE\nraise NotImplementedError()\nprint('kept')")
    assert classroom.solution_regions(source) == ["    return x + y", "g = jax.jit(f)"]


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without a `### BEGIN SOLUTION`"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another solution region"),
])
def test_broken_solution_markers_are_a_clear_error(source, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        classroom.check_markers(source)


def test_broken_markers_in_a_chapter_name_the_chapter_and_line(tmp_path):
    qmd = tmp_path / "demo.qmd"
    qmd.write_text("# Demo {#sec-demo}\n\n```{python}\n### BEGIN SOLUTION\nx = 1\n```\n\n```{python}\ncheck(\"demo.x\")\n```\n")
    with pytest.raises(ValueError, match=re.escape("demo.qmd, code chunk at line 3: line 1: a `### BEGIN")):
        classroom.student_notebook(qmd)


def test_notebooks_command_writes_student_and_instructor_notebooks_for_every_chapter(tmp_path):
    assert classroom.main(["notebooks", str(tmp_path)]) == 0
    with_exercises = [p for p in chapters() if classroom.has_exercises(book.to_notebook(p))]
    assert any(p.stem == "why-compile" for p in with_exercises)
    assert sorted(p.name for p in (tmp_path / "student").iterdir()) == sorted(f"{p.stem}.ipynb" for p in with_exercises)
    for qmd in with_exercises:
        student = nbformat.read(tmp_path / "student" / f"{qmd.stem}.ipynb", as_version=4)
        instructor = nbformat.read(tmp_path / "instructor" / f"{qmd.stem}.ipynb", as_version=4)
        regions = classroom.solution_regions(qmd.read_text())
        assert regions, f"{qmd.name} has check cells but no ### BEGIN SOLUTION region"
        # No solution code in the student notebook: each solution line occurs there no more often than in
        # the chapter's code outside the solutions (a line like `return x` may well occur elsewhere).
        instructor_code = "\n".join(c.source for c in instructor.cells if c.cell_type == "code")
        outside_code = re.sub(rf"^[ \t]*{classroom.BEGIN}.*?{classroom.END}[ \t]*$", "", instructor_code,
                              flags=re.M | re.S)
        outside = code_lines(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outside_code)]))
        student_code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
        student_lines = code_lines(student)
        for region in regions:
            assert region.strip() in instructor_code
            assert student_code.count(region.strip()) <= outside_code.count(region.strip())
            for line in {l.strip() for l in region.splitlines() if l.strip()}:
                assert student_lines.count(line) <= outside.count(line), (
                    f"{qmd.name}: solution line {line!r} in the student notebook")
        assert student_lines.count(classroom.STUB[1]) >= len(regions)
        assert student.metadata["jitbook"]["source"] == qmd.name
        for cell in student.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        solutions = [c for c in student.cells if c.metadata.get("jitbook", {}).get("role") == "solution"]
        for cell in solutions:
            assert not re.search(r"^#\|\s*code-(fold|summary)", cell.source, re.M), cell.source
            assert classroom.STUB[0] in cell.source
        _assert_nbgrader_metadata(student)
        _assert_nbgrader_metadata(instructor)


def _assert_nbgrader_metadata(nb):
    marked = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
    assert marked
    for meta in marked:
        assert set(meta) <= NBGRADER_KEYS and meta["schema_version"] == classroom.NBGRADER_SCHEMA
        assert {"grade", "locked", "solution"} <= set(meta) and re.fullmatch(r"[A-Za-z0-9_\-]+", meta["grade_id"])
    ids = [m["grade_id"] for m in marked]
    assert len(ids) == len(set(ids)), f"duplicate nbgrader grade_id: {ids}"
    for cell in nb.cells:
        if classroom.is_solution_cell(cell) or cell.metadata.get("jitbook", {}).get("role") == "solution":
            assert cell.metadata["nbgrader"]["solution"] is True and cell.metadata["nbgrader"]["locked"] is False
        if classroom.checked_exercise(cell):
            assert cell.metadata["nbgrader"]["locked"] is True and cell.metadata["nbgrader"]["solution"] is False


def test_notebooks_command_rejects_a_missing_chapter(tmp_path, capsys):
    assert classroom.main(["notebooks", str(tmp_path), str(tmp_path / "nope.qmd")]) == 1
    assert "no chapter at" in capsys.readouterr().err


# ---- the exercise form in every chapter -------------------------------------------------------------------

@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_every_solution_cell_is_folded_on_the_site(page):
    for cell in book.to_notebook(page).cells:
        if classroom.is_solution_cell(cell):
            options = cell.metadata["jitbook"]["options"]
            line = cell.metadata["jitbook"]["qmd_line"]
            assert options.get("code-fold") is True, (
                f"{page.name}, chunk at line {line}: a solution cell needs `#| code-fold: true`")


@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_every_exercise_of_a_chapter_has_a_solution_and_a_check_cell(page):
    nb = classroom.instructor_notebook(page)
    checked = [classroom.checked_exercise(c) for c in nb.cells if classroom.checked_exercise(c)]
    solved = {c.metadata["jitbook"]["exercise"] for c in nb.cells
              if c.metadata.get("jitbook", {}).get("role") == "solution"}
    registered = {id for id, ex in registry().items() if ex.chapter == page.stem}
    assert registered <= set(checked), f"{page.name}: exercises without a check cell: {registered - set(checked)}"
    unknown = set(checked) - set(registry())
    assert not unknown, f"{page.name}: checks of unknown exercises: {unknown}"
    assert registered <= solved, (
        f"{page.name}: exercises without a ### BEGIN SOLUTION cell above their check: {registered - solved}")


def test_exercise_table_lists_every_registered_exercise():
    rows = classroom.exercise_rows()
    assert sorted(r["id"].strip("`") for r in rows) == sorted(registry())
    assert sum(classroom.exercise_counts().values()) == len(rows)
    row = next(r for r in rows if r["id"] == "`why-compile.break-even`")
    assert row == {"chapter": "@sec-why-compile", "exercise": "@exr-why-compile-break-even",
                   "id": "`why-compile.break-even`", "topic": registry()["why-compile.break-even"].topic,
                   "difficulty": "★★☆"}


# ---- grading ----------------------------------------------------------------------------------------------

def test_chapter_of_reads_metadata_then_the_file_name():
    stems = ["why-compile", "why", "tracing"]
    nb = nbformat.v4.new_notebook(metadata={"jitbook": {"source": "tracing.qmd"}})
    assert classroom.chapter_of(Path("alice.ipynb"), nb, stems) == "tracing"
    assert classroom.chapter_of(Path("alice-why-compile.ipynb"), nbformat.v4.new_notebook(), stems) == "why-compile"
    assert classroom.chapter_of(Path("alice.ipynb"), nbformat.v4.new_notebook(), stems) is None


def _solution(nb, exercise_id):
    return next(c for c in nb.cells if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
                and c.metadata["jitbook"]["role"] == "solution")


def wrong_run_and_wait(fn, *args):
    fn(*args)  # forgets to return the result: the checker's message for it does not depend on timing


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade a folder of sample submissions for why-compile with the command line; return the CSV rows."""
    out = tmp_path_factory.mktemp("handout")
    classroom.write_notebooks(out, [book.ROOT / "chapters" / "why-compile.qmd"])
    instructor = nbformat.read(out / "instructor" / "why-compile.ipynb", as_version=4)
    student = nbformat.read(out / "student" / "why-compile.ipynb", as_version=4)
    subs = tmp_path_factory.mktemp("submissions")
    (subs / "group-b").mkdir()
    nbformat.write(instructor, subs / "correct.ipynb")

    wrong = copy.deepcopy(student)
    _solution(wrong, "why-compile.ready").source = "def run_and_wait(fn, *args):\n    fn(*args)\n"
    _solution(wrong, "why-compile.fuse").source = "fast_standardize = why_compile.standardize_softplus\n"
    for cell in wrong.cells:  # forged outputs: every check cell claims a pass
        if classroom.checked_exercise(cell):
            report = {"exercise": classroom.checked_exercise(cell), "passed": True, "checks": [], "message": "",
                      "hint": ""}
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "PASSED"},
                                                   metadata={"jitbook_check": report})]
    nbformat.write(wrong, subs / "group-b" / "wrong.ipynb")

    crashing = copy.deepcopy(instructor)
    first_check = next(i for i, c in enumerate(crashing.cells) if classroom.checked_exercise(c))
    crashing.cells.insert(first_check + 1, nbformat.v4.new_code_cell("import os\nos._exit(1)"))
    del crashing.metadata["jitbook"]  # the chapter must then come from the file name
    nbformat.write(crashing, subs / "crashing-why-compile.ipynb")
    (subs / "not-a-notebook.ipynb").write_text("{ this is not JSON")

    csv_path = subs.parent / "grades.csv"
    assert classroom.main(["grade", str(subs), "--out", str(csv_path)]) == 0
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f)), len(crashing.cells), first_check


def test_grading_re_runs_checks_and_writes_the_expected_csv(graded):
    rows, crashing_cells, first_check = graded
    assert list(rows[0]) == list(classroom.FIELDS)
    stopped = (f"not reached: the kernel died (the code crashed or exited the Python process) at cell "
               f"{first_check + 2} of {crashing_cells}, before this exercise's check")
    expected = [
        ("correct.ipynb", "why-compile.ready", "yes", ""),
        ("correct.ipynb", "why-compile.fuse", "yes", ""),
        ("correct.ipynb", "why-compile.break-even", "yes", ""),
        ("crashing-why-compile.ipynb", "why-compile.ready", "yes", ""),
        ("crashing-why-compile.ipynb", "why-compile.fuse", "no", stopped),
        ("crashing-why-compile.ipynb", "why-compile.break-even", "no", stopped),
        ("group-b/wrong.ipynb", "why-compile.ready", "no", check("why-compile.ready", wrong_run_and_wait).message),
        ("group-b/wrong.ipynb", "why-compile.fuse", "no",
         check("why-compile.fuse", why_compile.standardize_softplus).message),
        ("group-b/wrong.ipynb", "why-compile.break-even", "no",
         "not attempted: its solution cell is as it was handed out"),
    ]
    got = [tuple(r.values()) for r in rows if r["student_file"] != "not-a-notebook.ipynb"]
    assert got == expected
    unreadable = [r for r in rows if r["student_file"] == "not-a-notebook.ipynb"]
    assert len(unreadable) == 1 and unreadable[0]["passed"] == "no"
    assert unreadable[0]["message"].startswith("could not read the notebook")


def test_a_partly_filled_solution_cell_counts_as_attempted():
    handout = "class A:\n    def f(self):\n        # YOUR CODE HERE\n        raise NotImplementedError()\n\n" \
              "    def g(self):\n        # YOUR CODE HERE\n        raise NotImplementedError()"
    partly = handout.replace("raise NotImplementedError()", "return 1", 1)
    report = {"exercise": "demo.a", "passed": False, "checks": [], "message": "g is missing", "hint": ""}

    def graded(source):
        solution = nbformat.v4.new_code_cell(source, metadata={"jitbook": {"exercise": "demo.a", "role": "solution"}})
        checker = nbformat.v4.new_code_cell('check("demo.a")', outputs=[nbformat.v4.new_output(
            "display_data", data={"text/plain": ""}, metadata={"jitbook_check": report})])
        nb = nbformat.v4.new_notebook(cells=[solution, checker])
        [row] = classroom.grade_executed("s.ipynb", nb, ["demo.a"], None, "", {classroom._code(handout)})
        return row.message

    assert graded(partly) == "g is missing"
    assert graded("#| code-fold: true\n" + handout + "\n") == "not attempted: its solution cell is as it was handed out"


def _tiny_submission(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["jitbook"] = {"source": "why-compile.qmd"}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_a_hanging_cell_is_stopped_and_the_rest_is_not_reached(tmp_path):
    path = _tiny_submission(
        tmp_path / "hangs.ipynb",
        "import jax\nfrom jitbook.exercises import check\n"
        "def run_and_wait(fn, *args):\n    return jax.block_until_ready(fn(*args))",
        "1 / 0", 'check("why-compile.ready")', "while True:\n    pass", 'check("why-compile.fuse")')
    rows = classroom.grade_notebook(path, cell_timeout=3)
    assert [(r.exercise, r.passed) for r in rows] == [  # the error in cell 2 did not stop the run
        ("why-compile.ready", True), ("why-compile.fuse", False), ("why-compile.break-even", False)]
    assert rows[1].message == ("not reached: a cell ran longer than 3 s and was stopped at cell 4 of 5, "
                               "before this exercise's check")
    assert rows[2].message == 'not attempted: the notebook has no check("why-compile.break-even") cell'


def test_a_notebook_over_its_time_limit_stops_between_cells(tmp_path):
    source = "import os, time\nprint(os.getcwd())\ntime.sleep(1.5)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for _ in range(4)])
    stopped_at, reason = classroom.execute_submission(nb, cell_timeout=30, time_limit=1)
    assert stopped_at == 1 and reason == "the notebook ran out of its 1 s time limit"
    assert nb.cells[0].execution_count == 1 and nb.cells[2].execution_count is None
    assert Path(nb.cells[0].outputs[0]["text"].strip()).name.startswith("jitbook-grade-")  # a temporary folder


@pytest.mark.parametrize("flags, expected", [([], "1"), (["--full-size"], "0")])
def test_grading_runs_small_sizes_unless_asked_for_full_ones(tmp_path, monkeypatch, flags, expected):
    monkeypatch.setenv("JITBOOK_SMALL", "0" if expected == "1" else "1")  # the grader's own setting must not leak in
    seen = {}
    monkeypatch.setattr(classroom, "grade_notebook", lambda path, name, **kw: seen.setdefault("env", kw["env"]) and [])
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "why-compile.ipynb")
    assert classroom.main(["grade", str(tmp_path), "--out", str(tmp_path / "g.csv"), *flags]) == 0
    assert seen["env"] == {"JITBOOK_SMALL": expected}


def test_the_kernel_gets_the_grading_environment(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nprint(os.environ['JITBOOK_SMALL'])")])
    assert classroom.execute_submission(nb, cell_timeout=30, time_limit=60, env={"JITBOOK_SMALL": "1"}) == (None, "")
    assert nb.cells[0].outputs[0]["text"] == "1\n"
    classroom.execute_submission(nb, cell_timeout=30, time_limit=60, env={"JITBOOK_SMALL": "0"})
    assert nb.cells[0].outputs[0]["text"] == "0\n"


def test_an_erroring_check_cell_is_reported_as_not_checked(tmp_path):
    path = _tiny_submission(tmp_path / "why-compile.ipynb", 'check("why-compile.ready")')  # check never imported
    rows = classroom.grade_notebook(path, cell_timeout=30)
    assert rows[0].message == ("not checked: its check cell ran but showed no report "
                               "(it raised NameError: name 'check' is not defined)")


def test_grade_command_rejects_a_missing_folder(tmp_path, capsys):
    assert classroom.main(["grade", str(tmp_path / "nope"), "--out", str(tmp_path / "g.csv")]) == 1
    assert "no folder at" in capsys.readouterr().err


def test_a_notebook_of_no_known_chapter_gets_one_row_saying_so(tmp_path):
    path = tmp_path / "homework.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    [row] = classroom.grade_notebook(path)
    assert row.exercise == "" and not row.passed and "could not tell which chapter" in row.message


def test_nbgrader_accepts_the_notebooks_when_it_is_installed(tmp_path):
    formats = pytest.importorskip("nbgrader.nbgraderformat", reason="nbgrader is not installed (it is optional)")
    classroom.write_notebooks(tmp_path, [book.ROOT / "chapters" / "why-compile.qmd"])
    assert formats.SCHEMA_VERSION == classroom.NBGRADER_SCHEMA
    for path in sorted(tmp_path.glob("*/*.ipynb")):
        formats.MetadataValidator().validate_nb(nbformat.read(path, as_version=4))


def test_body_cells_are_those_between_the_set_up_and_the_exercises():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[md("# Title"), code("import jitbook"), md("## A section"), code("body()"),
                                         md("### Sub"), code("more()"), md("## Exercises"), code("answer()")])
    assert classroom.body_cells(nb) == [3, 5]
    assert classroom.body_cells(nbformat.v4.new_notebook(cells=[code("x = 1")])) == []


def test_grading_skips_the_chapter_body(tmp_path):
    classroom.write_notebooks(tmp_path, [book.ROOT / "chapters" / "why-compile.qmd"])
    nb = nbformat.read(tmp_path / "instructor" / "why-compile.ipynb", as_version=4)
    first_section = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("## "))
    nb.cells.insert(first_section + 1, nbformat.v4.new_code_cell("import os\nos._exit(1)"))  # would kill the kernel
    nbformat.write(nb, tmp_path / "why-compile.ipynb")
    grades = classroom.grade_notebook(tmp_path / "why-compile.ipynb")
    assert grades and all(g.passed for g in grades), [g.message for g in grades]
