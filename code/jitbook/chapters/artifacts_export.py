"""The artifacts chapter's shipped programs: a small model, its export for any batch
size, a fresh process that loads and calls it, and a compiled executable serialized
and loaded back.

``jitbook.chapters.artifacts`` re-exports these names; the chapter calls them there.
"""

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jitbook.cache import count_compiles, fresh_jit


def predict(w: jax.Array, x: jax.Array) -> jax.Array:
    """A small model to ship: a batch of inputs ``x`` (batch x features) through one
    tanh layer ``w``.

    Taught in Keeping, reusing and shipping compiled programs, Saving and shipping a
    program.
    """
    return jnp.tanh(x @ w)


def batch_spec(
    features: int, name: str = "b", constraints: Sequence[str] = ()
) -> jax.ShapeDtypeStruct:
    """The abstract input of ``predict`` for any batch size: shape ``(name, features)``,
    float32.

    Taught in Keeping, reusing and shipping compiled programs, Saving and shipping a
    program.
    """
    (batch,) = export.symbolic_shape(name, constraints=tuple(constraints))
    return jax.ShapeDtypeStruct((batch, features), jnp.float32)


_CHILD = r"""
import json, sys, time
start = time.perf_counter()
import jitbook  # noqa: F401  (the miscompile guard, as in every process of the book)
import jax
import numpy as np
from jax import export
with open(sys.argv[1], "rb") as f:
    exported = export.deserialize(bytearray(f.read()))
args = np.load(sys.argv[2])
with jitbook.count_compiles() as log:
    outputs = exported.call(*[args[f"arg{i}"] for i in range(len(args.files))])
print(json.dumps({
    "function": exported.fun_name, "inputs": [str(a) for a in exported.in_avals],
    "outputs": np.asarray(outputs).tolist(), "jax": jax.__version__,
    "compiles": log.count, "seconds": time.perf_counter() - start,
}))
"""


def call_in_fresh_process(serialized: bytes, *args, time_limit: float = 120.0) -> dict:
    """Load a serialized export in a new Python process, call it on ``args``, and report
    what it returned.

    The child never sees the function's source: only the bytes and the arguments,
    through files in a temporary directory that is removed afterwards. Taught in
    Keeping, reusing and shipping compiled programs, Saving and shipping a program.
    """
    if not isinstance(serialized, (bytes, bytearray)):
        raise TypeError(
            "call_in_fresh_process takes the bytes of exported.serialize(), got "
            f"{type(serialized).__name__}."
        )
    with tempfile.TemporaryDirectory(prefix="jitbook-export-") as folder:
        program, inputs = (
            os.path.join(folder, "program.bin"),
            os.path.join(folder, "inputs.npz"),
        )
        with open(program, "wb") as f:
            f.write(serialized)
        np.savez(inputs, **{f"arg{i}": np.asarray(a) for i, a in enumerate(args)})
        try:
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, program, inputs],
                capture_output=True,
                text=True,
                env=dict(os.environ),
                timeout=time_limit,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"the fresh process did not finish within {time_limit:g} s."
            ) from None
    if out.returncode != 0:
        raise RuntimeError(f"the fresh process failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def export_sizes(exported: export.Exported) -> dict:
    """How big a shipped program is: its serialized bytes, and the StableHLO bytecode
    inside them."""
    return {
        "function": exported.fun_name,
        "inputs": ", ".join(str(a) for a in exported.in_avals),
        "serialized bytes": len(exported.serialize()),
        "StableHLO bytecode bytes": len(exported.mlir_module_serialized),
        "calling convention": exported.calling_convention_version,
    }


def executable_round_trip(batch: int = 5) -> dict:
    """``predict`` compiled, serialized with ``jax.experimental.serialize_executable``,
    loaded back and called: its bytes, the compiles loading and calling took, and
    whether the result is the original's.

    Taught in Keeping, reusing and shipping compiled programs, Saving and shipping a
    program.
    """
    from jax.experimental import serialize_executable

    w, x = jnp.ones((3, 2)), jnp.ones((batch, 3))
    compiled = fresh_jit(predict).lower(w, x).compile()
    payload, in_tree, out_tree = serialize_executable.serialize(compiled)
    with count_compiles() as log:
        loaded = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
        out = loaded(w, x)
    return {
        "serialized bytes": len(payload),
        "compiles to load and call": log.count,
        "same result": bool(jnp.array_equal(out, compiled(w, x))),
    }


_PERSISTENT_CHILD = r"""
import json, sys
import jitbook
import jax
import jax.numpy as jnp
import numpy as np
from jax._src import monitoring

jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
events = []
monitoring.register_event_listener(lambda event, **_: events.append(event))


def shipped(x):
    return jnp.sin(x) * 2 + 1


with jitbook.count_compiles() as log:
    jax.jit(shipped)(np.ones(3, np.float32))  # a NumPy input: no eager program
print(json.dumps({
    "compiles counted": log.count_for("shipped"),
    "persistent cache hits": events.count("/jax/compilation_cache/cache_hits"),
}))
"""


def persistent_load_counts() -> list[dict]:
    """One small jitted function in two fresh processes sharing a new persistent cache
    folder: what ``count_compiles`` counted and how often the disk cache hit in each.

    Taught in Keeping, reusing and shipping compiled programs, Saving and shipping a
    program.
    """
    from jitbook.fresh import run_for_json

    rows = []
    with tempfile.TemporaryDirectory(prefix="jitbook-persistent-") as folder:
        for process in ("first process", "second process"):
            out = run_for_json(["-c", _PERSISTENT_CHILD, folder], process, timeout=120)
            rows.append({"process": process, **out})
    return rows
