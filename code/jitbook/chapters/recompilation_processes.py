"""Static arguments and compiling again, the fresh-process demos: a cold start, the
persistent compilation cache shared by two processes, its explanations, and a cache
directory moved too late. Each runs a new Python process, so the page shows a true cold
start whatever ran before it.

Taught in Static arguments and compiling again, A cache that outlives the process.
"""

import os
import tempfile

import jax
import jax.numpy as jnp

from jitbook.fresh import run_for_json

# --- the persistent compilation cache -------------------------------------------------


def deep(x, steps: int):
    """A program that takes XLA a noticeable time to compile: ``steps`` unrolled
    matmul-tanh layers.

    Taught in Static arguments and compiling again, A cache that outlives the process.
    """
    for i in range(steps):
        x = jnp.tanh(x @ x.T * 0.01 + i)
    return x


_CHILD = """
import json, os, sys, time
start = time.perf_counter()
import jitbook, jax, jax.numpy as jnp
from jitbook.chapters import recompilation_processes as processes
cache_dir, min_seconds, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
jax.config.update("jax_compilation_cache_dir", cache_dir)
jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
x = jnp.ones((32, 32))
ready = time.perf_counter()
with jitbook.count_compiles() as log, jitbook.count_body_runs(processes.deep) as runs:
    jax.block_until_ready(jax.jit(processes.deep, static_argnums=1)(x, steps))
done = time.perf_counter()
print(json.dumps({
    "trace events": log.trace_events.count("deep"), "body runs": runs.count,
    "lowerings": log.lowerings.count("deep"),
    "compile events": log.count_for("deep"), "compile (s)": log.compile_seconds,
    "disk cache hits": log.persistent_cache_hits, "first call (s)": done - ready,
    "process start to result (s)": done - start,
    "files in cache dir": len(os.listdir(cache_dir)),
}))
"""


def cold_start(cache_dir: str, min_compile_seconds: float, steps: int) -> dict:
    """Run ``jit(deep)`` once in a new Python process using the disk cache in
    ``cache_dir``; what it cost."""
    if not os.path.isdir(cache_dir):
        raise ValueError(
            f"cache_dir {cache_dir!r} is not a directory; "
            "create it first (tempfile.mkdtemp())."
        )
    return run_for_json(
        ["-c", _CHILD, cache_dir, str(min_compile_seconds), str(steps)],
        "the cold-start process",
    )


def persistent_cache_runs(
    steps: int, min_compile_seconds: float | None = None
) -> list[dict]:
    """Two fresh processes sharing one new cache directory: the first compiles, does the
    second load from disk?

    ``min_compile_seconds=None`` keeps JAX's default threshold (programs faster to
    compile are not written).
    """
    threshold = (
        jax.config.values["jax_persistent_cache_min_compile_time_secs"]
        if min_compile_seconds is None
        else min_compile_seconds
    )
    with tempfile.TemporaryDirectory(prefix="jitbook-cache-") as cache_dir:
        rows = []
        for process in ("first", "second"):
            row = {"min compile time (s)": threshold, "process": process}
            row.update(cold_start(cache_dir, threshold, steps))
            rows.append(row)
    return rows


_LATE_CHILD = """
import json, os, sys
import jitbook, jax, jax.numpy as jnp
first, second = sys.argv[1], sys.argv[2]
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_compilation_cache_dir", first)
jax.jit(lambda x: x * 2.0)(jnp.ones(2))
jax.config.update("jax_compilation_cache_dir", second)
jax.jit(lambda x: jnp.tanh(x) @ x)(jnp.ones((4, 4)))
print(json.dumps({"files in the first directory": len(os.listdir(first)),
                  "files in the second directory": len(os.listdir(second))}))
"""


_EXPLAIN_CHILD = """
import json, sys
import jitbook, jax, jax.numpy as jnp
from jitbook import cache
from jitbook.chapters import recompilation
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
x = jnp.ones(3)
with jitbook.capture_jax_logs(log_compiles=False) as messages:
    jax.jit(recompilation.add_one)(x)
print(json.dumps([cache.without_paths(m) for m in messages]))
"""


def explained_with_disk_cache() -> list[str]:
    """What ``jax_explain_cache_misses`` writes for a first call in a new process whose
    persistent cache is on (threshold 0): the messages, paths and addresses masked."""
    with tempfile.TemporaryDirectory(prefix="jitbook-explain-") as cache_dir:
        return run_for_json(["-c", _EXPLAIN_CHILD, cache_dir], "the child process")


def moved_cache_dir() -> dict:
    """A new process sets a cache directory, compiles, then points the cache elsewhere
    and compiles again.

    JAX reads the directory once, at the first compile that uses the cache: the later
    setting is ignored.
    """
    with (
        tempfile.TemporaryDirectory(prefix="jitbook-a-") as first,
        tempfile.TemporaryDirectory(prefix="jitbook-b-") as second,
    ):
        return run_for_json(["-c", _LATE_CHILD, first, second], "the child process")
