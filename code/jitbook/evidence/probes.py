"""Probes: what only running beside the student's code can show (whether a result was
waited on, how many times a body ran). They run in the student's process, so a
checker marks what it concludes from them ``self_reported``: the sheet says so.

A probe takes the answer and plain arguments and returns plain data; it holds no
reference and decides nothing.
"""

import jax
import jax.numpy as jnp


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
