"""The book's structure, checked without Quarto: YAML, chapter list, cross-references, the harness."""

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from jitbook.site import cli, harness, talk, wheel

ROOT = harness.ROOT
REF = re.compile(r"(?<![\w@])@((?:sec|fig|tbl|lst|exr)-[\w-]+)")
LABEL = re.compile(r"#((?:sec|fig|tbl|lst|exr)-[\w-]+)")


def pages() -> list[Path]:
    return harness.chapter_files()


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _named_files(config) -> list[str]:
    """Every project file that ``_quarto.yml`` names outside the chapter list: filters, theme files, scripts."""
    html = config["format"]["html"]
    themes = [
        t
        for mode in html.get("theme", {}).values()
        for t in (mode if isinstance(mode, list) else [mode])
    ]
    scripts = [
        s
        for key in ("pre-render", "post-render")
        for s in _as_list(config["project"].get(key, []))
    ]
    named = (
        config.get("filters", []) + [t for t in themes if t.endswith(".scss")] + scripts
    )
    return [n if isinstance(n, str) else n["path"] for n in named]


def test_every_file_the_quarto_config_names_exists():
    config = harness.book_config()
    named = _named_files(config)
    assert "theme.scss" in named, (
        "the theme that drops web fonts must be in both light and dark themes"
    )
    missing = [n for n in named if not (ROOT / n.split()[-1]).exists()]
    assert not missing, f"_quarto.yml names files that do not exist: {missing}"


def test_the_site_loads_no_web_fonts_or_math_scripts():
    html = harness.book_config()["format"]["html"]
    assert html.get("html-math-method") == "mathml", (
        "math must render offline: other methods load a CDN script"
    )
    assert re.search(
        r"^\$web-font-path:\s*false\s*;", (ROOT / "theme.scss").read_text(), re.M
    ), (
        "theme.scss must set `$web-font-path: false;` or Bootswatch themes load Google Fonts"
    )


def test_inline_code_has_no_fixed_light_background():
    """The same theme.scss sits over the light and the dark theme: an opaque light colour fails in dark mode."""
    match = re.search(
        r"^\$code-bg:\s*([^;]+);", (ROOT / "theme.scss").read_text(), re.M
    )
    assert match, (
        "theme.scss must set $code-bg, or the dark theme keeps the light page's inline-code background"
    )
    assert re.fullmatch(r"rgba\(.*,\s*0?\.\d+\)|transparent", match.group(1).strip()), (
        f"$code-bg: {match.group(1)} is opaque; use a translucent tint that reads on both pages"
    )


def test_every_listed_page_exists_and_index_comes_first():
    listed = pages()
    assert listed[0].name == "index.qmd"
    for page in listed:
        assert page.exists(), (
            f"{page.relative_to(ROOT)} is listed in _quarto.yml but does not exist"
        )


def test_every_chapter_file_is_listed():
    listed = set(pages())
    for qmd in sorted((ROOT / "chapters").glob("*.qmd")):
        assert qmd in listed, (
            f"chapters/{qmd.name} exists but is not listed in _quarto.yml"
        )


def test_every_chapter_starts_with_its_section_label():
    for page in pages()[1:]:
        first = page.read_text().lstrip().splitlines()[0]
        assert re.fullmatch(r"# .+ \{#sec-[\w-]+\}", first), (
            f"{page.name} must start with '# Title {{#sec-...}}'"
        )


def test_every_cross_reference_resolves():
    labels, refs = set(), []
    for page in pages():
        text = page.read_text()
        labels |= set(LABEL.findall(text))
        labels |= set(re.findall(r"#\|\s*label:\s*((?:fig|tbl|lst)-[\w-]+)", text))
        refs += [(page.name, r) for r in REF.findall(text)]
    missing = [(name, r) for name, r in refs if r not in labels]
    assert not missing, f"cross-references to labels defined nowhere: {missing}"


def test_harness_keeps_options_and_honours_eval_and_error(tmp_path):
    qmd = tmp_path / "demo.qmd"
    qmd.write_text(
        "# Demo {#sec-demo}\n\nText with `{python} 6 * 7` and `{python} '**' + 'x_y'`.\n\n"
        "```{python}\n#| eval: false\nraise SystemExit('must not run')\n```\n\n"
        "```{python}\n#| error: true\n1 / 0\n```\n\n"
        "```{python}\nprint('after')\n```\n"
    )
    nb = harness.execute(qmd)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert (
        code[0].metadata["jitbook"]["options"] == {"eval": False}
        and code[0].outputs == []
    )
    assert code[1].outputs[0]["ename"] == "ZeroDivisionError"
    assert code[2].outputs[0]["text"] == "after\n"
    assert r"Text with 42 and \*\*x\_y." in nb.cells[0].source  # as text, like Quarto


def test_harness_failure_names_chapter_cell_and_line(tmp_path):
    qmd = tmp_path / "broken.qmd"
    qmd.write_text(
        "# Broken {#sec-broken}\n\n```{python}\nx = 1\n```\n\nProse.\n\n```{python}\nundefined_name\n```\n"
    )
    with pytest.raises(harness.ChapterError) as err:
        harness.execute(qmd)
    message = str(err.value)
    assert "broken.qmd" in message and "line 9" in message and "NameError" in message


def test_harness_cli_writes_the_notebook(tmp_path, monkeypatch):
    qmd = tmp_path / "tiny.qmd"
    qmd.write_text("# Tiny {#sec-tiny}\n\n```{python}\n1 + 1\n```\n")
    monkeypatch.setattr(harness, "BUILD", tmp_path / "out")
    assert cli.main(["run", str(qmd)]) == 0
    nb = nbformat.read(tmp_path / "out" / "tiny.ipynb", as_version=4)
    assert nb.cells[-1].outputs[0]["data"]["text/plain"] == "2"


def test_harness_says_which_cell_runs_and_for_how_long_during_silence(
    tmp_path, monkeypatch
):
    qmd = tmp_path / "slow.qmd"
    qmd.write_text(
        "# Slow {#sec-slow}\n\n## Waiting {#sec-waiting}\n\n```{python}\nx = 1\n```\n\n"
        "```{python}\nimport time\ntime.sleep(3)\n```\n"
    )
    monkeypatch.setattr(talk, "EVERY", 0.5)
    said = io.StringIO()
    harness.execute(qmd, progress=said)
    lines = said.getvalue().splitlines()
    waiting = [line for line in lines if "cell 2 of 2 (line 9), in 'Waiting'" in line]
    assert len(waiting) >= 3, lines  # about one line each half second of the 3 s cell
    assert all(
        line.startswith("  slow.qmd: ") and "since the chapter started" in line
        for line in lines
    )
    assert re.search(
        r"running (?!0:00)\d+:\d\d; \d+:\d\d since the chapter started$", waiting[-1]
    ), waiting


def test_harness_is_silent_unless_asked(tmp_path, capsys):
    qmd = tmp_path / "quiet.qmd"
    qmd.write_text("# Quiet {#sec-quiet}\n\n```{python}\n1\n```\n")
    harness.execute(qmd)
    assert capsys.readouterr() == ("", "")


def test_timed_stamps_each_line_and_says_when_a_command_is_silent():
    said = io.StringIO()
    script = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\nraise SystemExit(3)"
    assert talk.stamped([sys.executable, "-c", script], every=0.5, out=said) == 3
    lines = said.getvalue().splitlines()
    # the times depend on the machine's load: only their form and order are checked
    stamp = r"\[(\d+):(\d\d)\] "
    assert re.fullmatch(stamp + "first", lines[0]), lines
    silent = [
        line
        for line in lines
        if re.fullmatch(
            stamp + r"\.\.\. still running \(0:0\d since its last output: first\)", line
        )
    ]
    assert silent, lines
    assert re.fullmatch(stamp + "second", lines[-2]) and lines[-1].endswith(
        "exited with 3"
    ), lines
    seconds = [
        int(m) * 60 + int(s)
        for m, s in (re.match(stamp, line).groups() for line in lines)
    ]
    assert seconds == sorted(seconds) and seconds[-2] - seconds[0] >= 2, lines


def test_run_takes_a_chapter_by_name_and_lists_the_chapters_for_a_wrong_one(capsys):
    assert cli.find("tracing") == ROOT / "chapters" / "tracing.qmd"
    assert cli.find("why_compile.qmd") == ROOT / "chapters" / "why-compile.qmd"
    assert cli.find("chapters/pln-fast.qmd") == Path("chapters/pln-fast.qmd")
    assert cli.main(["run", "tracnig"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "no chapter named 'tracnig'.\nChapters: index, why-compile, tracing,"
    ), err
    with pytest.raises(SystemExit):
        cli.main(["run"])
    assert "Chapters: index, why-compile" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
def test_make_help_is_the_default_and_lists_every_target_with_its_time():
    makefile = (ROOT / "Makefile").read_text()
    phony = {
        t
        for line in re.findall(r"^\.PHONY:(.*)$", makefile, re.M)
        for t in line.split()
    }
    out = subprocess.run(
        ["make", "--no-print-directory"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    listed = dict(re.findall(r"^  make (\S+) +(.+)$", out.stdout, re.M))
    assert set(listed) == phony, (
        f"targets without a line in `make help`: {phony - set(listed)}"
    )
    timeless = [
        t
        for t, line in listed.items()
        if t != "help"
        and not re.search(r"\d ?(s|min)\b|instant|hours|until Ctrl-C", line)
    ]
    assert not timeless, f"`make help` does not say how long these take: {timeless}"
    assert (
        "make ledger LEDGER_ARGS=--help" in out.stdout
        and "JITBOOK_SMALL=1" in out.stdout
    )


needs_pandoc = pytest.mark.skipif(
    shutil.which("pandoc") is None,
    reason="pandoc is not on PATH (Debian: apt-get install pandoc)",
)


def lua_filter(
    folder: Path, name: str, quarto_doc: str, text: str, **run
) -> subprocess.CompletedProcess:
    """One of the book's Lua filters run by plain pandoc to HTML, with the Quarto functions it
    uses stood in for by ``quarto_doc`` (a Lua table's fields)."""
    shim = folder / name
    shim.write_text(
        f"quarto = {{doc = {{{quarto_doc}}}}}\n" + (ROOT / "filters" / name).read_text()
    )
    return subprocess.run(
        ["pandoc", "-f", "markdown", "-t", "html", "--lua-filter", str(shim)],
        input=text,
        capture_output=True,
        text=True,
        **run,
    )


@needs_pandoc
def test_notebook_link_filter_links_each_chapter_to_its_notebook(tmp_path):
    """Run the Lua filter under plain pandoc, with the one Quarto function it uses stood in for."""

    def run(
        input_file: str, small: str = "0", text: str = "# Title {#sec-x}\n\nBody.\n"
    ) -> str:
        return lua_filter(
            tmp_path,
            "notebook-link.lua",
            f'input_file = "{input_file}", '
            'is_format = function(f) return f == "html" end',
            text,
            check=True,
            cwd=ROOT,
            env={**os.environ, "JITBOOK_SMALL": small},
        ).stdout

    chapter = run("/book/chapters/tracing.qmd")
    assert 'href="../notebooks/tracing.ipynb"' in chapter
    assert f'href="../notebooks/{wheel.wheel_name()}"' in chapter, (
        "the wheel its first cell installs is linked"
    )
    assert "colab" not in chapter.lower(), "no Colab link without a public address"
    hosted = run(
        "/book/chapters/tracing.qmd",
        text="---\nbook:\n  site-url: https://someone.github.io/jit-book/\n---\n# T\n",
    )
    assert (
        'href="https://colab.research.google.com/github/someone/jit-book/blob/gh-pages/notebooks/tracing.ipynb"'
        in hosted
    ) and "or from this site" in hosted
    assert "colab" not in run(
        "/book/chapters/tracing.qmd",
        text="---\nbook:\n  site-url: https://example.org/b/\n---\n# T\n",
    )
    assert chapter.index("<h1") < chapter.index("notebook-link"), (
        "the link goes under the chapter title"
    )
    assert "notebooks" not in run("/book/index.qmd")
    assert "problem-size" not in chapter and "small problem sizes" in run(
        "/book/chapters/tracing.qmd", small="1"
    )
    assert "small problem sizes" in run("/book/index.qmd", small="1")
    solution = run(
        "/book/chapters/tracing.qmd",
        text=(
            "# T\n\n::: {.cell}\n```python\ndef f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n```\n:::\n"
            "\n::: {.cell}\n```python\nprint(1)\n```\n:::\n"
        ),
    )
    assert (
        solution.count("quarto-exclude-from-search-index") == 1
        and "SOLUTION" not in solution
    )
    assert "return</span> x" in solution and "print</span>(" in solution


@needs_pandoc
def test_fold_filter_folds_reference_on_the_site_and_prints_it_open_elsewhere(tmp_path):
    """A `.fold` div is a <details> on the site, summarised by its attribute or its heading, with the
    script that opens a fold a link lands in; any other format keeps the div's content as it is."""

    def run(to: str, text: str) -> subprocess.CompletedProcess:
        return lua_filter(
            tmp_path,
            "fold.lua",
            f'is_format = function(f) return f == "{to}" end',
            text,
        )

    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    site = run(
        "html", f'::: {{.fold summary="The **full** table"}}\n{table}:::\n'
    ).stdout
    assert (
        '<details class="jitbook-fold"><summary>The <strong>full</strong> table</summary>'
        in site
    )
    assert site.index("<table") < site.index("</details>")
    assert 'closest("details.jitbook-fold")' in site  # a link into the fold opens it
    headed = run("html", "::: {.fold}\n### Tracing · 3 claims\n\nText.\n:::\n").stdout
    assert "<summary>Tracing · 3 claims</summary>" in headed and "<h3" not in headed
    printed = run("typst", f'::: {{.fold summary="The table"}}\n{table}:::\n').stdout
    assert "<details" not in printed and "<table" in printed
    assert "<script" not in run("html", "No fold here.\n").stdout
    missing = run("html", "::: {.fold}\nNo summary.\n:::\n")
    assert missing.returncode != 0 and "summary" in missing.stderr


def test_every_page_imports_jitbook_before_jax():
    """The guard flag must be set before JAX starts its backend, so jitbook comes first in each page."""
    for page in pages():
        nb = harness.to_notebook(page)
        first = next(c for c in nb.cells if c.cell_type == "code").source.splitlines()
        imports = [line for line in first if line.startswith(("import ", "from "))]
        jax_like = [
            i
            for i, line in enumerate(imports)
            if re.match(r"(import|from) (jax|equinox|optax)\b", line)
        ]
        assert "import jitbook" in [line.split("  #")[0].strip() for line in imports], (
            f"{page.name}: no import jitbook"
        )
        jitbook_at = next(
            i for i, line in enumerate(imports) if line.startswith("import jitbook")
        )
        assert all(jitbook_at < i for i in jax_like), (
            f"{page.name} imports JAX before jitbook"
        )


def _plain(text: str) -> str:
    return " ".join(text.replace("`", "").split()).rstrip("?.!").lower()


def test_docstring_back_links_read_taught_in_chapter_section():
    """One form for readers, `Taught in <Chapter>, <Section>.`, naming a real chapter and heading
    (either may be shortened to its start; a title, or its part after a colon, only to a start
    no other title shares)."""
    import ast

    titles = harness.chapter_titles()
    headings = {
        stem: [
            _plain(re.sub(r"\s*\{[^}]*\}\s*$", "", h))
            for h in re.findall(
                r"^#{1,4} (.+)$",
                (harness.ROOT / "chapters" / f"{stem}.qmd").read_text(),
                re.M,
            )
        ]
        for stem in titles
    }

    def named(chapter: str) -> list[str]:
        """The chapters whose title, or its part after a colon, starts with `chapter`: a
        split page's old short title may start the new one's too."""
        return [
            stem
            for stem, title in titles.items()
            if any(
                part.lower().startswith(chapter.lower())
                for part in (title, title.partition(": ")[2])
                if part
            )
        ]

    stale = []
    for path in sorted((harness.ROOT / "code" / "jitbook").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(
                node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            ):
                continue
            text = " ".join((ast.get_docstring(node) or "").split())
            for link in re.findall(
                r"Taught in (.+?)(?:\.(?=\s|$)|(?<=[?!])(?=\s|$))", text
            ):
                splits = [
                    (link[:k], link[k + 2 :])
                    for k in range(len(link))
                    if link.startswith(", ", k)
                ]
                if not any(
                    named(chapter) == [stem]
                    and any(h.startswith(_plain(section)) for h in headings[stem])
                    for chapter, section in splits
                    for stem in titles
                ):
                    stale.append(
                        f"{path.relative_to(harness.ROOT)}: {getattr(node, 'name', 'module')}: {link}"
                    )
    assert not stale, (
        "back-links to no chapter section (rename them to a heading of the page):\n"
        + "\n".join(stale)
    )


def test_every_gate_contributing_names_is_a_test_of_the_suite():
    """A renamed or deleted test would leave a recipe pointing at nothing."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    tests = {p.name: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}
    named = re.findall(r"(test_\w+\.py)::(test_\w+)", text)
    missing = [f"{f}::{t}" for f, t in named if f"def {t}(" not in tests.get(f, "")]
    bare = set(re.findall(r"`(test_\w+)`", text)) - {t for _, t in named}
    missing += [t for t in bare if not any(f"def {t}(" in s for s in tests.values())]
    assert named and not missing, (
        f"CONTRIBUTING.md names tests that do not exist: {missing}"
    )
