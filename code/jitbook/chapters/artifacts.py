"""Compiled programs as things you keep, reuse and ship: buffer donation,
``jax.export``, and what compile time grows with, measured.

Every helper jits a fresh wrapper of its function (``cache.fresh_jit``), so a figure is
that of a first compile however often the chapter or a test runs it.
"""

import dataclasses
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jitbook import programs, timing
from jitbook.arguments import whole_number
from jitbook.cache import count_compiles, fresh_jit
from jitbook.chapters.artifacts_export import batch_spec as batch_spec
from jitbook.chapters.artifacts_export import (
    call_in_fresh_process as call_in_fresh_process,
)
from jitbook.chapters.artifacts_export import (
    executable_round_trip as executable_round_trip,
)
from jitbook.chapters.artifacts_export import export_sizes as export_sizes
from jitbook.chapters.artifacts_export import (
    persistent_load_counts as persistent_load_counts,
)
from jitbook.chapters.artifacts_export import predict as predict
from jitbook.errors import raised


def _count(value, what: str, example: str) -> int:
    """``value`` if it is a positive whole number, else a ValueError that says what was
    expected."""
    return whole_number(value, what, example=example)


# --- buffer donation ------------------------------------------------------------------


def sgd_update(state: jax.Array, grad: jax.Array, lr: float = 0.1) -> jax.Array:
    """One gradient step on ``state``: the output has the state's shape and dtype, so it
    can reuse its memory.

    Taught in Keeping, reusing and shipping compiled programs, Buffer donation.
    """
    return state - lr * grad


def total(x: jax.Array) -> jax.Array:
    """A sum: no output has the argument's shape, so a donated ``x`` has nowhere to go.

    Taught in Keeping, reusing and shipping compiled programs, When donation cannot be
    used.
    """
    return jnp.sum(x)


def memory_figures(compiled, label: str) -> dict:
    """XLA's memory figures (bytes) of a compiled program, as one row, with the
    ``counted peak``: arguments + outputs - aliased + temporaries.

    XLA:CPU's ``peak_memory_in_bytes`` leaves the temporaries out (it is arguments +
    outputs - aliased, give or take alignment), so a saving read from it misses what
    the program's scratch space does; the counted peak includes it.
    """
    m = compiled.memory_analysis()
    return {
        "variant": label,
        "arguments": m.argument_size_in_bytes,
        "outputs": m.output_size_in_bytes,
        "aliased": m.alias_size_in_bytes,
        "temporaries": m.temp_size_in_bytes,
        "XLA's peak": m.peak_memory_in_bytes,
        "counted peak": m.argument_size_in_bytes
        + m.output_size_in_bytes
        - m.alias_size_in_bytes
        + m.temp_size_in_bytes,
    }


def memory_row(
    fn: Callable, *args, donate_argnums: int | Sequence[int] = (), label: str = ""
) -> dict:
    """Compile ``jax.jit(fn, donate_argnums=...)`` for ``args`` and read XLA's memory
    figures (bytes).

    Taught in Keeping, reusing and shipping compiled programs, Buffer donation.
    """
    timing.check_callable(fn, "memory_row")
    compiled = (
        fresh_jit(fn, donate_argnums=donate_argnums).trace(*args).lower().compile()
    )
    return memory_figures(compiled, label or f"donate_argnums={donate_argnums!r}")


def donation_rows(size: int) -> list[dict]:
    """``sgd_update`` on a ``size x size`` state, compiled without and with the state
    donated."""
    _count(size, "size (the side of the square array)", "size=1000")
    state, grad = jnp.ones((size, size)), jnp.ones((size, size))
    return [
        memory_row(sgd_update, state, grad, label="no donation"),
        memory_row(
            sgd_update,
            state,
            grad,
            donate_argnums=0,
            label="donate_argnums=0 (the state)",
        ),
    ]


def live_buffers(donate: bool, size: int = 1000) -> dict:
    """Call ``sgd_update`` once and look at the arrays: is the input deleted, does the
    output sit in its memory?"""
    state, grad = jnp.ones(size), jnp.ones(size)
    before = (
        state.unsafe_buffer_pointer()
    )  # compared, never shown: an address differs from run to run
    new = fresh_jit(sgd_update, donate_argnums=0 if donate else ())(state, grad)
    return {
        "donated": donate,
        "input deleted": state.is_deleted(),
        "output reuses the input's memory": new.unsafe_buffer_pointer() == before,
    }


def reuse_error() -> BaseException:
    """The exception raised when an array is used after it was donated."""
    state = jnp.ones(3)
    fresh_jit(sgd_update, donate_argnums=0)(state, jnp.ones(3))
    return raised(lambda: state + 1)


def donation_warnings(
    fn: Callable, *args, donate_argnums: int | Sequence[int] = 0, calls: int = 1
) -> list[str]:
    """The warnings JAX gives when a fresh ``jax.jit(fn)`` is called ``calls`` times
    with ``args`` donated.

    Each call gets its own copies of ``args``: a donated array cannot be passed twice.
    Taught in Keeping, reusing and shipping compiled programs, When donation cannot be
    used.
    """
    timing.check_callable(fn, "donation_warnings")
    _count(calls, "calls (how many times to call)", "calls=3")
    jitted = fresh_jit(fn, donate_argnums=donate_argnums)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(
            "always"
        )  # show every warning, even one Python has shown before
        for _ in range(calls):
            jax.block_until_ready(jitted(*[jnp.array(a, copy=True) for a in args]))
    return [str(w.message).splitlines()[0] for w in caught]


# --- donating a loop's carry -------------------------------------------------------


class Carry(NamedTuple):
    """What a training loop carries from step to step: weights and their momentum."""

    weights: jax.Array
    velocity: jax.Array


def momentum_step(carry: Carry, batch: jax.Array, lr: float = 0.1, beta: float = 0.9):
    """One step of gradient descent with momentum: a carry in, a carry alike out.

    The loss asks the weights to reproduce the batch (``batch @ w`` close to ``batch``).
    Taught in Keeping, reusing and shipping compiled programs, Donating a loop's carry.
    """

    def loss(w):
        return jnp.mean((batch @ w - batch) ** 2)

    value, grad = jax.value_and_grad(loss)(carry.weights)
    velocity = beta * carry.velocity + grad
    return Carry(carry.weights - lr * velocity, velocity), value


def carry_start(side: int) -> tuple[Carry, jax.Array]:
    """A zero carry for ``side x side`` weights, and a batch of ``2 * side`` rows."""
    _count(side, "side (the weights are side x side)", "side=500")
    batch = np.random.default_rng(0).normal(size=(2 * side, side)) / np.sqrt(side)
    zeros = jnp.zeros((side, side))
    return Carry(zeros, zeros + 0), jnp.asarray(batch, jnp.float32)


@dataclasses.dataclass
class PythonLoopFit:
    """A loop driven from Python: the compiled step's memory figures and its losses."""

    memory: dict
    losses: np.ndarray


def fit_python_loop(side: int, n_iter: int, donate: bool) -> PythonLoopFit:
    """Compile ``momentum_step`` (carry donated or not), read its memory, run it.

    Taught in Keeping, reusing and shipping compiled programs, Donating a loop's carry.
    """
    _count(n_iter, "n_iter (iterations)", "n_iter=20")
    carry, batch = carry_start(side)
    donate_argnums = 0 if donate else ()
    step = (
        fresh_jit(momentum_step, donate_argnums=donate_argnums)
        .trace(carry, batch)
        .lower()
        .compile()
    )
    losses = []
    for _ in range(n_iter):
        carry, loss = step(carry, batch)
        losses.append(loss)
    memory = memory_figures(step, "carry donated" if donate else "no donation")
    return PythonLoopFit(memory, np.asarray(jnp.stack(losses)))


def warning_stage(fn: Callable, *args, donate_argnums: int | Sequence[int] = 0) -> dict:
    """Which stage of ``jax.jit(fn)`` warns that a donation is unusable, stage by stage.

    Taught in Keeping, reusing and shipping compiled programs, When donation cannot be
    used.
    """
    timing.check_callable(fn, "warning_stage")
    jitted = fresh_jit(fn, donate_argnums=donate_argnums)
    copies = [jnp.array(a, copy=True) for a in args]
    stages = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = jitted.trace(*copies)
        stages["trace"], caught[:] = len(caught), []
        lowered = traced.lower()
        stages["lower"], caught[:] = len(caught), []
        compiled = lowered.compile()
        stages["compile"], caught[:] = len(caught), []
        jax.block_until_ready(compiled(*copies))
        stages["call"] = len(caught)
    return stages


# --- what compile time grows with -----------------------------------------------------


def unrolled_steps(x: jax.Array, n: int) -> jax.Array:
    """``n`` damped sine steps written as a Python loop: tracing unrolls it into ``n``
    copies of the body.

    Taught in Keeping, reusing and shipping compiled programs, Keeping compile time
    down.
    """
    for _ in range(n):
        x = jnp.sin(x) * 0.99
    return x


def scanned_steps(x: jax.Array, n: int) -> jax.Array:
    """The same ``n`` steps as one ``lax.scan``: one copy of the body, whatever ``n``
    is.

    Taught in Keeping, reusing and shipping compiled programs, Keeping compile time
    down.
    """

    def body(x, _):
        return jnp.sin(x) * 0.99, None

    return jax.lax.scan(body, x, length=n)[0]


def loop_cost_rows(lengths: Sequence[int], size: int = 64) -> list[dict]:
    """One row per loop length: the unrolled and the scanned loop's equations, StableHLO
    lines and compile seconds.

    One row per length, so the rows serve a table and an explorer's slider alike.
    """
    if isinstance(lengths, (int, str)) or not lengths:
        raise ValueError(
            "lengths must be a non-empty list of loop lengths, e.g. [10, 100], got "
            f"{lengths!r}."
        )
    for n in lengths:
        _count(n, "each loop length", "[10, 100]")
    x = jnp.ones(size)
    rows = []
    for n in lengths:
        row = {"length": n}
        for form, fn in (("unrolled", unrolled_steps), ("scan", scanned_steps)):
            s = timing.stages(fn, x, n, static_argnums=1)
            row[f"{form} eqns"] = programs.count_equations(s.jaxpr)
            row[f"{form} HLO lines"] = len(s.lowered.as_text().splitlines())
            row[f"{form} compile s"] = s.compile
        rows.append(row)
    return rows


def closed_over(table: np.ndarray) -> Callable:
    """``x -> table @ x`` with ``table`` captured by the closure: it becomes a constant
    of the program.

    Taught in Keeping, reusing and shipping compiled programs, Keeping compile time
    down.
    """

    def apply_table(x):
        return jnp.asarray(table) @ x

    return apply_table


def apply_table(table: jax.Array, x: jax.Array) -> jax.Array:
    """``table @ x`` with the table passed as an argument: the program holds only its
    shape."""
    return table @ x


def constant_rows(size: int) -> list[dict]:
    """A ``size x size`` table closed over versus passed: constants, StableHLO size,
    lower and compile seconds."""
    _count(size, "size (the side of the square array)", "size=1000")
    table = np.random.default_rng(0).normal(size=(size, size)).astype(np.float32)
    x = jnp.ones(size)
    rows = []
    for how, fn, args in (
        ("closed over", closed_over(table), (x,)),
        ("argument", apply_table, (jnp.asarray(table), x)),
    ):
        s = timing.stages(fn, *args)
        rows.append(
            {
                "table": how,
                "constant bytes": sum(np.asarray(c).nbytes for c in s.jaxpr.consts),
                "StableHLO characters": len(s.lowered.as_text()),
                "lower (s)": s.lower,
                "compile (s)": s.compile,
            }
        )
    return rows


_HOISTING_CHILD = r"""
import json, sys
import jitbook  # noqa: F401  (the miscompile guard, as in every process of the book)
import jax
import jax.numpy as jnp
import numpy as np
from jitbook.chapters import artifacts
from jitbook.cache import count_compiles

side = int(sys.argv[1])
rng = np.random.default_rng(0)
first, second = (rng.normal(size=(side, side)).astype(np.float32) for _ in range(2))
x = jnp.ones(side)
with count_compiles() as log:
    for table in (first, second):
        jax.block_until_ready(jax.jit(artifacts.closed_over(table))(x))
lowered = jax.jit(artifacts.closed_over(first)).lower(x)
tried, kept = [], []
for n in (8, 9):
    vector = np.arange(n, dtype=np.float32)
    text = jax.jit(lambda v: v + vector).lower(jnp.ones(n)).as_text()
    tried.append(vector.nbytes)
    if "dense<[" in text:
        kept.append(vector.nbytes)
print(json.dumps({
    "simplified constants": jax.config.jax_use_simplified_jaxpr_constants,
    "embedded max bytes": jax.config.jax_embedded_constants_max_bytes,
    "StableHLO characters": len(lowered.as_text()),
    "executable argument bytes":
        lowered.compile().memory_analysis().argument_size_in_bytes,
    "compiles for 2 tables": log.count,
    "small constants tried (bytes)": tried,
    "kept in the program (bytes)": kept,
}))
"""


def constant_hoisting_rows(side: int, time_limit: float = 120.0) -> list[dict]:
    """``closed_over`` in two fresh processes: constant hoisting off (default), then on.

    ``jax_use_simplified_jaxpr_constants`` is read when JAX is imported, so each setting
    gets its own process, with the option set in its environment.
    Taught in Keeping, reusing and shipping compiled programs, Large constants captured
    by a closure.
    """
    _count(side, "side (the side of the square table)", "side=500")
    rows = []
    for value in ("False", "True"):
        env = dict(os.environ, JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=value)
        out = subprocess.run(
            [sys.executable, "-c", _HOISTING_CHILD, str(side)],
            capture_output=True,
            text=True,
            env=env,
            timeout=time_limit,
        )
        if out.returncode != 0:
            raise RuntimeError(f"the fresh process failed:\n{out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def constant_sweep(sides: Sequence[int]) -> list[dict]:
    """``constant_rows`` for several table sizes, one row per size: the data of the
    chapter's explorer."""
    if isinstance(sides, (int, str)) or not sides:
        raise ValueError(
            "sides must be a non-empty list of table sides, e.g. [100, 1000], got "
            f"{sides!r}."
        )
    rows = []
    for side in sides:
        closed, passed = constant_rows(side)
        rows.append(
            {
                "table side": side,
                "table (MB)": closed["constant bytes"] / 1e6,
                "closed over: StableHLO (MB)": closed["StableHLO characters"] / 1e6,
                "closed over: lower + compile (s)": closed["lower (s)"]
                + closed["compile (s)"],
                "argument: lower + compile (s)": passed["lower (s)"]
                + passed["compile (s)"],
            }
        )
    return rows


def make_piece(k: int) -> Callable:
    """A small step that differs with ``k``; each call makes a new function, as pieces
    of a real program are."""

    def piece(x):
        return jnp.sin(x) + k

    piece.__name__ = f"piece_{k}"
    return piece


def pieces_rows(n: int, size: int = 64) -> list[dict]:
    """``n`` jitted steps called from Python, or inside one outer jit: XLA compiles.

    Taught in Keeping, reusing and shipping compiled programs, Many small jitted
    functions.
    """
    _count(n, "n (pieces)", "n=5")
    x = jnp.ones(size)
    jitted_pieces = [jax.jit(make_piece(k)) for k in range(n)]
    raw_pieces = [make_piece(k) for k in range(n)]

    def one_by_one(x):
        for p in jitted_pieces:
            x = p(x)
        return x

    def outer_over_jitted(x):
        for p in jitted_pieces:
            x = p(x)
        return x

    def outer_over_plain(x):
        for p in raw_pieces:
            x = p(x)
        return x

    rows = []
    for how, fn in (
        (f"{n} jitted pieces, called from Python", one_by_one),
        ("one jit around the same jitted pieces", jax.jit(outer_over_jitted)),
        (f"one jit around {n} plain functions", jax.jit(outer_over_plain)),
    ):
        with count_compiles() as log:
            jax.block_until_ready(fn(x))
        pieces = sum(name.startswith("piece_") for name in log.compiles)
        rows.append(
            {
                "how": how,
                "compiles": log.count,
                "compiles of a piece": pieces,
            }
        )
    return rows


# --- the other knobs of jax.jit -------------------------------------------------------


def ignores_second(x: jax.Array, unused: jax.Array) -> jax.Array:
    """Uses ``x`` only: with ``keep_unused=False`` jit may drop ``unused`` from the
    executable.

    Taught in Keeping, reusing and shipping compiled programs, The other knobs of
    jax.jit.
    """
    return 2 * x


def keep_unused_rows(size: int) -> list[dict]:
    """``ignores_second`` with a ``size x size`` unused argument, compiled with
    ``keep_unused`` off and on."""
    _count(size, "size (the side of the square array)", "size=1000")
    x, unused = jnp.ones(size), jnp.ones((size, size))
    rows = []
    for keep in (False, True):
        compiled = (
            fresh_jit(ignores_second, keep_unused=keep)
            .trace(x, unused)
            .lower()
            .compile()
        )
        rows.append(
            {
                "keep_unused": keep,
                "argument bytes": compiled.memory_analysis().argument_size_in_bytes,
            }
        )
    return rows


def inline_rows() -> list[dict]:
    """A function calling a jitted helper twice, ``inline`` off and on: functions and
    calls before and after XLA."""
    rows = []
    for inline in (False, True):
        helper = jax.jit(lambda x: jnp.sin(x) * 2, inline=inline)

        def twice(x, helper=helper):
            return helper(x) + helper(x + 1)

        lowered = fresh_jit(twice).trace(jnp.ones(4)).lower()
        text, optimized = lowered.as_text(), lowered.compile().as_text()
        rows.append(
            {
                "inline": inline,
                "StableHLO functions": text.count("func.func"),
                "StableHLO calls": text.count("call @"),
                "calls after XLA": optimized.count(" call("),
            }
        )
    return rows


def largest(x: jax.Array) -> jax.Array:
    """The largest entry; XLA's default propagates a NaN, as NumPy does.

    Taught in Keeping, reusing and shipping compiled programs, The other knobs of
    jax.jit.
    """
    return jnp.max(x)


FAST_MIN_MAX = {"xla_cpu_enable_fast_min_max": True}


def compiler_options_rows(x: jax.Array) -> list[dict]:
    """``largest(x)`` compiled with XLA's default options and with ``FAST_MIN_MAX``, and
    NumPy's answer."""
    rows = [{"compiled with": "NumPy (no XLA)", "result": float(np.max(np.asarray(x)))}]
    for label, options in (
        ("default options", None),
        ("compiler_options=FAST_MIN_MAX", FAST_MIN_MAX),
    ):
        rows.append(
            {
                "compiled with": label,
                "result": float(fresh_jit(largest, compiler_options=options)(x)),
            }
        )
    return rows
