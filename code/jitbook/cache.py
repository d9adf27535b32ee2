"""Count what jit does (trace events, lowerings and XLA compilations, from JAX's
public monitoring events; Python body runs, with a wrapper), read JAX's own cache-miss
explanations, and probe the cache with fresh jitted wrappers."""

import contextlib
import dataclasses
import functools
import inspect
import logging
import re
import sys
import types
from collections.abc import Callable, Iterator, Sequence

import jax
import jax.monitoring

from jitbook.display import fit

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_COMPILE = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"


def _plain_name(fun_name: str) -> str:
    """``jit(step)`` -> ``step``: JAX wraps the name in the transformation when it
    lowers."""
    while (m := re.fullmatch(r"\w+\((.*)\)", fun_name)) is not None:
        fun_name = m.group(1)
    return fun_name


_seen_names: set[str] = set()  # every function name jit traced in this process


def _remember_name(event: str, duration: float, **kwargs) -> None:
    """Note each traced function's name, so a misspelt ``count_for`` name is caught."""
    if event == _TRACE:
        _seen_names.add(_plain_name(str(kwargs.get("fun_name", "?"))))


jax.monitoring.register_event_duration_secs_listener(_remember_name)


@dataclasses.dataclass
class CompileLog:
    """What jit did inside a ``count_compiles()`` block, one function name per event.

    ``trace_events`` counts JAX's trace event, which fires each time jit asks its
    tracing cache for a program (after a miss of its dispatch cache); that cache is
    keyed by the callable's equality, so an event does not mean the Python body ran
    (count that with ``count_body_runs``). Eager ``jnp`` calls compile small programs
    of their own (``broadcast_in_dim``, ``add``...); they are counted in ``count``, so
    ``count_for(name)`` is the number to read for one function.
    """

    trace_events: list[str] = dataclasses.field(default_factory=list)
    lowerings: list[str] = dataclasses.field(default_factory=list)
    compiles: list[str] = dataclasses.field(default_factory=list)
    compile_seconds: float = 0.0
    persistent_cache_hits: int = 0

    @property
    def count(self) -> int:
        """XLA compilations in the block; a load from the persistent cache counts too
        (see persistent_cache_hits)."""
        return len(self.compiles)

    def count_for(self, name: str) -> int:
        """XLA compilations of functions called ``name`` (as in ``def name``)."""
        if not isinstance(name, str):
            raise TypeError(
                "count_for takes a function name as a string, got "
                f"{type(name).__name__}; pass f.__name__ for a function f."
            )
        if self.compiles and all(n == "?" for n in self.compiles):
            raise RuntimeError(  # JAX 0.5.3 and older send no fun_name with the event
                "count_for needs a newer JAX: this one's compile events name no "
                "function, so compiles cannot be told apart by name; read .count."
            )
        found = sum(_plain_name(n) == name for n in self.compiles)
        if not found and name not in _seen_names and "?" not in _seen_names:
            compiled = ", ".join(sorted(set(self.compiles))) or "nothing"
            raise ValueError(
                f"jit never traced a function called {name!r} in this process, so "
                f"count_for({name!r}) cannot count it: check the spelling (this "
                f"block compiled: {compiled})."
            )
        return found

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        name = _plain_name(str(kwargs.get("fun_name", "?")))
        if event == _TRACE:
            self.trace_events.append(name)
        elif event == _LOWER:
            self.lowerings.append(name)
        elif event == _COMPILE:
            self.compiles.append(name)
            self.compile_seconds += duration

    def _on_event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HIT:
            self.persistent_cache_hits += 1

    def __repr__(self) -> str:
        return (
            f"CompileLog(count={self.count}, compiles={self.compiles}, "
            f"trace_events={self.trace_events}, "
            f"compile_seconds={self.compile_seconds:.3f})"
        )


def _unregister(name: str) -> Callable:
    """``jax.monitoring.unregister_*``; JAX 0.7.2 and older have only a private form."""
    from jax._src import monitoring  # the fallback the claim ledger needs on old JAX

    public = getattr(jax.monitoring, f"unregister_{name}", None)
    return public or getattr(monitoring, f"_unregister_{name}_by_callback")


class _CalledFirst(type):
    """``with count_compiles as log`` (no parentheses) says how to write it."""

    def __enter__(cls):
        raise TypeError(
            f"{cls.__name__} is called: write `with {cls.__name__}() as log:`, "
            "with the parentheses."
        )

    def __exit__(cls, *exc) -> None:
        return None


class count_compiles(metaclass=_CalledFirst):  # noqa: N801  (reads as a function)
    """Count trace events, lowerings and XLA compiles in the block:
    ``with count_compiles() as log: ...``; one ``count_compiles()`` per block."""

    def __init__(self) -> None:
        self.log: CompileLog | None = None

    def __enter__(self) -> CompileLog:
        if self.log is not None:
            raise RuntimeError(
                "this count_compiles() already counted a block; write a new "
                "`with count_compiles() as log:` for each block you count."
            )
        self.log = CompileLog()
        jax.monitoring.register_event_duration_secs_listener(self.log._on_duration)
        jax.monitoring.register_event_listener(self.log._on_event)
        return self.log

    def __exit__(self, *exc) -> None:
        _unregister("event_duration_listener")(self.log._on_duration)
        _unregister("event_listener")(self.log._on_event)


def _code_of(fn: object) -> types.CodeType:
    """The code object that runs when ``fn`` is called: a function's, a method's, a
    ``partial``'s or a jitted wrapper's function's, or a callable object's
    ``__call__``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    if isinstance(fn, types.FunctionType):
        return fn.__code__
    call = type(fn).__call__ if callable(fn) else None
    if isinstance(call, types.FunctionType):
        return call.__code__
    raise TypeError(
        f"count_body_runs takes Python functions or callable objects, got "
        f"{type(fn).__name__}; a built-in or a jitted wrapper has no Python body "
        "to count."
    )


@dataclasses.dataclass
class BodyRuns:
    """How often the Python bodies of some functions started inside a block."""

    runs: dict[types.CodeType, int]

    @property
    def count(self) -> int:
        """Body runs of all the functions counted."""
        return sum(self.runs.values())

    def count_for(self, fn: Callable) -> int:
        """Body runs of ``fn`` (one of the functions given to ``count_body_runs``)."""
        return self.runs[_code_of(fn)]


_active: list[BodyRuns] = []  # the open count_body_runs blocks
_tool: list[int] = []  # the sys.monitoring tool id while a block is open


def _on_start(code: types.CodeType, offset: int) -> None:
    for log in _active:
        if code in log.runs:
            log.runs[code] += 1


def _watch(codes: set[types.CodeType], on: bool) -> None:
    """Start or stop the PY_START events of ``codes`` (one tool id for all blocks)."""
    monitoring = sys.monitoring
    if on and not _tool:
        free = [i for i in range(6) if monitoring.get_tool(i) is None]
        if not free:
            raise RuntimeError(
                "count_body_runs: every sys.monitoring tool id is taken."
            )
        monitoring.use_tool_id(free[-1], "jitbook.count_body_runs")
        monitoring.register_callback(free[-1], monitoring.events.PY_START, _on_start)
        _tool.append(free[-1])
    watched = {code for log in _active for code in log.runs}
    for code in codes:
        wanted = code in watched
        events = monitoring.events.PY_START if wanted else monitoring.events.NO_EVENTS
        monitoring.set_local_events(_tool[0], code, events)
    if not _active and _tool:
        monitoring.register_callback(_tool[0], monitoring.events.PY_START, None)
        monitoring.free_tool_id(_tool.pop())


@contextlib.contextmanager
def count_body_runs(*fns: Callable) -> Iterator[BodyRuns]:
    """Count how often the Python bodies of ``fns`` start in the block, without
    wrapping them (a wrapper would be a new function to jit's caches):
    ``with count_body_runs(f) as runs: ...; runs.count``.

    It watches each function's code object with ``sys.monitoring``, so it counts every
    function made from the same code (each closure of one ``def``, every instance of
    one class's ``__call__``). Under jit a body runs when jit traces it, not at each
    call: a hit of jit's caches, or of its tracing cache for an equal callable, runs
    nothing. Eager calls, ``make_jaxpr`` and ``eval_shape`` run it too.
    """
    if not fns:
        raise TypeError(
            "count_body_runs takes the functions to count: count_body_runs(f)."
        )
    log = BodyRuns({_code_of(fn): 0 for fn in fns})
    _active.append(log)
    try:
        _watch(set(log.runs), on=True)
        yield log
    finally:
        _active.remove(log)
        _watch(set(log.runs), on=False)


@dataclasses.dataclass
class DispatchLog:
    """Calls that missed jit's C++ dispatch cache, one function name per call.

    A miss runs jit's Python fallback, which infers the call's parameters and looks up
    the tracing cache; a hit goes straight from C++ to the compiled program.
    """

    misses: list[str] = dataclasses.field(default_factory=list)

    def count_for(self, name: str) -> int:
        """Dispatch-cache misses of calls to functions called ``name``."""
        if not isinstance(name, str):
            raise TypeError(
                f"count_for takes a function name as a string, got "
                f"{type(name).__name__}; pass f.__name__ for a function f."
            )
        return self.misses.count(name)


@contextlib.contextmanager
def count_dispatch_misses() -> Iterator[DispatchLog]:
    """Count the jitted calls that leave the C++ dispatch cache for the Python path.

    JAX has no public counter for this: we wrap ``jax._src.pjit._infer_params``, the
    first step of that Python path (``.trace`` and ``.lower`` call it too).

    Taught in jit's cache key and its caches, The dispatch cache.
    """
    from jax._src import pjit

    original = getattr(pjit, "_infer_params", None)
    if original is None:
        raise RuntimeError(
            "jax._src.pjit._infer_params is gone in this JAX version; "
            "count_dispatch_misses needs a new hook."
        )
    log = DispatchLog()

    @functools.wraps(original)
    def counting(fun, *args, **kwargs):
        log.misses.append(getattr(fun, "__name__", type(fun).__name__))
        return original(fun, *args, **kwargs)

    pjit._infer_params = counting
    try:
        yield log
    finally:
        pjit._infer_params = original


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def capture_jax_logs(
    explain_cache_misses: bool = True, log_compiles: bool = True
) -> Iterator[list[str]]:
    """Capture the messages of ``jax_explain_cache_misses`` and ``jax.log_compiles()``
    as strings.

    JAX writes them through the ``jax`` logger at WARNING level; we listen there instead
    of scraping stderr, so a chapter can show the real text.

    Taught in jit's cache key and its caches, Diagnosing a recompile.
    """
    handler = _Records()
    logger = logging.getLogger("jax")
    old_explain = jax.config.jax_explain_cache_misses
    logger.addHandler(handler)
    try:
        jax.config.update("jax_explain_cache_misses", explain_cache_misses)
        with jax.log_compiles(log_compiles):
            yield handler.messages
    finally:
        jax.config.update("jax_explain_cache_misses", old_explain)
        logger.removeHandler(handler)


def fresh_jit(fn: Callable, **jit_kwargs) -> Callable:
    """``jax.jit`` of a new wrapper of ``fn``: same name, no cache entries yet (jit's
    caches are keyed on the function object)."""
    if not callable(fn):
        raise TypeError(f"fresh_jit takes a function, got {type(fn).__name__}.")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return jax.jit(wrapper, **jit_kwargs)


def probe(fn: Callable, cases: Sequence[tuple[str, object]]) -> list[dict]:
    """Call one fresh ``jax.jit(fn)`` on each case in turn; one row per call: what jit
    saw, did it compile."""
    jitted = fresh_jit(fn)
    rows = []
    for label, arg in cases:
        with count_compiles() as log:
            jitted(arg)
        types = [jax.typeof(leaf) for leaf in jax.tree.leaves(arg)]
        seen = jax.tree.map(
            lambda leaf: jax.typeof(leaf).str_short(short_dtypes=True), arg
        )
        rows.append(
            {
                "argument": label,
                "jit sees": str(seen).replace("'", ""),
                "weak type": any(t.weak_type for t in types),
                "compiled": log.count_for(fn.__name__),
            }
        )
    return rows


def run_cell(source: str, name: str) -> Callable:
    """Run ``source`` as a notebook cell would and return the function ``name`` it
    defines (a new object each time)."""
    namespace: dict = {}
    exec(compile(source, f"<cell defining {name}>", "exec"), namespace)
    if name not in namespace:
        raise ValueError(
            f"the cell does not define {name!r}; it defines "
            f"{sorted(k for k in namespace if k != '__builtins__')}."
        )
    return namespace[name]


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/:]+)+[\\/]([^\s\\/:]+\.py)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b|\bid=\d+")


def without_paths(message: str) -> str:
    """``message`` with file paths cut to their file name and memory addresses masked:
    no build paths on a page."""
    return _ADDRESS.sub(
        lambda m: "id=..." if m.group().startswith("id") else "0x...",
        _PATH.sub(r"\1", message),
    )


def messages_about(messages: Sequence[str], name: str, max_lines: int = 8) -> str:
    """The captured JAX log messages that concern function ``name``, without the noise
    of helper programs.

    File paths are cut to the file name, memory addresses masked (``without_paths``),
    lines wrapped to the page's column (``display.fit``); a link JAX glues to the word
    before it gets a space, so it can wrap.
    """
    keep = []
    for m in messages:
        if (
            f"for {name} defined" in m
            or f"jit({name})" in m
            or f"    {name} id=" in m
            or f"tracing {name} for jit" in m
        ):
            keep.append("\n".join(m.splitlines()[:max_lines]))
    return fit(re.sub(r"(?<=\S)(https?://)", r" \1", without_paths("\n".join(keep))))


def explain_miss(
    fn: Callable, warm: tuple, then: tuple, config: dict | None = None, **jit_kwargs
) -> str:
    """Call a fresh ``jax.jit(fn)`` on ``warm``, then on ``then`` (with ``config``
    options set): JAX's own words."""
    jitted = fresh_jit(fn, **jit_kwargs)
    jitted(*warm)
    old = {k: jax.config.values[k] for k in (config or {})}
    try:
        with capture_jax_logs() as messages:
            for k, v in (config or {}).items():
                jax.config.update(k, v)
            jitted(*then)
    finally:
        for k, v in old.items():
            jax.config.update(k, v)
    return messages_about(messages, fn.__name__)


def effect_order(fn: Callable, *args) -> tuple[bool, bool]:
    """Whether ``fn``'s jaxpr carries an ordered effect, and whether its lowering
    threads a token through the program: how JAX keeps ordered side effects in order."""
    from jax._src import effects

    jaxpr = jax.make_jaxpr(fn)(*args)
    threaded = "stablehlo.token" in jax.jit(fn).lower(*args).as_text()
    return any(effects.ordered_effects.contains(e) for e in jaxpr.effects), threaded
