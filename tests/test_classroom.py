"""The classroom: student notebooks hold no solutions, grading re-runs the checks, and the chapters keep the form."""

import ast
import io
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

import processes
from jitbook import classroom
from jitbook.classroom import cli, grading, handout, lab, plan, report, sandbox, session
from jitbook.exercises import registry
from jitbook.site import downloads, harness
from test_sandbox import student_cells

NBGRADER_KEYS = {
    "schema_version",
    "grade",
    "locked",
    "solution",
    "task",
    "grade_id",
    "points",
    "checksum",
    "cell_type",
}  # nbgrader/nbgraderformat/v3.json (nbgrader 0.9) allows no other key


def chapters() -> list[Path]:
    return [p for p in harness.chapter_files() if p.exists()]


def code_lines(nb) -> list[str]:
    return [
        line.strip()
        for c in nb.cells
        if c.cell_type == "code"
        for line in c.source.splitlines()
        if line.strip()
    ]


# ---- solutions out, stubs in ------------------------------------------------------------------------------


def test_clear_solutions_keeps_the_region_indentation():
    source = (
        "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n\n"
        "### BEGIN SOLUTION\ng = jax.jit(f)\n### END SOLUTION\nprint('kept')"
    )
    nb = handout.mark_exercises(
        nbformat.v4.new_notebook(
            cells=[
                nbformat.v4.new_code_cell(source),
                nbformat.v4.new_code_cell('check("demo.f")'),
            ]
        )
    )
    assert handout.clear_solutions(nb).cells[0].source == (
        "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\n"
        "# YOUR CODE HERE\nraise NotImplementedError()\nprint('kept')"
    )
    assert handout.solution_regions(source) == ["    return x + y", "g = jax.jit(f)"]


@pytest.mark.parametrize(
    "source, message",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without a `### BEGIN SOLUTION`"),
        (
            "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n",
            "inside another solution region",
        ),
    ],
)
def test_broken_solution_markers_are_a_clear_error(source, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        handout.check_markers(source)


def test_broken_markers_in_a_chapter_name_the_chapter_and_line(tmp_path):
    qmd = tmp_path / "demo.qmd"
    qmd.write_text(
        '# Demo {#sec-demo}\n\n```{python}\n### BEGIN SOLUTION\nx = 1\n```\n\n```{python}\ncheck("demo.x")\n```\n'
    )
    with pytest.raises(
        ValueError,
        match=re.escape("demo.qmd, code chunk at line 3: line 1: a `### BEGIN"),
    ):
        classroom.student_notebook(qmd)


def test_notebooks_command_writes_student_and_instructor_notebooks_for_every_chapter(
    tmp_path,
):
    assert cli.main(["notebooks", str(tmp_path), "--no-values"]) == 0
    with_exercises = [
        p for p in chapters() if classroom.has_exercises(harness.to_notebook(p))
    ]
    assert any(p.stem == "why-compile" for p in with_exercises)
    assert sorted(p.name for p in (tmp_path / "student").glob("*.ipynb")) == sorted(
        f"{p.stem}.ipynb" for p in with_exercises
    )
    for qmd in with_exercises:
        student = nbformat.read(
            tmp_path / "student" / f"{qmd.stem}.ipynb", as_version=4
        )
        instructor = nbformat.read(
            tmp_path / "instructor" / f"{qmd.stem}.ipynb", as_version=4
        )
        regions = handout.solution_regions(qmd.read_text())
        assert regions, f"{qmd.name} has check cells but no ### BEGIN SOLUTION region"
        # No solution code in the student notebook: each solution line occurs there no more often than in
        # the chapter's code outside the solutions (a line like `return x` may well occur elsewhere).
        instructor_code = "\n".join(
            c.source for c in instructor.cells if c.cell_type == "code"
        )
        outside_code = re.sub(
            rf"^[ \t]*{handout.BEGIN}.*?{handout.END}[ \t]*$",
            "",
            instructor_code,
            flags=re.M | re.S,
        )
        outside = code_lines(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outside_code)])
        )
        assert student.cells[2].metadata["jitbook"]["setup"], (
            "the downloads' setup cell"
        )
        del student.cells[2]  # the setup's own lines are not the chapter's
        student_code = "\n".join(
            c.source for c in student.cells if c.cell_type == "code"
        )
        student_lines = code_lines(student)
        for region in regions:
            assert region.strip() in instructor_code
            assert student_code.count(region.strip()) <= outside_code.count(
                region.strip()
            )
            for line in {l.strip() for l in region.splitlines() if l.strip()}:
                assert student_lines.count(line) <= outside.count(line), (
                    f"{qmd.name}: solution line {line!r} in the student notebook"
                )
        stubs = [
            line
            for line in student_lines
            if line == handout.STUB[1] or " = NotImplemented  #" in line
        ]
        assert len(stubs) >= len(regions)
        assert student.metadata["jitbook"]["source"] == qmd.name
        for cell in student.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        solutions = [
            c
            for c in student.cells
            if c.metadata.get("jitbook", {}).get("role") == "solution"
        ]
        for cell in solutions:
            assert not re.search(r"^#\|", cell.source, re.M), cell.source
            assert handout.STUB[0] in cell.source
            top_level = [
                node
                for node in ast.parse(cell.source).body
                if isinstance(node, ast.Raise)
            ]
            assert not top_level, (
                f"{qmd.name}: a stub raises when its cell runs, stopping Run All"
            )
        _assert_no_quarto_markup(student, qmd.name)
        _assert_nbgrader_metadata(student)
        _assert_nbgrader_metadata(instructor)


def _assert_no_quarto_markup(nb, name):
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "{python}" not in markdown, name
    assert not re.search(r"^:::", markdown, re.M), name
    assert not re.search(r"\{#(sec|exr|tbl|fig)-", markdown), name
    assert not re.search(r"(?<![\w`])@(sec|exr|tbl|fig)-", markdown), name
    assert not re.search(r"^#\|", code, re.M), name


def test_student_notebook_fills_values_from_the_executed_chapter(executed):
    page = harness.ROOT / "chapters" / "why-compile.qmd"
    ran = executed(page)
    student = classroom.student_notebook(page, ran)
    _assert_no_quarto_markup(student, page.name)
    filled = [
        c.source
        for c in ran.cells
        if c.cell_type == "markdown" and c.source != downloads.SMALL_NOTE
    ]
    shown = [
        c.source
        for c in student.cells
        if c.cell_type == "markdown" and c.source != handout.STUDENT_NOTE
    ]
    assert len(shown) == len(filled)
    with_values = [
        text for text in harness.to_notebook(page).cells if "{python}" in text.source
    ]
    assert with_values and all(
        handout.FENCE.sub("", f).strip("\n") == s
        for f, s in zip(filled, shown, strict=True)
    )


def _assert_nbgrader_metadata(nb):
    marked = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
    assert marked
    for meta in marked:
        assert (
            set(meta) <= NBGRADER_KEYS
            and meta["schema_version"] == classroom.NBGRADER_SCHEMA
        )
        assert {"grade", "locked", "solution"} <= set(meta) and re.fullmatch(
            r"[A-Za-z0-9_\-]+", meta["grade_id"]
        )
    ids = [m["grade_id"] for m in marked]
    assert len(ids) == len(set(ids)), f"duplicate nbgrader grade_id: {ids}"
    for cell in nb.cells:
        if (
            handout.is_solution_cell(cell)
            or cell.metadata.get("jitbook", {}).get("role") == "solution"
        ):
            assert (
                cell.metadata["nbgrader"]["solution"] is True
                and cell.metadata["nbgrader"]["locked"] is False
            )
        if handout.checked_exercise(cell):
            assert (
                cell.metadata["nbgrader"]["locked"] is True
                and cell.metadata["nbgrader"]["solution"] is False
            )


def test_notebooks_command_rejects_a_missing_chapter(tmp_path, capsys):
    assert cli.main(["notebooks", str(tmp_path), str(tmp_path / "nope.qmd")]) == 1
    assert "no chapter at" in capsys.readouterr().err


# ---- the exercise form in every chapter -------------------------------------------------------------------


@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_every_solution_cell_is_folded_on_the_site(page):
    for cell in harness.to_notebook(page).cells:
        if handout.is_solution_cell(cell):
            options = cell.metadata["jitbook"]["options"]
            line = cell.metadata["jitbook"]["qmd_line"]
            assert options.get("code-fold") is True, (
                f"{page.name}, chunk at line {line}: a solution cell needs `#| code-fold: true`"
            )


@pytest.mark.parametrize("page", chapters(), ids=lambda p: p.name)
def test_every_exercise_of_a_chapter_has_a_solution_and_a_check_cell(page):
    nb = handout.instructor_notebook(page)
    checked = [
        handout.checked_exercise(c) for c in nb.cells if handout.checked_exercise(c)
    ]
    solved = {
        c.metadata["jitbook"]["exercise"]
        for c in nb.cells
        if c.metadata.get("jitbook", {}).get("role") == "solution"
    }
    registered = {id for id, ex in registry().items() if ex.chapter == page.stem}
    assert registered <= set(checked), (
        f"{page.name}: exercises without a check cell: {registered - set(checked)}"
    )
    unknown = set(checked) - set(registry())
    assert not unknown, f"{page.name}: checks of unknown exercises: {unknown}"
    assert registered <= solved, (
        f"{page.name}: exercises without a ### BEGIN SOLUTION cell above their check: {registered - solved}"
    )


def test_exercise_table_lists_every_registered_exercise():
    rows = classroom.exercise_rows()
    assert sorted(r["id"].strip("`") for r in rows) == sorted(registry())
    assert sum(classroom.exercise_counts().values()) == len(rows)
    row = next(r for r in rows if r["id"] == "`why-compile.break-even`")
    assert row == {
        "chapter": "@sec-why-compile",
        "exercise": "@exr-why-compile-break-even",
        "id": "`why-compile.break-even`",
        "topic": registry()["why-compile.break-even"].topic,
        "difficulty": "★★☆",
        "judged on": "its values on inputs drawn per student",
        "fakeable": "no",
    }
    ready = next(
        r for r in rows if r["id"] == "`why-compile.ready`"
    )  # waiting is seen only by a probe
    assert (
        ready["fakeable"].startswith("only the self-reported checks (")
        and "waits" in ready["fakeable"]
    )


# ---- grading ----------------------------------------------------------------------------------------------


def test_chapter_of_reads_metadata_then_the_file_name():
    stems = ["why-compile", "why", "tracing"]
    nb = nbformat.v4.new_notebook(metadata={"jitbook": {"source": "tracing.qmd"}})
    assert plan.chapter_of(Path("alice.ipynb"), nb, stems) == "tracing"
    assert (
        plan.chapter_of(
            Path("alice-why-compile.ipynb"), nbformat.v4.new_notebook(), stems
        )
        == "why-compile"
    )
    assert (
        plan.chapter_of(Path("alice.ipynb"), nbformat.v4.new_notebook(), stems) is None
    )


def _solution(nb, exercise_id):
    return next(
        c
        for c in nb.cells
        if c.metadata.get("jitbook", {}).get("exercise") == exercise_id
        and c.metadata["jitbook"]["role"] == "solution"
    )


def _body_start(nb) -> int:
    return (
        next(
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "markdown" and c.source.startswith("## ")
        )
        + 1
    )


@pytest.fixture
def in_process_cluster(monkeypatch):
    """A class graded on Dask workers that are threads of this process, so what a test monkeypatches in grading
    is what the tasks run (and no worker process outlives the test)."""
    from distributed import LocalCluster

    with LocalCluster(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as local:
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", local.scheduler_address)
        yield


@pytest.mark.parametrize("flags, expected", [([], "1"), (["--full-size"], "0")])
def test_grading_runs_small_sizes_unless_asked_for_full_ones(
    tmp_path, monkeypatch, flags, expected, in_process_cluster
):
    monkeypatch.setenv(
        "JITBOOK_SMALL", "0" if expected == "1" else "1"
    )  # the grader's own setting must not leak in
    seen = {}
    monkeypatch.setattr(
        classroom.grading,
        "grade_notebook",
        lambda path, name, **kw: (
            seen.setdefault("env", kw["kernel"].env)
            and [report.Grade(name, "why-compile.ready", True, "")]
        ),
    )
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "why-compile.ipynb")
    assert (
        cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "g.csv"), *flags])
        == 0
    )
    assert seen["env"] == {"JITBOOK_SMALL": expected}


def test_grade_command_rejects_a_missing_folder(tmp_path, capsys):
    assert (
        cli.main(["grade", str(tmp_path / "nope"), "--out", str(tmp_path / "g.csv")])
        == 1
    )
    assert "no folder at" in capsys.readouterr().err


def test_grade_sheet_goes_under_build_by_default():
    assert cli.GRADES.relative_to(harness.ROOT).parts[0] == "_build"


def test_a_notebook_of_no_known_chapter_gets_one_row_saying_so(tmp_path):
    path = tmp_path / "homework.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), path)
    [row] = grading.grade_notebook(path)
    assert (
        row.exercise == ""
        and not row.passed
        and "could not tell which chapter" in row.message
    )


def test_nbgrader_accepts_the_notebooks_when_it_is_installed(tmp_path):
    formats = pytest.importorskip(
        "nbgrader.nbgraderformat", reason="nbgrader is not installed (it is optional)"
    )
    handout.write_notebooks(tmp_path, [harness.ROOT / "chapters" / "why-compile.qmd"])
    assert formats.SCHEMA_VERSION == classroom.NBGRADER_SCHEMA
    for path in sorted(tmp_path.glob("*/*.ipynb")):
        formats.MetadataValidator().validate_nb(nbformat.read(path, as_version=4))


# ---- the students' JupyterLab ------------------------------------------------------------------------------


def test_lab_starts_without_nbgrader_and_without_errors(tmp_path):
    """What `make lab` runs: the Lab config hides nbgrader, and nothing logs an [E] line at start."""
    import os
    import subprocess

    config = lab.lab_config(tmp_path / "jupyter")
    assert json.loads((config / "labconfig" / "page_config.json").read_text()) == {
        "disabledExtensions": {"@jupyter/nbgrader": True}
    }
    (tmp_path / "notebooks").mkdir()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    root = ["--allow-root"] if os.getuid() == 0 else []
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        str(tmp_path / "notebooks"),
        "--no-browser",
        "--port",
        "0",
        *root,
    ]
    # processes.running stops the server for sure (kill after 10 s), inside this test
    with processes.running(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    ) as proc:
        lines = processes.lines_until(
            proc.stderr, "Use Control-C to stop this server", timeout=90
        )
    log = "".join(lines)
    assert "Use Control-C to stop this server" in log, log[-3000:]
    assert "[E " not in log and "nbgrader" not in log, log
    listed = (
        subprocess.run(
            [sys.executable, "-m", "jupyter", "labextension", "list"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        + subprocess.run(
            [sys.executable, "-m", "jupyter", "labextension", "list"],
            env=env,
            capture_output=True,
            text=True,
        ).stderr
    )
    if "@jupyter/nbgrader" in listed:
        assert re.search(r"@jupyter/nbgrader \S+ \S*disabled", listed), listed


def test_the_makefile_runs_lab_with_the_config_and_allow_root_as_root():
    recipe = (harness.ROOT / "Makefile").read_text().split("\nlab:")[1].split("\n\n")[0]
    assert (
        "lab-config _build/jupyter" in recipe
        and "JUPYTER_CONFIG_DIR=_build/jupyter" in recipe
    )
    assert "--allow-root" in recipe and "Running as root" in recipe


def test_every_command_on_the_teachers_page_runs_as_printed():
    """From a fresh clone after `make setup`: make targets that exist, the venv's Python, valid arguments."""
    import shlex

    text = (harness.ROOT / "chapters" / "teachers.qmd").read_text()
    commands = [
        line
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
    ]
    assert commands
    targets = set(
        re.findall(r"^([\w-]+):", (harness.ROOT / "Makefile").read_text(), re.M)
    )
    for command in commands:
        words = shlex.split(command)
        if words[0] == "make":
            assert words[1] in targets, command
            continue
        assert words[:3] == [".venv/bin/python", "-m", "jitbook.classroom"], command
        cli.parser().parse_args(words[3:])


def test_in_a_notebook_a_check_stuck_in_compiled_code_says_what_to_do():
    """The student's own kernel: the watchdog's words reach the check cell while it is still busy."""
    code = (
        "import jax\nfrom jitbook import exercises\nexercises.GRACE = 1.0\n"
        "def run_and_wait(fn, *args):\n"
        "    x = jax.lax.while_loop(lambda x: x < 1e30, lambda x: x + 1.0, 0.0)\n"
        "    return jax.block_until_ready(x)\n"
        "exercises.check('why-compile.ready', time_limit=1)"
    )
    steps = student_cells(code)
    # A generous notebook limit: on a busy machine the kernel alone can take a minute to start.
    stopped = session.run_steps(
        steps, sandbox.Kernel(), cell_timeout=12, collect_timeout={}, time_limit=600
    )
    assert steps[0].failure == "ran longer than 12 s", stopped
    shown = "".join(o.get("text", "") for o in steps[0].cell.outputs)
    assert "The check of why-compile.ready is still running after 2 s" in shown
    assert "Restart the kernel" in shown


# ---- the sandbox without privileges, and one budget per student ------------------------------------------


@pytest.mark.parametrize("make", ["empty", "text", "corrupt"])
def test_a_folder_with_nothing_to_grade_says_what_it_found_and_fails(
    tmp_path, capsys, make, in_process_cluster
):
    subs = tmp_path / "subs"
    subs.mkdir()
    if make == "text":
        (subs / "notes.txt").write_text("hello")
    if make == "corrupt":
        (subs / "why-compile.ipynb").write_text("{not json")
    assert cli.main(["grade", str(subs), "--out", str(tmp_path / "g.csv")]) == 1
    err = capsys.readouterr().err
    assert "nothing could be graded" in err and "notebook(s) found" in err
    assert "not json" not in err


def test_the_code_the_grader_trusts_is_checked_after_every_notebook(
    tmp_path, monkeypatch, capsys, in_process_cluster
):
    """A notebook after which a trusted file differs stops the class with exit status 2."""
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "checker.py").write_text("x = 1\n")
    monkeypatch.setattr(classroom.cluster, "trusted_paths", lambda: [trusted])

    def tamper(path, name, **kw):
        (trusted / "checker.py").write_text("x = 2\n")
        return [report.Grade(name, "why-compile.ready", True, "")]

    monkeypatch.setattr(classroom.grading, "grade_notebook", tamper)
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "why-compile.ipynb")
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "g.csv")]) == 2
    assert "the code the grader trusts changed on disk" in capsys.readouterr().err
    assert (tmp_path / "g.csv").exists()


def test_make_grade_without_submissions_names_the_variable():
    recipe = (
        (harness.ROOT / "Makefile").read_text().split("\ngrade:")[1].split("\n\n")[0]
    )
    assert "make grade SUBMISSIONS=path/to/folder" in recipe


def test_the_handout_has_no_solutions_and_students_have_their_own_lab():
    makefile = (harness.ROOT / "Makefile").read_text()
    handout = makefile.split("\nhandout:")[1].split("\n\n")[0]
    assert "--students-only" in handout
    lab = makefile.split("\nlab-student:")[1].split("\n\n")[0]
    assert (
        "_build/handout/student" in lab and "JUPYTER_CONFIG_DIR=_build/jupyter" in lab
    )
    page = (harness.ROOT / "chapters" / "teachers.qmd").read_text()
    assert "make lab-student" in page and "so it is not for students" in page


def test_a_handout_without_executed_chapters_runs_them_small_and_says_how_long_first(
    tmp_path, monkeypatch
):
    said, ran = [], []
    monkeypatch.setattr(classroom.handout, "executed_copy", lambda qmd: None)

    def fake_run(qmd, out_dir=None, progress=None):
        import os

        ran.append(os.environ.get("JITBOOK_SMALL"))
        heard.append(progress)
        path = Path(out_dir) / f"{Path(qmd).stem}.ipynb"
        nbformat.write(harness.to_notebook(qmd), path)
        return path

    monkeypatch.setattr(classroom.handout.downloads, "run", fake_run)
    heard, stream = [], io.StringIO()
    written = handout.write_notebooks(
        tmp_path,
        [harness.ROOT / "chapters" / "why-compile.qmd"],
        values=True,
        students_only=True,
        log=lambda *a, **k: said.append(a[0]),
        progress=stream,
    )
    assert heard == [stream], "the chapter's run reports its cells to the stream given"
    assert [p.parent.name for p in written] == ["student"]
    assert ran == ["1"] and said[0] == "reading 1 chapter(s) for their exercises ..."
    assert said[1].startswith(
        "1 chapter(s) have no executed copy: running them at small"
    )
    assert said[2:] == ["executing why-compile.qmd ...", str(written[0])], (
        "each step said as it happens"
    )


def test_the_handout_installs_jitbook_from_the_wheel_beside_it_as_the_downloads_do(
    tmp_path,
):
    from jitbook.site import wheel

    written = handout.write_notebooks(
        tmp_path,
        [harness.ROOT / "chapters" / "why-compile.qmd"],
        students_only=True,
        log=lambda *a, **k: None,
    )
    [student] = [p for p in written if p.suffix == ".ipynb"]
    nb = nbformat.read(student, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.metadata.get("jitbook", {}).get("setup"), "the setup cell comes first"
    assert f'WHEEL = "{wheel.wheel_name()}"' in first.source
    assert (student.parent / wheel.wheel_name()).is_file(), "the wheel lies beside it"
