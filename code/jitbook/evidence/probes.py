"""Probes: what only running beside the student's code can show (whether a result was
waited on, how many times a body ran). They run in the student's process, so a
checker marks what it concludes from them ``self_reported``: the sheet says so.

A probe takes the answer and plain arguments and returns plain data; it holds no
reference and decides nothing. A few only hand over what the answer itself made (its
exported program's bytes, its spec, its values on arguments that cannot cross as
data): the grader judges that as data, so faking it means solving the exercise
(``HANDS_OVER``).
"""

import itertools

import jax
import jax.numpy as jnp

# Probes whose result the grader judges as data (see the module's docstring).
HANDS_OVER = frozenset({"serialized", "partition_spec", "on_pln_tuples"})


class _SlowResult:
    """Stands in for an array computed only when asked: records whether it was
    waited on."""

    def __init__(self) -> None:
        self.waited = False

    def block_until_ready(self):
        self.waited = True
        return self


def waits(answer) -> dict:
    """What ``answer(fn, *args)`` does with fn's result: is a big product ready when
    it returns, does it wait for every leaf of a nested result, and keep it as it is."""
    single = answer(lambda a: a @ a, jnp.ones((300, 300)))
    slow = [_SlowResult() for _ in range(3)]
    result = answer(lambda: (slow[0], {"b": slow[1], "c": [slow[2]]}))
    return {
        "ready": isinstance(single, jax.Array) and single.is_ready(),
        "waited": sum(s.waited for s in slow),
        "leaves": len(slow),
        "kept": type(result) is tuple and result[0] is slow[0],
    }


def passes_through(answer, x, y):
    """``answer(fn, x, y)`` for an ``fn`` returning a nested result: what came back."""
    return answer(lambda a, b: (jnp.sin(a), {"b": a * b}), x, y)


# ---- tracing, jaxprs, minijit ----
# Several of these only hand the answer an argument that cannot cross as data (a
# function, a minijit key) and copy out what it returns; the checker draws the rest.


def printed_at_calls(answer, values) -> list[str]:
    """The lines printed while ``jax.jit(answer)`` runs once on each of ``values``,
    run-time prints included (``jax.debug.print`` runs asynchronously: waited for)."""
    import contextlib
    import io

    buffer = io.StringIO()
    jitted = jax.jit(answer)
    with contextlib.redirect_stdout(buffer):
        for value in values:
            jax.block_until_ready(jitted(value))
        jax.effects_barrier()
    return buffer.getvalue().splitlines()[:100]


def gradient_of_sum(answer, x, n):
    """``jax.grad`` of ``sum(answer(x, n))`` in ``x``, jitted, ``n`` traced."""
    return jax.jit(jax.grad(lambda v, k: answer(v, k).sum()))(x, n)


def jaxpr_sizes(answer, x, counts) -> list[int]:
    """Equations (loop bodies included) of ``answer(x, n)``'s jaxpr, ``n`` static, for
    each ``n`` of ``counts``."""
    from jitbook.programs import count_equations

    traced = jax.make_jaxpr(answer, static_argnums=1)
    return [count_equations(traced(x, n)) for n in counts]


_TABLE = jnp.arange(12.0).reshape(3, 4)

#: Steps a checker draws a function from: each keeps the shape of a square matrix.
STEPS = {
    "sin": jnp.sin,
    "tanh": jnp.tanh,
    "square": lambda v: v**2,
    "plus_one": lambda v: v + 1.0,
    "double": lambda v: v * 2.0,
    "matmul": lambda v: v @ v,
    "closure": lambda v: v * _TABLE.sum(),
    "loop": lambda v: jax.lax.fori_loop(0, 4, lambda i, c: jnp.sin(c) + 1.0, v),
}


def composed(steps: list[str]):
    """A new function applying ``steps`` (names in ``STEPS``) in order: the grader and
    the kernel build the same function from the same drawn recipe."""

    def fn(x):
        for name in steps:
            x = STEPS[name](x)
        return x

    return fn


def on_composed(answer, steps, *args):
    """``answer(fn, *args)`` for ``fn = composed(steps)``."""
    return answer(composed(steps), *args)


def precompiled(answer, steps, shapes, inputs, other) -> dict:
    """What ``answer(fn, shapes)`` gives for a new ``fn = composed(steps)``: compiles
    inside it, its keys, each entry run on its input and compiles then, and whether
    the first entry refuses ``other`` (another shape) without compiling."""
    from jitbook.cache import count_compiles

    with count_compiles() as ahead:
        table = answer(composed(steps), list(shapes))
    if type(table) is not dict:
        return {"returned": type(table).__name__}
    with count_compiles() as later:
        pairs = zip(shapes, inputs, strict=True)
        outputs = [table[s](x) if s in table else None for s, x in pairs]
        outputs = jax.block_until_ready(outputs)
    with count_compiles() as extra:
        try:
            table[shapes[0]](other)
            refused = False
        except Exception:  # an executable refuses another shape: what is asked
            refused = True
    return {
        "keys": list(table),
        "compiled_ahead": ahead.count,
        "outputs": outputs,
        "compiled_later": later.count,
        "other_refused": refused and extra.count == 0,
    }


def minijit_cube(answer, x) -> dict:
    """``cube = make_cube()`` in the book's minijit: what ``cube(v) + 1`` traces to
    (primitives, the abstract value of cube's result) and what minijit.jit computes."""
    from jitbook.chapters import minijit

    cube = answer()
    if not callable(cube):
        return {"returned": type(cube).__name__}
    program = minijit.trace(lambda v: cube(v) + 1, x)
    found = {"primitives": program.primitives()}
    if program.equations and program.equations[0].outputs:
        out = program.equations[0].outputs[0].abstract
        found["abstract"] = [list(out.shape), str(out.dtype)]
    found["value"] = minijit.jit(lambda v: cube(v) + 1)(x)
    return found


#: How a checker names a value it cannot send as data (a weakly typed JAX array).
MADE = {
    "float": float,
    "int": int,
    "jnp.float32": jnp.float32,
    "jnp.asarray": jnp.asarray,
    "jnp.ones": jnp.ones,
}


def made(kind: str, number):
    """The value ``MADE[kind](number)``, made in this process."""
    return MADE[kind](number)


def minijit_compiles(answer, recipe) -> dict:
    """A minijit with ``answer`` as its abstractify, called on each value of
    ``recipe`` (``[kind, number]`` pairs): its compiles and the weak types it saw."""
    from jitbook.chapters import minijit

    values = [made(kind, number) for kind, number in recipe]
    ours = minijit.MiniJit(minijit.new_function(lambda v: v + 1), abstractify=answer)
    for value in values:
        ours(value)
    return {
        "compiles": ours.compiles,
        "weak_types": [getattr(answer(v), "weak_type", None) for v in values],
    }


def explained_miss(answer, old_args, old_static, new_args, new_static):
    """``answer(old_key, new_key)`` for the keys ``minijit.cache_key`` makes."""
    from jitbook.chapters import minijit

    old = minijit.cache_key(tuple(old_args), dict(old_static))
    new = minijit.cache_key(tuple(new_args), dict(new_static))
    return answer(old, new)


# ---- recompilation ----


def compiles_during(answer, inputs) -> int:
    """XLA compiles while ``answer`` runs on each NumPy array of ``inputs``."""
    import numpy as np

    from jitbook.cache import count_compiles

    arrays = [np.asarray(x) for x in inputs]
    with count_compiles() as log:
        for x in arrays:
            answer(x)
    return log.count


# ---- methods ----

_fresh_sizes = itertools.count(1001)  # array lengths no earlier probe compiled


def _jitted(fn) -> bool:
    """Whether ``fn``'s class is one of JAX's or Equinox's jitted wrappers."""
    kind = type(fn)
    home = kind.__module__.split(".")[0]
    return callable(getattr(kind, "lower", None)) and home in (
        "jax",
        "jaxlib",
        "equinox",
    )


def _count(call) -> int:
    """XLA compiles while ``call()`` runs and its result is computed."""
    from jitbook.cache import count_compiles

    with count_compiles() as log:
        jax.block_until_ready(call())
    return log.count


def poly_compiles(answer, coeffs, other, x) -> dict:
    """For a class ``Poly``: is ``evaluate`` jitted, how many compiles an equal new
    object and one with other coefficients cost, and what ``==`` says."""
    if not isinstance(answer, type):
        return {"is_class": False}
    first, twin, changed = answer(coeffs), answer(coeffs), answer(other)
    jax.block_until_ready(first.evaluate(x))
    return {
        "is_class": True,
        "jitted": _jitted(vars(answer).get("evaluate")),
        "equal_compiles": _count(lambda: twin.evaluate(x)),
        "other_compiles": _count(lambda: changed.evaluate(x)),
        "equal": bool(twin == first),
        "unequal": not bool(changed == first),
    }


def trainer_compiles(answer, activation, other_activation) -> dict:
    """For a class ``Trainer``: compiles of ``step`` for a new learning rate and for a
    new activation, at an array length no earlier probe compiled."""
    if not isinstance(answer, type):
        return {"is_class": False}
    import equinox as eqx

    size = next(_fresh_sizes)
    w, x = jnp.linspace(0.5, 2.0, size), jnp.linspace(-1.0, 1.5, size)
    new = answer(w, 0.1, activation).step(x)
    return {
        "is_class": True,
        "jitted": _jitted(vars(answer).get("step")),
        "returns_trainer": type(new) is answer,
        "equinox": issubclass(answer, eqx.Module),
        "new_rate": _count(lambda: answer(w, 0.3, activation).step(x)),
        "new_activation": _count(lambda: answer(w, 0.1, other_activation).step(x)),
    }


def models_compiles(answer, scales) -> dict:
    """For ``build_models``: the models' types, and compiles of running freshly built
    models (one shared static function compiles ``run`` at most once)."""
    from jitbook.chapters import methods

    models = answer(scales)
    kinds = [type(m).__name__ for m in models] if type(models) is list else []
    ours = type(models) is list and all(type(m) is methods.MappedEqx for m in models)
    runs = _count(lambda: [m.run() for m in models]) if ours else 0
    return {"list": type(models) is list, "types": kinds, "ours": ours, "runs": runs}


def layer_grads(answer, weights, x, activation) -> dict:
    """``answer(layer, x)`` for one ``methods.EqxLayer`` per weight, and the compiles
    of the function compiled most often meanwhile."""
    import collections

    from jitbook.cache import count_compiles
    from jitbook.chapters import methods

    layers = [methods.EqxLayer(w, activation) for w in weights]
    with count_compiles() as log:
        grads = jax.block_until_ready([answer(layer, x) for layer in layers])
    most = max(collections.Counter(log.compiles).values(), default=0)
    return {"grads": grads, "most_compiles": most}


# ---- artifacts, devices, pln ----

import re  # noqa: E402

import numpy as np  # noqa: E402


def serialized(answer) -> dict:
    """An exported program's own bytes (``Exported.serialize``): the grader loads and
    runs them; anything else is named by its type."""
    from jax import export

    if type(answer) is not export.Exported:
        return {"type": type(answer).__name__, "bytes": None}
    raw = answer.serialize()
    return {"type": "Exported", "bytes": np.frombuffer(bytes(raw), np.uint8).copy()}


def partition_spec(answer) -> dict:
    """A ``PartitionSpec`` as plain data: per dimension None, an axis name, or a list
    of names."""
    from jax.sharding import PartitionSpec

    if type(answer) is not PartitionSpec:
        return {"type": type(answer).__name__, "entries": None}
    entries = [
        e if e is None or type(e) is str else [str(a) for a in e] for e in answer
    ]
    return {"type": "PartitionSpec", "entries": entries}


def _every_device_mesh():
    from jax.sharding import AxisType

    # Auto axes, as the chapter's mesh: the compiler completes the shardings
    return jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Auto,))


def placements(answer, x) -> dict:
    """``answer`` on ``x`` placed by rows, by columns (twice) and replicated over every
    device: where each result lives, its values, and how many programs one jitted
    step compiled for them."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = _every_device_mesh()
    step = jax.jit(lambda a: jnp.sum(a * a))
    loaders = {
        "rows": (P("data", None), 1),
        "columns": (P(None, "data"), 1),
        "columns, new values": (P(None, "data"), 2),
        "replicated": (P(), 3),
    }
    found = {}
    for name, (spec, scale) in loaders.items():
        placed = answer(jax.device_put(scale * x, NamedSharding(mesh, spec)))
        if not isinstance(placed, jax.Array):
            return {"devices": jax.device_count(), "type": type(placed).__name__}
        step(placed)
        found[name] = {
            "devices": len(placed.sharding.device_set),
            "replicated": bool(placed.sharding.is_fully_replicated),
            "values": np.asarray(placed),
        }
    return {
        "devices": jax.device_count(),
        "placed": found,
        "programs": step._cache_size(),
    }


_COLLECTIVES = (
    r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)"
    r"(?:-start)?\("
)


def collectives_rows_split(answer, x) -> dict:
    """The collectives in ``jax.jit(answer)`` compiled for ``x`` with its rows split
    over every device."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    placed = jax.device_put(x, NamedSharding(_every_device_mesh(), P("data", None)))
    text = jax.jit(answer).lower(placed).compile().as_text()
    found = re.findall(_COLLECTIVES, text)
    return {
        "devices": jax.device_count(),
        "collectives": {c: found.count(c) for c in set(found)},
    }


def autodiff_used(answer, *args) -> bool:
    """Whether JAX's autodiff made part of ``answer``'s program: its ops' locations
    then name a ``jvp(...)`` transformation (grad, vjp, jacrev, linearize...)."""
    text = jax.jit(answer).lower(*args).as_text(debug_info=True)
    return "jvp(" in text


def pytree_split(answer, M, Omega, n_steps: int) -> dict:
    """``answer(M, Omega, n_steps)`` through ``tree_flatten`` and ``tree_unflatten``,
    and how often a jitted loop over ``range(c.n_steps)`` compiles for new arrays,
    then a new ``n_steps``."""
    obj = answer(M, Omega, n_steps)
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    kept = {
        name: np.asarray(getattr(back, name))
        if isinstance(getattr(back, name, None), jax.Array)
        else None
        for name in ("M", "Omega")
    }
    n_back = getattr(back, "n_steps", None)
    facts = {
        "leaves": [
            np.asarray(leaf) if isinstance(leaf, jax.Array) else None for leaf in leaves
        ],
        "kept": kept,
        "n_steps": n_back if type(n_back) is int else repr(n_back)[:80],
    }

    def walk(c):
        x = c.M
        for _ in range(c.n_steps):
            x = x @ c.Omega / 10
        return x.sum()

    f = jax.jit(walk)
    try:
        f(obj)
        f(answer(M + 1, Omega * 3, n_steps))
        same = f._cache_size()
        f(answer(M, Omega, n_steps + 1))
    except Exception as err:  # noqa: BLE001 - the class fails under jit: that is the evidence
        return {
            **facts,
            "jit_error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}",
        }
    return {**facts, "same_shapes": same, "new_n_steps": f._cache_size() - same}


def on_pln_tuples(answer, params, data, Omega) -> dict:
    """``answer(Params(*params), PLNData(*data), Omega)``, as the chapter calls it (the
    named tuples cannot cross as plain data), and whether autodiff made its program."""
    from jitbook.chapters.pln import Params, PLNData

    args = Params(*params), PLNData(*data), Omega
    return {"value": answer(*args), "autodiff": autodiff_used(answer, *args)}
