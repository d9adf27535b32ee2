"""One venv per JAX release, the claim tests collected and run in it."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from jitbook.ledger.data import ROOT
from jitbook.ledger.plugin import ONLY_ENV, RECORD_ENV, one_line

CACHE = Path(
    os.environ.get("JITBOOK_LEDGER_CACHE", "~/.cache/jitbook-ledger")
).expanduser()


def public_index() -> tuple[str, str]:
    """pip's own record of the public index: its simple pages, and the JSON API that
    dates each upload (the ledger needs the dates; local mirrors do not carry them).
    Imported here, not at the top: the release venvs load this module without pip."""
    from pip._internal.models.index import PyPI

    return PyPI.simple_url, PyPI.pypi_url


# 0.4.18 is the oldest jaxlib with a CPython 3.12 wheel (the book's Python) that the
# index offered (JAX's changelog says jaxlib 0.4.17 added the first; the index has no
# 0.4.17); 0.4.30 is a point in the middle of the long 0.4 line, 0.4.38 its last patch;
# then the last patch of each minor release up to the lock (its column runs in the
# book's venv).
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


# What the claim tests import beside JAX and the book: flatbuffers is imported by
# jax.export's serialization, which JAX does not require; nbclient by the harness that
# test_symptoms and test_classroom import, and the sandbox's claim starts a kernel
# (without them the canary, on the locked release itself, reported those claims as
# changed, and the releases read them n/a or failed).
EXTRAS = (
    "pytest", "threadpoolctl", "rich", "nbformat", "nbclient", "ipykernel", "pyyaml",
    "flatbuffers",
)  # fmt: skip
# About what one release's venv holds (jaxlib is most of it): said before installing.
VENV_MB = 600


def megabytes(folder: Path) -> int:
    """The disk space a folder takes, in MB."""
    return round(
        sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    )


def collect(python: str = sys.executable, tests: Path = ROOT / "tests") -> dict:
    """Every claim test of the suite, collected by pytest: {test: [section, span]}."""
    with _record_file() as path:
        code = (
            "import sys, pytest\n"
            "class Dump:\n"
            "    def pytest_collection_finish(self, session):\n"
            "        import json\n"
            "        rows = {i.nodeid: list(m.args) for i in session.items\n"
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


class _record_file:
    def __enter__(self) -> Path:
        import tempfile

        fd, name = tempfile.mkstemp(prefix="jitbook-ledger-", suffix=".jsonl")
        os.close(fd)
        self.path = Path(name)
        return self.path

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)


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
        return _add_extras(release, folder, stamp, index, log)
    start = time.monotonic()
    day = released("jax", release)
    cutoff = (datetime.date.fromisoformat(day) + datetime.timedelta(days=1)).isoformat()
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    wanted = [f"jax=={release}", "jaxlib", "equinox", "optax", *EXTRAS]
    log(
        f"jax {release}: installing {' '.join(wanted[1:])} as of {cutoff} into "
        f"{folder} (about {VENV_MB} MB; pip also keeps the wheels in ~/.cache/pip)"
    )
    _pip_install(folder, index, cutoff, wanted)
    versions = _versions(str(folder / "bin" / "python"))
    log(f"jax {release}: {folder} takes {megabytes(folder)} MB")
    info = {"released": day, "packages as of": cutoff, "versions": versions}
    info["extras"] = list(EXTRAS)
    info["install seconds"] = round(time.monotonic() - start)
    stamp.write_text(json.dumps(info))
    return info


def _pip_install(folder: Path, index, cutoff: str, packages: list[str]) -> None:
    """Install ``packages`` into the venv at ``folder`` as the index had them on
    ``cutoff``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(folder / "bin" / "python"),
         "install", "--quiet", "--index-url", index or public_index()[0],
         "--uploaded-prior-to", f"{cutoff}T00:00:00Z", *packages],
        check=True, env=_pip_env(),
    )  # fmt: skip


def _add_extras(release: str, folder: Path, stamp: Path, index, log) -> dict:
    """A venv made before an extra joined EXTRAS gets it, as of the venv's own day."""
    info = json.loads(stamp.read_text())
    missing = [extra for extra in EXTRAS if extra not in info.get("extras", ())]
    if missing:
        cutoff = info["packages as of"]
        log(f"jax {release}: adding {' '.join(missing)} as of {cutoff} to {folder}")
        _pip_install(folder, index, cutoff, missing)
        info["extras"] = list(EXTRAS)
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


def run_release(
    release: str, python: str, tests: list[str], timeout: float, log=print
) -> tuple[dict, float]:
    """Run the claim tests under ``python``: {test: row} and the seconds it took."""
    start = time.monotonic()
    with _record_file() as path:
        env = _env(release) | {RECORD_ENV: str(path), ONLY_ENV: json.dumps(tests)}
        modules = sorted({test.split("::")[0] for test in tests})
        command = [
            python, "-m", "pytest", "-q", "-p", "jitbook.ledger.plugin",
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
