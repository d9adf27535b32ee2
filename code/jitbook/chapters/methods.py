"""The examples of the chapter "Jitting methods and classes": Equinox modules,
functions over a state pytree, and the helpers that measure each strategy for the
decision guide. The layer classes of strategies 1 to 3 live in ``methods_layers`` and
are imported here, so ``methods.Layer`` names them as the chapter does.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles
from jitbook.chapters.methods_layers import (  # the classes of strategies 1 to 3
    ACTIVATIONS,  # noqa: F401
    ArrayMetadataLayer,  # noqa: F401
    CheckedLayer,  # noqa: F401
    DataclassLayer,  # noqa: F401
    DecoratedLayer,  # noqa: F401
    DroppingLayer,  # noqa: F401
    HashedLayer,  # noqa: F401
    HelperLayer,  # noqa: F401
    Layer,  # noqa: F401
    MutatingLayer,  # noqa: F401
    PytreeLayer,  # noqa: F401
    Settings,  # noqa: F401
    StaticLayer,  # noqa: F401
    UncheckedUnflattenLayer,  # noqa: F401
    activate,  # noqa: F401
    predict_weights,  # noqa: F401
    predict_with,  # noqa: F401
    unflatten_receives,  # noqa: F401
)
from jitbook.fresh import run_cold


# Strategy 4: Equinox modules.
class EqxLayer(eqx.Module):
    """An Equinox module is a frozen dataclass and a pytree; ``static=True`` marks
    configuration.

    Taught in Classes as pytrees, Strategy 4: Equinox modules.
    """

    weight: jax.Array
    activation: str = eqx.field(static=True)

    @eqx.filter_jit
    def predict(self, x):
        return activate(self.activation, self.weight * x)


class SignedEqx(eqx.Module):
    """The French notebook's module: an array, a static string, and a method jitted in
    the class body.

    Taught in Classes as pytrees, Methods are pytrees too.
    """

    values: jax.Array
    sign: str = eqx.field(static=True)

    def apply(self):
        return self.values if self.sign == "plus" else -self.values

    @jax.jit
    def jit_apply(self):
        return self.apply()


class MappedEqx(eqx.Module):
    """A module whose static field is a function, compared by identity like any other.

    Taught in Classes as pytrees, Static functions are compared by identity.
    """

    values: jax.Array
    fn: Callable = eqx.field(static=True)

    @jax.jit
    def run(self):
        return self.fn(self.values)


def signed_loss(model: SignedEqx, scale) -> jax.Array:
    """A loss that takes the model as an argument: differentiable in ``scale``, traced
    in the model's arrays.

    Taught in Classes as pytrees, `jit(grad(loss))` and static fields.
    """
    return jnp.sum(scale * model.apply())


@eqx.filter_jit
def eqx_sgd_step(layer: EqxLayer, learning_rate):
    """One step that shrinks the weight by ``learning_rate``: under ``filter_jit`` a
    Python float is static.

    Taught in Classes as pytrees, Strategy 4: Equinox modules.
    """
    return eqx.tree_at(lambda m: m.weight, layer, layer.weight * (1.0 - learning_rate))


class Recorded:
    """A value that records each ``__hash__`` and ``__eq__`` call made on it: what does
    jit ask of metadata?"""

    def __init__(self, value, calls: list[str]) -> None:
        self.value, self.calls = value, calls

    def __hash__(self) -> int:
        self.calls.append("hash")
        return hash(self.value)

    def __eq__(self, other) -> bool:
        self.calls.append("eq")
        return isinstance(other, Recorded) and self.value == other.value


def sum_scaled(data: jax.Array, scale) -> jax.Array:
    """A one-line computation over a dataset, with the data as an argument."""
    return jnp.sum(data * scale)


def closed_sum(data: jax.Array) -> Callable:
    """The same computation as a closure over ``data``: a new function per dataset."""

    def sum_scaled(scale):
        return jnp.sum(data * scale)

    return sum_scaled


def dataset_costs(datasets: Sequence[jax.Array]) -> list[dict]:
    """A jitted closure per dataset against one jitted function taking the data.

    Counts compiles over all the datasets, and the bytes of the first serialized
    executable.
    Taught in Jitting methods and classes, Closures against arguments.
    """
    from jax.experimental import serialize_executable

    if isinstance(datasets, jax.Array) or len(datasets) < 1:
        raise TypeError(
            "dataset_costs takes a list of arrays, e.g. [data, other_data]."
        )
    as_argument = jax.jit(sum_scaled)
    ways = {
        "closure": lambda data: (jax.jit(closed_sum(data)), (1.0,)),
        "argument": lambda data: (as_argument, (data, 1.0)),
    }
    rows = []
    for how, program in ways.items():
        with count_compiles() as log:
            for data in datasets:
                fn, args = program(data)
                jax.block_until_ready(fn(*args))
        fn, args = program(datasets[0])
        executable = fn.lower(*args).compile()
        rows.append(
            {
                "data": how,
                "datasets": len(datasets),
                "compiles": log.count_for("sum_scaled"),
                "executable bytes": len(serialize_executable.serialize(executable)[0]),
                "dataset bytes": int(datasets[0].nbytes),
            }
        )
    return rows


# Strategy 5: a state pytree and pure functions.
class LayerParams(NamedTuple):
    """The layer's arrays only; a NamedTuple is a pytree with no registration.

    Taught in Jitting methods and classes, Strategy 5: functions over a state pytree.
    """

    weight: jax.Array


@functools.partial(jax.jit, static_argnames="activation")
def layer_predict(params: LayerParams, x, *, activation: str):
    """The method as a function: state in, configuration as a static argument.

    Taught in Jitting methods and classes, Strategy 5: functions over a state pytree.
    """
    return activate(activation, params.weight * x)


@jax.jit
def layer_sgd_step(params: LayerParams, grad, learning_rate) -> LayerParams:
    """A gradient step that returns new parameters.

    Taught in Jitting methods and classes, Strategy 5: functions over a state pytree.
    """
    return params._replace(weight=params.weight - learning_rate * grad)


# Closures against arguments.
def make_loss(layer) -> Callable:
    """A loss factory: the returned function closes over ``layer``, a new function each
    call.

    Taught in Jitting methods and classes, Closures against arguments.
    """

    def loss(x):
        return jnp.sum(layer.predict(x))

    return loss


def layer_loss(layer, x) -> jax.Array:
    """The same loss with the layer as an argument, so one jitted function serves every
    layer.

    Taught in Jitting methods and classes, Closures against arguments.
    """
    return jnp.sum(layer.predict(x))


# Measuring.
def count_each(*calls: Callable, name: str | None = None) -> list[int]:
    """Run each no-argument callable in turn; return the XLA compiles each caused (only
    of ``name`` if given)."""
    counts = []
    for call in calls:
        if not callable(call):
            raise TypeError(
                "count_each takes no-argument callables (lambdas), got "
                f"{type(call).__name__}."
            )
        with count_compiles() as log:
            jax.block_until_ready(call())
        counts.append(log.count if name is None else log.count_for(name))
    return counts


def scalar_offset_counts(weight, x, values: Sequence[float]) -> list[int]:
    """Compiles of ``ArrayMetadataLayer.predict`` for each scalar offset in ``values``,
    a new array each time, held as metadata (in the key).

    Meant for a fresh process (``run_cold``): there the cache holds no key with a
    three-element offset, comparing with which would raise. Taught in Classes as
    pytrees, Pitfall: an array in the static metadata.
    """
    return count_each(
        *[
            lambda v=v: ArrayMetadataLayer(weight, jnp.asarray(v), "relu").predict(x)
            for v in values
        ],
        name="predict",
    )


def shared_cache_rows() -> list[dict]:
    """The French notebook's experiment: three instances of ``SignedEqx`` call the
    class's jitted method, ``jax.clear_caches()`` empties its cache, a new instance and
    an old one call it again. Compiles and the cache's size after each step.

    It clears JAX's caches, so it runs only in a fresh process (``run_cold``), never
    in a reader's. Taught in Classes as pytrees, One cache for all instances.
    """
    ones = jnp.ones(2)
    plus, plus2 = SignedEqx(ones, "plus"), SignedEqx(2 * ones, "plus")
    minus, late = SignedEqx(ones, "minus"), SignedEqx(3 * ones, "plus")
    size = SignedEqx.jit_apply._cache_size  # private, and may change
    rows = [{"step": "start", "compiles": 0, "cache size": size()}]
    for step, call in (
        ("plus.jit_apply()", plus.jit_apply),
        ("plus2.jit_apply()", plus2.jit_apply),
        ("minus.jit_apply()", minus.jit_apply),
        ("jax.clear_caches()", lambda: jax.clear_caches() or ones),
        ("a new instance, after clearing", late.jit_apply),
        ("plus.jit_apply() again", plus.jit_apply),
    ):
        (compiles,) = count_each(call)
        rows.append({"step": step, "compiles": compiles, "cache size": size()})
    return rows


def array_constants(jitted: Callable, *args) -> list[str]:
    """The array constants (``stablehlo.constant dense<[...]>``) baked into the program
    ``jitted`` compiles for ``args``."""
    if not hasattr(jitted, "lower"):
        raise TypeError(
            "array_constants takes a jax.jit-wrapped function, got "
            f"{type(jitted).__name__}; wrap it first: array_constants(jax.jit(f), x)."
        )
    text = jitted.lower(*args).as_text()
    return [
        line.split("=", 1)[1].strip()
        for line in text.splitlines()
        if "stablehlo.constant dense<[" in line
    ]


def reference_predict(weight, x, activation: str) -> np.ndarray:
    """The layer's output in NumPy float64: the independent check the measurements
    compare to."""
    z = np.asarray(weight, dtype=np.float64) * np.asarray(x, dtype=np.float64)
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"unknown activation {activation!r}; use one of {sorted(ACTIVATIONS)}."
        )
    return np.maximum(z, 0.0) if activation == "relu" else np.tanh(z)


def reference_grad(weight, x, activation: str) -> np.ndarray:
    """d/dweight of sum(predict(x)), in NumPy float64."""
    w, xs = np.asarray(weight, dtype=np.float64), np.asarray(x, dtype=np.float64)
    slope = (
        (w * xs > 0).astype(np.float64)
        if activation == "relu"
        else 1.0 - np.tanh(w * xs) ** 2
    )
    return slope * xs


@dataclasses.dataclass(frozen=True)
class Strategy:
    """How one strategy builds a layer, calls its jitted predict, and gives it new
    weights."""

    name: str
    build: Callable  # (weight, activation) -> layer
    # (layer, x, activation) -> output, through the strategy's jitted code
    call: Callable
    # (layer, new_weight) -> layer: in place for mutable classes, a new object otherwise
    update: Callable


def _jit_bound_once(layer: Layer, x, activation: str):
    """Strategy 1 as one writes it: ``jax.jit(layer.predict)`` made once per layer, then
    reused."""
    if "fast_predict" not in vars(layer):
        layer.fast_predict = jax.jit(layer.predict)
    return layer.fast_predict(x)


def _set_weight(layer, weight):
    layer.weight = weight
    return layer


def _hashable(weight) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(weight).ravel())


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("1. jax.jit(layer.predict)", Layer, _jit_bound_once, _set_weight),
    Strategy(
        "2. self static, identity hash",
        StaticLayer,
        lambda l, x, a: l.predict(x),
        _set_weight,
    ),
    Strategy(
        "2. self static, frozen, by value",
        lambda w, a: HashedLayer(_hashable(w), a),
        lambda l, x, a: l.predict(x),
        lambda l, w: dataclasses.replace(l, weight=_hashable(w)),
    ),
    Strategy(
        "3. pytree class",
        PytreeLayer,
        lambda l, x, a: l.predict(x),
        lambda l, w: PytreeLayer(w, l.activation),
    ),
    Strategy(
        "3. register_dataclass",
        DataclassLayer,
        lambda l, x, a: l.predict(x),
        lambda l, w: dataclasses.replace(l, weight=w),
    ),
    Strategy(
        "4. Equinox module",
        EqxLayer,
        lambda l, x, a: l.predict(x),
        lambda l, w: eqx.tree_at(lambda m: m.weight, l, w),
    ),
    Strategy(
        "5. NamedTuple + functions",
        lambda w, a: LayerParams(w),
        lambda p, x, a: layer_predict(p, x, activation=a),
        lambda p, w: p._replace(weight=w),
    ),
    # Last, so the strategies above keep their places; sort by number to read in order.
    Strategy(
        "1b. method calls a jitted function",
        HelperLayer,
        lambda l, x, a: l.predict(x),
        _set_weight,
    ),
)


def _outcome(fn: Callable, expected: np.ndarray) -> str:
    """'yes' if ``fn()`` matches ``expected``, 'no: stale' if it runs but differs, 'no:
    <Error>' if it raises."""
    try:
        got = np.asarray(jax.block_until_ready(fn()), dtype=np.float64)
    # a strategy that cannot do it gets a row saying why
    except Exception as err:  # noqa: BLE001
        return f"no: {type(err).__name__}"
    return "yes" if np.allclose(got, expected, atol=1e-5) else "no: stale"


def evaluate(strategy: Strategy, size: int = 3) -> dict:
    """Measure one strategy: right after new weights, compiles per new layer / new
    activation, grad, vmap, scan.

    Runs in a fresh process (``run_cold``), so the compile counts do not depend on what
    ran before and the caller's caches are left alone.

    Taught in Jitting methods and classes, Which strategy for my class?.
    """
    _check_strategy(strategy, "evaluate")
    return run_cold(_evaluate, strategy.name, size)


def _check_strategy(strategy, caller: str) -> None:
    """One of ``STRATEGIES`` (a fresh process finds it again by its name)."""
    if not isinstance(strategy, Strategy) or strategy not in STRATEGIES:
        raise TypeError(
            f"{caller} takes a methods.Strategy from methods.STRATEGIES, got "
            f"{type(strategy).__name__}"
            f" {getattr(strategy, 'name', strategy)!r}."
        )


def _named(name: str) -> Strategy:
    (strategy,) = [s for s in STRATEGIES if s.name == name]
    return strategy


def _evaluate(name: str, size: int) -> dict:
    """``evaluate`` in a process whose caches are empty."""
    strategy = _named(name)
    rng = np.random.default_rng(
        size
    )  # NumPy-made inputs: no op-by-op compiles outside the counted calls
    w1, w2, w3, x = (
        jnp.asarray(rng.normal(size=size), dtype=jnp.float32) for _ in range(4)
    )
    batch = jnp.asarray(np.stack([w1, w2]))

    layer = strategy.build(w1, "relu")
    strategy.call(layer, x, "relu")
    layer = strategy.update(layer, w2)
    after_update = _outcome(
        lambda: strategy.call(layer, x, "relu"), reference_predict(w2, x, "relu")
    )

    new_layer, new_config = strategy.build(w3, "relu"), strategy.build(w1, "tanh")
    per_layer, per_config = count_each(
        lambda: strategy.call(new_layer, x, "relu"),
        lambda: strategy.call(new_config, x, "tanh"),
    )

    def loss(lay):
        return jnp.sum(strategy.call(lay, x, "relu"))

    def body(lay, _):
        return strategy.update(lay, lay.weight * 0.5), strategy.call(lay, x, "relu")

    # Each transformation is jitted as a whole, as a training loop would be: one
    # compile, not one per op.
    grads = _outcome(
        lambda: jax.jit(jax.grad(loss))(strategy.build(w1, "relu")).weight,
        reference_grad(w1, x, "relu"),
    )
    vmapped = _outcome(
        lambda: jax.jit(jax.vmap(lambda lay: strategy.call(lay, x, "relu")))(
            strategy.build(batch, "relu")
        ),
        np.stack([reference_predict(w, x, "relu") for w in (w1, w2)]),
    )
    scanned = _outcome(
        lambda: jax.jit(lambda lay: jax.lax.scan(body, lay, length=2)[1])(
            strategy.build(w1, "relu")
        ),
        np.stack([reference_predict(w1 * s, x, "relu") for s in (1.0, 0.5)]),
    )
    return {
        "strategy": strategy.name,
        "right after new weights": after_update,
        "compiles: new layer": per_layer,
        "compiles: new activation": per_config,
        "jit(grad) w.r.t. layer": grads,
        "vmap over layers": vmapped,
        "scan carry": scanned,
    }


# --- explorer

EVENTS = ("new weights", "new layer", "new activation")


def event_grid(
    strategies: Sequence[Strategy] = STRATEGIES, size: int = 3
) -> list[dict]:
    """For each strategy and event (new weights, new layer, new activation): compiles,
    and whether the result is right.

    Each strategy starts from empty caches, in a fresh process of its own
    (``run_cold``), with a layer already called once.
    Taught in Jitting methods and classes, Explore it.
    """
    for strategy in strategies:
        _check_strategy(strategy, "event_grid")
    return [row for s in strategies for row in run_cold(_events, s.name, size)]


def _events(name: str, size: int) -> list[dict]:
    """One strategy's rows of ``event_grid``, in a process whose caches are empty."""
    strategy = _named(name)
    rng = np.random.default_rng(size)
    w1, w2, w3, x = (
        jnp.asarray(rng.normal(size=size), dtype=jnp.float32) for _ in range(4)
    )
    rows = []
    layer = strategy.build(w1, "relu")
    strategy.call(layer, x, "relu")
    changed = {
        "new weights": (strategy.update(layer, w2), "relu", w2),
        "new layer": (strategy.build(w3, "relu"), "relu", w3),
        "new activation": (strategy.build(w1, "tanh"), "tanh", w1),
    }
    for event in EVENTS:
        new, activation, weight = changed[event]
        with count_compiles() as log:
            outcome = _outcome(
                functools.partial(strategy.call, new, x, activation),
                reference_predict(weight, x, activation),
            )
        rows.append(
            {
                "strategy": strategy.name,
                "event": event,
                "compiles": log.count,
                "right result": outcome,
            }
        )
    return rows
