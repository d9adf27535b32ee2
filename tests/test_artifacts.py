"""The artifacts chapter's claims about JAX (donation, export, compile cost, jit's knobs) and its helpers' input
checks (its exercises: tests/test_exercises.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import jitbook
from jitbook.chapters import artifacts

# --- buffer donation ---------------------------------------------------------------------------------------


@pytest.mark.claim("sec-artifacts-donation", "clm-artifacts-donation-saves-a-state")
def test_donating_the_state_aliases_the_output_and_lowers_the_peak_by_one_state():
    kept, donated = artifacts.donation_rows(100)
    state_bytes = 100 * 100 * 4
    assert kept["aliased"] == 0 and donated["aliased"] == state_bytes
    assert kept["counted peak"] - donated["counted peak"] == state_bytes
    assert kept["arguments"] == donated["arguments"] == 2 * state_bytes


@pytest.mark.claim("sec-artifacts", "clm-artifacts-donated-input-deleted")
def test_a_donated_input_is_deleted_and_the_output_reuses_its_memory():
    assert artifacts.live_buffers(donate=True) == {
        "donated": True,
        "input deleted": True,
        "output reuses the input's memory": True,
    }
    assert artifacts.live_buffers(donate=False) == {
        "donated": False,
        "input deleted": False,
        "output reuses the input's memory": False,
    }


@pytest.mark.claim("sec-artifacts", "clm-artifacts-donated-array-raises")
def test_using_a_donated_array_raises():
    err = artifacts.reuse_error()
    assert isinstance(err, RuntimeError)
    assert (
        jitbook.error_line(err)
        == "RuntimeError: Array has been deleted with shape=float32[3]."
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-donation-keyword-calls")
@pytest.mark.parametrize("how", [{"donate_argnums": 0}, {"donate_argnames": "state"}])
def test_donation_works_on_keyword_calls_too(how):
    state = jnp.ones(4)
    jax.jit(artifacts.sgd_update, **how)(state=state, grad=jnp.ones(4))
    assert state.is_deleted()


@pytest.mark.claim("sec-artifacts", "clm-artifacts-unusable-warns-once")
def test_an_unusable_donation_warns_once_per_compile():
    x = jnp.ones(5)
    with pytest.warns(UserWarning, match="Some donated buffers were not usable"):
        jax.jit(artifacts.total, donate_argnums=0)(x)
    assert (
        not x.is_deleted()
    )  # nothing else happens: the argument is simply not donated
    assert artifacts.donation_warnings(artifacts.total, jnp.ones(100), calls=3) == [
        "Some donated buffers were not usable: float32[100]."
    ]
    assert (
        artifacts.donation_warnings(artifacts.sgd_update, jnp.ones(3), jnp.ones(3))
        == []
    )


@pytest.mark.claim("sec-artifacts-carry", "clm-artifacts-carry-counted")
def test_donating_a_loops_carry_lowers_the_peak_and_keeps_the_losses():
    kept, donated = (artifacts.fit_python_loop(64, 3, donate=d) for d in (False, True))
    carry_bytes = 2 * 64 * 64 * 4
    assert kept.memory["aliased"] == 0 and donated.memory["aliased"] == carry_bytes
    counted = kept.memory["counted peak"] - donated.memory["counted peak"]
    by_xla = kept.memory["XLA's peak"] - donated.memory["XLA's peak"]
    assert 0 < counted < carry_bytes  # the donated plan's temporaries grew
    assert donated.memory["temporaries"] > kept.memory["temporaries"]
    assert by_xla == carry_bytes  # XLA's figure, blind to temporaries, claims it all
    np.testing.assert_array_equal(donated.losses, kept.losses)
    assert donated.losses[-1] < donated.losses[0]


@pytest.mark.claim("sec-artifacts-unusable", "clm-artifacts-unusable-warning-lowering")
def test_the_unusable_donation_warning_comes_from_lowering():
    assert artifacts.warning_stage(artifacts.total, jnp.ones(100)) == {
        "trace": 0,
        "lower": 1,
        "compile": 0,
        "call": 0,
    }
    usable = artifacts.warning_stage(artifacts.sgd_update, jnp.ones(3), jnp.ones(3))
    assert usable == {"trace": 0, "lower": 0, "compile": 0, "call": 0}


def test_donation_helpers_refuse_bad_input():
    with pytest.raises(TypeError, match="takes the function first"):
        artifacts.memory_row(jnp.ones(3))
    with pytest.raises(ValueError, match="calls .* must be a positive whole number"):
        artifacts.donation_warnings(artifacts.total, jnp.ones(3), calls=0)
    with pytest.raises(ValueError, match="n_iter .* must be a positive whole number"):
        artifacts.fit_python_loop(8, 0, donate=True)
    with pytest.raises(ValueError, match="side .* must be a positive whole number"):
        artifacts.fit_python_loop(0, 3, donate=True)
    with pytest.raises(TypeError, match="takes the function first"):
        artifacts.warning_stage(jnp.ones(3))


# --- export --------------------------------------------------------------------------------------------------

W = jnp.asarray(np.random.default_rng(0).normal(size=(3, 2)), jnp.float32)


def _exported(constraints=()):
    return export.export(jax.jit(artifacts.predict))(
        jax.ShapeDtypeStruct(W.shape, W.dtype),
        artifacts.batch_spec(3, constraints=constraints),
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-export-fresh-process")
def test_a_serialized_export_runs_in_a_fresh_process_with_the_same_results():
    exported = _exported()
    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    remote = artifacts.call_in_fresh_process(exported.serialize(), W, x)
    assert remote["function"] == "predict" and remote["inputs"] == [
        "float32[3,2]",
        "float32[b,3]",
    ]
    assert (
        remote["jax"] == jax.__version__ and remote["compiles"] >= 1
    )  # the loading process compiles it
    np.testing.assert_allclose(
        np.asarray(remote["outputs"]), np.asarray(artifacts.predict(W, x)), atol=1e-6
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-calling-convention")
def test_export_sizes_and_calling_convention():
    exported = _exported()
    sizes = artifacts.export_sizes(exported)
    assert sizes["serialized bytes"] > sizes["StableHLO bytecode bytes"] > 0
    assert (
        export.minimum_supported_calling_convention_version
        <= sizes["calling convention"]
        <= export.maximum_supported_calling_convention_version
    )
    assert "jax_export_deserialize_expired_versions" in jax.config.values


@pytest.mark.claim("sec-artifacts", "clm-artifacts-symbolic-batch")
def test_one_symbolic_export_serves_every_batch_size():
    exported = _exported()
    (batch, three), (same, two) = (
        exported.in_avals[1].shape,
        exported.out_avals[0].shape,
    )
    assert not isinstance(batch, int) and str(batch) == "b" and same is batch
    assert (three, two) == (3, 2) and exported.in_avals[1].dtype == jnp.float32
    for b in (1, 7, 128):
        x = jnp.ones((b, 3))
        np.testing.assert_allclose(
            exported.call(W, x), artifacts.predict(W, x), atol=1e-6
        )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-fixed-dimension-refused")
def test_a_wrong_fixed_dimension_is_refused_at_the_call():
    err = jitbook.raised(_exported().call, W, jnp.ones((4, 5)))
    assert isinstance(err, ValueError)
    assert str(err).startswith(
        "Shape mismatch for args[1].shape[1] (expected same constant)"
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-constraint-refused")
def test_a_broken_constraint_is_refused_at_the_call():
    exported = _exported(constraints=["b >= 2"])
    assert exported.call(W, jnp.ones((2, 3))).shape == (2, 2)
    err = jitbook.raised(exported.call, W, jnp.ones((1, 3)))
    assert isinstance(err, ValueError)
    assert str(err).startswith(
        "Input shapes do not match the symbolic shape constraint b >= 2"
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-even-length-export")
def test_a_shape_that_needs_an_even_length_cannot_be_exported_for_any_length():
    (b,) = export.symbolic_shape("b")
    err = jitbook.raised(
        export.export(jax.jit(lambda v: v.reshape(2, -1))),
        jax.ShapeDtypeStruct((b,), jnp.float32),
    )
    assert type(err).__name__ == "InconclusiveDimensionOperation"
    assert "Cannot divide evenly" in str(err)


def test_call_in_fresh_process_needs_bytes():
    with pytest.raises(TypeError, match="takes the bytes of exported.serialize"):
        artifacts.call_in_fresh_process(_exported(), W)


# --- compile cost --------------------------------------------------------------------------------------------


@pytest.mark.claim("sec-artifacts-compile-time", "clm-artifacts-scan-constant-size")
def test_the_unrolled_program_grows_with_the_loop_and_the_scan_does_not():
    short, long = artifacts.loop_cost_rows([5, 50])
    assert long["unrolled eqns"] == 10 * short["unrolled eqns"]
    assert long["unrolled HLO lines"] > 5 * short["unrolled HLO lines"]
    assert (long["scan eqns"], long["scan HLO lines"]) == (
        short["scan eqns"],
        short["scan HLO lines"],
    )
    np.testing.assert_allclose(
        artifacts.unrolled_steps(jnp.ones(3), 7),
        artifacts.scanned_steps(jnp.ones(3), 7),
        rtol=1e-6,
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-closed-over-constant")
def test_a_closed_over_table_is_a_constant_and_an_argument_is_not():
    closed, passed = artifacts.constant_rows(200)
    assert closed["constant bytes"] == 200 * 200 * 4 and passed["constant bytes"] == 0
    assert (
        closed["StableHLO characters"]
        > 200 * 200 * 4
        > 100 * passed["StableHLO characters"]
    )
    # the printed module writes each byte of the table as two hex digits
    assert (
        2 * closed["constant bytes"]
        < closed["StableHLO characters"]
        < 2.01 * closed["constant bytes"]
    )


@pytest.mark.claim("sec-artifacts", "clm-artifacts-constant-sweep")
def test_the_constant_sweep_grows_with_the_table_only_when_closed_over():
    small, large = artifacts.constant_sweep([50, 200])
    assert large["table (MB)"] == 16 * small["table (MB)"]
    assert (
        large["closed over: StableHLO (MB)"]
        > 2 * large["table (MB)"]
        > 10 * small["closed over: StableHLO (MB)"]
    )
    with pytest.raises(ValueError, match="non-empty list of table sides"):
        artifacts.constant_sweep(100)


@pytest.mark.claim("sec-artifacts-pieces", "clm-artifacts-pieces")
def test_jitted_pieces_compile_once_each_but_not_inside_an_outer_jit():
    many, outer_jitted, outer_plain = artifacts.pieces_rows(5)
    assert (many["compiles"], many["compiles of a piece"]) == (5, 5)
    assert (outer_jitted["compiles"], outer_jitted["compiles of a piece"]) == (1, 0)
    assert (outer_plain["compiles"], outer_plain["compiles of a piece"]) == (1, 0)


@pytest.mark.claim("sec-artifacts-hoisting", "clm-artifacts-hoisting-read-at-import")
def test_constant_hoisting_set_after_import_leaves_the_closure_embedded():
    table = np.random.default_rng(0).normal(size=(50, 50)).astype(np.float32)
    before = len(jax.jit(artifacts.closed_over(table)).lower(jnp.ones(50)).as_text())
    jax.config.update("jax_use_simplified_jaxpr_constants", True)
    try:
        after = len(jax.jit(artifacts.closed_over(table)).lower(jnp.ones(50)).as_text())
    finally:
        jax.config.update("jax_use_simplified_jaxpr_constants", False)
    assert after == before > table.nbytes


@pytest.mark.claim("sec-artifacts-hoisting", "clm-artifacts-hoisting")
def test_constant_hoisting_is_off_by_default_and_moves_the_table_into_the_arguments():
    assert jax.config.jax_use_simplified_jaxpr_constants is False
    assert jax.config.jax_embedded_constants_max_bytes == 32
    embedded, hoisted = artifacts.constant_hoisting_rows(100)
    assert (embedded["simplified constants"], hoisted["simplified constants"]) == (
        False,
        True,
    )
    table_bytes = 100 * 100 * 4
    assert (
        embedded["StableHLO characters"]
        > 2 * table_bytes
        > 100 * hoisted["StableHLO characters"]
    )
    assert embedded["executable argument bytes"] == 100 * 4
    assert hoisted["executable argument bytes"] == table_bytes + 100 * 4
    assert embedded["compiles for 2 tables"] == hoisted["compiles for 2 tables"] == 2
    assert embedded["kept in the program (bytes)"] == [32, 36]
    assert hoisted["kept in the program (bytes)"] == [32]


def test_compile_cost_helpers_refuse_bad_input():
    with pytest.raises(
        ValueError, match="each loop length must be a positive whole number"
    ):
        artifacts.loop_cost_rows([0])
    with pytest.raises(ValueError, match="non-empty list of loop lengths"):
        artifacts.loop_cost_rows(100)
    with pytest.raises(ValueError, match="side .* must be a positive whole number"):
        artifacts.constant_hoisting_rows(0)
    with pytest.raises(ValueError, match="n .pieces. must be a positive whole number"):
        artifacts.pieces_rows(0)
    with pytest.raises(
        ValueError,
        match="size .* must be a positive whole number, e.g. size=1000, got 2.5",
    ):
        artifacts.constant_rows(2.5)


# --- the other knobs ---------------------------------------------------------------------------------------


@pytest.mark.claim("sec-artifacts-knobs", "clm-artifacts-keep-unused")
def test_keep_unused_keeps_an_unused_argument():
    dropped, kept = artifacts.keep_unused_rows(100)
    assert dropped["argument bytes"] == 100 * 4
    assert kept["argument bytes"] == 100 * 4 + 100 * 100 * 4


@pytest.mark.claim("sec-artifacts-knobs", "clm-artifacts-xla-inlines")
def test_inline_leaves_one_stablehlo_function_and_xla_inlines_either_way():
    nested, inlined = artifacts.inline_rows()
    assert (nested["StableHLO functions"], inlined["StableHLO functions"]) == (2, 1)
    assert (nested["StableHLO calls"], inlined["StableHLO calls"]) == (2, 0)
    assert nested["calls after XLA"] == inlined["calls after XLA"] == 0


@pytest.mark.claim("sec-artifacts-knobs", "clm-artifacts-fast-min-max")
def test_fast_min_max_drops_a_nan_and_unknown_options_are_refused():
    numpy_row, default, fast = artifacts.compiler_options_rows(
        jnp.array([np.nan, 1.0, -2.0])
    )
    assert np.isnan(numpy_row["result"]) and np.isnan(default["result"])
    assert fast["result"] == 1.0
    err = jitbook.raised(
        lambda: (
            jax.jit(jnp.sin, compiler_options={"no_such_option": 1})
            .lower(1.0)
            .compile()
        )
    )
    assert "No such compile option: 'no_such_option'" in str(err)


@pytest.mark.claim("sec-artifacts-donation", "clm-artifacts-peak-without-temporaries")
def test_xla_cpu_peak_leaves_the_temporaries_out():
    for d in (False, True):
        m = artifacts.fit_python_loop(64, 2, donate=d).memory
        assert m["temporaries"] > 0
        without = m["arguments"] + m["outputs"] - m["aliased"]
        assert 0 <= m["XLA's peak"] - without < 64  # alignment, not temporaries
        assert m["counted peak"] == without + m["temporaries"] > m["XLA's peak"]


@pytest.mark.claim("sec-artifacts-unusable", "clm-artifacts-warning-at-lowering")
def test_the_unusable_donation_warning_comes_at_lowering():
    stages = artifacts.warning_stage(artifacts.total, jnp.ones(100))
    assert [stage for stage, n in stages.items() if n] == ["lower"]
    assert artifacts.donation_warnings(artifacts.total, jnp.ones(100), calls=3) == [
        "Some donated buffers were not usable: float32[100]."
    ]


@pytest.mark.claim("sec-artifacts-export", "clm-artifacts-serialize-executable")
def test_a_serialized_executable_loads_without_compiling():
    trip = artifacts.executable_round_trip()
    assert trip["compiles to load and call"] == 0 and trip["same result"]
    assert trip["serialized bytes"] > 1000


@pytest.mark.claim("sec-artifacts-export", "clm-artifacts-export-compiles-on-load")
def test_an_export_compiles_in_the_process_that_loads_it():
    w = jnp.ones((3, 2))
    shipped = export.export(jax.jit(artifacts.predict))(
        jax.ShapeDtypeStruct(w.shape, w.dtype), artifacts.batch_spec(3)
    )
    batch = np.ones((5, 3), np.float32)
    remote = artifacts.call_in_fresh_process(shipped.serialize(), w, batch)
    assert remote["compiles"] >= 1
    np.testing.assert_allclose(
        remote["outputs"], artifacts.predict(w, batch), atol=1e-6
    )


@pytest.mark.claim("sec-artifacts-constants", "clm-artifacts-constant-hex")
def test_the_printed_stablehlo_writes_two_hex_digits_per_constant_byte():
    table = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    text = jax.jit(artifacts.closed_over(table)).lower(jnp.ones(64)).as_text()
    (hex_run,) = [w for w in text.split('"') if w.startswith("0x") and len(w) > 1000]
    assert len(hex_run) == 2 + 2 * table.nbytes


@pytest.mark.claim("sec-artifacts-export", "clm-artifacts-persistent-load-counts")
def test_a_persistent_cache_load_counts_as_a_compile():
    first, second = artifacts.persistent_load_counts()
    assert (first["compiles counted"], first["persistent cache hits"]) == (1, 0)
    assert (second["compiles counted"], second["persistent cache hits"]) == (1, 1)


@pytest.mark.claim("sec-artifacts-export", "clm-artifacts-export-platforms")
def test_an_export_runs_only_on_the_platforms_it_names_and_platforms_names_several():
    w = jnp.ones((3, 2))
    specs = (jax.ShapeDtypeStruct(w.shape, w.dtype), artifacts.batch_spec(3))
    batch = np.ones((5, 3), np.float32)
    default = export.export(jax.jit(artifacts.predict))(*specs)
    assert len(default.platforms) == 1  # the platform it was made on, only
    if jax.default_backend() == "cpu":
        assert default.platforms == ("cpu",)
        gpu_only = export.export(jax.jit(artifacts.predict), platforms=("cuda",))(
            *specs
        )
        with pytest.raises(ValueError, match="exported for platforms"):
            gpu_only.call(w, batch)
    everywhere = export.export(jax.jit(artifacts.predict), platforms=("cpu", "cuda"))(
        *specs
    )
    assert everywhere.platforms == ("cpu", "cuda")
    # one module for both: a platform index chooses, by a stablehlo.case, what runs
    module = everywhere.mlir_module()
    assert "_platform_index" in module and "stablehlo.case" in module
    assert "_platform_index" not in default.mlir_module()
    remote = artifacts.call_in_fresh_process(
        everywhere.serialize(), w, batch
    )  # picks its own
    np.testing.assert_allclose(
        remote["outputs"], artifacts.predict(w, batch), atol=1e-6
    )
