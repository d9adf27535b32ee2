"""The students' JupyterLab without nbgrader; the teachers' exercise table."""

import json
import re
from pathlib import Path

from jitbook.classroom.plan import chapter_exercises
from jitbook.exercises import registry, start
from jitbook.site import harness

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
                    **evidence_of(id),
                }
            )
    return rows


EVIDENCE = {
    "export": "its exported program, run by the grader",
    "lower": "its lowered program's text",
    "call": "its values on inputs drawn per student",
    "probe": "a probe beside the student's code",
}


def evidence_of(exercise_id: str) -> dict[str, str]:
    """What an exercise is judged on, read from the requests its checker makes, and
    whether code written against the grader could fake it (only what a probe reports,
    beyond handing over the answer's own result, can be)."""
    _, requests = start(registry()[exercise_id], seed=0)
    kinds = sorted({r["kind"] for r in requests}, key=list(EVIDENCE).index)
    from jitbook.evidence.probes import HANDS_OVER

    probes = sorted({r["probe"] for r in requests if r["kind"] == "probe"} - HANDS_OVER)
    fakeable = (
        f"only the self-reported checks ({', '.join(probes)})" if probes else "no"
    )
    return {"judged on": "; ".join(EVIDENCE[k] for k in kinds), "fakeable": fakeable}


def exercise_counts() -> dict[str, int]:
    """How many exercises each chapter has, by chapter stem."""
    counts: dict[str, int] = {}
    for ex in registry().values():
        counts[ex.chapter] = counts.get(ex.chapter, 0) + 1
    return counts
