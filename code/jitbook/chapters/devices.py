"""jit across devices and processes: sharded inputs, the collectives XLA adds, the PLN
fit data-parallel.

Simulated CPU devices share the machine's cores: everything here is about what jit
compiles and computes, never about speed. The multi-process run lives in
``devices_processes``.
"""

from __future__ import annotations

import contextlib
import io
import re
import unittest.mock
from collections import Counter
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jitbook.arguments import whole_number
from jitbook.chapters.pln import (
    PLNData,
    closed_form_sigma,
    init_params,
    make_optimizer,
    neg_elbo,
)
from jitbook.display import clip_lines

COLLECTIVES = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
)


def use_cpu_devices(n: int) -> None:
    """Ask JAX for ``n`` simulated CPU devices; it only works before JAX's backend has
    started.

    Taught in jit across devices and processes, Many devices on one CPU.
    """
    whole_number(n, "the number of CPU devices")
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:
        raise RuntimeError(
            f"JAX's backend already started with {jax.device_count()} device(s), "
            f"so it cannot have {n} now. Restart the kernel and call "
            f"use_cpu_devices({n}) right after `import jitbook`, "
            "before any JAX computation."
        ) from None


def data_mesh(n_devices: int | None = None, axis: str = "data") -> Mesh:
    """A 1-D mesh over the first ``n_devices`` devices whose shardings the compiler
    completes (Auto axes).

    Taught in jit across devices and processes, Sharded inputs under jit.
    """
    n = jax.device_count() if n_devices is None else n_devices
    if n > jax.device_count():
        raise ValueError(
            f"a mesh of {n} devices needs {n} devices, JAX has {jax.device_count()}; "
            f"call jitbook.chapters.devices.use_cpu_devices({n}) "
            "before any JAX computation."
        )
    return jax.make_mesh((n,), (axis,), axis_types=(AxisType.Auto,))


# --- reading shardings and programs ---------------------------------------------------


def shards(array: jax.Array) -> list[dict]:
    """One row per addressable shard: which device holds which slice, of which shape."""
    rows = []
    for shard in array.addressable_shards:
        where = ", ".join(
            f"{s.start or 0}:{dim if s.stop is None else s.stop}"
            for s, dim in zip(shard.index, array.shape, strict=True)
        )
        rows.append(
            {
                "device": shard.device.id,
                "slice": f"[{where}]",
                "shard shape": str(shard.data.shape),
            }
        )
    return rows


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def picture(array: jax.Array) -> str:
    """The text of ``jax.debug.visualize_array_sharding``, without colours, or why not.

    Taught in jit across devices and processes, Sharded inputs under jit.
    """
    try:
        import rich.console
    except ImportError:
        rich = None
    out = io.StringIO()
    if rich is None:
        patch = contextlib.nullcontext()
    else:
        # In a Jupyter kernel rich draws through IPython's display, not stdout: ask it
        # for plain text written to our buffer wherever it runs.
        plain = partial(
            rich.console.Console,
            file=out,
            force_jupyter=False,
            force_terminal=False,
            color_system=None,
        )
        patch = unittest.mock.patch.object(rich.console, "Console", plain)
    try:
        with patch, contextlib.redirect_stdout(out):
            jax.debug.visualize_array_sharding(array, use_color=False)
    except ValueError as err:  # JAX draws with the optional `rich` package
        return f"(no picture: {err})"
    return ANSI.sub("", out.getvalue()).rstrip()


def collectives(compiled) -> Counter:
    """How many of each collective (all-reduce, all-gather, ...) the optimized HLO of
    ``compiled`` runs.

    Taught in jit across devices and processes, What the compiler added.
    """
    if not hasattr(compiled, "as_text"):
        raise TypeError(
            "collectives takes a compiled program, "
            "e.g. jax.jit(f).lower(x).compile(), "
            f"got {type(compiled).__name__}."
        )
    ops = re.findall(
        r"\b(" + "|".join(COLLECTIVES) + r")(?:-start)?\(", compiled.as_text()
    )
    return Counter({op: ops.count(op) for op in COLLECTIVES if op in ops})


def collective_lines(compiled) -> list[str]:
    """The optimized HLO's collective instructions, each cut to the page's column
    (``display.clip_lines``)."""
    pattern = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
    lines = [
        line.strip() for line in compiled.as_text().splitlines() if pattern.search(line)
    ]
    return clip_lines("\n".join(lines)).splitlines()


def collective_shapes(compiled) -> list[tuple[str, tuple[int, ...]]]:
    """Every array a collective of ``compiled`` moves across devices: (the collective,
    the array's shape), read from the result types of its optimized HLO."""
    found = []
    pattern = r"=\s*(.*?)\s(" + "|".join(COLLECTIVES) + r")(?:-start)?\("
    for line in compiled.as_text().splitlines():
        match = re.search(pattern, line)
        if match:
            for dims in re.findall(r"\w+\[([\d,]*)\]", match.group(1)):
                shape = tuple(int(d) for d in dims.split(",") if d)
                found.append((match.group(2), shape))
    return found


def reduced_shapes(compiled) -> list[tuple[int, ...]]:
    """The shapes of the arrays that the first all-reduce of ``compiled`` sums across
    devices."""
    lines = [
        line
        for line in compiled.as_text().splitlines()
        if re.search(r"\ball-reduce(?:-start)?\(", line)
    ]
    if not lines:
        raise ValueError(
            "the compiled program has no all-reduce; compile it for inputs split over "
            "several devices."
        )
    result_type = lines[0].split("=", 1)[1].split(" all-reduce")[0]
    return [
        tuple(int(d) for d in dims.split(",") if d)
        for dims in re.findall(r"\w+\[([\d,]*)\]", result_type)
    ]


# Where JAX's name stack puts an operation of a function under value_and_grad: its
# forward pass under "jvp()", its backward pass under "transpose(jvp())".
_PASSES = (
    ("transpose(jvp())/", "gradient (backward pass)"),
    ("jvp()/", "loss (forward pass)"),
    ("", "after the gradient step (closed form)"),
)


def reduced_origins(compiled) -> list[dict]:
    """Each array the first all-reduce of ``compiled`` sums: its shape, the operation
    that made it as JAX's name stack records it (``metadata op_name``), and the pass of
    the step that the name stack places it in.

    Taught in jit across devices and processes, The PLN fit, data-parallel.
    """
    text = compiled.as_text()
    shapes = reduced_shapes(compiled)
    line = next(
        ln for ln in text.splitlines() if re.search(r"\ball-reduce(?:-start)?\(", ln)
    )
    called = re.search(r"\sall-reduce(?:-start)?\(([^)]*)\)", line)
    operands = re.findall(r"%([\w.-]+)", called.group(1))
    rows = []
    for shape, operand in zip(shapes, operands, strict=True):
        made = re.search(rf"^\s*(?:ROOT )?%{re.escape(operand)} = (.*)$", text, re.M)
        name = re.search(r'op_name="[^/"]*/([^"]*)"', made.group(1) if made else "")
        op = name.group(1) if name else "?"
        part = next(label for prefix, label in _PASSES if op.startswith(prefix))
        rows.append({"shape": shape, "operation": op, "part of the step": part})
    return rows


def words(counts: Counter) -> str:
    """``Counter({'all-reduce': 2})`` -> ``'2 all-reduce'``; ``'none'`` when empty."""
    return ", ".join(f"{n} {op}" for op, n in counts.items()) or "none"


# --- sharding is part of the cache key ------------------------------------------------


def sum_of_squares(x: jax.Array) -> jax.Array:
    """The function whose compiles we count: one reduction over the whole array."""
    return jnp.sum(x * x)


def sharding_key_rows(mesh: Mesh, shape: tuple[int, int] = (8, 4)) -> list[dict]:
    """Call one jitted ``sum_of_squares`` on the same shape placed four ways; did each
    call compile?

    Taught in jit across devices and processes, Sharding is part of the cache key.
    """
    from jitbook.cache import count_body_runs, count_compiles, fresh_jit

    axis = mesh.axis_names[0]
    rng = np.random.default_rng(0)
    cases = [
        ("one device (default)", None),
        (f"rows over {axis}", P(axis, None)),
        (f"rows over {axis}, new values", P(axis, None)),
        (f"columns over {axis}", P(None, axis)),
        (f"rows over {axis} again", P(axis, None)),
    ]
    jitted = fresh_jit(sum_of_squares)
    rows = []
    for label, spec in cases:
        x = rng.normal(size=shape).astype(np.float32)
        arg = (
            jnp.asarray(x)
            if spec is None
            else jax.device_put(x, NamedSharding(mesh, spec))
        )
        with count_compiles() as log, count_body_runs(sum_of_squares) as runs:
            jitted(arg).block_until_ready()
        rows.append(
            {
                "input": label,
                "sharding": str(spec) if spec is not None else "-",
                "body runs": runs.count,
                "compiled": log.count_for("sum_of_squares"),
            }
        )
    return rows


def explain_new_sharding(mesh: Mesh, shape: tuple[int, int] = (8, 4)) -> str:
    """JAX's own log lines when a warm jitted ``sum_of_squares`` gets rows-sharded, then
    columns-sharded input.

    Taught in jit across devices and processes, Sharding is part of the cache key.
    """
    from jitbook.cache import explain_miss

    axis = mesh.axis_names[0]
    x = np.ones(shape, np.float32)
    rows, columns = (
        jax.device_put(x, NamedSharding(mesh, spec))
        for spec in (P(axis, None), P(None, axis))
    )
    return explain_miss(sum_of_squares, (rows,), (columns,))


# --- what the compiler added: a matmul sharded several ways ---------------------------


def matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b``: the program whose per-device version XLA writes for each sharding of
    its inputs."""
    return a @ b


def matmul_row(
    mesh: Mesh,
    a_spec: P,
    b_spec: P,
    out_spec: P | None = None,
    shape: tuple[int, int, int] = (8, 8, 8),
) -> dict:
    """Compile ``matmul`` for one sharding of its inputs: the collectives inserted and
    per-device shapes.

    Taught in jit across devices and processes, What the compiler added.
    """
    m, k, n = shape
    a_sharding, b_sharding = NamedSharding(mesh, a_spec), NamedSharding(mesh, b_spec)
    out_sharding = None if out_spec is None else NamedSharding(mesh, out_spec)
    jitted = jax.jit(
        matmul, in_shardings=(a_sharding, b_sharding), out_shardings=out_sharding
    )
    compiled = jitted.lower(
        jax.ShapeDtypeStruct((m, k), jnp.float32),
        jax.ShapeDtypeStruct((k, n), jnp.float32),
    ).compile()
    out = compiled.output_shardings
    return {
        "a": str(a_spec),
        "b": str(b_spec),
        "out asked": "compiler's choice" if out_spec is None else str(out_spec),
        "collectives": words(collectives(compiled)),
        "collective ops": sum(collectives(compiled).values()),
        "a per device": str(a_sharding.shard_shape((m, k))),
        "b per device": str(b_sharding.shard_shape((k, n))),
        "out per device": str(out.shard_shape((m, n))),
    }


def matmul_cases(axis: str) -> list[tuple]:
    """The shardings of ``a @ b`` the chapter compiles: (a's spec, b's spec, the
    output's spec or None)."""
    return [
        (P(axis, None), P(None, None), None),
        (P(None, None), P(None, axis), None),
        (P(None, axis), P(axis, None), None),
        (P(None, axis), P(axis, None), P(axis, None)),
        (P(axis, None), P(None, axis), None),
        (P(None, axis), P(None, None), None),
    ]


def matmul_rows(mesh: Mesh, shape: tuple[int, int, int] = (8, 8, 8)) -> list[dict]:
    """``matmul_row`` for every case of ``matmul_cases``: the explorer's data."""
    return [
        matmul_row(mesh, *case, shape=shape)
        for case in matmul_cases(mesh.axis_names[0])
    ]


def predict(x: jax.Array, w: jax.Array) -> jax.Array:
    """A layer applied to a batch: rows of ``x`` are examples, ``w`` is shared by all of
    them."""
    return jnp.tanh(x @ w)


def psum_matmul(mesh: Mesh):
    """``a @ b`` with the contraction split over the mesh, written per device: local
    product, then ``psum``.

    Taught in jit across devices and processes, What the compiler added.
    """
    axis = mesh.axis_names[0]

    def local(a_block, b_block):
        return jax.lax.psum(a_block @ b_block, axis)

    return jax.jit(
        jax.shard_map(
            local, mesh=mesh, in_specs=(P(None, axis), P(axis, None)), out_specs=P()
        )
    )


# --- saying where values go ---------------------------------------------------------


def doubled_by_columns(x: jax.Array) -> jax.Array:
    """``2 * x``, constrained inside the program to columns split over axis ``data``.

    Needs a mesh in context (``jax.set_mesh``), since it names the axis, not the mesh.
    Taught in jit across devices and processes, Saying where values go.
    """
    return jax.lax.with_sharding_constraint(2 * x, P(None, "data"))


def gram_replicated(x: jax.Array) -> jax.Array:
    """``x.T @ x`` with the output sharding the Explicit-mode error asks for.

    Taught in jit across devices and processes, Saying where values go.
    """
    return jnp.matmul(x.T, x, out_sharding=P())


def gram_resharded(x: jax.Array) -> jax.Array:
    """``x.T @ x`` after ``jax.sharding.reshard`` made ``x`` whole on every device.

    Taught in jit across devices and processes, Saying where values go.
    """
    whole = jax.sharding.reshard(x, P())
    return whole.T @ whole


def per_device_double(block: jax.Array) -> jax.Array:
    """The body of a ``pmap`` or ``shard_map``: it sees one device's block.

    Taught in jit across devices and processes, Saying where values go.
    """
    return 2 * block


# --- the PLN fit, data-parallel -------------------------------------------------------


@partial(jax.jit, static_argnames="lr")
def pln_step(params, opt_state, Omega, data: PLNData, lr: float = 1.0):
    """One PLN iteration: a gradient step on (B, M, S), then Sigma and Omega in closed
    form.

    Nothing in it mentions devices: the shardings of its arguments decide how XLA splits
    it. Taught in jit across devices and processes, The PLN fit, data-parallel.
    """
    loss, grads = jax.value_and_grad(neg_elbo)(params, data, Omega)
    updates, opt_state = make_optimizer(lr).update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return (
        params,
        opt_state,
        jnp.linalg.inv(closed_form_sigma(params.M, params.S)),
        loss,
    )


def place_rows(data: PLNData, mesh: Mesh | None):
    """Data and starting parameters, with the rows of Y, O, X, M, S split over ``mesh``
    (None: one device).

    B and Omega are small and replicated.
    Taught in jit across devices and processes, The PLN fit, data-parallel.
    """
    params = init_params(data)
    Omega = jnp.eye(data.Y.shape[1])
    if mesh is None:
        return jax.tree.map(jnp.asarray, data), params, Omega
    axis, n_dev = mesh.axis_names[0], mesh.devices.size
    if data.Y.shape[0] % n_dev:
        raise ValueError(
            f"{data.Y.shape[0]} rows do not split evenly over {n_dev} devices; "
            f"use a number of rows that {n_dev} divides (e.g. "
            f"load_oaks(repeat={n_dev}))."
        )
    rows, replicated = NamedSharding(mesh, P(axis, None)), NamedSharding(mesh, P())
    data = PLNData(*(jax.device_put(np.asarray(a), rows) for a in data))
    params = params._replace(
        B=jax.device_put(params.B, replicated),
        M=jax.device_put(params.M, rows),
        S=jax.device_put(params.S, rows),
    )
    return data, params, jax.device_put(Omega, replicated)


def process_rows(data: PLNData) -> PLNData:
    """The rows this process owns: process ``p`` of ``P`` takes block ``p`` of ``P``.

    Here each process slices a file it loaded whole; a real loader reads only its block.
    Taught in jit across devices and processes, More than one process.
    """
    n, count, index = data.Y.shape[0], jax.process_count(), jax.process_index()
    if n % count:
        raise ValueError(
            f"{n} rows do not split evenly over {count} processes; "
            f"use a number of rows that {count} divides."
        )
    block = n // count
    return PLNData(*(np.asarray(a)[index * block : (index + 1) * block] for a in data))


def place_local_rows(local: PLNData, mesh: Mesh):
    """Like ``place_rows``, but each process passes only its own rows (process_rows).

    ``jax.make_array_from_process_local_data`` joins the processes' rows into global
    arrays split over every device of ``mesh``; B and Omega are small and replicated.
    Taught in jit across devices and processes, More than one process.
    """
    axis = mesh.axis_names[0]
    rows, replicated = NamedSharding(mesh, P(axis, None)), NamedSharding(mesh, P())

    def global_rows(a):
        return jax.make_array_from_process_local_data(rows, np.asarray(a))

    data = PLNData(*(global_rows(a) for a in local))
    params = init_params(local)
    params = params._replace(
        B=jax.device_put(params.B, replicated),
        M=global_rows(params.M),
        S=global_rows(params.S),
    )
    Omega = jax.device_put(jnp.eye(local.Y.shape[1]), replicated)
    return data, params, Omega


def start_optimizer(params, lr: float = 1.0, mesh: Mesh | None = None):
    """The optimizer's state for ``params``, its scalars replicated over ``mesh`` as
    ``pln_step`` returns them.

    Left where ``init`` makes it, the step counter sits on one device while the step
    returns it replicated: the second iteration would be a new cache key and compile
    again. Taught in jit across devices and processes, The PLN fit, data-parallel.
    """
    state = make_optimizer(lr).init(params)
    if mesh is None:
        return state
    replicated = NamedSharding(mesh, P())
    return jax.tree.map(
        lambda a: (
            a
            if isinstance(a.sharding, NamedSharding)
            else jax.device_put(a, replicated)
        ),
        state,
    )


def pln_losses(
    data: PLNData, n_iter: int, mesh: Mesh | None = None, lr: float = 1.0
) -> np.ndarray:
    """The PLN fit's losses (minus the ELBO before each step), on one device or
    data-parallel over ``mesh``.

    Taught in jit across devices and processes, The PLN fit, data-parallel.
    """
    return fit_placed(*place_rows(data, mesh), n_iter, mesh, lr)


def fit_placed(
    data: PLNData, params, Omega, n_iter: int, mesh: Mesh | None, lr: float = 1.0
) -> np.ndarray:
    """The PLN fit's losses from data and parameters already placed (``place_rows``).

    Taught in jit across devices and processes, More than one process.
    """
    opt_state = start_optimizer(params, lr, mesh)
    losses = []
    for _ in range(n_iter):
        params, opt_state, Omega, loss = pln_step(params, opt_state, Omega, data, lr=lr)
        losses.append(loss)
    return np.asarray(jnp.stack(losses))


def pln_step_compiled(data: PLNData, mesh: Mesh | None, lr: float = 1.0):
    """The compiled ``pln_step`` for the placement ``place_rows(data, mesh)`` makes (to
    read its collectives)."""
    data, params, Omega = place_rows(data, mesh)
    return pln_step.lower(
        params, start_optimizer(params, lr, mesh), Omega, data, lr=lr
    ).compile()
