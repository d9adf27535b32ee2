"""Guard against a CPU miscompile of fused reductions in current XLA.

On jax 0.10.2 to 0.12.0.1, XLA's experimental YNN fusion on CPU can fuse a reduction of a sum of two
elementwise logs into a wrong result. Turning that fusion off gives correct numbers. The flag must be
in ``XLA_FLAGS`` before JAX starts its CPU backend, so ``import jitbook`` sets it first thing.
"""

import os
import sys
import warnings

# "-reduce" takes reductions out of the YNN fusion types and leaves the rest at XLA's default: the narrowest
# setting that passes the probe below (the empty value, turning YNN fusion off entirely, passes it too).
XLA_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"


# XLA aborts on a flag it does not know; an older jaxlib has no YNN fusion
# and no such flag (the claim ledger runs those).
FLAG_SINCE = (0, 8, 3)  # the oldest checked that knows it (0.7.2 does not)


def jaxlib_knows_flag() -> bool:
    """Whether the installed jaxlib accepts the flag (the ledger runs older ones)."""
    from importlib import metadata

    try:
        version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return True
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit()) >= FLAG_SINCE


def apply_cpu_guard() -> bool:
    """Add the flag to ``XLA_FLAGS``; return whether it can still take effect."""
    if not jaxlib_knows_flag():
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if XLA_FLAG not in flags.split():
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_FLAG}".strip()
    if "jax" in sys.modules:
        from jax._src import (
            xla_bridge,
        )  # no public way to ask whether a backend has started

        if xla_bridge.backends_are_initialized() and XLA_FLAG not in flags.split():
            warnings.warn(
                "JAX's CPU backend started before `import jitbook`, so the guard against the fused-"
                "reduction miscompile is off in this process. Restart the kernel and import jitbook "
                "before running any JAX code.",
                stacklevel=3,
            )
            return False
    return True


PROBE_SHAPE = (11_600, 114)  # the PLN problem size, where the miscompile was found


def miscompile_probe(n: int = PROBE_SHAPE[0], p: int = PROBE_SHAPE[1]) -> dict:
    """Run the known repro and compare with a float64 NumPy sum; used by the preface and the tests."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = np.random.default_rng(0).uniform(0.5, 5.0, size=(n, p)).astype(np.float32)
    got = float(jax.jit(lambda x: jnp.sum(jnp.log(2 * x) + jnp.log(3 * x)))(x))
    x64 = x.astype(np.float64)
    expected = float(np.sum(np.log(2 * x64) + np.log(3 * x64)))
    return {
        "jitted": got,
        "numpy float64": expected,
        "relative error": abs(got - expected) / abs(expected),
        "flag set": XLA_FLAG in os.environ.get("XLA_FLAGS", "").split(),
    }


def probe_in_fresh_process(guarded: bool) -> dict:
    """Run ``miscompile_probe`` in a new Python process, with or without the flag, and return its result."""
    import inspect
    import json
    import subprocess

    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f != XLA_FLAG]
    guard = [XLA_FLAG] if guarded and jaxlib_knows_flag() else []  # as import jitbook
    env["XLA_FLAGS"] = " ".join(flags + guard)
    # The probe's own source, not an import: importing jitbook would set the flag we are testing without.
    code = (
        f"import json, os\nXLA_FLAG = {XLA_FLAG!r}\nPROBE_SHAPE = {PROBE_SHAPE!r}\n{inspect.getsource(miscompile_probe)}\n"
        "print(json.dumps(miscompile_probe()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
