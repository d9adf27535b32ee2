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

Here is what the teachers' page calls and the budgets it quotes; the rest stays in
its module (``jitbook.classroom.handout.write_notebooks``, ``.grading.grade_notebook``).
"""

from jitbook.classroom.grading import (
    CELL_TIMEOUT,
    TIME_LIMIT,
    grade_folder,
)
from jitbook.classroom.handout import (
    NBGRADER_SCHEMA,
    has_exercises,
    student_notebook,
)
from jitbook.classroom.lab import exercise_counts, exercise_rows
from jitbook.classroom.report import FIELDS, SUMMARY_FIELDS
from jitbook.classroom.sandbox import CHECK_MARGIN, MEMORY_LIMIT, sandbox_mode

__all__ = [
    "CELL_TIMEOUT",
    "CHECK_MARGIN",
    "FIELDS",
    "MEMORY_LIMIT",
    "NBGRADER_SCHEMA",
    "SUMMARY_FIELDS",
    "TIME_LIMIT",
    "exercise_counts",
    "exercise_rows",
    "grade_folder",
    "has_exercises",
    "sandbox_mode",
    "student_notebook",
]
