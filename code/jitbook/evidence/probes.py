"""Probes: what only running beside the student's code can show (whether a result was
waited on, how many times a body ran). They run in the student's process, so a
checker marks what it concludes from them ``self_reported``: the sheet says so.

A probe takes the answer and plain arguments and returns plain data; it holds no
reference and decides nothing.
"""

import itertools

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
