"""The claim ledger: every claim names a real section and has a row keyed by its span; the file
says what the tests do on the ledger's 11 releases (the locked one required here, the older ones
warned about here and required by `make ledger-check`)."""

import json
import re
import subprocess
import sys
from multiprocessing import resource_tracker
from types import SimpleNamespace

import pytest

from jitbook import ledger
from jitbook.ledger import cli, data, page, plugin, spans, venvs


@pytest.fixture(scope="module")
def claims():
    """Every claim test of the suite, as pytest collects it (so newly marked tests count too),
    as the ledger's rows would hold it: keyed by span."""
    return cli.rows(venvs.collect(), data.load()["claims"])


@pytest.fixture(scope="module")
def stored():
    return ledger.load()


def test_every_claim_names_a_section_that_exists(claims):
    known = page.sections()
    unknown = {
        key: row["section"]
        for key, row in claims.items()
        if row["section"] not in known
    }
    assert claims and not unknown, (
        f"claims naming no {{#sec-...}} of the book: {unknown}"
    )


def test_every_claim_has_a_row_on_the_locked_release_and_older_gaps_are_warned(
    claims, stored
):
    lock = stored["lock"]
    absent = sorted(key for key in claims if lock not in claims[key]["results"])
    assert not absent, (
        f"claims with no result on jax {lock}: run "
        f'make ledger LEDGER_ARGS="--releases lock --only-missing" (a minute or two): {absent}'
    )
    silent = sorted(
        key
        for key, row in claims.items()
        if not {"measured", "asserted"} & set(row["results"].get(lock, {}))
    )
    assert not silent, (
        f"claims whose row on jax {lock} records no figure: give the test an assertion "
        f"or a measured(...) call and rerun it on the lock: {silent}"
    )
    stale = sorted(set(stored["claims"]) - set(claims))
    assert not stale, (
        f"rows for claims that no test asserts any more (make ledger drops them): {stale}"
    )
    # gaps on older releases are reported by the plugin at the end of the session, and fail
    # `make ledger-check` (test_the_ledger_check_names_every_claim_unrun_on_a_release)


def test_a_claims_key_is_its_span_so_renaming_its_test_keeps_history_and_title(
    tmp_path,
):
    assert data.key("tests/test_a.py::test_x[3-cpu]", "clm-x") == "clm-x[3-cpu]"
    assert data.key("tests/test_a.py::TestA::test_x", "clm-x") == "clm-x"
    span = spans.spans()[0]
    old = {span.id: {"section": span.section, "title": "old", "test": "tests/t.py::test_old",
                     "results": {"0.5.3": {"status": "holds", "reason": ""}}}}  # fmt: skip
    (row,) = cli.rows(
        {"tests/t.py::test_renamed": [span.section, span.id]}, old
    ).values()
    assert (
        row["results"] == old[span.id]["results"]
        and row["test"] == "tests/t.py::test_renamed"
    )
    assert row["title"] == span.words, "the title is the sentence, not the test's name"
    other = spans.spans()[1]
    (moved,) = cli.rows(
        {"tests/t.py::test_old": [other.section, other.id]}, old
    ).values()
    assert moved["results"] == old[span.id]["results"], (
        "a new span keeps its test's history"
    )


def test_the_ledger_check_names_every_claim_unrun_on_a_release():
    book = {"releases": {"0.5.3": {}, "0.10.2": {}}, "claims": {
        "clm-a": {"results": {"0.5.3": {}, "0.10.2": {}}}, "clm-b": {"results": {"0.10.2": {}}}}}  # fmt: skip
    assert data.unrun(book) == [("clm-b", "0.5.3")]
    assert cli.missing(book, "0.5.3") == ["clm-b"] and cli.missing(book, "0.10.2") == []


def test_the_ledger_spans_eleven_releases_up_to_the_lock(stored):
    releases = ledger.releases(stored)
    assert len(releases) >= 11 and releases[-1] == data.locked_jax() == stored["lock"]
    assert set(venvs.RELEASES) <= set(releases)
    for release in releases:
        info = stored["releases"][release]
        assert info["versions"]["jax"] == release and info["seconds"] > 0
    assert stored["made"]["date"] and stored["made"]["machine"]


def test_statuses_are_the_four_words_with_a_reason_for_each_failure(stored):
    for test, claim in stored["claims"].items():
        for release, row in claim["results"].items():
            assert row["status"] in data.STATUSES, (test, release, row)
            assert row["status"] == "holds" or row["reason"], (test, release)


def test_a_disagreement_with_the_lock_column_is_reported(tmp_path):
    jax = data.metadata.version("jax")
    book = {"lock": jax, "releases": {jax: {}}, "claims": {
        "t::a": {"section": "sec-x", "results": {jax: {"status": "holds", "reason": ""}}},
        "t::b": {"section": "sec-x", "results": {jax: {"status": "fails", "reason": "E"}}},
    }}  # fmt: skip
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(book))
    ran = {
        "t::a": {"status": "holds", "reason": ""},
        "t::b": {"status": "holds", "reason": ""},
        "t::c": {"status": "fails", "reason": "assert 1 == 2"},
    }
    problems = data.lock_disagreements(ran, path)
    assert problems[0] == "  t::b: ledger says fails, this run holds"
    assert (
        problems[1].startswith(f"  t::c: no row for jax {jax} (make ledger")
        and len(problems) == 2
    )


def test_skips_are_not_applicable_and_failures_keep_one_line():
    skipped = SimpleNamespace(
        skipped=True, failed=False, longrepr=("f", 1, "Skipped: needs JAX >= 0.5")
    )
    assert ledger.outcome(skipped) == {"status": "n/a", "reason": "needs JAX >= 0.5"}
    text = "def test():\n>       assert f(0x7f3a2b1c4d5e)\nE       AssertionError: at /home/u/x/y.py line\n"
    failed = SimpleNamespace(skipped=False, failed=True, longreprtext=text)
    assert ledger.outcome(failed) == {
        "status": "fails",
        "reason": "AssertionError: at y.py line",
    }


def test_a_failure_of_the_tests_own_means_could_not_run_and_only_jax_behaving_otherwise_fails():
    def status(reason, raised_in=None):
        return plugin.classify({"status": "fails", "reason": reason}, raised_in)[
            "status"
        ]

    own = spans.ROOT / "code" / "jitbook" / "cache.py"
    # a signature or an option the release lacks, wherever it was raised
    assert status("TypeError: jit() missing 1 required positional argument: 'fun'") == (
        "could not run"
    )
    assert status(
        "TypeError: jit() got an unexpected keyword argument 'compiler_options'"
    ) == ("could not run")
    assert (
        status("AttributeError: Unrecognized config option: jax_x") == "could not run"
    )
    # an error other than an assertion, raised in the book's own code (relative or absolute)
    assert status("KeyError: 'jaxpr'", str(own)) == "could not run"
    assert status("RuntimeError: the child process failed:", "tests/processes.py") == (
        "could not run"
    )
    # JAX raising or measuring otherwise: a change in JAX
    assert status(
        "IndexError: Slice entries must be static integers", "/v/jax/_src/x.py"
    ) == ("fails")
    assert status("assert (2, 1, 1) == (100, 1, 1)", str(own)) == "fails"
    assert status("AssertionError: assert 0 == 1", "tests/test_x.py") == "fails"
    # an API the release does not have stays n/a; a result already classified stays
    assert status("ImportError: cannot import name 'export' from 'jax'") == "n/a"
    assert (
        plugin.classify({"status": "holds", "reason": ""}, str(own))["status"]
        == "holds"
    )


def test_a_claim_tests_measured_figures_travel_with_its_outcome_into_the_record(
    tmp_path,
):
    (tmp_path / "test_m.py").write_text(
        "import pytest\n\n"
        '@pytest.mark.claim("sec-x", "clm-x")\n'
        "def test_m(measured):\n"
        '    measured("programs compiled", 2)\n'
        '    measured("what print received", "a tracer")\n\n'
        '@pytest.mark.claim("sec-x", "clm-y")\n'
        "def test_bad(measured):\n"
        '    measured("a mapping", {"a": 1})\n\n'
        '@pytest.mark.claim("sec-x", "clm-z")\n'
        "def test_asserts():\n"
        "    n = 1 + 1\n"
        "    for _ in range(3):\n"
        "        assert n == 2  # recorded once\n"
        "    third = 1 / 3\n"
        "    assert third < n, 'a message'\n"
        "    assert object() is not None\n\n"
        "def test_no_claim():\n"
        "    assert True\n"
    )
    record = tmp_path / "record.jsonl"
    env = venvs._env("0") | {
        plugin.RECORD_ENV: str(record),
        plugin.ONLY_ENV: json.dumps(
            ["test_m.py::test_m", "test_m.py::test_bad", "test_m.py::test_asserts"]
        ),
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "jitbook.ledger.plugin",
         "-p", "no:cacheprovider", "--noconftest", "-o", "addopts=",
         "-o", "enable_assertion_pass_hook=true",
         "--rootdir", str(tmp_path), "test_m.py"],
        cwd=tmp_path, env=env, capture_output=True, check=False,
    )  # fmt: skip
    rows = {r["test"]: r for r in map(json.loads, record.read_text().splitlines())}
    assert rows["test_m.py::test_m"]["measured"] == [
        ["programs compiled", 2],
        ["what print received", "a tracer"],
    ]
    bad = rows["test_m.py::test_bad"]
    assert bad["status"] == "could not run" and "measured(" in bad["reason"]
    # the values each passing assertion compared, once per line, never an address
    assert rows["test_m.py::test_asserts"]["asserted"] == [
        ["n == 2", "2 == 2"],
        ["third < n", "0.333 < 2"],
        ["object() is not None", ""],
    ]
    assert "asserted" not in rows["test_m.py::test_m"]


def test_a_claims_verdict_counts_only_the_releases_it_applies_to():
    statuses = {"0.4.18": "n/a", "0.4.30": "n/a", "0.5.3": "holds", "0.6.2": "holds"}
    assert (
        page.verdict(statuses) == "holds on every release it applies to (2), n/a on 2"
    )
    statuses |= {"0.7.2": "fails", "0.8.3": "could not run", "0.9.2": None}
    assert page.verdict(statuses) == (
        "holds on 2 of the 3 releases it applies to, n/a on 2, "
        "its test could not run on 1, not yet run on 1"
    )
    marks = [(r, page.MARKS[s]) for r, s in statuses.items()]
    runs = ["– 0.4.18 to 0.4.30", "✓ 0.5.3 to 0.6.2", "✗ 0.7.2", "? 0.8.3", "· 0.9.2"]
    assert page.runs(marks) == " · ".join(r.replace(" ", page.NBSP) for r in runs)


def test_a_claims_evidence_prints_what_its_test_measured_or_what_its_assertions_compared():
    book = {"lock": "0.12.0.1", "claims": {
        "clm-a[x]": {"results": {"0.12.0.1": {"status": "holds", "reason": "",
                                              "measured": [["compiles", 1234]]}}},
        "clm-a[y]": {"results": {"0.12.0.1": {"status": "holds", "reason": "",
                                              "measured": [["traces", 0.5]]}},
                     "0.11.2": {"status": "holds", "reason": "",
                                "measured": [["compiles", 9]]}},
        "clm-b": {"results": {"0.12.0.1": {"status": "holds", "reason": ""}}},
        "clm-c": {"results": {"0.12.0.1": {"status": "holds", "reason": "", "asserted": [
            ["n == 3", "3 == 3"], ["x is not None", ""], ["m < 1", "0.5 < 1"]]}}},
    }}  # fmt: skip
    assert (
        page.measured(book, "clm-a") == "[x] compiles: **1,234**; [y] traces: **0.5**"
    )
    assert page.measured(book, "clm-b") == "not recorded"
    # a test that records no figure: the values its last assertion compared
    assert page.measured(book, "clm-c") == "`m < 1` held as `0.5 < 1`"


def test_a_module_that_cannot_be_imported_is_not_applicable_only_for_a_missing_api():
    assert (
        venvs._unimportable("ImportError: cannot import name 'export' from 'jax'")[
            "status"
        ]
        == "n/a"
    )
    assert venvs._unimportable("SyntaxError: invalid syntax")["status"] == "fails"


def test_history_says_since_which_release_a_claim_changed():
    book = {"releases": {"0.4.38": {}, "0.5.3": {}, "0.10.2": {}}, "claims": {"t::a": {
        "title": "a", "section": "sec-x", "results": {
            "0.4.38": {"status": "n/a", "reason": "needs JAX >= 0.5"},
            "0.5.3": {"status": "fails", "reason": "AssertionError"},
            "0.10.2": {"status": "holds", "reason": ""}}}}}  # fmt: skip
    assert ledger.releases(book) == ["0.4.38", "0.5.3", "0.10.2"]  # by number, not text
    (row,) = ledger.changed(book)
    assert row["history"] == "n/a on 0.4.38; fails on 0.5.3; holds since 0.10.2"
    assert (
        row["why, where it does not hold"] == "`AssertionError`"
    )  # the latest that did not hold


def _marked(*args):
    return SimpleNamespace(
        nodeid="t::a", get_closest_marker=lambda name: SimpleNamespace(args=args)
    )


def test_the_claim_marker_names_a_section_and_a_span():
    assert plugin._claim_marker(_marked("sec-x", "clm-y")) == ("sec-x", "clm-y")


@pytest.mark.parametrize(
    "args",
    [("methods", "clm-a"), ("sec-x",), ("sec-x", "y"), ("sec-x", "clm-y", "clm-z")],
)
def test_a_claim_marker_without_a_section_and_a_span_is_refused(args):
    with pytest.raises(ValueError, match=re.escape("claim('sec-...', 'clm-...')")):
        plugin._claim_marker(_marked(*args))


def test_the_command_has_help():
    out = subprocess.run(
        [sys.executable, "-m", "jitbook.ledger", "--help"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0
    for option in (
        "--releases",
        "--force",
        "--only-missing",
        "--cache",
        "--canary",
        "--check",
    ):
        assert option in out.stdout


def test_a_release_venv_made_before_an_extra_gets_it_as_of_its_own_day(
    tmp_path, monkeypatch
):
    folder = tmp_path / "jax-0.4.18"
    folder.mkdir()
    stamp = folder / "jitbook-ledger.json"
    stamp.write_text(
        json.dumps({"packages as of": "2023-10-08", "extras": ["pytest", "nbformat"]})
    )
    calls = []
    monkeypatch.setattr(
        venvs.subprocess, "run", lambda command, **kw: calls.append(command)
    )
    said = []
    info = venvs.install(
        "0.4.18", cache=tmp_path, index="https://pypi.invalid/simple", log=said.append
    )
    (command,) = calls
    assert "--uploaded-prior-to" in command and "2023-10-08T00:00:00Z" in command
    assert command[-len(venvs.EXTRAS) + 2 :] == [
        e for e in venvs.EXTRAS if e not in ("pytest", "nbformat")
    ]
    assert said == [
        f"jax 0.4.18: adding {' '.join(command[-len(venvs.EXTRAS) + 2 :])} as of 2023-10-08 to {folder}"
    ]
    assert (
        info["extras"] == list(venvs.EXTRAS) == json.loads(stamp.read_text())["extras"]
    )
    calls.clear()
    venvs.install("0.4.18", cache=tmp_path, log=said.append)
    assert calls == [], "a venv with every extra is used as it is"


@pytest.fixture
def resource_tracker_stopped():
    """A local Dask cluster's processes start multiprocessing's resource tracker, which lives as long as the
    process that asked for it: stopped once the cluster is gone, so no process outlives the suite."""
    yield
    resource_tracker._resource_tracker._stop()


def _fake_release(cache, release):
    """A release venv that is the book's own Python under another version number: its claims run in seconds."""
    from jitbook.ledger import venvs

    folder = cache / f"jax-{release}"
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    versions = {"python": "3.12", "jax": release}
    stamp = {
        "released": "2024-01-01",
        "packages as of": "2024-01-02",
        "versions": versions,
        "extras": list(venvs.EXTRAS),
        "install seconds": 1,
    }
    (folder / "jitbook-ledger.json").write_text(json.dumps(stamp))


def _as_run(path):
    """The ledger file without what differs between any two runs: dates and seconds."""
    stored = json.loads(path.read_text())
    stored.pop("made")
    for info in stored["releases"].values():
        for key in ("run on", "seconds", "install seconds"):
            info.pop(key)
    for claim in stored["claims"].values():
        for row in claim["results"].values():
            row.pop("seconds")
    return json.dumps(stored, indent=1)  # the order of every key, as in the file


def test_releases_run_as_dask_tasks_write_the_file_one_release_at_a_time_writes(
    tmp_path, monkeypatch, resource_tracker_stopped
):
    from jitbook.ledger import cli

    stored = json.loads(data.LEDGER.read_text())
    claims = {  # as collect() gives them: {test: [section, span]}
        c["test"]: [c["section"], key.split("[")[0] if key.startswith("clm-") else None]
        for key, c in stored["claims"].items()
        if c["test"].startswith("tests/test_jaxprs.py") and "[" not in key
    }
    claims = dict(list(claims.items())[:3])
    monkeypatch.setattr(
        cli, "collect", lambda: claims
    )  # the client's collection; the workers run the tests
    cache = tmp_path / "cache"
    for release in ("0.0.1", "0.0.2"):
        _fake_release(cache, release)
    one, both = tmp_path / "one.json", tmp_path / "both.json"

    def run(output, *args):
        assert cli.main(["--output", str(output), "--cache", str(cache), *args]) == 0

    run(one, "--releases", "0.0.1", "0.0.2")
    gone = data.key(*list(claims.items())[1][:1], list(claims.values())[1][1])
    stored = json.loads(one.read_text())
    for release in ("0.0.1", "0.0.2"):
        del stored["claims"][gone]["results"][release]
    for path in (one, both):
        path.write_text(json.dumps(stored))
    for flag in ("--only-missing", "--force"):
        run(one, flag, "--releases", "0.0.1")
        run(one, flag, "--releases", "0.0.2")
        run(both, flag, "--releases", "0.0.1", "0.0.2")
        assert _as_run(one) == _as_run(both), flag
        assert json.loads(one.read_text())["claims"][gone]["results"].keys() == {
            "0.0.1",
            "0.0.2",
        }


@pytest.mark.parametrize(
    "module", ["jitbook.ledger.plugin", "jitbook.classroom", "test_sandbox"]
)
def test_the_plugin_and_the_claim_modules_import_in_a_release_venv_without_dask(module):
    """A release's venv has pytest and JAX but not Dask: the plugin it loads must not
    reach the command's imports (jitbook.ledger's package import included), and a
    claim test's module must import, or its claims read n/a there."""
    from jitbook.paths import CODE, ROOT

    paths = [str(CODE), str(ROOT / "tests")]
    code = (
        "import sys; sys.modules['distributed'] = None; sys.modules['dask'] = None; "
        f"sys.path[:0] = {paths!r}; import {module}"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_merging_runs_keeps_only_the_claims_the_tests_still_assert():
    held = {"status": "holds", "reason": ""}
    base = {
        "lock": "0.12.0.1",
        "made": "",
        "releases": {"0.12.0.1": {}},
        "claims": {
            "clm-a": {
                "section": "sec-x",
                "title": "a",
                "test": "t.py::test_a",
                "results": {"0.12.0.1": held},
            }
        },
    }
    run = {"lock": "0.12.0.1", "made": "", "releases": {"0.9.2": {}}, "claims": {
        "clm-a": {"section": "sec-x", "title": "a", "test": "t.py::test_a",
                  "results": {"0.9.2": held}},
        "clm-gone": {"section": "sec-x", "title": "gone", "test": "t.py::test_gone",
                     "results": {"0.9.2": held}}}}  # fmt: skip
    merged = cli.merge([base, run], {"t.py::test_a": ("sec-x", "clm-a")})
    assert list(merged["claims"]) == ["clm-a"]
    assert set(merged["claims"]["clm-a"]["results"]) == {"0.9.2", "0.12.0.1"}
    assert list(merged["releases"]) == ["0.9.2", "0.12.0.1"]
