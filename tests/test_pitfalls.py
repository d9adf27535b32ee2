"""The claims of the chapter "What trips people up", asserted on the installed JAX,
its helpers' input checks, and its exercises' wrong answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from jitbook import count_compiles
from jitbook.cache import effect_order
from jitbook.chapters import pitfalls

# --- state


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-at-set-new-array")
def test_at_set_outside_jit_is_a_copy_and_item_assignment_raises():
    x = jnp.arange(4.0)
    out = pitfalls.set_outside_jit(x, 0, 9.0)
    assert out == {
        "old array unchanged": True,
        "new array has the value": True,
        "same buffer": False,
    }
    with pytest.raises(TypeError, match="immutable"):
        x[0] = 9.0


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-updates-inside-jit-free")
def test_updates_inside_jit_need_no_temporary_copy():
    mem = pitfalls.memory_of(pitfalls.ten_updates, jnp.zeros(10_000))
    assert mem["temporary bytes"] == 0 and mem["aliased bytes"] == 0
    np.testing.assert_allclose(
        pitfalls.ten_updates(jnp.ones(12))[:11], [*range(10), 2.0]
    )


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-donation-output-into-input")
def test_donation_aliases_the_input_and_deletes_it():
    kept, donated = pitfalls.donation(1000)
    assert kept["aliased bytes"] == 0 and not kept["input deleted"]
    assert not kept["output in the input's buffer"]
    assert donated["aliased bytes"] == 4000 and donated["input deleted"]
    assert donated["output in the input's buffer"]


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-ref-read-written-aliased")
def test_a_ref_passed_to_jit_is_updated_in_place_and_aliased():
    total = jax.new_ref(jnp.zeros(3))
    with count_compiles() as log:
        for _ in range(3):
            pitfalls.add_into(total, jnp.ones(3))
    np.testing.assert_array_equal(total[...], [3.0, 3.0, 3.0])
    assert log.count_for("add_into") <= 1
    other = jax.new_ref(jnp.ones(3))  # another reference of the same type: no compile
    with count_compiles() as log:
        pitfalls.add_into(other, jnp.ones(3))
    assert log.count_for("add_into") == 0
    assert "Ref{f32[3]}" in str(jax.make_jaxpr(pitfalls.add_into)(total, jnp.ones(3)))
    mem = pitfalls.memory_of(pitfalls.add_into, total, jnp.ones(3))
    assert mem["aliased bytes"] == 12


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-ref-in-place")
def test_a_jitted_function_writes_a_ref_in_place_passed_in_or_closed_over(measured):
    total = jax.new_ref(jnp.zeros(3))
    pitfalls.add_into(total, jnp.ones(3))
    pitfalls.add_into(total, jnp.ones(3))
    np.testing.assert_array_equal(total[...], [2.0, 2.0, 2.0])
    counter = jax.new_ref(jnp.zeros(2))

    @jax.jit
    def bump():
        counter[...] += 1.0

    bump()
    bump()
    measured("a Ref passed in, after two calls", str(np.asarray(total[...])))
    measured("a Ref closed over, after two calls", str(np.asarray(counter[...])))
    np.testing.assert_array_equal(counter[...], [2.0, 2.0])


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-ref-not-returned")
def test_a_jitted_function_cannot_return_a_new_ref(measured):
    with pytest.raises(
        ValueError, match="mutable array references cannot be returned"
    ) as err:
        pitfalls.leak_ref(jnp.ones(3))
    measured("returning a new Ref raised", type(err.value).__name__)


# --- random numbers


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-same-key-same-numbers")
def test_a_key_reused_gives_the_same_numbers(measured):
    key = jax.random.key(0)
    first, second = jax.random.normal(key, (3,)), jax.random.normal(key, (3,))
    measured(
        "numbers that differ between two draws with one key",
        int((first != second).sum()),
    )
    np.testing.assert_array_equal(first, second)


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-np-random-constant")
def test_a_global_key_and_np_random_become_constants():
    zeros = jnp.zeros(3)
    for fn in (pitfalls.noise_from_global, pitfalls.noise_from_numpy):
        np.testing.assert_array_equal(fn(zeros), fn(zeros))
    inner = jax.make_jaxpr(pitfalls.noise_from_global)(zeros).eqns[0].params["jaxpr"]
    assert [str(v.aval) for v in inner.jaxpr.constvars] == ["key<fry>[]"]
    numpy_jaxpr = jax.make_jaxpr(pitfalls.noise_from_numpy)(zeros)
    assert [e.primitive.name for e in numpy_jaxpr.eqns[0].params["jaxpr"].eqns] == [
        "add"
    ]


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-key-as-argument")
def test_keys_as_arguments_give_new_noise_and_compile_once():
    zeros = jnp.zeros(5)
    with count_compiles() as log:
        steps = pitfalls.noisy_steps(zeros, jax.random.key(1), 3)
    assert all(not np.array_equal(a, b) for a, b in zip(steps, steps[1:], strict=False))
    assert log.count_for("noise") <= 1


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-threefry-partitionable")
def test_threefry_partitionable_is_on_by_default_and_changes_values():
    assert jax.config.jax_threefry_partitionable is True
    draws = pitfalls.draws_by_partitionable()
    assert not np.allclose(draws[False], draws[True])
    np.testing.assert_array_equal(
        draws[True], np.asarray(jax.random.normal(jax.random.key(0), (3,)))
    )


# --- debugging


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-breakpoint-traced")
def test_breakpoint_traces_to_a_debug_callback():
    jaxpr = jax.make_jaxpr(pitfalls.with_breakpoint)(1.0)
    names = [e.primitive.name for e in jaxpr.eqns[0].params["jaxpr"].eqns]
    assert "debug_callback" in names


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-out-of-bounds-clamps")
def test_out_of_bounds_is_clamped_and_checkify_reports_it():
    values = jnp.arange(3.0)
    assert float(pitfalls.take(values, 5)) == 2.0
    found, out = pitfalls.checked_take(values, 5)
    assert "out-of-bounds" in found and float(out) == 2.0
    assert pitfalls.checked_take(values, 1)[0] is None
    err, _ = checkify.checkify(pitfalls.take, errors=checkify.index_checks)(values, 7)
    with pytest.raises(Exception, match="out-of-bounds"):
        err.throw()


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-nans")
def test_debug_nans_names_the_operation():
    err, printed = pitfalls.debug_nans_error(jnp.ones(3), jnp.array([0.0, 2.0, 0.0]))
    assert isinstance(err, FloatingPointError)
    assert "invalid value (nan) encountered in log" in str(err)
    assert printed and all("Calling the de-optimized version" in p for p in printed)
    assert pitfalls.debug_nans_error(jnp.ones(3), jnp.zeros(3)) == (None, [])


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-nans-donation-2")
def test_debug_nans_turns_donation_off_until_the_cache_is_cleared():
    assert pitfalls.donation_under_debug_nans() == {
        "debug_nans on": False,
        "flag off again": False,
        "after jax.clear_caches()": True,
    }


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-disable-jit")
def test_disable_jit_shows_concrete_values_and_make_jaxpr_still_traces():
    jitted = pitfalls.printed_types(jnp.ones(()))
    assert all("Tracer" in t for t in jitted)
    with jax.disable_jit():
        disabled = pitfalls.printed_types(jnp.ones(()))
        traced = jax.make_jaxpr(lambda x: x + 1)(1.0)
    assert all("ArrayImpl" in t for t in disabled) and len(disabled) == 3
    assert len(traced.eqns) == 1
    # a change only the compiled program makes disappears under disable_jit
    x = jnp.float32(np.pi)
    with jax.disable_jit():
        undone = float(jax.jit(pitfalls.faq_log_sqrt)(x))
    assert undone == float(pitfalls.faq_log_sqrt(x))
    assert undone != float(jax.jit(pitfalls.faq_log_sqrt)(x))


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-prints-reach-output")
def test_debug_prints_of_a_scan_reach_the_output_with_and_without_barrier():
    want = ["carry=0.0 x=0.0", "carry=0.0 x=1.0", "carry=1.0 x=2.0"]
    assert pitfalls.prints_before_exit(True) == want
    assert pitfalls.prints_before_exit(False) == want


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-ordered-prints")
def test_ordered_debug_prints_keep_their_order(capfd):
    @jax.jit
    def two_prints(x):
        jax.debug.print("first {}", x, ordered=True)
        jax.debug.print("second {}", x * 2, ordered=True)
        return x

    two_prints(1.0)
    jax.effects_barrier()
    out = capfd.readouterr().out
    assert out.index("first 1.0") < out.index("second 2.0")

    # the mechanism, which printed lines cannot show (unordered prints often come out in order
    # too): ordered=True makes each print an ordered effect, its callbacks chained by a token;
    # without it the two are unordered effects and nothing orders them
    def two_unordered(x):
        jax.debug.print("first {}", x)
        jax.debug.print("second {}", x * 2)
        return x

    assert effect_order(two_prints, 1.0) == (True, True)
    assert effect_order(two_unordered, 1.0) == (False, False)


# --- compile time


@pytest.mark.claim("sec-pitfalls-compile-time", "clm-pitfalls-log-compiles-stages")
def test_log_compiles_reports_three_stages_with_durations():
    stages = pitfalls.compile_stages(pitfalls.unrolled, jnp.ones(3))
    assert [row["stage"] for row in stages] == [
        "tracing",
        "jaxpr to MLIR module conversion",
        "XLA compilation",
    ]
    assert all(row["seconds"] > 0 for row in stages)


@pytest.mark.claim("sec-pitfalls-compile-time", "clm-pitfalls-eqn-count-pprof")
def test_eqn_count_pprof_counts_equations_per_source_line():
    rows = pitfalls.equations_by_line(pitfalls.unrolled, jnp.ones(3))
    assert rows[0] == {
        "line": rows[0]["line"],
        "equations": 80,
        "code": "x = x + jnp.sin(x + i) ** 2",
    }
    assert rows[1]["equations"] == 40 and rows[1]["code"] == "x = jnp.tanh(x) * 0.5"
    assert jax.config.values["jax_dump_ir_to"] == ""  # restored


@pytest.mark.claim("sec-pitfalls-compile-time", "clm-pitfalls-cache-array-first")
def test_persistent_cache_threshold_and_array_first():
    rows = {mode: pitfalls.persistent_cache(mode) for mode in pitfalls.CACHE_MODES}
    assert rows["defaults"]["entries"] == 0
    assert rows["defaults"]["min_compile_time_secs"] == 1.0
    assert rows["min compile time 0"]["entries"] > 0
    assert rows["array first"]["entries"] > 0  # jax-ml/jax#25768 is fixed
    assert jax.config.jax_compilation_cache_check_contents is False


# --- dispatch


@pytest.mark.claim("sec-pitfalls-dispatch", "clm-pitfalls-dispatch-counts")
def test_dispatch_variants_compute_the_same_op_by_op_runs_three_programs_jit_one_numpy_none():
    """Counted, not timed (a speed claim lives in the benchmark): on a shape nothing has
    compiled yet, each variant compiles the programs its every call launches."""
    variants = pitfalls.dispatch_variants(8)
    want = np.sin(np.linspace(0.0, 1.0, 8)) * 2.0 + 1.0
    for name, call in variants.items():
        np.testing.assert_allclose(np.asarray(call()), want, rtol=1e-5, err_msg=name)
    fresh = pitfalls.dispatch_variants(13)  # 13 numbers: a shape of its own
    programs = {}
    for name in ("op by op (jnp)", "jax.jit", "NumPy"):
        with count_compiles() as log:
            out = fresh[name]()
        programs[name] = log.compiles
        if name == "NumPy":
            assert isinstance(out, np.ndarray)
    three = len(jax.make_jaxpr(pitfalls.tiny)(jnp.ones(13)).eqns)
    assert len(programs["op by op (jnp)"]) == three == 3, programs
    assert programs["jax.jit"] == ["tiny"] and programs["NumPy"] == []
    with (
        count_compiles() as log
    ):  # and warm, each call launches them again, compiling none
        fresh["op by op (jnp)"](), fresh["jax.jit"]()
    assert log.count == 0


# --- numerics


@pytest.mark.claim("sec-pitfalls-numerics", "clm-pitfalls-faq-numerics")
def test_faq_numerics_on_this_jax():
    rows = {row["expression"]: row for row in pitfalls.faq_numerics()}
    assert not rows["x + y - x"]["differ"]  # jax-ml/jax#12939: does not reproduce
    assert rows["x + y - x"]["jax.jit"] == "0.0010000467"
    assert rows["log(sqrt(x))"]["differ"]
    assert rows["log(exp(x))"]["op by op"] == "inf"


# --- input checks and exercises


def test_bad_inputs_get_clear_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        pitfalls.persistent_cache("nope")


# --- claims marked on the page


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-in-place")
def test_ten_updates_compile_to_in_place_writes():
    compiled = jax.jit(pitfalls.ten_updates).lower(jnp.zeros(1000)).compile()
    assert compiled.memory_analysis().temp_size_in_bytes == 0
    hlo = compiled.as_text()
    assert "copy(" not in hlo  # no copy of the 4,000-byte array before its updates


@pytest.mark.claim("sec-pitfalls-state", "clm-pitfalls-donation-aliases")
def test_donation_aliases_output_to_input_in_the_hlo():
    kept, donated = pitfalls.donation(1000)
    assert donated["aliased bytes"] == 4000 and donated["input deleted"]
    assert donated["output in the input's buffer"] and not kept["input deleted"]
    compiled = jax.jit(lambda x: x.at[0].set(1.0), donate_argnums=0).lower(
        jnp.zeros(1000)
    )
    assert "tf.aliasing_output" in compiled.as_text()


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-global-key")
def test_a_global_key_is_a_constvar_of_the_program():
    zeros = jnp.zeros(3)
    inner = jax.make_jaxpr(pitfalls.noise_from_global)(zeros).eqns[0].params["jaxpr"]
    assert [str(v.aval) for v in inner.jaxpr.constvars] == ["key<fry>[]"]
    assert not inner.jaxpr.invars[1:]  # no key argument: the key is not an input
    np.testing.assert_array_equal(
        pitfalls.noise_from_global(zeros), pitfalls.noise_from_global(zeros)
    )


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-numpy-constvar")
def test_a_numpy_draw_is_a_constvar_not_a_literal():
    zeros = jnp.zeros(3)
    inner = jax.make_jaxpr(pitfalls.noise_from_numpy)(zeros).eqns[0].params["jaxpr"]
    assert [str(v.aval) for v in inner.jaxpr.constvars] == ["float32[3]"]
    (eqn,) = inner.eqns
    assert eqn.primitive.name == "add"
    assert not any(type(v).__name__ == "Literal" for v in eqn.invars)
    assert inner.jaxpr.constvars[0] in eqn.invars


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-key-argument")
def test_a_key_argument_is_traced_so_new_keys_reuse_the_program():
    inner = jax.make_jaxpr(pitfalls.noise)(jnp.zeros(3), jax.random.key(2))
    assert not inner.eqns[0].params["jaxpr"].jaxpr.constvars
    zeros, keys = jnp.zeros(4), jax.random.split(jax.random.key(3), 3)
    pitfalls.noise(zeros, keys[0])
    with count_compiles() as log:
        pitfalls.noise(zeros, keys[1])
        pitfalls.noise(zeros, keys[2])
    assert log.count == 0


@pytest.mark.claim("sec-pitfalls-grad", "clm-pitfalls-grad-if")
def test_grad_alone_reads_a_value_and_jit_of_grad_cannot():
    seen = []

    def probe(x):
        from jax._src import core

        value = core.to_concrete_value(x)  # the value the tracer carries, if any
        seen.append(None if value is None else float(value))
        return pitfalls.branchy(x)

    assert float(jax.grad(probe)(3.0)) == 6.0 and seen == [3.0]
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.jit(jax.grad(probe))(3.0)
    assert seen[1:] == [None]
    assert pitfalls.grad_with_and_without_jit(-2.0) == {
        "jax.grad": -1.0,
        "jax.jit(jax.grad)": "TracerBoolConversionError",
    }


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-breakpoint")
def test_breakpoint_is_a_debug_callback_equation():
    jaxpr = jax.make_jaxpr(pitfalls.with_breakpoint)(1.0)
    eqns = jaxpr.eqns[0].params["jaxpr"].eqns
    assert [e.primitive.name for e in eqns].count("debug_callback") == 1


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-clamp")
def test_a_jitted_index_is_a_clamping_gather():
    values = jnp.arange(3.0)
    assert float(pitfalls.take(values, 5)) == 2.0
    inner = jax.make_jaxpr(pitfalls.take)(values, 5).eqns[0].params["jaxpr"]
    assert "dynamic_slice" in [e.primitive.name for e in inner.eqns]
    # dynamic_slice's own semantics: a start past the end is clamped into bounds
    assert jax.lax.dynamic_slice(values, (jnp.int32(5),), (1,)).tolist() == [2.0]


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-nans-rerun")
def test_debug_nans_reruns_the_function_de_optimized():
    from unittest import mock

    from jax._src import api_util

    reruns = []
    original = api_util.maybe_recursive_nan_check

    def spy(e, fun, args, kwargs):
        reruns.append(getattr(fun, "__name__", repr(fun)))
        return original(e, fun, args, kwargs)

    with mock.patch.object(api_util, "maybe_recursive_nan_check", spy):
        err, _ = pitfalls.debug_nans_error(jnp.ones(3), jnp.array([0.0, 2.0, 0.0]))
    assert isinstance(err, FloatingPointError) and "in log" in str(err)
    assert reruns[0] == "log_of_difference"


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-nans-twice")
def test_debug_nans_prints_once_per_jitted_function_holding_the_nan():
    y = jnp.array([0.0, 2.0, 0.0])
    _, through_jnp = pitfalls.debug_nans_error(jnp.ones(3), y)
    _, through_lax = pitfalls.debug_nans_error(
        jnp.ones(3), y, pitfalls.log_of_difference_lax
    )
    assert (len(through_jnp), len(through_lax)) == (2, 1)
    assert hasattr(jnp.log, "lower")  # jnp.log is a jitted function of its own


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-nans-donation")
def test_debug_nans_compiles_without_donation_and_the_cache_keeps_it():
    assert pitfalls.donation_under_debug_nans() == {
        "debug_nans on": False,
        "flag off again": False,
        "after jax.clear_caches()": True,
    }


@pytest.mark.claim("sec-pitfalls-debugging", "clm-pitfalls-debug-print-callback")
def test_debug_print_prints_when_the_program_runs_not_while_tracing(capfd):
    @jax.jit
    def shout(x):
        jax.debug.print("value {}", x)
        return x + 1

    lowered = shout.lower(jnp.float32(2.0))
    assert "callback" in lowered.as_text()
    compiled = lowered.compile()
    jax.effects_barrier()
    assert "value" not in capfd.readouterr().out  # traced, lowered, compiled: no print
    compiled(jnp.float32(2.0)).block_until_ready()
    jax.effects_barrier()
    assert "value 2.0" in capfd.readouterr().out


@pytest.mark.claim("sec-pitfalls-compile-time", "clm-pitfalls-lines-unrolled")
def test_a_python_loop_puts_every_turn_into_the_program():
    by_line = pitfalls.equations_by_line(pitfalls.unrolled, jnp.ones(3))
    jaxpr = jax.make_jaxpr(pitfalls.unrolled)(jnp.ones(3))
    assert by_line[0]["equations"] + by_line[1]["equations"] <= len(jaxpr.eqns)
    assert by_line[0]["equations"] % 20 == 0 and by_line[1]["equations"] % 20 == 0


@pytest.mark.claim("sec-pitfalls-compile-time", "clm-pitfalls-cache-entries")
def test_an_array_made_first_keeps_its_program_off_the_disk():
    zero, first = (pitfalls.persistent_cache(m) for m in pitfalls.CACHE_MODES[1:])
    missing = set(zero["programs written"].split(", ")) - set(
        first["programs written"].split(", ")
    )
    assert missing == {"convert_element_type"}
    assert zero["entries"] - first["entries"] == 1
    jax.clear_caches()
    with count_compiles() as log:
        jnp.zeros(3).block_until_ready()
    assert "convert_element_type" in log.compiles


@pytest.mark.claim("sec-pitfalls-random", "clm-pitfalls-make-jaxpr-same-draw")
def test_make_jaxpr_after_jit_shows_the_draw_jit_made(measured):
    zeros = jnp.zeros(7)  # a shape of its own: the first trace is jit's
    drawn = pitfalls.noise_from_numpy(zeros)
    inner = jax.make_jaxpr(pitfalls.noise_from_numpy)(zeros).eqns[0].params["jaxpr"]
    gap = float(np.abs(np.asarray(inner.consts[0]) - np.asarray(drawn - zeros)).max())
    measured("largest gap between the jaxpr's constant and jit's draw", gap)
    np.testing.assert_array_equal(inner.consts[0], drawn - zeros)
