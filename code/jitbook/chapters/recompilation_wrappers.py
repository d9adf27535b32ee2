"""Static arguments and compiling again, new jit wrappers: the C++ dispatch cache
(what misses it, what a new wrapper costs, how many callables it holds) and the slow
tracing page's ``partial`` built in a loop.

Taught in Static arguments and compiling again, The dispatch cache.
"""

import functools
import gc
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jitbook import timing
from jitbook.arguments import whole_number
from jitbook.cache import count_body_runs, count_compiles, count_dispatch_misses
from jitbook.chapters.recompilation import ScaleBy, own_trace_events, plus_one


def wrapper_race(calls: int = 100, rounds: int = 31) -> "timing.Race":
    """Race ``calls`` calls of ``plus_one`` per round: through one reused wrapper,
    through new wrappers built beforehand (the first call of each), through a new
    ``jax.jit(plus_one)`` built at each call, and building it without calling.

    Taught in Static arguments and compiling again, The dispatch cache.
    """
    for label, value in (("calls", calls), ("rounds", rounds)):
        whole_number(value, label)
    reused = jax.jit(plus_one)
    # one wrapper per timed call and per warm-up call, all built before the race
    prebuilt = iter([jax.jit(plus_one) for _ in range(calls * (rounds + 1))])

    def repeat(call: Callable) -> Callable:
        def many():
            for _ in range(calls):
                out = call()
            return out

        return many

    variants = {
        "one reused wrapper": repeat(lambda: reused(0)),
        "first call of a wrapper built beforehand": repeat(lambda: next(prebuilt)(0)),
        "a new jax.jit(plus_one) per call": repeat(lambda: jax.jit(plus_one)(0)),
        "building jax.jit(plus_one), no call": repeat(lambda: jax.jit(plus_one) and 0),
    }
    # As timeit does: the garbage of the new wrappers would otherwise be collected
    # during whichever variant runs next, and land in its round.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return timing.race(
            variants,
            rounds=rounds,
            min_time=0.0,
            max_rounds=rounds,
            per=calls,
            per_what="call",
        )
    finally:
        if collecting:
            gc.enable()


def rejit_cost(calls: int = 200) -> dict:
    """Microseconds per call of ``plus_one``: one wrapper reused, a new one at each
    call.

    Both reach the same program through jit's global dispatch cache, which is keyed on
    the function and jit's options, not on the wrapper: ``slow-path calls`` counts the
    calls that missed it (0). The difference is the cost of building the wrapper.
    Minimum per call over the rounds of ``wrapper_race``.
    """
    whole_number(calls, "calls")
    jax.jit(plus_one)(0)  # compile outside the count
    with count_compiles() as log, count_dispatch_misses() as dispatch:
        race = wrapper_race(calls)
    return {
        "calls": calls,
        "compiles": log.count_for("plus_one"),
        "slow-path calls": dispatch.count_for("plus_one"),
        "reused wrapper (us)": 1e6 * race.min("one reused wrapper"),
        "jax.jit(plus_one) per call (us)": 1e6
        * race.min("a new jax.jit(plus_one) per call"),
        "building jax.jit(plus_one) only (us)": 1e6
        * race.min("building jax.jit(plus_one), no call"),
    }


def plus_one_noted(i):
    """``plus_one`` with a ``jax.debug.callback`` that does nothing: a program with an
    effect, which jit never puts in its dispatch cache."""
    jax.debug.callback(lambda v: None, i)
    return i + 1


def _new_wrapper(fn: Callable, **options) -> Callable:
    """A maker of ``(fn, jax.jit(fn, **options))``: the callable is kept alive with
    it."""
    return lambda: (fn, jax.jit(fn, **options))


def dispatch_rows(wrappers: int = 100) -> list[dict]:
    """Calls through many jit wrappers: which leave the C++ dispatch cache, which
    compile.

    Each row calls ``wrappers`` new wrappers once each (or one wrapper that many times).
    The callables of a row stay alive until it is counted, as in a loop that keeps them.
    Clears jit's caches first (``jax.clear_caches()``), for every function.

    Taught in Static arguments and compiling again, The dispatch cache.
    """
    whole_number(wrappers, "wrappers")
    # made before counting: eager operations compile programs of their own
    x = jnp.ones(3)
    jax.clear_caches()
    reused, noted = jax.jit(plus_one), jax.jit(plus_one_noted)
    noted(0)
    n = wrappers
    cases = [  # row, calls, name to count, argument, maker of (callable, wrapper)
        ("first call of jax.jit(plus_one)", 1, "plus_one", 0, _new_wrapper(plus_one)),
        ("a new jax.jit(plus_one) per call", n, "plus_one", 0, _new_wrapper(plus_one)),
        ("one reused wrapper", n, "plus_one", 0, lambda: (plus_one, reused)),
        (
            "a new jax.jit(plus_one, static_argnums=0)",
            n,
            "plus_one",
            0,
            _new_wrapper(plus_one, static_argnums=0),
        ),
        (
            "a new jax.jit(ScaleBy(2.0))",
            n,
            "ScaleBy",
            x,
            lambda: _new_wrapper(ScaleBy(2.0))(),
        ),
        (
            "a new jax.jit(functools.partial(plus_one))",
            n,
            "partial",
            0,
            lambda: _new_wrapper(functools.partial(plus_one))(),
        ),
        (
            "one reused wrapper of plus_one_noted (a debug callback)",
            n,
            "plus_one_noted",
            0,
            lambda: (plus_one_noted, noted),
        ),
    ]
    rows = []
    for label, calls, name, arg, make in cases:
        kept, body = [], make()[0]  # the function whose body runs are counted
        with (
            count_compiles() as log,
            count_dispatch_misses() as dispatch,
            count_body_runs(body) as runs,
        ):
            for _ in range(calls):
                fn, wrapper = make()
                kept.append(fn)
                wrapper(arg)
            jax.effects_barrier()
        rows.append(
            {
                "calls": label,
                "how many": calls,
                "dispatch-cache misses": dispatch.count_for(name),
                "trace events": own_trace_events(log),
                "body runs": runs.count,
                "compiles": log.count,
            }
        )
    return rows


def add_multiply(a, b, scale):
    """``(a + b) * scale``: the example of JAX's "Debugging slow tracing" page."""
    return (a + b) * scale


def docs_partial_rows(steps: int = 5) -> list[dict]:
    """The docs' ``jax.jit(functools.partial(add_multiply, scale=s))(x, y)`` run
    ``steps`` times in a loop, against the forms without bound arguments; clears jit's
    caches before each form, for every function.

    Taught in Static arguments and compiling again, jit built inside a loop.
    """
    whole_number(steps, "steps")
    x = y = jnp.ones(3)
    forms = {
        "jax.jit(partial(add_multiply, scale=2.0))(x, y), the same scale": (
            lambda s: jax.jit(functools.partial(add_multiply, scale=2.0))(x, y)
        ),
        "jax.jit(partial(add_multiply, scale=s))(x, y), a new s each step": (
            lambda s: jax.jit(functools.partial(add_multiply, scale=s))(x, y)
        ),
        "jax.jit(partial(add_multiply))(x, y, s), nothing bound": (
            lambda s: jax.jit(functools.partial(add_multiply))(x, y, s)
        ),
        "jax.jit(add_multiply)(x, y, s), no partial": (
            lambda s: jax.jit(add_multiply)(x, y, s)
        ),
    }
    rows = []
    for label, step in forms.items():
        jax.clear_caches()  # each form starts cold
        with count_compiles() as log, count_body_runs(add_multiply) as runs:
            for i in range(steps):
                step(float(i + 1))
        rows.append(
            {
                "loop body": label,
                "steps": steps,
                "trace events": log.trace_events.count("add_multiply"),
                "body runs": runs.count,
                "compiles": log.count_for("add_multiply"),
            }
        )
    return rows


def equal_objects_counts(objects: int = 100) -> dict:
    """Jit ``objects`` equal ``ScaleBy(2.0)`` objects, all kept alive, and call each
    once: JAX's trace events, runs of ``ScaleBy``'s body, and compiles.

    Clears jit's caches first (``jax.clear_caches()``), for every function.
    """
    whole_number(objects, "objects")
    x = jnp.ones(3)
    kept = [ScaleBy(2.0) for _ in range(objects)]
    jax.clear_caches()
    with count_compiles() as log, count_body_runs(ScaleBy.__call__) as runs:
        for fn in kept:
            jax.jit(fn)(x)
    return {
        "objects": objects,
        "trace events": own_trace_events(log),
        "body runs": runs.count,
        "compiles": log.count,
    }


DISPATCH_CACHE_SIZE = 8192  # jax/_src/pjit.py: make_jit_cpp_cache(8192)


def dispatch_cache_holds(callables: int) -> int:
    """Jit ``callables`` equal ``ScaleBy(2.0)`` objects, all kept alive, one call each;
    then call the first again through a new wrapper: its dispatch-cache misses.

    0 while the C++ cache still holds the first callable's entry, 1 once it was evicted:
    the cache holds a bounded number of callables. Equal objects share one traced and
    compiled program, so each costs only a dispatch miss (about a millisecond).
    """
    whole_number(callables, "callables")
    x = jnp.ones(3)
    kept = [ScaleBy(2.0) for _ in range(callables)]
    for fn in kept:
        jax.jit(fn)(x)
    with count_dispatch_misses() as dispatch:
        jax.jit(kept[0])(x)
    return len(dispatch.misses)
