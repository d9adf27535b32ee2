"""The package and the tests pass ruff with the project's configuration (pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jitbook.site.harness import ROOT


def ruff() -> str | None:
    local = Path(sys.executable).with_name("ruff")
    return str(local) if local.exists() else shutil.which("ruff")


@pytest.mark.skipif(ruff() is None, reason="ruff is not installed (it is in requirements.lock: run make setup)")
def test_ruff_is_clean():
    out = subprocess.run([ruff(), "check", "code", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
