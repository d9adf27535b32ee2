"""The verdicts on one notebook's evidence, decided in a process of the grader's own.

``python -m jitbook.classroom.verdict`` reads ``{exercise: {"seed", "requests",
"evidence"}}`` as JSON on stdin and writes each exercise's report as JSON on stdout.
No student code runs here: the evidence is plain data, and an exported program is
run by XLA on inputs the checker draws. The grader starts it with a memory limit and
a deadline, so a program that never ends costs one notebook its time, not the class.
"""

import dataclasses
import json
import os
import subprocess
import sys

from jitbook.classroom.sandbox import LIMITER

MEMORY = 4 * 2**30  # bytes of address space for the verdicts of one notebook


def judge(job: dict) -> dict:
    """Each exercise's report (as a dict) from its seed, requests and evidence."""
    from jitbook import exercises

    reports = {}
    for exercise_id, item in job.items():
        try:
            ex = exercises.registry()[exercise_id]
            _, requests = exercises.start(ex, item["seed"])
            if json.loads(json.dumps(requests)) != item["requests"]:
                raise RuntimeError(
                    "the checker's requests are not the same from a seed"
                )
            report = exercises.verdict(exercise_id, item["seed"], item["evidence"])
        except Exception as err:  # a checker's own failure on odd evidence
            report = exercises.Report(
                exercise_id,
                False,
                [],
                f"the grader could not judge this answer ({type(err).__name__}: "
                f"{str(err)[:200]}); tell your teacher",
                "",
            )
        reports[exercise_id] = dataclasses.asdict(report)
    return reports


def run(job: dict, timeout: float) -> dict:
    """``judge`` in a fresh process with a memory limit and ``timeout`` seconds; when
    that process fails, each exercise again in a process of its own, so one answer
    that hangs or crashes XLA costs only its own row. Every exercise gets a report."""
    import time

    deadline = time.monotonic() + timeout
    found = _once(job, timeout)
    if isinstance(found, dict):
        return found
    if len(job) == 1:
        return {id: _failed(id, found) for id in job}
    reports = {}
    for n, id in enumerate(job):
        left = (deadline - time.monotonic()) / (len(job) - n)
        alone = _once({id: job[id]}, left)
        reports[id] = alone[id] if isinstance(alone, dict) else _failed(id, alone)
    return reports


def _once(job: dict, timeout: float) -> dict | str:
    """The reports, or why the judging process gave none."""
    command = [sys.executable, "-c", LIMITER, str(MEMORY), str(2**30)]
    command += [sys.executable, "-m", "jitbook.classroom.verdict"]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        done = subprocess.run(
            command,
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=max(timeout, 1.0),
            env=env,
        )
    except subprocess.TimeoutExpired:
        return f"judging it took longer than the {max(timeout, 1.0):.0f} s left"
    if done.returncode == 0:
        try:
            return json.loads(done.stdout)
        except ValueError:
            pass
    return f"the grader's judging process failed ({_last_line(done.stderr)})"


def _failed(exercise_id: str, why: str) -> dict:
    return {
        "exercise": exercise_id,
        "passed": False,
        "checks": [],
        "message": why,
        "hint": "",
        "details": "",
        "self_reported": [],
    }


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no message"


def main() -> None:
    json.dump(judge(json.load(sys.stdin)), sys.stdout)


if __name__ == "__main__":
    main()
