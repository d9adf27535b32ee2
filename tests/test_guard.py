"""The CPU miscompile the preface describes, the guard that import jitbook sets, and the
same guard given to one program."""

import os
import subprocess
import sys

import pytest

from jitbook import fresh, guard
from jitbook.chapters import why_compile
from jitbook.fresh import in_fresh_process

SMALL = ["--rows", "64", "--cols", "32", "--repeat", "1", "--iters", "3"]


def test_import_jitbook_sets_the_flag():
    assert guard.XLA_FLAG in os.environ["XLA_FLAGS"].split()


@pytest.mark.claim("sec-miscompile", "clm-index-guard-right-sum")
def test_the_guard_gives_the_right_sum():
    result = guard.probe_in_fresh_process(guarded=True)
    assert result["flag set"] and result["relative error"] < 1e-5


@pytest.mark.claim("sec-miscompile", "clm-index-xla-miscompiles")
def test_without_the_guard_jax_still_miscompiles():
    """If this fails, the installed JAX sums correctly without the flag: the guard may go."""
    result = guard.probe_in_fresh_process(guarded=False)
    assert not result["flag set"]
    assert result["relative error"] > 0.01, (
        f"jax now sums correctly without {guard.XLA_FLAG} (relative error "
        f"{result['relative error']:.1e}); drop the guard and the preface section about it."
    )


@pytest.mark.claim("sec-why-compile-guard", "clm-why-compile-guard-one-program")
def test_the_guard_given_to_one_program_protects_that_program_only():
    """In one process without the flag: the probe's sum compiled with the guard's options
    is right, the same sum compiled without them, next to it, is still wrong."""
    probes = in_fresh_process("guard", "probes", guarded=False)
    assert probes["guarded"]["relative error"] < 1e-5
    assert (
        probes["none"]["relative error"] > 0.01
    )  # not given the options: not protected
    result = guard.probe_in_fresh_process(guarded=False, options="guarded")
    assert not result["flag set"] and result["relative error"] < 1e-5


@pytest.mark.claim(
    "sec-why-compile-guard", "clm-why-compile-guard-options-same-program"
)
def test_the_per_program_options_build_the_flags_programs():
    """compiler_options={YNN_OPTION: ...} per program compiles exactly what the flag
    compiles (GUARDED_OPTIONS), and DEFAULT_OPTIONS exactly what XLA's default does."""
    flagged = in_fresh_process(
        "chapters.why_compile", "fingerprints", *SMALL, guarded=True
    )
    plain = in_fresh_process(
        "chapters.why_compile", "fingerprints", *SMALL, guarded=False
    )
    assert plain["guarded"] == flagged["none"] == flagged["guarded"]
    assert flagged["default"] == plain["none"] == plain["default"]
    assert plain["none"] != flagged["none"]  # the flag does change these programs


def test_the_flags_plus_minus_syntax_is_refused_per_program():
    import jax
    import jax.numpy as jnp

    bad = jax.jit(jnp.sum, compiler_options={guard.YNN_OPTION: "-reduce"})
    with pytest.raises(Exception, match="not a valid enum value"):
        bad(jnp.ones(3))


def test_price_races_each_main_program_with_and_without():
    rounds = why_compile.price(64, 32, 1, 3, min_time=0.0)
    assert len(rounds) == 4  # why-compile's function at two sizes, two PLN levels
    for times in rounds.values():
        assert set(times) == {"without the guard", "with the guard"}
        assert len(times["with the guard"]) == len(times["without the guard"]) >= 5


def test_jitbook_guard_off_leaves_the_flags_alone():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env[guard.OFF] = "off"
    code = "import os, jitbook; print(os.environ.get('XLA_FLAGS', ''))"
    out = fresh.python_output(code, env)
    assert guard.XLA_FLAG not in out


def test_a_failing_fresh_process_says_what_failed():
    with pytest.raises(RuntimeError, match="python -m jitbook.guard warp failed"):
        in_fresh_process("guard", "warp", guarded=True)


def test_importing_jitbook_after_jax_has_started_warns():
    code = (
        "import jax.numpy as jnp; jnp.ones(2) + 1\nimport warnings\n"
        "warnings.simplefilter('error')\nimport jitbook"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.returncode != 0 and "Restart the kernel and import jitbook" in out.stderr
