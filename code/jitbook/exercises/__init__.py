"""Exercises: a registry of checkers, and ``check()``, which runs one against a
student's answer.

A checker is a generator of ``rng`` (a NumPy Generator seeded per student when the
grader runs): it draws its inputs, yields one list of requests (``ask.call``,
``ask.export``, ``ask.lower``, ``ask.probe``), gets back what the answer produced
(``jitbook.evidence``), and only then computes its reference and judges with
``expect``; the first failed expectation ends it with a plain-words message. The
student's kernel runs only the collector, never a checker or a reference. ``check``
does both here and never raises into the student's kernel: missing names, errors,
wrong types and time-outs all become feedback. Exercise modules (one per chapter,
named by its stem) sit beside this file and are found automatically; import what
they use relatively (``from . import ask, exercise, expect, judge``): the grader
loads them under its own name.

The judging vocabulary is ``judge.py`` (``agrees``, ``expect_agrees``, ``plain``,
``number``, ``whole``, ``array``: evidence copied out as exact builtin types and
NumPy arrays, compared with the reference); what can be asked is ``ask.py``.
"""

import contextlib
import dataclasses
import html
import importlib
import inspect
import pkgutil
import sys
import threading
from collections.abc import Callable

from jitbook.display import fit
from jitbook.evidence import collect, read

from .judge import (
    Wrong,
    _current,
    _Progress,
    agrees,
    array,
    expect,
    expect_agrees,
    number,
    plain,
    whole,
)

DEFAULT_TIME_LIMIT = 30.0
# display metadata key: tests and grading read reports from executed notebooks
REPORT_KEY = "jitbook_check"


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise: its id (``chapter.name``), the name the student defines, and its
    checker.
    """

    id: str
    answer: str
    topic: str
    difficulty: int
    hint: str
    checker: Callable
    time_limit: float = DEFAULT_TIME_LIMIT

    @property
    def chapter(self) -> str:
        return self.id.split(".", 1)[0]


_REGISTRY: dict[str, Exercise] = {}


def reports(cells) -> list[dict]:
    """The check reports shown in the outputs of executed notebook cells, in order
    (tests and grading read them).
    """
    return [
        out["metadata"][REPORT_KEY]
        for cell in cells
        if cell.get("cell_type") == "code"
        for out in cell.get("outputs", [])
        if REPORT_KEY in out.get("metadata", {})
    ]


def exercise(
    id: str,
    answer: str,
    topic: str,
    difficulty: int,
    *,
    hint: str | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> Callable:
    """Register the decorated function as the checker of exercise ``id``
    (``"<chapter>.<name>"``); its docstring is the hint, unless ``hint`` is given.
    """
    if "." not in id:
        raise ValueError(
            f"exercise id {id!r} must look like '<chapter>.<name>', e.g. "
            "'tracing.no-print'."
        )
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty of {id!r} must be 1, 2 or 3, got {difficulty!r}.")

    def register(checker: Callable) -> Callable:
        if id in _REGISTRY and _REGISTRY[id].checker.__module__ != checker.__module__:
            raise ValueError(
                f"exercise id {id!r} is registered twice ({checker.__module__})."
            )
        words = hint if hint is not None else inspect.cleandoc(checker.__doc__ or "")
        words = " ".join(words.split())
        _REGISTRY[id] = Exercise(
            id, answer, topic, difficulty, words, checker, time_limit
        )
        return checker

    return register


def registry() -> dict[str, Exercise]:
    """All exercises of the book, by id, after importing every exercise module."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_REGISTRY.items()))


_PLACEHOLDER = (
    "the answer is still the placeholder NotImplemented: replace that line with your "
    "code."
)


def error_line(err: BaseException) -> str:
    """``TypeError: first line`` of an error, going on past a first line that ends in a
    colon.
    """
    from ..errors import error_line as line

    return line(err)


@dataclasses.dataclass
class Report:
    """The outcome of one check, shown to the student and readable by tests and
    grading."""

    exercise: str
    passed: bool
    checks: list[str]
    message: str
    hint: str
    details: str = ""
    self_reported: list[str] = dataclasses.field(default_factory=list)

    def text(self) -> str:
        head = f"{'PASSED' if self.passed else 'NOT YET'} {self.exercise}"
        lines = [head] + [f"  ok: {c}" for c in self.checks]
        if not self.passed:
            lines += [f"  problem: {self.message}"] + (
                [f"  hint: {self.hint}"] if self.hint else []
            )
        return fit("\n".join(lines))

    def _repr_mimebundle_(self, include=None, exclude=None):
        mark = "&#10004;" if self.passed else "&#10008;"
        color = "#1a7f37" if self.passed else "#b35900"
        items = "".join(f"<li>&#10004; {html.escape(c)}</li>" for c in self.checks)
        if not self.passed:
            items += f"<li>&#10008; {html.escape(self.message)}</li>"
            if self.hint:
                items += f"<li><em>Hint:</em> {html.escape(self.hint)}</li>"
            if self.details:
                details = html.escape(self.details)
                items += (
                    "<li><details><summary>details</summary>"
                    f"<pre>{details}</pre></details></li>"
                )
        verdict = "all checks passed" if self.passed else "not yet"
        head = f"<strong>{mark} {html.escape(self.exercise)}: {verdict}</strong>"
        # a pass is one line, its checks a click away; what is wrong stays in view
        result = (
            f"<details><summary>{head} ({len(self.checks)} checks)</summary>"
            f"<ul>{items}</ul></details>"
            if self.passed
            else f"{head}<ul>{items}</ul>"
        )
        body = (
            '<div class="jitbook-check" style="border-left:4px solid '
            f'{color};padding-left:.6em">{result}</div>'
        )
        return {"text/plain": self.text(), "text/html": body}, {
            REPORT_KEY: dataclasses.asdict(self)
        }

    def __repr__(self) -> str:
        return self.text()


@contextlib.contextmanager
def _time_limit(seconds: float, exercise_id: str):
    """Interrupt the student's code after ``seconds`` (``collect.limit``: main thread
    only, as in a Jupyter kernel).

    Python code stops at once; compiled code (a ``lax.while_loop`` that never ends)
    cannot be interrupted, so a watchdog tells the student what is going on and how
    to get out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    done = threading.Event()
    watchdog = threading.Thread(
        target=_warn_if_still_running,
        args=(done, seconds + GRACE, exercise_id),
        daemon=True,
        name="jitbook-watchdog",
    )
    watchdog.start()
    try:
        with collect.limit(seconds):
            yield
    finally:
        done.set()


# seconds past the limit before the watchdog speaks: Python code has stopped by then
GRACE = 5.0


def stuck_message(exercise_id: str, seconds: float) -> str:
    """What a student reads when a check is still running past its limit."""
    return (
        f"The check of {exercise_id} is still running after {seconds:g} s, past its "
        "time limit. It is stuck in compiled code, most likely a loop that never ends "
        "(a lax.while_loop or fori_loop whose condition stays true), which Python "
        "cannot interrupt: Interrupt will not help. Restart the kernel (Kernel > "
        "Restart Kernel), fix the loop, run the cells above again, then check again."
    )


def _warn_if_still_running(done: threading.Event, seconds: float, id: str) -> None:
    if not done.wait(seconds):
        print(fit(stuck_message(id, seconds)), file=sys.stderr, flush=True)


def _missing(name: str) -> str:
    what = f"class {name}" if name[:1].isupper() else f"def {name}"
    return (
        f"I could not find `{name}`. Define it (run the cell with `{what}` above, or "
        f"the one that assigns `{name} = ...`) and check again."
    )


def _failed_message(request: dict, failed: read.Failed) -> str:
    """What a student reads when a request found no answer or the answer raised."""
    if failed.missing:
        return _PLACEHOLDER if failed.placeholder else _missing(failed.missing)
    if failed.placeholder:
        return (
            "the function still raises NotImplementedError: replace that line with "
            "your code."
        )
    line = f" ({failed.line})" if failed.line else ""
    if request["kind"] == "export" and "must be the result of `jit`" in failed.message:
        return (
            f"`{request['answer']}` is not a function made by jax.jit, so it is not "
            "one "
            "compiled program; jit it once, outside any loop, e.g. "
            f"`{request['answer']} = jax.jit(...)`."
        )
    if request["kind"] == "export":
        return f"tracing your function to export it raised {failed.message}{line}"
    if request["kind"] == "lower":
        return f"lowering your function under jax.jit raised {failed.message}{line}"
    return f"calling your function raised {failed.message}{line}"


# What each kind of request must come back as: a program, a text, or any value.
KIND_OF = {"export": read.Program, "lower": str, "call": object, "probe": object}


def start(ex: Exercise, seed: int):
    """The checker started on inputs drawn from ``seed``: it and what it asks for."""
    import numpy as np

    checker = ex.checker(np.random.default_rng(seed))
    requests = next(checker)
    for request in requests:
        request.setdefault("answer", ex.answer)
    return checker, requests


def finish(checker, requests: list[dict], evidence: list) -> None:
    """Give the checker what its requests produced; it raises ``Wrong`` or returns.
    ``evidence`` is plain data as the collector wrote it: it is read here, with
    limits, and never trusted further than its checks."""
    if type(evidence) is not list or len(evidence) != len(requests):
        raise Wrong("the grader got no evidence for this exercise from the notebook.")
    try:
        got = [read.evidence(item) for item in evidence]
    except (read.Unreadable, ValueError, TypeError) as err:
        raise Wrong(
            f"the evidence this answer produced could not be read ({err})."
        ) from None
    for request, item in zip(requests, got, strict=True):
        if isinstance(item, read.Failed) and not request.get("allow_error"):
            raise Wrong(_failed_message(request, item), details=item.message)
        if not isinstance(item, read.Failed | KIND_OF[request["kind"]]):
            raise Wrong(
                "the evidence for this answer is not what the grader asked for."
            )
    try:
        checker.send(got)
    except StopIteration:
        return
    raise RuntimeError("a checker yields its requests once")


def verdict(exercise_id: str, seed: int, evidence: list) -> Report:
    """The verdict on collected evidence, decided here, where no student code runs."""
    ex = registry()[exercise_id]
    checker, requests = start(ex, seed)
    return _report(ex, lambda: finish(checker, requests, evidence))


def _report(ex: Exercise, decide: Callable[[], None]) -> Report:
    progress = _Progress()
    _current.append(progress)
    try:
        decide()
        return Report(ex.id, True, progress.passed, "", "", "", progress.self_reported)
    except Wrong as wrong:
        return Report(
            ex.id,
            False,
            progress.passed,
            str(wrong),
            ex.hint,
            wrong.details,
            progress.self_reported,
        )
    finally:
        _current.pop()


_MISSING = object()


def check(
    exercise_id: str, answer=_MISSING, *, time_limit: float | None = None
) -> Report:
    """Check the answer to ``exercise_id`` here, as the grader would: collect what it
    produces on freshly drawn inputs, then judge that evidence. By default the answer
    is looked up by name in the notebook.
    """
    import json
    import secrets

    import __main__

    exercises = registry()
    if exercise_id not in exercises:
        close = [
            k for k in exercises if k.split(".")[0] == str(exercise_id).split(".")[0]
        ]
        return Report(
            str(exercise_id),
            False,
            [],
            f"there is no exercise called {exercise_id!r}.",
            f"exercises of this chapter: {', '.join(close) or 'none'}; copy the id "
            "from the check cell.",
        )
    ex = exercises[exercise_id]
    limit = ex.time_limit if time_limit is None else time_limit
    names = (
        vars(__main__) if answer is _MISSING else {**vars(__main__), ex.answer: answer}
    )

    def decide() -> None:
        checker, requests = start(ex, secrets.randbits(32))
        try:
            with _time_limit(limit, ex.id):
                evidence = collect.collect(requests, names, time_limit=None)
        except collect.OutOfTime:
            raise Wrong(
                f"the check took longer than {limit:g} s, so it was stopped; look for "
                "a loop that does not end or a function that compiles on every call."
            ) from None
        finish(checker, requests, json.loads(json.dumps(evidence)))

    return _report(ex, decide)


def close(got, want, rtol: float = 1e-4) -> bool:
    """Same shape, and every entry within ``rtol`` of the largest entry of ``want``;
    never raises on odd input.
    """
    import numpy as np

    try:
        got, want = array(got), np.asarray(want, dtype=np.float64)
    except (Wrong, TypeError, ValueError):
        return False
    return got.shape == want.shape and bool(
        np.all(np.abs(got - want) <= rtol * np.abs(want).max())
    )


__all__ = [
    "Exercise",
    "Report",
    "Wrong",
    "agrees",
    "array",
    "check",
    "close",
    "exercise",
    "expect",
    "expect_agrees",
    "number",
    "plain",
    "registry",
    "reports",
    "whole",
]
