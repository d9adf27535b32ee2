"""A downloaded chapter runs anywhere: in a fresh virtual environment outside the repository, its
first cell installs jitbook's wheel from the folder beside it, and the chapter runs top to bottom.

    .venv/bin/python tests/test_downloads.py pln   # any chapter by hand, as the test runs one
"""

import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import nbformat
import pytest

from jitbook.site import downloads, harness, wheel

# The cheapest chapter that reads the package's data sets (the oaks counts) and times code.
CHAPTER = "why-compile"
# Runs inside the fresh environment: the notebook with nbclient, its kernel that environment's Python.
RUNNER = textwrap.dedent("""\
    import sys
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(sys.argv[1], as_version=4)
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
    nbformat.write(nb, sys.argv[1])
    """)
WHERE = "import sys, jitbook\nprint(sys.prefix)\nprint(jitbook.__file__)"


def downloaded(stem: str, folder: Path) -> Path:
    """The chapter as the site offers it (first cell: the setup), with the wheel beside it, in ``folder``."""
    package = wheel.build(folder).name
    nb = downloads.reader_notebook(
        harness.to_notebook(harness.ROOT / "chapters" / f"{stem}.qmd")
    )
    nb = downloads.with_setup(nb, package, None)
    nb.cells.append(nbformat.v4.new_code_cell(WHERE))
    path = folder / f"{stem}.ipynb"
    nbformat.write(nb, path)
    return path


def run_outside(stem: str, folder: Path) -> nbformat.NotebookNode:
    """Execute the downloaded chapter in a fresh venv in ``folder``: only Jupyter's kernel is there
    before its first cell runs; nothing of this checkout is on its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = downloaded(stem, folder)
    env_dir = folder / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    lock = wheel.lock_versions()
    jupyter = [
        f"{name}=={lock[name]}" for name in ("ipykernel", "nbclient", "nbformat")
    ]
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env |= {
        "JITBOOK_SMALL": "1",
        "JUPYTER_PATH": "",
        "JUPYTER_DATA_DIR": str(folder / "jupyter"),
    }
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", *jupyter], check=True, env=env
    )
    (folder / "run.py").write_text(RUNNER)
    done = subprocess.run(
        [python, "run.py", path.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (
        f"{stem}.ipynb stopped outside the repository:\n{done.stderr[-4000:]}"
    )
    return nbformat.read(path, as_version=4)


@pytest.mark.chapter
def test_a_downloaded_chapter_installs_jitbook_and_runs_in_a_fresh_venv_outside_the_repository(
    tmp_path,
):
    assert not tmp_path.is_relative_to(harness.ROOT)
    nb = run_outside(CHAPTER, tmp_path)
    errors = [
        out
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type == "error"
    ]
    assert not errors, errors
    prefix, module = nb.cells[-1].outputs[0]["text"].split()
    assert Path(prefix) == tmp_path / "venv", "the kernel ran in the fresh venv"
    assert Path(module).is_relative_to(tmp_path / "venv"), (
        f"jitbook came from {module}, not the wheel"
    )
    assert (Path(module).parent / "data" / "oaks" / "counts.csv").is_file(), (
        "the data sets are package data"
    )


def test_the_setup_cell_is_the_first_code_cell_and_says_where_the_wheel_is_missing(
    tmp_path,
):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("1")]
    )
    setup = downloads.with_setup(nb, "jitbook-0.0-py3-none-any.whl", None).cells[1]
    assert setup.metadata["jitbook"]["setup"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # a Python where jitbook is missing: isolated mode, no site-packages
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", setup.source],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert (
        "jitbook-0.0-py3-none-any.whl is not in" in done.stderr
        and "download it" in done.stderr
    ), done.stderr
    hosted = (
        downloads.with_setup(nb, "w.whl", "https://example.org/book/").cells[1].source
    )
    assert "SITE = 'https://example.org/book/notebooks/'" in hosted


if __name__ == "__main__":
    import tempfile
    import time

    stem = sys.argv[1] if len(sys.argv) > 1 else CHAPTER
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jitbook-download-") as scratch:
        nb = run_outside(stem, Path(scratch))
        codes = [c for c in nb.cells if c.cell_type == "code"]
        errors = [
            c
            for c in codes
            if any(o.output_type == "error" for o in c.get("outputs", []))
        ]
        print(
            f"{stem}: {len(codes)} code cells, {len(errors)} with an error, "
            f"{time.monotonic() - start:.0f} s; jitbook from {nb.cells[-1].outputs[0]['text'].split()[1]}"
        )
