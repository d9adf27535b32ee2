"""The examples of the tracing chapter: what jit sees when it runs a Python function
once, with tracers.

Each function here is small on purpose: it shows one thing a tracer does or refuses to
do. The helpers at the end measure what tracing produced (equation counts, compile
times, printed lines).
"""

import contextlib
import functools
import io
import time
from collections.abc import Callable, Sequence

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax import lax

from jitbook import timing
from jitbook.cache import count_body_runs
from jitbook.errors import raised
from jitbook.programs import count_equations

# --- What a tracer is -----------------------------------------------------------------


def aval_row(x) -> dict:
    """The abstract value jit keeps of ``x``: its type, shape, dtype and weak type, as
    one table row.

    Taught in Tracing: what jit sees, A tracer, seen from inside.
    """
    aval = jax.typeof(x)
    return {
        "type": type(x).__name__,
        "abstract value": str(aval),
        "shape": aval.shape,
        "dtype": str(aval.dtype),
        "weak_type": aval.weak_type,
    }


def seen_by_jit(*args) -> list[dict]:
    """Run a fresh jitted function on ``args`` and return what each argument looked like
    *inside* it.
    """
    rows: list[dict] = []

    def look(*traced):
        rows.extend(
            aval_row(t) for t in traced
        )  # a trace-time side effect, used on purpose
        return traced

    jax.jit(look)(*args)
    return rows


def double_and_show(x: jax.Array) -> jax.Array:
    """Doubles ``x``, printing it twice: once with Python's print, once with
    ``jax.debug.print``.

    Taught in Tracing: what jit sees, A tracer, seen from inside.
    """
    print("print sees:", x)
    jax.debug.print("jax.debug.print sees: {}", x)
    return 2 * x


class BodyCounter:
    """Wraps ``fn`` and counts how many times its Python body runs (under jit: once per
    trace).

    Taught in Tracing: what jit sees, The body runs once per new signature.
    """

    def __init__(self, fn: Callable) -> None:
        if not callable(fn):
            raise TypeError(f"BodyCounter wraps a function, got {type(fn).__name__}.")
        self.fn = fn
        self.runs = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        self.runs += 1
        return self.fn(*args, **kwargs)


def printed_lines(fn: Callable, calls: Sequence[tuple]) -> list[str]:
    """Call ``fn(*args)`` for each tuple in ``calls`` and return every line printed,
    run-time prints included.
    """
    if not callable(fn):
        raise TypeError(
            f"printed_lines takes the function first, got {type(fn).__name__}."
        )
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for args in calls:
            jax.block_until_ready(fn(*args))
        # jax.debug.print runs asynchronously: wait for every callback
        jax.effects_barrier()
    return buffer.getvalue().splitlines()


# --- Side effects happen while tracing ------------------------------------------------

history: list = []  # a global that ``remember`` appends to
SCALE = 2.0  # a global that ``scaled`` reads


def remember(x: jax.Array) -> jax.Array:
    """Appends its argument to the global ``history`` (a side effect) and returns
    ``x + 1``.

    Taught in Tracing: what jit sees, Side effects happen while tracing.
    """
    history.append(x)
    return x + 1


def scaled(x: jax.Array) -> jax.Array:
    """Multiplies by the global ``SCALE``: under jit, by the value ``SCALE`` had when it
    was traced.

    Taught in Tracing: what jit sees, Reading a global that changes.
    """
    return SCALE * x


# --- Control flow: on shapes, and on values -------------------------------------------


def pad_to_even(x: jax.Array) -> jax.Array:
    """Appends a zero when ``x`` has an odd length: a branch on a shape, which jit knows
    while tracing.

    Taught in Tracing through control flow and loops, Branching on a shape works.
    """
    if x.shape[0] % 2 == 1:
        x = jnp.concatenate([x, jnp.zeros(1, x.dtype)])
    return x


def sin_or_cos(x: jax.Array, t) -> jax.Array:
    """``sin(x)`` when ``t > 0``, else ``cos(x)``: a Python branch on a value, which a
    tracer does not have.

    Taught in Tracing through control flow and loops, Branching on a value fails.
    """
    if t > 0:
        return jnp.sin(x)
    return jnp.cos(x)


sin_or_cos_static = jax.jit(
    sin_or_cos, static_argnums=1
)  # way out 1: t is a Python value, part of the cache key


def sin_or_cos_where(
    x: jax.Array, t, pos: Callable = jnp.sin, neg: Callable = jnp.cos
) -> jax.Array:
    """Way out 2: compute both branches and select elementwise.

    Taught in Tracing through control flow and loops, Three ways out.
    """
    return jnp.where(t > 0, pos(x), neg(x))


def sin_or_cos_cond(
    x: jax.Array, t, pos: Callable = jnp.sin, neg: Callable = jnp.cos
) -> jax.Array:
    """Way out 3: ``lax.cond`` puts both branches in the program and runs the one the
    predicate picks.

    Taught in Tracing through control flow and loops, Three ways out.
    """
    return lax.cond(t > 0, pos, neg, x)


def announce(name: str, fn: Callable) -> Callable:
    """``fn`` that also prints ``name`` each time it runs, at run time, so we can see
    which branches ran.
    """

    def announced(x):
        jax.debug.print(name)
        return fn(x)

    return announced


def branches_run(version: Callable, x: jax.Array, t) -> list[str]:
    """Which branches of ``sin_or_cos_where`` or ``sin_or_cos_cond`` ran in one jitted
    call.

    Taught in Tracing through control flow and loops, Three ways out.
    """
    loud = functools.partial(
        version, pos=announce("sin", jnp.sin), neg=announce("cos", jnp.cos)
    )
    return printed_lines(jax.jit(loud), [(x, t)])


# --- Loops: unrolled by tracing, or kept as one loop ----------------------------------


def step(x: jax.Array) -> jax.Array:
    """One step of the loops below: two operations."""
    return jnp.sin(x) + 1.0


def python_loop(x: jax.Array, n: int) -> jax.Array:
    """``step`` applied ``n`` times by a Python loop: tracing records every iteration.

    Taught in Tracing through control flow and loops, Python loops unroll.
    """
    for _ in range(n):
        x = step(x)
    return x


def fori_version(x: jax.Array, n) -> jax.Array:
    """``step`` applied ``n`` times by ``lax.fori_loop``: one loop in the program, and
    ``n`` may be traced.

    Taught in Tracing through control flow and loops, Python loops unroll.
    """
    return lax.fori_loop(0, n, lambda i, c: step(c), x)


def scan_version(x: jax.Array, n: int) -> jax.Array:
    """``step`` applied ``n`` times by ``lax.scan``: one loop in the program; ``n`` must
    be a Python int.

    Taught in Tracing through control flow and loops, Python loops unroll.
    """
    final, _ = lax.scan(lambda c, _: (step(c), None), x, length=n)
    return final


def loop_growth(fns: Sequence[Callable], ns: Sequence[int], x: jax.Array) -> list[dict]:
    """For each loop function and loop length: equations traced and milliseconds to
    trace, lower and compile.

    Taught in Tracing through control flow and loops, Python loops unroll.
    """
    if not ns or not all(isinstance(n, int) and n >= 0 for n in ns):
        raise ValueError(
            f"ns must be a non-empty list of loop lengths (ints >= 0), got {ns!r}."
        )
    rows = []
    for fn in fns:
        for n in ns:
            first = timing.stages(fn, x, n, static_argnums=1)
            rows.append(
                {
                    "loop": fn.__name__,
                    "n": n,
                    "equations": count_equations(first.jaxpr),
                    "compile (ms)": 1e3 * (first.trace + first.lower + first.compile),
                }
            )
    return rows


# --- Closures -------------------------------------------------------------------------


def make_scaler(scale) -> Callable:
    """A function that multiplies by ``scale``, captured from this call: a closure.

    Taught in Tracing: what jit sees, Closures.
    """

    def scale_by(x):
        return scale * x

    return scale_by


def make_config_scaler(config: dict) -> Callable:
    """A closure that reads ``config["scale"]``: under jit, at trace time only.

    Taught in Tracing: what jit sees, Captured values go stale.
    """

    def scale_by_config(x):
        return config["scale"] * x

    return scale_by_config


def scale_by_argument(x: jax.Array, scale) -> jax.Array:
    """The cure for stale closures: the value is an argument, read at every call."""
    return scale * x


# --- Loops you can differentiate ------------------------------------------------------


def masked_scan(x: jax.Array, n, max_n: int) -> jax.Array:
    """``step`` applied ``n`` times, ``n`` traced, by a ``scan`` of ``max_n`` steps that
    stops changing after ``n``.

    A ``fori_loop`` with a traced trip count becomes a ``while_loop``, which
    reverse-mode AD refuses; a scan with a static bound and a mask has one compiled
    program for every ``n <= max_n`` and a gradient. Taught in Tracing through control
    flow and loops, A traced trip count cannot be differentiated backwards.
    """
    if not isinstance(max_n, int) or max_n < 0:
        raise ValueError(
            f"max_n must be a Python int >= 0 (the static bound), got {max_n!r}."
        )

    def body(carry, i):
        return jnp.where(i < n, step(carry), carry), None

    final, _ = lax.scan(body, x, jnp.arange(max_n))
    return final


def loop_primitive(
    fn: Callable, *args, static_argnums: int | Sequence[int] = ()
) -> str:
    """The loop primitive (``scan`` or ``while``) that ``fn(*args)`` traces to, or
    ``"no loop"``."""
    names = [
        e.primitive.name
        for e in jax.make_jaxpr(fn, static_argnums=static_argnums)(*args).eqns
    ]
    return next((name for name in names if name in ("scan", "while")), "no loop")


# --- Branches under vmap, and gradients through jnp.where -----------------------------


def branches_run_batched(version: Callable, x: jax.Array, ts: jax.Array) -> list[str]:
    """Which branches ran when ``version`` is vmapped over a batch of ``t`` (a batched
    predicate).

    Taught in Tracing through control flow and loops, Under vmap, both branches run.
    """
    loud = functools.partial(
        version, pos=announce("sin", jnp.sin), neg=announce("cos", jnp.cos)
    )
    return sorted(
        set(printed_lines(jax.jit(jax.vmap(loud, in_axes=(None, 0))), [(x, ts)]))
    )


def sqrt_or_zero(x: jax.Array) -> jax.Array:
    """``sqrt(x)`` where ``x > 0``, else 0: right values, but a NaN gradient at 0 (the
    sqrt branch is still differentiated there, and 0 times its infinite slope is NaN).

    Taught in Tracing through control flow and loops, Under vmap, both branches run.
    """
    return jnp.where(x > 0, jnp.sqrt(x), 0.0)


def sqrt_or_zero_safe(x: jax.Array) -> jax.Array:
    """The double-``where`` fix: feed the branch not taken a safe input, so its slope is
    finite.

    Taught in Tracing through control flow and loops, Under vmap, both branches run.
    """
    safe = jnp.where(x > 0, x, 1.0)
    return jnp.where(x > 0, jnp.sqrt(safe), 0.0)


# --- Shapes that depend on values -----------------------------------------------------


def positives(x: jax.Array) -> jax.Array:
    """The entries of ``x`` above 0: how many there are depends on the values, so jit
    cannot trace it.

    Taught in Tracing through control flow and loops, Shapes that depend on values.
    """
    return x[x > 0]


def positives_padded(x: jax.Array, size: int) -> jax.Array:
    """The entries of ``x`` above 0, as ``positives`` returns them, padded with 0.0 to a
    fixed ``size``: a shape jit knows while tracing.

    Taught in Tracing through control flow and loops, Shapes that depend on values.
    """
    return jnp.extract(x > 0, x, size=size, fill_value=0.0)


# --- Side effects done properly -------------------------------------------------------


def logged_square(x: jax.Array, log: list) -> jax.Array:
    """``x * x`` that appends each value of ``x`` to ``log`` at run time, through
    ``jax.debug.callback``.

    Taught in Tracing: what jit sees, Side effects done properly.
    """
    jax.debug.callback(lambda v: log.append(float(v)), x)
    return x * x


def numpy_sine(x: jax.Array) -> jax.Array:
    """``sin`` computed by NumPy on the host, inside a jitted program, with
    ``jax.pure_callback``.

    Taught in Tracing: what jit sees, Side effects done properly.
    """
    return jax.pure_callback(
        lambda v: np.sin(v).astype(v.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype), x
    )


def callback_runs(x: jax.Array) -> dict:
    """How often each kind of callback ran in one jitted call when nothing uses its
    result.

    A ``jax.debug.callback`` has no result and is kept; a ``pure_callback`` whose
    result is unused is dead code, and the compiled program drops it.

    Taught in Tracing: what jit sees, Side effects done properly.
    """
    runs = {"debug.callback": 0, "pure_callback, result unused": 0}
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def note(kind: str) -> Callable:
        def host(v):
            runs[kind] += 1
            return np.asarray(v)

        return host

    def body(v):
        jax.debug.callback(note("debug.callback"), v)
        jax.pure_callback(note("pure_callback, result unused"), spec, v)
        return v + 1

    jax.block_until_ready(jax.jit(body)(x))
    jax.effects_barrier()
    return runs


def unused_callback_stages(x: jax.Array) -> dict:
    """Where an unused ``pure_callback`` is still present: in the jaxpr, in the lowered
    StableHLO. JAX's own dead-code elimination drops it when it lowers, before XLA."""
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def body(v):
        jax.pure_callback(np.asarray, spec, v)
        return v + 1

    return {
        "in the jaxpr": "pure_callback" in str(jax.make_jaxpr(body)(x)),
        "in the StableHLO": "callback" in jax.jit(body).lower(x).as_text(),
    }


def make_jaxpr_after_jit(x: jax.Array) -> dict:
    """Body runs of a function jitted and called, then given to ``jax.make_jaxpr``
    with the same argument types: the two share JAX's tracing cache."""

    def shifted(v):
        return jnp.sin(v) + 1.0

    with count_body_runs(shifted) as jit_runs:
        jax.jit(shifted)(x)
    with count_body_runs(shifted) as jaxpr_runs:
        jaxpr = jax.make_jaxpr(shifted)(x)
    with count_body_runs(shifted) as other_runs:
        jax.make_jaxpr(shifted)(x.astype(jnp.int32))
    return {
        "body runs for jax.jit": jit_runs.count,
        "then for make_jaxpr, same types": jaxpr_runs.count,
        "then for make_jaxpr, new dtype": other_runs.count,
        "equations": len(jaxpr.eqns),
    }


# --- NumPy, Python numbers and clocks on tracers --------------------------------------


def host_conversions(x: jax.Array) -> list[dict]:
    """What each way of turning a tracer into a NumPy array or a Python number raises
    under jit.

    Taught in Tracing: what jit sees, NumPy and Python values inside jit.
    """
    attempts = {
        "np.sin(x)": lambda v: np.sin(v),
        "np.asarray(x)": lambda v: np.asarray(v),
        "float(x[0])": lambda v: float(v[0]),
        "x[0].item()": lambda v: v[0].item(),
        "x.tolist()": lambda v: v.tolist(),
    }
    rows = []
    for code, attempt in attempts.items():
        err = raised(jax.jit(attempt), x)
        rows.append(
            {
                "inside jit": code,
                "raises": type(err).__name__ if err else "nothing",
                "a ConcretizationTypeError": isinstance(
                    err, jax.errors.ConcretizationTypeError
                ),
            }
        )
    return rows


def shift_by_noise(x):
    """``x`` plus a NumPy random number: under jit the number is drawn once, while
    tracing, and becomes a constant of the program.

    Taught in Tracing: what jit sees, NumPy and Python values inside jit.
    """
    return x + np.random.normal()


def shift_by_clock(x):
    """``x`` plus ``time.time()``: under jit the clock is read once, while tracing."""
    return x + time.time()


def squares_lookup(i):
    """Entry ``i`` of a table of squares built while tracing, with
    ``jax.ensure_compile_time_eval``, plus the index of its largest entry as a Python
    int.

    Taught in Tracing: what jit sees, NumPy and Python values inside jit.
    """
    with jax.ensure_compile_time_eval():
        table = jnp.arange(5.0) ** 2  # a concrete array, not a tracer
        biggest = int(jnp.argmax(table))  # so it can become a Python int
    return table[i] + biggest


# --- explorer


def excerpt(text: str, head: int = 10, tail: int = 3) -> str:
    """The first ``head`` and last ``tail`` lines of ``text``, with how many lines were
    left out between."""
    lines = text.splitlines()
    if len(lines) <= head + tail + 1:
        return text
    return "\n".join(
        [
            *lines[:head],
            f"    ... {len(lines) - head - tail} more lines ...",
            *lines[-tail:],
        ]
    )


LOOPS = {"Python loop": python_loop, "fori_loop": fori_version, "scan": scan_version}


def loop_explorer(ns: Sequence[int], x: jax.Array) -> tuple[list[dict], list[dict]]:
    """Per loop length: equations and compile time of each loop (``loop_growth``), and
    the jaxprs to read.

    Taught in Tracing through control flow and loops, Explore it.
    """
    growth = loop_growth(list(LOOPS.values()), ns, x)
    rows, panels = [], []
    for n in ns:
        row: dict = {"n": n}
        for label, fn in LOOPS.items():
            found = next(r for r in growth if r["loop"] == fn.__name__ and r["n"] == n)
            row[f"{label}: equations"] = found["equations"]
        for label, fn in LOOPS.items():
            found = next(r for r in growth if r["loop"] == fn.__name__ and r["n"] == n)
            row[f"{label}: compile (ms)"] = found["compile (ms)"]
        rows.append(row)
        jaxprs = {
            label: jax.make_jaxpr(fn, static_argnums=1)(x, n)
            for label, fn in list(LOOPS.items())[:2]
        }
        panels.append(
            {
                f"{label} jaxpr": excerpt(j.pretty_print(use_color=False))
                for label, j in jaxprs.items()
            }
        )
    return rows, panels
