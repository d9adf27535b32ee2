"""The lock file, environment.yml and pyproject agree, so readers, CI and the site run the same versions."""

import re
import tomllib

import yaml

from jitbook.site.harness import ROOT


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
        assert pins.get(name) == version, (
            f"environment.yml pins {name}={version}, requirements.lock has {pins.get(name)}"
        )


def test_every_runtime_dependency_is_locked():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.12"
    pins = locked()
    for dep in project["dependencies"]:
        name = re.split(r"[<>=!\[ ]", dep)[0].lower()
        assert name in pins, (
            f"{name} is a dependency but not pinned in requirements.lock"
        )


def test_jupyterlab_is_locked_and_make_lab_opens_the_executed_chapters():
    assert "jupyterlab" in locked(), "make lab needs JupyterLab from requirements.lock"
    makefile = (ROOT / "Makefile").read_text()
    lab = re.search(r"^lab:.*?(?=^\S)", makefile, re.M | re.S)
    assert lab and "-m jupyter lab _build/notebooks" in lab.group(0)


def test_make_serve_serves_the_site_on_loopback_with_the_standard_library():
    makefile = (ROOT / "Makefile").read_text()
    serve = re.search(r"^serve:.*?(?=^\S)", makefile, re.M | re.S)
    assert serve and re.search(
        r"-m http\.server (\d+|\$\(PORT\)) --bind 127\.0\.0\.1 --directory _book",
        serve.group(0),
    )
    book = re.search(r"^book:.*?(?=^\S)", makefile, re.M | re.S).group(0)
    assert "make serve" in book and "index.html" not in book, (
        "make book must point to make serve, never file://"
    )
