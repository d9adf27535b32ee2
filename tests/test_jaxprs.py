"""The claims of the chapter "jaxprs and the road to XLA", its package code, and its exercises' wrong answers."""

import os

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import count_compiles, errors, fresh, programs
from jitbook.chapters import jaxprs, tracing, why_compile


def prims(fn, *args, **kwargs):
    return programs.stats(fn, *args, lower=False, **kwargs).primitives


# ---------------------------------------------------------------- reading a jaxpr


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-make-jaxpr-carries-consts")
def test_make_jaxpr_returns_a_jaxpr_that_carries_its_constants():
    j = jax.make_jaxpr(jaxprs.update)(jnp.ones(4))
    assert type(j).__name__ == "Jaxpr"
    assert jax.extend.core.ClosedJaxpr is jax.extend.core.Jaxpr
    assert j.jaxpr is j  # the legacy accessor returns the object itself
    assert j.consts == [] and j.constvars == []
    # a captured array travels with the jaxpr, as its constant
    table = jnp.arange(32.0).reshape(4, 8)
    closed = jax.make_jaxpr(jaxprs.with_closure(table))(jnp.ones((3, 4)))
    assert len(closed.consts) == len(closed.constvars) == 1
    np.testing.assert_array_equal(np.asarray(closed.consts[0]), np.asarray(table))
    assert jax.core.eval_jaxpr(closed.jaxpr, closed.consts, jnp.ones((3, 4)))


def test_step_jaxpr_parts():
    j = jax.make_jaxpr(jaxprs.update)(jnp.ones(4))
    assert [str(v.aval) for v in j.invars] == ["float32[4]"]
    assert [e.primitive.name for e in j.eqns] == ["sin", "mul", "add"]
    literal = j.eqns[1].invars[1]
    assert isinstance(literal, jax.extend.core.Literal) and float(literal.val) == 0.5
    assert "0.5:f32[]" in str(j)
    assert len(j.outvars) == 1
    text = str(programs.anatomy(j))
    assert "literal 0.5" in text and text.count("| equation |") == 3


@pytest.mark.claim("sec-jaxprs-reading", "clm-jaxprs-dot-general-lines")
def test_dot_general_spans_several_lines():
    j = jax.make_jaxpr(jaxprs.with_argument)(jnp.ones((3, 4)), jnp.ones((4, 8)))
    assert [e.primitive.name for e in j.eqns] == ["dot_general", "tanh"]
    assert len(j.pretty_print(use_color=False).splitlines()) - 2 > len(j.eqns)


# ---------------------------------------------------------------- what a jaxpr leaves out


@pytest.mark.claim("sec-jaxprs-leaves-out", "clm-jaxprs-side-effects")
def test_side_effects_run_at_trace_time_and_are_not_in_the_jaxpr(capsys):
    def fresh(x):  # a new function: nothing about it is cached yet
        return jaxprs.log2_with_side_effects(x)

    before = len(jaxprs.SEEN)
    j = jax.make_jaxpr(fresh)(3.0)
    assert len(jaxprs.SEEN) == before + 1
    assert (
        isinstance(jaxprs.SEEN[-1], jax.core.Tracer)
        and type(jaxprs.SEEN[-1]).__name__ == "DynamicJaxprTracer"
    )
    printed = capsys.readouterr().out
    assert printed.count("running the Python body with") == 1
    assert sorted(e.primitive.name for e in j.eqns) == ["div", "log", "log"]


@pytest.mark.claim("sec-jaxprs-leaves-out", "clm-jaxprs-shared-trace-cache")
def test_make_jaxpr_shares_the_trace_cache_with_jit(capsys):
    def fresh(x):
        return jaxprs.log2_with_side_effects(x)

    before = len(jaxprs.SEEN)
    jax.make_jaxpr(fresh)(3.0)
    stats = programs.stats(
        fresh, 3.0, lower=False
    )  # same function, same argument type: no new trace
    assert sorted(stats.primitives) == ["div", "log"]
    with count_compiles() as log:
        out = jax.jit(fresh)(
            8.0
        )  # the jitted call compiles, but finds the trace already made
    assert log.count_for("fresh") == 1
    assert float(out) == pytest.approx(3.0)
    assert len(jaxprs.SEEN) == before + 1
    assert capsys.readouterr().out.count("running the Python body") == 1
    jax.make_jaxpr(fresh)(jnp.ones(2))  # a new argument type traces again
    assert len(jaxprs.SEEN) == before + 2


@pytest.mark.claim("sec-jaxprs-leaves-out", "clm-jaxprs-taken-branch")
def test_only_the_taken_branch_is_recorded():
    assert dict(prims(jaxprs.by_rank, jnp.ones((2, 3)))) == {"reduce_sum": 1}
    assert dict(prims(jaxprs.by_rank, jnp.ones(3))) == {"cos": 1}


# ---------------------------------------------------------------- constants and literals


@pytest.mark.claim("sec-jaxprs-constants", "clm-jaxprs-closure-constvar")
def test_closure_array_is_a_constant_and_argument_is_an_input():
    table = jnp.arange(32.0).reshape(4, 8)
    j = jax.make_jaxpr(jaxprs.with_closure(table))(jnp.ones((3, 4)))
    assert len(j.constvars) == 1 and str(j.constvars[0].aval) == "float32[4,8]"
    assert type(j.consts[0]).__name__ == "ArrayImpl"
    np.testing.assert_array_equal(np.asarray(j.consts[0]), np.asarray(table))
    assert str(j).startswith("{ lambda a:f32[4,8]; b:f32[3,4].")
    assert jax.make_jaxpr(jaxprs.with_argument)(jnp.ones((3, 4)), table).consts == []


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-literal")
def test_closure_number_is_a_literal():
    """By the jaxpr's own objects, not its printout: the page's 0.5 is a Literal operand of
    its equation, a float32 scalar, and no constant or input; so is a captured 3.0."""
    j = jax.make_jaxpr(jaxprs.update)(jnp.ones(4))
    (mul,) = [e for e in j.eqns if e.primitive.name == "mul"]
    (half,) = [v for v in mul.invars if isinstance(v, jax.extend.core.Literal)]
    assert (
        float(half.val) == 0.5
        and half.aval.shape == ()
        and half.aval.dtype == jnp.float32
    )
    assert j.consts == [] and len(j.jaxpr.invars) == 1
    j = jax.make_jaxpr(jaxprs.scaled_by(3.0))(jnp.ones((3, 4)))
    assert j.consts == []
    literal = j.eqns[0].invars[1]
    assert isinstance(literal, jax.extend.core.Literal) and float(literal.val) == 3.0


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-float-argument-weak")
def test_python_float_argument_is_weakly_typed():
    stats = programs.stats(jaxprs.log2_with_side_effects, 3.0, lower=False)
    assert stats.inputs == ["~float32[]"]
    (aval,) = [v.aval for v in stats.jaxpr.invars]
    assert aval.weak_type and aval.dtype == jnp.float32 and aval.shape == ()
    (strong,) = jax.make_jaxpr(jaxprs.update)(jnp.float32(3.0)).jaxpr.invars
    assert not strong.aval.weak_type  # a jnp.float32 is not weak
    assert "~" not in str(stats.jaxpr)  # the printed jaxpr does not mark weak types


@pytest.mark.claim("sec-jaxprs-constants", "clm-jaxprs-weak-literal")
def test_weak_literal_takes_the_dtype_and_strong_constant_promotes():
    half = jnp.linspace(-1.0, 1.0, 4, dtype=jnp.float16)
    weak = jax.make_jaxpr(jaxprs.update)(half)
    assert "convert_element_type" not in str(weak) and "0.5:f16[]" in str(weak)
    assert jaxprs.update(half).dtype == jnp.float16
    strong = prims(jaxprs.update_f32_constant, half)
    assert strong["convert_element_type"] == 2
    assert jaxprs.update_f32_constant(half).dtype == jnp.float32


# ---------------------------------------------------------------- the stages


@pytest.mark.claim("sec-jaxprs-stages", "clm-jaxprs-cost-analysis-type")
def test_aot_stages_and_cost_analysis():
    m, k, n = 32, 64, 16
    a = jax.random.normal(jax.random.key(1), (m, k))
    b = jax.random.normal(jax.random.key(2), (k, n))
    traced = jax.jit(jaxprs.with_argument).trace(a, b)
    lowered = traced.lower()
    compiled = lowered.compile()
    assert [type(s).__name__ for s in (traced, lowered, compiled)] == [
        "Traced",
        "Lowered",
        "Compiled",
    ]
    assert isinstance(
        compiled.cost_analysis(), dict
    )  # a dict on this JAX (a list of dicts on older ones)
    text = lowered.as_text()
    assert (
        "stablehlo.dot_general" in text
        and "stablehlo.tanh" in text
        and "tensor<32x64xf32>" in text
    )
    road = programs.walk(jaxprs.with_argument, a, b)
    assert road.cost["flops"] == 2 * m * k * n
    assert road.cost["transcendentals"] == m * n
    assert road.cost["bytes accessed"] >= 4 * (m * k + k * n + m * n)
    ref = np.tanh(
        np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    )  # independent reference
    np.testing.assert_allclose(np.asarray(road.compiled(a, b)), ref, atol=1e-4)
    np.testing.assert_allclose(
        np.asarray(road.compiled(a, b)),
        np.asarray(jaxprs.with_argument(a, b)),
        atol=1e-6,
    )


def test_walk_shows_every_stage_without_colour_codes():
    road = programs.walk(
        tracing.python_loop, jnp.ones(3), 10, static_argnums=1, excerpt_lines=5
    )
    md = road._repr_markdown_()
    for stage in (
        "1. trace",
        "2. lower",
        "3. compile",
        "4. call",
        "flops",
        "transcendentals",
    ):
        assert stage in md
    assert "\x1b[" not in md
    excerpt = road.excerpt().splitlines()
    assert (
        len(excerpt) == 6
        and excerpt[-1].startswith("// ...")
        and excerpt[0].startswith("module @jit_")
    )
    assert road.stages.compile > 0 and road.stages.name == "python_loop"
    with pytest.raises(ValueError, match="excerpt_lines"):
        programs.walk(jaxprs.update, jnp.ones(3), excerpt_lines=0)


def test_cost_summary_accepts_dicts_lists_and_missing_keys():
    assert programs.cost_summary({"flops": 3.0}) == {
        "flops": 3.0,
        "bytes accessed": 0.0,
        "transcendentals": 0.0,
    }
    assert (
        programs.cost_summary([{"flops": 1.0}, {"flops": 2.0, "transcendentals": 1.0}])[
            "flops"
        ]
        == 3.0
    )
    assert programs.cost_summary(None)["flops"] == 0.0
    compiled = (
        jax.jit(lambda a, b: a @ b)
        .trace(jnp.ones((8, 4)), jnp.ones((4, 5)))
        .lower()
        .compile()
    )
    assert (
        "transcendentals" not in compiled.cost_analysis()
    )  # XLA leaves a zero figure out
    assert programs.cost_summary(compiled) == {
        "flops": 320.0,
        "bytes accessed": pytest.approx(compiled.cost_analysis()["bytes accessed"]),
        "transcendentals": 0.0,
    }
    with pytest.raises(TypeError, match="cost_summary takes"):
        programs.cost_summary("flops")


@pytest.mark.claim("sec-jaxprs-shapes", "clm-jaxprs-executable-one-shape")
def test_compiled_executable_refuses_other_shapes_and_dtypes():
    a, b = jnp.ones((6, 4)), jnp.ones((4, 2))
    compiled = jax.jit(jaxprs.with_argument).trace(a, b).lower().compile()
    ok = errors.call_outcome(compiled, a, b)
    assert ok["outcome"] == "returned f32[6,2]"
    with pytest.raises(TypeError) as err:
        compiled(a[:-1], b)
    first = str(err.value).splitlines()[0]
    assert first.startswith(
        "Argument types differ from the types for which this computation was compiled"
    )
    shape = errors.call_outcome(compiled, a[:-1], b)
    assert shape["outcome"] == "TypeError" and shape["first line"] == first
    assert (
        shape["last line"]
        == "Argument 'x' compiled with float32[6,4] and called with float32[5,4]"
    )
    dtype = errors.call_outcome(compiled, a.astype(jnp.int32), b)
    assert dtype["outcome"] == "TypeError" and "int32[6,4]" in dtype["last line"]


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-new-shape-compiles")
def test_jitted_function_compiles_again_for_a_new_shape():
    def local_project(x, t):
        return jnp.tanh(x @ t)

    jitted = jax.jit(local_project)
    jitted(jnp.ones((6, 4)), jnp.ones((4, 2)))
    with count_compiles() as log:
        out = jitted(jnp.ones((5, 4)), jnp.ones((4, 2)))
    assert log.count_for("local_project") == 1 and out.shape == (5, 2)


# ---------------------------------------------------------------- the explorer


def test_tracing_loops_seen_by_the_explorer():
    x = jnp.linspace(-1.0, 1.0, 4)
    unrolled = programs.stats(tracing.python_loop, x, 10, static_argnums=1, lower=False)
    rolled = programs.stats(tracing.fori_version, x, 10, static_argnums=1, lower=False)
    assert unrolled.equations == unrolled.all_equations == 2 * 10
    assert (
        rolled.equations == 1 and rolled.jaxpr.eqns[0].primitive.name == "scan"
    )  # static bounds: a scan
    assert rolled.primitives["sin"] == 1


@pytest.mark.claim("sec-jaxprs-stats", "clm-jaxprs-stablehlo-constant")
def test_closure_constant_is_written_into_the_stablehlo():
    table = jax.random.normal(jax.random.key(3), (64, 64))
    inputs = jnp.ones((2, 64))
    closed = programs.stats(jaxprs.with_closure(table), inputs, name="closure")
    passed = programs.stats(jaxprs.with_argument, inputs, table, name="argument")
    assert (
        closed.equations == passed.equations and closed.primitives == passed.primitives
    )
    assert (closed.constants, closed.constant_bytes) == (1, table.nbytes)
    assert (passed.constants, passed.constant_bytes) == (0, 0)
    hlo = jax.jit(jaxprs.with_closure(table)).trace(inputs).lower().as_text()
    assert "stablehlo.constant dense<" in hlo
    assert closed.stablehlo_chars > 10 * passed.stablehlo_chars


def test_compare_puts_variants_side_by_side():
    x = jnp.ones(3)
    text = str(
        programs.side_by_side(
            programs.stats(tracing.python_loop, x, 2, static_argnums=1, name="loop"),
            programs.stats(tracing.fori_version, x, 2, static_argnums=1, name="fori"),
        )
    )
    assert text.splitlines()[0] == "|  | loop | fori |"
    assert "| `scan` | 0 | 1 |" in text and "| `sin` | 2 | 1 |" in text
    assert "| equations | 4 | 1 |" in text


def test_bad_input_gets_clear_errors():
    with pytest.raises(TypeError, match="takes the function first"):
        programs.stats(jaxprs.update(jnp.ones(2)))
    with pytest.raises(TypeError, match="takes the function first"):
        programs.walk(3.0)
    with pytest.raises(TypeError, match="takes the function first"):
        errors.call_outcome("f")
    with pytest.raises(TypeError, match="results of stats"):
        programs.side_by_side(jax.make_jaxpr(jaxprs.update)(jnp.ones(2)))
    with pytest.raises(TypeError, match="results of stats"):
        programs.side_by_side()
    s = programs.stats(jaxprs.update, jnp.ones(2), lower=False)
    with pytest.raises(ValueError, match="names must differ"):
        programs.side_by_side(s, s)
    with pytest.raises(TypeError, match="anatomy takes a jaxpr"):
        programs.anatomy(jaxprs.update)


# ---------------------------------------------------------------- what XLA did, nested jit, eval_shape, no_tracing


@pytest.mark.claim("sec-jaxprs-xla", "clm-jaxprs-fusions")
def test_optimized_hlo_fuses_the_equations_into_fewer_loops():
    for shape in (
        (8, 4),
        (400, 100),
        (1, 2048),
        (4000, 1000),
    ):  # the page's, and others
        x = jnp.ones(shape)
        compiled = jax.jit(why_compile.standardize_softplus).lower(x).compile()
        rows = programs.compiled_instructions(compiled)
        fusions = [r for r in rows if r["opcode"] == "fusion"]
        equations = programs.stats(
            why_compile.standardize_softplus, x, lower=False
        ).equations
        assert 1 <= len(fusions) < equations, shape
        big = [r for r in fusions if r["type"] == f"f32[{shape[0]},{shape[1]}]"]
        assert 1 <= len(big) < equations, (
            shape
        )  # fewer full-size arrays written than op by op, but not none
        assert all("{" not in r["type"] for r in rows)


@pytest.mark.claim("sec-jaxprs-xla", "clm-jaxprs-reduce-window-guard")
def test_reduce_window_in_the_sum_comes_from_the_guard_flag():
    script = (
        "import jax, jax.numpy as jnp\n"
        "x = jnp.ones((400, 100))\n"
        "f = lambda v: jnp.sum(v, axis=1)\n"
        "print('reduce-window' in jax.jit(f).lower(x).compile().as_text())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    default = fresh.python_output(script, env)
    assert default.strip() == "False"
    guarded = (
        jax.jit(lambda v: jnp.sum(v, axis=1))
        .lower(jnp.ones((400, 100)))
        .compile()
        .as_text()
    )
    assert "reduce-window" in guarded


@pytest.mark.claim("sec-jaxprs-nested", "clm-jaxprs-nested-equation")
def test_a_nested_jit_is_one_equation_unless_it_is_inlined_early():
    j = jax.make_jaxpr(jaxprs.outer)(jnp.ones(3))
    assert [e.primitive.name for e in j.eqns] == ["jit", "add"]
    assert j.eqns[0].params["name"] == "inner"
    assert programs.stats(jaxprs.outer, jnp.ones(3), lower=False).all_equations == 4
    # jitted with inline=JAX_EARLY, the body's equations land in the caller's jaxpr
    early = jax.make_jaxpr(jaxprs.outer_early)(jnp.ones(3))
    assert [e.primitive.name for e in early.eqns] == ["sin", "mul", "add"]
    assert jaxprs.inner_early(jnp.ones(3)).shape == (3,)  # still a jitted function
    # as JAX defines jnp.einsum and others: no jit equation of their own in a caller's jaxpr
    a = jnp.ones((2, 3))
    for fn, primitive in (
        (lambda a: jnp.einsum("ij,kj->ik", a, a), "dot_general"),
        (jnp.ravel, "reshape"),
        (lambda a: jnp.moveaxis(a, 0, 1), "transpose"),
    ):
        names = [e.primitive.name for e in jax.make_jaxpr(fn)(a).eqns]
        assert primitive in names and not {"jit", "pjit"} & set(names), names


@pytest.mark.claim("sec-jaxprs-eval-shape", "clm-jaxprs-eval-shape")
def test_eval_shape_compiles_nothing():
    huge = jax.ShapeDtypeStruct((100_000, 10_000), jnp.float32)
    with count_compiles() as log:
        out = jax.eval_shape(why_compile.standardize_softplus, huge)
    assert (out.shape, out.dtype, log.count) == ((100_000, 10_000), jnp.float32, 0)


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-no-tracing")
def test_no_tracing_lets_cached_calls_run_and_refuses_a_new_trace():
    def guarded(x):
        return x * 2.0

    jitted = jax.jit(guarded)
    a, shorter = jnp.ones(4), jnp.ones(3)
    jitted(a)
    with jax.no_tracing(True):
        assert errors.raised(jitted, a) is None
        err = errors.raised(jitted, shorter)
    assert isinstance(err, RuntimeError) and "no_tracing" in str(err)
    assert "/" not in errors.error_line(err)


@pytest.mark.claim("sec-jaxprs-stages", "clm-jaxprs-integer-pow")
def test_one_primitive_can_lower_to_several_stablehlo_operations():
    cube = lambda v: v**3  # noqa: E731
    x = jnp.ones(3)
    assert [e.primitive.name for e in jax.make_jaxpr(cube)(x).eqns] == ["integer_pow"]
    assert jax.jit(cube).lower(x).as_text().count("stablehlo.multiply") == 2


# ---------------------------------------------------------------- StableHLO as a module, the output fusion, no_tracing, jax.extend


@pytest.mark.claim("sec-jaxprs-stages", "clm-jaxprs-module-in-memory")
def test_lowering_gives_an_mlir_module_and_as_text_prints_it():
    lowered = jax.jit(jnp.sin).lower(jnp.ones(3))
    module = lowered.compiler_ir("stablehlo")
    assert type(module).__name__ == "Module"
    assert str(module) == lowered.as_text()
    # what XLA is handed: the module object (jax/_src/compiler.py), not its text
    import inspect

    from jax._src import compiler

    params = inspect.signature(compiler.backend_compile_and_load).parameters
    assert "module" in params and "Module" in str(params["module"].annotation)


@pytest.mark.claim("sec-jaxprs-xla", "clm-jaxprs-output-fusion")
def test_one_full_size_fusion_is_the_output():
    for shape in ((8, 4), (400, 100), (4000, 1000)):  # the page's, and others
        x = jnp.ones(shape)
        compiled = jax.jit(why_compile.standardize_softplus).lower(x).compile()
        rows = programs.compiled_instructions(compiled)
        outputs = [r for r in rows if r["output"]]
        full = f"f32[{shape[0]},{shape[1]}]"
        assert len(outputs) == 1 and outputs[0]["type"] == full, shape
        assert outputs[0]["opcode"] == "fusion"
        kept = [r for r in rows if r["opcode"] == "fusion" and r["type"] == full]
        assert len(kept) - 1 >= 1, shape  # a full-size intermediate besides the output


@pytest.mark.claim("sec-jaxprs-shapes", "clm-jaxprs-no-tracing-refuses")
def test_no_tracing_refuses_warm_calls_that_do_not_trace():
    """jax-ml/jax#39289: the check sits where a call leaves the C++ dispatch cache."""
    rows = {r["call"]: r for r in jaxprs.no_tracing_rows()}
    assert rows["the same array, warm"]["under no_tracing"] == "ran"
    committed = rows["a committed array (compiles, no trace)"]
    assert (committed["body runs"], committed["compiles"]) == (0, 1)
    for label in (
        "a committed array (compiles, no trace)",
        "warm, holds jax.debug.print",
        "warm, holds jax.debug.callback",
    ):
        assert rows[label]["body runs"] == 0
        assert rows[label]["under no_tracing"].startswith("RuntimeError: re-tracing")


@pytest.mark.claim("sec-jaxprs", "clm-jaxprs-one-class")
def test_import_jax_does_not_load_jax_extend():
    script = "import jax\nprint(hasattr(jax, 'extend'))\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = fresh.python_output(script, env)
    assert out.strip() == "False"


@pytest.mark.claim("sec-jaxprs-reading", "clm-jaxprs-implicit-broadcast")
def test_a_scalar_broadcast_is_implicit_in_the_jaxpr_and_explicit_in_stablehlo():
    x = jnp.ones(4)
    eqns = jax.make_jaxpr(jaxprs.update)(x).eqns
    mul = next(e for e in eqns if e.primitive.name == "mul")
    assert [str(v.aval.shape) for v in mul.invars] == ["(4,)", "()"]
    assert "broadcast_in_dim" not in [e.primitive.name for e in eqns]
    assert "stablehlo.broadcast_in_dim" in jax.jit(jaxprs.update).lower(x).as_text()


@pytest.mark.claim("sec-jaxprs-constants", "clm-jaxprs-scalar-literal")
def test_scalars_become_literals_except_a_0d_jax_array(measured):
    becomes = {r["captured"]: r["becomes"] for r in jaxprs.captured_scalars()}
    assert list(becomes.values()) == [
        "literal",
        "literal",
        "literal",
        "constvar",
        "constvar",
    ]
    three = jnp.float32(3.0)  # made outside the trace, captured by it
    closed = jax.make_jaxpr(lambda v: v * three)(jnp.ones(3))
    avals = [v.aval for v in closed.jaxpr.constvars]
    assert [(a.shape, a.dtype) for a in avals] == [((), jnp.float32)]
    measured("constvars a captured 0-d jax.Array makes", len(avals))


@pytest.mark.claim("sec-jaxprs-nested", "clm-jaxprs-nested-inlined")
def test_xla_inlines_the_nested_jit():
    lowered = jax.jit(jaxprs.outer).lower(jnp.ones(3))
    assert "func.func private @inner" in lowered.as_text()
    assert "call @inner" in lowered.as_text()
    rows = programs.compiled_instructions(lowered.compile())
    assert "call" not in [r["opcode"] for r in rows]
    assert [r["opcode"] for r in rows].count("fusion") == 1
    text = lowered.compile().as_text()
    assert "jit(outer)/jit(inner)/sin" in text and "jit(outer)/add" in text


@pytest.mark.claim("sec-jaxprs-shapes", "clm-jaxprs-no-tracing-two-points")
def test_no_tracing_refuses_a_trace_start_and_a_dispatch_miss_without_a_trace():
    from jitbook.chapters import recompilation_wrappers

    def doubled(v):
        return v * 2.0

    x = jnp.ones(3)
    with jax.no_tracing(True), pytest.raises(RuntimeError, match="re-tracing"):
        jax.make_jaxpr(doubled)(x)  # no jit, no dispatch cache: a trace starts
    noted = jax.jit(recompilation_wrappers.plus_one_noted)
    noted(0)  # warm: its calls miss the dispatch cache but never trace again
    with count_compiles() as log:
        noted(0)
    assert log.trace_events == []
    with jax.no_tracing(True), pytest.raises(RuntimeError):
        noted(0)
