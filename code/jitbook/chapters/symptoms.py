"""The symptom index: every error, warning and log line the book shows, what it means,
and where the book explains it.

Each entry pairs a pattern with a one-line meaning, the section that explains it, and
a function that makes JAX (or the book's package) say it again, so the appendix quotes
text produced when it runs, never typed. ``messages_in`` finds messages in an executed
page's outputs; the tests hold the index against every executed chapter.

To add a message a new page shows: append a ``Symptom`` to ``INDEX`` with a short
pattern (tables clip long cells), the meaning, the section id and heading it is shown
under, and a producer that calls what that page calls.

Taught in Symptom index, Looking a message up.
"""

import dataclasses
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import capture_jax_logs, explain_miss, without_paths
from jitbook.errors import error_line, raised


@dataclasses.dataclass(frozen=True)
class Symptom:
    """One message: the class (or ``log``/``warning``) it comes as, a regular expression
    that recognises it, what it means, where the book shows it (the section's id and the
    heading it sits under), and its producer."""

    kind: str
    pattern: str
    meaning: str
    section: str
    heading: str
    produce: Callable[[], str]

    def matches(self, message: str) -> bool:
        return re.search(self.pattern, message) is not None


# Pages whose messages are not symptoms a reader of this JAX meets, and why.
NOT_INDEXED = {
    "ledger": "it records the claim tests failing on other JAX releases: its "
    "messages are the ledger's data, not errors of the installed JAX",
}

# --- finding messages in a page's outputs

_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning)|Exception): (.+)")
_CLASS = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning))\b")
# JAX's log lines (jax.log_compiles, jax_explain_cache_misses, jax_debug_nans) and
# warnings shown without their class.
LOG_STARTS = (
    "TRACING CACHE MISS",
    "never seen function",
    "but seen another function defined on the same line",
    "all previously seen cache keys differ",
    "different input types",
    "Tracing context doesn't match",
    "cache miss explanation unavailable",
    "* at ",
    "* jax_",
    "Finished tracing",
    "Compiling jit(",
    "Finished jaxpr to MLIR module conversion",
    "Finished XLA compilation",
    "Invalid nan value encountered",
    "Some donated buffers were not usable",
)


def logical_lines(text: str) -> Iterator[str]:
    """Lines of ``text`` with the continuations ``display.fit`` wrapped (indented four
    more spaces than the line they continue) joined back."""
    line, indent = None, 0
    for raw in text.splitlines():
        lead = len(raw) - len(raw.lstrip())
        if line is not None and raw.strip() and lead >= indent + 4:
            line += " " + raw.strip()
            continue
        if line is not None:
            yield line
        line, indent = raw.strip(), lead
    if line is not None:
        yield line


def messages_in(text: str) -> list[str]:
    """The error, warning and log messages in one output's text."""
    found = []
    for line in logical_lines(text):
        bare = line.strip("'\"()[], ")
        if bare.startswith(LOG_STARTS):
            found.append(bare)
            continue
        match = _ERROR.search(line)
        if match:
            found.append(f"{match.group(1)}: {match.group(2)}")
    return found


def classes_in(text: str) -> set[str]:
    """Error and warning class names named anywhere in one output's text."""
    return set(_CLASS.findall(text))


def output_texts(cell) -> Iterator[str]:
    """The text of a code cell's outputs, leaving out displayed source code."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            yield out.get("text", "")
        elif "data" in out:
            data = out["data"]
            text = data.get("text/markdown") or data.get("text/plain") or ""
            # show_source: code, not output (a listing, folded or not)
            if not text.lstrip().startswith(
                ("```", '<details class="jitbook-source">')
            ):
                yield text
        elif out.get("output_type") == "error":
            yield f"{out.get('ename')}: {out.get('evalue')}"


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{#(sec-[\w-]+)[^}]*\})?\s*$")


def section_at(qmd_text: str, line: int) -> tuple[str, str]:
    """Where a ``.qmd`` line sits: the id of the innermost enclosing heading that has
    one (``sec-...``, what a cross-reference names) and the nearest heading's title."""
    stack: list[tuple[int, str, str]] = []
    fenced = False
    for text in qmd_text.splitlines()[:line]:
        if text.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(text)
        if match:
            level = len(match.group(1))
            stack = [h for h in stack if h[0] < level]
            stack.append((level, match.group(2), match.group(3) or ""))
    labelled = [h[2] for h in stack if h[2]]
    return (labelled[-1] if labelled else ""), (stack[-1][1] if stack else "")


@dataclasses.dataclass(frozen=True)
class Shown:
    """What one executed cell shows: its messages, class names, text, and section."""

    section: str
    heading: str
    messages: tuple[str, ...]
    classes: frozenset[str]
    text: str


def shown(nb, qmd_text: str) -> list[Shown]:
    """Every code cell of an executed chapter that shows output, with the messages and
    error classes in it."""
    out = []
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        texts = list(output_texts(cell))
        messages = tuple(m for t in texts for m in messages_in(t))
        classes = frozenset(c for t in texts for c in classes_in(t))
        if texts:
            line = cell.metadata.get("jitbook", {}).get("qmd_line", 0)
            text = " ".join(" ".join(logical_lines(t)) for t in texts)
            section, heading = section_at(qmd_text, line)
            out.append(Shown(section, heading, messages, classes, text))
    return out


def not_in_index(cells: Iterable[Shown]) -> list[str]:
    """The messages and error classes these cells show that no index entry covers."""
    kinds = {s.kind for s in INDEX}
    missing = []
    for cell in cells:
        missing += [m for m in cell.messages if not any(s.matches(m) for s in INDEX)]
        missing += [f"class {c}" for c in sorted(cell.classes - kinds)]
    return missing


def normalized(message: str) -> str:
    """A message with numbers, addresses and ids blurred: two runs compare equal."""
    message = without_paths(message)
    message = re.sub(r"0x[0-9a-fA-FX.]+", "0x…", message)
    message = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "#", message)
    return " ".join(message.split())


def lookup(message: str) -> list[Symptom]:
    """The entries that match a pasted message: ``symptoms.lookup("...")``."""
    if not isinstance(message, str) or not message.strip():
        raise TypeError("lookup takes the message as a non-empty string: paste it.")
    line = " ".join(message.split())
    return [s for s in INDEX if s.matches(line)]


# --- producers: run what the chapters run, return what they print


def _err(fn: Callable, *args) -> str:
    err = raised(fn, *args)
    if err is None:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} no longer raises.")
    return error_line(err)


def _log(lines: Iterable[str], start: str) -> str:
    for line in lines:
        for part in line.splitlines():
            if part.strip().startswith(start):
                return part.strip()
    raise RuntimeError(f"no log line starting {start!r} was written.")


def _miss_story() -> list[str]:
    from jitbook.chapters import recompilation

    return [
        explain_miss(recompilation.add_one, (jnp.ones(3),), (jnp.ones(4),)),
        explain_miss(
            recompilation.matmul,
            (jnp.ones((2, 2)),) * 2,
            (jnp.ones((2, 2)),) * 2,
            config={"jax_enable_x64": True},
        ),
        explain_miss(
            recompilation.power, (jnp.ones(3), 2), (jnp.ones(3), 3), static_argnums=1
        ),
    ]


def _loop_story() -> list[str]:
    from jitbook.chapters import recompilation

    with capture_jax_logs() as messages:
        recompilation.jit_in_a_loop("jax.jit(lambda i: plus_one(i))", steps=2)
    return messages


def _tracing(name: str) -> Callable:
    from jitbook.chapters import tracing

    return getattr(tracing, name)


def _leaked_tracer() -> str:
    from jitbook.chapters import tracing

    jax.jit(tracing.remember)(1.0)
    try:
        return _err(lambda: tracing.history[-1] + 1)
    finally:
        tracing.history.clear()


def _checking_leaks() -> str:
    from jitbook.chapters import tracing

    with jax.checking_leaks():
        err = raised(jax.jit(lambda v: tracing.remember(v) * 2), 1.0)
    tracing.history.clear()
    return error_line(err)


def _while_grad() -> str:
    fori = _tracing("fori_version")
    return _err(jax.jit(jax.grad(lambda x, n: fori(x, n).sum())), jnp.ones(3), 3)


def _no_tracing() -> str:
    from jitbook.chapters import jaxprs

    jitted = jax.jit(jaxprs.with_argument)
    a, b = jnp.ones((4, 3)), jnp.ones((3, 2))
    jitted(a, b)
    shorter = a[:-1]  # sliced outside the block: slicing op by op traces too
    with jax.no_tracing(True):
        return error_line(raised(jitted, shorter, b))


def _compiled_other_shape() -> str:
    from jitbook import errors
    from jitbook.chapters import jaxprs

    compiled = jax.jit(jaxprs.with_argument).lower(jnp.ones((4, 3)), jnp.ones((3, 2)))
    outcome = errors.call_outcome(
        compiled.compile(), jnp.ones((3, 3)), jnp.ones((3, 2))
    )
    return outcome["first line"]  # the page shows the class in a column of its own


def _methods(name: str):
    from jitbook.chapters import methods

    return getattr(methods, name)


def _w() -> jax.Array:  # made when called: importing this module starts no backend
    return jnp.array([1.0, -2.0, 0.5])


def _x() -> jax.Array:
    return jnp.array([2.0, 1.0, -4.0])


def _v() -> jax.Array:
    return jnp.array([-1.0, 2.0, -3.0, 4.0])


def _metadata_cause() -> str:
    layer = _methods("ArrayMetadataLayer")
    offset = jnp.array([0.5, 0.5, 0.5])
    layer(_w(), offset, "relu").predict(_x())
    err = raised(lambda: layer(_w(), offset + 0, "relu").predict(_x()))
    return error_line(err.__cause__)


def _frozen() -> str:
    layer = _methods("HashedLayer")((1.0, -2.0, 0.5), "relu")
    return _err(setattr, layer, "activation", "tanh")


def _unhashable_static() -> str:
    from jitbook.chapters import recompilation

    return error_line(recompilation.static_error(jnp.array(2)))


def _cache_size() -> str:
    plus = _methods("SignedEqx")(jnp.ones(3), "plus")
    return _err(lambda: plus.jit_apply._cache_size())


def _donated_reuse() -> str:
    from jitbook.chapters import artifacts

    return error_line(artifacts.reuse_error())


def _donation_unusable() -> str:
    from jitbook.chapters import artifacts

    return artifacts.donation_warnings(artifacts.total, jnp.ones(100))[0]


def _export_mismatch(constraint: bool) -> str:
    from jax import export

    from jitbook.chapters import artifacts

    w = jnp.ones((3, 2))
    spec = artifacts.batch_spec(3, constraints=["b >= 2"] if constraint else [])
    shipped = export.export(jax.jit(artifacts.predict))(
        jax.ShapeDtypeStruct(w.shape, w.dtype), spec
    )
    x = jnp.ones((1, 3)) if constraint else jnp.ones((4, 5))
    return _err(shipped.call, w, x)


def _compile_option() -> str:
    jitted = jax.jit(jnp.sin, compiler_options={"no_such_option": 1})
    return _err(lambda: jitted.lower(1.0).compile())


def _late_devices(ours: bool) -> str:
    from jitbook.chapters import devices

    jnp.ones(1).block_until_ready()  # the backend is running from here on
    if ours:
        return _err(devices.use_cpu_devices, 8)
    return _err(jax.config.update, "jax_num_cpu_devices", 8)


def _sharded_contraction() -> str:
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    n = len(jax.devices())
    mesh = jax.make_mesh((n,), ("data",), axis_types=(AxisType.Explicit,))
    x = jax.device_put(jnp.ones((8 * n, 4)), NamedSharding(mesh, P("data", None)))
    return _err(jax.jit(lambda x: x.T @ x), x)


MISMATCH_SCRIPT = """
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from jitbook.chapters import devices
from jitbook import error_line, raised
devices.use_cpu_devices(4)
mesh = devices.data_mesh(4)
rows = NamedSharding(mesh, P("data", None))
double = jax.jit(lambda v: 2 * v, in_shardings=rows)
x = np.arange(32, dtype=np.float32).reshape(8, 4)
columns = jax.device_put(x, NamedSharding(mesh, P(None, "data")))
print(error_line(raised(double, columns)))
"""


def _sharding_mismatch() -> str:
    """In a fresh process: the mismatch needs four devices, set before JAX starts."""
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    out = subprocess.run(
        [sys.executable, "-c", MISMATCH_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if out.returncode:
        raise RuntimeError(f"the four-device script failed:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


def _no_mesh() -> str:
    from jitbook.chapters import devices

    return _err(jax.jit(devices.doubled_by_columns), jnp.ones((8, 4)))


def _none_leaves() -> str:
    layer = _methods("CheckedLayer")(_w(), "relu")
    return _err(lambda: jax.tree.map(lambda _: None, layer))


def _minijit_branch() -> str:
    from jitbook.chapters import minijit

    return _err(minijit.jit(_tracing("sin_or_cos")), jnp.linspace(-1.0, 1.0, 5), 1.0)


def _pln_data():
    from jitbook.chapters import pln

    return pln.load_oaks(1)


def _pln_counts() -> str:
    from jitbook.chapters import pln

    data = _pln_data()
    bad = data.Y.copy()
    bad[3, 7] = 2.5
    return _err(pln.fit, (bad, data.O, data.X), 10, "scan")


def _pln_seed_copy() -> str:
    from jitbook.chapters.pln import seed

    data = _pln_data()
    total = jax.jit(lambda m: m.M.sum())
    total(seed.SeedPLN(*data))
    return _err(total, seed.SeedPLN(jnp.asarray(data.Y) + 0, data.O, data.X))


def _size_in_carry() -> str:
    def body(carry, _):
        return {"p": carry["p"], "x": carry["x"] + jnp.zeros(carry["p"]).sum()}, None

    return _err(lambda: jax.lax.scan(body, {"p": 3, "x": 0.0}, length=2))


def _numpy_log_warning() -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.log(np.array([-1.0]))
    return f"{caught[0].category.__name__}: {caught[0].message}"


def _pitfalls(name: str):
    from jitbook.chapters import pitfalls

    return getattr(pitfalls, name)


def _debug_nans_lines() -> list[str]:
    err, printed = _pitfalls("debug_nans_error")(jnp.ones(2), jnp.array([0.0, 2.0]))
    return [*printed, error_line(err)]


def _unfinished_answer() -> str:
    from jitbook.exercises import check

    def safe_take(x, i):
        raise NotImplementedError()

    return check("pitfalls.checked-take", safe_take).message


def _first(fn: Callable[[], list[str]], start: str) -> Callable[[], str]:
    return lambda: _log(fn(), start)


def _on(fn: Callable, *args) -> Callable[[], str]:
    return lambda: _err(fn, *args)


# --- the index

INDEX: list[Symptom] = [
    # tracing
    Symptom(
        "TracerBoolConversionError",
        r"TracerBoolConversionError: Attempted boolean conversion of traced array",
        "Python `if`/`while`/`and` needed True or False from a traced value; use "
        "`lax.cond`, `jnp.where`, or make the value static.",
        "sec-tracing",
        "Branching on a value fails",
        lambda: _err(jax.jit(_tracing("sin_or_cos")), jnp.ones(5), 1.0),
    ),
    Symptom(
        "ConcretizationTypeError",
        r"ConcretizationTypeError: Abstract tracer value encountered where concrete",
        "Python or NumPy needed a concrete value (a size, an index, a shape) from a "
        "tracer; use a static argument or a fixed-size form (`size=`).",
        "sec-tracing-shapes",
        "Shapes that depend on values",
        lambda: _err(jax.jit(jnp.nonzero), _v()),
    ),
    Symptom(
        "TracerIntegerConversionError",
        r"TracerIntegerConversionError",
        "`range(n)`, `int(x)` or an index needed a Python int from a traced value; "
        "make `n` static or loop with `lax.fori_loop`.",
        "sec-tracing-loops",
        "Python loops unroll",
        lambda: type(raised(jax.jit(_tracing("python_loop")), jnp.ones(3), 3)).__name__,
    ),
    Symptom(
        "NonConcreteBooleanIndexError",
        r"NonConcreteBooleanIndexError: Array boolean indices must be concrete",
        "`x[x > 0]` has a shape that depends on values; use `jnp.where` or "
        "`size=` to keep a fixed shape.",
        "sec-tracing-shapes",
        "Shapes that depend on values",
        lambda: _err(jax.jit(_tracing("positives")), _v()),
    ),
    Symptom(
        "UnexpectedTracerError",
        r"UnexpectedTracerError: Encountered an unexpected tracer",
        "A tracer escaped its trace (stored in a global or a list) and was used "
        "later; return values instead of storing them.",
        "sec-tracing-side-effects",
        "Appending to a global list",
        _leaked_tracer,
    ),
    Symptom(
        "Exception",
        r"Exception: Leaked trace",
        "`jax.checking_leaks()` caught a tracer kept alive after its trace ended.",
        "sec-tracing-side-effects",
        "Appending to a global list",
        _checking_leaks,
    ),
    Symptom(
        "ValueError",
        r"Reverse-mode differentiation does not work for lax\.while_loop",
        "`grad` through a loop whose length is traced; give `fori_loop` static "
        "bounds (it becomes a scan) or use `lax.scan`.",
        "sec-tracing-loops",
        "A traced trip count cannot be differentiated backwards",
        _while_grad,
    ),
    Symptom(
        "ValueError",
        r"Non-hashable static arguments are not supported",
        "A static argument must be hashable (an array is not); pass arrays traced, "
        "or a tuple of Python numbers.",
        "sec-recompilation-static",
        "Static arguments",
        _unhashable_static,
    ),
    Symptom(
        "IndexError",
        r"IndexError: Array slice indices must have static start/stop/step",
        "A slice bound is traced; make it static or use `lax.dynamic_slice` with a "
        "static size.",
        "sec-recompilation",
        "Control flow without recompiling",
        lambda: _err(jax.jit(_recompilation("first_k")), jnp.ones(5), 2),
    ),
    # cache-miss explanations and compile logs
    Symptom(
        "log",
        r"^TRACING CACHE MISS at",
        "`jax_explain_cache_misses`: this call traced anew; the lines under it say "
        "what differed from the keys in the cache.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "TRACING CACHE MISS"),
    ),
    Symptom(
        "log",
        r"^all previously seen cache keys differ",
        "The function was seen before, but with another key; the next lines name "
        "the closest one and how it differs.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "all previously seen"),
    ),
    Symptom(
        "log",
        r"^different input types",
        "An argument's shape, dtype, weak type or sharding changed since the "
        "closest cached call.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "different input types"),
    ),
    Symptom(
        "log",
        r"^\* at \S+, now .* and before ",
        "Which argument changed, and its type now and before (weak types and "
        "shardings included).",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "* at "),
    ),
    Symptom(
        "log",
        r"^Tracing context doesn't match",
        "A setting that is part of the key (here a config option) changed "
        "between the calls.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "Tracing context"),
    ),
    Symptom(
        "log",
        r"^\* jax_\w+ differs: now",
        "The config option that changed, its value now and before.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "* jax_"),
    ),
    Symptom(
        "log",
        r"^cache miss explanation unavailable",
        "JAX could not say why; in this book it follows a new static argument value.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_miss_story, "cache miss explanation unavailable"),
    ),
    Symptom(
        "log",
        r"^never seen function",
        "The function object is new to jit's cache: a new `jax.jit(...)`, lambda "
        "or closure at each call.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "never seen function"),
    ),
    Symptom(
        "log",
        r"^but seen another function defined on the same line",
        "The same source line made a new function again: jit is built inside a "
        "loop; build it once, outside.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "but seen another function"),
    ),
    Symptom(
        "log",
        r"^Finished tracing \S+ for jit in [\d.]+ sec",
        "`jax.log_compiles`: the Python function was traced into a jaxpr, in that "
        "time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "Finished tracing"),
    ),
    Symptom(
        "log",
        r"^Compiling jit\(.*\) with global shapes and types",
        "`jax.log_compiles`: a new program goes to XLA, for these abstract "
        "arguments and shardings.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "Compiling jit("),
    ),
    Symptom(
        "log",
        r"^Finished jaxpr to MLIR module conversion",
        "`jax.log_compiles`: the jaxpr was lowered to StableHLO, in that time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "Finished jaxpr to MLIR"),
    ),
    Symptom(
        "log",
        r"^Finished XLA compilation of",
        "`jax.log_compiles`: XLA compiled the program, in that time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        _first(_loop_story, "Finished XLA compilation"),
    ),
    # stages and compiled programs
    Symptom(
        "RuntimeError",
        r"RuntimeError: re-tracing function ",
        "`jax.no_tracing(True)` stopped a call that would have traced again.",
        "sec-jaxprs-shapes",
        "Calling an executable with other shapes",
        _no_tracing,
    ),
    Symptom(
        "TypeError",
        r"Argument types differ from the types for which",
        "A compiled executable runs only on the shapes and dtypes it was compiled "
        "for; call the jitted function, which compiles again.",
        "sec-jaxprs-shapes",
        "Calling an executable with other shapes",
        _compiled_other_shape,
    ),
    # methods
    Symptom(
        "TypeError",
        r"Error interpreting argument to .* as an abstract array",
        "An argument (often `self`) is neither an array nor a pytree; make the "
        "class a pytree or mark the argument static.",
        "sec-methods",
        "The problem: `@jax.jit` on a method",
        lambda: _err(_methods("DecoratedLayer")(_w(), "relu").predict, _x()),
    ),
    Symptom(
        "FrozenInstanceError",
        r"FrozenInstanceError: cannot assign to field",
        "The object is frozen (a frozen dataclass or an Equinox module): build a new "
        "one with `dataclasses.replace`.",
        "sec-methods-static-self",
        "Strategy 2: `self` as a static argument",
        _frozen,
    ),
    Symptom(
        "TypeError",
        r"unhashable type: '",
        "A value used as a static argument or in a cache key cannot be hashed (an "
        "array, a dict).",
        "sec-methods-static-self",
        "Strategy 2: `self` as a static argument",
        lambda: (
            str(raised(_methods("HashedLayer")(_w(), "relu").predict, _x()))
            .strip()
            .splitlines()[-1]
        ),
    ),
    Symptom(
        "ValueError",
        r"The truth value of an array with more than one element is ambiguous",
        "An array sits in static pytree metadata, and comparing keys compared it "
        "elementwise; keep arrays in the children.",
        "sec-methods-metadata",
        "Pitfall: an array in the static metadata",
        _metadata_cause,
    ),
    Symptom(
        "AttributeError",
        r"object has no attribute '_cache_size'",
        "A method under `eqx.filter_jit` is a bound wrapper without jit's private "
        "cache methods.",
        "sec-methods-eqx-cache",
        "One cache for all instances",
        _cache_size,
    ),
    # artifacts
    Symptom(
        "RuntimeError",
        r"Array has been deleted with shape=",
        "The array was donated to a jitted call (or deleted); use the result "
        "instead, or copy before donating.",
        "sec-artifacts",
        "Buffer donation",
        _donated_reuse,
    ),
    Symptom(
        "warning",
        r"Some donated buffers were not usable",
        "A donated input matched no output's shape and dtype, so nothing was "
        "reused; donate only what an output can take over.",
        "sec-artifacts-unusable",
        "When donation cannot be used",
        _donation_unusable,
    ),
    Symptom(
        "ValueError",
        r"Shape mismatch for args\[\d+\]\.shape\[\d+\]",
        "An exported program was called with a fixed dimension of another size.",
        "sec-artifacts",
        "One export, many batch sizes",
        lambda: _export_mismatch(constraint=False),
    ),
    Symptom(
        "ValueError",
        r"Input shapes do not match the symbolic shape constraint",
        "A symbolic dimension broke a constraint given at export (`b >= 2`).",
        "sec-artifacts",
        "One export, many batch sizes",
        lambda: _export_mismatch(constraint=True),
    ),
    Symptom(
        "JaxRuntimeError",
        r"No such compile option",
        "`compiler_options` named an option this XLA does not know.",
        "sec-artifacts-knobs",
        "The other knobs of `jax.jit`",
        _compile_option,
    ),
    # devices
    Symptom(
        "RuntimeError",
        r"jax_num_cpu_devices config should be updated",
        "The number of CPU devices is fixed when JAX starts; set it first thing.",
        "sec-devices",
        "Many devices on one CPU",
        lambda: _late_devices(ours=False),
    ),
    Symptom(
        "RuntimeError",
        r"JAX's backend already started with \d+ device\(s\)",
        "The book's `devices.use_cpu_devices` saying the same, with what to do.",
        "sec-devices",
        "Many devices on one CPU",
        lambda: _late_devices(ours=True),
    ),
    Symptom(
        "ShardingTypeError",
        r"ShardingTypeError: Contracting dimensions are sharded",
        "In explicit sharding mode, a matmul over a sharded dimension needs "
        "`out_sharding=`.",
        "sec-devices-sharded",
        "Sharded inputs under jit",
        _sharded_contraction,
    ),
    # the worked example
    Symptom(
        "ValueError",
        r"Y \(counts\) must be whole numbers",
        "The book's `pln.fit` refusing counts that are not whole numbers.",
        "sec-pln",
        "The data and the problem size",
        _pln_counts,
    ),
    Symptom(
        "ValueError",
        r"Exception raised while checking equality of metadata",
        "Arrays in a pytree's static metadata were compared as part of jit's key.",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        _pln_seed_copy,
    ),
    Symptom(
        "TypeError",
        r"Shapes must be 1D sequences of concret",
        "A size became a tracer (it rode in a scan carry); keep sizes as Python "
        "ints read from shapes.",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        _size_in_carry,
    ),
    Symptom(
        "RuntimeWarning",
        r"RuntimeWarning: invalid value encountered in log",
        "NumPy's log of a negative number: a NaN, with a warning (JAX gives the NaN "
        "silently).",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        _numpy_log_warning,
    ),
    # pitfalls
    Symptom(
        "TypeError",
        r"JAX arrays are immutable",
        "`x[i] = v` on a JAX array; write `x = x.at[i].set(v)`.",
        "sec-pitfalls-state",
        "State under jit",
        lambda: _err(jnp.arange(4.0).__setitem__, 0, 9.0),
    ),
    Symptom(
        "ValueError",
        r"mutable array references cannot be returned",
        "A jitted function returned a `jax.new_ref`; return its value (`ref[...]`) "
        "or pass the reference in.",
        "sec-pitfalls-state",
        "State under jit",
        lambda: _err(_pitfalls("leak_ref"), jnp.ones(3)),
    ),
    Symptom(
        "log",
        r"^Invalid nan value encountered in the output of a jax\.jit function",
        "`jax_debug_nans` found a NaN and reruns the function op by op to find "
        "where it came from.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: _log(_debug_nans_lines(), "Invalid nan value"),
    ),
    Symptom(
        "FloatingPointError",
        r"FloatingPointError: invalid value \(nan\) encountered in",
        "`jax_debug_nans` names the operation that made the NaN.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: _log(_debug_nans_lines(), "FloatingPointError"),
    ),
    Symptom(
        "checkify",
        r"out-of-bounds indexing for array of shape",
        "`checkify` with `index_checks` caught an index that jit would have "
        "clamped silently.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: _pitfalls("checked_take")(jnp.arange(3.0), 5)[0].strip(),
    ),
    # exercises
    Symptom(
        "NotImplementedError",
        r"NotImplementedError: replace that line with your code",
        "An exercise's answer still has the starter's `raise NotImplementedError()`: "
        "replace that line with your code.",
        "sec-teachers",
        "How students check their work",
        _unfinished_answer,
    ),
    Symptom(
        "TracerArrayConversionError",
        r"TracerArrayConversionError: The numpy\.ndarray conversion method",
        "NumPy (`np.sin`, `np.asarray`) was given a tracer; use `jnp` inside jit, "
        "or compute with NumPy outside it.",
        "sec-tracing-numpy",
        "NumPy and Python values inside jit",
        lambda: _err(jax.jit(lambda v: np.sin(v)), jnp.arange(3.0)),
    ),
    Symptom(
        "ValueError",
        r"None is not a valid value for jnp\.array",
        "A pytree class whose constructor checks its fields was rebuilt with "
        "`None` leaves (as `jax.tree.map` does); keep checks out of unflatten.",
        "sec-methods-unflatten-values",
        "What `tree_unflatten` receives",
        _none_leaves,
    ),
    Symptom(
        "ValueError",
        r"Sharding passed to jit does not match the sharding on the respective arg",
        "An argument is committed to another sharding than `in_shardings` says; "
        "move it with `jax.device_put` or drop `in_shardings`.",
        "sec-devices-placement",
        "Saying where values go",
        _sharding_mismatch,
    ),
    Symptom(
        "RuntimeError",
        r"with_sharding_constraint requires a non-empty mesh in context",
        "A bare `PartitionSpec` names mesh axes, so it needs `jax.set_mesh(mesh)` "
        "around the call (or a full `NamedSharding`).",
        "sec-devices-placement",
        "Saying where values go",
        _no_mesh,
    ),
    Symptom(
        "TracerControlFlowError",
        r"TracerControlFlowError: Python's if/while \(bool\) needs the value",
        "The book's own small jit refusing a Python branch on a traced value, as "
        "`jax.jit` does with `TracerBoolConversionError`.",
        "sec-minijit-control-flow",
        "Python control flow meets a tracer",
        _minijit_branch,
    ),
]


def _recompilation(name: str):
    from jitbook.chapters import recompilation

    return getattr(recompilation, name)


def _code(text: str) -> str:
    """``text`` as a Markdown code span, however many backticks it holds."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def rows(index: list[Symptom] | None = None) -> list[dict]:
    """One row per entry: the message as JAX says it now, what it means, and where the
    book shows it (a ``@sec-...`` cross-reference and the heading it sits under).

    Taught in Symptom index, Looking a message up.
    """
    from jitbook.site.downloads import label_titles

    titles = label_titles()
    out = []
    for symptom in INDEX if index is None else index:
        message = without_paths(symptom.produce())
        if not symptom.matches(" ".join(message.split())):
            raise RuntimeError(
                f"the message produced for {symptom.pattern!r} no longer matches it: "
                f"{message!r}"
            )
        if _CLASS.fullmatch(symptom.kind) and not message.startswith(symptom.kind):
            message = f"{symptom.kind}: {message}"  # shown in a column of its own there
        where = f"@{symptom.section}"
        if titles.get(symptom.section) != symptom.heading:
            where += f", “{symptom.heading}”"
        out.append(
            {
                "message": _code(message),
                "what it means": symptom.meaning,
                "shown in": where,
            }
        )
    return out


__all__ = [
    "INDEX",
    "NOT_INDEXED",
    "Symptom",
    "classes_in",
    "logical_lines",
    "lookup",
    "messages_in",
    "normalized",
    "not_in_index",
    "output_texts",
    "rows",
    "section_at",
    "shown",
]
