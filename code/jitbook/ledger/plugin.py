"""The pytest plugin: records each claim test's outcome, in a release's run and in
the book's own test session, where it checks them against the lock's column."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable

import pytest

from jitbook.ledger.data import ROOT, key, lock_disagreements, older_gaps

NEEDS = re.compile(
    r"needs (a newer (jax|equinox|optax)|(jax|equinox|optax|jaxlib) ?>= ?[0-9.]+)",
    re.IGNORECASE,
)


RECORD_ENV = (
    "JITBOOK_LEDGER_RECORD"  # file the plugin appends outcomes to, in a release's run
)


ONLY_ENV = "JITBOOK_LEDGER_ONLY"  # the claims to run there, as a JSON list of test ids


_session: dict = {}  # the pytest config of the running session, for the report hook


def _claim_marker(item) -> tuple[str, str] | None:
    """The section and span a claim test names, ``("sec-...", "clm-...")``; None for a
    test that is no claim. tests/test_claims.py checks that the span exists."""
    mark = item.get_closest_marker("claim")
    if mark is None:
        return None
    args = mark.args
    if (
        len(args) != 2
        or not str(args[0]).startswith("sec-")
        or not str(args[1]).startswith("clm-")
    ):
        raise ValueError(
            f"{item.nodeid}: write the claim marker as "
            "@pytest.mark.claim('sec-...', 'clm-...'), naming the section that shows "
            f"it and the span of the sentence it asserts; got {args!r}."
        )
    return args


def one_line(text: str, width: int = 160) -> str:
    """The first informative line of a failure or skip, without paths or addresses."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    line = (errors[0][2:].strip() if errors else lines[-1] if lines else "").strip()
    line = re.sub(r"0x[0-9a-f]{6,}", "0x...", line)
    line = re.sub(r"(/[\w.+-]+)+/([\w.+-]+)", r"\2", line)  # a path: its last part
    return line if len(line) <= width else line[: width - 3] + "..."


# A failure on an API this release does not have yet: the claim does not apply here.
MISSING_API = re.compile(
    r"^(AttributeError|ImportError|ModuleNotFoundError): ("
    r"module '(jax|jaxlib|equinox|optax)[\w.]*' has no attribute"
    r"|cannot import name .* from '(jax|jaxlib|equinox|optax)"
    r"|No module named '(jax|jaxlib|equinox|optax)"
    r"|'(Config|PjitFunction|Lowered|Compiled|ClosedJaxpr|Jaxpr|ArrayImpl|Traced)\w*' "
    r"object has no attribute)"
)


# A failure of the test's own means, not of the mechanism it probes: a call whose
# signature this release does not take, a config option or value it does not know, a
# measuring hook of the book that says JAX moved it.
OWN_MEANS = re.compile(
    r"^(TypeError: .*(got an unexpected keyword argument|missing \d+ required "
    r"(positional|keyword-only) argument|takes \d+ positional arguments? but)"
    r"|AttributeError: 'jaxlib\.[\w.]+' object has no attribute"
    r"|AttributeError: Unrecognized config option"
    r"|ValueError: new enum value must be"
    r"|RuntimeError: .* is gone in this JAX version)"
)

BOOK_CODE = (f"{ROOT / 'tests'}{os.sep}", f"{ROOT / 'code' / 'jitbook'}{os.sep}")


def _assertion(reason: str) -> bool:
    return reason.startswith(("assert", "AssertionError", "Failed:"))


def classify(row: dict, raised_in: str | None = None) -> dict:
    """A failure on an API that JAX, Equinox or optax lacks or says it needs: n/a. A
    failure of the test's own means (``OWN_MEANS``, or an error other than an assertion
    raised in the book's own code, ``raised_in``): could not run. Only what is left,
    the mechanism measured otherwise, fails."""
    reason = row["reason"]
    if row["status"] != "fails":
        return row
    if MISSING_API.match(reason) or NEEDS.search(reason):
        return row | {"status": "n/a", "reason": f"not in this release: {reason}"}
    in_book = raised_in is not None and str(ROOT / raised_in).startswith(BOOK_CODE)
    if OWN_MEANS.match(reason) or (in_book and not _assertion(reason)):
        return row | {"status": "could not run", "reason": reason}
    return row


def outcome(report) -> dict:
    """holds / fails / n/a for one test's report, with a one-line reason."""
    if report.skipped:
        reason = (
            report.longrepr[2]
            if isinstance(report.longrepr, tuple)
            else report.longrepr
        )
        reason = str(reason).removeprefix("Skipped: ")
        return {"status": "n/a", "reason": one_line(reason)}
    if report.failed:
        crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
        return classify(
            {"status": "fails", "reason": one_line(report.longreprtext)},
            raised_in=str(crash.path) if crash else None,
        )
    return {"status": "holds", "reason": ""}


MEASURED = "measured"  # the user property a claim test's figures travel in


@pytest.fixture
def measured(record_property) -> Callable[[str, object], None]:
    """``measured("programs compiled by the second call", 0)``: a figure a claim test
    measured, stored with its outcome so the Claims appendix can print it."""

    def record(what: str, value: object) -> None:
        if not isinstance(what, str) or not what.strip():
            raise TypeError(
                f"measured(what, value) takes words saying what was measured first, "
                f"got {what!r}."
            )
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError(
                f"measured({what!r}, value): the value is an int, a float or a "
                f"short text, got {type(value).__name__}; convert it first."
            )
        record_property(MEASURED, [what, value])

    return record


def figures(report) -> list[list]:
    """The figures a test recorded with ``measured``, in order."""
    return [v for k, v in getattr(report, "user_properties", ()) if k == MEASURED]


ASSERTED = "asserted"  # the user property a claim test's passing assertions travel in
OBJECT_REPR = re.compile(r"<[\w.]+ (object )?at 0x|0x[0-9a-f]{6,}|/[\w.+-]+/")


def pytest_assertion_pass(item, lineno: int, orig: str, expl: str) -> None:
    """Each passing assertion of a claim test, once per line, with the values it
    compared: the evidence the Claims appendix prints beside ``measured`` figures."""
    if item.get_closest_marker("claim") is None:
        return
    if any(k == ASSERTED and v[0] == lineno for k, v in item.user_properties):
        return
    lines = (re.sub(r"\s+#\s.*$", "", line) for line in orig.splitlines())  # comments
    source = " ".join(" ".join(lines).split())
    item.user_properties.append((ASSERTED, [lineno, source, compared(expl)]))


def compared(expl: str) -> str:
    """The values an assertion compared, pytest's first line (``(1, 0) == (1, 0)``);
    "" where that line is long or shows an object's address or a path."""
    first = " ".join(expl.splitlines()[0].split()) if expl.strip() else ""
    first = re.sub(r"\d+\.\d{4,}(e[+-]?\d+)?", lambda m: f"{float(m[0]):.3g}", first)
    return "" if len(first) > 80 or OBJECT_REPR.search(first) else first


def assertions(report) -> list[list[str]]:
    """A test's passing assertions as ``[source, values compared]``, in order."""
    props = getattr(report, "user_properties", ())
    return [v[1:] for k, v in props if k == ASSERTED]


def pytest_collection_modifyitems(session, config, items):
    """Remember which collected tests are claims: their sections and ledger keys."""
    config._jitbook_claims = {
        item.nodeid: (marker[0], key(item.nodeid, marker[1]))
        for item in items
        if (marker := _claim_marker(item)) is not None
    }
    config._jitbook_outcomes = {}
    if os.environ.get(RECORD_ENV):  # a release's run: only the claims asked for
        wanted = set(json.loads(os.environ[ONLY_ENV]))
        keep = [item for item in items if item.nodeid in wanted]
        config.hook.pytest_deselected(
            items=[i for i in items if i.nodeid not in wanted]
        )
        items[:] = keep


def pytest_collectreport(report):
    """A test module that cannot even be imported here, or that skips itself as a
    whole (it needs a newer JAX): record why, for its claims."""
    path = os.environ.get(RECORD_ENV)
    if path and report.failed:
        _append(path, {"module": report.nodeid, "error": one_line(report.longreprtext)})
    elif path and report.skipped and isinstance(report.longrepr, tuple):
        _append(path, {"module": report.nodeid, "skipped": report.longrepr[2]})


def pytest_runtest_logreport(report):
    """Record each claim test's outcome once: its call, or the phase that failed."""
    config = _session.get("config")
    claims = getattr(config, "_jitbook_claims", None)
    if claims is None or report.nodeid not in claims:
        return
    done = config._jitbook_outcomes
    section, claim = claims[report.nodeid]
    if claim in done or not (report.when == "call" or report.outcome != "passed"):
        return
    row = outcome(report) | {"seconds": round(report.duration, 2)}
    if figures(report):
        row["measured"] = figures(report)
    if assertions(report):
        row["asserted"] = assertions(report)
    done[claim] = row
    path = os.environ.get(RECORD_ENV)
    if path:
        _append(path, {"test": report.nodeid, "section": section} | row)
        jax = os.environ.get("JITBOOK_LEDGER_RELEASE", "?")
        print(
            f"  jax {jax} [{len(done)}/{len(claims)}] {row['status']:5} "
            f"{row['seconds']:6.1f} s  {report.nodeid}",
            file=sys.__stderr__,
            flush=True,
        )


def pytest_configure(config):
    _session["config"] = config


def pytest_sessionfinish(session, exitstatus):
    """In the book's test run: the ledger's column must say what the claims just did."""
    config = session.config
    if os.environ.get(RECORD_ENV) or not getattr(config, "_jitbook_outcomes", None):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    older = older_gaps(config._jitbook_outcomes)
    if older and reporter:
        reporter.ensure_newline()
        reporter.write_line(
            f"note: {len(older)} claims of this run have no result on some release of "
            f"the ledger (e.g. {older[0]}); make test needs only the locked one, "
            "`make ledger-check` (CI) fails on these, and "
            '`make ledger LEDGER_ARGS="--only-missing"` fills them.',
            yellow=True,
        )
    problems = lock_disagreements(config._jitbook_outcomes)
    if problems:
        text = "\n".join(
            ["data/ledger.json disagrees with this run's claim tests (make ledger):"]
            + problems
        )
        if reporter:
            reporter.ensure_newline()
            reporter.write_line(text, red=True)
        session.exitstatus = 1


def _append(path: str, row: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
