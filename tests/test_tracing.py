"""The tracing chapter's claims about JAX, its helpers' bad-input errors, and its exercises' wrong answers."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jitbook
from jitbook import cache, count_compiles, programs
from jitbook.cache import effect_order, fresh_jit
from jitbook.chapters import tracing

# --- tracers and abstract values ---------------------------------------------------------------------


@pytest.mark.claim("sec-tracing", "clm-tr-print-tracer")
def test_print_inside_jit_receives_a_tracer_without_a_value(measured):
    """The object print is handed, not its printed form: a tracer, whose value does not
    exist while tracing (turning it into a float raises)."""
    from unittest import mock

    handed = []

    def spy(*args, **kwargs):
        for a in args:
            if isinstance(a, jax.core.Tracer):
                handed.append(
                    (a.aval.shape, a.dtype, jitbook.raised(float, a), type(a))
                )

    jitted = jax.jit(functools.partial(tracing.double_and_show))
    with mock.patch("builtins.print", spy):
        jitted(3.0)
        jitted(4.0)  # cached: the body, and its print, do not run again
    jax.effects_barrier()
    ((shape, dtype, err, kind),) = handed
    assert (shape, dtype) == ((), jnp.float32)
    assert isinstance(err, jax.errors.ConcretizationTypeError)
    lines = tracing.printed_lines(
        jax.jit(functools.partial(tracing.double_and_show)), [(3.0,)]
    )
    assert lines[0].startswith("print sees: ") and "3.0" not in lines[0]
    assert lines[1] == "jax.debug.print sees: 3.0"
    measured("what print received", f"a {kind.__name__}")


@pytest.mark.claim("sec-tracing", "clm-tracing-aval-in-key")
def test_abstract_values_seen_inside_jit():
    rows = tracing.seen_by_jit(
        3.0, 3, jnp.float32(3.0), jnp.ones((2, 3)), jnp.arange(4)
    )
    assert [(r["shape"], r["dtype"], r["weak_type"]) for r in rows] == [
        ((), "float32", True),
        ((), "int32", True),
        ((), "float32", False),
        ((2, 3), "float32", False),
        ((4,), "int32", False),
    ]
    assert all("Tracer" in r["type"] for r in rows)
    assert rows[3]["shape"] == (2, 3) and rows[4]["dtype"] == "int32"
    assert (
        tracing.aval_row(jnp.ones(2))["type"] == "ArrayImpl"
    )  # outside jit: a real array
    # in the key: a new shape, dtype or weak type compiles, a new value does not
    jitted = jax.jit(lambda v: v + 1)
    compiles = []
    for arg in (3.0, 4.0, jnp.float32(3.0), jnp.ones(2), jnp.zeros(2), jnp.ones(3)):
        with count_compiles() as log:
            jitted(arg)
        compiles.append(log.count)
    assert compiles == [1, 0, 1, 1, 0, 1]
    ints = jnp.ones(
        3, jnp.int32
    )  # made outside the count: it compiles programs of its own
    with count_compiles() as log:
        jitted(ints)
    assert log.count == 1


@pytest.mark.claim("sec-tracing", "clm-tracing-weak-scalars-yield")
def test_weak_typed_scalars_yield_to_the_array_dtype():
    half = jnp.ones(3, dtype=jnp.bfloat16)
    assert (half * 2.0).dtype == jnp.bfloat16
    assert (half * jnp.float32(2.0)).dtype == jnp.float32
    # every float array and every int array of each width, under jit too
    for dtype in (jnp.bfloat16, jnp.float16, jnp.float32):
        x = jnp.ones(3, dtype)
        assert (x * 2.0).dtype == jax.jit(lambda v: v * 2.0)(x).dtype == dtype
    for dtype in (jnp.int8, jnp.int16, jnp.int32, jnp.uint8, jnp.uint32):
        x = jnp.ones(3, dtype)
        assert (x * 3).dtype == jax.jit(lambda v: v * 3)(x).dtype == dtype
    # alone, the defaults (64-bit types off)
    assert (jnp.asarray(3.0).dtype, jnp.asarray(3).dtype) == (jnp.float32, jnp.int32)
    with jax.enable_x64(True):
        assert (jnp.ones(3, jnp.float64) * 2.0).dtype == jnp.float64
        assert (jnp.ones(3, jnp.int64) * 3).dtype == jnp.int64


@pytest.mark.claim("sec-tracing", "clm-tr-body-runs")
def test_body_runs_once_per_new_abstract_value():
    counted = tracing.BodyCounter(lambda v: jnp.sin(v) + 1.0)
    jitted = jax.jit(counted)
    runs, compiles = [], []
    for arg in (
        1.0,
        2.0,
        jnp.float32(2.0),
        jnp.ones(3),
        jnp.zeros(3),
        jnp.ones(3, dtype=jnp.int32),
    ):
        with count_compiles() as log:
            jitted(arg)
        runs.append(counted.runs)
        compiles.append(log.count)
    assert runs == [1, 1, 2, 3, 3, 4]
    assert compiles == [1, 0, 1, 1, 0, 1]


@pytest.mark.claim("sec-tracing", "clm-tr-print-per-trace")
def test_print_runs_per_trace_and_debug_print_per_call():
    calls = [(jnp.ones(2),), (jnp.zeros(2),), (jnp.arange(2.0),), (jnp.ones(4),)]
    with cache.count_body_runs(tracing.double_and_show) as runs:
        lines = tracing.printed_lines(
            jax.jit(functools.partial(tracing.double_and_show)), calls
        )
    assert (
        sum(line.startswith("print sees") for line in lines) == 2 == runs.count
    )  # one print per body run
    assert sum(line.startswith("jax.debug.print sees") for line in lines) == 4
    assert "jax.debug.print sees: [0. 1.]" in lines


@pytest.mark.claim("sec-tracing", "clm-tr-debug-print-op")
def test_debug_print_is_an_operation_of_the_program_and_print_is_not():
    primitives = [
        str(e.primitive)
        for e in jax.make_jaxpr(tracing.double_and_show)(1.0).jaxpr.eqns
    ]
    assert (
        len(primitives) == 2 and "mul" in primitives
    )  # 2 * x, and one equation for the two prints:
    assert any(
        p.startswith("debug") for p in primitives
    )  # jax.debug.print's; print left nothing


# --- side effects ------------------------------------------------------------------------------------


@pytest.mark.claim("sec-tracing-side-effects", "clm-tr-global-append")
def test_appending_to_a_global_happens_once_and_leaks_a_tracer():
    tracing.history.clear()
    jitted = fresh_jit(tracing.remember)  # a function no earlier test traced
    assert [float(jitted(v)) for v in (1.0, 2.0, 3.0)] == [2.0, 3.0, 4.0]
    assert len(tracing.history) == 1 and isinstance(tracing.history[0], jax.core.Tracer)
    err = jitbook.error_of(lambda: tracing.history[0] + 1)
    assert isinstance(err, jax.errors.UnexpectedTracerError)
    assert type(err).__name__ == "UnexpectedTracerError"
    tracing.history.clear()


@pytest.mark.claim("sec-tracing-side-effects", "clm-tr-global-read")
def test_a_global_is_read_at_trace_time_only(monkeypatch):
    monkeypatch.setattr(tracing, "SCALE", 2.0)
    jitted = jax.jit(functools.partial(tracing.scaled))
    assert float(jitted(1.0)) == 2.0
    monkeypatch.setattr(tracing, "SCALE", 10.0)
    with count_compiles() as log:
        assert float(jitted(1.0)) == 2.0  # stale
    assert log.count == 0
    assert float(tracing.scaled(1.0)) == 10.0  # op by op reads the new value
    np.testing.assert_array_equal(
        jitted(jnp.ones(2)), [10.0, 10.0]
    )  # a new trace does too


# --- control flow ------------------------------------------------------------------------------------


@pytest.mark.claim("sec-control-flow", "clm-tr-shape-branch")
def test_branching_on_a_shape_works_under_jit():
    jitted = jax.jit(functools.partial(tracing.pad_to_even))  # a wrapper of its own
    with cache.count_body_runs(tracing.pad_to_even) as runs:
        np.testing.assert_array_equal(jitted(jnp.ones(3)), [1, 1, 1, 0])
        np.testing.assert_array_equal(jitted(jnp.ones(4)), [1, 1, 1, 1])
        jitted(jnp.zeros(3)), jitted(jnp.zeros(4))
    assert runs.count == 2  # one trace per shape
    odd = jax.make_jaxpr(tracing.pad_to_even)(jnp.ones(3))
    even = jax.make_jaxpr(tracing.pad_to_even)(jnp.ones(4))
    assert not even.eqns  # decided: nothing to do for an even length
    names = [e.primitive.name for e in odd.eqns]
    assert "concatenate" in names and "cond" not in names  # no branch left at run time


@pytest.mark.claim("sec-control-flow", "clm-tr-value-branch")
def test_branching_on_a_value_raises_tracer_bool_conversion_error():
    err = jitbook.error_of(jax.jit(tracing.sin_or_cos), jnp.ones(3), 1.0)
    assert type(err) is jax.errors.TracerBoolConversionError
    assert issubclass(
        jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError
    )
    assert (
        type(err).__mro__[1] is jax.errors.ConcretizationTypeError
    )  # what the chapter prints
    assert (
        str(err)
        .splitlines()[0]
        .startswith("Attempted boolean conversion of traced array")
    )


@pytest.mark.claim("sec-control-flow", "clm-tracing-ways-out-costs")
def test_three_ways_out_give_the_right_values(measured):
    x = jnp.linspace(-1.0, 1.0, 5)
    x64 = np.asarray(x, np.float64)
    worst = 0.0
    for t, want in ((1.0, np.sin(x64)), (-1.0, np.cos(x64))):
        for fn in (
            tracing.sin_or_cos_static,
            jax.jit(tracing.sin_or_cos_where),
            jax.jit(tracing.sin_or_cos_cond),
        ):
            worst = max(worst, float(np.abs(np.asarray(fn(x, t)) - want).max()))
            np.testing.assert_allclose(fn(x, t), want, atol=1e-6)
    measured("largest error of the three ways against NumPy's sin and cos", worst)


@pytest.mark.claim("sec-control-flow", "clm-tracing-static-per-value")
def test_static_compiles_per_value_where_and_cond_once():
    x = jnp.ones(4)
    ways = {
        "static": jax.jit(functools.partial(tracing.sin_or_cos), static_argnums=1),
        "where": jax.jit(functools.partial(tracing.sin_or_cos_where)),
        "cond": jax.jit(functools.partial(tracing.sin_or_cos_cond)),
    }
    counts = {}
    for name, fn in ways.items():
        with count_compiles() as log:
            for t in (1.0, 2.0, -1.0, -2.0):
                fn(x, t)
        counts[name] = log.count
    assert counts == {"static": 4, "where": 1, "cond": 1}


@pytest.mark.claim("sec-control-flow", "clm-tracing-static-hashable")
def test_static_arguments_must_be_hashable():
    err = jitbook.error_of(
        jax.jit(tracing.sin_or_cos, static_argnums=1), jnp.ones(2), jnp.array(1.0)
    )
    assert type(err) is ValueError and str(err).startswith(
        "Non-hashable static arguments are not supported"
    )


@pytest.mark.claim("sec-control-flow", "clm-tracing-where-both-branches")
def test_static_program_holds_one_branch_where_computes_both_cond_runs_one():
    x = jnp.ones(3)
    static = jax.make_jaxpr(tracing.sin_or_cos, static_argnums=1)(x, 1.0)
    assert [str(e.primitive) for e in static.jaxpr.eqns] == ["sin"]
    assert tracing.branches_run(tracing.sin_or_cos_where, x, 1.0) == ["sin", "cos"]
    assert tracing.branches_run(tracing.sin_or_cos_where, x, -1.0) == ["sin", "cos"]
    assert tracing.branches_run(tracing.sin_or_cos_cond, x, 1.0) == ["sin"]
    assert tracing.branches_run(tracing.sin_or_cos_cond, x, -1.0) == ["cos"]
    cond = jax.make_jaxpr(tracing.sin_or_cos_cond)(x, 1.0)
    assert "cond" in [str(e.primitive) for e in cond.jaxpr.eqns]
    assert "sin" in str(cond) and "cos" in str(cond)  # both branches are in the program


# --- loops -------------------------------------------------------------------------------------------


@pytest.mark.claim("sec-tracing-loops", "clm-tr-loop-unrolls")
def test_python_loop_unrolls_and_structured_loops_stay_constant():
    rows = tracing.loop_growth(
        [tracing.python_loop, tracing.fori_version, tracing.scan_version],
        [1, 10, 50],
        jnp.ones(3),
    )
    eqs = {(r["loop"], r["n"]): r["equations"] for r in rows}
    assert [eqs["python_loop", n] for n in (1, 10, 50)] == [2, 20, 100]
    assert len({eqs["fori_version", n] for n in (1, 10, 50)}) == 1
    assert len({eqs["scan_version", n] for n in (1, 10, 50)}) == 1
    assert all(r["compile (ms)"] > 0 for r in rows)


@pytest.mark.claim("sec-tracing-loops", "clm-tracing-python-loop-grows")
def test_the_unrolled_loop_grows_two_equations_per_step_and_agrees_with_numpy():
    rows = tracing.loop_growth([tracing.python_loop], [1, 7, 300], jnp.ones(3))
    assert [r["equations"] for r in rows] == [2, 14, 600]  # sin and + 1.0, each step
    (step,) = jax.make_jaxpr(tracing.python_loop, static_argnums=1)(
        jnp.ones(3), 1
    ).eqns[:1]
    assert step.primitive.name == "sin"
    x = jnp.array([0.5, -1.0, 2.0])
    want = np.asarray(x, np.float64)
    for _ in range(7):
        want = np.sin(want) + 1.0
    for fn in (tracing.python_loop, tracing.fori_version, tracing.scan_version):
        np.testing.assert_allclose(jax.jit(fn, static_argnums=1)(x, 7), want, atol=1e-5)


@pytest.mark.claim("sec-tracing-loops", "clm-tracing-fori-traced-trip-count")
def test_fori_loop_with_traced_n_compiles_once_static_loop_per_n():
    static_loop = jax.jit(functools.partial(tracing.python_loop), static_argnums=1)
    traced_loop = jax.jit(functools.partial(tracing.fori_version))
    with count_compiles() as static_log:
        for n in (3, 4, 5):
            static_loop(jnp.ones(3), n)
    with count_compiles() as traced_log:
        for n in (3, 4, 5):
            traced_loop(jnp.ones(3), n)
    assert (static_log.count, traced_log.count) == (3, 1)


@pytest.mark.claim("sec-tracing-loops", "clm-tracing-range-traced-n-raises")
def test_traced_loop_lengths_fail_for_range_and_scan():
    assert isinstance(
        jitbook.error_of(jax.jit(tracing.python_loop), jnp.ones(2), 3),
        jax.errors.TracerIntegerConversionError,
    )
    assert isinstance(
        jitbook.error_of(jax.jit(tracing.scan_version), jnp.ones(2), 3),
        jax.errors.ConcretizationTypeError,
    )
    # unlike TracerBoolConversionError, the integer one is not a ConcretizationTypeError on this JAX
    assert not issubclass(
        jax.errors.TracerIntegerConversionError, jax.errors.ConcretizationTypeError
    )


def test_count_equations_counts_nested_bodies():
    closed = jax.make_jaxpr(tracing.fori_version)(jnp.ones(2), 3)
    assert len(closed.jaxpr.eqns) < programs.count_equations(closed)
    assert programs.count_equations(closed.jaxpr) == programs.count_equations(closed)
    with pytest.raises(TypeError, match="takes a jaxpr"):
        programs.count_equations("not a jaxpr")


# --- closures ----------------------------------------------------------------------------------------


@pytest.mark.claim("sec-tracing-closures", "clm-tr-closure-constant")
def test_captured_array_is_a_constant_not_an_input():
    w = jnp.array([1.0, 2.0, 3.0])
    closure = jax.make_jaxpr(tracing.make_scaler(w))(jnp.ones(3))
    argument = jax.make_jaxpr(tracing.scale_by_argument)(jnp.ones(3), w)
    assert (len(closure.jaxpr.invars), len(closure.consts)) == (1, 1)
    assert (len(argument.jaxpr.invars), len(argument.consts)) == (2, 0)
    np.testing.assert_array_equal(np.asarray(closure.consts[0]), [1.0, 2.0, 3.0])


@pytest.mark.claim("sec-tracing-closures", "clm-tr-closure-stale")
def test_closure_goes_stale_argument_stays_fresh():
    config = {"scale": 2.0}
    jitted = jax.jit(tracing.make_config_scaler(config))
    assert float(jitted(1.0)) == 2.0
    config["scale"] = 3.0
    with count_compiles() as log:
        assert float(jitted(1.0)) == 2.0
    assert log.count == 0
    fresh = jax.jit(functools.partial(tracing.scale_by_argument))
    with count_compiles() as log:
        assert [float(fresh(1.0, s)) for s in (2.0, 3.0)] == [2.0, 3.0]
    assert log.count == 1


@pytest.mark.claim("sec-tracing-closures", "clm-tr-new-closure")
def test_a_new_closure_is_a_new_function_to_jit():
    with (
        count_compiles() as log,
        cache.count_body_runs(tracing.make_scaler(2.0)) as runs,
    ):
        for _ in range(3):
            jax.jit(tracing.make_scaler(2.0))(1.0)
    assert (
        log.count_for("scale_by") == 3
    )  # equal in behaviour, not equal as objects: compiled each time
    assert runs.count == 3  # and each closure's body ran: no jaxpr was shared
    assert tracing.make_scaler(2.0) != tracing.make_scaler(2.0)


def test_helpers_reject_bad_input():
    with pytest.raises(TypeError, match="wraps a function"):
        tracing.BodyCounter(3)
    with pytest.raises(TypeError, match="takes the function first"):
        tracing.printed_lines([1.0], tracing.step)
    with pytest.raises(ValueError, match="loop lengths"):
        tracing.loop_growth([tracing.python_loop], [], jnp.ones(2))
    with pytest.raises(ValueError, match="loop lengths"):
        tracing.loop_growth([tracing.python_loop], [2.5], jnp.ones(2))
    with pytest.raises(ValueError, match="did not raise"):
        jitbook.error_of(tracing.step, 1.0)


@pytest.mark.claim("sec-tracing", "clm-tr-python-float-int")
def test_a_python_float_meeting_an_int_array_brings_its_default_float_dtype():
    counts, floats = jnp.arange(3, dtype=jnp.int32), jnp.ones(3, dtype=jnp.float32)
    assert (counts * 2.0).dtype == jnp.float32 and jnp.array(2.0).dtype == jnp.float32
    with jax.enable_x64(True):
        assert (counts * 2.0).dtype == jnp.float64 and jnp.array(
            2.0
        ).dtype == jnp.float64
        assert (floats * 2.0).dtype == jnp.float32  # weak: yields to the float32 array


@pytest.mark.claim("sec-tracing-cond-vmap", "clm-tracing-cond-vmap-select")
def test_cond_under_vmap_with_a_batched_predicate_becomes_select_and_runs_both():
    x, ts = jnp.linspace(-1.0, 1.0, 3), jnp.array([1.0, -1.0])
    assert tracing.branches_run(tracing.sin_or_cos_cond, x, 1.0) == ["sin"]
    assert tracing.branches_run_batched(tracing.sin_or_cos_cond, x, ts) == [
        "cos",
        "sin",
    ]
    prims = programs.stats(
        jax.vmap(tracing.sin_or_cos_cond, in_axes=(None, 0)), x, ts, lower=False
    ).primitives
    assert prims["cond"] == 0 and prims["select_n"] == 3
    eqns = jax.make_jaxpr(jax.vmap(tracing.sin_or_cos_cond, in_axes=(None, 0)))(
        x, ts
    ).eqns
    names = [str(e.primitive) for e in eqns]
    # one select_n feeds each branch its operand, gradient stopped where it is not taken
    assert names.count("stop_gradient") == 2
    for branch in ("sin", "cos"):
        before = names[: names.index(branch)]
        assert before[-1] == "select_n" and "stop_gradient" in before
    assert names[-1] == "select_n"  # the last one picks each element's result
    unbatched = programs.stats(tracing.sin_or_cos_cond, x, 1.0, lower=False).primitives
    assert unbatched["cond"] == 1


@pytest.mark.claim("sec-control-flow", "clm-tracing-where-nan-gradient")
def test_where_gives_a_nan_gradient_and_the_double_where_fixes_it():
    assert np.isnan(float(jax.grad(tracing.sqrt_or_zero)(0.0)))
    assert float(jax.grad(tracing.sqrt_or_zero_safe)(0.0)) == 0.0
    assert float(jax.grad(tracing.sqrt_or_zero_safe)(4.0)) == pytest.approx(0.25)
    assert (
        float(tracing.sqrt_or_zero(0.0)) == float(tracing.sqrt_or_zero_safe(0.0)) == 0.0
    )


@pytest.mark.claim("sec-tracing-loops", "clm-tracing-fori-while-grad")
def test_fori_loop_with_traced_n_is_a_while_loop_that_grad_refuses():
    x = jnp.ones(3)
    assert (
        tracing.loop_primitive(tracing.fori_version, x, 3, static_argnums=1) == "scan"
    )
    assert tracing.loop_primitive(tracing.fori_version, x, 3) == "while"
    err = jitbook.raised(
        jax.jit(jax.grad(lambda v, n: tracing.fori_version(v, n).sum())), x, 3
    )
    assert isinstance(
        err, ValueError
    ) and "Reverse-mode differentiation does not work" in str(err)


@pytest.mark.claim("sec-tracing-loops", "clm-tracing-masked-scan")
def test_masked_scan_compiles_once_and_differentiates_like_the_unrolled_loop():
    x = jnp.linspace(-1.0, 1.0, 3)
    grad = jax.jit(jax.grad(lambda v, n: tracing.masked_scan(v, n, 10).sum()))
    with count_compiles() as log:
        got = {n: grad(x, n) for n in (0, 4, 10)}
    assert log.count == 1
    for n, g in got.items():
        want = jax.grad(lambda v, n=n: tracing.python_loop(v, n).sum())(x)
        np.testing.assert_allclose(np.asarray(g), np.asarray(want), atol=1e-6)
    with pytest.raises(ValueError, match="static bound"):
        tracing.masked_scan(x, 3, 2.5)


@pytest.mark.claim("sec-control-flow", "clm-tracing-shapes-need-size")
def test_value_dependent_shapes_fail_under_jit_unless_sized():
    values = jnp.array([-1.0, 2.0, -3.0, 4.0])
    assert isinstance(
        jitbook.raised(jax.jit(tracing.positives), values),
        jax.errors.NonConcreteBooleanIndexError,
    )
    assert isinstance(
        jitbook.raised(jax.jit(jnp.nonzero), values), jax.errors.ConcretizationTypeError
    )
    assert isinstance(
        jitbook.raised(jax.jit(jnp.unique), values), jax.errors.ConcretizationTypeError
    )
    assert tracing.positives(values).tolist() == [
        2.0,
        4.0,
    ]  # op by op every shape is known
    padded = jax.jit(tracing.positives_padded, static_argnums=1)(values, 4)
    assert padded.tolist() == [2.0, 4.0, 0.0, 0.0]


@pytest.mark.claim("sec-tracing-shapes", "clm-tracing-fill-minus-one")
def test_a_minus_one_fill_index_is_valid_and_repeats_the_last_entry():
    values = jnp.array([-1.0, 2.0, -3.0, 4.0])
    idx = jnp.nonzero(values > 0, size=4, fill_value=-1)[0]
    assert idx.tolist() == [1, 3, -1, -1]
    assert values[idx].tolist() == [2.0, 4.0, 4.0, 4.0]


@pytest.mark.claim("sec-tracing-side-effects", "clm-tracing-io-callback-every-call")
def test_callbacks_run_at_every_call():
    from jax.experimental import io_callback

    seen, written = [], []
    logged = jax.jit(lambda v: tracing.logged_square(v, seen))

    def record(v):
        written.append(float(v))
        return v

    io = jax.jit(
        lambda v: io_callback(
            record, jax.ShapeDtypeStruct((), jnp.float32), v, ordered=True
        )
    )
    for v in (1.0, 2.0, 3.0):
        assert float(logged(v)) == v * v
        io(v)
    jax.effects_barrier()
    assert seen == written == [1.0, 2.0, 3.0]
    np.testing.assert_allclose(
        np.asarray(jax.jit(tracing.numpy_sine)(jnp.array([0.0, 1.0]))),
        np.sin([0.0, 1.0]),
        rtol=1e-6,
    )


@pytest.mark.claim("sec-tracing-side-effects", "clm-tr-checking-leaks")
def test_checking_leaks_catches_the_leak_when_the_trace_ends():
    with jax.checking_leaks():
        err = jitbook.raised(jax.jit(lambda v: tracing.remember(v) * 2), 1.0)
    tracing.history.clear()
    assert err is not None and str(err).startswith("Leaked trace")
    assert (
        jitbook.raised(jax.jit(lambda v: tracing.remember(v) * 2), 1.0) is None
    )  # unchecked: no error
    tracing.history.clear()


def test_error_lines_carry_no_directories():
    def traced_twice(v):
        return v * 3

    with jax.no_tracing(True):
        line = jitbook.error_line(jitbook.raised(jax.jit(traced_twice), 1.0))
    assert "test_tracing.py" in line and "/" not in line


@pytest.mark.claim("sec-tracing-side-effects", "clm-tr-ordered-debug-print")
def test_ordered_debug_print_prints_at_every_call_in_order():
    def print_in_order(v):
        jax.debug.print("call with {}", v, ordered=True)
        return v

    lines = tracing.printed_lines(jax.jit(print_in_order), [(1.0,), (2.0,), (3.0,)])
    assert lines == ["call with 1.0", "call with 2.0", "call with 3.0"]

    # the mechanism, which the lines alone cannot show (unordered prints often come out in order
    # too): ordered=True makes the print an ordered effect, threaded through a token from call
    # to call; without it, neither
    def print_unordered(v):
        jax.debug.print("call with {}", v)
        return v

    assert effect_order(print_in_order, 1.0) == (True, True)
    assert effect_order(print_unordered, 1.0) == (False, False)


@pytest.mark.claim("sec-tracing-side-effects", "clm-tracing-debug-callback-options")
def test_debug_callback_takes_its_options_in_a_first_call():
    assert "Two-call form (Recommended)" in jax.debug.callback.__doc__
    seen = []

    def noted(v):
        jax.debug.callback(ordered=True)(lambda a: seen.append(float(a)), v)
        return v

    for v in (1.0, 2.0, 3.0):
        jax.jit(noted)(v)
    jax.effects_barrier()
    assert seen == [1.0, 2.0, 3.0]


# --- weak types, tracer names, callbacks, NumPy on tracers -------------------------------------------


@pytest.mark.claim("sec-tracing-tracer", "clm-tr-strong-scalar")
def test_a_strong_scalar_promotes_like_an_array_of_its_dtype_not_above_it():
    half = jnp.ones(3, dtype=jnp.bfloat16)
    assert (half * 2.0).dtype == jnp.bfloat16
    assert (half * jnp.float32(2.0)).dtype == jnp.float32
    with jax.enable_x64(True):
        assert (jnp.ones(3, jnp.float64) * jnp.float32(2.0)).dtype == jnp.float64
        assert (jnp.arange(3, dtype=jnp.int32) * 2.0).dtype == jnp.float64


@pytest.mark.claim("sec-tracing-tracer", "clm-tr-jit-tracer-name")
def test_a_dynamic_jaxpr_tracer_prints_as_jit_tracer_under_jit_and_make_jaxpr():
    seen = []

    def note(v):
        seen.append((str(v), type(v).__name__))
        return v

    jax.jit(note)(1.0)
    jax.make_jaxpr(lambda v: note(v))(jnp.ones(2))
    assert seen == [
        ("JitTracer(~float32[])", "DynamicJaxprTracer"),
        ("JitTracer(float32[2])", "DynamicJaxprTracer"),
    ]
    # the bodies of cond and scan too; partial evaluation's tracer is another class
    seen.clear()
    jax.jit(lambda v: jax.lax.cond(v > 0, note, note, v))(1.0)
    jax.lax.scan(lambda c, _: (note(c), None), 1.0, length=2)
    assert {kind for _, kind in seen} == {"DynamicJaxprTracer"} and len(seen) >= 2, seen
    # partial evaluation records a jaxpr too, with JaxprTracer (private names: the test fails
    # if they move)
    from jax._src import core
    from jax._src.interpreters import partial_eval as pe

    seen.clear()
    jaxpr, _, _ = pe.trace_to_jaxpr_nounits(
        _wrapped(lambda v: [note(v) * 2.0]),
        [pe.PartialVal.unknown(core.ShapedArray((), jnp.float32))],
    )
    assert [kind for _, kind in seen] == ["JaxprTracer"]
    assert pe.JaxprTracer is not pe.DynamicJaxprTracer
    assert isinstance(jaxpr, core.Jaxpr) and jaxpr.eqns  # the multiply was recorded


def _wrapped(fn):
    """``fn`` as JAX's internal ``WrappedFun``, with the debug info newer releases need."""
    from jax._src import linear_util

    try:
        from jax._src.api_util import debug_info

        return linear_util.wrap_init(fn, debug_info=debug_info("fn", fn, (1.0,), {}))
    except (ImportError, TypeError):
        return linear_util.wrap_init(fn)


@pytest.mark.claim("sec-tracing-side-effects", "clm-tr-pure-callback-dce")
def test_a_debug_callback_is_kept_and_an_unused_pure_callback_is_dropped():
    assert tracing.callback_runs(jnp.ones(2)) == {
        "debug.callback": 1,
        "pure_callback, result unused": 0,
    }
    # removed by JAX's dead-code elimination at lowering, before XLA
    assert tracing.unused_callback_stages(jnp.ones(2)) == {
        "in the jaxpr": True,
        "in the StableHLO": False,
    }


@pytest.mark.claim("sec-tracing-numpy", "clm-tracing-conversions-raise")
def test_numpy_and_python_conversions_of_a_tracer_raise():
    rows = {r["inside jit"]: r for r in tracing.host_conversions(jnp.arange(3.0))}
    for code in ("np.sin(x)", "np.asarray(x)"):
        assert rows[code]["raises"] == "TracerArrayConversionError"
        assert not rows[code]["a ConcretizationTypeError"]
    for code in ("float(x[0])", "x[0].item()", "x.tolist()"):
        assert rows[code]["raises"] == "ConcretizationTypeError"


@pytest.mark.claim("sec-tracing-numpy", "clm-tracing-random-clock-once")
def test_numpy_random_and_the_clock_are_read_once_while_tracing():
    noisy = jax.jit(tracing.shift_by_noise)
    draws = {float(noisy(0.0)) for _ in range(3)}
    assert len(draws) == 1
    assert len({float(tracing.shift_by_noise(0.0)) for _ in range(3)}) == 3
    jaxpr = jax.make_jaxpr(tracing.shift_by_noise)(0.0)
    assert [str(e.primitive) for e in jaxpr.eqns] == ["add"]  # the draw is a literal
    clocked = jax.jit(tracing.shift_by_clock)
    first = float(clocked(0.0))
    import time

    time.sleep(0.02)
    assert float(clocked(0.0)) == first


@pytest.mark.claim("sec-tracing-numpy", "clm-tracing-ensure-compile-time-eval")
def test_ensure_compile_time_eval_computes_while_tracing():
    jaxpr = jax.make_jaxpr(tracing.squares_lookup)(2)
    names = {str(e.primitive) for e in jaxpr.eqns}
    assert not names & {"argmax", "pow", "integer_pow", "iota"}
    assert len(jaxpr.consts) == 1
    assert float(jax.jit(tracing.squares_lookup)(2)) == 4.0 + 4
    assert isinstance(
        jitbook.raised(jax.jit(lambda i: int(jnp.argmax(jnp.arange(5.0) * i))), 2),
        jax.errors.ConcretizationTypeError,
    )


@pytest.mark.claim("sec-tracing", "clm-tr-make-jaxpr-shares")
def test_make_jaxpr_after_jit_reuses_jits_trace():
    shared = tracing.make_jaxpr_after_jit(jnp.ones(3))
    assert shared["body runs for jax.jit"] == 1
    assert shared["then for make_jaxpr, same types"] == 0  # the tracing cache answered
    assert shared["then for make_jaxpr, new dtype"] == 1
