"""The classroom: student and instructor notebooks from the chapters, and grading of
completed notebooks.

    # OUTDIR/student/, OUTDIR/instructor/
    .venv/bin/python -m jitbook.classroom notebooks OUTDIR
    # _build/grades/grades.csv (a row per exercise) and grades-summary.csv (per student)
    .venv/bin/python -m jitbook.classroom grade SUBMISSIONS
    # a Lab config without nbgrader
    .venv/bin/python -m jitbook.classroom lab-config FOLDER

Solutions sit in the chapters between ``### BEGIN SOLUTION`` and ``### END
SOLUTION``, the markers nbgrader uses, and the cells carry nbgrader's cell metadata,
so a teacher who uses nbgrader can take the notebooks as they are. Grading runs each
submission as Run All would, alone in a fresh, confined kernel, collects the evidence
its answers produce (values on inputs drawn per student, exported programs), and
judges it in a process that runs no student code (README.md in this folder says
which module does what).
"""

from jitbook.classroom.cli import GRADES, main, parser
from jitbook.classroom.grading import (
    CELL_TIMEOUT,
    GRADING_ENV,
    TIME_LIMIT,
    NothingGraded,
    executed_folder,
    grade_folder,
    grade_notebook,
    submissions,
)
from jitbook.classroom.handout import (
    BEGIN,
    CHECK_CALL,
    END,
    FENCE,
    NBGRADER_SCHEMA,
    STUB,
    STUDENT_NOTE,
    check_markers,
    checked_exercise,
    clear_solutions,
    executed_copy,
    has_exercises,
    instructor_notebook,
    is_solution_cell,
    mark_exercises,
    solution_regions,
    student_notebook,
    write_notebooks,
)
from jitbook.classroom.lab import exercise_counts, exercise_rows, lab_config
from jitbook.classroom.plan import (
    Handout,
    Step,
    chapter_exercises,
    chapter_of,
    handed_out,
    plan,
)
from jitbook.classroom.report import FIELDS, SUMMARY_FIELDS, Grade, write_csv
from jitbook.classroom.sandbox import (
    CHECK_MARGIN,
    MEMORY_LIMIT,
    SANDBOXES,
    Kernel,
    sandbox_mode,
)
from jitbook.classroom.session import run_steps

__all__ = [
    "BEGIN",
    "CELL_TIMEOUT",
    "CHECK_CALL",
    "CHECK_MARGIN",
    "END",
    "FENCE",
    "FIELDS",
    "GRADES",
    "GRADING_ENV",
    "MEMORY_LIMIT",
    "NBGRADER_SCHEMA",
    "SANDBOXES",
    "STUB",
    "STUDENT_NOTE",
    "SUMMARY_FIELDS",
    "TIME_LIMIT",
    "Grade",
    "Handout",
    "Kernel",
    "NothingGraded",
    "Step",
    "chapter_exercises",
    "chapter_of",
    "check_markers",
    "checked_exercise",
    "clear_solutions",
    "executed_copy",
    "executed_folder",
    "exercise_counts",
    "exercise_rows",
    "grade_folder",
    "grade_notebook",
    "handed_out",
    "has_exercises",
    "instructor_notebook",
    "is_solution_cell",
    "lab_config",
    "main",
    "mark_exercises",
    "parser",
    "plan",
    "run_steps",
    "sandbox_mode",
    "solution_regions",
    "student_notebook",
    "submissions",
    "write_csv",
    "write_notebooks",
]
