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
