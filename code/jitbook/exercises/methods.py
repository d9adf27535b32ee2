"""Exercises of the chapter "Jitting methods and classes".

Values are what the student's classes compute on inputs drawn per student (built and
called through ``ask.call(..., then=...)``); whether a new object compiles again is
counted by a probe beside the student's code, at shapes no earlier probe compiled, so
nothing clears the student's caches: those rows are self-reported, and so are the
gradients of closure-to-argument, which only a probe can ask for (a request cannot
pass an Equinox layer).
"""

import numpy as np

from jitbook.chapters import methods
from jitbook.evidence import read

from . import Wrong, _failed_message, ask, exercise, expect, judge


def _answered(requests: list[dict], got: list) -> list:
    """``got``, or the plain message of the first request that failed (in order)."""
    for request, item in zip(requests, got, strict=True):
        if isinstance(item, read.Failed):
            raise Wrong(_failed_message(request, item), details=item.message)
    return got


def _class(found: dict, name: str) -> None:
    expect(
        found["is_class"],
        "is a class",
        f"{name} should be a class (`class {name}: ...`), not a function or a value.",
    )


def _coefficients(rng, size: int) -> tuple:
    return tuple(float(c) for c in np.round(rng.uniform(-2, 2, size=size), 2))


@exercise("methods.hash-config", "Poly", "self as a static argument", 2)
def _hash_config(rng):
    """A frozen dataclass compares and hashes by its fields and refuses assignment:
    @dataclasses.dataclass(frozen=True) with one field, coeffs.
    """
    size = int(rng.integers(2, 5))
    coeffs, other = _coefficients(rng, size), _coefficients(rng, size)
    x = np.linspace(-1.0, 1.0, int(rng.integers(5, 40))).astype(np.float32)
    evaluate, hashed = (("evaluate", (x,)),), (("__hash__", ()),)
    asked = [
        ask.probe("poly_compiles", coeffs, other, x),
        ask.call(coeffs, then=evaluate, allow_error=True),
        ask.call(other, then=evaluate, allow_error=True),
        ask.call(coeffs, then=hashed, allow_error=True),
        ask.call(coeffs, then=hashed, allow_error=True),
        ask.call(other, then=hashed, allow_error=True),
        ask.call(coeffs, then=(("__setattr__", ("coeffs", (0.5,))),), allow_error=True),
    ]
    found, *got = yield asked
    _class(found, "Poly")
    values, others, hash_a, hash_twin, hash_b = _answered(asked[1:6], got[:5])
    xs = x.astype(np.float64)
    expect(
        judge.agrees(values, np.polyval(coeffs[::-1], xs), atol=1e-4),
        "evaluate gives the polynomial's values",
        f"Poly({coeffs}).evaluate(x) should be coeffs[0] + coeffs[1] * x + ...",
    )
    expect(
        judge.agrees(others, np.polyval(other[::-1], xs), atol=1e-4),
        "a new Poly gives its own values",
        f"Poly({other}).evaluate(x), called after Poly({coeffs}), returned the values "
        "of another polynomial: a stale program was reused. Compare and hash the "
        "coefficients.",
    )
    expect(
        type(hash_a) is int and hash_a == hash_twin and hash_a != hash_b,
        "equal polynomials hash equal, others not",
        "two Poly objects with the same coefficients must have the same hash (and "
        "others a different one): hash the coefficients, e.g. with a frozen dataclass.",
    )
    expect(
        isinstance(got[5], read.Failed),
        "assigning to coeffs raises",
        "poly.coeffs = ... was accepted: a static argument must never change (jit "
        "keeps the object in its cache key). Make Poly frozen, e.g. "
        "@dataclasses.dataclass(frozen=True).",
    )
    expect(
        found["jitted"],
        "evaluate is jitted",
        "Poly.evaluate is not a jax.jit-wrapped function; decorate it with "
        "functools.partial(jax.jit, static_argnums=0).",
        self_reported=True,
    )
    expect(
        found["equal"] and found["unequal"],
        "== compares coefficients",
        "Poly objects with equal coefficients must compare equal, different ones not.",
        self_reported=True,
    )
    expect(
        found["equal_compiles"] == 0,
        "an equal polynomial reuses the compiled code",
        "a new Poly with the same coefficients compiled evaluate "
        f"{found['equal_compiles']} time(s); equal objects must compare and hash "
        "equal.",
        self_reported=True,
    )
    expect(
        found["other_compiles"] >= 1,
        "other coefficients of the same length compile again (self is static)",
        "a Poly with other coefficients of the same length did not compile evaluate "
        "again, so its coefficients are traced values, not part of a static self. "
        "Keep Poly a plain frozen class (not a pytree) and jit evaluate with "
        "static_argnums=0.",
        self_reported=True,
    )


@exercise("methods.pytree-trainer", "Trainer", "pytree classes", 3)
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


@exercise("methods.shared-function", "build_models", "static callables in Equinox", 1)
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


def _kind(value) -> str:
    """The type a value came back as, as the student wrote it."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return getattr(value, "type_name", type(value).__name__)


@exercise("methods.closure-to-argument", "weight_grad", "closures against arguments", 2)
def _closure_to_argument(rng):
    """Differentiate with respect to the layer itself: the gradient of a module is a
    module of the same class, with the gradient of each array field in its place.
    Jit one function, once.
    """
    size = int(rng.integers(4, 40))
    weights = [rng.normal(size=size).astype(np.float32) for _ in range(3)]
    x = rng.normal(size=size).astype(np.float32)
    activation = ("tanh", "relu")[int(rng.integers(2))]
    (found,) = yield [ask.probe("layer_grads", weights, x, activation)]
    grads = found["grads"]
    wrong = [g for g in grads if not (isinstance(g, np.ndarray) and g.shape == (size,))]
    expect(
        not wrong,
        "returns arrays shaped like the weight",
        f"weight_grad returned {_kind(wrong[0]) if wrong else ''}; return the "
        "gradient with respect to layer.weight, an array of the weight's shape (the "
        ".weight of the gradient module).",
        self_reported=True,
    )
    right = [
        judge.agrees(g, methods.reference_grad(w, x, activation), atol=1e-5)
        for w, g in zip(weights, grads, strict=True)
    ]
    expect(
        all(right),
        f"gives d layer_loss / d weight for three {activation} layers",
        "weight_grad(layer, x) is not the gradient of methods.layer_loss(layer, x) "
        "with respect to the layer's weight.",
        self_reported=True,
    )
    expect(
        found["most_compiles"] <= 1,
        "three layers with new weights compile at most once",
        "three layers that differ only in their weights compiled one function "
        f"{found['most_compiles']} times: a new closure (or a new jax.jit) per layer "
        "compiles each time and bakes the weights in as constants.",
        self_reported=True,
    )
