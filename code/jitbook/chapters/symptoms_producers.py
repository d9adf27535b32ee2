"""The symptom index's producers: each runs what a chapter runs and returns the message
it shows, so the index quotes text produced when it runs, never typed.

Taught in Symptom index, The index.
"""

import os
import warnings
from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import capture_jax_logs, explain_miss, fresh_jit
from jitbook.errors import error_line, raised


def err(fn: Callable, *args) -> str:
    err = raised(fn, *args)
    if err is None:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} no longer raises.")
    return error_line(err)


def log(lines: Iterable[str], start: str) -> str:
    for line in lines:
        for part in line.splitlines():
            if part.strip().startswith(start):
                return part.strip()
    raise RuntimeError(f"no log line starting {start!r} was written.")


def miss_story() -> list[str]:
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


def loop_story() -> list[str]:
    from jitbook.chapters import recompilation

    return recompilation.jit_in_a_loop_log("jax.jit(lambda i: plus_one(i))", steps=2)


def tracing(name: str) -> Callable:
    from jitbook.chapters import tracing

    return getattr(tracing, name)


def leaked_tracer() -> str:
    from jitbook.chapters import tracing

    fresh_jit(tracing.remember)(1.0)  # traced here, whatever ran before
    try:
        return err(lambda: tracing.history[-1] + 1)
    finally:
        tracing.history.clear()


def checking_leaks() -> str:
    from jitbook.chapters import tracing

    with jax.checking_leaks():
        err = raised(jax.jit(lambda v: tracing.remember(v) * 2), 1.0)
    tracing.history.clear()
    return error_line(err)


def while_grad() -> str:
    fori = tracing("fori_version")
    return err(jax.jit(jax.grad(lambda x, n: fori(x, n).sum())), jnp.ones(3), 3)


def no_tracing() -> str:
    from jitbook.chapters import jaxprs

    jitted = jax.jit(jaxprs.with_argument)
    a, b = jnp.ones((4, 3)), jnp.ones((3, 2))
    jitted(a, b)
    shorter = a[:-1]  # sliced outside the block: slicing op by op traces too
    with jax.no_tracing(True):
        return error_line(raised(jitted, shorter, b))


def compiled_other_shape() -> str:
    from jitbook import errors
    from jitbook.chapters import jaxprs

    compiled = jax.jit(jaxprs.with_argument).lower(jnp.ones((4, 3)), jnp.ones((3, 2)))
    outcome = errors.call_outcome(
        compiled.compile(), jnp.ones((3, 3)), jnp.ones((3, 2))
    )
    return outcome["first line"]  # the page shows the class in a column of its own


def methods(name: str):
    from jitbook.chapters import methods

    return getattr(methods, name)


def w() -> jax.Array:  # made when called: importing this module starts no backend
    return jnp.array([1.0, -2.0, 0.5])


def x() -> jax.Array:
    return jnp.array([2.0, 1.0, -4.0])


def v() -> jax.Array:
    return jnp.array([-1.0, 2.0, -3.0, 4.0])


def metadata_cause() -> str:
    """In a fresh process: the first call must meet an empty cache (an entry another
    array left there would be compared first)."""
    from jitbook.fresh import run_cold

    return run_cold(_metadata_cause)


def _metadata_cause() -> str:
    layer = methods("ArrayMetadataLayer")
    offset = jnp.array([0.5, 0.5, 0.5])
    layer(w(), offset, "relu").predict(x())
    err = raised(lambda: layer(w(), offset + 0, "relu").predict(x()))
    return error_line(err.__cause__)


def frozen() -> str:
    layer = methods("HashedLayer")((1.0, -2.0, 0.5), "relu")
    return err(setattr, layer, "activation", "tanh")


def unhashable_static() -> str:
    from jitbook.chapters import recompilation

    return error_line(recompilation.static_error(jnp.array(2)))


def cache_size() -> str:
    plus = methods("SignedEqx")(jnp.ones(3), "plus")
    return err(lambda: plus.jit_apply._cache_size())


def donated_reuse() -> str:
    from jitbook.chapters import artifacts

    return error_line(artifacts.reuse_error())


def donation_unusable() -> str:
    from jitbook.chapters import artifacts

    return artifacts.donation_warnings(artifacts.total, jnp.ones(100))[0]


def export_mismatch(constraint: bool) -> str:
    from jax import export

    from jitbook.chapters import artifacts

    w = jnp.ones((3, 2))
    spec = artifacts.batch_spec(3, constraints=["b >= 2"] if constraint else [])
    shipped = export.export(jax.jit(artifacts.predict))(
        jax.ShapeDtypeStruct(w.shape, w.dtype), spec
    )
    x = jnp.ones((1, 3)) if constraint else jnp.ones((4, 5))
    return err(shipped.call, w, x)


def compile_option() -> str:
    jitted = jax.jit(jnp.sin, compiler_options={"no_such_option": 1})
    return err(lambda: jitted.lower(1.0).compile())


def late_devices(ours: bool) -> str:
    from jitbook.chapters import devices

    jnp.ones(1).block_until_ready()  # the backend is running from here on
    if ours:
        return err(devices.use_cpu_devices, 8)
    return err(jax.config.update, "jax_num_cpu_devices", 8)


def sharded_contraction() -> str:
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    n = len(jax.devices())
    mesh = jax.make_mesh((n,), ("data",), axis_types=(AxisType.Explicit,))
    x = jax.device_put(jnp.ones((8 * n, 4)), NamedSharding(mesh, P("data", None)))
    return err(jax.jit(lambda x: x.T @ x), x)


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


def sharding_mismatch() -> str:
    """In a fresh process: the mismatch needs four devices, set before JAX starts."""
    import subprocess
    import sys

    from jitbook.paths import CODE

    env = {**os.environ, "PYTHONPATH": str(CODE)}
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


def no_mesh() -> str:
    from jitbook.chapters import devices

    return err(jax.jit(devices.doubled_by_columns), jnp.ones((8, 4)))


def none_leaves() -> str:
    layer = methods("CheckedLayer")(w(), "relu")
    return err(lambda: jax.tree.map(lambda _: None, layer))


def minijit_branch() -> str:
    from jitbook.chapters import minijit

    return err(minijit.jit(tracing("sin_or_cos")), jnp.linspace(-1.0, 1.0, 5), 1.0)


def minijit_index() -> str:
    from jitbook.chapters import minijit

    return err(minijit.jit(tracing("python_loop")), jnp.ones(3), 3)


def pln_data():
    from jitbook.chapters import pln

    return pln.load_oaks(1)


def pln_counts() -> str:
    from jitbook.chapters import pln

    data = pln_data()
    bad = data.Y.copy()
    bad[3, 7] = 2.5
    return err(pln.fit, (bad, data.O, data.X), 10, "scan")


def pln_seed_copy() -> str:
    """In a fresh process: JAX's caches hold no other key with array metadata there."""
    from jitbook.fresh import run_cold

    return run_cold(_pln_seed_copy)


def _pln_seed_copy() -> str:
    from jitbook.chapters.pln import seed

    data = pln_data()
    total = jax.jit(lambda m: m.M.sum())
    total(seed.SeedPLN(*data))
    return err(total, seed.SeedPLN(jnp.asarray(data.Y) + 0, data.O, data.X))


def size_in_carry() -> str:
    def body(carry, _):
        return {"p": carry["p"], "x": carry["x"] + jnp.zeros(carry["p"]).sum()}, None

    return err(lambda: jax.lax.scan(body, {"p": 3, "x": 0.0}, length=2))


def numpy_log_warning() -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.log(np.array([-1.0]))
    return f"{caught[0].category.__name__}: {caught[0].message}"


def pitfalls(name: str):
    from jitbook.chapters import pitfalls

    return getattr(pitfalls, name)


def debug_nans_lines() -> list[str]:
    err, printed = pitfalls("debug_nans_error")(jnp.ones(2), jnp.array([0.0, 2.0]))
    return [*printed, error_line(err)]


def unfinished_answer() -> str:
    from jitbook.exercises import check

    def safe_take(x, i):
        raise NotImplementedError()

    return check("pitfalls.checked-take", safe_take).message


def first(fn: Callable[[], list[str]], start: str) -> Callable[[], str]:
    return lambda: log(fn(), start)


def on(fn: Callable, *args) -> Callable[[], str]:
    return lambda: err(fn, *args)


def recompilation(name: str):
    from jitbook.chapters import recompilation

    return getattr(recompilation, name)


def integer_conversion_sources() -> dict[str, str]:
    """The error class each way of asking a tracer for a Python int raises under jit."""
    import operator

    ways = {
        "range(x)": lambda x: range(x),
        "operator.index(x)": operator.index,
        "[1, 2, 3][x]": lambda x: [1, 2, 3][x],
        "int(x)": int,
    }
    return {
        way: type(raised(jax.jit(lambda x, f=f: f(x) and x), jnp.int32(1))).__name__
        for way, f in ways.items()
    }


def add_two(v: jax.Array) -> jax.Array:
    """A plain function, jitted twice by ``never_seen_logs``."""
    return v + 2


def never_seen_logs() -> dict[str, bool]:
    """Whether a new wrapper of a traced function, and a new lambda, log ``never seen
    function`` under ``jax_explain_cache_misses``."""
    x = jnp.ones(3)
    jax.jit(add_two)(x)
    with capture_jax_logs(log_compiles=False) as wrapper_logs:
        jax.jit(add_two)(x)
    with capture_jax_logs(log_compiles=False) as lambda_logs:
        jax.jit(lambda v: v + 1)(x)

    def said(logs: list[str]) -> bool:
        return any("never seen function" in line for line in logs)

    return {
        "a new jax.jit wrapper of a traced function": said(wrapper_logs),
        "a new lambda": said(lambda_logs),
    }


def plain_class_through_scan() -> None:
    """The tutorial's level 3: a plain class carried through ``lax.scan``."""
    from jitbook.chapters.pln import seed

    seed.carry_through_scan(seed.PlainPLN(jnp.zeros((3, 2)), jnp.ones((3, 2))))


def other_platform() -> str:
    """An export made for the GPU only, called on this machine's CPU."""
    from jax import export

    from jitbook.chapters import artifacts

    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    gpu_only = export.export(jax.jit(artifacts.predict), platforms=("cuda",))(w, x)
    return err(gpu_only.call, w, x)
