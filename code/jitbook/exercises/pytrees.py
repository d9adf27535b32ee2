"""Exercises of the chapter "Classes as pytrees: by hand and with Equinox".

Values are what the student's classes compute on inputs drawn per student; whether a new
object compiles again is counted by a probe beside the student's code, at shapes no
earlier probe compiled, so nothing clears the student's caches: those rows are
self-reported.
"""

import numpy as np

from jitbook.chapters import methods

from . import ask, exercise, expect, judge
from .methods import _answered, _class


@exercise("pytrees.trainer", "Trainer", "pytree classes", 3)
def _pytree_trainer(rng):
    """Children: weight and learning_rate (values). Metadata: activation (selects
    code). Unflatten must restore every field.
    """
    size = int(rng.integers(4, 40))
    w = rng.uniform(0.5, 2.0, size=size).astype(np.float32)
    x = rng.uniform(-1.0, 1.5, size=size).astype(np.float32)
    rates = [float(r) for r in np.round(rng.uniform(0.01, 0.5, size=2), 3)]
    activation, other = ("tanh", "relu")[:: 1 if rng.integers(2) else -1]

    def field(rate, name):
        steps = (("step", (x,)), ("__getattribute__", (name,)))
        return ask.call(w, rate, activation, then=steps, allow_error=True)

    asked = [
        ask.probe("trainer_compiles", activation, other),
        field(rates[0], "weight"),
        field(rates[1], "weight"),
        field(rates[0], "learning_rate"),
        field(rates[0], "activation"),
    ]
    found, *got = yield asked
    _class(found, "Trainer")
    expect(
        found["returns_trainer"],
        "step returns a new Trainer",
        "step returned another type; return a new Trainer with the updated weight.",
        self_reported=True,
    )
    *weights, rate, kept = _answered(asked[1:], got)
    for lr, weight in zip(rates, weights, strict=True):
        want = w - lr * methods.reference_grad(w, x, activation)
        expect(
            judge.agrees(weight, want, atol=1e-5),
            f"step takes one gradient step (learning_rate={lr:g})",
            f"with learning_rate={lr:g} the new weight is not one gradient step, "
            "weight - learning_rate * d/dweight sum(activation(weight * x)); if the "
            "formula is right, check that tree_unflatten restores every field (jit "
            "rebuilds self with it).",
        )
    expect(
        kept == activation and judge.agrees(rate, rates[0]),
        "the new Trainer keeps learning_rate and activation",
        "the Trainer returned by step lost its learning_rate or activation: does "
        "tree_unflatten restore every field?",
    )
    expect(
        found["jitted"],
        "step is compiled by jax.jit",
        "step was not compiled as one program; decorate it with @jax.jit (self must "
        "then be a pytree).",
        self_reported=True,
    )
    equinox = found["equinox"]
    expect(
        found["new_rate"] == 0,
        "a new learning rate does not compile again",
        f"a new learning_rate compiled step {found['new_rate']} time(s); "
        + (
            "eqx.filter_jit treats a Python float field as static: store "
            "learning_rate as an array (jnp.asarray) so it is traced."
            if equinox
            else "make it a child (traced value), not metadata."
        ),
        self_reported=True,
    )
    expect(
        found["new_activation"] >= 1,
        "a new activation compiles again",
        "a new activation did not compile step again; the activation selects code, so "
        + (
            "mark the field static: activation: str = eqx.field(static=True)."
            if equinox
            else "it belongs in the static metadata (aux_data)."
        ),
        self_reported=True,
    )


@exercise("pytrees.shared-function", "build_models", "static callables in Equinox", 1)
def _shared_function(rng):
    """jit compares static functions by identity: create the function once, outside the
    loop.
    """
    scales = [float(s) for s in np.round(rng.uniform(0.2, 3.0, size=3), 2)]
    asked = [ask.probe("models_compiles", scales)] + [
        ask.call(scales, then=(("__getitem__", (i,)), ("run", ())), allow_error=True)
        for i in range(len(scales))
    ]
    found, *ran = yield asked
    expect(
        found["ours"] and len(found["types"]) == len(scales),
        "returns one MappedEqx per scale",
        f"build_models(scales) returned {found['types'] or 'no list'}; return a list "
        "of methods.MappedEqx, one per scale.",
        self_reported=True,
    )
    for scale, got in zip(scales, _answered(asked[1:], ran), strict=True):
        want = np.log1p(np.exp(scale * np.ones(4)))
        expect(
            judge.agrees(got, want),
            f"model for scale {scale:g} applies softplus",
            f"the model for scale {scale:g} should return softplus of "
            f"{scale:g} * ones(4).",
        )
    expect(
        found["runs"] <= 1,
        "all models share at most one compile of run",
        f"running the three models compiled run {found['runs']} times: each model "
        "holds its own function object, and jit compares static functions by "
        "identity.",
        self_reported=True,
    )
