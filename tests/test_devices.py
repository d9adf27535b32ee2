"""The devices chapter's claims about JAX and its helpers' input checks (its exercises: tests/test_exercises.py).

This process started JAX with one device, so the claims that need several run in one subprocess with four
simulated CPU devices (``FACTS``), and the multi-process claims in two more processes.
"""

import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from jitbook.chapters import devices, devices_processes, pln

FACTS = textwrap.dedent("""
    import json
    import jitbook
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    from jitbook.chapters import devices, pln
    from jitbook import errors

    facts = {"device count": jax.device_count()}
    facts["late jax error"] = errors.error_line(errors.error_of(jax.config.update, "jax_num_cpu_devices", 8))
    facts["late our error"] = errors.error_line(errors.error_of(devices.use_cpu_devices, 8))
    explicit = jax.make_mesh((4,), ("data",))
    facts["default axis type"] = explicit.axis_types[0].name
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    xe = jax.device_put(x, NamedSharding(explicit, P("data", None)))
    facts["explicit type"] = str(jax.typeof(xe))
    facts["explicit gram"] = errors.error_line(errors.raised(jax.jit(lambda v: v.T @ v), xe))
    facts["explicit gram traced"] = errors.error_line(errors.raised(jax.make_jaxpr(lambda v: v.T @ v), xe))
    mesh = devices.data_mesh(4)
    xr = jax.device_put(x, NamedSharding(mesh, P("data", None)))
    facts["auto type"] = str(jax.typeof(xr))
    facts["shards"] = devices.shards(xr)
    double = jax.jit(lambda v: 2 * v, in_shardings=NamedSharding(mesh, P("data", None)),
                     out_shardings=NamedSharding(mesh, P(None, "data")))
    d = double(x)
    facts["out_shardings"] = [str(d.sharding.spec), bool(np.array_equal(np.asarray(d), 2 * x))]
    facts["key rows"] = devices.sharding_key_rows(mesh)
    facts["abstract"] = [[dict(jax.typeof(v).sharding.mesh.shape), str(jax.typeof(v).sharding.spec)] for v in
                         (jnp.asarray(x), xr, jax.device_put(x, NamedSharding(mesh, P(None, "data"))))]
    facts["explain auto"] = devices.explain_new_sharding(mesh)
    facts["explain explicit"] = devices.explain_new_sharding(explicit)
    facts["matmul"] = devices.matmul_rows(mesh)
    a = np.random.default_rng(0).normal(size=(8, 8)).astype(np.float32)
    by_hand = devices.psum_matmul(mesh)
    facts["psum gap"] = float(np.max(np.abs(np.asarray(by_hand(a, a)) - a @ a)))
    facts["psum collectives"] = dict(devices.collectives(by_hand.lower(a, a).compile()))
    oaks = pln.load_oaks(1)
    with jitbook.count_compiles() as log:
        one = devices.pln_losses(oaks, 6)
        four = devices.pln_losses(oaks, 6, mesh)
    facts["pln gap"] = float(np.max(np.abs(four - one) / np.abs(one)))
    facts["pln step compiles"] = log.count_for("pln_step")
    data, params, Omega = devices.place_rows(oaks, mesh)
    eager_state = pln.make_optimizer(1.0).init(params)
    step = jitbook.cache.fresh_jit(devices.pln_step.__wrapped__, static_argnames="lr")
    with jitbook.count_compiles() as log:
        state = (params, eager_state, Omega)
        for _ in range(3):
            *state, _loss = step(*state, data, lr=1.0)
    facts["eager optimizer state compiles"] = log.count_for("pln_step")
    program = devices.pln_step_compiled(oaks, mesh)
    facts["pln collectives"] = dict(devices.collectives(program))
    facts["pln one-device collectives"] = dict(devices.collectives(devices.pln_step_compiled(oaks, None)))
    facts["pln reduced shapes"] = devices.reduced_shapes(program)
    facts["pln collective shapes"] = devices.collective_shapes(program)
    facts["pln collective shapes, twice the rows"] = devices.collective_shapes(
        devices.pln_step_compiled(pln.load_oaks(2), mesh))
    facts["pln rows"] = [int(oaks.Y.shape[0]), int(data.Y.addressable_shards[0].data.shape[0])]
    facts["pln reduced origins"] = [[r["operation"], r["part of the step"], list(r["shape"])]
                                    for r in devices.reduced_origins(program)]
    local, _, _ = devices.place_local_rows(devices.process_rows(oaks), mesh)
    whole, _, _ = devices.place_rows(oaks, mesh)
    facts["local placement"] = [bool(np.array_equal(np.asarray(a), np.asarray(b))) and a.sharding == b.sharding
                                for a, b in zip(local, whole)]
    x_columns = jax.device_put(x, NamedSharding(mesh, P(None, "data")))
    facts["in_shardings mismatch"] = errors.error_line(errors.raised(double, x_columns))
    with jax.set_mesh(mesh):
        wsc = jax.jit(devices.doubled_by_columns)
        out = wsc(xr)
        facts["constraint"] = [str(out.sharding.spec), bool(np.array_equal(np.asarray(out), 2 * x)),
                               dict(devices.collectives(wsc.lower(xr).compile()))]
        facts["set_mesh device_put"] = str(jax.device_put(x, P("data", None)).sharding.spec)
    facts["no mesh"] = errors.error_line(errors.raised(jax.jit(devices.doubled_by_columns), xr))
    facts["gram fixes"] = {}
    with jax.set_mesh(explicit):
        for fix in (devices.gram_replicated, devices.gram_resharded):
            jitted = jax.jit(fix)
            r = jitted(xe)
            facts["gram fixes"][fix.__name__] = [str(jax.typeof(r)), bool(np.allclose(np.asarray(r), x.T @ x)),
                                                 dict(devices.collectives(jitted.lower(xe).compile()))]
    by_pmap = jax.pmap(devices.per_device_double)(x.reshape(4, 2, 4))
    by_shard_map = jax.jit(jax.shard_map(devices.per_device_double, mesh=mesh, in_specs=P("data"),
                                         out_specs=P("data")))(x)
    facts["pmap"] = [bool(np.array_equal(np.asarray(by_pmap).reshape(8, 4), np.asarray(by_shard_map))),
                     type(by_pmap.sharding).__name__, list(by_pmap.sharding.mesh.axis_names),
                     "jax_pmap_shmap_merge" in jax.config.values]
    try:
        devices.place_rows(pln.check_data(np.ones((6, 2)), np.zeros((6, 2)), np.ones((6, 1))), mesh)
    except ValueError as err:
        facts["uneven rows"] = str(err)

    print("FACTS " + json.dumps(facts))
""")


@pytest.fixture(scope="module")
def facts() -> dict:
    out = subprocess.run(
        [sys.executable, "-c", FACTS], capture_output=True, text=True, timeout=240
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("FACTS ")]
    assert out.returncode == 0 and lines, (
        f"the four-device script failed:\n{out.stderr[-3000:]}"
    )
    return json.loads(lines[-1][len("FACTS ") :])


# --- many devices on one CPU ------------------------------------------------------------------------------


@pytest.mark.claim("sec-devices", "clm-devices-num-cpu-devices")
def test_jax_num_cpu_devices_set_first_gives_that_many_devices(facts):
    assert facts["device count"] == 4


@pytest.mark.claim("sec-devices", "clm-devices-xla-flag-fallback")
def test_the_xla_flag_gives_simulated_devices_too():
    import os

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=3")
    out = subprocess.run(
        [sys.executable, "-c", "import jitbook, jax; print(jax.device_count())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == "3", out.stderr[-2000:]


@pytest.mark.claim("sec-devices", "clm-devices-new-count-refused")
def test_a_new_device_count_is_refused_once_the_backend_runs(facts):
    assert facts["late jax error"].startswith(
        "RuntimeError: jax_num_cpu_devices config should be updated before"
    )
    assert "Restart the kernel and call use_cpu_devices(8)" in facts["late our error"]


def test_use_cpu_devices_in_a_started_process_says_how_to_fix_it():
    jax.devices()  # make sure this process's backend has started, so the call below cannot change it
    with pytest.raises(RuntimeError, match="already started with 1 device"):
        devices.use_cpu_devices(3)
    with pytest.raises(ValueError, match="positive whole number"):
        devices.use_cpu_devices(0)


def test_data_mesh_refuses_more_devices_than_jax_has():
    with pytest.raises(ValueError, match="use_cpu_devices"):
        devices.data_mesh(jax.device_count() + 1)


# --- sharded inputs ---------------------------------------------------------------------------------------


@pytest.mark.claim("sec-devices", "clm-devices-make-mesh-explicit")
def test_make_mesh_is_explicit_by_default_and_typeof_shows_the_sharding(facts):
    assert facts["default axis type"] == "Explicit"
    assert facts["explicit type"] == "float32[8@data,4]"
    assert facts["auto type"] == "float32[8,4]"


@pytest.mark.claim("sec-devices", "clm-devices-explicit-refuses-ambiguous")
def test_explicit_mode_refuses_a_product_over_split_rows(facts):
    assert facts["explicit gram"].startswith(
        "ShardingTypeError: Contracting dimensions are sharded"
    )
    # while tracing: tracing alone (make_jaxpr, no lowering, no compile) refuses it
    assert facts["explicit gram traced"].startswith(
        "ShardingTypeError: Contracting dimensions are sharded"
    )


@pytest.mark.claim("sec-devices-placement", "clm-devices-committed-not-moved")
def test_in_shardings_refuses_an_array_committed_to_another_sharding(facts):
    assert facts["in_shardings mismatch"].startswith(
        "ValueError: Sharding passed to jit does not match the sharding on the respective arg."
    )


@pytest.mark.claim("sec-devices-placement", "clm-devices-sharding-constraint")
def test_with_sharding_constraint_moves_an_intermediate_and_set_mesh_takes_bare_specs(
    facts,
):
    assert facts["constraint"] == ["P(None, 'data')", True, {"all-to-all": 1}]
    assert facts["set_mesh device_put"] == "P('data', None)"
    assert facts["no mesh"].startswith(
        "RuntimeError: with_sharding_constraint requires a non-empty mesh"
    )
    assert "jax.set_mesh(mesh)" in facts["no mesh"]


@pytest.mark.claim("sec-devices-placement", "clm-devices-two-fixes")
def test_the_explicit_error_asks_for_out_sharding_and_both_fixes_work(facts):
    assert (
        "Please specify the output sharding via the `out_sharding` parameter"
        in facts["explicit gram"]
    )
    assert facts["gram fixes"] == {
        "gram_replicated": ["float32[4,4]", True, {"all-reduce": 1}],
        "gram_resharded": ["float32[4,4]", True, {"all-gather": 1}],
    }


@pytest.mark.claim("sec-devices-pmap", "clm-devices-pmap-on-shard-map")
def test_pmap_is_jit_of_shard_map_and_the_old_implementation_is_gone(facts):
    assert facts["pmap"] == [True, "NamedSharding", ["_internal_pmap_axis_name"], False]


@pytest.mark.claim("sec-devices-processes", "clm-devices-local-rows-single-process")
def test_process_local_placement_matches_the_whole_placement_in_one_process(facts):
    assert facts["local placement"] == [True, True, True]


def test_process_rows_refuses_rows_that_do_not_split(monkeypatch):
    monkeypatch.setattr(jax, "process_count", lambda: 4)
    with pytest.raises(ValueError, match="6 rows do not split evenly over 4 processes"):
        devices.process_rows(
            pln.check_data(np.ones((6, 2)), np.zeros((6, 2)), np.ones((6, 1)))
        )


def test_rows_split_over_four_devices_and_out_shardings_is_obeyed(facts):
    assert [(r["device"], r["slice"], r["shard shape"]) for r in facts["shards"]] == [
        (0, "[0:2, 0:4]", "(2, 4)"),
        (1, "[2:4, 0:4]", "(2, 4)"),
        (2, "[4:6, 0:4]", "(2, 4)"),
        (3, "[6:8, 0:4]", "(2, 4)"),
    ]
    assert facts["out_shardings"] == ["P(None, 'data')", True]


# --- sharding is part of the cache key ----------------------------------------------------------------------


@pytest.mark.claim("sec-devices-key", "clm-devices-sharding-key")
def test_a_new_sharding_compiles_new_values_do_not_and_auto_mode_does_not_retrace(
    facts,
):
    rows = facts["key rows"]
    assert [r["compiled"] for r in rows] == [1, 1, 0, 1, 0]
    assert [r["body runs"] for r in rows] == [1, 1, 0, 0, 0]


@pytest.mark.claim("sec-devices-key", "clm-devices-auto-typeof")
def test_on_an_auto_mesh_the_traced_type_records_the_mesh_not_the_split(facts):
    assert facts["abstract"] == [
        [{}, "P(None, None)"],
        [{"data": 4}, "P(None, None)"],
        [{"data": 4}, "P(None, None)"],
    ]


@pytest.mark.claim("sec-devices-key", "clm-devices-explicit-explain")
def test_cache_miss_explanations_name_the_sharding_only_in_explicit_mode(facts):
    auto, explicit = (
        " ".join(facts[k].split()) for k in ("explain auto", "explain explicit")
    )  # unwrap lines
    assert "TRACING CACHE MISS" not in auto
    assert "Argument mapping" in auto and "spec=P(None, 'data')" in auto
    assert "TRACING CACHE MISS" in explicit
    assert "now f32[8,4@data]" in explicit and "before f32[8@data,4]" in explicit
    assert (
        "/" not in explicit.split("defined at ")[1].split()[0]
    )  # a file name, not a build path


# --- what the compiler added ------------------------------------------------------------------------------


@pytest.mark.claim("sec-devices-collectives", "clm-devices-contracted-allreduce")
def test_the_matmul_collectives_for_each_sharding(facts):
    got = [
        (r["a"], r["b"], r["out asked"], r["collectives"], r["out per device"])
        for r in facts["matmul"]
    ]
    assert got == [
        ("P('data', None)", "P(None, None)", "compiler's choice", "none", "(2, 8)"),
        ("P(None, None)", "P(None, 'data')", "compiler's choice", "none", "(8, 2)"),
        (
            "P(None, 'data')",
            "P('data', None)",
            "compiler's choice",
            "1 all-reduce",
            "(8, 8)",
        ),
        (
            "P(None, 'data')",
            "P('data', None)",
            "P('data', None)",
            "1 all-reduce",
            "(2, 8)",
        ),  # no reduce-scatter on CPU
        (
            "P('data', None)",
            "P(None, 'data')",
            "compiler's choice",
            "1 all-gather",
            "(2, 8)",
        ),
        (
            "P(None, 'data')",
            "P(None, None)",
            "compiler's choice",
            "1 all-gather",
            "(8, 8)",
        ),
    ]


@pytest.mark.claim("sec-devices", "clm-devices-shard-map-psum")
def test_shard_map_psum_gives_the_product_with_one_all_reduce(facts):
    assert facts["psum gap"] < 1e-4
    assert facts["psum collectives"] == {"all-reduce": 1}


def test_collectives_needs_a_compiled_program_and_finds_none_on_one_device():
    with pytest.raises(TypeError, match="compiled program"):
        devices.collectives(devices.matmul)
    a = np.ones((4, 4), np.float32)
    assert devices.collectives(jax.jit(devices.matmul).lower(a, a).compile()) == {}


# --- the PLN fit, data-parallel ---------------------------------------------------------------------------


@pytest.mark.claim("sec-devices", "clm-devices-pln-same-losses")
def test_the_sharded_pln_fit_reproduces_the_one_device_losses(facts):
    assert facts["pln gap"] < 1e-4  # float32 partial sums added in another order


@pytest.mark.claim("sec-devices-pln", "clm-devices-step-per-placement")
def test_the_sharded_pln_step_compiles_once_per_placement(facts):
    assert facts["pln step compiles"] == 2
    assert (
        facts["eager optimizer state compiles"] == 2
    )  # the counter moves from one device to the mesh


@pytest.mark.claim("sec-devices-pln", "clm-devices-one-allreduce")
def test_the_pln_step_synchronises_with_one_combined_all_reduce(facts):
    assert facts["pln collectives"] == {"all-reduce": 1}
    assert facts["pln one-device collectives"] == {}
    shapes = [tuple(s) for s in facts["pln reduced shapes"]]
    assert len(shapes) >= 4 and (114, 114) in shapes  # M^T M among them
    assert (
        max(max(s, default=1) for s in shapes) == 114
    )  # nothing with one entry per row (116 rows) crosses devices


@pytest.mark.claim("sec-devices-pln", "clm-devices-allreduce-origins")
def test_the_all_reduce_sums_the_loss_the_gradient_and_the_closed_form(facts):
    """JAX's name stack places each reduced array: the forward pass (jvp), the backward
    pass (transpose(jvp)), and the closed form after the step (neither)."""
    origins = facts["pln reduced origins"]
    parts = [part for _, part, _ in origins]
    assert parts.count("gradient (backward pass)") == 1
    assert parts.count("after the gradient step (closed form)") == 2
    assert parts.count("loss (forward pass)") == len(origins) - 3 >= 2
    closed = sorted(tuple(shape) for _, part, shape in origins if "closed form" in part)
    assert closed == [(114,), (114, 114)]  # the column sums of S^2 and M^T M
    loss = [tuple(shape) for _, part, shape in origins if part.startswith("loss")]
    assert (114, 114) in loss and () in loss  # M^T M of the trace term, and sums
    grad = [op for op, part, _ in origins if part.startswith("gradient")]
    assert grad == ["transpose(jvp())/dot_general"]  # X^T (Y - A)


@pytest.mark.claim("sec-devices-pln", "clm-devices-no-row-dims")
def test_nothing_with_one_entry_per_row_crosses_devices(facts):
    rows, shard_rows = facts["pln rows"]
    assert (rows, shard_rows) == (116, 29)  # 116 rows, 29 on each of four devices
    moved = facts["pln collective shapes"]
    assert {op for op, _ in moved} == {
        "all-reduce"
    }  # no all-gather, all-to-all, permute
    dims = {d for _, shape in moved for d in shape}
    assert 114 in dims  # the taxa: the parse sees the arrays that cross
    assert not dims & {rows, shard_rows}, moved  # neither all the rows nor one device's
    # nothing that scales with the rows: twice the rows, the very same arrays cross
    assert facts["pln collective shapes, twice the rows"] == moved


def test_place_rows_refuses_rows_that_do_not_split(facts):
    assert "6 rows do not split evenly over 4 devices" in facts["uneven rows"]


# --- more than one process --------------------------------------------------------------------------------


@pytest.mark.claim("sec-devices-processes", "clm-devices-two-processes")
def test_two_processes_see_the_global_array_and_reproduce_the_one_device_losses():
    runs = devices_processes.run_processes(
        num_processes=2, devices_per_process=2, repeat=1, n_iter=3, timeout=60
    )
    assert [r["process"] for r in runs] == [0, 1]
    for r in runs:
        assert (r["processes"], r["local devices"], r["global devices"]) == (2, 2, 4)
        assert r["Y global shape"] == [116, 114] and r["Y local shards"] == [
            [29, 114],
            [29, 114],
        ]
        assert r["Y local rows"] == 58  # each process passed only its own half
    one_device = devices.pln_losses(pln.load_oaks(1), 3)
    for r in runs:
        np.testing.assert_allclose(r["losses"], one_device, rtol=1e-4)


def test_a_failing_process_stops_the_run_with_a_clear_error():
    with pytest.raises(
        RuntimeError,
        match=r"(?s)process [01] of 2 exited with code 1\..*positive whole number",
    ):
        devices_processes.run_processes(devices_per_process=0, timeout=60)


def test_a_run_past_its_time_limit_is_stopped():
    with pytest.raises(
        RuntimeError, match="did not finish within 0.5 s and was stopped"
    ):
        devices_processes.run_processes(timeout=0.5)


def test_picture_draws_with_rich_or_says_it_is_missing():
    import importlib.util

    text = devices.picture(jax.numpy.ones((4, 4)))
    if importlib.util.find_spec("rich") is None:
        assert (
            text
            == "(no picture: `visualize_sharding` requires `rich` to be installed.)"
        )
    else:
        assert (
            "CPU 0" in text and "\x1b[" not in text
        )  # plain text, no ANSI colour codes


@pytest.mark.claim("sec-devices-sharded", "clm-devices-visualize-picture")
def test_picture_draws_plain_text_where_rich_would_draw_through_jupyter(monkeypatch):
    rich_console = pytest.importorskip("rich.console")
    monkeypatch.setattr(rich_console, "_is_jupyter", lambda: True)
    text = devices.picture(jax.numpy.ones((4, 4)))
    assert "CPU 0" in text and "\x1b[" not in text


def test_picture_drops_the_colour_codes_rich_adds_in_a_kernel(monkeypatch):
    monkeypatch.setattr(
        jax.debug,
        "visualize_array_sharding",
        lambda array, use_color: print("│  CPU \x1b[1;36m0\x1b[0m   │"),
    )
    assert devices.picture(None) == "│  CPU 0   │"
