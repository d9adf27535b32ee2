"""Every claim sentence of the book has a test, and every test that names a sentence
names one that exists: read statically, so this takes a second."""

import re
import shutil
import subprocess
import textwrap

import pytest

from jitbook.ledger import spans


def test_every_claim_span_has_a_test_and_every_claim_test_a_span():
    problems = spans.problems()
    assert not problems, "\n".join(problems)


def test_the_book_has_claim_spans_with_tests():
    found = spans.spans()
    assert len(found) >= 25, f"only {len(found)} claim spans in the book"
    assert all(s.section.startswith("sec-") for s in found), [
        s.id for s in found if not s.section
    ]


def _book(tmp_path, page: str, tests: str):
    (tmp_path / "chapters").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "index.qmd").write_text("# Preface {#sec-preface}\n")
    (tmp_path / "chapters" / "a.qmd").write_text(page)
    (tmp_path / "tests" / "test_a.py").write_text(textwrap.dedent(tests))
    return spans.problems(tmp_path)


def test_an_orphan_span_an_orphan_id_a_reused_id_and_a_missing_span_are_each_reported(
    tmp_path,
):
    page = (
        '# A {#sec-a}\n\n[It holds `{python} x["k"]` times,\nwrapped.]'
        "{.claim #clm-one} [Twice.]{.claim #clm-two} [Again.]{.claim #clm-two}\n"
    )
    tests = """
        import pytest

        @pytest.mark.claim("sec-a", "clm-two")
        def test_two(): ...

        class TestMore:
            @pytest.mark.claim("sec-a", "clm-gone")
            def test_gone(self): ...

        @pytest.mark.claim("sec-a")
        def test_section_only(): ...
    """
    problems = _book(tmp_path, page, tests)
    assert len(problems) == 4, problems
    assert "clm-two is used twice" in problems[0]
    assert "clm-one has no test" in problems[1] and "'sec-a'" in problems[1]
    assert "TestMore::test_gone" in problems[2] and "clm-gone" in problems[2]
    assert "test_section_only" in problems[3] and "names no claim span" in problems[3]
    (span,) = [s for s in spans.spans(tmp_path) if s.id == "clm-one"]
    assert span.words == "It holds … times, wrapped." and span.section == "sec-a"


def test_a_reader_notebook_keeps_the_sentence_and_drops_the_claim_marks():
    import nbformat

    from jitbook.site import downloads

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            'So [it runs `x["k"]` once,\nper trace.]{.claim #clm-a} Then [a link](b.qmd).'
        )
    ]
    text = downloads.reader_notebook(nb, titles={}).cells[0].source
    assert text == 'So it runs `x["k"]` once,\nper trace. Then [a link](b.qmd).'


def _pandoc() -> str | None:
    """A pandoc with the Lua API Quarto's own has (pandoc.json, pandoc.system.list_directory:
    3.1 and newer); Debian bookworm's 2.17 lacks both."""
    found = shutil.which("pandoc")
    if found is None:
        return None
    words = subprocess.run(
        [found, "--version"], capture_output=True, text=True
    ).stdout.split()
    version = (
        tuple(int(part) for part in words[1].split(".")[:2]) if len(words) > 1 else (0,)
    )
    return found if version >= (3, 1) else None


def _pandoc_or_quartos() -> str | None:
    """A pandoc on PATH new enough, else the one Quarto bundles."""
    found = _pandoc()
    quarto = shutil.which("quarto")
    if found is None and quarto:
        out = subprocess.run(
            [quarto, "pandoc", "--version"], capture_output=True, text=True
        )
        return None if out.returncode else "quarto"
    return found


@pytest.mark.skipif(
    _pandoc_or_quartos() is None,
    reason="needs pandoc 3.1 or newer on PATH, or Quarto (which bundles one)",
)
def test_the_claims_filter_puts_a_numbered_badge_after_each_claim_leading_to_its_evidence(
    tmp_path,
):
    """Run the Lua filter under plain pandoc, with the Quarto functions it uses stood in for."""
    from jitbook import ledger
    from jitbook.ledger import page

    claim = next(t for t in spans.claim_tests() if t.span)
    number = spans.numbers()[claim.span]
    holds = (
        page.claim_status(ledger.load(), claim.span, ledger.load()["lock"]) == "holds"
    )

    def run(input_file: str) -> str:
        shim = tmp_path / "shim.lua"
        shim.write_text(
            f'quarto = {{doc = {{input_file = "{input_file}", '
            'is_format = function(f) return f == "html" end}, '
            f'project = {{directory = "{spans.ROOT}"}}}}\n'
            + (spans.ROOT / "filters" / "claims.lua").read_text()
        )
        text = f"A [claim `1`.]{{.claim #{claim.span}}} and [not one]{{.other #y}}.\n"
        pandoc = _pandoc_or_quartos()
        command = [pandoc] if pandoc != "quarto" else ["quarto", "pandoc"]
        return subprocess.run(
            [*command, "-f", "markdown", "-t", "html", "--lua-filter", str(shim)],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    chapter = " ".join(run("/book/chapters/tracing.qmd").split())
    assert (
        f'id="{claim.span}"' in chapter
        and f'href="claims.html#ev-{claim.span}"' in chapter
    )
    assert chapter.count("claim-mark") == 1, "only .claim spans get a mark"
    # the badge says which claim, numbered as the appendix numbers it, ✓ only where it holds
    label = ("✓ " if holds else "") + f"claim {number}</a>"
    assert label in chapter, chapter
    assert "title=" not in chapter  # nothing only a hover would show
    assert f'href="chapters/claims.html#ev-{claim.span}"' in run("/book/index.qmd")


def test_every_claim_has_its_evidence_numbered_as_its_mark_with_its_test_code_and_a_way_back():
    from jitbook import ledger
    from jitbook.ledger import page

    book = ledger.load()
    text = page.claim_evidence(book).text
    found = spans.in_book_order()
    assert [
        int(n) for n in re.findall(r"\[claim (\d+)\]\{\.claim-number\}", text)
    ] == list(range(1, len(found) + 1))
    for span in found:
        assert f"{{#ev-{span.id} .claim-evidence}}" in text
        page_file = "../index.qmd" if span.page == "index" else f"{span.page}.qmd"
        assert f"back]({page_file}#{span.id})" in text
    first = next(t for t in spans.claim_tests() if t.span)
    code = spans.source_of(first)
    assert (
        code.lstrip().startswith("@") and f"def {first.test.split('::')[-1]}(" in code
    )
    # each test link lands on its decorator's line of its module's page
    from jitbook.site import claim_tests

    link = claim_tests.page_of(first)
    line = int(link.rsplit("#L-", 1)[1])
    module = (spans.ROOT / first.test.split("::")[0]).read_text().splitlines()
    assert module[line - 1].lstrip().startswith("@") and link in text
    page_html = claim_tests.module_page(spans.ROOT / first.test.split("::")[0])
    assert f'<span id="L-{line}">' in page_html


def test_the_site_gets_a_page_of_code_for_every_test_module_with_a_claim(tmp_path):
    from jitbook.site import claim_tests, post_render

    written = claim_tests.write(tmp_path)
    heavy = {p.name: p.stat().st_size for p in written if p.stat().st_size > 300_000}
    assert not heavy, f"code pages over the site's 300 KB a page: {heavy}"
    tests = [t for t in spans.claim_tests() if t.span]
    assert {p.name for p in written} == {
        f"{t.test.split('::')[0].removeprefix('tests/').removesuffix('.py')}.html"
        for t in spans.claim_tests()
    }
    for test in tests[:: max(1, len(tests) // 20)]:  # a sample across the modules
        page, anchor = claim_tests.page_of(test).removeprefix("../").split("#")
        html = (tmp_path / page).read_text()
        line = html.split(f'<span id="{anchor}">', 1)[1].split('<span id="L-', 1)[0]
        assert re.sub(r"<[^>]+>", "", line).lstrip().startswith("@"), (test, line)
        assert post_render.remote_loads(html) == []
