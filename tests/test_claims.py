"""Every claim sentence of the book has a test, and every test that names a sentence
names one that exists: read statically, so this takes a second."""

import textwrap

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


def test_an_orphan_span_an_orphan_id_and_a_reused_id_are_each_reported(tmp_path):
    page = (
        "# A {#sec-a}\n\n[It holds `{python} x[\"k\"]` times,\nwrapped.]"
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
    assert len(problems) == 3, problems
    assert "clm-two is used twice" in problems[0]
    assert "clm-one has no test" in problems[1] and "'sec-a'" in problems[1]
    assert "TestMore::test_gone" in problems[2] and "clm-gone" in problems[2]
    (span,) = [s for s in spans.spans(tmp_path) if s.id == "clm-one"]
    assert span.words == "It holds … times, wrapped." and span.section == "sec-a"
