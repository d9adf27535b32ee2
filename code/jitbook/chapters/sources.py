"""The sources appendix's probes: the PLN tutorial's points, the Q&A's value-hashed
class, the blog's jit-in-a-loop, and the monitoring events `count_compiles` reads.
"""

from __future__ import annotations

import collections
import functools
import warnings
from collections.abc import Callable

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np

from jitbook import cache
from jitbook.arguments import whole_number
from jitbook.cache import count_compiles
from jitbook.chapters.pln import seed
from jitbook.chapters.pln.data import PLNData
from jitbook.chapters.pln.model import init_params
from jitbook.errors import error_line, raised
from jitbook.fresh import run_cold


class ValueHashed:
    """The Q&A's fix: `self` static, hashed and compared by value, then mutated.

    Taught in Where the sources no longer match,
    The Q&A thread on bound methods (and its translation).
    """

    def __init__(self, x: int, mul: bool) -> None:
        self.x, self.mul = x, mul

    @functools.partial(jax.jit, static_argnums=0)
    def calc(self, y):
        return self.x * y if self.mul else y

    def __hash__(self) -> int:
        return hash((self.x, self.mul))

    def __eq__(self, other) -> bool:
        return isinstance(other, ValueHashed) and (self.x, self.mul) == (
            other.x,
            other.mul,
        )


def _called(obj: ValueHashed, step: str, y: int = 3) -> dict:
    with count_compiles() as log:
        got = int(obj.calc(y))
    want = obj.x * y if obj.mul else y
    return {"step": step, "result": got, "expected": want, "compiles": log.count}


def mutation_rows(x: int = 2) -> list[dict]:
    """Call `calc`, mutate the object, call it on a new object equal to its first value.

    The cache keeps the mutated object as a key: its first entry no longer matches.
    """
    x = whole_number(x, "mutation_rows()'s x (a hashable Python int)", example="2")
    ValueHashed.calc.clear_cache()  # start empty: the rows count this run's compiles
    first = ValueHashed(x, True)
    rows = [_called(first, f"c = ValueHashed({x}, True); c.calc(3)")]
    first.mul = False
    rows.append(_called(first, "c.mul = False; c.calc(3)"))
    rows.append(_called(ValueHashed(x, True), f"ValueHashed({x}, True).calc(3)"))
    return rows


def add_one(i):
    return i + 1


def blog_loop_compiles(steps: int = 3) -> dict[str, int]:
    """Compiles in `steps` steps of each of the blog's loops, after one warm-up step.

    Taught in Where the sources no longer match, The blog post on jit.
    """
    whole_number(steps, "steps")
    loops: dict[str, Callable[[], Callable]] = {
        "jax.jit(partial(add_one))": lambda: jax.jit(functools.partial(add_one)),
        "jax.jit(lambda i: add_one(i))": lambda: jax.jit(lambda i: add_one(i)),
        "jax.jit(add_one)": lambda: jax.jit(add_one),
    }
    counts = {}
    for label, make in loops.items():
        make()(0)
        with count_compiles() as log:
            for i in range(steps):
                make()(i)
        counts[label] = log.count
    return counts


# What `count_compiles` records for each monitoring event it listens to.
COUNTED = {
    cache._TRACE: "a trace",
    cache._LOWER: "a lowering",
    cache._COMPILE: "a compile (`count`)",
    cache._CACHE_HIT: "a persistent-cache hit",
}


def compile_events(fn: Callable, *args) -> list[dict]:
    """The `jax.monitoring` events fired by the first call of a new `jax.jit(fn)`.

    Taught in Where the sources no longer match, How this book counts compiles.
    """
    if not callable(fn):
        raise TypeError(f"compile_events takes a function, got {type(fn).__name__}.")
    seen: collections.Counter[str] = collections.Counter()

    def on_duration(event: str, duration: float, **kwargs) -> None:
        seen[event] += 1

    def on_event(event: str, **kwargs) -> None:
        seen[event] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    try:
        jax.block_until_ready(cache.fresh_jit(fn)(*args))
    finally:
        jax.monitoring.unregister_event_duration_listener(on_duration)
        jax.monitoring.unregister_event_listener(on_event)
    return [
        {"event": name, "fired": n, "count_compiles records": COUNTED.get(name, "-")}
        for name, n in seen.items()
    ]


def _size_in_carry(carry, _):
    return {"p": carry["p"], "x": carry["x"] + jnp.zeros(carry["p"]).sum()}, None


def tutorial_facts(data: PLNData, n_iter: int = 8) -> dict:
    """What each point of the 2023 PLN tutorial does on the installed JAX.

    Runs `jitbook.chapters.pln.seed` on `data`; `n_iter` must reach the overflow of det.
    Taught in Where the sources no longer match, The 2023 PLN tutorial.
    """
    losses = np.asarray(seed.fit_with(data, n_iter, seed.seed_neg_elbo)[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log_losses = np.log(losses)
    if not np.isinf(losses).any():
        raise ValueError(
            f"det(Omega) did not overflow in {n_iter} iterations; pass more."
        )
    p = data[0].shape[1]
    start = init_params(data)._replace(M=jnp.ones(data[0].shape))
    grad_M = [
        jax.grad(seed.seed_neg_elbo)(start, data, k * jnp.eye(p)).M for k in (1.0, 2.0)
    ]
    by_lr = [
        seed.fit_with(data, 30, make_opt=seed.seed_optimizer, lr=lr)[0]
        for lr in (1e-4, 1.0)
    ]
    seed.pln = seed.SeedPLN(*data)  # the tutorial's global: the object being fitted
    level4 = np.asarray(seed.fit_level4(seed.pln, n_iter))
    held = np.asarray(seed.fit_with(data, n_iter, seed.identity_omega_neg_elbo)[0])
    plain = []
    for _ in range(2):
        with count_compiles() as log:
            seed.scan_fit(data, n_iter)
        plain.append(log.count_for("scan"))
    jax.jit(seed.scan_fit, static_argnums=1).lower(data, n_iter + 1).compile()
    with count_compiles() as after_aot:
        seed.scan_fit(data, n_iter + 1)
    return {
        "minus inf from": int(np.argmax(np.isinf(losses))) + 1,
        "nan from": int(np.argmax(np.isnan(log_losses))) + 1,
        "numpy warning": str(caught[0].message) if caught else "none",
        "Omega out of grad M": bool(jnp.allclose(*grad_M)),
        "lr ignored": bool(np.array_equal(*by_lr)),
        "size in carry": error_line(
            raised(jax.lax.scan, _size_in_carry, {"p": 3, "x": 0.0}, length=2)
        ),
        "level 4 is Omega = I": bool(np.allclose(level4, held, rtol=1e-6)),
        "global holds": type(seed.pln.Sigma).__name__,
        "plain scan compiles": plain,
        "after AOT compiles": after_aot.count_for("scan"),
    }


def persistent_cache_counts(fn: Callable, *args) -> list[dict]:
    """`fn(*args)` jitted, compiled once into a new persistent cache, then again after
    `jax.clear_caches()`, when it loads from that cache: what `count_compiles` reads
    each time.

    Runs in a fresh process (``run_cold``): it sets JAX's persistent-cache options and
    clears JAX's caches there, never in the caller's (the cache lives in a temporary
    folder). ``fn`` is a module-level function. Taught in Where the sources no longer
    match, How this book counts compiles.
    """
    return run_cold(_persistent_cache_counts, fn, *args)


def _persistent_cache_counts(fn: Callable, *args) -> list[dict]:
    """``persistent_cache_counts`` in a process of its own."""
    import tempfile

    from jax.experimental.compilation_cache import compilation_cache

    options = {
        "jax_compilation_cache_dir": None,
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": -1,
    }
    saved = {name: getattr(jax.config, name) for name in options}
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        options["jax_compilation_cache_dir"] = folder
        try:
            for name, value in options.items():
                jax.config.update(name, value)
            for step in ("first compile, cache empty", "after clear_caches()"):
                jax.clear_caches()
                with count_compiles() as log:
                    jax.block_until_ready(jax.jit(fn)(*args))
                rows.append(
                    {
                        "call": step,
                        f"count_for({fn.__name__!r})": log.count_for(fn.__name__),
                        "persistent_cache_hits": log.persistent_cache_hits,
                    }
                )
        finally:
            for name, value in saved.items():
                jax.config.update(name, value)
            compilation_cache.reset_cache()  # forget the folder about to be deleted
    return rows


def ledger_statuses(test: str) -> dict[str, str]:
    """A claim test's recorded status on each ledger release (`data/ledger.json`, a
    stored measurement made by `make ledger`): {release: "holds" | "fails" | ...}."""
    import json

    from jitbook.paths import DATA

    claims = json.loads((DATA / "ledger.json").read_text())["claims"]
    rows = [row for row in claims.values() if row["test"].endswith(f"::{test}")]
    if not rows:
        raise KeyError(f"no ledger row for a test named {test!r}; run `make ledger`.")
    results = rows[0].get("results", rows[0])
    return {
        release: (r.get("status") if isinstance(r, dict) else r)
        for release, r in results.items()
    }
