"""check() itself: it reports, it never raises, it stops slow answers, it finds answers by name."""

import dataclasses
import functools
import json
import re
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax
from jax.experimental import checkify

from jitbook import exercises, programs
from jitbook.chapters import (
    artifacts,
    jaxprs,
    methods,
    minijit,
    pln,
    recompilation,
    tracing,
)
from jitbook.chapters.pln import seed as pln_seed
from jitbook.evidence import collect
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
    assert (
        "raised ValueError: oops" in report.message
        and 'raise ValueError("oops")' in report.message
    )


def test_not_implemented_starter_gets_a_plain_message():
    def run_and_wait(fn, *args):
        raise NotImplementedError()

    assert (
        "still raises NotImplementedError"
        in check("why-compile.ready", run_and_wait).message
    )


def test_wrong_type_is_reported():
    report = check("why-compile.fuse", 42)
    assert not report.passed and "not a function" in report.message


def test_slow_answer_is_stopped_by_the_time_limit(monkeypatch):
    import dataclasses

    from jitbook import exercises

    ex = registry()["why-compile.ready"]
    monkeypatch.setitem(
        exercises._REGISTRY, ex.id, dataclasses.replace(ex, time_limit=0.5)
    )

    def run_and_wait(fn, *args):
        try:
            while True:
                time.sleep(0.01)
        except Exception:  # a student's catch-all must not swallow the time limit
            pass

    start = time.perf_counter()
    report = check("why-compile.ready", run_and_wait)
    assert time.perf_counter() - start < 5
    assert (
        not report.passed
        and "longer than 0.5 s" in report.message
        and "stopped" in report.message
    )


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
    assert (
        "<details><summary><strong>" not in data["text/html"]
    )  # what is wrong stays in view


def test_a_pass_reads_as_one_line_with_its_checks_a_click_away():
    import jax

    report = check(
        "jaxprs.count-equations", lambda fn, *a: len(jax.make_jaxpr(fn)(*a).eqns)
    )
    html = report._repr_mimebundle_()[0]["text/html"]
    summary, folded = html.split("<details><summary>", 1)[1].split("</summary>", 1)
    assert report.passed and "all checks passed" in summary
    assert f"({len(report.checks)} checks)" in summary
    assert folded.count("<li>") == len(report.checks) > 0


def test_registry_ids_name_their_chapter_and_answer():
    for id, ex in registry().items():
        assert id.startswith(ex.chapter + ".") and ex.answer.isidentifier() and ex.hint


# ---- checker holes: each closed against a wrong answer that used to pass, each open to another right one ----


def verdict(exercise_id, answer):
    report = check(exercise_id, answer)
    return report.passed, report.message


def test_ready_waits_for_every_leaf_not_the_first():
    def first_leaf_only(fn, *args):
        out = fn(*args)
        jax.tree.leaves(out)[0].block_until_ready()
        return out

    def every_leaf(fn, *args):
        out = fn(*args)
        for leaf in jax.tree.leaves(out):
            leaf.block_until_ready()
        return out

    passed, message = verdict("why-compile.ready", first_leaf_only)
    assert not passed and "waited for 1 of them" in message
    assert verdict("why-compile.ready", every_leaf) == (True, "")


def test_precompile_wants_fixed_shape_executables_not_a_warmed_jit():
    def warmed(fn, shapes):
        jitted = jax.jit(fn)
        for s in shapes:
            jitted(jnp.zeros(s, jnp.float32))
        return {s: jitted for s in shapes}

    def with_lower(fn, shapes):  # the older spelling: lower without trace
        return {
            s: jax.jit(fn).lower(jax.ShapeDtypeStruct(s, jnp.float32)).compile()
            for s in shapes
        }

    passed, message = verdict("jaxprs.precompile", warmed)
    assert not passed and "jitted function warmed up, not an executable" in message
    assert verdict("jaxprs.precompile", with_lower) == (True, "")


def test_a_check_stuck_in_compiled_code_tells_the_student_what_to_do():
    script = (
        "import jax\nfrom jitbook import exercises\n"
        "exercises.GRACE = 1.0\n"
        "def run_and_wait(fn, *args):\n"
        "    x = jax.lax.while_loop(lambda x: x < 1e30, lambda x: x + 1.0, 0.0)\n"
        "    return jax.block_until_ready(x)\n"
        "exercises.check('why-compile.ready', run_and_wait, time_limit=1)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stderr.readline()
        while line and "still running" not in line:
            line = proc.stderr.readline()
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert "The check of why-compile.ready is still running after 2 s" in line


def test_a_tracer_error_is_one_line_naming_the_students_line():
    @jax.jit
    def fast_standardize(x):
        if x.sum() > 0:  # a Python if on a traced value
            return x
        return -x

    report = check("why-compile.fuse", fast_standardize)
    assert not report.passed and "\n" not in report.message
    assert report.message.startswith(
        "tracing your function to export it raised TracerBoolConversionError"
    )
    assert report.message.endswith(
        "`if x.sum() > 0:  # a Python if on a traced value`)"
    )
    assert "(your line" in report.message and "site-packages" not in report.message
    assert (
        "TracerBoolConversionError" in report.details
    )  # JAX's own text, folded in the report


def test_a_class_answer_is_asked_for_as_a_class():
    import __main__

    assert not hasattr(__main__, "Poly")
    assert "`class Poly`" in check("methods.hash-config").message


def test_the_placeholder_of_a_top_level_answer_reads_as_not_yet_answered():
    report = check("why-compile.fuse", NotImplemented)
    assert (
        not report.passed and "still the placeholder NotImplemented" in report.message
    )


def test_no_message_stops_at_a_colon():
    message = check("cache-key.static-coeffs", lambda c: list(c)).message
    assert not message.rstrip().endswith(":") and "unhashable type: 'list'" in message


# ---- answers judged on what the student cannot fake ---------------------------------------------------------


def test_a_plain_function_with_a_fake_lower_is_not_jitted():
    from jitbook.chapters import why_compile

    def fast_standardize(x):
        return why_compile.standardize_softplus(x.T).T

    fast_standardize.lower = None
    report = check("why-compile.fuse", fast_standardize)
    assert not report.passed and "not a function made by jax.jit" in report.message


def test_an_int_whose_eq_always_holds_is_refused():
    class Yes(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    report = check("why-compile.break-even", lambda compile_s, eager_s, jit_s: Yes(1))
    assert not report.passed and "a subclass of them is not accepted" in report.message


def test_an_array_like_that_reads_the_checkers_frame_finds_no_reference():
    """Its __array__ walks the stack for the expected value: copying out happens before any reference
    exists, and only exact types are copied, so it is refused without being asked."""
    import sys

    import numpy as np

    asked = []

    class Spy:
        def __array__(self, dtype=None, copy=None):
            asked.append(True)
            frame = sys._getframe(1)
            while frame is not None:
                for value in frame.f_locals.values():
                    if isinstance(value, np.ndarray) and value.shape == (5,):
                        return value
                frame = frame.f_back
            return np.zeros(5)

    report = check("gpu.kernel-count", lambda hlo: Spy())
    assert (
        not report.passed
        and "count_fusions returned a Spy" in report.message
        and not asked
    )


def test_the_vocabulary_copies_out_exact_types_only():
    import jax.numpy as jnp
    import numpy as np
    import pytest

    from jitbook.exercises import Wrong, judge

    got = judge.plain((1, 2.0, [jnp.ones(2)], {"a": np.float32(3)}))
    assert (
        got[:2] == (1, 2.0) and type(got[2][0]) is np.ndarray and got[3] == {"a": 3.0}
    )
    assert judge.whole(4.0, "f") == 4 and type(judge.whole(4.0, "f")) is int
    with pytest.raises(Wrong, match="return a whole number"):
        judge.whole(4.5, "f")
    assert judge.agrees([1.0, 2.0], np.array([1.0, 2.0])) and not judge.agrees(
        [1.0], [1.0, 2.0]
    )


# ---- tracing, jaxprs, minijit ----


OURS = [
    id
    for id in registry()
    if id.split(".")[0] in ("tracing", "control-flow", "jaxprs", "minijit")
]
_CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def _solution(exercise_id):
    """The answer defined by the chapter's solution cell for this exercise."""
    ex = registry()[exercise_id]
    text = (_CHAPTERS / f"{ex.chapter}.qmd").read_text()
    cells = re.findall(r"```\{python\}\n(.*?)```", text, re.S)
    (source,) = [
        c
        for c in cells
        if "### BEGIN SOLUTION" in c and re.search(rf"\b{ex.answer}\b", c)
    ]
    names = {
        "jax": jax,
        "jnp": jnp,
        "lax": lax,
        "np": np,
        "tracing": tracing,
        "jaxprs": jaxprs,
        "minijit": minijit,
        "programs": programs,
    }
    exec(source, names)
    return names[ex.answer]


def _evidence(exercise_id, answer, seed):
    """What the student's kernel sends for this draw: plain JSON, as the grader reads it."""
    ex = registry()[exercise_id]
    _, requests = exercises.start(ex, seed)
    return json.loads(json.dumps(collect.collect(requests, {ex.answer: answer})))


def _judged(exercise_id, answer, seed):
    """Collected here, judged by a checker started afresh on the same seed, as the grader does."""
    return exercises.verdict(exercise_id, seed, _evidence(exercise_id, answer, seed))


def test_our_twelve_exercises_are_registered():
    assert len(OURS) == 12


@pytest.mark.parametrize("exercise_id", OURS)
def test_the_chapters_solution_passes_on_two_draws_and_evidence_from_one_fails_the_other(
    exercise_id,
):
    answer = _solution(exercise_id)
    for draw in (1, 2):
        report = _judged(exercise_id, answer, draw)
        assert report.passed, report.message
    replayed = exercises.verdict(exercise_id, 2, _evidence(exercise_id, answer, 1))
    assert not replayed.passed  # a table of one draw's answers is right on no other


@pytest.mark.parametrize("exercise_id", OURS)
def test_a_stub_fails_with_a_plain_message(exercise_id):
    def stub(*args):
        raise NotImplementedError

    report = _judged(exercise_id, stub, 3)
    assert not report.passed and "NotImplementedError" in report.message


SELF_REPORTED = {  # rows resting on a probe: the rest is values and programs
    "tracing.debug-print": ["prints the value of x at every call"],
    "control-flow.where": [],
    "control-flow.loop-once": ["jax.grad works through it"],
    "tracing.count-traces": [],
    "jaxprs.keep-dtype": [],
    "jaxprs.fixed-size": ["the jaxpr has the same size"],
}


@pytest.mark.parametrize("exercise_id", sorted(SELF_REPORTED))
def test_only_the_rows_a_probe_shows_are_marked_self_reported(exercise_id):
    report = _judged(exercise_id, _solution(exercise_id), 4)
    assert report.passed and len(report.checks) > len(report.self_reported)
    assert len(report.self_reported) == len(SELF_REPORTED[exercise_id])
    for row, start in zip(
        report.self_reported, SELF_REPORTED[exercise_id], strict=True
    ):
        assert row.startswith(start)


def test_debug_print_wants_a_host_callback_that_is_given_x():
    def plain_print(x):
        print("x =", x)
        return x * x

    def fixed_text(x):
        jax.debug.print("called")
        return x * x

    def wrong_value(x):
        jax.debug.print("x = {}", x)
        return 2 * x

    assert (
        "a plain print runs only while tracing"
        in check("tracing.debug-print", plain_print).message
    )
    assert "takes no value" in check("tracing.debug-print", fixed_text).message
    assert re.search(
        r"for inputs \[.*\] it returned",
        check("tracing.debug-print", wrong_value).message,
    )


def test_where_explains_a_python_if_and_names_the_wrong_values():
    def python_if(x):
        if x > 0:
            return x
        return 0.1 * x

    report = check("control-flow.where", python_if)
    assert "an `if`" in report.message and "TracerBoolConversionError" in report.message
    assert (
        "expected"
        in check("control-flow.where", lambda x: jnp.where(x > 0, x, 0.0)).message
    )


def test_loop_once_refuses_a_static_n_a_last_step_and_a_while_loop():
    python_loop = check("control-flow.loop-once", tracing.python_loop)
    assert (
        "range(n)" in python_loop.message
        and "TracerIntegerConversionError" in python_loop.message
    )
    assert (
        "lax.fori_loop accepts a traced trip count"
        in check("control-flow.loop-once", tracing.scan_version).message
    )
    assert (
        "n = 0" in check("control-flow.loop-once", tracing.fori_version).message
    )  # the last step only

    def with_fori_loop(
        x, n
    ):  # right values, n traced, but a while_loop: no reverse-mode gradient
        def body(i, carry):
            current, total = carry
            current = tracing.step(current)
            return current, total + current

        return lax.fori_loop(0, n, body, (x, jnp.zeros_like(x)))[1]

    fori = check("control-flow.loop-once", with_fori_loop)
    assert (
        not fori.passed and "while_loop" in fori.message and "lax.scan" in fori.message
    )


def test_loop_once_refuses_a_static_n_with_right_values():
    @functools.partial(jax.jit, static_argnums=1)
    def static_n(x, n):
        return sum(tracing.python_loop(x, k) for k in range(1, n + 1)) + jnp.zeros_like(
            x
        )

    report = check("control-flow.loop-once", static_n)
    assert not report.passed and "no static_argnums" in report.message


def test_count_traces_refuses_the_number_of_calls_and_a_count_that_ignores_weak_types():
    counts_calls = check("tracing.count-traces", lambda values: len(values))
    assert not counts_calls.passed and "the number of calls" in counts_calls.message

    def by_shape_and_dtype(values):
        return len({(jnp.shape(v), jnp.result_type(v)) for v in values})

    report = check("tracing.count-traces", by_shape_and_dtype)
    assert not report.passed and "a Python float is weakly typed" in report.message


def test_count_equations_names_printed_lines_and_nested_bodies():
    lines = check(
        "jaxprs.count-equations",
        lambda fn, *a: len(str(jax.make_jaxpr(fn)(*a)).splitlines()) - 2,
    )
    assert not lines.passed and "the number of printed lines" in lines.message
    nested = check(
        "jaxprs.count-equations",
        lambda fn, *a: len(list(programs.equations(jax.make_jaxpr(fn)(*a)))),
    )
    assert not nested.passed and "inside the loop body too" in nested.message


def test_keep_dtype_refuses_a_promoting_constant_and_a_cast_back():
    promoted = check("jaxprs.keep-dtype", lambda x: x * jnp.float32(0.5))
    assert not promoted.passed and "the result is float32" in promoted.message
    cast_back = check(
        "jaxprs.keep-dtype", lambda x: (x * np.float32(0.5)).astype(x.dtype)
    )
    assert not cast_back.passed and "the program converts dtypes" in cast_back.message


def test_fixed_size_refuses_a_last_step_an_unrolled_loop_and_an_off_by_one():
    assert "got shape (" in check("jaxprs.fixed-size", tracing.fori_version).message

    def unrolled(x, steps):
        out = []
        for _ in range(steps):
            x = jaxprs.update(x)
            out.append(x)
        return jnp.stack(out)

    assert "a Python loop is unrolled" in check("jaxprs.fixed-size", unrolled).message
    off_by_one = check(
        "jaxprs.fixed-size",
        lambda x, steps: lax.scan(lambda c, _: (jaxprs.update(c), c), x, length=steps)[
            1
        ],
    )
    assert not off_by_one.passed and "with other values" in off_by_one.message


def test_flops_wants_the_flops_entry_of_the_compiled_cost_analysis():
    whole = check(
        "jaxprs.flops",
        lambda fn, *a: jax.jit(fn).trace(*a).lower().compile().cost_analysis(),
    )
    assert not whole.passed and "whole cost analysis" in whole.message
    eqns = check("jaxprs.flops", lambda fn, *a: len(jax.make_jaxpr(fn)(*a).eqns))
    assert not eqns.passed and "XLA's cost analysis says" in eqns.message


def test_precompile_refuses_lazy_jits_and_a_list():
    lazy = check(
        "jaxprs.precompile", lambda fn, shapes: {s: jax.jit(fn) for s in shapes}
    )
    assert (
        not lazy.passed
        and "only 0 compilations happened inside precompile" in lazy.message
    )
    listed = check(
        "jaxprs.precompile", lambda fn, shapes: [jax.jit(fn) for s in shapes]
    )
    assert not listed.passed and "return a dict" in listed.message


def test_emit_primitive_wants_a_new_primitive_not_jnp():
    report = check("minijit.emit-primitive", lambda: lambda x: x**3)
    assert not report.passed and "traced to ['integer_pow', 'add']" in report.message


def test_weak_types_refuses_forgotten_weak_types_and_a_jax_abstract_value():
    forgets = check("minijit.weak-types", minijit.shape_and_dtype)
    assert not forgets.passed and "weak_type=True" in forgets.message
    jax_own = check(
        "minijit.weak-types", jax.typeof
    )  # right fields, but minijit cannot trace with it
    assert not jax_own.passed and "return a minijit.Abstract" in jax_own.message

    def python_numbers_only(value):
        plain = minijit.shape_and_dtype(value)
        weak = isinstance(value, (int, float)) and not isinstance(value, bool)
        return minijit.Abstract(plain.shape, plain.dtype, weak)

    report = check("minijit.weak-types", python_numbers_only)
    assert (
        not report.passed and "jnp.asarray of a Python float is weak" in report.message
    )


def test_explain_miss_wants_the_old_and_new_values_drawn():
    report = check(
        "minijit.explain-miss",
        lambda old, new: "shape dtype weak structure static changed",
    )
    assert (
        not report.passed
        and "a new shape" in report.message
        and "f32[" in report.message
    )


# ---- recompilation, methods, pitfalls ----


def sgd_step(w, x, y, lr):
    return w - lr * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)


def test_lr_traced_wants_lr_an_input_of_one_program():
    assert verdict("recompilation.lr-traced", jax.jit(sgd_step)) == (True, "")
    passed, message = verdict(
        "recompilation.lr-traced", jax.jit(sgd_step, static_argnames="lr")
    )
    assert not passed and "jit treats lr as static" in message
    assert (
        "not a function made by jax.jit"
        in verdict("recompilation.lr-traced", sgd_step)[1]
    )
    one_rate = jax.jit(
        lambda w, x, y, lr: sgd_step(w, x, y, 0.1)
    )  # lr an input, but never read
    assert (
        "does not give sgd_step(w, x, y, lr)"
        in verdict("recompilation.lr-traced", one_rate)[1]
    )


def _clip_with_where(v, max_norm):
    norm = jnp.linalg.norm(v)
    return jnp.where(norm > max_norm, v * (max_norm / norm), v)


def _clip_with_if(v, max_norm):
    norm = jnp.linalg.norm(v)
    if norm > max_norm:
        return v * (max_norm / norm)
    return v


def test_clip_norm_wants_max_norm_traced_and_both_sides_right():
    assert verdict("recompilation.clip-norm", jax.jit(_clip_with_where)) == (True, "")
    static = verdict(
        "recompilation.clip-norm", jax.jit(_clip_with_where, static_argnums=1)
    )[1]
    assert "jit treats max_norm as static" in static
    assert (
        "TracerBoolConversionError"
        in verdict("recompilation.clip-norm", jax.jit(_clip_with_if))[1]
    )
    always = verdict(
        "recompilation.clip-norm", jax.jit(lambda v, m: v * (m / jnp.linalg.norm(v)))
    )[1]
    assert (
        "above the norm" not in always and "returned" in always and "expected" in always
    )


@jax.jit
def _bucket_mean(padded, n):
    return jnp.sum(padded) / n


def _pad_to_bucket(x):
    padded = np.zeros(recompilation.next_bucket(len(x)), np.float32)
    padded[: len(x)] = x
    return padded, len(x)


def buckets(monkeypatch, pad, mean):
    """The buckets exercise asks for two names: both are looked up in the notebook."""
    import __main__

    monkeypatch.setattr(__main__, "pad_to_bucket", pad, raising=False)
    monkeypatch.setattr(__main__, "bucket_mean", mean, raising=False)
    report = check("recompilation.buckets")
    return report.passed, report.message


def test_buckets_wants_few_padded_shapes_and_the_length_traced(monkeypatch):
    assert buckets(monkeypatch, _pad_to_bucket, _bucket_mean) == (True, "")

    def one_bucket(x):  # another right answer: one shape for every length
        padded = np.zeros(256, np.float32)
        padded[: len(x)] = x
        return padded, len(x)

    assert buckets(monkeypatch, one_bucket, _bucket_mean) == (True, "")
    unpadded = buckets(monkeypatch, lambda x: (np.asarray(x), len(x)), _bucket_mean)[1]
    assert "different lengths" in unpadded and "each one is a compile" in unpadded
    by_padded = buckets(
        monkeypatch, _pad_to_bucket, jax.jit(lambda padded, n: jnp.mean(padded))
    )[1]
    assert "divide by the true length n" in by_padded
    static = jax.jit(lambda padded, n: jnp.sum(padded) / n, static_argnums=1)
    assert "jit treats n as static" in buckets(monkeypatch, _pad_to_bucket, static)[1]
    numpy_mean = buckets(
        monkeypatch, _pad_to_bucket, lambda padded, n: np.sum(padded) / n
    )[1]
    assert "`bucket_mean` is not a function made by jax.jit" in numpy_mean

    def pads_with_jnp(x):
        size = recompilation.next_bucket(len(x))
        return jnp.pad(jnp.asarray(x), (0, size - len(x))), len(x)

    assert (
        "eager jnp operations compile once per shape"
        in buckets(monkeypatch, pads_with_jnp, _bucket_mean)[1]
    )
    import __main__

    monkeypatch.delattr(__main__, "bucket_mean", raising=False)
    report = check(
        "recompilation.buckets", _pad_to_bucket
    )  # the other name is looked up in the notebook
    assert not report.passed and "I could not find `bucket_mean`" in report.message


class _ById:
    """Hashable, but by identity."""

    def __init__(self, coeffs):
        self.coeffs = tuple(coeffs)

    def __iter__(self):
        return iter(self.coeffs)


def test_static_coeffs_wants_equal_hashable_plain_values():
    assert verdict("cache-key.static-coeffs", lambda c: tuple(float(v) for v in c)) == (
        True,
        "",
    )
    passed, message = verdict("cache-key.static-coeffs", lambda c: c)
    assert (
        not passed
        and "jit refused" in message
        and "Non-hashable static arguments" in message
    )
    assert "returned a _ById" in verdict("cache-key.static-coeffs", _ById)[1]
    fixed = verdict(
        "cache-key.static-coeffs", lambda c: (1.0, 2.0, 3.0)
    )  # right for the old fixed input only
    assert not fixed[0] and "evaluated to" in fixed[1]


@dataclasses.dataclass(frozen=True)
class _Poly:
    coeffs: tuple

    @functools.partial(jax.jit, static_argnums=0)
    def evaluate(self, x):
        return sum(c * x**i for i, c in enumerate(self.coeffs))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PytreePoly:  # coefficients traced: equal shapes share a program, whatever the values
    coeffs: tuple

    @jax.jit
    def evaluate(self, x):
        return sum(c * x**i for i, c in enumerate(self.coeffs))


class SlotPoly:  # static self without a dataclass: hashable, equal by coefficients, read-only
    __slots__ = ("coeffs",)

    def __init__(self, coeffs):
        object.__setattr__(self, "coeffs", tuple(coeffs))

    def __setattr__(self, name, value):
        raise AttributeError("SlotPoly is read-only")

    def __eq__(self, other):
        return isinstance(other, SlotPoly) and other.coeffs == self.coeffs

    def __hash__(self):
        return hash(self.coeffs)

    @functools.partial(jax.jit, static_argnums=0)
    def evaluate(self, x):
        return jnp.polyval(jnp.asarray(self.coeffs[::-1]), x)


class _MutablePoly:
    """Hashed by value but mutable, the pattern JAX's FAQ rules out for static arguments."""

    def __init__(self, coeffs):
        self.coeffs = tuple(coeffs)

    @functools.partial(jax.jit, static_argnums=0)
    def evaluate(self, x):
        return sum(c * x**i for i, c in enumerate(self.coeffs))

    def __hash__(self):
        return hash(self.coeffs)

    def __eq__(self, other):
        return isinstance(other, _MutablePoly) and self.coeffs == other.coeffs


@dataclasses.dataclass(frozen=True, eq=False)
class _IdentityPoly:
    """Frozen, but hashed and compared by identity."""

    coeffs: tuple

    @functools.partial(jax.jit, static_argnums=0)
    def evaluate(self, x):
        return sum(c * x**i for i, c in enumerate(self.coeffs))


@dataclasses.dataclass(frozen=True)
class _UnjittedPoly:
    """Right values, never compiled."""

    coeffs: tuple

    def evaluate(self, x):
        return sum(c * x**i for i, c in enumerate(self.coeffs))


def test_hash_config_wants_a_frozen_static_self_hashed_by_value():
    assert verdict("methods.hash-config", _Poly) == (True, "")
    assert verdict("methods.hash-config", SlotPoly) == (True, "")
    report = check("methods.hash-config", _Poly)
    assert (
        report.passed
        and "an equal polynomial reuses the compiled code" in report.self_reported
    )
    assert "evaluate gives the polynomial's values" not in report.self_reported
    passed, message = verdict("methods.hash-config", PytreePoly)
    assert not passed and "traced values, not part of a static self" in message
    assert "was accepted" in verdict("methods.hash-config", _MutablePoly)[1]
    assert "must have the same hash" in verdict("methods.hash-config", _IdentityPoly)[1]
    assert (
        "not a jax.jit-wrapped function"
        in verdict("methods.hash-config", _UnjittedPoly)[1]
    )
    assert "should be a class" in verdict("methods.hash-config", lambda c: None)[1]


def _make_trainer(flatten, unflatten=None):
    """A Trainer class whose tree_flatten (and tree_unflatten) a wrong answer gets wrong."""

    @jax.tree_util.register_pytree_node_class
    class Trainer:
        def __init__(self, weight, learning_rate, activation):
            self.weight, self.learning_rate, self.activation = (
                weight,
                learning_rate,
                activation,
            )

        def tree_flatten(self):
            return flatten(self)

        @classmethod
        def tree_unflatten(cls, aux, children):
            return unflatten(cls, aux, children) if unflatten else cls(*children, *aux)

        @jax.jit
        def step(self, x):
            g = jax.grad(lambda w: jnp.sum(methods.activate(self.activation, w * x)))(
                self.weight
            )
            return Trainer(
                self.weight - self.learning_rate * g,
                self.learning_rate,
                self.activation,
            )

    return Trainer


def test_pytree_trainer_wants_rate_a_child_and_activation_metadata():
    right = _make_trainer(lambda t: ((t.weight, t.learning_rate), (t.activation,)))
    assert verdict("pytrees.trainer", right) == (True, "")
    lr_static = _make_trainer(
        lambda t: ((t.weight,), (t.learning_rate, t.activation)),
        lambda cls, aux, ch: cls(ch[0], *aux),
    )
    assert (
        "a new learning_rate compiled step 1 time(s)"
        in verdict("pytrees.trainer", lr_static)[1]
    )
    all_children = _make_trainer(
        lambda t: ((t.weight, t.learning_rate, t.activation), ())
    )
    passed, message = verdict("pytrees.trainer", all_children)
    assert not passed and "raised TypeError" in message
    drops_lr = _make_trainer(
        lambda t: ((t.weight, t.learning_rate), (t.activation,)),
        lambda cls, aux, ch: cls(ch[0], 0.0, *aux),
    )
    assert (
        "tree_unflatten restores every field" in verdict("pytrees.trainer", drops_lr)[1]
    )


def test_pytree_trainer_answers_an_equinox_attempt_in_equinox_terms():
    import equinox as eqx

    class FloatRate(eqx.Module):
        weight: jax.Array
        learning_rate: float
        activation: str = eqx.field(static=True)

        @eqx.filter_jit
        def step(self, x):
            loss = lambda w: jnp.sum(methods.activate(self.activation, w * x))  # noqa: E731
            weight = self.weight - self.learning_rate * jax.grad(loss)(self.weight)
            return FloatRate(weight, self.learning_rate, self.activation)

    class ArrayRate(eqx.Module):
        weight: jax.Array
        learning_rate: jax.Array
        activation: str = eqx.field(static=True)

        def __init__(self, weight, learning_rate, activation):
            self.weight, self.activation = weight, activation
            self.learning_rate = jnp.asarray(learning_rate)

        @eqx.filter_jit
        def step(self, x):
            loss = lambda w: jnp.sum(methods.activate(self.activation, w * x))  # noqa: E731
            weight = self.weight - self.learning_rate * jax.grad(loss)(self.weight)
            return ArrayRate(weight, self.learning_rate, self.activation)

    passed, message = verdict("pytrees.trainer", FloatRate)
    assert (
        not passed and "eqx.filter_jit treats a Python float field as static" in message
    )
    assert "child" not in message and "aux_data" not in message
    assert verdict("pytrees.trainer", ArrayRate) == (True, "")


def test_shared_function_wants_one_function_object_for_all_models():
    def shared(scales):
        return [methods.MappedEqx(s * jnp.ones(4), jax.nn.softplus) for s in scales]

    def a_lambda_each(scales):
        return [
            methods.MappedEqx(s * jnp.ones(4), lambda v: jax.nn.softplus(v))
            for s in scales
        ]

    assert verdict("pytrees.shared-function", shared) == (True, "")
    assert (
        "compiled run 3 times" in verdict("pytrees.shared-function", a_lambda_each)[1]
    )
    assert (
        "return a list of methods.MappedEqx"
        in verdict("pytrees.shared-function", lambda s: None)[1]
    )
    fixed = verdict(
        "pytrees.shared-function",  # right only for the old fixed scales
        lambda s: [
            methods.MappedEqx(c * jnp.ones(4), jax.nn.softplus) for c in (1.0, 2.0, 3.0)
        ],
    )
    assert not fixed[0] and "should return softplus" in fixed[1]


def test_closure_to_argument_wants_one_jitted_gradient_of_the_layer():
    grad_wrt_layer = jax.jit(jax.grad(methods.layer_loss))
    assert verdict(
        "methods.closure-to-argument", lambda layer, x: grad_wrt_layer(layer, x).weight
    ) == (True, "")

    def closure_per_call(layer, x):
        loss = lambda w: methods.layer_loss(methods.EqxLayer(w, layer.activation), x)  # noqa: E731
        return jax.jit(jax.grad(loss))(layer.weight)

    assert (
        "compiled one function 3 times"
        in verdict("methods.closure-to-argument", closure_per_call)[1]
    )
    input_grad = jax.jit(
        jax.grad(methods.layer_loss, argnums=1)
    )  # with respect to x, not the weight
    assert "not the gradient" in verdict("methods.closure-to-argument", input_grad)[1]
    assert (
        "returned EqxLayer" in verdict("methods.closure-to-argument", grad_wrt_layer)[1]
    )


def test_method_checkers_leave_the_students_caches_alone():
    kept = jax.jit(lambda v: v + 1)
    kept(jnp.ones(3))
    right = _make_trainer(lambda t: ((t.weight, t.learning_rate), (t.activation,)))
    for exercise, answer in (
        ("methods.hash-config", _Poly),
        ("pytrees.trainer", right),
    ):
        assert check(exercise, answer).passed, exercise
        assert check(exercise, answer).passed, (
            exercise
        )  # again: no cleared cache needed to pass
    assert kept._cache_size() == 1  # jax.clear_caches() would have emptied it


def test_key_argument_wants_the_key_an_input_of_the_program():
    @jax.jit
    def jitter(x, key):
        return x + 0.1 * jax.random.normal(key, x.shape)

    assert verdict("pitfalls.key-argument", jitter) == (True, "")
    baked = jax.random.key(0)
    global_key = jax.jit(lambda x, key: x + 0.1 * jax.random.normal(baked, x.shape))
    assert (
        "same noise for two different keys"
        in verdict("pitfalls.key-argument", global_key)[1]
    )
    twice = jax.jit(lambda x, key: x + 0.2 * jax.random.normal(key, x.shape))
    assert "should be x + 0.1" in verdict("pitfalls.key-argument", twice)[1]


def test_donate_step_reads_the_donation_off_the_program():
    assert verdict(
        "pitfalls.donate-step", jax.jit(lambda s: 0.9 * s, donate_argnums=0)
    ) == (True, "")
    passed, message = verdict("pitfalls.donate-step", jax.jit(lambda s: 0.9 * s))
    assert not passed and "donate_argnums" in message
    halved = jax.jit(lambda s: 0.5 * s, donate_argnums=0)
    assert "should return 0.9 * state" in verdict("pitfalls.donate-step", halved)[1]


def test_checked_take_wants_checkifys_pair_under_jit():
    safe = checkify.checkify(jax.jit(lambda x, i: x[i]), errors=checkify.index_checks)
    assert verdict("pitfalls.checked-take", safe) == (True, "")
    unchecked = verdict(
        "pitfalls.checked-take", checkify.checkify(jax.jit(lambda x, i: x[i]))
    )[1]
    assert "index_checks" in unchecked
    assert (
        "(error, value)"
        in verdict("pitfalls.checked-take", jax.jit(lambda x, i: x[i]))[1]
    )

    def stub(x, i):
        raise NotImplementedError()

    assert (
        "still raises NotImplementedError" in verdict("pitfalls.checked-take", stub)[1]
    )


def test_the_stubs_of_these_chapters_fail():
    import __main__

    for exercise_id in (
        "recompilation.lr-traced",
        "recompilation.clip-norm",
        "recompilation.buckets",
        "cache-key.static-coeffs",
        "methods.hash-config",
        "pytrees.trainer",
        "pytrees.shared-function",
        "methods.closure-to-argument",
        "pitfalls.key-argument",
        "pitfalls.donate-step",
        "pitfalls.checked-take",
    ):
        assert not hasattr(__main__, registry()[exercise_id].answer)
        report = check(exercise_id, NotImplemented)
        assert not report.passed and "placeholder NotImplemented" in report.message, (
            exercise_id
        )


# ---- artifacts, devices, gpu, pln ----
# Each exercise: the chapter's solution passes on inputs drawn from several seeds, the starter fails, and a fake
# that was right on the old fixed test points (or a lookup table) fails once the inputs are drawn.


SEEDS = (0, 1, 2)


def graded(exercise_id, answer, seed=0):
    """The grader's path: requests drawn from ``seed``, evidence collected as plain data, the verdict on it."""
    ex = registry()[exercise_id]
    _, requests = exercises.start(ex, seed)
    evidence = collect.collect(requests, {ex.answer: answer})
    return exercises.verdict(exercise_id, seed, json.loads(json.dumps(evidence)))


def failures(exercise_id, answer):
    """What the answer is told on each seed where it fails: nothing, for a right answer."""
    reports = [graded(exercise_id, answer, seed) for seed in SEEDS]
    return [r.message for r in reports if not r.passed]


def stub(*args):
    raise NotImplementedError()


def test_donate_update_reads_the_donation_in_the_program_and_runs_it_on_drawn_states():
    assert not failures(
        "artifacts.donate-update",
        jax.jit(artifacts.sgd_update, donate_argnames="state"),
    )
    assert not failures(
        "artifacts.donate-update", jax.jit(artifacts.sgd_update, donate_argnums=0)
    )
    plain = graded("artifacts.donate-update", jax.jit(artifacts.sgd_update))
    assert not plain.passed and "donates no argument" in plain.message
    gradient = graded(
        "artifacts.donate-update", jax.jit(artifacts.sgd_update, donate_argnums=1)
    )
    assert not gradient.passed and "argument(s) [1]" in gradient.message
    assert (
        "not a function made by jax.jit"
        in graded("artifacts.donate-update", artifacts.sgd_update).message
    )
    assert (
        "NotImplementedError"
        in graded("artifacts.donate-update", jax.jit(stub)).message
    )
    # right on the old fixed point (state of ones, gradient of twos) only
    fixed = graded(
        "artifacts.donate-update",
        jax.jit(lambda state, grad: state * 0.8, donate_argnums=0),
    )
    assert not fixed.passed and "is not sgd_update(state, grad)" in fixed.message


def _predict_export(x_spec):
    w = jax.ShapeDtypeStruct((3, 2), jnp.float32)
    return export.export(jax.jit(artifacts.predict))(w, x_spec)


def test_any_batch_runs_the_shipped_program_at_batch_sizes_it_draws():
    assert not failures("artifacts.any-batch", _predict_export(artifacts.batch_spec(3)))
    fixed = graded(
        "artifacts.any-batch",
        _predict_export(jax.ShapeDtypeStruct((7, 3), jnp.float32)),
    )
    assert not fixed.passed and "with a batch of 1 raised ValueError" in fixed.message
    assert (
        "build it with export.export"
        in graded("artifacts.any-batch", jax.jit(artifacts.predict)).message
    )
    # the old checker's weights baked in: right only for them
    old_w = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    baked = export.export(jax.jit(lambda w, x: jnp.tanh(x @ old_w)))(
        jax.ShapeDtypeStruct((3, 2), jnp.float32), artifacts.batch_spec(3)
    )
    report = graded(
        "artifacts.any-batch", baked, seed=5
    )  # seed 0 draws the old weights again
    assert not report.passed and "the result differs from predict" in report.message


def test_scan_loop_wants_one_rolled_loop_whatever_n_is():
    def damped_steps(x, n):  # the chapter's solution
        return jax.lax.fori_loop(0, n, lambda i, x: jnp.sin(x) * 0.99, x)

    assert not failures("artifacts.scan-loop", jax.jit(damped_steps, static_argnums=1))
    assert not failures(
        "artifacts.scan-loop", jax.jit(damped_steps)
    )  # n traced: one program too
    assert not failures(
        "artifacts.scan-loop", jax.jit(artifacts.scanned_steps, static_argnums=1)
    )
    unrolled = graded(
        "artifacts.scan-loop", jax.jit(artifacts.unrolled_steps, static_argnums=1)
    )
    assert not unrolled.passed and "its program grows with n" in unrolled.message
    assert (
        "not a function made by jax.jit"
        in graded("artifacts.scan-loop", damped_steps).message
    )
    assert (
        "NotImplementedError"
        in graded("artifacts.scan-loop", jax.jit(stub, static_argnums=1)).message
    )
    # right for the old test points (n = 3 and 50, one program for 10 and 1000)
    capped = jax.jit(lambda x, n: damped_steps(x, min(n, 50)), static_argnums=1)
    report = graded("artifacts.scan-loop", capped)
    assert (
        not report.passed and "differs from artifacts.unrolled_steps" in report.message
    )


def test_table_argument_wants_the_weights_an_input_of_one_program():
    assert not failures("artifacts.table-argument", jax.jit(artifacts.apply_table))

    def baked(w, x):  # a constant as large as the weights rides along in the program
        table = np.random.default_rng(0).normal(size=w.shape).astype(np.float32)
        return w @ x + 0 * jnp.sum(jnp.asarray(table))

    report = graded("artifacts.table-argument", jax.jit(baked))
    assert not report.passed and "a weight matrix is baked in" in report.message
    ignored = graded(
        "artifacts.table-argument",
        jax.jit(lambda w, x: jnp.ones((w.shape[0], 40)) @ x[:40]),
    )
    assert not ignored.passed and "ignores its weights argument" in ignored.message
    # right for the old checker's x of ones only
    ones = graded(
        "artifacts.table-argument", jax.jit(lambda w, x: w @ jnp.ones_like(x))
    )
    assert not ones.passed and "does not compute weights @ x" in ones.message


def test_static_trip_count_compiles_the_program_here_and_reads_its_trip_count():
    @partial(jax.jit, static_argnums=1)
    def decay(x, n):  # the chapter's solution
        return jax.lax.fori_loop(0, n, lambda i, x: x * 0.999, x)

    assert not failures("gpu.static-trip-count", decay)
    traced = graded(
        "gpu.static-trip-count",
        jax.jit(lambda x, n: jax.lax.fori_loop(0, n, lambda i, x: x * 0.999, x)),
    )
    assert not traced.passed and "traced value" in traced.message
    closed = graded(
        "gpu.static-trip-count", jax.jit(lambda x, n: x * 0.999**n, static_argnums=1)
    )
    assert not closed.passed and "no while loop" in closed.message
    fifty = graded(
        "gpu.static-trip-count", jax.jit(lambda x, n: decay(x, 50), static_argnums=1)
    )  # the old n only
    assert not fifty.passed and "is not x * 0.999**" in fifty.message


def test_one_exact_dot_reads_each_products_precision_at_drawn_shapes():
    @jax.jit
    def gram_and_step(M, Omega):  # the chapter's solution
        return jnp.matmul(M.T, M, precision="highest"), M @ Omega

    @jax.jit
    def both(M, Omega):
        with jax.default_matmul_precision("highest"):
            return M.T @ M, M @ Omega

    assert not failures("gpu.one-exact-dot", gram_and_step)
    report = graded("gpu.one-exact-dot", both)
    assert not report.passed and "only M^T M should change" in report.message
    plain = graded("gpu.one-exact-dot", jax.jit(lambda M, Omega: (M.T @ M, M @ Omega)))
    assert not plain.passed and "has precision DEFAULT" in plain.message
    swapped = graded(
        "gpu.one-exact-dot", jax.jit(lambda M, Omega: (M @ Omega, M.T @ M))
    )
    assert not swapped.passed and "must return (M.T @ M, M @ Omega)" in swapped.message


def test_kernel_count_asks_about_programs_drawn_per_student():
    def count_fusions(hlo):  # the chapter's solution
        entry = hlo[hlo.index("\nENTRY") :].split("\n}")[0]
        return sum(" fusion(" in line for line in entry.splitlines())

    assert not failures("gpu.kernel-count", count_fusions)
    for seed in SEEDS:  # every draw has fusions outside the entry computation
        report = graded("gpu.kernel-count", lambda hlo: hlo.count(" fusion("), seed)
        assert not report.passed and "only the ENTRY block" in report.message
    answers = {}  # a lookup table of the texts one seed draws
    for seed in SEEDS:
        _, requests = exercises.start(registry()["gpu.kernel-count"], seed)
        answers.update(
            {r["args"][0]["py"]: count_fusions(r["args"][0]["py"]) for r in requests}
        )
    assert not graded(
        "gpu.kernel-count", lambda hlo: answers.get(hlo, 0), seed=3
    ).passed
    assert "NotImplementedError" in graded("gpu.kernel-count", stub).message


def test_kernel_count_draws_the_same_programs_from_a_seed_in_another_process():
    _, requests = exercises.start(registry()["gpu.kernel-count"], 11)
    script = (
        "import json, sys\nfrom jitbook.exercises import registry, start\n"
        "json.dump(start(registry()['gpu.kernel-count'], 11)[1], sys.stdout)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        cwd="/",
    )
    assert json.loads(out.stdout) == json.loads(json.dumps(requests)), out.stderr[
        -2000:
    ]


def _seed_grad_by_hand(params, data, Omega):  # the chapter's solution
    B, M, S = params
    Y, O, X = data
    return jnp.exp(O + M + X @ B + S * S / 2) - Y + M


def test_seed_grad_M_is_judged_on_drawn_points_and_autodiff_in_its_program_is_self_reported():
    def by_fields(params, data, Omega):  # the named tuples' fields reach it too
        return (
            jnp.exp(data.O + params.M + data.X @ params.B + params.S**2 / 2)
            - data.Y
            + params.M
        )

    assert not failures("pln.seed-grad-M", _seed_grad_by_hand)
    assert not failures("pln.seed-grad-M", by_fields)
    grad = jax.grad  # an alias: the program's own record shows autodiff, not a name
    with_grad = graded(
        "pln.seed-grad-M", lambda p, d, O: grad(pln_seed.seed_neg_elbo)(p, d, O).M
    )
    assert (
        not with_grad.passed
        and "made by JAX's automatic differentiation" in with_grad.message
    )
    assert with_grad.checks[-1] == "matches jax.grad of the 2023 loss with respect to M"
    passed = graded("pln.seed-grad-M", _seed_grad_by_hand)
    assert passed.self_reported == [
        "works the gradient out by hand (no automatic differentiation in its program)"
    ]
    corrected = graded(
        "pln.seed-grad-M", lambda p, d, O: jax.grad(pln.neg_elbo)(p, d, O).M
    )
    assert (
        not corrected.passed and "gradient of the corrected loss" in corrected.message
    )
    assert "NotImplementedError" in graded("pln.seed-grad-M", stub).message
    # a table of the answer at one draw: right there only
    remembered = {}

    def looked_up(params, data, Omega):
        return remembered.setdefault("M", _seed_grad_by_hand(params, data, Omega))

    assert graded("pln.seed-grad-M", looked_up, seed=0).passed
    assert not graded("pln.seed-grad-M", looked_up, seed=1).passed


def test_grad_omega_takes_the_symmetric_convention_and_names_a_missing_n():
    def gram(M, S):
        return M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))

    def grad_Omega(M, S, Omega):  # the chapter's solution
        return gram(M, S) / 2 - M.shape[0] / 2 * jnp.linalg.inv(Omega)

    def symmetric(M, S, Omega):
        A = grad_Omega(M, S, Omega)
        return 2 * A - jnp.diag(jnp.diag(A))

    def missing_n(M, S, Omega):
        return gram(M, S) / 2 - jnp.linalg.inv(Omega) / 2

    assert not failures("pln.grad-omega", grad_Omega)
    assert not failures("pln.grad-omega", symmetric)
    report = graded("pln.grad-omega", missing_n)
    assert (
        not report.passed
        and "off by a factor n" in report.message
        and "factor n/2" in report.message
    )
    flipped = graded("pln.grad-omega", lambda M, S, Omega: -grad_Omega(M, S, Omega))
    assert not flipped.passed and "flip the sign" in flipped.message
    by_grad = graded(
        "pln.grad-omega",
        lambda M, S, Omega: jax.grad(
            lambda O: (
                0.5 * jnp.trace(gram(M, S) @ O)
                - M.shape[0] / 2 * jnp.linalg.slogdet(O)[1]
            )
        )(Omega),
    )
    assert not by_grad.passed and "automatic differentiation" in by_grad.message
    fixed_n = lambda M, S, Omega: gram(M, S) / 2 - 20 * jnp.linalg.inv(Omega)  # noqa: E731  the old n = 40
    assert failures("pln.grad-omega", fixed_n)


@jax.tree_util.register_pytree_node_class
class Carry:  # the chapter's solution
    def __init__(self, M, Omega, n_steps):
        self.M, self.Omega, self.n_steps = M, Omega, n_steps

    def tree_flatten(self):
        return (self.M, self.Omega), self.n_steps

    @classmethod
    def tree_unflatten(cls, n_steps, children):
        return cls(*children, n_steps)


@jax.tree_util.register_pytree_node_class
class ThreeLeaves(Carry):
    def tree_flatten(self):
        return (self.M, self.Omega, self.n_steps), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


@jax.tree_util.register_pytree_node_class
class ArraysAsAux(Carry):
    def tree_flatten(self):
        return (self.M,), (self.Omega, self.n_steps)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)


@jax.tree_util.register_pytree_node_class
class DropsSteps(Carry):
    def tree_flatten(self):
        return (self.M, self.Omega), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, 1)


@jax.tree_util.register_pytree_node_class
class AllAsAux(Carry):
    def tree_flatten(self):
        return (), (self.M, self.Omega, self.n_steps)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*aux)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DataclassCarry:
    M: jax.Array
    Omega: jax.Array
    n_steps: int = dataclasses.field(metadata=dict(static=True))


def test_pytree_split_is_probed_in_the_students_process_and_marked_self_reported():
    assert not failures("pln.pytree", Carry)
    assert not failures("pln.pytree", DataclassCarry)
    report = graded("pln.pytree", Carry)
    assert report.self_reported == report.checks and len(report.checks) == 6
    three = graded("pln.pytree", ThreeLeaves)
    assert not three.passed and "n_steps became a child" in three.message
    aux = graded("pln.pytree", ArraysAsAux)
    assert (
        not aux.passed
        and "M and Omega are arrays and belong in the children" in aux.message
    )
    assert "n_steps is 1" in graded("pln.pytree", DropsSteps).message
    assert "flattening gave 0 leaves" in graded("pln.pytree", AllAsAux).message
    assert "is not a class" not in graded("pln.pytree", Carry).message
    assert "NotImplementedError" in graded("pln.pytree", stub).message


def test_trace_term_refuses_an_n_by_n_array_and_MtM_at_drawn_sizes():
    def trace_term(M, S, Omega):  # the chapter's solution
        return jnp.sum(M * (M @ Omega)) + jnp.sum(S * S, axis=0) @ jnp.diag(Omega)

    def via_vdot(M, S, Omega):
        return jnp.vdot(M, M @ Omega) + jnp.dot(jnp.sum(S * S, 0), jnp.diag(Omega))

    def via_n_by_n(M, S, Omega):
        return jnp.trace(M @ Omega @ M.T) + jnp.sum(jnp.sum(S * S, 0) * jnp.diag(Omega))

    def via_gram(M, S, Omega):
        return jnp.trace((M.T @ M + jnp.diag(jnp.sum(S * S, 0))) @ Omega)

    assert not failures("pln-fast.trace-term", trace_term)
    assert not failures("pln-fast.trace-term", via_vdot)
    assert not failures("pln-fast.trace-term", jax.jit(trace_term))
    wide = graded("pln-fast.trace-term", via_n_by_n)
    assert not wide.passed and "n x n" in wide.message
    gram = graded("pln-fast.trace-term", via_gram)
    assert not gram.passed and "that is MᵀM" in gram.message
    seed_value = graded(
        "pln-fast.trace-term",
        lambda M, S, Omega: jnp.trace(M.T @ M + jnp.diag(jnp.sum(S * S, 0)) @ Omega),
    )
    assert not seed_value.passed and "the 2023 tutorial's value" in seed_value.message
    constant = graded(
        "pln-fast.trace-term", lambda M, S, Omega: trace_term(M, S, Omega) * 0 + 123.4
    )
    assert not constant.passed and "expected" in constant.message


DEVICE_EXERCISES = textwrap.dedent("""
    import json
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    from jitbook import exercises
    from jitbook.chapters import devices
    from jitbook.evidence import collect

    collected = {}

    def graded(id, answer, seed):
        ex = exercises.registry()[id]
        _, requests = exercises.start(ex, seed)
        evidence = json.loads(json.dumps(collect.collect(requests, {ex.answer: answer})))
        collected.setdefault(id, {})[seed] = evidence
        report = exercises.verdict(id, seed, evidence)
        return [report.passed, report.message, report.self_reported]

    mesh = devices.data_mesh(4)
    rows = NamedSharding(mesh, P("data", None))

    def sharded_dot(a, b):  # the chapter's solution
        local = lambda a, b: jax.lax.psum(a @ b, "data")
        return jax.shard_map(local, mesh=mesh, in_specs=(P(None, "data"), P("data", None)), out_specs=P())(a, b)

    def column_stats(x):  # the chapter's solution
        mean = jnp.mean(x, axis=0)
        centered = x - mean
        return mean, centered.T @ centered / (x.shape[0] - 1)

    def stub(*args):
        raise NotImplementedError()

    answers = {
        "devices.batch-axis": {"right": P("data", None), "short": P("data"), "features": P(None, "data"),
                               "replicated": P(), "tuple": ("data", None), "stub": NotImplemented},
        "devices.one-sharding": {"right": lambda x: jax.device_put(x, rows),
                                 "replicated": lambda x: jax.device_put(x, NamedSharding(mesh, P())),
                                 "identity": lambda x: x,
                                 "one device": lambda x: jax.device_put(x, jax.devices()[0]),
                                 "old values": lambda x: jax.device_put(jnp.ones((8, 8)), rows), "stub": stub},
        "devices.psum": {"right": sharded_dot, "plain": lambda a, b: a @ b,
                         "forgot": jax.shard_map(lambda a, b: a @ b, mesh=mesh, check_vma=False,
                                                 in_specs=(P(None, "data"), P("data", None)), out_specs=P()),
                         "stub": stub},
        "devices.column-stats": {"right": column_stats, "cov": lambda v: (jnp.mean(v, 0), jnp.cov(v.T)),
                                 "ddof0": lambda v: (jnp.mean(v, 0), jnp.cov(v.T, bias=True)),
                                 "gathered": lambda v: (jnp.mean(v, 0), jnp.cov(
                                     jax.lax.with_sharding_constraint(v, NamedSharding(mesh, P())).T)),
                                 "stub": stub},
    }
    found = {id: {name: [graded(id, answer, seed) for seed in (0, 1)] for name, answer in them.items()}
             for id, them in answers.items()}
    for id, them in answers.items():  # the solutions' evidence, for a grader with one device
        for seed in (7, 8):
            graded(id, them["right"], seed)
    right = {id: {seed: collected[id][seed] for seed in (7, 8)} for id in answers}
    print("FOUND " + json.dumps({**found, "right evidence": right}))
""")


@pytest.fixture(scope="module")
def device_reports() -> dict:
    out = subprocess.run(
        [sys.executable, "-c", DEVICE_EXERCISES],
        capture_output=True,
        text=True,
        timeout=400,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("FOUND ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    return json.loads(lines[-1][len("FOUND ") :])


def told(reports, words):
    """Whether the answer failed on every seed, told ``words`` each time."""
    return all(not passed and words in message for passed, message, _ in reports)


def test_the_devices_solutions_pass_on_four_devices_and_say_what_rests_on_probes(
    device_reports,
):
    for id, found in device_reports.items():
        if id == "right evidence":
            continue
        assert all(passed for passed, _, _ in found["right"]), (id, found["right"])
        stub_passed, stub_message, _ = found["stub"][0]
        assert not stub_passed and (
            "placeholder" in stub_message or "NotImplementedError" in stub_message
        ), id
    assert (
        device_reports["devices.batch-axis"]["right"][0][2] == []
    )  # the value itself, not a probe
    assert (
        device_reports["devices.psum"]["right"][0][2] == []
    )  # values and the lowered program
    assert len(device_reports["devices.one-sharding"]["right"][0][2]) == 4
    assert device_reports["devices.column-stats"]["right"][0][2] == [
        "no all-gather: the rows stay where they are (2 all-reduce)"
    ]


def test_batch_axis_wants_the_rows_split_and_the_features_whole(device_reports):
    found = device_reports["devices.batch-axis"]
    assert all(passed for passed, _, _ in found["short"])
    assert told(found["features"], "splits the features")
    assert told(found["replicated"], "does not split the rows")
    assert told(found["tuple"], "make it a jax.sharding.PartitionSpec")


def test_one_sharding_refuses_a_replicated_placement_and_new_values(device_reports):
    found = device_reports["devices.one-sharding"]
    assert told(found["replicated"], "whole copy of the array on every device")
    assert told(
        found["identity"], "whole copy"
    )  # the replicated loader stays replicated
    assert told(found["one device"], "on 1 device(s) out of 4")
    assert told(found["old values"], "changed the values")


def test_psum_reads_shard_map_and_the_all_reduce_in_the_lowered_program(device_reports):
    found = device_reports["devices.psum"]
    assert told(found["plain"], "no shard_map in its program")
    assert told(found["forgot"], "differs from a @ b")


def test_column_stats_wants_n_minus_1_and_no_all_gather(device_reports):
    found = device_reports["devices.column-stats"]
    assert all(passed for passed, _, _ in found["cov"])
    assert told(found["ddof0"], "n - 1")
    assert told(found["gathered"], "an all-gather copies every row")


def test_the_grader_judges_four_device_evidence_with_one_device(device_reports):
    """The grader's judging process has one CPU device: it reads values and programs, it runs none of theirs."""
    assert jax.device_count() == 1
    for id, by_seed in device_reports["right evidence"].items():
        for seed, evidence in by_seed.items():
            assert exercises.verdict(id, int(seed), evidence).passed, (id, seed)


def test_the_devices_exercises_say_they_need_several_devices():
    report = graded("devices.column-stats", lambda v: (jnp.mean(v, 0), jnp.cov(v.T)))
    assert not report.passed and "need several" in report.message
