"""What makes jit compile again, measured: static arguments, the cache key, loop traps,
buckets, the disk cache.

Every helper jits a *fresh* wrapper of its function (as ``timing.stages`` does), so a
measurement starts from an empty in-memory cache however often the chapter or a test
runs it.
"""

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.arguments import whole_number
from jitbook.cache import (
    CompileLog,
    capture_jax_logs,
    count_body_runs,
    count_compiles,
    fresh_jit,
)
from jitbook.errors import raised
from jitbook.fresh import run_cold

# --- static arguments -----------------------------------------------------------------


def power(x: jax.Array, n) -> jax.Array:
    """``x ** n`` with ``n`` meant to be static: an int exponent traces to
    ``integer_pow``, a float to ``pow``.

    Taught in Static arguments and compiling again, Static arguments.
    """
    return x**n


def static_sweep(values: Sequence, x: jax.Array | None = None) -> list[dict]:
    """Call ``power(x, n)`` jitted with static ``n`` once per value in ``values``: did
    each call compile, how long."""
    if (
        isinstance(values, (str, bytes))
        or not isinstance(values, Sequence)
        or not values
    ):
        raise ValueError(
            "static_sweep takes a non-empty list of exponents, e.g. [2, 3, 2, 2.0]."
        )
    x = jnp.linspace(0.5, 1.5, 1000) if x is None else x
    jitted = fresh_jit(power, static_argnums=1)
    rows = []
    for n in values:
        with count_compiles() as log:
            start = time.perf_counter()
            out = jax.block_until_ready(jitted(x, n))
            seconds = time.perf_counter() - start
        rows.append(
            {
                "n": repr(n),
                "type": type(n).__name__,
                "compiled": log.count_for("power"),
                "call (ms)": 1e3 * seconds,
                "result dtype": str(out.dtype),
            }
        )
    return rows


def times_first(x: jax.Array, factors: tuple) -> jax.Array:
    """``x * factors[0]`` with ``factors`` static: the factor's type sets the result's.

    Taught in Static arguments and compiling again, Static arguments.
    """
    return x * factors[0]


def static_tuple_rows(x: jax.Array | None = None) -> list[dict]:
    """One jitted ``times_first`` on an int array, called with ``(2,)`` then ``(2.0,)``,
    and the same with bare ``2`` then ``2.0``: what compiled and what came back."""
    x = jnp.arange(3) if x is None else x
    rows = []
    for first, second in (((2,), (2.0,)), (2, 2.0)):
        fn = times_first if isinstance(first, tuple) else _times_bare
        jitted = fresh_jit(fn, static_argnums=1)
        for factors in (first, second):
            with count_compiles() as log:
                out = jitted(x, factors)
            rows.append(
                {
                    "static argument": repr(factors),
                    "compiled": log.count_for(fn.__name__),
                    "result": str(out.tolist()),
                    "result dtype": str(out.dtype),
                    "op by op": str(fn(x, factors).dtype),
                }
            )
    return rows


def _times_bare(x, factor):
    return x * factor


def static_error(value) -> Exception:
    """The exception jit raises when ``value`` is passed as a static argument of
    ``power`` (e.g. an array)."""
    err = raised(fresh_jit(power, static_argnums=1), jnp.ones(3), value)
    if err is not None:  # the chapter shows this exception's class and message
        return err
    raise ValueError(
        f"{type(value).__name__} {value!r} was accepted as a static argument; "
        "pass an unhashable one."
    )


def count_up(x, n):
    """The blog post's example: add to ``x`` the number of steps a Python loop takes to
    reach ``n`` (so ``n`` is the argument that must be static)."""
    i = 0
    while i < n:
        i += 1
    return x + i


def blog_static_rows() -> list[dict]:
    """The blog's ``jax.jit(f, static_argnums=0)`` on ``f(x, n)``, against
    ``static_argnums=1``: position 0 is ``x``, so ``n`` stays traced."""
    cases = [
        ("static_argnums=0, x=10", 0, 10),
        ("static_argnums=0, x=jnp.ones(3)", 0, jnp.ones(3)),
        ("static_argnums=1, x=jnp.ones(3)", 1, jnp.ones(3)),
    ]
    rows = []
    for label, argnum, x in cases:
        jitted = jax.jit(count_up, static_argnums=argnum)
        err = raised(jitted, x, 20)
        rows.append(
            {
                "call with n=20": label,
                "static": ("x", "n")[argnum],
                "outcome": type(err).__name__ if err else "ran",
                "result": "" if err else str(jitted(x, 20).tolist()),
            }
        )
    return rows


# --- the cache key: arguments ---------------------------------------------------------


def add_one(x):
    """The smallest function whose program depends on its argument's shape, dtype and
    weak type."""
    return x + 1


def argument_cases() -> list[tuple[str, object]]:
    """Arguments passed in turn to one jitted ``add_one``: which of them make a new
    program?"""
    return [
        ("1.0 (Python float)", 1.0),
        ("2.0 (another Python float)", 2.0),
        ("jnp.float32(1.0)", jnp.float32(1.0)),
        ("np.float32(3.0)", np.float32(3.0)),
        ("jnp.array(1.0)", jnp.array(1.0)),
        ("1 (Python int)", 1),
        ("jnp.ones(3)", jnp.ones(3)),
        ("jnp.zeros(3)", jnp.zeros(3)),
        ("jnp.ones(4)", jnp.ones(4)),
        ("jnp.ones(3, dtype=jnp.int32)", jnp.ones(3, dtype=jnp.int32)),
    ]


# --- the cache key: the function ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScaleBy:
    """A callable object equal to (and hashing like) any other ``ScaleBy`` with the same
    factor.

    Taught in jit's cache key and its caches, The function: by hash and equality.
    """

    factor: float

    def __call__(self, x):
        return x * self.factor


class ScaleByIdentity:
    """The same callable, but with Python's default hash and equality: by identity."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def __call__(self, x):
        return x * self.factor


def own_trace_events(log: CompileLog) -> int:
    """Trace events of the callable traced last in ``log``: on some releases (0.9.2)
    the ``jnp`` functions jitted inside it fire events of their own (``multiply``)."""
    return log.trace_events.count(log.trace_events[-1]) if log.trace_events else 0


def identity_rows(x: jax.Array | None = None) -> list[dict]:
    """Two callables that do the same thing, jitted one after the other: for the
    second, JAX's trace events, runs of its Python body, and compiles.

    Each pair starts cold, in a fresh process of its own (``run_cold``).
    """
    x = jnp.ones(3) if x is None else x
    pairs = [
        ("the same function twice", add_one, add_one),
        ("two equal ScaleBy(2.0) objects", ScaleBy(2.0), ScaleBy(2.0)),
        (
            "two ScaleByIdentity(2.0) objects",
            ScaleByIdentity(2.0),
            ScaleByIdentity(2.0),
        ),
        (
            "functools.partial(add_one), twice",
            functools.partial(add_one),
            functools.partial(add_one),
        ),
    ]
    return [run_cold(_second_of_pair, label, *pair, x) for label, *pair in pairs]


def _second_of_pair(label: str, first, second, x: jax.Array) -> dict:
    """One row of ``identity_rows``, in a process whose caches are empty; both
    callables stay alive during the pair."""
    jax.jit(first)(x)
    with count_compiles() as log, count_body_runs(second) as runs:
        jax.jit(second)(x)
    return {
        "callables": label,
        "equal": first == second,
        "second: trace events": own_trace_events(log),
        "second: body runs": runs.count,
        "second compiled": log.count,
    }


def total(tree):
    """The sum of every leaf of a pytree: one function for probing how the pytree's
    structure enters the key."""
    return sum(jnp.sum(leaf) for leaf in jax.tree.leaves(tree))


def structure_cases() -> list[tuple[str, object]]:
    """Pytrees of the same two arrays passed in turn to one jitted ``total``: which make
    a new program?"""
    a, b = jnp.ones(3), jnp.zeros(3)
    return [
        ('{"a": a, "b": b}', {"a": a, "b": b}),
        ('{"b": b, "a": a} (insertion order)', {"b": b, "a": a}),
        ('{"a": a, "c": b} (a new key)', {"a": a, "c": b}),
        ("(a, b) (a tuple)", (a, b)),
        ("[a, b] (a list)", [a, b]),
    ]


def add(x, y):
    return x + y


def calling_rows() -> list[dict]:
    """Compiles of one jitted ``add`` for the same two arrays passed by position and by
    keyword."""
    x = jnp.ones(3)
    jitted = fresh_jit(add)
    calls = [
        ("add(x, y)", lambda: jitted(x, x)),
        ("add(x, y=y)", lambda: jitted(x, y=x)),
        ("add(x=x, y=y)", lambda: jitted(x=x, y=x)),
        ("add(x, y) again", lambda: jitted(x, x)),
    ]
    rows = []
    for label, call in calls:
        with count_compiles() as log:
            call()
        rows.append({"call": label, "compiled": log.count_for("add")})
    return rows


def miss_cases() -> list[tuple[str, tuple]]:
    """Calls of one jitted ``add_one``, in turn: the same array, a new shape, the array
    committed to a device."""
    x = jnp.ones(3)
    return [
        ("ones(3)", (x,)),
        ("ones(3) again", (x,)),
        ("ones(4)", (jnp.ones(4),)),
        ("device_put(ones(3))", (jax.device_put(x, jax.devices()[0]),)),
    ]


def cache_misses(
    fn: Callable = None, cases: Sequence[tuple[str, tuple]] | None = None
) -> list[dict]:
    """Which of jit's three caches each call missed (trace, lower, compile), and what
    each diagnostic saw.

    ``explained``: lines ``jax_explain_cache_misses`` wrote (no persistent cache here);
    ``logged compiles``: "Finished XLA compilation" lines of ``jax.log_compiles()``.
    """

    fn = add_one if fn is None else fn
    jitted = fresh_jit(fn)
    rows = []
    for label, args in miss_cases() if cases is None else cases:
        with (
            count_compiles() as log,
            capture_jax_logs() as messages,
            count_body_runs(fn) as runs,
        ):
            jitted(*args)
        name = fn.__name__
        rows.append(
            {
                "call": label,
                "trace events": log.trace_events.count(name),
                "body runs": runs.count,
                "lowered": log.lowerings.count(name),
                "compiled": log.count_for(name),
                "explained": sum(
                    "CACHE MISS" in m and f"for {name} defined" in m for m in messages
                ),
                "logged compiles": sum(
                    f"XLA compilation of jit({name})" in m for m in messages
                ),
            }
        )
    return rows


# --- the cache key: configuration -----------------------------------------------------


def matmul(a, b):
    return a @ b


CONFIG_CASES = [
    ("jax_enable_x64", True),
    ("jax_default_matmul_precision", "highest"),
    ("jax_numpy_rank_promotion", "raise"),
    ("jax_debug_nans", True),
    ("jax_log_compiles", True),
]


def config_compiles(name: str, value) -> dict:
    """Compiles of a warm ``jit(matmul)`` after setting option ``name`` to ``value``,
    and after setting it back."""
    if name not in jax.config.values:
        raise ValueError(
            f"{name!r} is not a JAX config option; see jax.config.values for the names."
        )
    a = jnp.ones((8, 8), dtype=jnp.float32)
    jitted = fresh_jit(matmul)
    jitted(a, a)
    old = jax.config.values[name]
    try:
        with count_compiles() as changed:
            jax.config.update(name, value)
            jitted(a, a)
    finally:
        jax.config.update(name, old)
    with count_compiles() as restored:
        jitted(a, a)
    return {
        "option": name,
        "set to": repr(value),
        "compiles when set": changed.count_for("matmul"),
        "compiles when set back": restored.count_for("matmul"),
    }


# --- loop traps and notebooks ---------------------------------------------------------


def plus_one(i):
    return i + 1


def jit_in_a_loop(how: str, steps: int = 10) -> dict:
    """Apply ``plus_one`` ``steps`` times through ``jax.jit(...)`` built in the loop,
    three ways; each starts cold, in a fresh process (``run_cold``), so the three are
    compared on equal terms and the caller's caches are left alone.

    Taught in Static arguments and compiling again, jit built inside a loop.
    """
    if how not in LOOP_MAKERS:
        raise ValueError(f"how must be one of {list(LOOP_MAKERS)}, got {how!r}.")
    return run_cold(_jit_in_a_loop, how, steps)


LOOP_MAKERS = {
    "jax.jit(partial(plus_one))": lambda: jax.jit(functools.partial(plus_one)),
    "jax.jit(lambda i: plus_one(i))": lambda: jax.jit(lambda i: plus_one(i)),
    "jax.jit(plus_one)": lambda: jax.jit(plus_one),
}


def _jit_in_a_loop(how: str, steps: int) -> dict:
    """``jit_in_a_loop`` in a process whose caches are empty."""
    i = 0
    with count_compiles() as log:
        for _ in range(steps):
            i = LOOP_MAKERS[how]()(i)
    return {"loop body": how, "steps": steps, "result": int(i), "compiles": log.count}


def jit_in_a_loop_log(how: str, steps: int = 2) -> list[str]:
    """JAX's log lines while ``jit_in_a_loop`` runs, in a fresh process, where its
    functions are new to JAX as on a reader's first run.

    Taught in jit's cache key and its caches, Diagnosing a recompile.
    """
    return run_cold(_jit_in_a_loop_log, how, steps)


def _jit_in_a_loop_log(how: str, steps: int) -> list[str]:
    with capture_jax_logs() as messages:
        _jit_in_a_loop(how, steps)
    return list(messages)


def compiles_around_clear_caches(x: jax.Array) -> int:
    """Compiles of a warm jitted ``add_one`` called once, then again after
    ``jax.clear_caches()``.

    It clears every function's caches, so run it in a fresh process (``run_cold``),
    never in a reader's. Taught in Static arguments and compiling again, Clearing
    caches.
    """
    add_one_jit = jax.jit(add_one)
    add_one_jit(x)
    with count_compiles() as log:
        add_one_jit(x)
        jax.clear_caches()
        add_one_jit(x)
    return log.count_for("add_one")


# --- buckets --------------------------------------------------------------------------


def soft_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of softplus(x) where ``mask`` is true: padding is ignored, so results do not
    move.

    Taught in Static arguments and compiling again, Variable sizes: padding to buckets.
    """
    y = jnp.logaddexp(x, 0.0)
    return jnp.sum(jnp.where(mask, y, 0.0)) / jnp.sum(mask)


def next_bucket(n: int, smallest: int = 16) -> int:
    """The padded length for ``n``: the next power of two, at least ``smallest``.

    Taught in Static arguments and compiling again, Variable sizes: padding to buckets.
    """
    whole_number(n, "n (a sequence length)")
    return max(smallest, 1 << (int(n) - 1).bit_length())


def stream_lengths(count: int, longest: int, seed: int = 0) -> list[int]:
    """A reproducible stream of ``count`` sequence lengths between 1 and ``longest``."""
    return [
        int(n) for n in np.random.default_rng(seed).integers(1, longest + 1, size=count)
    ]


@dataclasses.dataclass
class StreamRun:
    """One pass over a stream of sequences: compiles, wall time, and the results (to
    check them)."""

    how: str
    compiles: int
    seconds: float
    shapes: int
    results: np.ndarray

    def row(self) -> dict:
        return {
            "how": self.how,
            "distinct shapes": self.shapes,
            "compiles": self.compiles,
            "total (s)": self.seconds,
        }


def run_stream(lengths: Sequence[int], bucketed: bool, seed: int = 1) -> StreamRun:
    """Apply ``soft_mean`` to one random sequence per length, padded to buckets or at
    its own length."""
    if not lengths:
        raise ValueError("run_stream needs at least one length.")
    rng = np.random.default_rng(seed)
    data = [rng.normal(size=n).astype(np.float32) for n in lengths]
    jitted = fresh_jit(soft_mean)
    out, shapes = [], set()
    with count_compiles() as log:
        start = time.perf_counter()
        for x in data:
            size = next_bucket(len(x)) if bucketed else len(x)
            padded = np.zeros(size, np.float32)
            padded[: len(x)] = x
            shapes.add(size)
            out.append(jitted(padded, np.arange(size) < len(x)))
        results = np.asarray(jax.block_until_ready(jnp.stack(out)))
        seconds = time.perf_counter() - start
    return StreamRun(
        "padded to buckets" if bucketed else "each length as it comes",
        log.count_for("soft_mean"),
        seconds,
        len(shapes),
        results,
    )


# --- control flow without recompiling -------------------------------------------------


def shrink(x, mode):
    """Three ways to shrink values, chosen by ``mode`` (0, 1 or 2) with ``lax.switch``:
    one program.

    Taught in Static arguments and compiling again, Control flow without recompiling.
    """
    branches = [
        lambda v: jnp.clip(v, -1.0, 1.0),
        jnp.tanh,
        lambda v: v / (1.0 + jnp.abs(v)),
    ]
    return jax.lax.switch(mode, branches, x)


def shrink_static(x, mode: int):
    """The same choice with a Python ``if`` on a static ``mode``: one program per
    mode."""
    if mode == 0:
        return jnp.clip(x, -1.0, 1.0)
    if mode == 1:
        return jnp.tanh(x)
    return x / (1.0 + jnp.abs(x))


def sqrt_newton(a, tol):
    """Square root by Newton's method until the step is below ``tol``: a traced stop,
    ``lax.while_loop``.

    Taught in Static arguments and compiling again, Control flow without recompiling.
    """

    def not_done(state):
        x, step = state
        return step > tol

    def improve(state):
        x, _ = state
        new = 0.5 * (x + a / x)
        return new, jnp.abs(new - x)

    return jax.lax.while_loop(not_done, improve, (a, jnp.inf))[0]


def soft_threshold(x, t):
    """Shrink ``x`` towards 0 by ``t``, zero inside ``[-t, t]``: a branch per element,
    with ``jnp.where``."""
    return jnp.where(jnp.abs(x) > t, x - jnp.sign(x) * t, 0.0)


def first_k(x, k: int):
    """The first ``k`` entries: the output's shape depends on ``k``, so ``k`` has to be
    static."""
    return x[:k]


def control_flow_rows() -> list[dict]:
    """Compiles of each tool over several values of its control argument."""
    x = jnp.linspace(-3.0, 3.0, 7)
    rows = []

    def measure(tool, fn, calls, **jit_kwargs):
        jitted = fresh_jit(fn, **jit_kwargs)
        with count_compiles() as log:
            for args in calls:
                jitted(*args)
        rows.append(
            {"tool": tool, "calls": len(calls), "compiles": log.count_for(fn.__name__)}
        )

    measure("lax.switch on a traced mode", shrink, [(x, m) for m in (0, 1, 2)])
    measure(
        "Python if on a static mode",
        shrink_static,
        [(x, m) for m in (0, 1, 2)],
        static_argnums=1,
    )
    measure(
        "lax.while_loop with a traced tolerance",
        sqrt_newton,
        [(2.0, t) for t in (1e-2, 1e-4, 1e-6)],
    )
    measure(
        "jnp.where with a traced threshold",
        soft_threshold,
        [(x, t) for t in (0.5, 1.0, 2.0)],
    )
    measure(
        "static k (output shape depends on it)",
        first_k,
        [(x, k) for k in (2, 3, 4)],
        static_argnums=1,
    )
    return rows
