"""The claim ledger: every claim test of the book, run on every JAX release since 0.4.

A claim test carries ``@pytest.mark.claim("sec-...")``. ``python -m jitbook.ledger``
builds one venv per JAX release (with the Equinox and optax PyPI had the day that JAX
came out), runs only the claim tests there, and writes ``data/ledger.json``: per claim
and release, *holds*, *fails* (with a one-line reason) or *n/a* (the API does not exist
yet). This module is also the pytest plugin that records outcomes, in a release's run
and in the book's own test session.
Taught in Ledger of claims: every claim on every release, How the ledger is made.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LEDGER = ROOT / "data" / "ledger.json"
CACHE = Path(
    os.environ.get("JITBOOK_LEDGER_CACHE", "~/.cache/jitbook-ledger")
).expanduser()


def public_index() -> tuple[str, str]:
    """pip's own record of the public index: its simple pages, and the JSON API that
    dates each upload (the ledger needs the dates; local mirrors do not carry them).
    Imported here, not at the top: the release venvs load this module without pip."""
    from pip._internal.models.index import PyPI

    return PyPI.simple_url, PyPI.pypi_url


# 0.4.18 is the first jaxlib with a wheel for CPython 3.12, the book's Python; then the
# last patch of each minor release up to the lock (its column runs in the book's venv).
RELEASES = (
    "0.4.18",
    "0.4.30",
    "0.4.38",
    "0.5.3",
    "0.6.2",
    "0.7.2",
    "0.8.3",
    "0.9.2",
    "0.10.2",
    "0.11.2",
)
EXTRAS = (
    "pytest",
    "threadpoolctl",
    "rich",
    "nbformat",
    "pyyaml",
    "flatbuffers",  # jax.export's serialization: without it two claims fail everywhere
)  # what the claim tests import beside JAX and the book
STATUSES = ("holds", "fails", "n/a")
NEEDS = re.compile(
    r"needs (a newer (jax|equinox|optax)|(jax|equinox|optax|jaxlib) ?>= ?[0-9.]+)",
    re.IGNORECASE,
)
RECORD_ENV = (
    "JITBOOK_LEDGER_RECORD"  # file the plugin appends outcomes to, in a release's run
)
ONLY_ENV = "JITBOOK_LEDGER_ONLY"  # the claims to run there, as a JSON list of test ids
_session: dict = {}  # the pytest config of the running session, for the report hook


# ---------------------------------------------------------------- the pytest plugin


def _claim_section(item) -> str | None:
    mark = item.get_closest_marker("claim")
    if mark is None:
        return None
    if len(mark.args) != 1 or not str(mark.args[0]).startswith("sec-"):
        raise ValueError(
            f"{item.nodeid}: write the claim marker as @pytest.mark.claim('sec-...'), "
            f"naming the section that shows it; got {mark.args!r}."
        )
    return mark.args[0]


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


def classify(row: dict) -> dict:
    """A failure on an API that JAX, Equinox or optax lacks or says it needs: n/a."""
    reason = row["reason"]
    if row["status"] == "fails" and (MISSING_API.match(reason) or NEEDS.search(reason)):
        return row | {
            "status": "n/a",
            "reason": f"not in this release: {row['reason']}",
        }
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
        return classify({"status": "fails", "reason": one_line(report.longreprtext)})
    return {"status": "holds", "reason": ""}


def pytest_collection_modifyitems(session, config, items):
    """Remember which collected tests are claims, and their sections."""
    config._jitbook_claims = {
        item.nodeid: section
        for item in items
        if (section := _claim_section(item)) is not None
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
    if report.nodeid in done or not (
        report.when == "call" or report.outcome != "passed"
    ):
        return
    row = outcome(report) | {"seconds": round(report.duration, 2)}
    done[report.nodeid] = row
    path = os.environ.get(RECORD_ENV)
    if path:
        _append(path, {"test": report.nodeid, "section": claims[report.nodeid]} | row)
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
    problems = lock_disagreements(config._jitbook_outcomes)
    if problems:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
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


# ---------------------------------------------------------------- the ledger file


def load(path: Path = LEDGER) -> dict:
    """The ledger as stored, or an empty one."""
    if path.exists():
        return json.loads(path.read_text())
    return {"made": {}, "lock": None, "releases": {}, "claims": {}}


def save(ledger: dict, path: Path = LEDGER) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ledger, indent=1, sort_keys=False) + "\n")


def locked_jax(root: Path = ROOT) -> str:
    """The JAX version requirements.lock pins: the book's own release."""
    for line in (root / "requirements.lock").read_text().splitlines():
        if line.startswith("jax=="):
            return line.split("==")[1].strip()
    raise ValueError(
        "requirements.lock pins no jax==...; the ledger needs the book's JAX."
    )


def lock_disagreements(outcomes: dict, path: Path = LEDGER) -> list[str]:
    """Claims whose status in this run differs from the ledger's column for this JAX."""
    ledger = load(path)
    lock = metadata.version("jax")  # the column of the JAX this session ran on
    problems = []
    for test, row in sorted(outcomes.items()):
        stored = ledger["claims"].get(test, {}).get("results", {}).get(lock)
        if stored is None:
            problems.append(f"  {test}: no row for jax {lock}")
        elif stored["status"] != row["status"]:
            problems.append(
                f"  {test}: ledger says {stored['status']}, this run {row['status']}"
                + (f" ({row['reason']})" if row["reason"] else "")
            )
    return problems


def machine() -> str:
    """The machine, in words: CPU model, cores, memory, OS."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{model}, {os.cpu_count()} cores, {memory:.0f} GiB, "
        f"{platform.system()} {platform.machine()}"
    )


# ---------------------------------------------------------------- claims


def collect(python: str = sys.executable, tests: Path = ROOT / "tests") -> dict:
    """Every claim test of the suite, collected by pytest: {test: section}."""
    with _record_file() as path:
        code = (
            "import sys, pytest\n"
            "class Dump:\n"
            "    def pytest_collection_finish(self, session):\n"
            "        import json\n"
            "        rows = {i.nodeid: m.args[0] for i in session.items\n"
            "                if (m := i.get_closest_marker('claim'))}\n"
            f"        with open({str(path)!r}, 'w') as f:\n"
            "            f.write(json.dumps(rows))\n"
            "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider',\n"
            f"    {str(tests)!r}], plugins=[Dump()]))\n"
        )
        done = subprocess.run(
            [python, "-c", code], cwd=ROOT, capture_output=True, text=True, env=_env()
        )
        if done.returncode not in (0, 5) or not path.read_text():
            raise RuntimeError(
                f"collecting the claim tests failed:\n{done.stdout[-3000:]}"
            )
        return json.loads(path.read_text())


def title(test: str) -> str:
    """A claim's words, from its test's name: ``test_a_b_c[x]`` -> ``a b c [x]``."""
    name = test.split("::")[-1].removeprefix("test_")
    base, _, param = name.partition("[")
    return base.replace("_", " ") + (f" [{param}" if param else "")


class _record_file:
    def __enter__(self) -> Path:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="jitbook-ledger-", suffix=".jsonl")
        os.close(fd)
        self.path = Path(name)
        return self.path

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)


# ---------------------------------------------------------------- environments


def released(package: str, version: str) -> str:
    """The day PyPI received ``package==version`` (ISO date)."""
    url = f"{public_index()[1]}/{package}/json"
    with urllib.request.urlopen(url, timeout=60) as response:
        files = json.load(response)["releases"].get(version, [])
    if not files:
        raise ValueError(f"PyPI has no files for {package}=={version}.")
    return min(f["upload_time_iso_8601"] for f in files)[:10]


def _pip_env() -> dict:
    """pip with PyPI only: local indexes and find-links carry no upload dates."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.environ.get("PIP_CERT"):
        env["PIP_CERT"] = os.environ["PIP_CERT"]
    return env


def venv_python(release: str, cache: Path = CACHE) -> Path:
    return cache / f"jax-{release}" / "bin" / "python"


def install(
    release: str, cache: Path = CACHE, index: str | None = None, log=print
) -> dict:
    """A venv with ``jax==release`` and the Equinox and optax of its day."""
    folder = cache / f"jax-{release}"
    stamp = folder / "jitbook-ledger.json"
    if stamp.exists():
        return json.loads(stamp.read_text())
    start = time.monotonic()
    day = released("jax", release)
    cutoff = (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat()
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    wanted = [f"jax=={release}", "jaxlib", "equinox", "optax", *EXTRAS]
    log(f"jax {release}: installing {' '.join(wanted[1:])} as of {cutoff}")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"),
         "install", "--quiet", "--index-url", index or public_index()[0],
         "--uploaded-prior-to", f"{cutoff}T00:00:00Z", *wanted],
        check=True, env=_pip_env(),
    )  # fmt: skip
    versions = _versions(str(folder / "bin" / "python"))
    info = {"released": day, "packages as of": cutoff, "versions": versions}
    info["install seconds"] = round(time.monotonic() - start)
    stamp.write_text(json.dumps(info))
    return info


def _versions(python: str) -> dict:
    code = (
        "import json, platform; from importlib import metadata\n"
        "v = {'python': platform.python_version()}\n"
        "for d in ('jax', 'jaxlib', 'equinox', 'optax', 'numpy'):\n"
        "    try: v[d] = metadata.version(d)\n"
        "    except metadata.PackageNotFoundError: v[d] = None\n"
        "print(json.dumps(v))"
    )
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def _env(release: str = "") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "code"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    env.setdefault("JITBOOK_SMALL", "1")
    env["JITBOOK_LEDGER_RELEASE"] = release
    env.pop(
        "XLA_FLAGS", None
    )  # the book's import sets its own; none inherited from a caller
    return env


# ---------------------------------------------------------------- one release


def run_release(
    release: str, python: str, tests: list[str], timeout: float, log=print
) -> tuple[dict, float]:
    """Run the claim tests under ``python``: {test: row} and the seconds it took."""
    start = time.monotonic()
    with _record_file() as path:
        env = _env(release) | {RECORD_ENV: str(path), ONLY_ENV: json.dumps(tests)}
        modules = sorted({test.split("::")[0] for test in tests})
        command = [
            python, "-m", "pytest", "-q", "-p", "jitbook.ledger",
            "-p", "no:cacheprovider",
            "--noconftest", "--continue-on-collection-errors", "-o", "addopts=",
            "-W", "ignore::DeprecationWarning", "-W", "ignore::FutureWarning",
            "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), *modules,
        ]  # fmt: skip
        try:
            subprocess.run(
                command, cwd=ROOT, env=env, timeout=timeout,
                stdout=subprocess.DEVNULL, stderr=None,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            log(
                f"jax {release}: stopped after {timeout:.0f} s; "
                "unfinished claims stay missing"
            )
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    results, broken = {}, {}
    for row in rows:
        if "skipped" in row:
            reason = one_line(row["skipped"].removeprefix("Skipped: "))
            broken[row["module"]] = {"status": "n/a", "reason": reason, "seconds": 0}
        elif "module" in row:
            broken[row["module"]] = _unimportable(row["error"])
        else:
            row.pop("section", None)
            results[row.pop("test")] = row
    for test in tests:
        module = test.split("::")[0]
        if test not in results and module in broken:
            results[test] = broken[module]
    return results, time.monotonic() - start


def _unimportable(error: str) -> dict:
    """A claim whose test module cannot be imported on this release."""
    missing = re.search(
        r"(ImportError|ModuleNotFoundError|AttributeError|TypeError)", error
    )
    status = "n/a" if missing else "fails"
    return {
        "status": status,
        "reason": f"test module not importable: {error}",
        "seconds": 0,
    }


# ---------------------------------------------------------------- the appendix

MARKS = {"holds": "✓", "fails": "✗", "n/a": "–", None: " "}
HEADING = re.compile(r"^(#+) (.*?) \{#(sec-[\w-]+)\}", re.MULTILINE)


def sections(root: Path = ROOT) -> dict[str, dict]:
    """Every section id of the book: {sec-id: {page, chapter, section}}."""
    found = {}
    for page in [root / "index.qmd", *sorted((root / "chapters").glob("*.qmd"))]:
        text = page.read_text()
        chapter = "Preface" if page.stem == "index" else None
        for level, heading, label in HEADING.findall(text):
            if len(level) == 1:
                chapter = heading
            found[label] = {
                "page": page.stem,
                "chapter": chapter or page.stem,
                "section": heading,
            }
    return found


def releases(ledger: dict) -> list[str]:
    return sorted(ledger["releases"], key=lambda r: _order((r, None)))


def _status(claim: dict, release: str) -> str | None:
    row = claim["results"].get(release)
    return row["status"] if row else None


def by_chapter(ledger: dict, root: Path = ROOT) -> dict[str, list[tuple[str, dict]]]:
    """The claims grouped by the chapter of their section, in the book's order."""
    known = sections(root)
    order = (root / "_quarto.yml").read_text()
    groups: dict[tuple, list] = {}
    for test, claim in ledger["claims"].items():
        where = known.get(
            claim["section"], {"page": "?", "chapter": "(unknown section)"}
        )
        place = order.find(f"{where['page']}.qmd")
        key = (place if place >= 0 else len(order), where["chapter"])
        groups.setdefault(key, []).append((test, claim))
    return {chapter: groups[place, chapter] for place, chapter in sorted(groups)}


def matrix_rows(ledger: dict, claims: list[tuple[str, dict]]) -> list[dict]:
    """One row per claim: its words, its section, a mark per release."""
    return [
        {"claim": claim["title"], "shown in": f"@{claim['section']}"}
        | {r: MARKS[_status(claim, r)] for r in releases(ledger)}
        for _, claim in claims
    ]


def matrix(ledger: dict, root: Path = ROOT):
    """The matrix: a row per claim, grouped by chapter, its marks release by release in
    one column (oldest first), so that the page stays light."""
    from jitbook.display import table

    names = releases(ledger)
    heading = f"{names[0]} … {names[-1]}"
    rows = []
    for chapter, claims in by_chapter(ledger, root).items():
        for i, r in enumerate(matrix_rows(ledger, claims)):
            marks = " ".join(r.pop(name) for name in names)
            rows.append(
                {"chapter": chapter if i == 0 else ""} | r | {heading: f"`{marks}`"}
            )
    return table(rows)


def history(ledger: dict, claim: dict) -> list[tuple[str, list[str]]]:
    """A claim's statuses as runs of consecutive releases: [(status, [releases])]."""
    runs: list[tuple[str, list[str]]] = []
    for release in releases(ledger):
        status = _status(claim, release) or "not run"
        if runs and runs[-1][0] == status:
            runs[-1][1].append(release)
        else:
            runs.append((status, [release]))
    return runs


def _span(rels: list[str]) -> str:
    return rels[0] if len(rels) == 1 else f"{rels[0]} to {rels[-1]}"


def changed(ledger: dict) -> list[dict]:
    """The claims whose status differs between releases, with where it changed."""
    rows = []
    for test, claim in ledger["claims"].items():
        runs = history(ledger, claim)
        if len(runs) < 2:
            continue
        words = [f"{status} on {_span(rels)}" for status, rels in runs[:-1]]
        last_status, last = runs[-1]
        words.append(f"{last_status} since {last[0]}")
        reasons = [  # the latest release where it did not hold says most
            claim["results"][rels[-1]]["reason"]
            for status, rels in runs
            if status != "holds" and claim["results"].get(rels[-1], {}).get("reason")
        ][-1:]
        rows.append(
            {
                "claim": claim["title"],
                "shown in": f"@{claim['section']}",
                "history": "; ".join(words),
                "why, where it does not hold": _code(reasons[0]) if reasons else "",
                "test": test,
                "last change": last[0],
            }
        )
    rows.sort(key=lambda row: _order((row["last change"], None)), reverse=True)
    return rows


def changes_table(ledger: dict):
    """The claims whose behaviour changed (a release where they fail) as a table, and a
    count of those that only became applicable, by the release their API appeared in."""
    from jitbook.display import Markdown, table

    hidden = ("test", "last change")
    everything = changed(ledger)
    behaved = [r for r in everything if "fails" in r["history"]]
    appeared = collections.Counter(
        r["last change"] for r in everything if "fails" not in r["history"]
    )
    if not everything:
        return Markdown("No claim changed between the releases of the ledger.")
    rows = [
        {k: (_code(_short(v.strip("`"), 80)) if k.startswith("why") and v else v)
         for k, v in r.items() if k not in hidden}
        for r in behaved
    ]  # fmt: skip
    since = ", ".join(
        f"{n} since {release}" for release, n in sorted(appeared.items(), key=_release)
    )
    note = (
        f"\n\n{sum(appeared.values())} more claims were not applicable before their "
        f"API existed and hold since it did: {since}."
    )
    return Markdown((table(rows).text if rows else "") + note)


def _release(item: tuple[str, int]):
    return _order((item[0], None))


def _code(text: str) -> str:
    """A reason as a code span: flags, stars and underscores stay as written."""
    return "`" + text.replace("`", "'") + "`"


def release_rows(ledger: dict) -> list[dict]:
    """Per release: versions installed, what its claims did, the time its run took."""
    rows = []
    for release in releases(ledger):
        info = ledger["releases"][release]
        v = info.get("versions", {})
        counts = {
            s: sum(_status(c, release) == s for c in ledger["claims"].values())
            for s in STATUSES
        }
        rows.append(
            {"jax": release, "jaxlib": v.get("jaxlib"), "equinox": v.get("equinox"),
             "optax": v.get("optax"), "numpy": v.get("numpy")}
            | counts
            | {"run (s)": info.get("seconds"),
               "install (s)": info.get("install seconds")}
        )  # fmt: skip
    return rows


def explorer_rows(ledger: dict) -> tuple[list[dict], list[dict]]:
    """Per release, how many claims hold, and panels: the claims that fail there (their
    reasons are in the changes table), and how many are not applicable, by section."""
    rows, panels = [], []
    claims = list(ledger["claims"].values())
    for release in releases(ledger):
        rows.append(
            {"release": release, "claims that hold": sum(
                _status(c, release) == "holds" for c in claims)}
        )  # fmt: skip
        fails = [c["title"] for c in claims if _status(c, release) == "fails"]
        absent = collections.Counter(
            c["section"] for c in claims if _status(c, release) == "n/a"
        )
        panels.append(
            {
                "fails here": "\n".join(fails) or "(none)",
                "not applicable here (claims per section)": "\n".join(
                    f"{section}: {n}" for section, n in sorted(absent.items())
                )
                or "(none)",
            }
        )
    return rows, panels


def _short(reason: str, width: int = 60) -> str:
    return reason if len(reason) <= width else reason[: width - 1] + "…"


# ---------------------------------------------------------------- the command


def missing(ledger: dict, release: str) -> list[str]:
    return [
        test
        for test, claim in ledger["claims"].items()
        if release not in claim.get("results", {})
    ]


def make(args: argparse.Namespace) -> dict:
    """Collect the claims, then fill every release's column that needs it."""
    ledger = load(args.output)
    lock = locked_jax()
    installed = metadata.version("jax")
    print(f"collecting the claim tests (book's venv, jax {installed})", flush=True)
    claims = collect()
    print(
        f"{len(claims)} claim tests in {len(set(claims.values()))} sections", flush=True
    )
    old = ledger["claims"]
    ledger["claims"] = {
        test: {"section": section, "title": title(test)}
        | {"results": old.get(test, {}).get("results", {})}
        for test, section in claims.items()
    }
    ledger["lock"] = lock
    releases = args.releases or [*RELEASES, lock]
    for release in releases:
        known = release in ledger["releases"]
        todo = list(claims) if args.force or not known else missing(ledger, release)
        if known and not args.force and not args.only_missing:
            todo = []
        if not todo:
            print(
                f"jax {release}: nothing to run (--force runs it again)",
                flush=True,
            )
            continue
        start = time.monotonic()
        if release == installed:
            python, info = (
                sys.executable,
                {"released": None, "packages as of": "the lock"},
            )
            info["versions"] = _versions(python)
        else:
            info = install(release, args.cache, args.index)
            python = str(venv_python(release, args.cache))
        setup = time.monotonic() - start
        print(
            f"jax {release}: {len(todo)} claim tests ({setup:.0f} s to set up)",
            flush=True,
        )
        results, seconds = run_release(release, python, todo, args.timeout)
        if not results:
            print(f"jax {release}: no claim ran; see the errors above", flush=True)
            continue
        for test, row in results.items():
            ledger["claims"][test]["results"][release] = row
        counts = {s: sum(r["status"] == s for r in results.values()) for s in STATUSES}
        print(
            f"jax {release}: {seconds:.0f} s, "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
            + (
                f", {len(todo) - len(results)} not run"
                if len(results) < len(todo)
                else ""
            ),
            flush=True,
        )
        previous = ledger["releases"].get(release, {})
        ledger["releases"][release] = info | {
            "run on": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "seconds": round(
                seconds + (previous.get("seconds", 0) if not args.force else 0)
            ),
            "install seconds": info.get("install seconds", round(setup)),
        }
        ledger["made"] = {
            "date": datetime.date.today().isoformat(),
            "machine": machine(),
        }
        ledger["releases"] = dict(sorted(ledger["releases"].items(), key=_order))
        save(ledger, args.output)
    return ledger


def canary(args: argparse.Namespace) -> list[str]:
    """The newest JAX in a scratch venv: which claims change against the lock."""
    ledger = load(args.output)
    lock = ledger.get("lock") or locked_jax()
    folder = args.cache / "canary"
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    python = str(folder / "bin" / "python")
    print(
        f"canary: installing the newest jax, jaxlib, equinox and optax into {folder} "
        "(about 600 MB downloaded; --cache or JITBOOK_LEDGER_CACHE moves it)",
        flush=True,
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
         "--index-url", args.index or public_index()[0],
         "jax", "jaxlib", "equinox", "optax", *EXTRAS],
        check=True, env=_pip_env(),
    )  # fmt: skip
    versions = _versions(python)
    print(f"canary: jax {versions['jax']}, jaxlib {versions['jaxlib']}", flush=True)
    claims = collect()
    results, seconds = run_release(versions["jax"], python, list(claims), args.timeout)
    moved = []
    for test in claims:
        before = ledger["claims"].get(test, {}).get("results", {}).get(lock)
        now = results.get(test, {"status": "not run", "reason": ""})
        was = before["status"] if before else "no row"
        if was != now["status"]:
            why = f" ({now['reason']})" if now["reason"] else ""
            moved.append(f"  {test}: {was} on {lock}, {now['status']} on canary{why}")
    print(
        f"canary: jax {versions['jax']} ran {len(results)} claims in {seconds:.0f} s; "
        + (f"{len(moved)} changed against jax {lock}:" if moved else f"none changed "
           f"against jax {lock}."),
        flush=True,
    )  # fmt: skip
    print("\n".join(moved), flush=True)
    return moved


def merge(ledgers: list[dict]) -> dict:
    """One ledger from several runs: later files add releases and rows."""
    out = ledgers[0]
    for other in ledgers[1:]:
        out["lock"] = out.get("lock") or other.get("lock")
        out["made"] = other["made"] or out["made"]
        out["releases"].update(other["releases"])
        for test, claim in other["claims"].items():
            mine = out["claims"].setdefault(test, claim | {"results": {}})
            mine["results"].update(
                {
                    r: classify(row | {"reason": one_line(row["reason"])})
                    for r, row in claim["results"].items()
                }
            )
    out["releases"] = dict(sorted(out["releases"].items(), key=_order))
    return out


def _order(item) -> tuple:
    return tuple(int(part) for part in item[0].split("."))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jitbook.ledger",
        description="Run the book's claim tests on every JAX release; "
        "write data/ledger.json.",
    )
    p.add_argument(
        "--releases", nargs="+", metavar="X.Y.Z",
        help=f"JAX releases to run (default: {' '.join(RELEASES)} and the locked one)",
    )  # fmt: skip
    p.add_argument(
        "--force", action="store_true", help="run releases already in the ledger again"
    )
    p.add_argument(
        "--only-missing", action="store_true",
        help="in releases already in the ledger, run only the claims without a row",
    )  # fmt: skip
    p.add_argument(
        "--cache", type=Path, default=CACHE,
        help=f"where the per-release venvs live (default {CACHE}; "
        "env JITBOOK_LEDGER_CACHE)",
    )  # fmt: skip
    p.add_argument(
        "--index",
        default=None,
        help="package index (default: the public one pip knows)",
    )
    p.add_argument(
        "--timeout", type=float, default=1200, help="seconds per release (default 1200)"
    )
    p.add_argument("--output", type=Path, default=LEDGER, help="the ledger file")
    p.add_argument(
        "--merge", nargs="+", type=Path, metavar="JSON",
        help="instead: add the releases and rows of other ledger files (parallel runs)",
    )  # fmt: skip
    p.add_argument(
        "--canary", action="store_true",
        help="instead: newest jax from the index in a scratch venv; print claims that "
        "changed against the lock (writes nothing)",
    )  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.merge:
        save(merge([load(args.output), *map(load, args.merge)]), args.output)
    elif args.canary:
        canary(args)
    else:
        make(args)
    return 0
