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


# ---- checker holes: each closed against a wrong answer that used to pass, each open to another right one ----

import dataclasses  # noqa: E402
import functools  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jitbook.chapters import methods, recompilation  # noqa: E402
from jitbook.chapters.pln import seed  # noqa: E402


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
        return {s: jax.jit(fn).lower(jax.ShapeDtypeStruct(s, jnp.float32)).compile() for s in shapes}

    passed, message = verdict("jaxprs.precompile", warmed)
    assert not passed and "jitted function warmed up, not an executable" in message
    assert verdict("jaxprs.precompile", with_lower) == (True, "")


def test_trace_term_refuses_an_n_by_n_array():
    def via_n_by_n(M, S, Omega):
        return jnp.trace(M @ Omega @ M.T) + jnp.sum(jnp.sum(S * S, 0) * jnp.diag(Omega))

    def via_vdot(M, S, Omega):
        return jnp.vdot(M, M @ Omega) + jnp.dot(jnp.sum(S * S, 0), jnp.diag(Omega))

    passed, message = verdict("pln-fast.trace-term", via_n_by_n)
    assert not passed and "40 x 40 array, n x n" in message
    assert verdict("pln-fast.trace-term", via_vdot) == (True, "")


def test_seed_grad_M_must_be_worked_out_without_jax_grad():
    def with_grad(params, data, Omega):
        return jax.grad(seed.seed_neg_elbo)(params, data, Omega).M

    def by_hand(params, data, Omega):
        B, M, S = params
        Y, O, X = data
        return M + jnp.exp(O + X @ B + M) * jnp.exp(S * S / 2) - Y

    passed, message = verdict("pln.seed-grad-M", with_grad)
    assert not passed and "uses grad" in message
    assert verdict("pln.seed-grad-M", by_hand) == (True, "")


def test_grad_omega_takes_the_symmetric_convention_and_names_a_missing_n():
    def gram(M, S):
        return M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))

    def symmetric(M, S, Omega):
        A = gram(M, S) / 2 - M.shape[0] / 2 * jnp.linalg.inv(Omega)
        return 2 * A - jnp.diag(jnp.diag(A))

    def missing_n(M, S, Omega):
        return gram(M, S) / 2 - jnp.linalg.inv(Omega) / 2

    assert verdict("pln.grad-omega", symmetric) == (True, "")
    passed, message = verdict("pln.grad-omega", missing_n)
    assert not passed and "off by a factor n" in message and "factor n/2" in message


ONE_SHARDING = """
import jax
jax.config.update("jax_num_cpu_devices", 4)
from jax.sharding import NamedSharding, PartitionSpec as P
from jitbook.chapters import devices
from jitbook.exercises import check
mesh = devices.data_mesh()
replicated = check("devices.one-sharding", lambda x: jax.device_put(x, NamedSharding(mesh, P())))
columns = check("devices.one-sharding", lambda x: jax.device_put(x, NamedSharding(mesh, P(None, "data"))))
print(replicated.passed, "|", replicated.message)
print(columns.passed, "|", columns.message)
"""


def test_one_sharding_refuses_a_replicated_placement():
    out = subprocess.run([sys.executable, "-c", ONE_SHARDING], capture_output=True, text=True, timeout=240)
    replicated, columns = out.stdout.strip().splitlines()[-2:]
    assert replicated.startswith("False |") and "whole copy of the array on every device" in replicated
    assert columns.rstrip() == "True |", out.stderr[-2000:]


def test_a_check_stuck_in_compiled_code_tells_the_student_what_to_do():
    script = (
        "import jax\nfrom jitbook import exercises\n"
        "exercises.GRACE = 1.0\n"
        "def run_and_wait(fn, *args):\n"
        "    x = jax.lax.while_loop(lambda x: x < 1e30, lambda x: x + 1.0, 0.0)\n"
        "    return jax.block_until_ready(x)\n"
        "exercises.check('why-compile.ready', run_and_wait, time_limit=1)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
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
    assert report.message.startswith("calling your function raised TracerBoolConversionError")
    assert report.message.endswith("`if x.sum() > 0:  # a Python if on a traced value`)")
    assert "(your line" in report.message and "site-packages" not in report.message
    assert "TracerBoolConversionError" in report.details  # JAX's own text, folded in the report


def test_a_class_answer_is_asked_for_as_a_class():
    import __main__

    assert not hasattr(__main__, "Poly")
    assert "`class Poly`" in check("methods.hash-config").message


def test_the_placeholder_of_a_top_level_answer_reads_as_not_yet_answered():
    report = check("why-compile.fuse", NotImplemented)
    assert not report.passed and "still the placeholder NotImplemented" in report.message


def test_no_message_stops_at_a_colon():
    message = check("recompilation.static-coeffs", lambda c: list(c)).message
    assert not message.rstrip().endswith(":") and "unhashable type: 'list'" in message


# ---- answers judged on what the student cannot fake ---------------------------------------------------------

def test_a_plain_function_with_a_fake_lower_is_not_jitted():
    import jax

    from jitbook.chapters import why_compile
    from jitbook.exercises import judge

    def fast_standardize(x):
        return why_compile.standardize_softplus(x.T).T

    fast_standardize.lower = None
    assert not judge.is_jitted(fast_standardize) and judge.is_jitted(jax.jit(fast_standardize))
    report = check("why-compile.fuse", fast_standardize)
    assert not report.passed and "not compiled by jax.jit" in report.message


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

    report = check("artifacts.scan-loop", lambda x, n: Spy())
    assert not report.passed and "damped_steps returned a Spy" in report.message and not asked


def test_compiles_are_counted_by_the_object_not_its_name():
    """A wrapper named train_step around a jit with a static learning rate: its three compiles count."""
    import functools

    import jax
    import jax.numpy as jnp

    from jitbook.exercises import judge

    @functools.partial(jax.jit, static_argnums=3)
    def inner(w, x, y, lr):
        return w - lr * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)

    def train_step(w, x, y, lr):
        return inner(w, x, y, lr)

    x, y, w = jnp.ones((4, 3)), jnp.ones(4), jnp.zeros(3)
    with judge.compiles_of(train_step) as counted:
        for lr in (0.1, 0.2, 0.3):
            train_step(w, x, y, lr)
    assert counted.count >= 3
    with judge.compiles_of(inner) as own:
        for lr in (0.1, 0.2, 0.3):
            inner(w, x, y, lr)
    assert own.count == 0  # the same object, already compiled for these values
    twice = jax.jit(lambda w: w * 2)  # a jitted object: its own cache, one program
    with judge.compiles_of(twice) as once:
        twice(w)
        twice(w)
    assert once.count == 1


def test_the_vocabulary_copies_out_exact_types_only():
    import jax.numpy as jnp
    import numpy as np
    import pytest

    from jitbook.exercises import Wrong, judge

    got = judge.plain((1, 2.0, [jnp.ones(2)], {"a": np.float32(3)}))
    assert got[:2] == (1, 2.0) and type(got[2][0]) is np.ndarray and got[3] == {"a": 3.0}
    assert judge.whole(4.0, "f") == 4 and type(judge.whole(4.0, "f")) is int
    with pytest.raises(Wrong, match="return a whole number"):
        judge.whole(4.5, "f")
    assert judge.agrees([1.0, 2.0], np.array([1.0, 2.0])) and not judge.agrees([1.0], [1.0, 2.0])


# ---- tracing, jaxprs, minijit ----

import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from jax import lax  # noqa: E402

from jitbook import exercises, programs  # noqa: E402
from jitbook.chapters import jaxprs, minijit, tracing  # noqa: E402
from jitbook.evidence import collect  # noqa: E402

OURS = [id for id in registry() if id.split(".")[0] in ("tracing", "jaxprs", "minijit")]
_CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def _solution(exercise_id):
    """The answer defined by the chapter's solution cell for this exercise."""
    ex = registry()[exercise_id]
    text = (_CHAPTERS / f"{ex.chapter}.qmd").read_text()
    cells = re.findall(r"```\{python\}\n(.*?)```", text, re.S)
    (source,) = [c for c in cells if "### BEGIN SOLUTION" in c and re.search(rf"\b{ex.answer}\b", c)]
    names = {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "tracing": tracing, "jaxprs": jaxprs,
             "minijit": minijit, "programs": programs}
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
def test_the_chapters_solution_passes_on_two_draws_and_evidence_from_one_fails_the_other(exercise_id):
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
    "tracing.where": [],
    "tracing.loop-once": ["jax.grad works through it"],
    "tracing.count-traces": [],
    "jaxprs.keep-dtype": [],
    "jaxprs.fixed-size": ["the jaxpr has the same size"],
}


@pytest.mark.parametrize("exercise_id", sorted(SELF_REPORTED))
def test_only_the_rows_a_probe_shows_are_marked_self_reported(exercise_id):
    report = _judged(exercise_id, _solution(exercise_id), 4)
    assert report.passed and len(report.checks) > len(report.self_reported)
    assert len(report.self_reported) == len(SELF_REPORTED[exercise_id])
    for row, start in zip(report.self_reported, SELF_REPORTED[exercise_id], strict=True):
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

    assert "a plain print runs only while tracing" in check("tracing.debug-print", plain_print).message
    assert "takes no value" in check("tracing.debug-print", fixed_text).message
    assert re.search(r"for inputs \[.*\] it returned", check("tracing.debug-print", wrong_value).message)


def test_where_explains_a_python_if_and_names_the_wrong_values():
    def python_if(x):
        if x > 0:
            return x
        return 0.1 * x

    report = check("tracing.where", python_if)
    assert "an `if`" in report.message and "TracerBoolConversionError" in report.message
    assert "expected" in check("tracing.where", lambda x: jnp.where(x > 0, x, 0.0)).message


def test_loop_once_refuses_a_static_n_a_last_step_and_a_while_loop():
    python_loop = check("tracing.loop-once", tracing.python_loop)
    assert "range(n)" in python_loop.message and "TracerIntegerConversionError" in python_loop.message
    assert "lax.fori_loop accepts a traced trip count" in check("tracing.loop-once", tracing.scan_version).message
    assert "n = 0" in check("tracing.loop-once", tracing.fori_version).message  # the last step only

    def with_fori_loop(x, n):  # right values, n traced, but a while_loop: no reverse-mode gradient
        def body(i, carry):
            current, total = carry
            current = tracing.step(current)
            return current, total + current

        return lax.fori_loop(0, n, body, (x, jnp.zeros_like(x)))[1]

    fori = check("tracing.loop-once", with_fori_loop)
    assert not fori.passed and "while_loop" in fori.message and "lax.scan" in fori.message


def test_loop_once_refuses_a_static_n_with_right_values():
    @functools.partial(jax.jit, static_argnums=1)
    def static_n(x, n):
        return sum(tracing.python_loop(x, k) for k in range(1, n + 1)) + jnp.zeros_like(x)

    report = check("tracing.loop-once", static_n)
    assert not report.passed and "no static_argnums" in report.message


def test_count_traces_refuses_the_number_of_calls_and_a_count_that_ignores_weak_types():
    counts_calls = check("tracing.count-traces", lambda values: len(values))
    assert not counts_calls.passed and "the number of calls" in counts_calls.message

    def by_shape_and_dtype(values):
        return len({(jnp.shape(v), jnp.result_type(v)) for v in values})

    report = check("tracing.count-traces", by_shape_and_dtype)
    assert not report.passed and "a Python float is weakly typed" in report.message


def test_count_equations_names_printed_lines_and_nested_bodies():
    lines = check("jaxprs.count-equations", lambda fn, *a: len(str(jax.make_jaxpr(fn)(*a)).splitlines()) - 2)
    assert not lines.passed and "the number of printed lines" in lines.message
    nested = check("jaxprs.count-equations", lambda fn, *a: len(list(programs.equations(jax.make_jaxpr(fn)(*a)))))
    assert not nested.passed and "inside the loop body too" in nested.message


def test_keep_dtype_refuses_a_promoting_constant_and_a_cast_back():
    promoted = check("jaxprs.keep-dtype", lambda x: x * jnp.float32(0.5))
    assert not promoted.passed and "the result is float32" in promoted.message
    cast_back = check("jaxprs.keep-dtype", lambda x: (x * np.float32(0.5)).astype(x.dtype))
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
    off_by_one = check("jaxprs.fixed-size", lambda x, steps: lax.scan(lambda c, _: (jaxprs.update(c), c), x, length=steps)[1])
    assert not off_by_one.passed and "with other values" in off_by_one.message


def test_flops_wants_the_flops_entry_of_the_compiled_cost_analysis():
    whole = check("jaxprs.flops", lambda fn, *a: jax.jit(fn).trace(*a).lower().compile().cost_analysis())
    assert not whole.passed and "whole cost analysis" in whole.message
    eqns = check("jaxprs.flops", lambda fn, *a: len(jax.make_jaxpr(fn)(*a).eqns))
    assert not eqns.passed and "XLA's cost analysis says" in eqns.message


def test_precompile_refuses_lazy_jits_and_a_list():
    lazy = check("jaxprs.precompile", lambda fn, shapes: {s: jax.jit(fn) for s in shapes})
    assert not lazy.passed and "only 0 compilations happened inside precompile" in lazy.message
    listed = check("jaxprs.precompile", lambda fn, shapes: [jax.jit(fn) for s in shapes])
    assert not listed.passed and "return a dict" in listed.message


def test_emit_primitive_wants_a_new_primitive_not_jnp():
    report = check("minijit.emit-primitive", lambda: (lambda x: x**3))
    assert not report.passed and "traced to ['integer_pow', 'add']" in report.message


def test_weak_types_refuses_forgotten_weak_types_and_a_jax_abstract_value():
    forgets = check("minijit.weak-types", minijit.shape_and_dtype)
    assert not forgets.passed and "weak_type=True" in forgets.message
    jax_own = check("minijit.weak-types", jax.typeof)  # right fields, but minijit cannot trace with it
    assert not jax_own.passed and "return a minijit.Abstract" in jax_own.message

    def python_numbers_only(value):
        plain = minijit.shape_and_dtype(value)
        weak = isinstance(value, (int, float)) and not isinstance(value, bool)
        return minijit.Abstract(plain.shape, plain.dtype, weak)

    report = check("minijit.weak-types", python_numbers_only)
    assert not report.passed and "jnp.asarray of a Python float is weak" in report.message


def test_explain_miss_wants_the_old_and_new_values_drawn():
    report = check("minijit.explain-miss", lambda old, new: "shape dtype weak structure static changed")
    assert not report.passed and "a new shape" in report.message and "f32[" in report.message
# ---- recompilation, methods, pitfalls ----

from jax.experimental import checkify  # noqa: E402


def sgd_step(w, x, y, lr):
    return w - lr * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)


def test_lr_traced_wants_lr_an_input_of_one_program():
    assert verdict("recompilation.lr-traced", jax.jit(sgd_step)) == (True, "")
    passed, message = verdict("recompilation.lr-traced", jax.jit(sgd_step, static_argnames="lr"))
    assert not passed and "jit treats lr as static" in message
    assert "not a function made by jax.jit" in verdict("recompilation.lr-traced", sgd_step)[1]
    one_rate = jax.jit(lambda w, x, y, lr: sgd_step(w, x, y, 0.1))  # lr an input, but never read
    assert "does not give sgd_step(w, x, y, lr)" in verdict("recompilation.lr-traced", one_rate)[1]


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
    static = verdict("recompilation.clip-norm", jax.jit(_clip_with_where, static_argnums=1))[1]
    assert "jit treats max_norm as static" in static
    assert "TracerBoolConversionError" in verdict("recompilation.clip-norm", jax.jit(_clip_with_if))[1]
    always = verdict("recompilation.clip-norm", jax.jit(lambda v, m: v * (m / jnp.linalg.norm(v))))[1]
    assert "above the norm" not in always and "returned" in always and "expected" in always


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
    by_padded = buckets(monkeypatch, _pad_to_bucket, jax.jit(lambda padded, n: jnp.mean(padded)))[1]
    assert "divide by the true length n" in by_padded
    static = jax.jit(lambda padded, n: jnp.sum(padded) / n, static_argnums=1)
    assert "jit treats n as static" in buckets(monkeypatch, _pad_to_bucket, static)[1]
    numpy_mean = buckets(monkeypatch, _pad_to_bucket, lambda padded, n: np.sum(padded) / n)[1]
    assert "`bucket_mean` is not a function made by jax.jit" in numpy_mean

    def pads_with_jnp(x):
        size = recompilation.next_bucket(len(x))
        return jnp.pad(jnp.asarray(x), (0, size - len(x))), len(x)

    assert "eager jnp operations compile once per shape" in buckets(monkeypatch, pads_with_jnp, _bucket_mean)[1]
    report = check("recompilation.buckets", _pad_to_bucket)  # the other name is looked up in the notebook
    assert not report.passed and "I could not find `bucket_mean`" in report.message


class _ById:
    """Hashable, but by identity."""

    def __init__(self, coeffs):
        self.coeffs = tuple(coeffs)

    def __iter__(self):
        return iter(self.coeffs)


def test_static_coeffs_wants_equal_hashable_plain_values():
    assert verdict("recompilation.static-coeffs", lambda c: tuple(float(v) for v in c)) == (True, "")
    passed, message = verdict("recompilation.static-coeffs", lambda c: c)
    assert not passed and "jit refused" in message and "Non-hashable static arguments" in message
    assert "returned a _ById" in verdict("recompilation.static-coeffs", _ById)[1]
    fixed = verdict("recompilation.static-coeffs", lambda c: (1.0, 2.0, 3.0))  # right for the old fixed input only
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
    assert report.passed and "an equal polynomial reuses the compiled code" in report.self_reported
    assert "evaluate gives the polynomial's values" not in report.self_reported
    passed, message = verdict("methods.hash-config", PytreePoly)
    assert not passed and "traced values, not part of a static self" in message
    assert "was accepted" in verdict("methods.hash-config", _MutablePoly)[1]
    assert "must have the same hash" in verdict("methods.hash-config", _IdentityPoly)[1]
    assert "not a jax.jit-wrapped function" in verdict("methods.hash-config", _UnjittedPoly)[1]
    assert "should be a class" in verdict("methods.hash-config", lambda c: None)[1]


def _make_trainer(flatten, unflatten=None):
    """A Trainer class whose tree_flatten (and tree_unflatten) a wrong answer gets wrong."""

    @jax.tree_util.register_pytree_node_class
    class Trainer:
        def __init__(self, weight, learning_rate, activation):
            self.weight, self.learning_rate, self.activation = weight, learning_rate, activation

        def tree_flatten(self):
            return flatten(self)

        @classmethod
        def tree_unflatten(cls, aux, children):
            return unflatten(cls, aux, children) if unflatten else cls(*children, *aux)

        @jax.jit
        def step(self, x):
            g = jax.grad(lambda w: jnp.sum(methods.activate(self.activation, w * x)))(self.weight)
            return Trainer(self.weight - self.learning_rate * g, self.learning_rate, self.activation)

    return Trainer


def test_pytree_trainer_wants_rate_a_child_and_activation_metadata():
    right = _make_trainer(lambda t: ((t.weight, t.learning_rate), (t.activation,)))
    assert verdict("methods.pytree-trainer", right) == (True, "")
    lr_static = _make_trainer(lambda t: ((t.weight,), (t.learning_rate, t.activation)),
                              lambda cls, aux, ch: cls(ch[0], *aux))
    assert "a new learning_rate compiled step 1 time(s)" in verdict("methods.pytree-trainer", lr_static)[1]
    all_children = _make_trainer(lambda t: ((t.weight, t.learning_rate, t.activation), ()))
    passed, message = verdict("methods.pytree-trainer", all_children)
    assert not passed and "raised TypeError" in message
    drops_lr = _make_trainer(lambda t: ((t.weight, t.learning_rate), (t.activation,)),
                             lambda cls, aux, ch: cls(ch[0], 0.0, *aux))
    assert "tree_unflatten restores every field" in verdict("methods.pytree-trainer", drops_lr)[1]


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

    passed, message = verdict("methods.pytree-trainer", FloatRate)
    assert not passed and "eqx.filter_jit treats a Python float field as static" in message
    assert "child" not in message and "aux_data" not in message
    assert verdict("methods.pytree-trainer", ArrayRate) == (True, "")


def test_shared_function_wants_one_function_object_for_all_models():
    def shared(scales):
        return [methods.MappedEqx(s * jnp.ones(4), jax.nn.softplus) for s in scales]

    def a_lambda_each(scales):
        return [methods.MappedEqx(s * jnp.ones(4), lambda v: jax.nn.softplus(v)) for s in scales]

    assert verdict("methods.shared-function", shared) == (True, "")
    assert "compiled run 3 times" in verdict("methods.shared-function", a_lambda_each)[1]
    assert "return a list of methods.MappedEqx" in verdict("methods.shared-function", lambda s: None)[1]
    fixed = verdict("methods.shared-function",  # right only for the old fixed scales
                    lambda s: [methods.MappedEqx(c * jnp.ones(4), jax.nn.softplus) for c in (1.0, 2.0, 3.0)])
    assert not fixed[0] and "should return softplus" in fixed[1]


def test_closure_to_argument_wants_one_jitted_gradient_of_the_layer():
    grad_wrt_layer = jax.jit(jax.grad(methods.layer_loss))
    assert verdict("methods.closure-to-argument", lambda layer, x: grad_wrt_layer(layer, x).weight) == (True, "")

    def closure_per_call(layer, x):
        loss = lambda w: methods.layer_loss(methods.EqxLayer(w, layer.activation), x)  # noqa: E731
        return jax.jit(jax.grad(loss))(layer.weight)

    assert "compiled one function 3 times" in verdict("methods.closure-to-argument", closure_per_call)[1]
    input_grad = jax.jit(jax.grad(methods.layer_loss, argnums=1))  # with respect to x, not the weight
    assert "not the gradient" in verdict("methods.closure-to-argument", input_grad)[1]
    assert "returned EqxLayer" in verdict("methods.closure-to-argument", grad_wrt_layer)[1]


def test_method_checkers_leave_the_students_caches_alone():
    kept = jax.jit(lambda v: v + 1)
    kept(jnp.ones(3))
    right = _make_trainer(lambda t: ((t.weight, t.learning_rate), (t.activation,)))
    for exercise, answer in (("methods.hash-config", _Poly), ("methods.pytree-trainer", right)):
        assert check(exercise, answer).passed, exercise
        assert check(exercise, answer).passed, exercise  # again: no cleared cache needed to pass
    assert kept._cache_size() == 1  # jax.clear_caches() would have emptied it


def test_key_argument_wants_the_key_an_input_of_the_program():
    @jax.jit
    def jitter(x, key):
        return x + 0.1 * jax.random.normal(key, x.shape)

    assert verdict("pitfalls.key-argument", jitter) == (True, "")
    baked = jax.random.key(0)
    global_key = jax.jit(lambda x, key: x + 0.1 * jax.random.normal(baked, x.shape))
    assert "same noise for two different keys" in verdict("pitfalls.key-argument", global_key)[1]
    twice = jax.jit(lambda x, key: x + 0.2 * jax.random.normal(key, x.shape))
    assert "should be x + 0.1" in verdict("pitfalls.key-argument", twice)[1]


def test_donate_step_reads_the_donation_off_the_program():
    assert verdict("pitfalls.donate-step", jax.jit(lambda s: 0.9 * s, donate_argnums=0)) == (True, "")
    passed, message = verdict("pitfalls.donate-step", jax.jit(lambda s: 0.9 * s))
    assert not passed and "donate_argnums" in message
    halved = jax.jit(lambda s: 0.5 * s, donate_argnums=0)
    assert "should return 0.9 * state" in verdict("pitfalls.donate-step", halved)[1]


def test_checked_take_wants_checkifys_pair_under_jit():
    safe = checkify.checkify(jax.jit(lambda x, i: x[i]), errors=checkify.index_checks)
    assert verdict("pitfalls.checked-take", safe) == (True, "")
    unchecked = verdict("pitfalls.checked-take", checkify.checkify(jax.jit(lambda x, i: x[i])))[1]
    assert "index_checks" in unchecked
    assert "(error, value)" in verdict("pitfalls.checked-take", jax.jit(lambda x, i: x[i]))[1]

    def stub(x, i):
        raise NotImplementedError()

    assert "still raises NotImplementedError" in verdict("pitfalls.checked-take", stub)[1]


def test_the_stubs_of_these_chapters_fail():
    import __main__

    for exercise_id in ("recompilation.lr-traced", "recompilation.clip-norm", "recompilation.buckets",
                        "recompilation.static-coeffs", "methods.hash-config", "methods.pytree-trainer",
                        "methods.shared-function", "methods.closure-to-argument", "pitfalls.key-argument",
                        "pitfalls.donate-step", "pitfalls.checked-take"):
        assert not hasattr(__main__, registry()[exercise_id].answer)
        report = check(exercise_id, NotImplemented)
        assert not report.passed and "placeholder NotImplemented" in report.message, exercise_id
