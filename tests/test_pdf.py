"""The PDF edition's settings (_quarto-pdf.yml, filters/pdf.lua), checked on a small book that Quarto
renders to PDF with them in seconds: long tables break across pages, claim marks and the Claims
appendix link each other, a small-size PDF says so. Typst checks what it laid out itself (a
`#context` block that fails the render), since reading a PDF back would need another library.
Needs ``quarto`` on PATH; skipped without it.
"""

import os
import shutil
import subprocess

import pytest
import yaml

from jitbook.site import harness

ROOT = harness.ROOT
ROWS = 120  # about six pages of the small book's table
CLAIMS = 3

BOOK = """\
project:
  type: book
book:
  title: "A small book"
  subtitle: "Its subtitle"
  author: "The tests"
  chapters:
    - index.qmd
    - chapters/chapter.qmd
  appendices:
    - chapters/claims.qmd
"""

# What the Typst layout must show, checked by Typst: the table's first and last rows on different
# pages, every row's anchor a place a link lands on, and one mark linking to each claim's row.
PROBE = f"""
```{{=typst}}
#context {{
  let first = locate(<row-0>).page()
  let last = locate(<row-{ROWS - 1}>).page()
  assert(last > first, message: "PROBE: the long table stays on page " + str(first))
  for i in range({CLAIMS}) {{
    let row = label("ev-clm-c" + str(i))
    let marks = query(link.where(dest: row))
    assert(marks.len() == 1, message: "PROBE: " + str(marks.len()) + " marks link to " + str(row))
    assert(locate(label("clm-c" + str(i))).page() < locate(row).page(), message: "PROBE: no sentence")
  }}
}}
```
"""


def small_book(folder):
    """A book like this one in miniature: claim sentences, a Claims appendix whose long, captioned
    table links each back, and the book's own PDF profile and filter."""
    (folder / "chapters").mkdir()
    (folder / "filters").mkdir()
    (folder / "_quarto.yml").write_text(BOOK)
    profile = yaml.safe_load((ROOT / "_quarto-pdf.yml").read_text())
    profile["format"]["typst"]["keep-typ"] = True  # the Typst source, read below
    (folder / "_quarto-pdf.yml").write_text(yaml.safe_dump(profile))
    shutil.copy(ROOT / "filters" / "pdf.lua", folder / "filters" / "pdf.lua")
    (folder / "index.qmd").write_text("# Preface\n\nA preface.\n")
    sentences = "\n\n".join(
        f"A paragraph, [its claim number {i} with `code`]{{.claim #clm-c{i}}}, and more."
        for i in range(CLAIMS)
    )
    (folder / "chapters" / "chapter.qmd").write_text(f"# A chapter\n\n{sentences}\n")
    evidence = "\n".join(  # as the Claims appendix has it: a block per claim
        f"::: {{#ev-clm-c{i} .claim-evidence}}\nThe evidence of [claim {i}](chapter.qmd#clm-c{i}).\n:::\n"
        for i in range(CLAIMS)
    )
    rows = "\n".join(
        f"| chapter | []{{#row-{i}}}[claim number {i % CLAIMS}](chapter.qmd#clm-c{i % CLAIMS})"
        f" | `test_claim_{i}` and words enough to wrap the cell | ✓ ✓ ✗ |"
        for i in range(ROWS)
    )
    (folder / "chapters" / "claims.qmd").write_text(
        f"# Claims {{#sec-claims}}\n\nEvery claim.\n\n{evidence}\n"
        "| chapter | claim | test | marks |\n|:--|:--|:--|:--|\n"
        f"{rows}\n\n: Every claim. {{#tbl-claims}}\n{PROBE}"
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The small book rendered by `make pdf`'s command at the small sizes: its log and Typst source."""
    quarto = shutil.which("quarto")
    if quarto is None:
        pytest.skip("quarto is not on PATH (`make quarto`, or conda-forge's quarto)")
    folder = tmp_path_factory.mktemp("pdfbook")
    small_book(folder)
    env = {**os.environ, "JITBOOK_SMALL": "1"}
    run = subprocess.run(
        [quarto, "render", "--profile", "pdf", "--to", "typst"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, f"the PDF render failed:\n{log[-3000:]}"
    pdfs = list((folder / "_book").glob("*.pdf"))
    assert pdfs, "no PDF written"
    return {"log": log, "typst": (folder / "index.typ").read_text()}


def test_a_long_table_breaks_across_pages_and_every_claim_row_is_a_link_target(
    rendered,
):
    # the render fails (asserted in the fixture) when Typst's own probe finds otherwise
    assert "not attached to anything" not in rendered["log"], rendered["log"][-2000:]
    assert "#metadata(none)<row-0>" in rendered["typst"], (
        "an empty span anchors its row"
    )


def test_each_claim_sentence_carries_a_mark_linking_to_its_row(rendered):
    for i in range(CLAIMS):
        assert f"#link(<ev-clm-c{i}>)[claim]" in rendered["typst"]
        assert f"#link(<clm-c{i}>)" in rendered["typst"], "the row links back"


def test_a_small_size_pdf_says_so_on_its_title_page(rendered):
    subtitle = next(
        line
        for line in rendered["typst"].splitlines()
        if line.strip().startswith("subtitle: [")
    )
    assert "Its subtitle" in subtitle and "small problem sizes" in subtitle, subtitle
