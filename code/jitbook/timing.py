"""The book's one timing method: variants raced in interleaved rounds, and a verdict.

JAX dispatches work asynchronously, so every call is blocked on with
``jax.block_until_ready``. Each variant is called once untimed (its compile is not
timed), then the variants run in rounds, one call each per round, so a burst of load
on a shared machine slows every variant alike instead of whichever ran during it.
The minimum over rounds is the stable figure; the spread says how noisy the rounds
were; a comparison is "faster" or "slower" only when the rounds support it.
"""

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from jitbook.arguments import whole_number
from jitbook.cache import fresh_jit
from jitbook.display import Markdown, table

MIN_ROUNDS = 5  # fewer rounds than this never make a decisive verdict
WIN_SHARE = 0.9  # the faster variant must win at least this share of the rounds
MIN_FACTOR = 1.1  # and be faster by at least this factor (minimum against minimum)


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def check_callable(fn, who: str) -> None:
    """Refuse a value where a function is expected: the slip is ``f(x)`` for ``f``."""
    if not callable(fn):
        raise TypeError(
            f"{who} takes the function first, then its arguments, got "
            f"{type(fn).__name__}; write {who}(f, x), not {who}(f(x))."
        )


# --- verdicts


@dataclasses.dataclass(frozen=True, repr=False)
class Verdict:
    """How variant ``a`` compares with ``b`` over the same rounds.

    ``faster`` is True or False only when the rounds support it, None for a tie;
    ``factor`` (at least 1) is how many times faster or slower, minimum against
    minimum; ``str(verdict)`` and ``repr(verdict)`` are the phrase for prose, since
    Quarto writes an inline value's repr into the page.
    """

    a: str
    b: str
    faster: bool | None
    factor: float
    wins: int
    rounds: int
    reason: str

    @property
    def phrase(self) -> str:
        """``'2.6 times faster than'``, ``'1.4 times slower than'`` or ``'about the
        same here as'``: a reads "a was {phrase} b"."""
        if self.faster is None:
            return "about the same here as"
        times = f"{self.factor:.1f}" if self.factor < 10 else f"{self.factor:.0f}"
        return f"{times} times {'faster' if self.faster else 'slower'} than"

    @property
    def decisive(self) -> bool:
        return self.faster is not None

    def __str__(self) -> str:
        return self.phrase

    __repr__ = __str__


def _quartiles(times: Sequence[float]) -> tuple[float, float]:
    if len(times) < 2:
        return times[0], times[0]
    q = statistics.quantiles(times, n=4, method="inclusive")
    return q[0], q[2]


def _check_rounds(times, which: str) -> list[float]:
    if isinstance(times, (str, bytes)) or not isinstance(times, Sequence):
        raise TypeError(
            f"{which} must be a list of round times in seconds, got "
            f"{type(times).__name__}."
        )
    out = []
    for t in times:
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            raise TypeError(f"{which} holds {t!r}; round times are numbers of seconds.")
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"{which} holds {t!r}; round times must be positive.")
        out.append(float(t))
    if not out:
        raise ValueError(f"{which} is empty; race at least one round.")
    return out


def verdict_from_rounds(
    a_times: Sequence[float], b_times: Sequence[float], a: str = "a", b: str = "b"
) -> Verdict:
    """Compare two variants timed in the same rounds (``a_times[i]`` beside
    ``b_times[i]``).

    Decisive only when one variant wins nearly every round, its upper quartile lies
    below the other's lower quartile (the ranges do not overlap beyond noise) and its
    minimum is at least ``MIN_FACTOR`` times smaller; otherwise a tie.

    Taught in Why compile?, Timing that holds.
    """
    a_times = _check_rounds(a_times, "a_times")
    b_times = _check_rounds(b_times, "b_times")
    if len(a_times) != len(b_times):
        raise ValueError(
            f"a_times and b_times must come from the same rounds, got "
            f"{len(a_times)} and {len(b_times)} times."
        )
    n = len(a_times)
    a_wins = sum(x < y for x, y in zip(a_times, b_times, strict=True))
    ratio = min(b_times) / min(a_times)  # above 1: a is faster
    factor = max(ratio, 1 / ratio)
    fast, slow = (a_times, b_times) if ratio >= 1 else (b_times, a_times)
    wins = a_wins if ratio >= 1 else n - a_wins
    if n < MIN_ROUNDS:
        reason = f"only {n} rounds (a verdict needs {MIN_ROUNDS})"
    elif wins < WIN_SHARE * n:
        reason = f"the faster one won only {wins} of {n} rounds"
    elif _quartiles(fast)[1] >= _quartiles(slow)[0]:
        reason = "their ranges overlap"
    elif factor < MIN_FACTOR:
        reason = f"they differ by less than {MIN_FACTOR - 1:.0%}"
    else:
        return Verdict(a, b, ratio >= 1, factor, a_wins, n, "")
    return Verdict(a, b, None, factor, a_wins, n, reason)


# --- races


def _shown(value: float) -> float | int:
    """Three significant digits, whole numbers from 100 up: a table of times, not
    data."""
    return round(value) if value >= 100 else float(f"{value:.3g}")


def _unit(seconds: float) -> tuple[str, float]:
    if seconds >= 1:
        return "s", 1.0
    if seconds >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6


@dataclasses.dataclass
class Race:
    """Times of several variants, one call each per round, in seconds.

    ``per`` divides every time for display (iterations per call, say); verdicts
    compare the rounds themselves.
    """

    times: dict[str, list[float]]
    per: int = 1
    per_what: str = "call"

    @property
    def names(self) -> list[str]:
        return list(self.times)

    @property
    def rounds(self) -> int:
        return len(next(iter(self.times.values())))

    def _times(self, name: str) -> list[float]:
        if name not in self.times:
            raise KeyError(f"no variant {name!r} in this race; it has {self.names}.")
        return self.times[name]

    def min(self, name: str) -> float:
        """The fastest round of ``name``, in seconds per ``per_what``."""
        return min(self._times(name)) / self.per

    def median(self, name: str) -> float:
        return statistics.median(self._times(name)) / self.per

    def max(self, name: str) -> float:
        return max(self._times(name)) / self.per

    def verdict(self, a: str, b: str) -> Verdict:
        """How ``a`` compares with ``b``: ``f"{race.verdict('jit', 'eager')}"``."""
        return verdict_from_rounds(self._times(a), self._times(b), a, b)

    def agree(self, names: Sequence[str] | None = None) -> bool:
        """Whether no variant among ``names`` (default all) is decisively faster
        than another: the self-check for programs known to be the same."""
        names = list(names or self.names)
        return all(
            self.verdict(a, b).faster is None
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        )

    def rows(self) -> list[dict]:
        unit, scale = _unit(min(self.min(n) for n in self.names))
        if self.per != 1:
            unit = f"{unit} / {self.per_what}"
        return [
            {
                "variant": n,
                f"min ({unit})": _shown(scale * self.min(n)),
                f"median ({unit})": _shown(scale * self.median(n)),
                f"max ({unit})": _shown(scale * self.max(n)),
                "rounds": self.rounds,
            }
            for n in self.names
        ]

    @property
    def table(self) -> Markdown:
        """Minimum, median and maximum of every variant, in one unit."""
        return table(self.rows())

    def _repr_markdown_(self) -> str:
        return self.table.text


def _check_race(variants, rounds, min_time, max_rounds, per, warmup=1) -> None:
    example = "{'op by op': lambda: f(x), 'jit': lambda: jit_f(x)}"
    if not isinstance(variants, Mapping):
        raise TypeError(
            f"race takes a dict of named variants, e.g. {example}; got "
            f"{type(variants).__name__}."
        )
    if not variants:
        raise ValueError(
            f"race got an empty dict: give at least one named variant, e.g. {example}."
        )
    for name, fn in variants.items():
        if not isinstance(name, str):
            raise TypeError(f"variant names must be strings, got {name!r}.")
        if not callable(fn):
            raise TypeError(
                f"variant {name!r} must be a function of no arguments, got "
                f"{type(fn).__name__}; write lambda: f(x), not f(x)."
            )
    for label, value in (("rounds", rounds), ("max_rounds", max_rounds), ("per", per)):
        whole_number(value, label)
    if max_rounds < rounds:
        raise ValueError(f"max_rounds ({max_rounds}) is below rounds ({rounds}).")
    if not isinstance(min_time, (int, float)) or not min_time >= 0:
        raise ValueError(f"min_time must be seconds >= 0, got {min_time!r}.")
    whole_number(warmup, "warmup", minimum=0)


def race(
    variants: Mapping[str, Callable[[], Any]],
    rounds: int = 7,
    min_time: float = 0.5,
    *,
    max_rounds: int = 1000,
    warmup: int = 1,
    per: int = 1,
    per_what: str = "iter",
) -> Race:
    """Time zero-argument ``variants`` in interleaved rounds: at least ``rounds``, and
    more until the timed calls add up to ``min_time`` seconds (at most ``max_rounds``).

    Each variant is called ``warmup`` times untimed first, so compiling is left out;
    every call is blocked on. Each round starts one variant later than the last, so
    no variant always runs first.

    Taught in Why compile?, Timing that holds.
    """
    _check_race(variants, rounds, min_time, max_rounds, per, warmup)
    names = list(variants)
    for name in names:
        for _ in range(warmup):
            jax.block_until_ready(variants[name]())
    times: dict[str, list[float]] = {n: [] for n in names}
    spent = 0.0
    for r in range(max_rounds):
        if r >= rounds and spent >= min_time:
            break
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            start = time.perf_counter()
            jax.block_until_ready(variants[name]())
            elapsed = time.perf_counter() - start
            times[name].append(elapsed)
            spent += elapsed
    return Race(times, per, per_what if per != 1 else "call")


# --- the first call, split into stages


@dataclasses.dataclass
class Stages:
    """The first call of a jitted function, split into its ahead-of-time stages (s)."""

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
    """Walk ``jax.jit(fn)`` through trace, lower, compile and one run, timing each.

    jit caches traces and executables per function object, so we jit a fresh wrapper:
    the split is that of a true first call even when ``fn`` was called before.
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
