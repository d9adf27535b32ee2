"""Exercises of the chapter "Jitting methods and classes".

Checkers never clear the student's caches: they count compiles on shapes the kernel has
not seen, or count only what can be counted in any kernel (no new compile for an equal
object).
"""

import collections
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles
from jitbook.chapters import methods

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _compiles(fn, method, *args):
    """(result, compiles of the class's jitted ``method`` object) of one call of the
    student's code; their exceptions become feedback."""
    with judge.compiles_of(method) as counted:
        out = call_answer(fn, *args)
        try:
            jax.block_until_ready(out)
        except Exception as err:  # noqa: BLE001 - a failure while computing is the student's error too
            raise Wrong(f"computing the result raised {error_line(err)}") from None
    return out, counted


_sizes = itertools.count(5)


def _fresh_size() -> int:
    """A new array length at each check: a shape no earlier run compiled, so counts need
    no cleared cache."""
    return next(_sizes)


def _most_compiled(log) -> int:
    """Compiles of the function compiled most often: what "compiles once" means, eager
    helpers aside."""
    return max(collections.Counter(log.compiles).values(), default=0)


def _close(got, want) -> bool:
    return judge.agrees(got, want)


@exercise("methods.hash-config", "Poly", "self as a static argument", 2)
def _hash_config(answer):
    """A frozen dataclass compares and hashes by its fields and refuses assignment:
    @dataclasses.dataclass(frozen=True) with one field, coeffs.
    """
    expect(
        isinstance(answer, type),
        "is a class",
        f"Poly should be a class, got a {type(answer).__name__}.",
    )
    evaluate = vars(answer).get("evaluate")
    expect(
        judge.is_jitted(evaluate),
        "evaluate is jitted",
        "Poly.evaluate is not a jax.jit-wrapped function; decorate it with "
        "functools.partial(jax.jit, static_argnums=0).",
    )
    x = jnp.linspace(
        -1.0, 1.0, _fresh_size()
    )  # a shape this kernel has not compiled yet: no cache to clear
    xs = np.asarray(x, dtype=np.float64)
    poly = call_answer(answer, (1.0, 2.0))
    out, _ = _compiles(poly.evaluate, evaluate, x)
    expect(
        _close(out, 1.0 + 2.0 * xs),
        "evaluate gives the polynomial's values",
        "Poly((1.0, 2.0)).evaluate(x) should be 1 + 2x.",
    )
    try:
        poly.coeffs = (0.5,)
    except (AttributeError, TypeError):
        pass
    else:
        raise Wrong(
            "poly.coeffs = ... was accepted: a static argument must never change (jit "
            "keeps the object in "
            "its cache key). Make Poly frozen, e.g. "
            "@dataclasses.dataclass(frozen=True)."
        )
    other = call_answer(answer, (0.5, 0.0, 3.0))
    out, first = _compiles(other.evaluate, evaluate, x)
    expect(
        _close(out, 0.5 + 3.0 * xs**2),
        "a new Poly gives its own values",
        "Poly((0.5, 0.0, 3.0)).evaluate(x) returned the values of another polynomial: "
        "a stale program was "
        "reused. Compare and hash the coefficients.",
    )
    twin = call_answer(answer, (0.5, 0.0, 3.0))
    _, log = _compiles(twin.evaluate, evaluate, x)
    expect(
        log.count == 0,
        "an equal polynomial reuses the compiled code",
        "a new Poly with the same coefficients compiled evaluate "
        f"{log.count} time(s); equal objects must compare and hash equal.",
    )
    expect(
        twin == other and not (twin == poly),
        "== compares coefficients",
        "Poly objects with equal coefficients must compare equal, different ones not.",
    )
    _, log = _compiles(call_answer(answer, (0.5, 0.0, 4.0)).evaluate, evaluate, x)
    expect(
        log.count == 1,
        "other coefficients of the same length compile again (self is static)",
        "a Poly with other coefficients of the same length did not compile evaluate "
        "again, so its coefficients are traced values, not part of a static self. "
        "Keep Poly a plain frozen class (not a pytree) and jit evaluate with "
        "static_argnums=0.",
    )


def _is_equinox(cls) -> bool:
    """Whether a class is an Equinox module (a pytree by inheritance)."""
    import equinox as eqx

    return isinstance(cls, type) and issubclass(cls, eqx.Module)


@exercise("methods.pytree-trainer", "Trainer", "pytree classes", 3)
def _pytree_trainer(answer):
    """Children: weight and learning_rate (values). Metadata: activation (selects
    code). Unflatten must restore every field.
    """
    expect(
        isinstance(answer, type),
        "is a class",
        f"Trainer should be a class, got a {type(answer).__name__}.",
    )
    n = _fresh_size()  # a shape this kernel has not compiled yet: no cache to clear
    w = jnp.linspace(0.5, 2.0, n)
    x = jnp.linspace(-1.0, 1.5, n)
    lrs = (0.1, 0.3)
    trainer = call_answer(answer, w, lrs[0], "tanh")
    step = vars(answer).get("step")
    new, first = _compiles(trainer.step, step, x)
    want = np.asarray(w, np.float64) - 0.1 * methods.reference_grad(w, x, "tanh")
    expect(
        isinstance(new, answer),
        "step returns a new Trainer",
        f"step returned {type(new).__name__}; return a new Trainer with the updated "
        "weight.",
    )
    expect(
        _close(getattr(new, "weight", None), want),
        "step takes one gradient step",
        "the new weight is not one gradient step, weight - learning_rate * d/dweight "
        "sum(activation(weight * x)); "
        "if the formula is right, check that tree_unflatten restores every field (jit "
        "rebuilds self with it).",
    )
    expect(
        first.cache is not None and first.count == 1,
        "step is compiled by jax.jit",
        "step was not compiled as one program; decorate it with @jax.jit (self must "
        "then be a pytree).",
    )
    expect(
        getattr(new, "activation", None) == "tanh"
        and _close(getattr(new, "learning_rate", None), 0.1),
        "the new Trainer keeps learning_rate and activation",
        "the Trainer returned by step lost its learning_rate or activation: does "
        "tree_unflatten restore "
        "every field?",
    )
    equinox = _is_equinox(answer)
    _, log = _compiles(call_answer(answer, w, lrs[1], "tanh").step, step, x)
    expect(
        log.count == 0,
        "a new learning rate does not compile again",
        f"a new learning_rate compiled step {log.count} time(s); "
        + (
            "eqx.filter_jit treats a Python float field as static: store "
            "learning_rate as an array (jnp.asarray) so it is traced."
            if equinox
            else "make it a child (traced value), not metadata."
        ),
    )
    _, log = _compiles(call_answer(answer, w, lrs[0], "relu").step, step, x)
    expect(
        log.count == 1,
        "a new activation compiles again",
        "a new activation did not compile step again; the activation selects code, so "
        + (
            "mark the field static: activation: str = eqx.field(static=True)."
            if equinox
            else "it belongs in the static metadata (aux_data)."
        ),
    )


@exercise("methods.shared-function", "build_models", "static callables in Equinox", 1)
def _shared_function(answer):
    """jit compares static functions by identity: create the function once, outside the
    loop.
    """
    scales = [1.0, 2.0, 3.0]
    models = call_answer(answer, scales)
    expect(
        type(models) is list
        and len(models) == 3
        and all(type(m) is methods.MappedEqx for m in models),
        "returns one MappedEqx per scale",
        "build_models(scales) should return a list of methods.MappedEqx.",
    )
    ones = np.ones(4)
    for scale, model in zip(scales, models, strict=False):
        expected = np.asarray(jax.nn.softplus(scale * ones), np.float64)
        expect(
            _close(call_answer(model.run), expected),
            f"model for scale {scale} applies softplus",
            f"the model for scale {scale} should return softplus of {scale} * ones(4).",
        )
    models = call_answer(
        answer, scales
    )  # new models: one shared function compiles run at most once
    with judge.compiles_of(vars(methods.MappedEqx)["run"]) as log:
        for model in models:
            call_answer(model.run)
    expect(
        log.count <= 1,
        "all models share at most one compile of run",
        f"running the three models compiled run {log.count} times: each "
        "model holds its own "
        "function object, and jit compares static functions by identity.",
    )


@exercise("methods.closure-to-argument", "weight_grad", "closures against arguments", 2)
def _closure_to_argument(answer):
    """Differentiate with respect to the layer itself: the gradient of a module is a
    module of the same class, with the gradient of each array field in its place.
    Jit one function, once.
    """
    keys = jax.random.split(jax.random.key(7), 4)
    x = jax.random.normal(keys[3], (7,))
    layers = [methods.EqxLayer(jax.random.normal(k, (7,)), "tanh") for k in keys[:3]]
    with count_compiles() as log:
        grads = [call_answer(answer, layer, x) for layer in layers]
        jax.block_until_ready(grads)
    for layer, g in zip(layers, grads, strict=False):
        expect(
            judge.is_array(g) and g.shape == layer.weight.shape,
            "returns an array shaped like the weight",
            f"weight_grad returned {type(g).__name__}; return the gradient with "
            "respect to layer.weight, "
            "an array of the weight's shape (the .weight of the gradient module).",
        )
        w, xs = np.asarray(layer.weight, np.float64), np.asarray(x, np.float64)
        want = (1.0 - np.tanh(w * xs) ** 2) * xs
        expect(
            _close(g, want),
            "gives d layer_loss / d weight",
            "weight_grad(layer, x) is not the gradient of "
            "methods.layer_loss(layer, x) with respect to the layer's weight.",
        )
    expect(
        _most_compiled(log) <= 1,
        "three layers with new weights compile at most once",
        "three layers that differ only in their weights compiled one function "
        f"{_most_compiled(log)} "
        "times: a new closure (or a new jax.jit) per layer compiles each time and "
        "bakes the weights in "
        "as constants.",
    )
