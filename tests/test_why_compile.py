"""The first chapter's claims about JAX, and its exercises' wrong answers."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import count_compiles, programs
from jitbook.chapters import why_compile
from jitbook.exercises import check


@pytest.mark.claim("sec-why-compile", "clm-why-compile-op-by-op")
def test_op_by_op_each_jnp_function_is_a_cached_program_that_writes_its_result():
    """Each jnp call runs as a program of its own, compiled for a new shape and cached, and
    hands back a whole array in a buffer of its own (no tracer, no fusion with the next)."""
    from unittest import mock

    names = ("abs", "exp", "log1p", "maximum", "mean", "sqrt")
    originals = {name: getattr(jnp, name) for name in names}
    results = []

    def spy(name):
        def called(*args, **kwargs):
            out = originals[name](*args, **kwargs)
            results.append((name, out))
            return out

        return called

    x = jnp.ones((7, 43))  # a shape no other test uses
    with mock.patch.multiple(jnp, **{n: spy(n) for n in names}):
        with count_compiles() as first:
            why_compile.standardize_softplus(x)
    with count_compiles() as again:
        why_compile.standardize_softplus(x)
    assert {"abs", "exp", "log1p", "maximum", "_mean", "sqrt"} <= set(first.compiles)
    assert again.compiles == []  # cached per shape and dtype
    with count_compiles() as other_dtype:
        why_compile.standardize_softplus(x.astype(jnp.bfloat16))
    assert {"exp", "_mean"} <= set(other_dtype.compiles)
    assert [n for n, _ in results] == [
        "abs",
        "exp",
        "log1p",
        "maximum",
        "mean",
        "mean",
        "sqrt",
    ]
    for name, out in results:  # a concrete array with a buffer, as large as its result
        assert isinstance(out, jax.Array) and not isinstance(out, jax.core.Tracer), name
        assert out.unsafe_buffer_pointer() and out.nbytes == out.size * out.itemsize
    assert results[0][1].shape == x.shape  # full size, written before the next call


def test_jit_gives_the_op_by_op_result():
    x = jax.random.normal(jax.random.key(0), (50, 20))
    y = why_compile.standardize_softplus(x)
    np.testing.assert_allclose(
        jax.jit(why_compile.standardize_softplus)(x), y, atol=1e-5
    )
    x64 = np.asarray(x, dtype=np.float64)  # independent reference
    sp = np.log1p(np.exp(x64))
    ref = (sp - sp.mean(1, keepdims=True)) / np.sqrt(sp.var(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, ref, atol=1e-4)


@pytest.mark.claim("sec-why-compile-async", "clm-why-compile-async")
def test_dispatch_returns_before_the_result_is_ready_unless_xla_runs_it_inline():
    """Real work is queued (a product, a random fill); on the CPU, a program XLA's cost
    analysis counts under 1,000 flops runs inline and is ready when the call returns, and
    a sin of a million numbers, 0 flops counted, too, though it is real work."""
    matrix = why_compile.square(1500)
    assert matrix.is_ready()  # square waited for its fill
    for n in (1500, 3000):  # the test's size and the page's
        assert not jax.random.normal(jax.random.key(1), (n, n)).is_ready()
    product = why_compile.heavy_matmul(matrix)
    assert not product.is_ready()
    product.block_until_ready()
    assert product.is_ready()
    heavy = why_compile.ready_when_returned(why_compile.heavy_matmul, matrix)
    assert heavy["flops counted"] >= 1000 and not heavy["ready when the call returned"]
    dispatch, blocked = why_compile.dispatch_and_compute(matrix)
    assert dispatch < blocked / 5  # queueing is a small part of the blocked time
    if jax.default_backend() != "cpu":
        return
    for _ in range(10):  # the threshold's side that is certain: always inline
        below = why_compile.ready_when_returned(why_compile.tiny, jnp.ones(999))
        assert below == {
            **below,
            "flops counted": 999,
            "ready when the call returned": True,
        }
    sine = why_compile.ready_when_returned(jnp.sin, jnp.ones(1_000_000))
    assert sine["flops counted"] == 0 and sine["ready when the call returned"]
    # real work: the call returned only when its result was done, later than the queued
    # product's call returned
    assert sine["call returned after (ms)"] > heavy["call returned after (ms)"]


@pytest.mark.claim("sec-why-compile", "clm-why-compile-is-ready")
def test_block_until_ready_waits_for_every_array_in_a_tree():
    a = why_compile.square(1500)
    tree = (why_compile.heavy_matmul(a), {"b": why_compile.heavy_matmul(a)})
    assert not all(leaf.is_ready() for leaf in jax.tree_util.tree_leaves(tree))
    waited = jax.block_until_ready(tree)
    assert waited is tree
    assert all(leaf.is_ready() for leaf in jax.tree_util.tree_leaves(tree))


@pytest.mark.claim("sec-why-compile-again", "clm-why-compile-new-wrapper")
def test_the_cache_key_holds_the_function_so_a_new_wrapper_finds_it(measured):
    def local(x):
        return x * 5.0

    x = jnp.ones(6)
    with count_compiles() as first:
        jax.jit(local)(x)
    with count_compiles() as second:
        jax.jit(local)(x)
    assert (first.count_for("local"), second.count_for("local")) == (1, 0)
    assert why_compile.new_wrapper_compiles(local, x) == 0
    measured(
        "programs a second, new jax.jit(local) compiled", second.count_for("local")
    )


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-second-call-hits")
def test_a_wrapper_called_again_with_the_same_shape_compiles_nothing(measured):
    jitted = jax.jit(lambda v: v * 7.0)
    ones, zeros = jnp.ones(9), jnp.zeros(9)  # other values, same shape and dtype
    noise = jax.random.normal(jax.random.key(0), (9,))
    numpy = np.arange(9, dtype=np.float32)  # a NumPy array of that shape and dtype
    with count_compiles() as first:
        jitted(ones)
    with count_compiles() as second:
        for other in (zeros, noise, numpy):
            jitted(other)
    assert (first.count, second.count) == (1, 0)
    # the exceptions the sentence names: a weak type, a placement
    scalar = jax.jit(lambda v: v * 7.0)
    scalar(1.0)
    with count_compiles() as strong:
        scalar(jnp.float32(1.0))  # f32[] as 1.0 is, but strongly typed
    with count_compiles() as placed:
        jitted(jax.device_put(ones, jax.devices()[0]))  # committed to a device
    assert (strong.count, placed.count) == (1, 1)
    measured(
        "programs compiled by the first call, then the second",
        f"{first.count}, then {second.count}",
    )


def test_op_by_op_programs_runs_cold_and_leaves_this_process_warm():
    jitted, x = jax.jit(lambda v: v - 3.0), jnp.ones(4)
    jitted(x)
    jax.block_until_ready(
        why_compile.tiny(x)
    )  # warm here: a fresh process compiles it all the same
    assert why_compile.op_by_op_programs(why_compile.tiny, x)
    with count_compiles() as log:
        jitted(x)
    assert log.count == 0  # the caller's programs are still there


@pytest.mark.chapter
def test_the_executed_page_reads_zero_compiles_for_a_new_wrapper(executed):
    """The page's sentence says a new wrapper finds the executable: its value must be
    0 in the executed page, not whatever an earlier cell left in the caches."""
    from jitbook.site import harness

    (page,) = [p for p in harness.chapter_files() if p.stem == "why-compile"]
    cells = [c for c in executed(page).cells if c.cell_type == "code"]
    (cell,) = [
        c for c in cells if "again = why_compile.new_wrapper_compiles" in c.source
    ]
    (result,) = [o for o in cell.outputs if o.get("output_type") == "execute_result"]
    assert result["data"]["text/plain"] == "0"


@pytest.mark.claim("sec-why-compile-again", "clm-why-compile-fast-path")
def test_a_new_wrapper_of_a_known_function_takes_the_fast_path_on_its_first_call():
    """jit's C++ dispatch cache is global: a new jax.jit(f) of a compiled f never runs
    the Python path (pjit._infer_params); a new function does."""
    from unittest import mock

    from jax._src import pjit

    x = jnp.ones(3)
    jax.jit(why_compile.tiny)(x)
    calls = []
    original = pjit._infer_params

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    donated = {"donate_argnums": 0}
    jax.jit(why_compile.tiny, **donated)(jnp.ones(3))
    with mock.patch.object(pjit, "_infer_params", spy):
        for _ in range(20):
            jax.jit(why_compile.tiny)(x)
            jax.jit(why_compile.tiny, **donated)(jnp.ones(3))  # the same options: known
        assert calls == []
        jax.jit(lambda v: v * 2.0)(x)
        assert calls
        # its options are in the key: a first call with others takes the Python path
        options = {"compiler_options": {"xla_cpu_enable_fast_math": False}}
        before = len(calls)
        jax.jit(why_compile.tiny, **options)(x)
        assert len(calls) > before
        before = len(calls)
        jax.jit(why_compile.tiny, **options)(x)
        assert len(calls) == before


def test_wrapper_per_call_races_both_ways():
    race = why_compile.wrapper_per_call(why_compile.tiny, jnp.ones(3), min_time=0.0)
    assert race.names == ["one jax.jit, called again", "a new jax.jit at every call"]
    assert race.rounds >= 5 and "slow" not in why_compile.wrapper_per_call.__doc__
    assert "building" in why_compile.wrapper_per_call.__doc__


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-per-jnp-function")
def test_op_by_op_runs_one_program_per_jnp_function_not_per_primitive():
    names = why_compile.op_by_op_programs(
        why_compile.standardize_softplus, jnp.ones((2, 3))
    )
    s = programs.stats(why_compile.standardize_softplus, jnp.ones((2, 3)), lower=False)
    assert names.count("_mean") == 1 and "reduce_sum" not in names  # one program, twice
    assert len(names) < s.equations
    x = jnp.zeros((3, 17))
    with count_compiles() as log:
        x + 1.0
    assert log.compiles == ["add"]  # its convert and broadcast are inside it
    # "almost": a jnp function JAX does not jit runs primitive by primitive
    eye = why_compile.op_by_op_programs(jnp.eye, 4)
    assert "eye" not in eye and len(eye) > 2
    # beyond this function: the jnp functions a reader computes with are one program each
    a, b = jnp.ones((5, 39)), jnp.full((5, 39), 2.0)
    above, m = a > 0, jnp.ones((39, 5))
    calls = [
        lambda: jnp.exp(a), lambda: jnp.sin(a), lambda: jnp.tanh(a),
        lambda: jnp.log1p(a), lambda: jnp.abs(a), lambda: jnp.sqrt(a),
        lambda: jnp.maximum(a, b), lambda: a + b, lambda: a * b, lambda: a / b,
        lambda: jnp.mean(a, axis=1), lambda: jnp.sum(a), lambda: jnp.max(a),
        lambda: jnp.where(above, a, b), lambda: a @ m, lambda: a.T,
        lambda: jnp.clip(a, 0, 1), lambda: jnp.cumsum(a), lambda: jnp.sort(a),
        lambda: jnp.argmax(a),
    ]  # fmt: skip
    programs_per_call = []
    for call in calls:
        with count_compiles() as log:
            call()
        programs_per_call.append(log.count)
    assert programs_per_call == [1] * len(calls)


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-mean-once")
def test_jnp_mean_is_one_program_that_runs_twice_and_compiles_once():
    from unittest import mock

    from jax._src.numpy import reductions

    calls = []
    original = reductions._mean

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    x = jnp.ones((2, 5))
    with mock.patch.object(reductions, "_mean", spy):
        why_compile.standardize_softplus(x)
    assert len(calls) == 2  # the mean and the variance
    names = why_compile.op_by_op_programs(why_compile.standardize_softplus, x)
    assert names.count("_mean") == 1
    jaxpr = jax.make_jaxpr(jnp.mean)(x).jaxpr
    assert {e.primitive.name for e in jaxpr.eqns} >= {"reduce_sum", "div"}


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-divisor-argument")
def test_op_by_op_division_gets_the_divisor_as_an_argument():
    x = jnp.float32(why_compile.HUGE)
    assert why_compile.op_by_op_programs(why_compile.divide_by_huge, x) == [
        "true_divide"
    ]
    compiled = jnp.true_divide.lower(x, why_compile.HUGE).compile()
    opcodes = [r["opcode"] for r in programs.compiled_instructions(compiled)]
    assert opcodes.count("parameter") == 2 and "constant" not in opcodes
    assert "divide" in compiled.as_text() and "multiply" not in compiled.as_text()


def test_headline_races_op_by_op_against_jit():
    race = why_compile.headline(jnp.ones((8, 4)), min_time=0.0)
    assert race.names == ["op by op", "jax.jit"] and race.rounds >= 5
    assert race.verdict(
        "jax.jit", "op by op"
    ).phrase  # some verdict, whatever the machine


def test_headline_command_prints_the_rounds(capsys):
    why_compile.main(["headline", "--rows", "8", "--cols", "4", "--min-time", "0"])
    import json

    rounds = json.loads(capsys.readouterr().out)
    assert set(rounds) == {"op by op", "jax.jit"} and len(rounds["jax.jit"]) >= 5


def test_size_sweep_says_never_or_no_clear_saving_without_a_verdict():
    (row,) = why_compile.size_sweep([4], columns=8, min_time=0.0)
    assert row["compiled was"].endswith("op by op")
    if "about the same" in row["compiled was"]:
        assert row["calls to pay off"] == "no clear saving"
    with pytest.raises(ValueError, match="rows must be a non-empty list"):
        why_compile.size_sweep([])


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-eager-compiles")
def test_eager_mode_compiles_each_primitive_once_per_shape():
    x = jnp.zeros((3, 11))
    with count_compiles() as first:
        x + 1.0
    with count_compiles() as again:
        x + 1.0
    assert first.compiles == ["add"] and again.compiles == []
    hlo = jax.jit(jnp.add).lower(x, 1.0).as_text()
    assert (
        "broadcast" in hlo and "convert" in hlo
    )  # 1.0's conversion and broadcast inside


@pytest.mark.claim("sec-why-compile-tiny", "clm-why-compile-both-first-calls-compile")
def test_cold_and_warm_compare_first_calls_and_later_calls():
    rows, later = why_compile.cold_and_warm(
        why_compile.tiny, jnp.zeros(13), min_time=0.0
    )
    assert [r["way"] for r in rows] == ["op by op", "jax.jit"] == later.names
    assert [r["compiles in first call"] for r in rows] == [1, 1]
    new_shape = jnp.zeros(14)
    with count_compiles() as log:
        why_compile.tiny(new_shape)
    assert log.compiles == ["add"]
    assert all(r["later calls, min (ms)"] == 1e3 * later.min(r["way"]) for r in rows)


def test_standardize_softplus_op_count_is_computed():
    s = programs.stats(why_compile.standardize_softplus, jnp.ones((2, 3)), lower=False)
    assert (
        s.primitives["reduce_sum"] == 2 and s.equations > 9
    )  # the old docstring's "nine ops" was short
    assert "nine" not in (why_compile.standardize_softplus.__doc__ or "")


def test_compiled_instructions_refuses_text():
    # the fusions themselves are asserted once, in test_jaxprs (the home of the optimized HLO)
    with pytest.raises(TypeError, match="compiled function"):
        programs.compiled_instructions("HloModule")


def test_break_even_calls():
    assert why_compile.break_even_calls(1.0, 0.3, 0.1) == pytest.approx(5.0)
    assert why_compile.break_even_calls(1.0, 0.1, 0.3) == math.inf
    with pytest.raises(ValueError, match="compile_s must be a non-negative number"):
        why_compile.break_even_calls(-1.0, 0.1, 0.3)


def test_ready_wrong_answer_that_does_not_wait():
    report = check("why-compile.ready", lambda fn, *args: fn(*args))
    assert not report.passed


def test_fuse_wrong_answers():
    by_columns = lambda x: why_compile.standardize_softplus(x.T).T  # noqa: E731
    assert (
        "not a function made by jax.jit"
        in check("why-compile.fuse", by_columns).message
    )
    assert (
        "applied to the columns"
        in check("why-compile.fuse", jax.jit(why_compile.standardize_softplus)).message
    )
    # A new jitted lambda built on every call is not one program: it does not export.
    assert (
        "not a function made by jax.jit"
        in check("why-compile.fuse", _RejitEachCall()).message
    )


def test_fuse_wants_one_program_not_an_eager_transpose_around_one_jit():
    rows = jax.jit(why_compile.standardize_softplus)

    def around(x):  # transposes op by op, the jitted part reused
        return rows(x.T).T

    around.lower = rows.lower  # borrowing .lower does not make a jitted function
    report = check("why-compile.fuse", around)
    assert not report.passed and "not a function made by jax.jit" in report.message


class _RejitEachCall:
    """A plausible wrong answer: builds a new jitted lambda on every call, so every call compiles."""

    lower = None

    def __call__(self, x):
        return jax.jit(lambda v: why_compile.standardize_softplus(v.T).T)(x)


def test_break_even_wrong_answers():
    no_ceil = check(
        "why-compile.break-even", lambda c, e, j: c / (e - j) if e > j else math.inf
    )
    assert not no_ceil.passed
    no_inf = check(
        "why-compile.break-even", lambda c, e, j: math.ceil(c / (e - j)) if e > j else 0
    )
    assert "never pays: return math.inf" in no_inf.message


@pytest.mark.claim("sec-why-compile-two-ways", "clm-why-compile-reciprocal")
def test_jit_can_change_a_result_by_more_than_rounding():
    x = jnp.float32(why_compile.HUGE)
    assert float(why_compile.divide_by_huge(x)) == 1.0
    assert float(jax.jit(why_compile.divide_by_huge)(x)) != pytest.approx(
        1.0
    )  # a rewrite, not rounding
    compiled = jax.jit(why_compile.divide_by_huge).lower(x).compile()
    assert [r["instruction"] for r in programs.compiled_instructions(compiled)][
        -1
    ].endswith("multiply")
