"""Exercises of the chapter "jit across devices and processes": each checker compiles
the answer for a mesh of every device and reads the collectives from the compiled
program."""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jitbook.cache import fresh_jit
from jitbook.chapters import devices

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _mesh():
    """A mesh of every device; the exercises mean nothing on one device, so say how to
    get more."""
    if jax.device_count() < 2:
        raise Wrong(
            f"JAX sees {jax.device_count()} device here; these exercises need several. "
            "Restart the kernel "
            "and run the chapter's first cell, which asks for simulated CPU devices "
            "before any JAX work."
        )
    return devices.data_mesh()


def _compiled(fn, *args):
    try:
        return fresh_jit(fn).lower(*args).compile()
    except Exception as err:
        raise Wrong(f"jit could not compile your function: {error_line(err)}") from None


@exercise("devices.batch-axis", "batch_spec", "data parallelism without collectives", 1)
def _batch_axis(answer):
    """Each row of x is one example; split the rows and keep the features whole:
    P(axis, None).
    """
    mesh = _mesh()
    expect(
        type(answer) is P,
        "is a PartitionSpec",
        f"batch_spec is a {type(answer).__name__}; make it a "
        "jax.sharding.PartitionSpec, e.g. P('data', None).",
    )
    n = mesh.devices.size
    x = np.random.default_rng(0).normal(size=(4 * n, 2 * n)).astype(np.float32)
    w = np.random.default_rng(1).normal(size=(2 * n, 3)).astype(np.float32)
    try:
        xs = jax.device_put(x, NamedSharding(mesh, answer))
    except Exception as err:
        raise Wrong(
            f"jax.device_put refused batch_spec {answer}: {error_line(err)}"
        ) from None
    compiled = _compiled(devices.predict, xs, w)
    found = devices.collectives(compiled)
    expect(
        not found,
        "the compiled program has no collectives",
        f"the compiled program runs {devices.words(found)}: splitting the features "
        "makes devices exchange data.",
    )
    out_shard = compiled.output_shardings.shard_shape((4 * n, 3))
    expect(
        out_shard[0] < 4 * n,
        f"the output is split over the batch ({out_shard} per device)",
        f"each device computes the whole output {out_shard}: the batch axis is not on "
        "the mesh.",
    )
    expect(
        np.allclose(np.asarray(compiled(xs, w)), np.tanh(x @ w), atol=1e-5),
        "same result as on one device",
        "the sharded result differs from tanh(x @ w).",
    )


@exercise("devices.one-sharding", "to_one_sharding", "sharding in the cache key", 2)
def _one_sharding(answer):
    """jax.device_put(x, NamedSharding(mesh, P('data', None))) moves any array to one
    chosen sharding.
    """
    mesh = _mesh()
    n, axis = mesh.devices.size, mesh.axis_names[0]
    x = np.random.default_rng(2).normal(size=(2 * n, 2 * n)).astype(np.float32)
    loaders = {
        "rows": P(axis, None),
        "columns": P(None, axis),
        "columns, new values": P(None, axis),
        "replicated": P(),
    }
    values = {
        "rows": x,
        "columns": x,
        "columns, new values": 2 * x,
        "replicated": 3 * x,
    }
    step = fresh_jit(devices.sum_of_squares)
    replicated = []
    with judge.compiles_of(step) as counted:
        for name, spec in loaders.items():
            placed = call_answer(
                answer, jax.device_put(values[name], NamedSharding(mesh, spec))
            )
            if not judge.is_array(placed):
                raise Wrong(
                    f"to_one_sharding returned a {type(placed).__name__}, not a "
                    "jax.Array."
                )
            if len(placed.sharding.device_set) != n:
                raise Wrong(
                    f"for the {name} input it returned an array on "
                    f"{len(placed.sharding.device_set)} "
                    f"device(s) out of {n}: keep the data spread over the mesh."
                )
            if placed.sharding.is_fully_replicated:
                replicated.append(name)
            got, want = (
                float(step(placed)),
                float(np.sum(values[name].astype(np.float64) ** 2)),
            )
            if abs(got - want) > 1e-4 * want:
                raise Wrong(
                    f"for the {name} input the values changed: sum of squares "
                    f"{got:.6g}, not {want:.6g}."
                )
    judge.expect_compiles(
        counted,
        1,
        f"same values, on all {n} devices, and one compile for rows, columns and "
        "replicated inputs",
        f"the jitted step compiled {{times}} for {len(loaders)} inputs: they still "
        "reach it with different shardings.",
    )
    expect(
        not replicated,
        "each device holds a part of the data",
        f"for the {', '.join(replicated)} input(s) it returned a whole copy of the "
        "array on every device (replicated): split it over the mesh, so each device "
        "holds a part.",
    )


@exercise("devices.psum", "sharded_dot", "shard_map and psum", 2)
def _psum(answer):
    """jax.shard_map(local, mesh=mesh, in_specs=(P(None, 'data'), P('data', None)),
    out_specs=P()), with local(a, b) = jax.lax.psum(a @ b, 'data').
    """
    mesh = _mesh()
    k = 3 * mesh.devices.size
    rng = np.random.default_rng(3)
    a, b = (
        rng.normal(size=(5, k)).astype(np.float32),
        rng.normal(size=(k, 4)).astype(np.float32),
    )
    got = judge.array(call_answer(answer, a, b), "sharded_dot")
    judge.expect_agrees(
        got,
        a @ b,
        "computes a @ b",
        f"sharded_dot(a, b) gave {got.shape} values that differ from a @ b.",
        atol=1e-4,
    )
    try:
        program = str(jax.make_jaxpr(answer)(a, b))
    except Exception as err:
        raise Wrong(f"tracing sharded_dot failed: {error_line(err)}") from None
    expect(
        "shard_map" in program,
        "uses shard_map",
        "no shard_map in its program: write the per-device code.",
    )
    expect(
        "psum" in program,
        "sums the partial products with psum",
        "its program has no psum: each device holds only part of the sum over k.",
    )
    found = devices.collectives(_compiled(answer, a, b))
    expect(
        found.get("all-reduce", 0) >= 1,
        f"the compiled program runs {devices.words(found)}",
        f"the compiled program runs {devices.words(found)}, no all-reduce: is the "
        "contraction split over the mesh?",
    )


@exercise("devices.column-stats", "column_stats", "reductions over sharded rows", 2)
def _column_stats(answer):
    """Means and x.T @ x reduce over rows: each device reduces its own rows and XLA
    adds an all-reduce. Avoid operations that need every row in one place (sorting,
    reshaping rows away).
    """
    mesh = _mesh()
    n = mesh.devices.size
    x = np.random.default_rng(4).normal(size=(16 * n, 3)).astype(np.float32)
    xs = jax.device_put(x, NamedSharding(mesh, P(mesh.axis_names[0], None)))
    out = call_answer(answer, xs)
    if not (type(out) is tuple and len(out) == 2):
        raise Wrong(
            "column_stats must return a pair (mean, covariance), it returned "
            f"{type(out).__name__}."
        )
    mean, cov = (judge.array(v, "column_stats") for v in out)
    judge.expect_agrees(
        mean,
        x.mean(axis=0),
        "right column means",
        f"the means {mean.round(4).tolist()} differ from "
        f"{x.mean(axis=0).round(4).tolist()}.",
    )
    judge.expect_agrees(
        cov,
        np.cov(x.T),
        "right covariance (divided by n - 1)",
        "the covariance differs from np.cov(x.T) (which divides by n - 1).",
        atol=1e-4,
    )
    found = devices.collectives(_compiled(answer, xs))
    expect(
        "all-gather" not in found,
        f"no all-gather: the rows stay where they are ({devices.words(found)})",
        f"the compiled program runs {devices.words(found)}: an all-gather copies every "
        "row to every device.",
    )
