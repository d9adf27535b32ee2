"""Exercises of the chapter "jit across devices and processes".

Values come from the answer called on inputs drawn per student; the program a
``shard_map`` answer lowers to is read here (its all-reduce, its partitions). What
only a compile on the student's devices shows (the collectives XLA adds for sharded
rows, the shardings an array lands on) comes from probes there: those rows are
self-reported. Shapes are multiples of 8, so any mesh of up to 8 devices splits them.
"""

import re

import numpy as np

from . import Wrong, ask, exercise, expect, judge


def _several(devices: int) -> None:
    """The exercises mean nothing on one device: say how to get more."""
    if devices < 2:
        raise Wrong(
            f"JAX sees {devices} device in your notebook; these exercises need "
            "several. "
            "Restart the kernel and run the chapter's first cell, which asks for "
            "simulated CPU devices before any JAX work."
        )


def _words(counts: dict) -> str:
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items())) or "none"


def _on_rows(entry) -> bool:
    return entry == "data" or (type(entry) is list and "data" in entry)


@exercise("devices.batch-axis", "batch_spec", "data parallelism without collectives", 1)
def _batch_axis(rng):
    """Each row of x is one example; split the rows and keep the features whole:
    P(axis, None).
    """
    (spec,) = yield [ask.probe("partition_spec")]
    expect(
        spec["entries"] is not None,
        "is a PartitionSpec",
        f"batch_spec is a {spec['type']}; make it a jax.sharding.PartitionSpec, e.g. "
        "P('data', None).",
    )
    if len(spec["entries"]) > 2:
        raise Wrong(
            f"batch_spec {tuple(spec['entries'])} names {len(spec['entries'])} "
            "dimensions; x has two (examples, features)."
        )
    entries = list(spec["entries"]) + [None] * (2 - len(spec["entries"]))
    expect(
        entries[1] is None,
        "keeps the features whole on each device (no collective needed)",
        f"batch_spec {tuple(spec['entries'])} splits the features of x: each device "
        "then holds part of every example and the devices must add their partial "
        "products (an all-reduce). Keep the second dimension None.",
    )
    expect(
        _on_rows(entries[0]),
        "splits the batch (the rows) over the mesh axis 'data'",
        f"batch_spec {tuple(spec['entries'])} does not split the rows over the mesh "
        "axis 'data': each device would compute the whole output.",
    )


@exercise("devices.one-sharding", "to_one_sharding", "sharding in the cache key", 2)
def _one_sharding(rng):
    """jax.device_put(x, NamedSharding(mesh, P('data', None))) moves any array to one
    chosen sharding.
    """
    shape = (8 * int(rng.integers(1, 5)), 8 * int(rng.integers(1, 5)))
    x = rng.normal(size=shape).astype(np.float32)
    value, found = yield [ask.call(x), ask.probe("placements", x)]
    expect(
        judge.agrees(value, x, atol=0),
        "keeps the values",
        f"to_one_sharding(x) changed the values of a {shape[0]} x {shape[1]} array; "
        "move it, do not compute on it.",
    )
    _several(found["devices"])
    if "placed" not in found:
        raise Wrong(
            f"to_one_sharding returned a {found['type']} for a sharded input, not a "
            "jax.Array."
        )
    placed, n = found["placed"], found["devices"]
    scales = {"rows": 1, "columns": 1, "columns, new values": 2, "replicated": 3}
    changed = [
        k
        for k, got in placed.items()
        if not judge.agrees(got["values"], scales[k] * x, atol=0)
    ]
    expect(
        not changed,
        "values kept for rows, columns and replicated inputs",
        f"for the {', '.join(changed)} input(s) the values changed.",
        self_reported=True,
    )
    fewer = {k: got["devices"] for k, got in placed.items() if got["devices"] != n}
    expect(
        not fewer,
        f"every result spread over all {n} devices",
        "for the "
        + ", ".join(f"{k} input it returned an array on {d}" for k, d in fewer.items())
        + f" device(s) out of {n}: keep the data spread over the mesh.",
        self_reported=True,
    )
    replicated = [name for name, got in placed.items() if got["replicated"]]
    expect(
        not replicated,
        "each device holds a part of the data",
        f"for the {', '.join(replicated)} input(s) it returned a whole copy of the "
        "array on every device (replicated): split it over the mesh, so each device "
        "holds a part.",
        self_reported=True,
    )
    expect(
        found["programs"] == 1,
        "one compile of a jitted step for rows, columns and replicated inputs",
        f"a jitted step compiled {found['programs']} programs for {len(placed)} "
        "inputs: they still reach it with different shardings.",
        self_reported=True,
    )


@exercise("devices.psum", "sharded_dot", "shard_map and psum", 2)
def _psum(rng):
    """jax.shard_map(local, mesh=mesh, in_specs=(P(None, 'data'), P('data', None)),
    out_specs=P()), with local(a, b) = jax.lax.psum(a @ b, 'data').
    """
    m, k, n = (
        int(rng.integers(2, 12)),
        8 * int(rng.integers(1, 6)),
        int(rng.integers(2, 12)),
    )
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    got, text = yield [ask.call(a, b), ask.lower(ask.spec((m, k)), ask.spec((k, n)))]
    judge.expect_agrees(
        got,
        a.astype(np.float64) @ b,
        "computes a @ b",
        f"sharded_dot(a, b) for a {m} x {k} times {k} x {n} product differs from "
        "a @ b.",
        atol=1e-4,
    )
    expect(
        "manual_computation" in text or "SPMDFullToShardShape" in text,
        "its program holds per-device code (shard_map)",
        "no shard_map in its program: write the per-device code with jax.shard_map.",
    )
    partitions = re.search(r"mhlo\.num_partitions = (\d+)", text)
    _several(int(partitions.group(1)) if partitions else 1)
    expect(
        "all_reduce" in text,
        "the program sums the partial products across devices (an all-reduce)",
        "its program has no all-reduce: each device holds only part of the sum over "
        "k; add the partial products with jax.lax.psum.",
    )


@exercise("devices.column-stats", "column_stats", "reductions over sharded rows", 2)
def _column_stats(rng):
    """Means and x.T @ x reduce over rows: each device reduces its own rows and XLA
    adds an all-reduce. Avoid operations that need every row in one place (sorting,
    reshaping rows away).
    """
    rows, cols = 8 * int(rng.integers(2, 8)), int(rng.integers(2, 7))
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    out, found = yield [ask.call(x), ask.probe("collectives_rows_split", x)]
    if not (type(out) is tuple and len(out) == 2):
        raise Wrong(
            "column_stats must return a pair (mean, covariance), it returned "
            f"{type(out).__name__}."
        )
    mean, cov = (judge.array(v, "column_stats") for v in out)
    want = x.astype(np.float64)
    judge.expect_agrees(
        mean,
        want.mean(axis=0),
        "right column means",
        f"for a {rows} x {cols} x the means differ from x.mean(axis=0).",
        atol=1e-4,
    )
    judge.expect_agrees(
        cov,
        np.cov(want.T),
        "right covariance (divided by n - 1)",
        "the covariance differs from np.cov(x.T) (which divides by n - 1).",
        atol=1e-4,
    )
    _several(found["devices"])
    collectives = found["collectives"]
    expect(
        "all-gather" not in collectives,
        f"no all-gather: the rows stay where they are ({_words(collectives)})",
        f"the compiled program runs {_words(collectives)}: an all-gather copies every "
        "row to every device.",
        self_reported=True,
    )
