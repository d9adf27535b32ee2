"""The GPU chapter: `python -m jitbook.bench gpu --small` writes a JSON the chapter can
read; the chapter's claims about JAX measured on the CPU (cache key, lowered precision,
trip count, unroll and fusion, LAPACK calls) or checked on the recorded H100 run in
data/gpu/ (each test says which); its helpers' input checks."""

import json
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook.bench import gpu as bench_gpu
from jitbook.bench import main
from jitbook.cache import count_compiles
from jitbook.chapters import gpu, pln
from jitbook.chapters.pln.fast import fast_program
from jitbook.chapters.pln.lapack import lapack_calls
from jitbook.chapters.pln.levels import scan_program
from jitbook.chapters.pln.model import closed_form_sigma, neg_elbo
from jitbook.chapters.pln.profile import compiled_fit

RUN = gpu.load_run("h100")
TUTORIAL = json.loads((gpu.DATA_DIR / "tutorial.json").read_text())


@pytest.fixture(scope="module")
def small():
    return pln.device_data(pln.load_oaks(1))


# --- the bench, run on the CPU at toy sizes


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "small.json"
    only = "levels,dispatch,precision,precision_terms,presets,loops,profile,gpu_level"
    main(["gpu", "--small", "--only", only, "--out", str(out)])
    return json.loads(out.read_text())


def test_bench_gpu_small_writes_a_json_the_chapter_reads(small_run):
    assert small_run["small"] and small_run["provenance"]["platform"] == "cpu"
    failed = {
        k: v["error"]
        for k, v in small_run.items()
        if isinstance(v, dict) and "error" in v
    }
    assert not failed, failed
    assert small_run["provenance"]["commit"] and small_run["provenance"]["date"]
    # the readers the chapter calls work on the fresh run as on the recorded one
    assert gpu.where(small_run).startswith("cpu")
    assert (
        gpu.tutorial_rows(small_run, {"levels": [{**TUTORIAL["levels"][1]}]})[0][
            "book level"
        ]
        == "scan"
    )
    assert gpu.loop_rows(small_run)[0]["kernels per turn"] >= 1
    assert {r["level"] for r in gpu.trace_rows(small_run)} == {"scan", "fast"}
    assert (
        gpu.race_verdict(small_run["gpu_level"]["race"], "unroll=1", "fast").b == "fast"
    )
    timeline, rows = gpu.timeline_series(small_run["profile"]["fast"])
    assert list(timeline) == [r["family"] for r in rows]
    # on the CPU the two precisions compile to the same loss
    fits = {
        (r["level"], r["precision"]): r["final loss"]
        for r in small_run["precision"]["fits"]
    }
    assert fits["scan", "default"] == fits["scan", "highest"]


def test_bench_refuses_an_unknown_section(tmp_path):
    with pytest.raises(SystemExit, match="unknown section"):
        main(["gpu", "--small", "--only", "levles", "--out", str(tmp_path / "x.json")])


def test_load_run_names_what_it_has():
    with pytest.raises(FileNotFoundError, match="h100"):
        gpu.load_run("a100")


def test_recorded_run_says_where_it_was_made():
    prov = RUN["provenance"]
    assert prov["device"] == "NVIDIA H100 80GB HBM3" and prov["platform"] == "gpu"
    assert prov["jax"] and prov["plugins"] and prov["torch"] and prov["commit"]
    assert gpu.where(RUN, "memory") != gpu.where(RUN, "levels")
    assert gpu.where(RUN, "command_buffers") != gpu.where(RUN, "memory")


# --- claims measured on the CPU


@pytest.mark.claim("sec-gpu-precision", "clm-gpu-cache-key")
def test_precision_setting_is_part_of_the_cache_key():
    def double(m):
        return m @ m

    jitted = jax.jit(double)
    m = jnp.ones((4, 4))
    counts = []
    for setting in (None, "highest", None):
        with count_compiles() as log:
            if setting is None:
                jitted(m)
            else:
                with jax.default_matmul_precision(setting):
                    jitted(m)
        counts.append(log.count_for("double"))
    assert counts == [1, 1, 0]  # a new setting compiles; back to the first, its program


@pytest.mark.claim("sec-gpu-precision", "clm-gpu-precision-lowered")
def test_default_matmul_precision_reaches_every_dot(small):
    default = gpu.lowered_precisions(scan_program.lower(small, 3, 1.0).as_text())
    with jax.default_matmul_precision("highest"):
        highest = gpu.lowered_precisions(scan_program.lower(small, 3, 1.0).as_text())
    assert default and set(default) == {"DEFAULT"}
    assert len(highest) == len(default) and set(highest) == {"HIGHEST"}


@pytest.mark.claim("sec-gpu-loops", "clm-gpu-trip-count")
def test_static_trip_count_is_known_to_xla_traced_is_not():
    x = jnp.ones(1000)
    static = jax.jit(gpu.fori_static, static_argnums=1).lower(x, 100).compile()
    traced = jax.jit(gpu.fori_traced).lower(x, jnp.asarray(100)).compile()
    assert gpu.trip_count(static.as_text()) == 100
    assert gpu.trip_count(traced.as_text()) is None
    assert "while" in str(jax.make_jaxpr(gpu.fori_traced)(x, jnp.asarray(100)))


@pytest.mark.claim("sec-gpu-loops", "clm-gpu-unroll-fusion")
def test_unroll_fuses_an_elementwise_body_and_not_a_walled_one():
    x = jnp.ones(1000)

    def kernels(fusable, unroll):
        fn = partial(gpu.scan_unrolled, unroll=unroll, fusable=fusable)
        text = jax.jit(fn, static_argnums=1).lower(x, 64).compile().as_text()
        return len(gpu.kernels(text, gpu.loop_body(text))), gpu.trip_count(text)

    assert kernels(True, 1) == (2, 64)  # the body and the loop counter
    assert kernels(True, 32) == (2, 2)  # 32 copies, one kernel
    assert kernels(False, 32) == (33, 2)  # 32 copies behind barriers, 32 kernels
    out = jax.jit(partial(gpu.scan_unrolled, unroll=32), static_argnums=1)(x, 64)
    np.testing.assert_allclose(out, gpu.scan_unrolled(x, 64), rtol=1e-6)


@pytest.mark.claim("sec-gpu-trace", "clm-gpu-lapack")
def test_factorisations_of_the_compiled_loops_on_the_cpu(small):
    fast = lapack_calls(compiled_fit(small, 5, "fast"))
    scan = lapack_calls(compiled_fit(small, 5, "scan"))
    assert fast == {
        "LU factorisation (getrf)": 0,
        "Cholesky factorisation (potrf)": 1,
        "triangular solve (trsm)": 2,
    }
    assert scan["LU factorisation (getrf)"] == 2


def test_loss_terms_is_the_scan_loss_at_the_closed_form_omega(small):
    params = scan_program(small, 20, 1.0)[1]
    Omega = jnp.linalg.inv(closed_form_sigma(params.M, params.S))
    terms = gpu.loss_terms(params, small)
    np.testing.assert_allclose(terms["loss"], neg_elbo(params, small, Omega), rtol=1e-6)
    assert gpu.SCAN_DOTS[2] in dict.fromkeys(gpu.SCAN_DOTS)
    n, p = small.Y.shape
    np.testing.assert_allclose(terms["trace term"], n * p / 2, rtol=1e-4)


def test_gpu_program_unroll_one_is_the_fast_level(small):
    a = gpu.gpu_program(small, 10, 1.0)[0]
    np.testing.assert_array_equal(
        np.asarray(a), np.asarray(fast_program(small, 10, 1.0)[0])
    )


def test_trace_summary_counts_kernels_and_gaps(tmp_path):
    import gzip

    events = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": 1,
            "args": {"name": "/device:GPU:0"},
        },
        {"ph": "X", "pid": 1, "ts": 0.0, "dur": 2.0, "name": "gemm_fusion_dot"},
        {"ph": "X", "pid": 1, "ts": 1.0, "dur": 2.0, "name": "void trsm_left_kernel"},
        {"ph": "X", "pid": 1, "ts": 10.0, "dur": 1.0, "name": "loop_add_fusion"},
        {"ph": "X", "pid": 2, "ts": 0.0, "dur": 50.0, "name": "host work"},
    ]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    s = gpu.trace_summary(path, n_iter=1)
    assert s["kernels"] == 3 and s["span us"] == 11.0
    assert s["busy us"] == 4.0 and s["gaps us"] == 7.0  # overlapping kernels count once
    assert set(s["kinds"]) == {"matmul", "solver", "fusion"}


# --- claims checked on the recorded H100 run (data/gpu/h100.json)


@pytest.mark.claim("sec-gpu-precision", "clm-gpu-trace-product")
def test_recorded_trace_product_moves_the_scan_loss():
    rows = {
        (r["exact products"], r["setting"]): r for r in RUN["precision_terms"]["rows"]
    }
    half = rows["none", "default"]["n p / 2"]
    default, fixed = rows["none", "default"], rows["(M^T M + D) @ Omega", "default"]
    highest = rows["none", "highest"]
    assert abs(default["trace term"] - half) > 100  # off under the default
    assert abs(fixed["trace term"] - half) < 1  # that one product exact: back
    assert abs(highest["trace term"] - half) < 1
    # and the loss with that one product exact is the "highest" loss, to float32 rounding
    assert (
        abs(fixed["loss"] - highest["loss"])
        < abs(default["loss"] - highest["loss"]) / 10
    )


@pytest.mark.claim("sec-gpu-precision", "clm-gpu-fast-trace")
def test_recorded_fast_trace_term_holds_under_the_default():
    rows = {
        (r["exact products"], r["setting"]): r for r in RUN["precision_terms"]["rows"]
    }
    default = rows["none", "default"]
    assert abs(default["fast trace term"] - default["n p / 2"]) < 1
    # the fast level's own loss: its Gram matrix and Omega meet in an elementwise product
    # (then a sum), never in a matrix product
    from jitbook.chapters.pln import init_params
    from jitbook.chapters.pln.fast import FastState, loss_and_grads, precision

    data = pln.device_data(pln.load_oaks(1))
    params = init_params(data)
    n, p = data.Y.shape
    g = params.M.T @ params.M + jnp.diag(jnp.sum(params.S**2, axis=0))
    Omega, logdet = precision(g, n)
    state = FastState(params, None, g, Omega, logdet)
    args = (params, data, state, jnp.float32(0.0), data.X.T @ data.Y)
    closed = jax.make_jaxpr(loss_and_grads)(*args)
    leaves = jax.tree.leaves(args)
    gram_var, omega_var = (
        closed.jaxpr.invars[next(i for i, x in enumerate(leaves) if x is a)]
        for a in (g, Omega)
    )

    # (a matrix product, jnp.matmul or @, would meet them as a jit or dot_general equation)
    meetings = [
        e.primitive.name
        for e in closed.jaxpr.eqns
        if all(any(v is w for v in e.invars) for w in (gram_var, omega_var))
    ]
    assert meetings == ["mul"]


@pytest.mark.claim("sec-gpu-precision", "clm-gpu-default-tf32")
def test_recorded_default_float32_matmul_is_tf32():
    err = {
        r["preset"]: r.get("max error / max |entry|") for r in RUN["presets"]["rows"]
    }
    assert err["DEFAULT"] == err["TF32_TF32_F32"]
    assert err["DEFAULT"] > 50 * err["F32_F32_F32"]


def test_recorded_verdicts_the_page_states():
    race = RUN["torch"]["race"]
    fast = gpu.race_verdict(race, "JAX fast, highest", "torch.compile fast")
    scan = gpu.race_verdict(race, "JAX scan, highest", "torch.compile scan")
    assert fast.faster and scan.faster
    assert RUN["torch"]["float32 matmul precision"] == "highest"
    level = RUN["gpu_level"]["race"]
    assert all(
        gpu.race_verdict(level, k, "fast").faster is None
        for k in level["times"]
        if k.startswith("unroll")
    )


def test_cpu_refuses_the_tf32_preset():
    m = jnp.ones((4, 4))
    with pytest.raises(Exception, match="TF32_TF32_F32"):
        jnp.matmul(m, m, precision=jax.lax.DotAlgorithmPreset.TF32_TF32_F32)


def test_bench_sections_are_known():
    assert set(bench_gpu.SECTIONS) >= {
        "levels",
        "precision",
        "torch",
        "loops",
        "memory",
    }


# --- bad input gets a message that says what was wrong


def test_hlo_readers_say_what_is_missing(tmp_path):
    import gzip

    text = jax.jit(lambda x: x * 2).lower(jnp.ones(3)).compile().as_text()
    with pytest.raises(KeyError, match="no computation 'body'"):
        gpu.kernels(text, "body")
    with pytest.raises(ValueError, match="no while loop"):
        gpu.loop_body(text)
    path = tmp_path / "empty.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    with pytest.raises(ValueError, match="no kernel events"):
        gpu.trace_summary(path, 1)


def test_jit_gain_is_eager_over_scan_per_device_and_names_a_missing_level():
    from jitbook.chapters import gpu

    run = gpu.load_run("h100")
    ms = {r["level"]: r["ms / iter (min)"] for r in run["levels"]["rows"]}
    assert gpu.jit_gain(run["levels"]["rows"]) == ms["eager"] / ms["scan"] > 10
    with pytest.raises(ValueError, match="eager"):
        gpu.jit_gain([{"level": "scan", "ms / iter (min)": 1.0}])


def test_the_pages_eager_baseline_adds_the_recorded_compiles_to_the_warm_run():
    """Where the GPU page gives the eager level's 1,000 iterations, it says warm, and
    gives a first fit as at least the warm run plus the compiles the run recorded."""
    import re
    from pathlib import Path

    from jitbook import display

    text = (Path(__file__).parents[1] / "chapters" / "gpu.qmd").read_text()
    tutorial = json.loads((gpu.DATA_DIR / "tutorial.json").read_text())
    ns = {"gpu": gpu, "run": RUN, "display": display, "tutorial": tutorial}
    cell = next(
        c
        for c in re.findall(r"```\{python\}\n(.*?)```", text, re.S)
        if "eager_raced_iters =" in c
    )
    exec(cell, ns)
    start = text.index("The tutorial's headline compared")
    section = text[start : text.index("## JAX against torch.compile", start)]
    said = {e: str(eval(e, ns)) for e in re.findall(r"`\{python\} (.+?)`", section)}
    eager = gpu.level_row(RUN, "eager")
    warm = eager["ms / iter (min)"] * RUN["levels"]["iters"] / 1e3
    assert display.duration(warm) in said.values()
    assert "for 1,000 warm iterations" in " ".join(section.split())
    first = display.duration(warm + eager["compile s"])
    assert (
        eager["compile s"] > 0
        and first in said.values()
        and first != said.get("display.duration(eager_1000)")
    )
