"""Guard against a CPU miscompile of fused reductions in current XLA.

On jax 0.10.2 to 0.12.0.1, XLA's experimental YNN fusion on CPU can fuse a reduction of
a sum of two elementwise logs into a wrong result. Taking reductions out of that fusion
gives correct numbers. The flag must be in ``XLA_FLAGS`` before JAX starts its CPU
backend, so ``import jitbook`` sets it first thing.

``python -m jitbook.guard probe|probes`` runs the preface's probe in a process of its
own (``jitbook.fresh.in_fresh_process``); what the guard costs is measured by the
chapter that teaches it, ``jitbook.chapters.why_compile``.
"""

import argparse
import json
import os
import sys
import warnings

# "-reduce" takes reductions out of the YNN fusion types and leaves the rest at XLA's
# default: the narrowest setting that passes the probe below (the empty value, turning
# YNN fusion off entirely, passes it too).
XLA_FLAG = "--xla_cpu_experimental_ynn_fusion_type=-reduce"

# The same setting for one program: jax.jit(f, compiler_options=...). There the option
# takes enum names, not the flag's "-reduce"; XLA's default set is these two.
YNN_OPTION = "xla_cpu_experimental_ynn_fusion_type"
GUARDED_OPTIONS = {YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
DEFAULT_OPTIONS = {
    YNN_OPTION: "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"
}


OFF = "JITBOOK_GUARD"  # set to "off" in a process meant to run without the guard


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
    """Add the flag to ``XLA_FLAGS``; return whether it can still take effect.

    ``JITBOOK_GUARD=off`` in the environment leaves the flags alone: the book starts
    such processes to measure what the guard changes, never to compute its numbers.
    A jaxlib older than the flag (the ledger runs them) would abort on it.
    """
    if os.environ.get(OFF) == "off" or not jaxlib_knows_flag():
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
                "JAX's CPU backend started before `import jitbook`, so the guard "
                "against the fused-reduction miscompile is off in this process. "
                "Restart the kernel and import jitbook before running any JAX code.",
                stacklevel=3,
            )
            return False
    return True


PROBE_SHAPE = (11_600, 114)  # the PLN problem size, where the miscompile was found


def miscompile_probe(
    n: int = PROBE_SHAPE[0], p: int = PROBE_SHAPE[1], compiler_options=None
) -> dict:
    """Run the known repro and compare with a float64 NumPy sum.

    Taught in Why compile?, What the guard costs.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = np.random.default_rng(0).uniform(0.5, 5.0, size=(n, p)).astype(np.float32)
    summed = jax.jit(
        lambda x: jnp.sum(jnp.log(2 * x) + jnp.log(3 * x)),
        compiler_options=compiler_options,
    )
    got = float(summed(x))
    x64 = x.astype(np.float64)
    expected = float(np.sum(np.log(2 * x64) + np.log(3 * x64)))
    return {
        "jitted": got,
        "numpy float64": expected,
        "relative error": abs(got - expected) / abs(expected),
        "flag set": XLA_FLAG in os.environ.get("XLA_FLAGS", "").split(),
    }


def probe_in_fresh_process(guarded: bool, options: str = "none") -> dict:
    """``miscompile_probe`` in a new process, with or without the flag, its program
    compiled with ``OPTIONS[options]``."""
    from jitbook.fresh import in_fresh_process  # fresh imports this module

    return in_fresh_process("guard", "probe", "--options", options, guarded=guarded)


OPTIONS = {"none": None, "guarded": GUARDED_OPTIONS, "default": DEFAULT_OPTIONS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jitbook.guard")
    parser.add_argument("what", choices=["probe", "probes"])
    parser.add_argument("--options", default="none", choices=list(OPTIONS))
    args = parser.parse_args(argv)
    import jitbook  # noqa: F401  (the guard, unless JITBOOK_GUARD=off)

    if args.what == "probe":
        result = miscompile_probe(compiler_options=OPTIONS[args.options])
    else:
        result = {k: miscompile_probe(compiler_options=o) for k, o in OPTIONS.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
