"""``python -m jitbook.classroom``: notebooks, grade, lab-config, bench."""

import argparse
import os
import sys
import time
from pathlib import Path

from jitbook import size
from jitbook.classroom import bench
from jitbook.classroom.cluster import WorkersUnfit
from jitbook.classroom.grading import (
    CELL_TIMEOUT,
    GRADING_ENV,
    TIME_LIMIT,
    Tampered,
    executed_folder,
    grade_folder,
)
from jitbook.classroom.handout import write_notebooks
from jitbook.classroom.lab import lab_config
from jitbook.classroom.report import summary_path
from jitbook.classroom.sandbox import (
    DISK_LIMIT,
    MEMORY_LIMIT,
    SANDBOXES,
    Kernel,
    sandbox_mode,
)
from jitbook.site import harness

# ---- command line --------------------------------------------------------------------


UNGRADED = ("not graded", "could not read", "refused")
GRADES = harness.ROOT / "_build" / "grades" / "grades.csv"


def parser() -> argparse.ArgumentParser:
    """The command line: ``notebooks``, ``grade`` and ``lab-config``."""
    parser = argparse.ArgumentParser(
        prog="python -m jitbook.classroom",
        description="Student and instructor notebooks, and grading.",
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
    nb_p.add_argument(
        "--students-only",
        action="store_true",
        help="write only the student notebooks (the handout: no solutions)",
    )
    nb_p.add_argument(
        "--full-size",
        action="store_true",
        help="execute chapters for their values at full size (default small, about "
        "a minute a chapter; full size takes up to 15 minutes for the book)",
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
        help=f"GiB of memory one student's processes may use together (default "
        f"{MEMORY_LIMIT:g})",
    )
    grade_p.add_argument(
        "--disk",
        type=float,
        default=DISK_LIMIT,
        help=f"GiB one student may write, to the work folder and to /tmp each "
        f"(default {DISK_LIMIT:g})",
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
    grade_p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="a Dask scheduler to grade on, e.g. tcp://head:8786 (default: "
        "$DASK_SCHEDULER_ADDRESS, else a local cluster on this machine)",
    )
    grade_p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes of the local cluster (default: one per core)",
    )
    grade_p.add_argument(
        "--resume",
        action="store_true",
        help="keep the sheet's rows and grade only the notebooks it has none for "
        "(after Ctrl-C or a crash)",
    )
    bench_p = sub.add_parser(
        "bench",
        help="grade a synthetic class with 1, 2, ... workers; record the speed to "
        "data/classroom-bench/",
    )
    bench_p.add_argument(
        "--copies",
        type=int,
        default=10,
        help="students handing in the instructor notebook, and as many the handout "
        "(default 10: a class of 20 notebooks)",
    )
    bench_p.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=None,
        help="worker counts to grade with (default: 1 up to the cores here)",
    )
    bench_p.add_argument(
        "--name",
        default=None,
        help="the recording's name, data/classroom-bench/NAME.json (default: the date)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "lab-config":
            print(lab_config(args.folder))
            return 0
        if args.command == "bench":
            workers = args.workers or list(range(1, (os.cpu_count() or 1) + 1))
            if args.copies < 1 or min(workers) < 1:
                raise ValueError("--copies and --workers must be 1 or more.")
            name = args.name or time.strftime("%Y-%m-%d", time.gmtime())
            print(f"recorded to {bench.run(args.copies, workers, name)}")
            return 0
        if args.command == "notebooks":
            chosen = args.chapters or None
            write_notebooks(  # says each notebook as it is written
                args.out_dir,
                chosen,
                values=not args.no_values,
                students_only=args.students_only,
                full_size=args.full_size,
                progress=sys.stdout,
            )
            return 0
        if not args.submissions.is_dir():
            raise FileNotFoundError(
                f"no folder at {args.submissions}; give the folder that holds the "
                "submitted notebooks, e.g. make grade SUBMISSIONS=path/to/folder."
            )
        start = time.perf_counter()
        env = {size.ENV_VAR: "0"} if args.full_size else GRADING_ENV
        sizes = "full" if args.full_size else "small (JITBOOK_SMALL=1)"
        kernel = Kernel(sandbox_mode(args.sandbox), args.memory, env, args.disk)
        confined = (
            "in a bubblewrap sandbox (uid 65534, no capabilities, read-only system, "
            "no network, only its own folder writable)"
            if kernel.sandbox == "bwrap"
            else "as a plain process (no sandbox: bubblewrap is not in use)"
        )
        print(
            f"Grading {args.submissions} at {sizes} problem sizes, each notebook in a "
            f"fresh kernel {confined}, with {kernel.memory_gib:g} GiB of memory and "
            f"{kernel.disk_gib:g} GiB of disk per student.",
            flush=True,
        )
        rows = grade_folder(
            args.submissions,
            args.out,
            cell_timeout=args.cell_timeout,
            time_limit=args.time_limit,
            kernel=kernel,
            check_limit=args.check_limit,
            scheduler=args.scheduler,
            workers=args.workers,
            resume=args.resume,
        )
    except (Tampered, WorkersUnfit) as err:
        print(err, file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as err:  # NothingGraded too
        print(err, file=sys.stderr)
        return 1
    self_reported = sum(1 for g in rows if g.self_reported)
    ungraded = sorted({g.student_file for g in rows if g.message.startswith(UNGRADED)})
    print(
        f"{sum(g.passed for g in rows)} of {sum(1 for g in rows if g.exercise)} "
        f"exercises passed ({self_reported} resting on self-reported checks) -> "
        f"{args.out}, per student in {summary_path(args.out)}, executed notebooks in "
        f"{executed_folder(args.out)} ({time.perf_counter() - start:.0f} s)"
    )
    if ungraded:
        print(
            f"{len(ungraded)} notebook(s) could not be graded (the reasons are in the "
            f"sheet): {', '.join(ungraded[:10])}",
            file=sys.stderr,
        )
    return min(len(ungraded), 100)  # the exit code: how many could not be graded
