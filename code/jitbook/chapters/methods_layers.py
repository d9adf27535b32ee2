"""The layer classes of the chapter "Jitting methods and classes", strategies 1 to 3
and their pitfalls: bound methods, a static ``self``, pytree classes written by hand or
registered as dataclasses, and what goes wrong in each.

Every class holds the same two things, so the strategies compare like for like:
``weight``, an array that training changes, and ``activation``, a name that selects code
(configuration). ``methods`` imports them all; read them there.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.tree_util import register_pytree_node_class

ACTIVATIONS: dict[str, Callable] = {"relu": jax.nn.relu, "tanh": jnp.tanh}


def activate(name: str, z: jax.Array) -> jax.Array:
    """Apply the activation called ``name``; a Python lookup, so ``name`` must be known
    when tracing.

    Taught in Jitting methods and classes, The problem.
    """
    if name not in ACTIVATIONS:
        raise ValueError(
            f"unknown activation {name!r}; use one of {sorted(ACTIVATIONS)}."
        )
    return ACTIVATIONS[name](z)


# The problem: jax.jit on a method of a plain class.
class DecoratedLayer:
    """A plain class with ``@jax.jit`` on its method: ``self`` becomes an argument jit
    cannot read.

    Taught in Jitting methods and classes, The problem: `@jax.jit` on a method.
    """

    def __init__(self, weight, activation: str) -> None:
        self.weight = weight
        self.activation = activation

    @jax.jit
    def predict(self, x):
        return activate(self.activation, self.weight * x)


# Strategy 1: jit the bound method.
class Layer:
    """A plain, mutable Python class, as most Python code writes one.

    Taught in Jitting methods and classes, Strategy 1: jit the bound method.
    """

    def __init__(self, weight, activation: str) -> None:
        self.weight = weight
        self.activation = activation

    def predict(self, x):
        return activate(self.activation, jnp.asarray(self.weight) * x)


# Strategy 1, done right: the method calls a module-level jitted function (JAX's FAQ).
@functools.partial(jax.jit, static_argnames="activation")
def predict_weights(weight, x, activation: str):
    """The layer's computation as a jitted function of arrays and one static name.

    Taught in Jitting methods and classes, A jitted function the method calls.
    """
    return activate(activation, weight * x)


class HelperLayer(Layer):
    """A plain, mutable class whose method passes its attributes to ``predict_weights``.

    Taught in Jitting methods and classes, A jitted function the method calls.
    """

    def predict(self, x):
        return predict_weights(self.weight, x, activation=self.activation)


# Strategy 2: self as a static argument.
class StaticLayer(Layer):
    """``self`` static, with the default ``__hash__``: the hash is the object's
    identity.

    Taught in Jitting methods and classes, Strategy 2: `self` as a static argument.
    """

    @functools.partial(jax.jit, static_argnums=0)
    def predict(self, x):
        return activate(self.activation, jnp.asarray(self.weight) * x)


@dataclasses.dataclass(frozen=True)
class HashedLayer:
    """``self`` static and frozen: hashed and compared by its fields, so equal layers
    share a compile.

    A static argument must never change (JAX's FAQ); to change a layer, build a new one.
    Taught in Jitting methods and classes, Strategy 2: `self` as a static argument.
    """

    weight: tuple
    activation: str

    @functools.partial(jax.jit, static_argnums=0)
    def predict(self, x):
        return activate(self.activation, jnp.asarray(self.weight) * x)


# Strategy 3: the class is a pytree.
@register_pytree_node_class
class PytreeLayer:
    """Arrays are the pytree's children (traced); the configuration its static metadata.

    Taught in Classes as pytrees, Strategy 3: the class as a pytree.
    """

    def __init__(self, weight, activation: str) -> None:
        self.weight = weight
        self.activation = activation

    def tree_flatten(self):
        return (self.weight,), (self.activation,)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        return cls(*children, *aux_data)

    @jax.jit
    def predict(self, x):
        return activate(self.activation, self.weight * x)

    @jax.jit
    def sgd_step(self, grad, learning_rate):
        """A method that changes the weights returns a new layer instead of assigning to
        ``self``."""
        return PytreeLayer(self.weight - learning_rate * grad, self.activation)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DataclassLayer:
    """The same pytree from a frozen dataclass: fields marked ``static`` become
    metadata.

    Taught in Classes as pytrees, Strategy 3: the class as a pytree.
    """

    weight: jax.Array
    activation: str = jax.tree.static()  # older JAX: dataclasses.field(metadata=...)

    @jax.jit
    def predict(self, x):
        return activate(self.activation, self.weight * x)

    @jax.jit
    def sgd_step(self, grad, learning_rate):
        return dataclasses.replace(self, weight=self.weight - learning_rate * grad)


# Strategy 3, done wrong: the three bugs of the 2023 tutorial's pytree class, one class
# each.
@register_pytree_node_class
class ArrayMetadataLayer:
    """Bug: an array (``offset``) in the metadata, which must be hashable and immutable.

    Taught in Classes as pytrees, Pitfall: an array in the static metadata.
    """

    def __init__(self, weight, offset, activation: str) -> None:
        self.weight = weight
        self.offset = offset
        self.activation = activation

    def tree_flatten(self):
        return (self.weight,), (self.offset, self.activation)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        offset, activation = aux_data
        return cls(children[0], offset, activation)

    @jax.jit
    def predict(self, x):
        return activate(self.activation, self.weight * x + self.offset)


@register_pytree_node_class
class DroppingLayer:
    """Bug: ``tree_unflatten`` rebuilds through ``__init__`` and forgets the trained
    ``bias``.

    Taught in Classes as pytrees, Pitfall: an unflatten that drops a field.
    """

    def __init__(self, weight, activation: str) -> None:
        self.weight = weight
        self.activation = activation
        self.bias = jnp.zeros_like(weight)  # initial value; training sets it later

    def tree_flatten(self):
        return (self.weight, self.bias), (self.activation,)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        weight, bias = children
        return cls(weight, *aux_data)  # bias is dropped: the new object keeps zeros

    @jax.jit
    def predict(self, x):
        return activate(self.activation, self.weight * x + self.bias)


@register_pytree_node_class
class MutatingLayer(PytreeLayer):
    """Bug: a jitted method assigns to ``self``, which inside jit is a copy rebuilt from
    tracers.

    Taught in Classes as pytrees, Pitfall: a method that assigns to `self`.
    """

    @jax.jit
    def sgd_step(self, grad, learning_rate):
        self.weight = self.weight - learning_rate * grad


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Settings:
    """Configuration only, registered with ``register_static``: a pytree with no leaves.

    Taught in Classes as pytrees, Static classes with register_static.
    """

    activation: str


@jax.jit
def predict_with(settings: Settings, weight, x):
    """A jitted function taking ``Settings`` as an ordinary argument: no static_argnums.

    Taught in Classes as pytrees, Static classes with register_static.
    """
    return activate(settings.activation, weight * x)


@register_pytree_node_class
class CheckedLayer(PytreeLayer):
    """``__init__`` converts ``weight`` with ``jnp.asarray``; tree_unflatten calls it.

    Taught in Classes as pytrees, What tree_unflatten receives.
    """

    def __init__(self, weight, activation: str) -> None:
        super().__init__(jnp.asarray(weight), activation)


@register_pytree_node_class
class UncheckedUnflattenLayer(CheckedLayer):
    """The same class, rebuilt without ``__init__``: checks run only for its users.

    Taught in Classes as pytrees, What tree_unflatten receives.
    """

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        layer = object.__new__(cls)
        (layer.weight,), (layer.activation,) = children, aux_data
        return layer


def unflatten_receives(layer: PytreeLayer) -> list[dict]:
    """The types of ``weight`` that ``tree_unflatten`` passes on, per transformation.

    Taught in Classes as pytrees, What tree_unflatten receives.
    """
    if type(layer).tree_unflatten.__func__ is not PytreeLayer.tree_unflatten.__func__:
        raise TypeError("unflatten_receives takes a methods.PytreeLayer.")
    seen: list[str] = []

    @register_pytree_node_class
    class Recording(PytreeLayer):
        @classmethod
        def tree_unflatten(cls, aux_data, children):
            seen.append(type(children[0]).__name__)
            return super().tree_unflatten(aux_data, children)

    recording = Recording(layer.weight, layer.activation)
    transformations = {
        "jax.jit(f) for an array result": lambda: jax.jit(lambda t: t.weight)(
            recording
        ),
        "jax.jit(f) returning the layer": lambda: jax.jit(lambda t: t)(recording),
        "jax.vmap(f) returning the layer": lambda: jax.vmap(lambda t: t)(recording),
        "jax.jacobian(f) of the layer": lambda: jax.jacobian(lambda t: t)(recording),
        "jax.tree.map(lambda _: None, layer)": lambda: jax.tree.map(
            lambda _: None, recording
        ),
    }
    rows = []
    for name, run in transformations.items():
        seen.clear()
        run()
        rows.append(
            {"call": name, "weight passed to __init__": ", ".join(sorted(set(seen)))}
        )
    return rows
