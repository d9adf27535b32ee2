"""Count what jit does: traces, lowerings and XLA compilations, from JAX's public monitoring events."""

import contextlib
import dataclasses
import logging
import re
from collections.abc import Iterator

import jax
import jax.monitoring

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_COMPILE = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"


def _plain_name(fun_name: str) -> str:
    """``jit(step)`` -> ``step``: JAX wraps the name in the transformation when it lowers."""
    while (m := re.fullmatch(r"\w+\((.*)\)", fun_name)) is not None:
        fun_name = m.group(1)
    return fun_name


@dataclasses.dataclass
class CompileLog:
    """What jit did inside a ``count_compiles()`` block, one function name per event.

    Eager ``jnp`` calls compile small programs of their own (``broadcast_in_dim``, ``add``...); they are
    counted in ``count``, so ``count_for(name)`` is the number to read for one function.
    """

    traces: list[str] = dataclasses.field(default_factory=list)
    lowerings: list[str] = dataclasses.field(default_factory=list)
    compiles: list[str] = dataclasses.field(default_factory=list)
    compile_seconds: float = 0.0
    persistent_cache_hits: int = 0

    @property
    def count(self) -> int:
        """XLA compilations in the block; a load from the persistent cache counts too (see persistent_cache_hits)."""
        return len(self.compiles)

    def count_for(self, name: str) -> int:
        """XLA compilations of functions called ``name`` (as in ``def name``)."""
        if not isinstance(name, str):
            raise TypeError(f"count_for takes a function name as a string, got {type(name).__name__}; "
                            f"pass f.__name__ for a function f.")
        return sum(_plain_name(n) == name for n in self.compiles)

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        name = _plain_name(str(kwargs.get("fun_name", "?")))
        if event == _TRACE:
            self.traces.append(name)
        elif event == _LOWER:
            self.lowerings.append(name)
        elif event == _COMPILE:
            self.compiles.append(name)
            self.compile_seconds += duration

    def _on_event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HIT:
            self.persistent_cache_hits += 1

    def __repr__(self) -> str:
        return (f"CompileLog(count={self.count}, compiles={self.compiles}, traces={self.traces}, "
                f"compile_seconds={self.compile_seconds:.3f})")


@contextlib.contextmanager
def count_compiles() -> Iterator[CompileLog]:
    """Count traces, lowerings and XLA compiles in the block: ``with count_compiles() as log: ...``."""
    log = CompileLog()
    jax.monitoring.register_event_duration_secs_listener(log._on_duration)
    jax.monitoring.register_event_listener(log._on_event)
    try:
        yield log
    finally:
        jax.monitoring.unregister_event_duration_listener(log._on_duration)
        jax.monitoring.unregister_event_listener(log._on_event)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def capture_jax_logs(explain_cache_misses: bool = True, log_compiles: bool = True) -> Iterator[list[str]]:
    """Capture the messages of ``jax_explain_cache_misses`` and ``jax.log_compiles()`` as a list of strings.

    JAX writes them through the ``jax`` logger at WARNING level; we listen there instead of scraping stderr,
    so a chapter can show the real text.
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
