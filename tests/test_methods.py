"""The claims of the chapter "Jitting methods and classes", asserted on the installed JAX and Equinox,
and its exercises' wrong answers."""

import dataclasses
import gc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import error_line, raised
from jitbook.chapters import methods
from jitbook.chapters.methods import count_each
from jitbook.exercises import check

WEIGHT = jnp.array([1.0, -2.0, 0.5])
NEW_WEIGHT = jnp.array([-1.0, 2.0, 0.5])
X = jnp.array([2.0, 1.0, -4.0])


@pytest.fixture(autouse=True)
def fresh_caches():
    """Compile counts must not depend on which test ran before."""
    jax.clear_caches()


def ref(weight, activation="relu"):
    return methods.reference_predict(weight, X, activation)


# The helpers.
def test_reference_is_an_independent_float64_computation():
    assert ref(WEIGHT).dtype == np.float64
    np.testing.assert_allclose(ref(WEIGHT), [2.0, 0.0, 0.0])
    np.testing.assert_allclose(ref(WEIGHT, "tanh"), np.tanh([2.0, -2.0, -2.0]))
    np.testing.assert_allclose(
        methods.reference_grad(WEIGHT, X, "relu"), [2.0, 0.0, 0.0]
    )
    eps = 1e-6  # finite differences check the tanh gradient
    w = np.asarray(WEIGHT, np.float64)
    numeric = [
        (
            np.tanh((w + eps * e) * np.asarray(X)).sum()
            - np.tanh((w - eps * e) * np.asarray(X)).sum()
        )
        / (2 * eps)
        for e in np.eye(3)
    ]
    np.testing.assert_allclose(
        methods.reference_grad(WEIGHT, X, "tanh"), numeric, atol=1e-6
    )


def test_bad_inputs_get_clear_errors():
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        methods.activate("gelu", X)
    with pytest.raises(ValueError, match="unknown activation"):
        methods.reference_predict(WEIGHT, X, "gelu")
    with pytest.raises(TypeError, match="raised takes the function first"):
        raised(42)
    with pytest.raises(TypeError, match="takes an exception"):
        error_line("oops")
    with pytest.raises(TypeError, match="no-argument callables"):
        count_each(1)
    with pytest.raises(TypeError, match="jax.jit-wrapped function"):
        methods.array_constants(methods.make_loss, X)
    with pytest.raises(TypeError, match="methods.Strategy"):
        methods.evaluate("pytree")


def test_raised_and_error_line():
    assert raised(lambda: 1) is None and error_line(None) == "no error"
    err = raised(lambda: 1 / 0)
    assert (
        isinstance(err, ZeroDivisionError)
        and error_line(err) == "ZeroDivisionError: division by zero"
    )


def test_error_line_goes_on_after_a_colon_and_masks_addresses():
    err = ValueError(
        "Could not hash <object at 0x7f3a2b1c9d10>. The error was:\n\nTypeError: unhashable\nmore"
    )
    assert (
        error_line(err)
        == "ValueError: Could not hash <object at 0x...>. The error was: TypeError: unhashable"
    )


def test_count_each_counts_compiles_per_call_and_by_name():
    def twice(v):
        return v * 2.0

    f = jax.jit(twice)
    longer = jnp.ones(5)
    assert count_each(lambda: f(X), lambda: f(X), lambda: f(longer)) == [1, 0, 1]
    assert count_each(lambda: f(jnp.ones(7)), name="twice") == [1]

    def other(v):
        return v + 1.0

    jax.jit(other)(X)  # traced once in this process, so its name can be counted
    assert count_each(lambda: f(jnp.ones(9)), name="other") == [0]
    with pytest.raises(ValueError, match="check the spelling"):
        count_each(lambda: f(jnp.ones(11)), name="othre")


# The problem.
@pytest.mark.claim("sec-methods", "clm-methods-self-not-array")
def test_jit_on_a_method_of_a_plain_class_raises_type_error_naming_self():
    err = raised(methods.DecoratedLayer(WEIGHT, "relu").predict, X)
    assert isinstance(err, TypeError)
    assert "path self" in str(err) and "DecoratedLayer" in str(err)


# Strategy 1.
@pytest.mark.claim("sec-methods-bound", "clm-methods-bound-stale")
def test_jitted_bound_method_goes_stale_after_mutation():
    layer = methods.Layer(WEIGHT, "relu")
    fast = jax.jit(layer.predict)
    before = fast(X)
    layer.weight = NEW_WEIGHT
    assert count_each(lambda: fast(X)) == [0]  # the program it already has
    after = fast(X)
    np.testing.assert_allclose(after, before)
    assert not np.allclose(after, ref(NEW_WEIGHT))
    np.testing.assert_allclose(layer.predict(X), ref(NEW_WEIGHT))  # without jit: right


@pytest.mark.claim("sec-methods-bound", "clm-methods-rejit-equal")
def test_rejitting_the_bound_method_is_stale_while_the_first_wrapper_lives():
    layer = methods.Layer(WEIGHT, "relu")
    # the first wrapper lives in a list, not a local: a passing assert's report snapshots
    # the frame's locals (pytest's assertion_pass hook), and a snapshot would keep it alive
    first = [jax.jit(layer.predict)]
    before = first[0](X)
    layer.weight = NEW_WEIGHT
    assert layer.predict is not layer.predict and layer.predict == layer.predict
    from jitbook.cache import count_body_runs, count_compiles, count_dispatch_misses

    with (
        count_dispatch_misses() as dispatch,
        count_compiles() as log,
        count_body_runs(methods.Layer.predict) as runs,
    ):
        again = jax.jit(layer.predict)(X)
    np.testing.assert_allclose(again, before)  # a new wrapper, the old result
    # the dispatch cache goes by identity: a new bound method misses it; the tracing cache
    # goes by equality: it finds the old trace and program, so nothing traces or compiles
    assert dispatch.count_for("predict") == 1
    assert (runs.count_for(methods.Layer.predict), log.count) == (0, 0)
    first.clear()
    gc.collect()
    np.testing.assert_allclose(jax.jit(layer.predict)(X), ref(NEW_WEIGHT))
    assert count_each(*[lambda: jax.jit(layer.predict)(X)] * 3) == [1, 1, 1]


# Strategy 2.
@pytest.mark.claim("sec-methods-static-self", "clm-methods-static-identity")
def test_static_self_with_identity_hash_goes_stale():
    layer = methods.StaticLayer(WEIGHT, "relu")
    before = layer.predict(X)
    layer.activation = "tanh"
    np.testing.assert_allclose(layer.predict(X), before)
    assert not np.allclose(before, ref(WEIGHT, "tanh"))


@pytest.mark.claim("sec-methods-static-self", "clm-methods-hashed-self-compiles")
def test_hashed_static_self_is_right_but_compiles_per_configuration():
    hashed = methods.HashedLayer((1.0, -2.0, 0.5), "relu")
    counts = count_each(
        lambda: hashed.predict(X),
        lambda: methods.HashedLayer((1.0, -2.0, 0.5), "relu").predict(X),
        lambda: methods.HashedLayer((1.0, -2.0, 0.75), "relu").predict(X),
        lambda: methods.HashedLayer((1.0, -2.0, 0.5), "tanh").predict(X),
    )
    assert counts == [1, 0, 1, 1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        hashed.activation = "tanh"
    as_tanh = dataclasses.replace(hashed, activation="tanh")
    np.testing.assert_allclose(as_tanh.predict(X), ref(WEIGHT, "tanh"), atol=1e-6)


@pytest.mark.claim("sec-methods-static-self", "clm-methods-arrays-not-hashable")
def test_hashing_an_array_attribute_raises_value_error_from_type_error():
    err = raised(methods.HashedLayer(WEIGHT, "relu").predict, X)
    assert isinstance(err, ValueError)
    assert str(err).startswith("Non-hashable static arguments are not supported")
    assert "TypeError: unhashable type" in str(err).strip().splitlines()[-1]


# Strategy 3.
@pytest.mark.claim("sec-pytrees", "clm-methods-pytree-per-activation")
@pytest.mark.parametrize(
    "cls", [methods.PytreeLayer, methods.DataclassLayer, methods.EqxLayer]
)
def test_pytree_layers_compile_per_activation_not_per_instance(cls):
    counts = count_each(
        lambda: cls(WEIGHT, "relu").predict(X),
        lambda: cls(NEW_WEIGHT, "relu").predict(X),
        lambda: cls(WEIGHT, "tanh").predict(X),
    )
    assert counts == [1, 0, 1]
    np.testing.assert_allclose(cls(NEW_WEIGHT, "relu").predict(X), ref(NEW_WEIGHT))
    np.testing.assert_allclose(
        cls(WEIGHT, "tanh").predict(X), ref(WEIGHT, "tanh"), atol=1e-6
    )


def _roundtrip(obj):
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    return jax.tree_util.tree_unflatten(treedef, leaves)


@pytest.mark.claim("sec-pytrees", "clm-methods-round-trip")
@pytest.mark.parametrize(
    "obj",
    [
        methods.PytreeLayer(WEIGHT, "relu"),
        methods.DataclassLayer(WEIGHT, "relu"),
        methods.EqxLayer(WEIGHT, "relu"),
        methods.MutatingLayer(WEIGHT, "tanh"),
        methods.ArrayMetadataLayer(WEIGHT, jnp.zeros(3), "relu"),
        methods.SignedEqx(WEIGHT, "plus"),
        methods.LayerParams(WEIGHT),
        methods.MappedEqx(WEIGHT, jnp.tanh),
        methods.CheckedLayer(WEIGHT, "relu"),
        methods.UncheckedUnflattenLayer(WEIGHT, "relu"),
    ],
    ids=lambda o: type(o).__name__,
)
def test_flatten_unflatten_round_trip_keeps_every_field(obj):
    back = _roundtrip(obj)
    assert type(back) is type(obj)
    for name, value in (
        vars(obj).items() if hasattr(obj, "__dict__") else obj._asdict().items()
    ):
        np.testing.assert_array_equal(
            np.asarray(getattr(back, name)), np.asarray(value)
        )


@pytest.mark.claim("sec-pytrees", "clm-methods-grad-is-a-layer")
def test_grad_with_respect_to_a_pytree_layer_is_a_layer():
    g = jax.grad(lambda lay: jnp.sum(lay.predict(X)))(
        methods.PytreeLayer(WEIGHT, "relu")
    )
    assert type(g) is methods.PytreeLayer
    np.testing.assert_allclose(g.weight, methods.reference_grad(WEIGHT, X, "relu"))


@pytest.mark.claim("sec-pytrees", "clm-methods-register-dataclass")
def test_register_dataclass_puts_static_fields_in_the_treedef():
    layer = methods.DataclassLayer(WEIGHT, "relu")
    assert "relu" in str(jax.tree_util.tree_structure(layer))
    assert len(jax.tree_util.tree_leaves(layer)) == 1
    new = layer.sgd_step(jnp.ones(3), 0.1)
    np.testing.assert_allclose(new.weight, np.asarray(WEIGHT) - 0.1)
    np.testing.assert_allclose(layer.weight, WEIGHT)


@pytest.mark.claim("sec-methods-metadata", "clm-methods-array-metadata-raises")
def test_array_in_metadata_works_once_then_raises_for_an_equal_new_array():
    offset = jnp.array([0.5, 0.5, 0.5])
    assert (
        raised(lambda: methods.ArrayMetadataLayer(WEIGHT, offset, "relu").predict(X))
        is None
    )
    assert (
        raised(lambda: methods.ArrayMetadataLayer(WEIGHT, offset, "relu").predict(X))
        is None
    )
    err = raised(
        lambda: methods.ArrayMetadataLayer(WEIGHT, offset + 0, "relu").predict(X)
    )
    assert isinstance(err, ValueError) and "metadata fields" in str(err)
    assert isinstance(err.__cause__, ValueError) and "truth value of an array" in str(
        err.__cause__
    )
    scalar = raised(
        lambda: methods.ArrayMetadataLayer(WEIGHT, jnp.asarray(0.5), "relu").predict(X)
    )
    assert isinstance(scalar, ValueError) and "metadata fields" in str(scalar)


@pytest.mark.claim("sec-methods-metadata", "clm-methods-scalar-metadata-per-value")
def test_scalar_array_in_metadata_compiles_once_per_value():
    counts = count_each(
        *[
            lambda v=v: methods.ArrayMetadataLayer(
                WEIGHT, jnp.asarray(v), "relu"
            ).predict(X)
            for v in (0.5, 0.5, 0.25)
        ],
        name="predict",
    )
    assert counts == [1, 0, 1]
    layer = methods.ArrayMetadataLayer(WEIGHT, jnp.asarray(0.25), "relu")
    assert (
        "dense<2.500000e-01>"
        in methods.ArrayMetadataLayer.predict.lower(layer, X).as_text()
    )


@pytest.mark.claim("sec-methods-unflatten", "clm-methods-unflatten-drops-field")
def test_unflatten_that_drops_a_field_gives_a_silently_wrong_result(measured):
    layer = methods.DroppingLayer(WEIGHT, "relu")
    layer.bias = jnp.ones(3)
    with jax.disable_jit():
        eager = layer.predict(X)
    measured("the bias after a flatten and unflatten", str(_roundtrip(layer).bias))
    np.testing.assert_allclose(
        eager, np.maximum(np.asarray(WEIGHT) * np.asarray(X) + 1.0, 0.0)
    )
    np.testing.assert_allclose(
        layer.predict(X), ref(WEIGHT)
    )  # the bias is gone inside jit
    np.testing.assert_allclose(_roundtrip(layer).bias, np.zeros(3))


@pytest.mark.claim("sec-pytrees", "clm-methods-self-is-a-copy")
def test_a_jitted_method_that_assigns_to_self_changes_nothing():
    layer = methods.MutatingLayer(WEIGHT, "relu")
    assert layer.sgd_step(jnp.ones(3), 0.1) is None
    np.testing.assert_allclose(layer.weight, WEIGHT)
    np.testing.assert_allclose(
        methods.PytreeLayer(WEIGHT, "relu").sgd_step(jnp.ones(3), 0.1).weight,
        np.asarray(WEIGHT) - 0.1,
        rtol=1e-6,
    )


# Strategy 4: Equinox.
@pytest.mark.claim("sec-pytrees", "clm-methods-eqx-frozen-pytree")
def test_equinox_modules_are_frozen():
    layer = methods.EqxLayer(WEIGHT, "relu")
    assert dataclasses.is_dataclass(layer)
    leaves, treedef = jax.tree.flatten(layer)  # a pytree: the array a child, the static
    assert len(leaves) == 1 and leaves[0] is layer.weight  # field in the structure
    assert treedef != jax.tree.structure(methods.EqxLayer(WEIGHT, "tanh"))
    err = raised(setattr, methods.EqxLayer(WEIGHT, "relu"), "weight", NEW_WEIGHT)
    assert isinstance(err, dataclasses.FrozenInstanceError)
    new = eqx.tree_at(lambda m: m.weight, methods.EqxLayer(WEIGHT, "relu"), NEW_WEIGHT)
    np.testing.assert_allclose(new.predict(X), ref(NEW_WEIGHT))


@pytest.mark.claim("sec-methods-eqx", "clm-methods-eqx-bound-method-wrapper")
def test_equinox_bound_method_is_a_pytree_that_jax_jit_cannot_hash():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert type(plus.apply).__name__ == "BoundMethod" and isinstance(
        plus.apply, eqx.Module
    )
    leaves = jax.tree_util.tree_leaves(plus.apply)
    assert len(leaves) == 1 and leaves[0] is plus.values
    err = raised(lambda: jax.jit(plus.apply)())
    assert isinstance(err, TypeError) and "unhashable type" in str(err)
    plus2 = methods.SignedEqx(2 * jnp.ones(2), "plus")
    assert count_each(
        lambda: eqx.filter_jit(plus.apply)(), lambda: eqx.filter_jit(plus2.apply)()
    ) == [1, 0]
    np.testing.assert_allclose(eqx.filter_jit(plus2.apply)(), [2.0, 2.0])


@pytest.mark.claim("sec-methods-eqx-cache", "clm-methods-eqx-cache-on-class")
def test_cache_size_is_not_on_the_equinox_bound_method_but_on_the_class():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert type(plus.jit_apply).__name__ == "BoundMethod"
    err = raised(lambda: plus.jit_apply._cache_size())
    assert isinstance(err, AttributeError) and "_cache_size" in str(err)
    assert methods.SignedEqx.jit_apply._cache_size() == 0


@pytest.mark.claim("sec-methods-eqx-cache", "clm-methods-eqx-one-cache")
def test_one_cache_shared_by_instances_and_emptied_by_clear_caches():
    ones = jnp.ones(2)
    plus, plus2, minus = (
        methods.SignedEqx(ones, "plus"),
        methods.SignedEqx(2 * ones, "plus"),
        methods.SignedEqx(ones, "minus"),
    )
    sizes, counts = [methods.SignedEqx.jit_apply._cache_size()], []
    for model in (plus, plus2, minus):
        counts += count_each(model.jit_apply)
        sizes.append(methods.SignedEqx.jit_apply._cache_size())
    jax.clear_caches()
    sizes.append(methods.SignedEqx.jit_apply._cache_size())
    assert counts == [1, 0, 1] and sizes == [0, 1, 1, 2, 0]
    late = methods.SignedEqx(3 * ones, "plus")
    assert count_each(late.jit_apply, plus.jit_apply) == [1, 0]
    np.testing.assert_allclose(minus.jit_apply(), [-1.0, -1.0])
    np.testing.assert_allclose(late.jit_apply(), [3.0, 3.0])


@pytest.mark.claim("sec-methods-static-functions", "clm-methods-function-identity")
def test_static_callables_compare_by_identity():
    ones, twos = jnp.ones(2), 2 * jnp.ones(2)
    assert count_each(
        lambda: methods.MappedEqx(ones, lambda v: v).run(),
        lambda: methods.MappedEqx(twos, lambda v: v).run(),
        lambda: methods.MappedEqx(ones, lambda v: -v).run(),
    ) == [1, 1, 1]
    identity, negate = (lambda v: v), (lambda v: -v)
    alias = identity
    assert count_each(
        lambda: methods.MappedEqx(ones, identity).run(),
        lambda: methods.MappedEqx(twos, identity).run(),
        lambda: methods.MappedEqx(ones, negate).run(),
        lambda: methods.MappedEqx(twos, alias).run(),
    ) == [1, 0, 1, 0]


@pytest.mark.claim("sec-methods-grad-static", "clm-methods-grad-per-static-value")
def test_jit_grad_compiles_once_per_static_value():
    ones = jnp.ones(2)
    models = [
        methods.SignedEqx(ones, "plus"),
        methods.SignedEqx(2 * ones, "plus"),
        methods.SignedEqx(ones, "minus"),
        methods.SignedEqx(ones, "other"),
    ]
    g = jax.jit(jax.grad(methods.signed_loss, argnums=1))
    assert count_each(*[lambda m=m: g(m, 1.0) for m in models]) == [1, 0, 1, 1]
    assert [float(g(m, 1.0)) for m in models] == [2.0, 4.0, -2.0, -2.0]


@pytest.mark.claim("sec-methods-grad-static", "clm-methods-filter-grad-not-hashable")
def test_jax_jit_of_filter_value_and_grad_fails_and_filter_jit_works():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    wrapper = eqx.filter_value_and_grad(methods.signed_loss)
    assert isinstance(wrapper, eqx.Module)
    err = raised(lambda: jax.jit(wrapper)(plus, 1.0))
    assert isinstance(err, TypeError) and "unhashable type: 'dict'" in str(err)
    vg = eqx.filter_jit(wrapper)
    models = [
        plus,
        methods.SignedEqx(2 * jnp.ones(2), "plus"),
        methods.SignedEqx(jnp.ones(2), "minus"),
    ]
    assert count_each(*[lambda m=m: vg(m, 1.0) for m in models]) == [1, 0, 1]
    value, grads = vg(plus, 1.0)
    assert float(value) == 2.0
    np.testing.assert_allclose(grads.values, [1.0, 1.0])


# Strategy 5.
@pytest.mark.claim("sec-methods", "clm-methods-namedtuple-state")
def test_namedtuple_state_and_functions():
    p = methods.LayerParams(WEIGHT)
    assert count_each(
        lambda: methods.layer_predict(p, X, activation="relu"),
        lambda: methods.layer_predict(
            methods.LayerParams(NEW_WEIGHT), X, activation="relu"
        ),
        lambda: methods.layer_predict(p, X, activation="tanh"),
    ) == [1, 0, 1]
    np.testing.assert_allclose(
        methods.layer_predict(methods.LayerParams(NEW_WEIGHT), X, activation="relu"),
        ref(NEW_WEIGHT),
    )
    new = methods.layer_sgd_step(p, jnp.ones(3), 0.1)
    assert isinstance(new, methods.LayerParams)
    np.testing.assert_allclose(new.weight, np.asarray(WEIGHT) - 0.1, rtol=1e-6)


# Closures against arguments.
@pytest.mark.claim("sec-methods-closures", "clm-methods-closure-freezes")
def test_each_closure_compiles_and_freezes_the_arrays_arguments_do_not():
    layer, new, tanh = (
        methods.EqxLayer(WEIGHT, "relu"),
        methods.EqxLayer(NEW_WEIGHT, "relu"),
        methods.EqxLayer(WEIGHT, "tanh"),
    )
    assert count_each(
        lambda: jax.jit(jax.grad(methods.make_loss(layer)))(X),
        lambda: jax.jit(jax.grad(methods.make_loss(layer)))(X),
        lambda: jax.jit(jax.grad(methods.make_loss(new)))(X),
    ) == [1, 1, 1]
    g = jax.jit(jax.grad(methods.layer_loss, argnums=1))
    assert count_each(
        lambda: g(layer, X), lambda: g(layer, X), lambda: g(new, X), lambda: g(tanh, X)
    ) == [1, 0, 0, 1]
    np.testing.assert_allclose(
        g(new, X), np.asarray(NEW_WEIGHT) * (np.asarray(NEW_WEIGHT) * np.asarray(X) > 0)
    )
    frozen = methods.array_constants(jax.jit(jax.grad(methods.make_loss(layer))), X)
    assert len(frozen) == 1 and frozen[0].startswith(
        "stablehlo.constant dense<[1.000000e+00, -2.000000e+00"
    )
    assert methods.array_constants(g, layer, X) == []


@pytest.mark.claim("sec-methods-closures", "clm-methods-closure-stale")
def test_a_jitted_closure_over_a_mutable_object_goes_stale():
    mutable = methods.Layer(WEIGHT, "relu")
    closure_grad = jax.jit(jax.grad(methods.make_loss(mutable)))
    before = closure_grad(X)
    mutable.weight = NEW_WEIGHT
    np.testing.assert_allclose(closure_grad(X), before)
    now = jax.grad(methods.make_loss(mutable))(X)
    assert not np.allclose(now, before)


# The decision guide.
@pytest.mark.claim("sec-methods-helper", "clm-methods-helper-right")
def test_decision_guide_rows():
    rows = {s.name: methods.evaluate(s) for s in methods.STRATEGIES}
    bad = ["1. jax.jit(layer.predict)", "2. self static, identity hash"]
    for name in bad:
        assert rows[name]["right after new weights"] == "no: stale"
    hashed = rows["2. self static, frozen, by value"]
    assert (
        hashed["right after new weights"] == "yes"
        and hashed["compiles: new layer"] == 1
    )
    for name in bad + ["2. self static, frozen, by value"]:
        row = rows[name]
        assert row["compiles: new layer"] == 1 and row["compiles: new activation"] == 1
        assert (
            row["jit(grad) w.r.t. layer"]
            == row["vmap over layers"]
            == row["scan carry"]
            == "no: TypeError"
        )
    helper = rows["1b. method calls a jitted function"]
    assert helper["right after new weights"] == "yes"
    assert (helper["compiles: new layer"], helper["compiles: new activation"]) == (0, 1)
    assert (
        helper["jit(grad) w.r.t. layer"]
        == helper["vmap over layers"]
        == helper["scan carry"]
        == "no: TypeError"
    )
    for name in [
        "3. pytree class",
        "3. register_dataclass",
        "4. Equinox module",
        "5. NamedTuple + functions",
    ]:
        assert rows[name] == {
            "strategy": name,
            "right after new weights": "yes",
            "compiles: new layer": 0,
            "compiles: new activation": 1,
            "jit(grad) w.r.t. layer": "yes",
            "vmap over layers": "yes",
            "scan carry": "yes",
        }


def test_evaluate_does_not_depend_on_what_ran_before():
    s = methods.STRATEGIES[3]
    assert methods.evaluate(s) == methods.evaluate(s)


@pytest.mark.claim("sec-pytrees", "clm-methods-filter-jit-decides")
def test_filter_jit_traces_arrays_and_holds_python_numbers_static():
    def scale(v, factor):
        return v * factor

    f = eqx.filter_jit(scale)
    one, two = jnp.asarray(1.0), jnp.asarray(2.0)
    assert count_each(
        lambda: f(X, 1.0), lambda: f(X, 2.0), lambda: f(X, one), lambda: f(X, two)
    ) == [1, 1, 1, 0]

    # strings and functions are static too: a new one compiles, the same one does not
    def apply(v, how, fn):
        return fn(v) if how == "as is" else -fn(v)

    g = eqx.filter_jit(apply)
    assert count_each(
        lambda: g(X, "as is", jnp.sin),
        lambda: g(X, "as is", jnp.sin),
        lambda: g(X, "negated", jnp.sin),
        lambda: g(X, "negated", jnp.cos),
    ) == [1, 0, 1, 1]


@pytest.mark.claim("sec-methods", "clm-methods-optax-namedtuples")
def test_optax_states_are_namedtuples():
    optax = pytest.importorskip("optax")
    state = optax.adam(1e-3).init({"w": WEIGHT})
    assert (
        isinstance(state, tuple)
        and isinstance(state[0], tuple)
        and hasattr(state[0], "_fields")
    )


@pytest.mark.claim("sec-pytrees", "clm-methods-filter-jit-float-rate")
def test_filter_jit_compiles_per_python_float_learning_rate_and_once_for_arrays():
    layer = methods.EqxLayer(WEIGHT, "relu")
    rates = (0.1, 0.05, 0.01)
    floats = count_each(
        *[lambda r=r: methods.eqx_sgd_step(layer, r) for r in rates],
        name="eqx_sgd_step",
    )
    arrays = count_each(
        *[lambda r=r: methods.eqx_sgd_step(layer, jnp.asarray(r)) for r in rates],
        name="eqx_sgd_step",
    )
    assert (floats, arrays) == ([1, 1, 1], [1, 0, 0])


@pytest.mark.claim("sec-methods-metadata", "clm-methods-metadata-eq")
def test_pytree_aux_data_is_compared_with_eq_and_never_hashed():
    calls = []
    f = jax.jit(lambda layer: 2 * layer.weight)
    seen = []
    for tag in ("a", "a", "b"):
        calls.clear()
        f(methods.PytreeLayer(WEIGHT, methods.Recorded(tag, calls)))
        seen.append(sorted(set(calls)))
    assert seen == [[], ["eq"], ["eq"]]
    relu, tanh = (
        jax.tree.structure(methods.PytreeLayer(WEIGHT, a)) for a in ("relu", "tanh")
    )
    assert hash(relu) == hash(tanh) and relu != tanh
    assert count_each(
        lambda: f(methods.PytreeLayer(WEIGHT, [1, 2])),
        lambda: f(methods.PytreeLayer(WEIGHT, [1, 2])),
        name="<lambda>",
    ) == [1, 0]  # unhashable aux data works: only == is used


@pytest.mark.claim("sec-methods-eqx", "clm-methods-eqx-class-body")
def test_jit_in_an_equinox_class_body_is_a_function_of_a_pytree_instance():
    plus = methods.SignedEqx(jnp.ones(2), "plus")
    assert hasattr(methods.SignedEqx.jit_apply, "lower")
    np.testing.assert_allclose(methods.SignedEqx.jit_apply(plus), [1.0, 1.0])


@pytest.mark.claim("sec-methods-closures", "clm-methods-closure-dataset-twice")
def test_a_closure_per_dataset_copies_it_into_each_executable_and_compiles_per_dataset():
    from jitbook.chapters.pln import load_oaks

    data = jnp.asarray(load_oaks(repeat=2).Y)
    closed, passed = methods.dataset_costs([data, data + 1, data + 2])
    assert (closed["compiles"], passed["compiles"]) == (3, 1)
    assert closed["executable bytes"] - passed["executable bytes"] > 0.95 * data.nbytes
    assert passed["executable bytes"] < data.nbytes / 4
    with pytest.raises(TypeError, match="list of arrays"):
        methods.dataset_costs(data)


@pytest.mark.claim("sec-methods-closures", "clm-methods-closure-and-grad-new")
def test_a_new_closure_and_a_new_jax_grad_each_compile_on_their_own():
    layer = methods.EqxLayer(WEIGHT, "relu")

    def new_closure():
        return jax.jit(methods.make_loss(layer))(X)

    def new_grad():
        return jax.jit(jax.grad(methods.layer_loss, argnums=1))(layer, X)

    assert count_each(new_closure, new_closure) == [1, 1]
    assert count_each(new_grad, new_grad) == [1, 1]
    assert jax.grad(methods.layer_loss) is not jax.grad(methods.layer_loss)
    once = jax.jit(jax.grad(methods.layer_loss, argnums=1))
    assert count_each(lambda: once(layer, X), lambda: once(layer, X)) == [1, 0]


@pytest.mark.claim("sec-methods-helper", "clm-methods-helper-argument")
def test_a_method_calling_a_module_level_jitted_function_is_right_after_mutation():
    helper = methods.HelperLayer(WEIGHT, "relu")
    np.testing.assert_allclose(helper.predict(X), ref(WEIGHT))
    helper.weight = NEW_WEIGHT
    assert count_each(lambda: helper.predict(X), name="predict_weights") == [0]
    np.testing.assert_allclose(helper.predict(X), ref(NEW_WEIGHT))
    helper.activation = "tanh"
    assert count_each(lambda: helper.predict(X), name="predict_weights") == [1]
    np.testing.assert_allclose(helper.predict(X), ref(NEW_WEIGHT, "tanh"), atol=1e-6)
    assert isinstance(
        raised(lambda: jax.grad(lambda h: jnp.sum(h.predict(X)))(helper)), TypeError
    )


@pytest.mark.claim("sec-methods-register-static", "clm-methods-register-static")
def test_register_static_makes_a_leafless_pytree_compared_by_value():
    relu = methods.Settings("relu")
    assert jax.tree.leaves(relu) == []
    counts = count_each(
        lambda: methods.predict_with(methods.Settings("relu"), WEIGHT, X),
        lambda: methods.predict_with(methods.Settings("relu"), NEW_WEIGHT, X),
        lambda: methods.predict_with(methods.Settings("tanh"), WEIGHT, X),
        name="predict_with",
    )
    assert counts == [1, 0, 1]
    np.testing.assert_allclose(
        methods.predict_with(relu, NEW_WEIGHT, X), ref(NEW_WEIGHT)
    )


@pytest.mark.claim("sec-methods-pytree", "clm-methods-tree-static")
def test_jax_tree_static_is_the_dataclass_field_with_static_metadata():
    assert dict(jax.tree.static().metadata) == {"static": True}
    assert dict(dataclasses.field(metadata=dict(static=True)).metadata) == dict(
        jax.tree.static().metadata
    )
    field = {f.name: f for f in dataclasses.fields(methods.DataclassLayer)}[
        "activation"
    ]
    assert field.metadata["static"] is True
    assert str(jax.tree.structure(methods.DataclassLayer(WEIGHT, "relu"))) == (
        "PyTreeDef(CustomNode(DataclassLayer[('relu',)], [*]))"
    )


@pytest.mark.claim("sec-methods-pytree", "clm-methods-metadata-contract")
def test_metadata_must_be_hashable_by_the_docs_and_jax_error_says_so():
    doc = jax.tree_util.register_dataclass.__doc__
    assert "Metadata fields *must* be static, hashable, immutable objects" in doc
    assert "hashable auxiliary data" in " ".join(
        jax.tree_util.register_pytree_node.__doc__.split()
    )
    offset = jnp.array([0.5, 0.5, 0.5])
    methods.ArrayMetadataLayer(WEIGHT, offset, "relu").predict(X)
    err = raised(
        lambda: methods.ArrayMetadataLayer(WEIGHT, offset + 0, "relu").predict(X)
    )
    assert (
        "Make sure that metadata fields are hashable and have simple equality semantics"
        in str(err)
    )


@pytest.mark.claim("sec-methods-pytree", "clm-methods-pytree-children")
def test_children_values_are_not_in_the_key_but_their_shapes_and_dtypes_are():
    counts = count_each(
        lambda: methods.PytreeLayer(WEIGHT, "relu").predict(X),
        lambda: methods.PytreeLayer(NEW_WEIGHT, "relu").predict(X),
        lambda: methods.PytreeLayer(jnp.ones(3, jnp.int32), "relu").predict(X),
        lambda: methods.PytreeLayer(jnp.ones(1), "relu").predict(X),
        name="predict",
    )
    assert counts == [1, 0, 1, 1]


@pytest.mark.claim("sec-methods-unflatten-values", "clm-methods-unflatten-not-arrays")
def test_tree_unflatten_receives_none_abstract_values_and_layers_not_only_arrays():
    rows = {
        r["call"]: set(r["weight passed to __init__"].split(", "))
        for r in methods.unflatten_receives(methods.PytreeLayer(WEIGHT, "relu"))
    }
    assert rows["jax.jit(f) for an array result"] == {"DynamicJaxprTracer"}
    assert "ShapedArray" in rows["jax.jit(f) returning the layer"]
    assert rows["jax.tree.map(lambda _: None, layer)"] == {"NoneType"}
    assert {"NoneType", "Recording"} <= rows["jax.jacobian(f) of the layer"]
    with pytest.raises(TypeError, match="methods.PytreeLayer"):
        methods.unflatten_receives(methods.DroppingLayer(WEIGHT, "relu"))


@pytest.mark.claim(
    "sec-methods-unflatten-values", "clm-methods-validation-out-of-unflatten"
)
def test_a_checking_init_breaks_on_none_and_unflattening_without_init_does_not():
    err = raised(
        lambda: jax.tree.map(lambda _: None, methods.CheckedLayer(WEIGHT, "relu"))
    )
    assert isinstance(
        err, ValueError
    ) and "None is not a valid value for jnp.array" in str(err)
    safe = jax.tree.map(lambda _: None, methods.UncheckedUnflattenLayer(WEIGHT, "relu"))
    assert safe.weight is None and safe.activation == "relu"
    np.testing.assert_allclose(
        methods.UncheckedUnflattenLayer(NEW_WEIGHT, "relu").predict(X), ref(NEW_WEIGHT)
    )


@pytest.mark.claim("sec-pytrees", "clm-methods-redefined-class")
def test_a_redefined_equinox_class_starts_with_an_empty_cache_and_the_old_keeps_its_own():
    from jitbook import cache

    cell = (
        "import equinox as eqx\nimport jax\n\n\nclass Doubler(eqx.Module):\n    values: jax.Array\n\n"
        "    @jax.jit\n    def run(self):\n        return 2 * self.values\n"
    )
    old, new = cache.run_cell(cell, "Doubler"), cache.run_cell(cell, "Doubler")
    ones = jnp.ones(2)
    assert count_each(
        lambda: old(ones).run(),
        lambda: new(ones).run(),
        lambda: old(2 * ones).run(),
        name="run",
    ) == [1, 1, 0]


@pytest.mark.claim("sec-pytrees", "clm-methods-identical-functions")
def test_identical_handwritten_jitted_functions_compile_once_each():
    @jax.jit
    def first(v):
        return 2 * v

    @jax.jit
    def second(v):
        return 2 * v

    ones, twos = jnp.ones(2), 2 * jnp.ones(2)
    assert count_each(
        lambda: first(ones), lambda: second(ones), lambda: first(twos)
    ) == [1, 1, 0]


@pytest.mark.claim("sec-methods-eqx-cache", "clm-methods-instance-after-compile")
def test_an_instance_built_after_the_compile_reuses_the_program():
    ones = jnp.ones(2)
    methods.SignedEqx(ones, "plus").jit_apply()
    later = methods.SignedEqx(5 * ones, "plus")
    assert count_each(later.jit_apply) == [0]


@pytest.mark.claim("sec-methods-eqx-cache", "clm-methods-cache-size-dispatch-entries")
def test_cache_size_counts_dispatch_entries_not_compiles():
    def add_half(v):
        return v + 0.5

    f = jax.jit(add_half)
    assert count_each(lambda: f(1.0), lambda: f(jnp.array(1.0)), name="add_half") == [
        1,
        0,
    ]
    assert f._cache_size() == 2


def test_closure_to_argument_counts_the_answers_function_not_eager_helpers():
    grad_wrt_layer = jax.jit(jax.grad(methods.layer_loss))

    def weight_grad(layer, x):
        flipped = jnp.flip(
            layer.weight
        )  # an eager op: it compiles once on its own, not the student's fault
        return grad_wrt_layer(layer, x).weight + 0.0 * jnp.flip(flipped)

    assert check("methods.closure-to-argument", weight_grad).passed
