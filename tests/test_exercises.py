"""check() itself: it reports, it never raises, it stops slow answers, it finds answers by name."""

import time

from jitbook.exercises import check, registry


def test_unknown_exercise_is_a_report_not_an_error():
    report = check("why-compile.nope", lambda: None)
    assert not report.passed and "no exercise called" in report.message
    assert "why-compile.ready" in report.hint


def test_student_exception_is_reported_with_its_line():
    def run_and_wait(fn, *args):
        raise ValueError("oops")

    report = check("why-compile.ready", run_and_wait)
    assert not report.passed
    assert "raised ValueError: oops" in report.message and 'raise ValueError("oops")' in report.message


def test_not_implemented_starter_gets_a_plain_message():
    def run_and_wait(fn, *args):
        raise NotImplementedError()

    assert "still raises NotImplementedError" in check("why-compile.ready", run_and_wait).message


def test_wrong_type_is_reported():
    report = check("why-compile.fuse", 42)
    assert not report.passed and "not a function" in report.message


def test_slow_answer_is_stopped_by_the_time_limit(monkeypatch):
    import dataclasses

    from jitbook import exercises

    ex = registry()["why-compile.ready"]
    monkeypatch.setitem(exercises._REGISTRY, ex.id, dataclasses.replace(ex, time_limit=0.5))

    def run_and_wait(fn, *args):
        try:
            while True:
                time.sleep(0.01)
        except Exception:  # a student's catch-all must not swallow the time limit
            pass

    start = time.perf_counter()
    report = check("why-compile.ready", run_and_wait)
    assert time.perf_counter() - start < 5
    assert not report.passed and "longer than 0.5 s" in report.message and "stopped" in report.message


def test_answer_is_found_by_name_in_the_notebook_globals():
    import __main__

    assert not check("why-compile.ready").passed  # nothing defined yet
    assert "could not find `run_and_wait`" in check("why-compile.ready").message
    import jax

    __main__.run_and_wait = lambda fn, *a: jax.block_until_ready(fn(*a))
    try:
        assert check("why-compile.ready").passed
    finally:
        del __main__.run_and_wait


def test_report_displays_as_html_with_machine_readable_metadata():
    data, metadata = check("why-compile.fuse", 42)._repr_mimebundle_()
    assert "not yet" in data["text/html"] and data["text/plain"].startswith("NOT YET")
    assert metadata["jitbook_check"]["passed"] is False


def test_registry_ids_name_their_chapter_and_answer():
    for id, ex in registry().items():
        assert id.startswith(ex.chapter + ".") and ex.answer.isidentifier() and ex.hint
