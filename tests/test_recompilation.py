"""The claims about JAX of the recompilation and cache-key chapters, their helpers' input checks, and the recompilation exercises' wrong answers."""

import functools
import os
import re
import tempfile
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import cache, count_compiles
from jitbook.chapters import (
    recompilation,
    recompilation_explore,
    recompilation_processes,
    recompilation_wrappers,
)

# --- static arguments ------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation", "clm-recompilation-static-values")
def test_each_new_static_value_compiles_and_2_point_0_is_not_2(measured):
    rows = recompilation.static_sweep([2, 3, 2, 2.0])
    assert [r["compiled"] for r in rows] == [1, 1, 0, 1]
    compiled = ", ".join(str(r["compiled"]) for r in rows)
    measured("programs compiled by static 2, 3, 2, 2.0", compiled)
    assert [r["result dtype"] for r in rows] == [
        "float32"
    ] * 4  # the same result type, yet a second program


@pytest.mark.claim("sec-recompilation", "clm-rec-static-type")
def test_static_values_are_compared_with_their_type():
    """2 and 2.0 are equal in Python; jit still keeps two entries (a same-typed equal value shares one)."""
    jitted = cache.fresh_jit(recompilation.power, static_argnums=1)
    x = jnp.ones(3)
    with count_compiles() as log:
        jitted(x, 2), jitted(x, 2.0), jitted(x, 2.0)
    assert log.count_for("power") == 2


@pytest.mark.claim("sec-recompilation", "clm-recompilation-call-and-decorator-forms")
def test_call_form_and_decorator_form_compile_once_per_static_value():
    @functools.partial(jax.jit, static_argnames="n")
    def power_by_name(x, n):
        return x**n

    by_position = jax.jit(recompilation.power, static_argnums=1)
    x = jnp.arange(3.0)
    with count_compiles() as log:
        (
            by_position(x, 3),
            by_position(x, 3),
            power_by_name(x, n=3),
            power_by_name(x, n=3),
        )
    assert (log.count_for("power"), log.count_for("power_by_name")) == (1, 1)
    np.testing.assert_allclose(by_position(x, 3), np.arange(3.0) ** 3)


@pytest.mark.claim("sec-recompilation", "clm-rec-int-float-programs")
def test_int_and_float_exponents_trace_to_different_programs():
    x = jnp.ones(3)
    assert "integer_pow" in str(
        jax.make_jaxpr(recompilation.power, static_argnums=1)(x, 2)
    )
    float_jaxpr = str(jax.make_jaxpr(recompilation.power, static_argnums=1)(x, 2.0))
    assert "integer_pow" not in float_jaxpr and "pow" in float_jaxpr


@pytest.mark.claim("sec-recompilation", "clm-rec-static-hashable")
def test_an_array_is_not_a_valid_static_argument():
    err = recompilation.static_error(jnp.array(2))
    assert isinstance(err, ValueError)
    assert str(err).startswith("Non-hashable static arguments are not supported")
    assert "unhashable type" in str(err)


def test_static_error_refuses_a_hashable_value():
    with pytest.raises(ValueError, match="was accepted as a static argument"):
        recompilation.static_error(2)


def test_static_sweep_needs_a_list():
    with pytest.raises(ValueError, match="non-empty list of exponents"):
        recompilation.static_sweep(2)


# --- the cache key ---------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation-key", "clm-rec-values-not-key")
def test_shape_dtype_and_weak_type_are_in_the_key_values_are_not():
    rows = {
        r["argument"]: r
        for r in cache.probe(recompilation.add_one, recompilation.argument_cases())
    }
    compiled = {k: r["compiled"] for k, r in rows.items()}
    assert compiled == {
        "1.0 (Python float)": 1,
        "2.0 (another Python float)": 0,
        "jnp.float32(1.0)": 1,
        "np.float32(3.0)": 0,
        "jnp.array(1.0)": 0,
        "1 (Python int)": 1,
        "jnp.ones(3)": 1,
        "jnp.zeros(3)": 0,
        "jnp.ones(4)": 1,
        "jnp.ones(3, dtype=jnp.int32)": 1,
    }
    assert (
        rows["jnp.array(1.0)"]["weak type"]
        and not rows["jnp.float32(1.0)"]["weak type"]
    )


@pytest.mark.claim("sec-recompilation-key", "clm-rec-equal-callables-share")
def test_equal_callables_share_a_program_identity_ones_and_partials_do_not():
    rows = {r["callables"]: r for r in recompilation.identity_rows()}
    assert rows["the same function twice"]["second compiled"] == 0
    assert rows["the same function twice"]["second: trace events"] == 0
    equal = rows["two equal ScaleBy(2.0) objects"]
    # a trace event (the tracing cache was asked) but no body run: equality found the jaxpr
    assert (
        equal["second: trace events"],
        equal["second: body runs"],
        equal["second compiled"],
    ) == (1, 0, 0)
    for label in (
        "two ScaleByIdentity(2.0) objects",
        "functools.partial(add_one), twice",
    ):
        row = rows[label]
        assert (
            row["second: trace events"],
            row["second: body runs"],
            row["second compiled"],
        ) == (1, 1, 1)


@pytest.mark.claim("sec-recompilation-key", "clm-rec-config-back")
@pytest.mark.parametrize(
    "name, value, recompiles",
    [
        ("jax_enable_x64", True, True),
        ("jax_default_matmul_precision", "highest", True),
        ("jax_numpy_rank_promotion", "raise", True),
        ("jax_debug_nans", True, False),
        ("jax_log_compiles", True, False),
    ],
)
def test_which_config_options_recompile_and_they_are_restored(name, value, recompiles):
    before = jax.config.values[name]
    row = recompilation.config_compiles(name, value)
    assert row["compiles when set"] == int(recompiles)
    assert row["compiles when set back"] == 0
    assert jax.config.values[name] == before


@pytest.mark.claim(
    "sec-recompilation-key", "clm-recompilation-config-options-recompile"
)
def test_matmul_precision_context_manager_also_recompiles():
    f = cache.fresh_jit(recompilation.matmul)
    a = jnp.ones((4, 4))
    f(a, a)
    with count_compiles() as log:
        with jax.default_matmul_precision("highest"):
            f(a, a)
    assert log.count_for("matmul") == 1


def test_config_compiles_rejects_unknown_options():
    with pytest.raises(ValueError, match="not a JAX config option"):
        recompilation.config_compiles("jax_no_such_option", True)


# --- traps -----------------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation-loop", "clm-rec-loop-tutorial")
def test_partial_and_lambda_jitted_in_a_loop_compile_every_step():
    counts = {
        how: recompilation.jit_in_a_loop(how, 4)
        for how in (
            "jax.jit(partial(plus_one))",
            "jax.jit(lambda i: plus_one(i))",
            "jax.jit(plus_one)",
        )
    }
    assert [r["compiles"] for r in counts.values()] == [4, 4, 1]
    assert all(r["result"] == 4 for r in counts.values())
    with pytest.raises(ValueError, match="how must be one of"):
        recompilation.jit_in_a_loop("jax.jit(f)")


@pytest.mark.claim("sec-recompilation", "clm-rec-cell-rerun")
def test_rerunning_a_cell_compiles_again_and_an_old_wrapper_keeps_the_old_code():
    cell = "def scale(x):\n    return 2.0 * x\n"
    x = jnp.ones(3)
    with count_compiles() as log:
        for _ in range(3):
            jax.jit(cache.run_cell(cell, "scale"))(x)
    assert log.count_for("scale") == 3
    old = jax.jit(cache.run_cell(cell, "scale"))
    new = cache.run_cell("def scale(x):\n    return 3.0 * x\n", "scale")
    assert (float(old(1.0)), float(new(1.0))) == (2.0, 3.0)
    with pytest.raises(ValueError, match="does not define 'shift'"):
        cache.run_cell(cell, "shift")


# --- what the logs say -----------------------------------------------------------------------------------


@pytest.mark.claim(
    "sec-recompilation-diagnose", "clm-recompilation-explain-closest-key"
)
def test_explanations_name_shapes_weak_types_config_and_redefinitions():
    shape = cache.explain_miss(recompilation.add_one, (jnp.ones(3),), (jnp.ones(4),))
    assert (
        "now f32[4] and before f32[3]" in shape
        and "Finished XLA compilation of jit(add_one)" in shape
    )
    weak = cache.explain_miss(recompilation.add_one, (1.0,), (jnp.float32(1.0),))
    assert "weak_type=False" in weak and "weak_type=True" in weak
    x64 = cache.explain_miss(
        recompilation.matmul,
        (jnp.ones(2),) * 2,
        (jnp.ones(2),) * 2,
        config={"jax_enable_x64": True},
    )
    assert "jax_enable_x64 differs: now True and before False" in x64
    assert jax.config.jax_enable_x64 is False
    from jitbook.chapters.symptoms_producers import loop_story

    text = cache.messages_about(loop_story(), "<lambda>")  # in a fresh process
    assert "never seen function" in text and "defined on the same line" in text
    # compared with the closest key, not the one the call changed: n changed, x is blamed
    blame = recompilation_explore.closest_key_blame()
    assert "at x, now f32[8] and before f32[9]" in blame


@pytest.mark.claim("sec-recompilation-diagnose", "clm-rec-static-unexplained")
def test_a_new_static_value_is_not_explained():
    story = cache.explain_miss(
        recompilation.power, (jnp.ones(2), 2), (jnp.ones(2), 3), static_argnums=1
    )
    assert (
        "TRACING CACHE MISS" in story and "cache miss explanation unavailable" in story
    )


def test_about_keeps_only_the_named_function():
    messages = [
        "Finished XLA compilation of jit(add_one) in 0.1 sec",
        "Finished XLA compilation of jit(broadcast_in_dim) in 0.1 sec",
    ]
    assert cache.messages_about(messages, "add_one") == messages[0]


# --- buckets ---------------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation", "clm-rec-buckets")
def test_buckets_compile_once_per_bucket_with_the_same_results():
    lengths = recompilation.stream_lengths(12, 100)
    plain = recompilation.run_stream(lengths, bucketed=False)
    bucketed = recompilation.run_stream(lengths, bucketed=True)
    assert plain.compiles == plain.shapes == len(set(lengths))
    assert (
        bucketed.compiles
        == bucketed.shapes
        == len({recompilation.next_bucket(n) for n in lengths})
    )
    assert bucketed.compiles < plain.compiles
    rng = np.random.default_rng(
        1
    )  # independent float64 reference, same data as run_stream
    ref = [
        np.mean(
            np.logaddexp(rng.normal(size=n).astype(np.float32).astype(np.float64), 0.0)
        )
        for n in lengths
    ]
    np.testing.assert_allclose(plain.results, ref, rtol=1e-5)
    np.testing.assert_allclose(bucketed.results, ref, rtol=1e-5)


def test_next_bucket():
    assert [recompilation.next_bucket(n) for n in (1, 16, 17, 100, 128, 129)] == [
        16,
        16,
        32,
        128,
        128,
        256,
    ]
    with pytest.raises(ValueError, match="positive whole number"):
        recompilation.next_bucket(0)
    with pytest.raises(ValueError, match="at least one length"):
        recompilation.run_stream([], bucketed=True)


# --- caches ----------------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation", "clm-rec-clear-caches")
def test_clear_caches_makes_the_next_call_compile():
    """For every function: a jitted one traces (its body runs) and compiles again, and so
    does another jitted function and an op-by-op jnp call; in this test's process."""
    f = jax.jit(recompilation.add_one)
    g = jax.jit(recompilation.matmul)
    x, m = jnp.ones(5), jnp.ones((2, 2))
    f(x), g(m, m), jnp.sin(x)
    with count_compiles() as log, cache.count_body_runs(recompilation.add_one) as runs:
        f(x), g(m, m), jnp.sin(x)
        jax.clear_caches()
        f(x), g(m, m), jnp.sin(x)
    assert (log.count_for("add_one"), runs.count) == (1, 1)
    assert log.count_for("matmul") == 1 and log.count_for("sin") == 1


@pytest.mark.claim("sec-recompilation-persistent", "clm-rec-disk-hit")
def test_a_second_process_loads_the_program_from_the_disk_cache_when_the_threshold_allows():
    zero = recompilation_processes.persistent_cache_runs(2, min_compile_seconds=0.0)
    assert (zero[0]["disk cache hits"], zero[1]["disk cache hits"]) == (0, 1)
    assert (
        zero[1]["compile events"] == 1
    )  # loading from disk is reported through the compile event too
    assert (zero[1]["body runs"], zero[1]["lowerings"]) == (
        1,
        1,
    )  # the disk cache saves the XLA compile only
    never = recompilation_processes.persistent_cache_runs(
        2, min_compile_seconds=1e6
    )  # nothing is quick enough to skip
    assert never[1]["disk cache hits"] == 0 and never[0]["files in cache dir"] == 0


@pytest.mark.claim(
    "sec-recompilation-persistent", "clm-recompilation-persistent-thresholds"
)
def test_default_write_threshold_is_one_second_and_both_thresholds_decide_what_is_written(
    tmp_path,
):
    assert jax.config.values["jax_persistent_cache_min_compile_time_secs"] == 1.0
    assert "jax_persistent_cache_min_entry_size_bytes" in jax.config.values
    # in fresh processes: quick compiles allowed, then only the entry size decides
    written = {
        size: _files_written(
            tmp_path / f"entry-{size}", min_seconds=0.0, min_bytes=size
        )
        for size in (0, 10**12)
    }
    assert written[0] > 0 and written[10**12] == 0, written
    assert _files_written(tmp_path / "default", min_seconds=None, min_bytes=0) == 0


_WRITE_CHILD = """
import os, sys
import jitbook, jax, jax.numpy as jnp
directory, seconds, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
jax.config.update("jax_compilation_cache_dir", directory)
if seconds != "default":
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(seconds))
jax.config.update("jax_persistent_cache_min_entry_size_bytes", size)
jax.block_until_ready(jax.jit(lambda x: jnp.tanh(x) * 2.0)(jnp.ones(8)))
print(len(os.listdir(directory)))
"""


def _files_written(directory, min_seconds: float | None, min_bytes: int) -> int:
    """Files a fresh process writes to a new cache ``directory`` for one quick program."""
    import subprocess
    import sys

    directory.mkdir()
    seconds = "default" if min_seconds is None else str(min_seconds)
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_CHILD, str(directory), seconds, str(min_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_cold_start_needs_an_existing_directory():
    with pytest.raises(ValueError, match="is not a directory"):
        recompilation_processes.cold_start(
            os.path.join(tempfile.gettempdir(), "jitbook-no-such-dir"), 0.0, 1
        )


# --- control flow ----------------------------------------------------------------------------------------


@pytest.mark.claim("sec-recompilation", "clm-recompilation-structured-control-flow")
def test_structured_control_flow_compiles_once_static_choices_once_per_value():
    rows = {r["tool"]: r["compiles"] for r in recompilation.control_flow_rows()}
    assert rows == {
        "lax.switch on a traced mode": 1,
        "Python if on a static mode": 3,
        "lax.while_loop with a traced tolerance": 1,
        "jnp.where with a traced threshold": 1,
        "static k (output shape depends on it)": 3,
    }
    x = jnp.linspace(-3.0, 3.0, 7)
    for mode in (0, 1, 2):
        np.testing.assert_allclose(
            recompilation.shrink(x, mode),
            recompilation.shrink_static(x, mode),
            rtol=1e-6,
        )
    assert float(recompilation.sqrt_newton(2.0, 1e-6)) == pytest.approx(
        np.sqrt(2.0), rel=1e-6
    )
    np.testing.assert_allclose(
        recompilation.soft_threshold(x, 1.0),
        np.sign(x) * np.maximum(np.abs(x) - 1.0, 0.0),
    )


@pytest.mark.claim("sec-recompilation", "clm-rec-traced-k")
def test_a_traced_slice_size_raises_index_error(measured):
    with pytest.raises(IndexError, match="static start/stop/step") as err:
        jax.jit(recompilation.first_k)(jnp.ones(4), 2)
    measured("a traced slice size raised", type(err.value).__name__)


def test_fresh_jit_needs_a_function():
    with pytest.raises(TypeError, match="takes a function"):
        cache.fresh_jit(3)


# --- the cache key: structure, calling convention, placement; which diagnostic sees which cache -------------


@pytest.mark.claim("sec-recompilation-key", "clm-rec-dict-order")
def test_pytree_structure_is_part_of_the_key_but_dict_insertion_order_is_not():
    rows = cache.probe(recompilation.total, recompilation.structure_cases())
    assert [r["compiled"] for r in rows] == [1, 0, 1, 1, 1]
    assert rows[1]["jit sees"] == rows[0]["jit sees"] == "{a: f32[3], b: f32[3]}"


@pytest.mark.claim("sec-recompilation-key", "clm-rec-keyword")
def test_positional_and_keyword_passing_are_two_keys():
    assert [r["compiled"] for r in recompilation.calling_rows()] == [1, 1, 1, 0]


@pytest.mark.claim("sec-recompilation-key", "clm-rec-committed")
def test_a_committed_array_compiles_again_without_tracing_and_is_not_explained():
    rows = {r["call"]: r for r in recompilation.cache_misses()}
    committed = rows["device_put(ones(3))"]
    assert (
        committed["trace events"],
        committed["body runs"],
        committed["lowered"],
        committed["compiled"],
    ) == (0, 0, 1, 1)
    assert committed["explained"] == 0 and committed["logged compiles"] == 1
    new_shape = rows["ones(4)"]
    assert (new_shape["body runs"], new_shape["compiled"], new_shape["explained"]) == (
        1,
        1,
        1,
    )
    assert rows["ones(3) again"]["compiled"] == 0


@pytest.mark.claim("sec-recompilation-key", "clm-rec-weak-types")
def test_weak_types_yield_within_a_kind_and_promote_across_kinds():
    assert (jnp.ones(3, jnp.float16) + 1.0).dtype == jnp.float16
    assert (jnp.ones(3, jnp.int32) * 2.0).dtype == jnp.float32
    for dtype in (jnp.bfloat16, jnp.float16, jnp.float32):  # a float yields to floats
        assert (jnp.ones(3, dtype) + 1.0).dtype == dtype
        assert jax.jit(lambda v: v + 1.0)(jnp.ones(3, dtype)).dtype == dtype
    for dtype in (jnp.int8, jnp.uint8, jnp.int16, jnp.int32):  # an int to ints
        assert (jnp.ones(3, dtype) + 1).dtype == dtype
    for dtype in (jnp.int8, jnp.uint8, jnp.int16):  # a float to an int: promotes
        assert jnp.issubdtype((jnp.ones(3, dtype) * 2.0).dtype, jnp.floating)
    assert (jnp.ones(3, jnp.bool_) + 1).dtype == jnp.int32  # bool to int: promotes


@pytest.mark.claim("sec-recompilation-persistent", "clm-rec-cache-dir-fixed")
def test_the_persistent_cache_directory_is_fixed_at_its_first_use():
    moved = recompilation_processes.moved_cache_dir()
    assert (
        moved["files in the first directory"] > 0
        and moved["files in the second directory"] == 0
    )


@pytest.mark.claim("sec-recompilation-persistent", "clm-rec-disk-key")
def test_the_persistent_cache_key_hashes_versions_flags_options_and_devices():
    import inspect

    from jax._src import (
        cache_key,  # private: the test fails if JAX changes what the key holds
    )

    source = inspect.getsource(cache_key.get)
    for part in (
        '"computation"',
        '"jax_lib version"',
        '"backend version"',
        '"XLA flags"',
        '"compile_options"',
        '"accelerator_config"',
    ):
        assert part in source


# --- the dispatch cache, static tuples, the docs' examples ---------------------------------------------


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-dispatch-global")
def test_a_new_wrapper_of_a_called_function_hits_the_dispatch_cache():
    """jit's C++ dispatch cache is global, keyed on the callable and jit's options."""
    rows = {r["calls"]: r for r in recompilation_wrappers.dispatch_rows(20)}
    first = rows["first call of jax.jit(plus_one)"]
    assert (first["dispatch-cache misses"], first["compiles"]) == (1, 1)
    fresh = rows["a new jax.jit(plus_one) per call"]
    assert (
        fresh["dispatch-cache misses"],
        fresh["trace events"],
        fresh["compiles"],
    ) == (0, 0, 0)
    assert rows["one reused wrapper"]["dispatch-cache misses"] == 0
    options = rows["a new jax.jit(plus_one, static_argnums=0)"]
    assert (options["dispatch-cache misses"], options["compiles"]) == (1, 1)
    equal = rows["a new jax.jit(ScaleBy(2.0))"]
    assert (
        equal["dispatch-cache misses"],
        equal["trace events"],
        equal["body runs"],
        equal["compiles"],
    ) == (20, 20, 1, 1)
    partials = rows["a new jax.jit(functools.partial(plus_one))"]
    assert (partials["dispatch-cache misses"], partials["compiles"]) == (20, 20)
    noted = rows["one reused wrapper of plus_one_noted (a debug callback)"]
    assert (
        noted["dispatch-cache misses"],
        noted["trace events"],
        noted["compiles"],
    ) == (20, 0, 0)


def test_donation_is_part_of_the_dispatch_key():
    def donated_double(v):
        return v * 2

    with cache.count_dispatch_misses() as log:
        for _ in range(5):
            jax.jit(donated_double, donate_argnums=0)(jnp.ones(3))
        jax.jit(donated_double)(jnp.ones(3))
    assert log.count_for("donated_double") == 2  # once per set of options


@pytest.mark.claim(
    "sec-recompilation-dispatch", "clm-recompilation-count-dispatch-misses"
)
def test_count_dispatch_misses_sees_a_new_function_and_restores_the_hook():
    from jax._src import pjit

    before = pjit._infer_params

    def brand_new(v):
        return v * 3

    with cache.count_dispatch_misses() as log:
        jax.jit(brand_new)(1.0)
        jax.jit(brand_new)(1.0)
    assert log.count_for("brand_new") == 1
    assert pjit._infer_params is before
    with pytest.raises(TypeError, match="function name as a string"):
        log.count_for(brand_new)


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-wrapper-cost")
def test_rejit_cost_compiles_nothing_and_takes_no_slow_path():
    cost = recompilation_wrappers.rejit_cost(20)
    assert (cost["compiles"], cost["slow-path calls"]) == (0, 0)
    assert cost["building jax.jit(plus_one) only (us)"] > 0
    race = recompilation_wrappers.wrapper_race(10, rounds=3)
    assert race.rounds == 3 and len(race.names) == 4
    with pytest.raises(ValueError, match="positive whole number"):
        recompilation_wrappers.wrapper_race(0)


@pytest.mark.claim("sec-recompilation-static", "clm-rec-static-tuple")
def test_static_tuples_compare_their_contents_without_types():
    rows = recompilation.static_tuple_rows()
    tuple_int, tuple_float, bare_int, bare_float = rows
    assert (tuple_int["compiled"], tuple_float["compiled"]) == (1, 0)
    assert (
        tuple_float["result dtype"] == "int32" and tuple_float["op by op"] == "float32"
    )
    assert (bare_int["compiled"], bare_float["compiled"]) == (1, 1)
    assert bare_float["result dtype"] == "float32"
    assert (2,) == (2.0,) and hash((2,)) == hash((2.0,))


@pytest.mark.claim("sec-recompilation-static", "clm-recompilation-decorator-factory")
def test_jit_without_a_function_is_a_decorator_factory():
    @jax.jit(static_argnames="n")
    def power_by_name(x, n):
        return x**n

    with count_compiles() as log:
        out = power_by_name(jnp.arange(3.0), n=3)
        power_by_name(jnp.arange(3.0), n=3)
    np.testing.assert_allclose(out, np.arange(3.0) ** 3)
    assert log.count_for("power_by_name") == 1


@pytest.mark.claim("sec-recompilation-loop", "clm-rec-docs-partial")
def test_the_slow_tracing_pages_partial_compiles_at_every_step():
    """JAX's page says jit unwraps a partial and hits the tracing cache; it does not."""
    rows = recompilation_wrappers.docs_partial_rows(4)
    assert [(r["body runs"], r["compiles"]) for r in rows] == [(4, 4)] * 3 + [(1, 1)]
    with pytest.raises(ValueError, match="positive whole number"):
        recompilation_wrappers.docs_partial_rows(0)


@pytest.mark.claim("sec-recompilation-function", "clm-rec-entries-last")
def test_a_functions_cache_entries_last_as_long_as_it_does():
    """JAX holds the function weakly: an equal ScaleBy made after the first one died
    compiles again, one made while the first is alive does not."""
    import gc

    x = jnp.ones(3)
    jax.clear_caches()
    first = recompilation.ScaleBy(5.0)
    jax.jit(first)(x)
    with count_compiles() as alive:
        jax.jit(recompilation.ScaleBy(5.0))(x)
    del first
    gc.collect()
    with count_compiles() as dead:
        jax.jit(recompilation.ScaleBy(5.0))(x)
    assert (alive.count, dead.count) == (0, 1)


@pytest.mark.claim("sec-recompilation-persistent", "clm-rec-disk-explained")
def test_explain_cache_misses_reports_the_persistent_cache_too():
    messages = recompilation_processes.explained_with_disk_cache()
    assert any(m.startswith("TRACING CACHE MISS") for m in messages)
    assert any(m.startswith("PERSISTENT COMPILATION CACHE MISS") for m in messages)
    assert any(
        m.startswith("Writing jit_add_one to persistent compilation cache")
        for m in messages
    )
    assert not any("/" in m.split(" defined at ")[-1] for m in messages)


@pytest.mark.claim("sec-recompilation-buckets", "clm-recompilation-next-bucket")
def test_buckets_pad_long_lengths_below_double_and_short_ones_to_sixteen():
    assert all(recompilation.next_bucket(n) < 2 * n for n in range(17, 600))
    assert recompilation.next_bucket(1) == 16 and recompilation.next_bucket(2) / 2 == 8


@pytest.mark.claim("sec-recompilation-loop", "clm-recompilation-tutorial-right")
def test_the_tutorials_jit_and_caching_example_as_written():
    """docs.jax.dev jit-compilation.html, "JIT and caching" (jax-ml/jax#9288 fixed the
    page): the partial and lambda loops compile every step, the plain one once."""

    def unjitted_loop_body(prev_i):
        return prev_i + 1

    def g_inner_jitted_partial(x, n):
        i = 0
        while i < n:
            i = jax.jit(functools.partial(unjitted_loop_body))(i)
        return x + i

    def g_inner_jitted_lambda(x, n):
        i = 0
        while i < n:
            i = jax.jit(lambda x: unjitted_loop_body(x))(i)
        return x + i

    def g_inner_jitted_normal(x, n):
        i = 0
        while i < n:
            i = jax.jit(unjitted_loop_body)(i)
        return x + i

    counts = []
    for g in (g_inner_jitted_partial, g_inner_jitted_lambda, g_inner_jitted_normal):
        jax.clear_caches()
        with count_compiles() as log:
            assert int(g(10, 5)) == 15
        counts.append(
            sum(name in ("unjitted_loop_body", "<lambda>") for name in log.compiles)
        )
    assert counts == [5, 5, 1]


@pytest.mark.claim("sec-recompilation-static", "clm-rec-blog-static-argnums")
def test_the_blogs_static_argnums_0_makes_x_static_and_raises():
    rows = {r["call with n=20"]: r for r in recompilation.blog_static_rows()}
    assert (
        rows["static_argnums=0, x=10"]["outcome"] == "TracerBoolConversionError"
    )  # n is traced
    assert (
        rows["static_argnums=0, x=jnp.ones(3)"]["outcome"] == "ValueError"
    )  # x is unhashable
    assert rows["static_argnums=1, x=jnp.ones(3)"]["result"] == "[21.0, 21.0, 21.0]"


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-dispatch-effects")
def test_a_program_with_an_effect_never_enters_the_dispatch_cache():
    noted = jax.jit(recompilation_wrappers.plus_one_noted)
    noted(0)
    with count_compiles() as log, cache.count_dispatch_misses() as dispatch:
        for _ in range(5):
            noted(0)
        jax.effects_barrier()
    assert (dispatch.count_for("plus_one_noted"), log.count) == (5, 0)


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-dispatch-bound")
def test_the_dispatch_cache_holds_8192_callables_and_evicts_the_oldest():
    size = recompilation_wrappers.DISPATCH_CACHE_SIZE
    assert recompilation_wrappers.dispatch_cache_holds(size) == 0
    assert recompilation_wrappers.dispatch_cache_holds(size + 1) == 1


@pytest.mark.claim("sec-recompilation-diagnose", "clm-rec-closest-key")
def test_an_explanation_compares_with_the_closest_key_and_can_blame_another_argument():
    blame = recompilation_explore.closest_key_blame()
    assert "closest previous key" in blame
    assert "at x, now f32[8] and before f32[9]" in blame  # the call changed n, not x
    assert "n" not in re.findall(r"\* at (\w+)", blame)


def main_parameters(stablehlo: str) -> int:
    """The number of parameters of a lowered program's main function."""
    (signature,) = re.findall(r"func\.func public @main\((.*?)\) ->", stablehlo)
    return signature.count("%arg")


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-dispatch-key")
def test_the_dispatch_key_holds_identity_donation_and_compiler_options_not_keep_unused():
    """A new wrapper hits the entry of the same callable, misses with donation or compiler
    options, and hits with keep_unused=True, reusing the program that dropped the argument;
    an equal but distinct callable misses (identity, not equality)."""
    from jitbook.chapters.recompilation import ScaleBy

    def first_of(a, b):
        return a * 2

    x = jnp.ones(3)
    jax.jit(first_of)(x, x)
    with count_compiles() as log, cache.count_dispatch_misses() as dispatch:
        jax.jit(first_of)(x, x)
        kept = jax.jit(first_of, keep_unused=True)
        kept(x, x)
    assert (dispatch.count_for("first_of"), log.count) == (0, 0)
    # what ran was jax.jit(first_of)'s program, which dropped b; built afresh, it keeps b
    assert main_parameters(jax.jit(first_of).lower(x, x).as_text()) == 1
    assert main_parameters(kept.lower(x, x).as_text()) == 2
    device = jax.devices()[0]
    on_device = jax.sharding.SingleDeviceSharding(device)
    for options in (
        {"donate_argnums": 1},
        {"compiler_options": {"xla_cpu_enable_fast_math": False}},
        {"device": device},
        {"backend": jax.default_backend()},
        {"in_shardings": on_device},
        {"out_shardings": on_device},
    ):
        with warnings.catch_warnings():  # device= and backend= are deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            with cache.count_dispatch_misses() as dispatch:
                for _ in range(3):  # a miss, then the new options' own entry
                    jax.jit(first_of, **options)(jnp.ones(3), jnp.ones(3))
        assert dispatch.count_for("first_of") == 1, options
    assert _layout_misses(first_of, on_device) in ([1, 1], None)
    # the key's own fields, where the release names them so (a private class)
    import dataclasses

    from jax._src.interpreters import pxla

    keys = getattr(pxla, "JitGlobalCppCacheKeys", None)
    fields = {f.name for f in dataclasses.fields(keys)} if keys else None
    if fields is not None:
        assert {"donate_argnums", "device", "backend", "compiler_options_kvs"} <= fields
        assert {"in_shardings_leaves", "out_shardings_leaves"} <= fields
        assert "out_layouts_leaves" in fields
        assert not fields & {"static_argnums", "static_argnames", "keep_unused"}
    one = ScaleBy(2.0)
    jax.jit(one)(x)
    with cache.count_dispatch_misses() as dispatch:
        jax.jit(one)(x)
        jax.jit(ScaleBy(2.0))(x)  # equal, not the same object
    assert len(dispatch.misses) == 1 and one == ScaleBy(2.0)


def _layout_misses(fn, sharding) -> list[int] | None:
    """Dispatch misses of new wrappers of ``fn`` whose options differ only in the output's
    layout (row-major, then column-major; three calls each); None on a release without
    ``jax.experimental.layout.Format``."""
    try:
        from jax.experimental.layout import Format, Layout
    except ImportError:
        return None
    m = jnp.ones((2, 3))
    misses = []
    for order in ((0, 1), (1, 0)):
        out = Format(Layout(major_to_minor=order), sharding)
        with cache.count_dispatch_misses() as dispatch:
            for _ in range(3):
                jax.jit(fn, out_shardings=out)(m, m)
        misses.append(dispatch.count_for(fn.__name__))
    return misses


@pytest.mark.claim("sec-recompilation-diagnose", "clm-rec-infer-per-wrapper")
def test_inferred_parameters_are_kept_per_wrapper():
    noted = jax.jit(recompilation_wrappers.plus_one_noted)
    noted(0)
    with count_compiles() as reused:
        for _ in range(5):
            noted(0)
    with count_compiles() as fresh:
        for _ in range(5):
            jax.jit(recompilation_wrappers.plus_one_noted)(0)
    jax.effects_barrier()
    assert reused.trace_events.count("plus_one_noted") == 0
    assert fresh.trace_events.count("plus_one_noted") == 5
    assert (
        fresh.count_for("plus_one_noted") == 0
    )  # the tracing cache and the program were there


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-python-caches-bound")
def test_the_python_path_lowers_and_compiles_again_after_more_programs_than_its_caches_hold():
    sizes = recompilation_wrappers.python_cache_sizes()
    size = min(sizes.values())
    assert size == 2048, sizes
    held = recompilation_wrappers.python_path_after(10)
    assert (held["lowerings"], held["compiles"]) == (0, 0)
    evicted = recompilation_wrappers.python_path_after(size + 52)
    assert (evicted["lowerings"], evicted["compiles"]) == (1, 1)


@pytest.mark.claim("sec-recompilation-dispatch", "clm-rec-dispatch-two-caches")
def test_the_dispatch_cache_is_two_caches_and_ours_shares_its_room_with_jnp_functions():
    from jax._src import pjit

    plain, with_options = (
        pjit._cpp_pjit_cache_fun_only,
        pjit._cpp_pjit_cache_explicit_attributes,
    )
    size = recompilation_wrappers.DISPATCH_CACHE_SIZE
    assert plain.capacity() == with_options.capacity() == size
    filled = recompilation_wrappers.caches_filled()  # entries added to (first, second)
    ours, jnps = filled["jax.jit(plus_one)"], filled["jnp.sin"]
    assert sum(ours) == sum(jnps) == 1 and ours == jnps, (
        filled
    )  # one entry each, same cache
    assert sum(filled["jax.jit(ScaleBy(3.0), donate_argnums=0)"]) == 1, filled


@pytest.mark.chapter
def test_the_executed_page_reads_no_dispatch_miss_in_the_wrapper_race(executed):
    """The sentence after the race says none of its calls left the dispatch cache: the
    executed page's count must be 0 too, not what an earlier cell left (the dispatch cache
    filled in the reader's process once evicted plus_one, and the page read 1)."""
    from jitbook.site import harness

    (page,) = [p for p in harness.chapter_files() if p.stem == "cache-key"]
    cells = [c for c in executed(page).cells if c.cell_type == "code"]
    (cell,) = [
        c
        for c in cells
        if "race_misses.count_for" in c.source and "verdict" in c.source
    ]
    (result,) = [o for o in cell.outputs if o.get("output_type") == "execute_result"]
    assert result["data"]["text/plain"] == "(0, 0)"
