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
