"""The book's small jit held to JAX: same equations, same results, same number of compiles."""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jitbook import count_compiles
from jitbook.chapters import jaxprs, minijit, recompilation, tracing

if "aval" not in inspect.signature(jax._src.core.Tracer.__init__).parameters:
    pytest.skip(
        "needs JAX >= 0.10: minijit's tracer is built as jax._src.core.Tracer(trace, aval)",
        allow_module_level=True,
    )

V = jnp.linspace(-1.0, 1.0, 5)
X = jnp.ones((3, 4))
FUNCTIONS = minijit.book_functions()


def test_at_least_fifteen_functions_of_the_book():
    assert len(FUNCTIONS) >= 15


def _bound(fn, static):
    return functools.partial(fn, **static) if static else fn


@pytest.mark.claim("sec-minijit-tracer", "clm-minijit-same-equations")
@pytest.mark.parametrize(
    "name,fn,args,static", FUNCTIONS, ids=[f[0] for f in FUNCTIONS]
)
def test_the_program_has_jaxs_equations(name, fn, args, static):
    ours = minijit.trace(_bound(fn, static), *args)
    theirs = jax.make_jaxpr(_bound(fn, static))(*args)
    assert ours.primitives() == [e.primitive.name for e in theirs.eqns]
    assert [str(v.abstract) for v in ours.inputs] == [
        str(minijit.abstract_of(a)) for a in jax.tree.leaves(args)
    ]


@pytest.mark.claim("sec-minijit-compile", "clm-minijit-same-results")
@pytest.mark.parametrize(
    "name,fn,args,static", FUNCTIONS, ids=[f[0] for f in FUNCTIONS]
)
def test_the_compiled_program_gives_jaxs_results(name, fn, args, static):
    ours = minijit.jit(fn, static_argnames=tuple(static))(*args, **static)
    theirs = jax.jit(fn, static_argnames=tuple(static))(*args, **static)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _compiles_both(fn, calls, static_argnames=()) -> tuple[int, int]:
    """Compiles of minijit and of jax.jit over the same calls, each starting empty."""
    rows = minijit.compiles_side_by_side(
        fn, [(str(i), a, k) for i, (a, k) in enumerate(calls)], static_argnames
    )
    return rows[-1]["minijit compiles"], rows[-1]["jax.jit compiles"]


SEQUENCES = {
    "same shape again": [((V,), {}), ((V + 1,), {})],
    "new shape": [((V,), {}), ((X,), {})],
    "new dtype": [((V,), {}), ((V.astype(jnp.float16),), {})],
    "weak type": [((1.0,), {}), ((jnp.float32(1.0),), {}), ((2.0,), {})],
    "new structure": [(((V, V),), {}), (([V, V],), {})],
}


@pytest.mark.claim("sec-minijit-cache", "clm-minijit-columns-agree")
@pytest.mark.parametrize("sequence", SEQUENCES)
def test_compiles_as_often_as_jax(sequence):
    ours, theirs = _compiles_both(recompilation.total, SEQUENCES[sequence])
    assert ours == theirs > 0


@pytest.mark.claim("sec-minijit-cache", "clm-minijit-same-compiles")
def test_static_values_compile_as_often_as_jax():
    calls = [((V,), {"n": 2}), ((V,), {"n": 3}), ((V,), {"n": 2}), ((V,), {"n": 2.0})]
    ours, theirs = _compiles_both(recompilation.power, calls, ("n",))
    assert ours == theirs == 3
    # (2,) and (2.0,) are equal tuples: only the top level's type is in the key
    tuples = [((V,), {"n": (2,)}), ((V,), {"n": (2.0,)})]
    assert _compiles_both(_first, tuples, ("n",)) == (1, 1)


def _first(x, n):
    return x ** n[0]


@pytest.mark.claim("sec-minijit-cache", "clm-minijit-closure")
def test_the_same_function_wrapped_again_is_a_hit_and_a_new_closure_is_not():
    fn = tracing.make_scaler(4.0)
    minijit.jit(fn)(V)
    again = minijit.jit(fn)
    again(V)
    assert (again.compiles, again.hits) == (0, 1)
    fresh = minijit.jit(tracing.make_scaler(4.0))
    fresh(V)
    assert fresh.compiles == 1
    # "in JAX as here": the same function wrapped again compiles nothing, a new closure compiles
    jax_fn = tracing.make_scaler(5.0)
    jax.jit(jax_fn)(V)
    with count_compiles() as again_in_jax:
        jax.jit(jax_fn)(V)
    with count_compiles() as fresh_in_jax:
        jax.jit(tracing.make_scaler(5.0))(V)
    assert (again_in_jax.count, fresh_in_jax.count) == (0, 1)


@pytest.mark.claim("sec-minijit-control-flow", "clm-minijit-no-value")
def test_a_branch_on_a_tracer_is_refused_with_a_way_out(measured):
    with pytest.raises(
        minijit.TracerControlFlowError, match="jax.lax.cond or jnp.where"
    ) as ours:
        minijit.jit(tracing.sin_or_cos)(V, 1.0)
    with pytest.raises(jax.errors.TracerBoolConversionError) as jaxs:
        jax.jit(tracing.sin_or_cos)(V, 1.0)
    measured("minijit raised", type(ours.value).__name__)
    measured("JAX raised", type(jaxs.value).__name__)


@pytest.mark.claim("sec-minijit-constants", "clm-minijit-constants")
def test_captured_arrays_become_constants_and_scalars_literals():
    table = jnp.arange(5.0)
    program = minijit.trace(jaxprs.with_closure(table), V)
    assert len(program.consts) == 1 and program.consts[0] is table
    closed = jax.make_jaxpr(jaxprs.with_closure(table))(V)
    assert len(program.consts) == len(closed.consts)
    literal = minijit.trace(jaxprs.scaled_by(3.0), V)
    assert literal.consts == [] and isinstance(
        literal.equations[0].inputs[1], minijit.Literal
    )
    # as many as JAX, whatever is captured: a Python or NumPy scalar a literal, a jax.Array
    # (a 0-d one too) a constant
    for captured, constants in (
        (2.0, 0),
        (np.float32(2.0), 0),
        (np.array(2.0, np.float32), 0),
        (jnp.float32(2.0), 1),
        (jnp.array(2.0), 1),
        (jnp.arange(5.0), 1),
    ):

        def times(x, c=captured):
            return x * c

        mine = minijit.trace(times, V)
        theirs = jax.make_jaxpr(times)(V)
        assert len(mine.consts) == len(theirs.consts) == constants, type(captured)
        is_literal = isinstance(mine.equations[-1].inputs[1], minijit.Literal)
        assert is_literal == (constants == 0), type(captured)


@pytest.mark.claim("sec-minijit-cache", "clm-minijit-weak-key")
def test_without_weak_types_the_cache_hits_where_jax_compiles_again():
    fn = minijit.new_function(recompilation.total)
    naive = minijit.MiniJit(fn, abstractify=minijit.shape_and_dtype)
    naive(1.0)
    naive(jnp.float32(1.0))
    assert naive.compiles == 1
    assert _compiles_both(recompilation.total, SEQUENCES["weak type"])[1] == 2


def test_bad_input_is_named():
    with pytest.raises(TypeError, match=r"minijit.jit\(f\), not"):
        minijit.jit(3)
    with pytest.raises(ValueError, match="not hashable"):
        minijit.jit(recompilation.power, static_argnames="n")(V, n=[2])
    with pytest.raises(TypeError, match="static_argnames"):
        minijit.jit(recompilation.power)(V, n=2)


def test_against_jax_reports_a_difference():
    rows = minijit.against_jax([("sin vs cos", jnp.sin, (V,), {})])
    assert rows[0]["same primitives"] and rows[0]["same result"]
    original = minijit.EMITTERS.copy()
    minijit.EMITTERS["sin"] = lambda x, **_: jnp.cos(x)
    try:
        wrong = minijit.against_jax([("sin", lambda x: jnp.sin(x) + 0, (V,), {})])
    finally:
        minijit.EMITTERS.clear()
        minijit.EMITTERS.update(original)
    assert not wrong[0]["same result"]


@pytest.mark.claim("sec-minijit", "clm-minijit-borrows-compile")
def test_minijit_compiles_through_jax_jit_lower_and_compile(monkeypatch):
    from jitbook import count_compiles

    lowered = []
    original = jax.stages.Lowered.compile

    def spy(self, *args, **kwargs):
        lowered.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", spy)
    with count_compiles() as log:
        minijit.jit(minijit.new_function(jnp.sin))(V)
    assert len(lowered) == 1 and log.count == 1  # one XLA compile, through JAX's stages


@pytest.mark.claim("sec-minijit-differences", "clm-minijit-no-config")
def test_a_precision_context_recompiles_under_jax_jit_not_under_minijit():
    rows = minijit.precision_side_by_side(jaxprs.with_argument, X, X.T)
    assert [r["jax.jit compiles"] for r in rows] == [1, 2, 2]
    assert [r["minijit compiles"] for r in rows] == [1, 1, 1]
    # the other setting the sentence names: jax_enable_x64, switched on for one call
    ours = minijit.jit(minijit.new_function(jaxprs.with_argument))
    theirs = jax.jit(minijit.new_function(jaxprs.with_argument))
    ours(X, X.T), theirs(X, X.T)
    x64 = (
        jax.enable_x64(True)
        if hasattr(jax, "enable_x64")
        else jax.experimental.enable_x64()
    )
    with x64, count_compiles() as log:
        ours(X, X.T), theirs(X, X.T)
    assert ours.compiles == 1 and log.count_for(theirs.__name__) == 1


@pytest.mark.claim("sec-minijit-differences", "clm-minijit-cache-layers")
def test_the_trace_and_the_executable_are_cached_apart():
    from jitbook import count_compiles

    runs = []

    def body(v):
        runs.append(1)
        return v * 3.0 + 1.0

    jax.make_jaxpr(body)(V)
    assert runs == [1]
    with count_compiles() as log:
        jax.jit(body)(V)
    assert runs == [1] and log.count_for("body") == 1  # trace reused, still compiled
