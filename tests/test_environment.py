"""The lock file, environment.yml and pyproject agree, so readers, CI and the site run the same versions."""

import re
import tomllib

import yaml

from jitbook.book import ROOT


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_environment_yml_names_the_locked_versions():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert any(d.startswith("quarto") for d in conda)
    pins = locked()
    for dep in conda:
        name, _, version = dep.partition("=")
        if name in ("python", "pip") or name.startswith("quarto"):
            continue
        assert pins.get(name) == version, f"environment.yml pins {name}={version}, requirements.lock has {pins.get(name)}"


def test_every_runtime_dependency_is_locked():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.12"
    pins = locked()
    for dep in project["dependencies"]:
        name = re.split(r"[<>=!\[ ]", dep)[0].lower()
        assert name in pins, f"{name} is a dependency but not pinned in requirements.lock"
