"""Time jitted functions the right way: block on results, warm up, repeat, and split the first call.

JAX dispatches work asynchronously, so a timer that does not wait for the result measures only the
dispatch. Every timing here calls ``jax.block_until_ready`` on what the function returns.
"""

import dataclasses
import statistics
import time
from collections.abc import Callable

import jax

from .cache import fresh_jit
from .display import Markdown, table


@dataclasses.dataclass
class Timing:
    """Wall times of repeated calls, in seconds."""

    name: str
    times: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    def row(self) -> dict:
        return {
            "function": self.name,
            "median (ms)": 1e3 * self.median,
            "min (ms)": 1e3 * self.min,
            "max (ms)": 1e3 * self.max,
            "repeats": len(self.times),
        }

    def _repr_markdown_(self) -> str:
        return table([self.row()]).text


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def check_callable(fn, who: str) -> None:
    """Refuse a value where a function is expected: the usual slip is passing ``f(x)`` for ``f``."""
    if not callable(fn):
        raise TypeError(
            f"{who} takes the function first, then its arguments, got {type(fn).__name__}; "
            f"write {who}(f, x), not {who}(f(x))."
        )


def time_call(
    fn: Callable, *args, repeats: int = 7, warmup: int = 1, **kwargs
) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls (compiling, if jitted), then
    ``repeats`` timed ones.

    Taught in Why compile?, Asynchronous dispatch.
    """
    check_callable(fn, "time_call")
    if repeats < 1 or warmup < 0:
        raise ValueError(
            f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, "
            f"warmup={warmup}."
        )
    for _ in range(warmup):
        jax.block_until_ready(fn(*args, **kwargs))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        times.append(time.perf_counter() - start)
    return Timing(_name(fn), times)


@dataclasses.dataclass
class Stages:
    """The first call of a jitted function, split into its ahead-of-time stages (seconds)."""

    name: str
    trace: float
    lower: float
    compile: float
    run: float
    traced: object = dataclasses.field(repr=False)
    lowered: object = dataclasses.field(repr=False)
    compiled: object = dataclasses.field(repr=False)

    @property
    def jaxpr(self):
        return self.traced.jaxpr

    @property
    def total(self) -> float:
        return self.trace + self.lower + self.compile + self.run

    def rows(self) -> list[dict]:
        return [
            {
                "stage": s,
                "ms": 1e3 * getattr(self, s),
                "share": f"{getattr(self, s) / self.total:.0%}",
            }
            for s in ("trace", "lower", "compile", "run")
        ]

    def _repr_markdown_(self) -> str:
        return table(self.rows()).text


def stages(fn: Callable, *args, static_argnums=(), **kwargs) -> Stages:
    """Walk ``jax.jit(fn)`` through trace, lower, compile and one run, timing each stage.

    jit caches traces and executables per function object, so we jit a fresh wrapper: the split is
    that of a true first call even when ``fn`` was called before.
    """
    check_callable(fn, "stages")

    jitted = fresh_jit(fn, static_argnums=static_argnums)
    t0 = time.perf_counter()
    traced = jitted.trace(*args, **kwargs)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    dynamic = [a for i, a in enumerate(args) if i not in _as_tuple(static_argnums)]
    jax.block_until_ready(compiled(*dynamic, **kwargs))
    t4 = time.perf_counter()
    return Stages(
        _name(fn), t1 - t0, t2 - t1, t3 - t2, t4 - t3, traced, lowered, compiled
    )


def _as_tuple(x) -> tuple:
    return (x,) if isinstance(x, int) else tuple(x)


def timings_table(*timings: Timing) -> Markdown:
    """Several timings as one table."""
    return table([t.row() for t in timings])
