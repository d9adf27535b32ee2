"""What trips people up under jit: state, random numbers, debugging, compile time,
dispatch overhead and numerics, each shown by a function the chapter calls.

Taught in What trips people up, State under jit.
"""

import contextlib
import gzip
import io
import json
import linecache
import pathlib
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jitbook import timing
from jitbook.arguments import whole_number
from jitbook.cache import capture_jax_logs, fresh_jit
from jitbook.fresh import run_cold, run_for_json

# --- state


def set_outside_jit(x: jax.Array, i: int, value: float) -> dict:
    """``x.at[i].set(value)`` called outside jit: a new array, the old one untouched.

    Taught in What trips people up, State under jit.
    """
    before = np.asarray(x).copy()
    new = x.at[i].set(value)
    return {
        "old array unchanged": bool(np.array_equal(np.asarray(x), before)),
        "new array has the value": bool(new[i] == value),
        "same buffer": x.unsafe_buffer_pointer() == new.unsafe_buffer_pointer(),
    }


@jax.jit
def ten_updates(x: jax.Array) -> jax.Array:
    """Ten ``.at[i].set`` on an array made inside the program: XLA updates it in place.

    Taught in What trips people up, State under jit.
    """
    y = 2.0 * x
    for i in range(10):
        y = y.at[i].set(float(i))
    return y


def memory_of(jitted: Callable, *args) -> dict:
    """Bytes the compiled program needs: arguments, outputs, outputs that reuse an
    argument's buffer (donation) and scratch space, as XLA reports them."""
    stats = jitted.lower(*args).compile().memory_analysis()
    return {
        "argument bytes": stats.argument_size_in_bytes,
        "output bytes": stats.output_size_in_bytes,
        "aliased bytes": stats.alias_size_in_bytes,
        "temporary bytes": stats.temp_size_in_bytes,
    }


def first_to_one(x: jax.Array) -> jax.Array:
    """The step the donation example compiles twice: set the first entry to one."""
    return x.at[0].set(1.0)


def donation(n: int) -> list[dict]:
    """``first_to_one`` compiled with and without ``donate_argnums``: the bytes XLA
    aliases, and whether the caller's array is gone after the call.

    Taught in What trips people up, State under jit.
    """
    rows = []
    for label, donate in (("no donation", ()), ("donate_argnums=0", (0,))):
        jitted = jax.jit(first_to_one, donate_argnums=donate)
        x = jnp.zeros(n)
        before = x.unsafe_buffer_pointer()
        out = jitted(x)
        rows.append(
            {
                "compiled": label,
                **memory_of(jitted, jnp.zeros(n)),
                "input deleted": x.is_deleted(),
                "output in the input's buffer": out.unsafe_buffer_pointer() == before,
            }
        )
    return rows


@jax.jit
def add_into(total: jax.Ref, x: jax.Array) -> None:
    """Add ``x`` into the mutable reference ``total``, in place; returns nothing.

    Taught in What trips people up, State under jit.
    """
    total[...] += x


@jax.jit
def leak_ref(x: jax.Array):
    """A jitted function that tries to return a new reference (jit refuses)."""
    return jax.new_ref(x)


# --- random numbers

GLOBAL_KEY = jax.random.key(0)


@jax.jit
def noise_from_global(x: jax.Array) -> jax.Array:
    """Noise drawn with a key read from a global: tracing bakes the key in.

    Taught in What trips people up, Random numbers under jit.
    """
    return x + jax.random.normal(GLOBAL_KEY, x.shape)


@jax.jit
def noise_from_numpy(x: jax.Array) -> jax.Array:
    """Noise drawn with ``np.random``: it runs once, while tracing, and the array it
    drew becomes a constvar of the program.

    Taught in What trips people up, Random numbers under jit.
    """
    return x + np.random.default_rng().normal(size=x.shape).astype(np.float32)


@jax.jit
def noise(x: jax.Array, key: jax.Array) -> jax.Array:
    """Noise drawn with a key passed as an argument: the idiom.

    Taught in What trips people up, Random numbers under jit.
    """
    return x + jax.random.normal(key, x.shape)


def noisy_steps(x: jax.Array, key: jax.Array, steps: int) -> list[jax.Array]:
    """``steps`` calls of ``noise``, each with a fresh subkey split from ``key``."""
    out = []
    for _ in range(steps):
        key, subkey = jax.random.split(key)
        out.append(noise(x, subkey))
    return out


def draws_by_partitionable(seed: int = 0, n: int = 3) -> dict[bool, np.ndarray]:
    """``jax.random.normal`` of one key under both values of
    ``jax_threefry_partitionable`` (its default became True in JAX 0.5.0).

    Taught in What trips people up, Random numbers under jit.
    """
    out = {}
    for flag in (False, True):
        with jax.threefry_partitionable(flag):
            out[flag] = np.asarray(jax.random.normal(jax.random.key(seed), (n,)))
    return out


# --- debugging


@jax.jit
def take(x: jax.Array, i) -> jax.Array:
    """``x[i]`` in a compiled program, where an index out of bounds is clamped.

    Taught in What trips people up, Debugging inside compiled code.
    """
    return x[i]


def checked_take(x: jax.Array, i) -> tuple[str | None, jax.Array]:
    """``take`` under ``checkify`` with index checks: the error it found (or None)
    and the value.

    Taught in What trips people up, Debugging inside compiled code.
    """
    err, out = checkify.checkify(take, errors=checkify.index_checks)(x, i)
    return err.get(), out


def log_of_difference(x: jax.Array, y: jax.Array) -> jax.Array:
    """``log(x - y)``, a nan for ``y > x``: the function jax_debug_nans hunts in."""
    return jnp.sum(jnp.log(x - y))


def log_of_difference_lax(x: jax.Array, y: jax.Array) -> jax.Array:
    """``log_of_difference`` with ``lax.log``, a primitive, where ``jnp.log`` is a
    jitted function of its own: the de-optimized rerun meets no inner jit."""
    return jnp.sum(jax.lax.log(x - y))


def debug_nans_error(
    x: jax.Array, y: jax.Array, fn: Callable = log_of_difference
) -> tuple[BaseException | None, list]:
    """The error ``jax_debug_nans`` raises for the jitted ``fn`` (``log_of_difference``
    by default), and the lines JAX prints on the way (captured, so a page can fit them
    to its column): one per jitted function whose output held the nan.

    Taught in What trips people up, Debugging inside compiled code.
    """
    printed = io.StringIO()
    with jax.debug_nans(True), contextlib.redirect_stdout(printed):
        try:
            jax.jit(fn)(x, y).block_until_ready()
        except FloatingPointError as err:
            return err, printed.getvalue().splitlines()
    return None, printed.getvalue().splitlines()


def donation_under_debug_nans(n: int = 8) -> dict:
    """Whether a donated input is deleted: compiled with ``jax_debug_nans`` on, then
    the same function with the flag off, then after ``jax.clear_caches()``.

    It clears JAX's caches, so it runs in a fresh process (``run_cold``), never in the
    caller's. Taught in What trips people up, Debugging inside compiled code.
    """
    return run_cold(_donation_under_debug_nans, n)


def _donation_under_debug_nans(n: int) -> dict:
    """``donation_under_debug_nans`` in a process of its own."""
    jitted = jax.jit(first_to_one, donate_argnums=0)

    def deleted() -> bool:
        x = jnp.zeros(n)
        jitted(x).block_until_ready()
        return x.is_deleted()

    with jax.debug_nans(True):
        under = deleted()
    after = deleted()
    jax.clear_caches()
    return {
        "debug_nans on": under,
        "flag off again": after,
        "after jax.clear_caches()": deleted(),
    }


def branchy(x: jax.Array) -> jax.Array:
    """``x**2`` for positive ``x``, else ``-x``: a Python ``if`` on the value of ``x``.

    Taught in What trips people up, ``grad`` is not ``jit``.
    """
    if x > 0:
        return x * x
    return -x


def grad_with_and_without_jit(x: float) -> dict:
    """``jax.grad(branchy)(x)`` and ``jax.jit(jax.grad(branchy))(x)``: a value, or the
    name of the error raised.

    Taught in What trips people up, ``grad`` is not ``jit``.
    """
    out = {}
    for way, fn in {
        "jax.grad": jax.grad(branchy),
        "jax.jit(jax.grad)": jax.jit(jax.grad(branchy)),
    }.items():
        try:
            out[way] = float(fn(x))
        except Exception as err:  # the page shows which error, whatever it is
            out[way] = type(err).__name__
    return out


@jax.jit
def with_breakpoint(x: jax.Array) -> jax.Array:
    """A jitted function with ``jax.debug.breakpoint()``: calling it stops and waits
    for a debugger prompt, so the book only traces it.

    Taught in What trips people up, Debugging inside compiled code.
    """
    y = jnp.sin(x)
    jax.debug.breakpoint()
    return y * 2


def printed_types(x) -> list[str]:
    """The types ``print`` sees inside a jitted function and a ``fori_loop`` body."""
    seen = []

    def body(i, carry):
        seen.append(f"fori_loop body: {type(carry).__name__}")
        return carry + 1.0

    def f(x):
        seen.append(f"jitted function: {type(x).__name__}")
        return jax.lax.fori_loop(0, 2, body, x)

    jax.jit(f)(x)
    return seen


PRINT_SCRIPT = """
import jax, jax.numpy as jnp
def step(carry, x):
    jax.debug.print("carry={c} x={x}", c=carry, x=x)
    return carry + x, x
jax.lax.scan(step, jnp.array(0.0), jnp.arange(3.0))
{barrier}
"""


def prints_before_exit(barrier: bool) -> list[str]:
    """Lines a fresh process prints from ``jax.debug.print`` in a scan before exiting,
    with and without ``jax.effects_barrier()`` at the end (jax-ml/jax#19867).

    Taught in What trips people up, Debugging inside compiled code.
    """
    code = PRINT_SCRIPT.replace("{barrier}", "jax.effects_barrier()" if barrier else "")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    if out.returncode:
        raise RuntimeError(f"the print script failed:\n{out.stderr[-2000:]}")
    return out.stdout.splitlines()


# --- compile time


def unrolled(x: jax.Array) -> jax.Array:
    """A Python loop that tracing unrolls: every turn adds its equations again."""
    for i in range(20):
        x = jnp.tanh(x) * 0.5
        x = x + jnp.sin(x + i) ** 2
    return jnp.sum(x)


_STAGE = re.compile(
    r"Finished (tracing|jaxpr to MLIR module conversion|XLA compilation)"
    r" (?:of )?(\S+).* in ([0-9.]+) sec"
)


def compile_stages(fn: Callable, *args) -> list[dict]:
    """The stages ``jax.log_compiles`` reports for one new jit of ``fn``, with seconds.

    Taught in What trips people up, Where compile time goes.
    """
    name = fn.__name__
    with capture_jax_logs(explain_cache_misses=False) as messages:
        fresh_jit(fn)(*args).block_until_ready()  # a new wrapper: nothing cached
    rows = []
    for message in messages:
        match = _STAGE.search(message)
        if match and name in match.group(2):
            rows.append({"stage": match.group(1), "seconds": float(match.group(3))})
    return rows


@contextlib.contextmanager
def dumped_ir(modes: str = "eqn_count_pprof") -> Iterator[pathlib.Path]:
    """Set ``jax_dump_ir_to`` to a temporary folder for the block; yields the folder."""
    with tempfile.TemporaryDirectory() as folder:
        old = [jax.config.values[k] for k in ("jax_dump_ir_to", "jax_dump_ir_modes")]
        jax.config.update("jax_dump_ir_to", folder)
        jax.config.update("jax_dump_ir_modes", modes)
        try:
            yield pathlib.Path(folder)
        finally:
            jax.config.update("jax_dump_ir_to", old[0])
            jax.config.update("jax_dump_ir_modes", old[1])


def read_pprof(path: pathlib.Path) -> Counter:
    """Equations per (file name, line) of the innermost user frame in an
    ``eqn_count_pprof`` dump: what ``pprof -top`` would list."""
    from jax._src.lib import _jax  # the decoder JAX itself ships; no pprof binary

    profile = json.loads(_jax.pprof_profile_to_json(gzip.decompress(path.read_bytes())))
    strings = profile["stringTable"]
    files = {f["id"]: strings[int(f["filename"])] for f in profile["function"]}
    lines = {
        loc["id"]: (
            pathlib.Path(files[loc["line"][0]["functionId"]]).name,
            int(loc["line"][0].get("line", 0)),
        )
        for loc in profile["location"]
    }
    counts: Counter = Counter()
    for sample in profile["sample"]:
        if sample.get("locationId"):  # the first location is the innermost frame
            counts[lines[sample["locationId"][0]]] += int(sample["value"][0])
    return counts


def equations_by_line(fn: Callable, *args, top: int = 5) -> list[dict]:
    """Trace a new jit of ``fn`` with the ``eqn_count_pprof`` dump on, and list the
    source lines that produced the most equations.

    Taught in What trips people up, Where compile time goes.
    """
    with dumped_ir() as folder:
        fresh_jit(fn).lower(*args)  # the dump is written at lowering: a new wrapper
        dumps = sorted(folder.glob(f"*_{fn.__name__}.eqn_count_pprof"))
        if not dumps:
            raise RuntimeError(
                f"no eqn_count_pprof dump for {fn.__name__} was written."
            )
        counts = read_pprof(dumps[-1])
    source = {pathlib.Path(f).name: f for f in (fn.__code__.co_filename,)}
    return [
        {
            "line": f"{name}:{line}",
            "equations": n,
            "code": linecache.getline(source.get(name, name), line).strip(),
        }
        for (name, line), n in counts.most_common(top)
    ]


CACHE_SCRIPT = """
import json, os, sys, tempfile
import jax, jax.numpy as jnp
mode = sys.argv[1]
folder = tempfile.mkdtemp()
if mode == "array first":
    jnp.zeros(3).block_until_ready()
jax.config.update("jax_compilation_cache_dir", folder)
if mode != "defaults":
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.ones(5)).block_until_ready()
files = [f for f in os.listdir(folder) if not f.endswith("-atime")]
names = sorted(f.split("-")[0].removeprefix("jit_").strip("_") for f in files)
print(json.dumps({"entries": len(files), "programs written": ", ".join(names),
  "min_compile_time_secs": jax.config.jax_persistent_cache_min_compile_time_secs}))
"""

CACHE_MODES = ("defaults", "min compile time 0", "array first")


def persistent_cache(mode: str) -> dict:
    """Entries a fresh process writes to a new persistent cache for one small jitted
    function: with the default settings, with the minimum compile time at 0, and
    with an array created before the cache folder is set (jax-ml/jax#25768).

    Taught in What trips people up, Where compile time goes.
    """
    if mode not in CACHE_MODES:
        raise ValueError(f"mode must be one of {CACHE_MODES}, got {mode!r}.")
    found = run_for_json(["-c", CACHE_SCRIPT, mode], "the cache script", timeout=120)
    return {"setting": mode, **found}


# --- numerics: the FAQ's examples


def faq_x_plus_y_minus_x(x, y):
    """The FAQ's first example, in its older form: ``x + y - x``."""
    return x + y - x


def faq_log_sqrt(x):
    """The FAQ's example today: ``log(sqrt(x))``, which XLA may turn into
    ``0.5 * log(x)``."""
    return jnp.log(jnp.sqrt(x))


def faq_log_exp(x):
    """The FAQ's drastic example: ``log(exp(x))``, ``inf`` op by op for x = 100."""
    return jnp.log(jnp.exp(x))


def faq_numerics() -> list[dict]:
    """Each FAQ example op by op and under ``jax.jit``, and whether the two differ.

    Taught in What trips people up, The FAQ's numerics, run.
    """
    cases = [
        ("x + y - x", faq_x_plus_y_minus_x, (jnp.array(1.0), jnp.array(0.001))),
        ("log(sqrt(x))", faq_log_sqrt, (jnp.pi,)),
        ("log(exp(x))", faq_log_exp, (100.0,)),
    ]
    rows = []
    for label, fn, args in cases:
        eager, jitted = float(fn(*args)), float(jax.jit(fn)(*args))
        rows.append(
            {
                "expression": label,
                "op by op": str(np.float32(eager)),
                "jax.jit": str(np.float32(jitted)),
                "differ": eager != jitted
                and not (np.isnan(eager) and np.isnan(jitted)),
            }
        )
    return rows


# --- dispatch overhead


def tiny(x):
    """Three elementwise operations: ``sin(x) * 2 + 1``, in ``jnp`` or NumPy alike."""
    xp = np if isinstance(x, np.ndarray) else jnp
    return xp.sin(x) * 2.0 + 1.0


class Scaler:
    """A plain class whose bound method the dispatch race jits."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def apply(self, x):
        return tiny(x) * self.factor


def scaled(x, factor: float):
    """``tiny(x) * factor`` with ``factor`` a static argument in the race."""
    return tiny(x) * factor


def dispatch_variants(n: int) -> dict[str, Callable[[], object]]:
    """The ways of calling ``tiny`` on ``n`` numbers that the dispatch race times.

    Taught in What trips people up, Dispatch overhead, measured.
    """
    import equinox as eqx

    x = jnp.linspace(0.0, 1.0, n)
    x_np = np.asarray(x)
    jitted = jax.jit(tiny)
    filtered = eqx.filter_jit(tiny)
    bound = jax.jit(Scaler(1.0).apply)
    static = jax.jit(scaled, static_argnums=1)
    return {
        "NumPy": lambda: tiny(x_np),
        "op by op (jnp)": lambda: tiny(x),
        "jax.jit": lambda: jitted(x),
        "eqx.filter_jit": lambda: filtered(x),
        "jax.jit of a bound method": lambda: bound(x),
        "jax.jit, a static argument": lambda: static(x, 1.0),
    }


def dispatch_sweep(
    sizes: Sequence[int], min_time: float = 0.2
) -> tuple[list[dict], list[dict]]:
    """The dispatch race at each size, for an explorer: each variant's minimum (µs) and,
    per size, every variant's verdict against ``jax.jit``.

    Taught in What trips people up, Explore it.
    """
    if not sizes:
        raise ValueError("sizes must name at least one size, e.g. [8, 1000].")
    for n in sizes:
        whole_number(n, "each size", example="[8, 1000]")
    rows, panels = [], []
    for n in sizes:
        race = timing.race(dispatch_variants(n), min_time=min_time)
        rows.append(
            {"numbers": n} | {f"{v} (µs)": 1e6 * race.min(v) for v in race.names}
        )
        verdicts = [
            f"{v}: {race.verdict(v, 'jax.jit').phrase} jax.jit"
            for v in race.names
            if v != "jax.jit"
        ]
        panels.append({"verdicts against jax.jit": "\n".join(verdicts)})
    return rows, panels
