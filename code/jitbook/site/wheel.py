"""The package as a wheel beside the site's notebooks, its dependencies pinned to
``requirements.lock``: a downloaded chapter's first cell installs it anywhere, with the
versions the book ran with."""

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jitbook.site.harness import ROOT

PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", re.M)
DEPENDENCIES = re.compile(r"^dependencies = \[\n(.*?)^\]", re.M | re.S)
REQUIREMENT = re.compile(r'"([A-Za-z0-9][A-Za-z0-9._-]*)[^"]*"')


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_versions(root: Path = ROOT) -> dict[str, str]:
    """Each ``name==version`` of ``requirements.lock``, names normalized as pip does."""
    text = (root / "requirements.lock").read_text()
    return {_key(name): version for name, version in PINNED.findall(text)}


def pinned_pyproject(text: str, versions: dict[str, str]) -> str:
    """``pyproject.toml`` with each dependency at the lock's version (``jax==0.12.0.1``
    for ``jax>=0.12``); a dependency the lock lacks stops the build."""

    def pin(match: re.Match) -> str:
        name = match.group(1)
        if _key(name) not in versions:
            raise KeyError(
                f"{name} is a dependency in pyproject.toml but not in "
                "requirements.lock: add it to the lock."
            )
        return f'"{name}=={versions[_key(name)]}"'

    block = DEPENDENCIES.search(text)
    if block is None:
        raise ValueError("pyproject.toml has no `dependencies = [` block to pin.")
    pinned = REQUIREMENT.sub(pin, block.group(1))
    return text[: block.start(1)] + pinned + text[block.end(1) :]


def version(root: Path = ROOT) -> str:
    """The package's version, from ``pyproject.toml``."""
    text = (root / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"', text, re.M)
    if found is None:
        raise ValueError('pyproject.toml has no `version = "..."` line.')
    return found.group(1)


def wheel_name(root: Path = ROOT) -> str:
    """The wheel's file name, the one the notebooks' setup cell installs."""
    return f"jitbook-{version(root)}-py3-none-any.whl"


def build(out_dir: Path, root: Path = ROOT) -> Path:
    """Build the wheel into ``out_dir`` from a copy of the checkout (its data sets
    included, nothing written into the checkout) and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="jitbook-wheel-") as scratch:
        src = Path(scratch) / "src"
        src.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
        shutil.copytree(root / "code", src / "code", ignore=ignore)  # links followed
        shutil.copy2(root / "README.md", src / "README.md")
        pyproject = (root / "pyproject.toml").read_text()
        pinned = pinned_pyproject(pyproject, lock_versions(root))
        (src / "pyproject.toml").write_text(pinned)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
             "--no-build-isolation", "--wheel-dir", str(out_dir), str(src)],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"building jitbook's wheel failed:\n{done.stderr}")
    path = out_dir / wheel_name(root)
    if not path.exists():
        raise FileNotFoundError(f"pip built no {path.name} in {out_dir}.")
    return path
