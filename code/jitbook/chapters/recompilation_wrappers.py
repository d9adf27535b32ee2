"""New jit wrappers: the C++ dispatch cache (jit's cache key and its caches: what
misses it, what a new wrapper costs, how many callables it holds) and the slow tracing
page's ``partial`` built in a loop (Static arguments and compiling again).

Taught in jit's cache key and its caches, The dispatch cache.
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
from jitbook.fresh import run_cold


def wrapper_race(calls: int = 100, rounds: int = 31) -> "timing.Race":
    """Race ``calls`` calls of ``plus_one`` per round: through one reused wrapper,
    through new wrappers built beforehand (the first call of each), through a new
    ``jax.jit(plus_one)`` built at each call, and building it without calling.

    Taught in jit's cache key and its caches, The dispatch cache.
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
    Measured in a fresh process (``run_cold``): cold caches, the caller's left alone.

    Taught in jit's cache key and its caches, The dispatch cache.
    """
    whole_number(wrappers, "wrappers")
    return run_cold(_dispatch_rows, wrappers)


def _dispatch_rows(n: int) -> list[dict]:
    """``dispatch_rows`` in a process whose caches are empty."""
    # made before counting: eager operations compile programs of their own
    x = jnp.ones(3)
    reused, noted = jax.jit(plus_one), jax.jit(plus_one_noted)
    noted(0)
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


PARTIAL_FORMS = {
    "jax.jit(partial(add_multiply, scale=2.0))(x, y), the same scale": (
        lambda x, y, s: jax.jit(functools.partial(add_multiply, scale=2.0))(x, y)
    ),
    "jax.jit(partial(add_multiply, scale=s))(x, y), a new s each step": (
        lambda x, y, s: jax.jit(functools.partial(add_multiply, scale=s))(x, y)
    ),
    "jax.jit(partial(add_multiply))(x, y, s), nothing bound": (
        lambda x, y, s: jax.jit(functools.partial(add_multiply))(x, y, s)
    ),
    "jax.jit(add_multiply)(x, y, s), no partial": (
        lambda x, y, s: jax.jit(add_multiply)(x, y, s)
    ),
}


def docs_partial_rows(steps: int = 5) -> list[dict]:
    """The docs' ``jax.jit(functools.partial(add_multiply, scale=s))(x, y)`` run
    ``steps`` times in a loop, against the forms without bound arguments; each form
    starts cold, in a fresh process of its own (``run_cold``).

    Taught in Static arguments and compiling again, jit built inside a loop.
    """
    whole_number(steps, "steps")
    return [run_cold(_partial_form_row, label, steps) for label in PARTIAL_FORMS]


def _partial_form_row(label: str, steps: int) -> dict:
    """One form of ``docs_partial_rows``, in a process whose caches are empty."""
    x = y = jnp.ones(3)
    with count_compiles() as log, count_body_runs(add_multiply) as runs:
        for i in range(steps):
            PARTIAL_FORMS[label](x, y, float(i + 1))
    return {
        "loop body": label,
        "steps": steps,
        "trace events": log.trace_events.count("add_multiply"),
        "body runs": runs.count,
        "compiles": log.count_for("add_multiply"),
    }


def equal_objects_counts(objects: int = 100) -> dict:
    """Jit ``objects`` equal ``ScaleBy(2.0)`` objects, all kept alive, and call each
    once: JAX's trace events, runs of ``ScaleBy``'s body, and compiles.

    Measured in a fresh process (``run_cold``): cold caches, the caller's left alone.
    """
    whole_number(objects, "objects")
    return run_cold(_equal_objects_counts, objects)


def _equal_objects_counts(objects: int) -> dict:
    """``equal_objects_counts`` in a process whose caches are empty."""
    x = jnp.ones(3)
    kept = [ScaleBy(2.0) for _ in range(objects)]
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
    compiled program, so each costs only a dispatch miss (about a millisecond). Run in
    a fresh process (``run_cold``): filling the cache there evicts nothing of the
    caller's.
    """
    whole_number(callables, "callables")
    return run_cold(_dispatch_cache_holds, callables)


def _dispatch_cache_holds(callables: int) -> int:
    """``dispatch_cache_holds`` in a process of its own."""
    x = jnp.ones(3)
    kept = [ScaleBy(2.0) for _ in range(callables)]
    for fn in kept:
        jax.jit(fn)(x)
    with count_dispatch_misses() as dispatch:
        jax.jit(kept[0])(x)
    return len(dispatch.misses)


def python_cache_sizes() -> dict[str, int]:
    """The sizes of the LRU caches a dispatch miss falls back on, read from JAX (private
    names: the test suite fails if they move)."""
    from jax._src import pjit
    from jax._src.interpreters import pxla

    caches = {
        "inferred parameters": pjit._infer_params_cached,
        "lowering": pjit._pjit_lower,
        "lowering to HLO": pxla._cached_lowering_to_hlo,
        "compilation": pxla._cached_compilation,
    }
    return {name: cache.cache_info().maxsize for name, cache in caches.items()}


def python_path_after(programs: int) -> dict:
    """Lowerings and compiles of a warm call taking jit's Python path (a program with
    an effect, never in the dispatch cache) after ``programs`` other programs, all kept
    alive, were compiled.

    It fills JAX's caches, so it runs in a fresh process (``run_cold``).
    """
    programs = whole_number(programs, "programs", minimum=0, example="100")
    return run_cold(_python_path_after, programs)


def _python_path_after(programs: int) -> dict:
    """``python_path_after`` in a process of its own."""
    noted = jax.jit(plus_one_noted)
    noted(0)
    kept = [lambda v, i=i: v + i for i in range(programs)]
    for fn in kept:
        jax.jit(fn)(0)
    with count_compiles() as log:
        noted(0)
        jax.effects_barrier()
    return {
        "other programs": programs,
        "lowerings": log.lowerings.count("plus_one_noted"),
        "compiles": log.count_for("plus_one_noted"),
    }


def caches_filled() -> dict[str, tuple[int, int]]:
    """Entries that one first call adds to each of jit's two dispatch caches (the one
    for ``jax.jit(f)``, the one for wrappers with options), for a plain wrapper, a
    wrapper with donation, and a ``jnp`` function; in a fresh process (``run_cold``)."""
    return {k: tuple(v) for k, v in run_cold(_caches_filled).items()}


def _caches_filled() -> dict[str, tuple[int, int]]:
    """``caches_filled`` in a process whose caches are empty."""
    from jax._src import pjit

    def sizes():
        plain = pjit._cpp_pjit_cache_fun_only.size()
        return plain, pjit._cpp_pjit_cache_explicit_attributes.size()

    x, kept = jnp.arange(5.0), ScaleBy(3.0)  # kept alive: entries are weakly held
    calls = {
        "jax.jit(plus_one)": lambda: jax.jit(plus_one)(x),
        "jax.jit(ScaleBy(3.0), donate_argnums=0)": lambda: jax.jit(
            kept, donate_argnums=0
        )(jnp.arange(5.0)),
        "jnp.sin": lambda: jnp.sin(x),
    }
    filled = {}
    for name, call in calls.items():
        before = sizes()
        call()
        filled[name] = tuple(a - b for a, b in zip(sizes(), before, strict=True))
    return filled
