"""The CPU miscompile the preface describes, and the guard that import jitbook sets."""

import os
import subprocess
import sys

import pytest

from jitbook import guard


def test_import_jitbook_sets_the_flag():
    assert guard.XLA_FLAG in os.environ["XLA_FLAGS"].split()


@pytest.mark.claim("sec-miscompile")
def test_the_guard_gives_the_right_sum():
    result = guard.probe_in_fresh_process(guarded=True)
    assert result["relative error"] < 1e-5


@pytest.mark.claim("sec-miscompile")
def test_without_the_guard_jax_still_miscompiles():
    """If this fails, the installed JAX computes the sum right without the flag: the guard may go."""
    result = guard.probe_in_fresh_process(guarded=False)
    assert result["relative error"] > 0.01, (
        f"jax now sums correctly without {guard.XLA_FLAG} (relative error {result['relative error']:.1e}); "
        "drop the guard and the preface section about it.")


def test_importing_jitbook_after_jax_has_started_warns():
    code = "import jax.numpy as jnp; jnp.ones(2) + 1\nimport warnings\nwarnings.simplefilter('error')\nimport jitbook"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "Restart the kernel and import jitbook" in out.stderr
