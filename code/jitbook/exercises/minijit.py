"""Exercises of the chapter "Build your own jit"."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import fresh_jit
from jitbook.chapters import minijit

from . import call_answer, exercise, expect, judge


@exercise("minijit.emit-primitive", "make_cube", "primitives and the compile step", 2)
def _emit_primitive(answer):
    """cube_p = jax.extend.core.Primitive('cube'); cube_p.def_abstract_eval(lambda a:
    a); minijit.EMITTERS['cube'] = lambda x: x * x * x; return cube_p.bind.
    """
    cube = call_answer(answer)
    expect(
        callable(cube),
        "make_cube() returns a function",
        f"make_cube() returned {type(cube).__name__}; return the function that binds "
        "your primitive (cube_p.bind).",
    )
    for x in (jnp.linspace(-1.0, 2.0, 3), jnp.ones((2, 2), jnp.float16)):
        try:
            program = minijit.trace(lambda v: cube(v) + 1, x)
        except Exception as err:
            expect(
                False,
                "",
                f"minijit could not trace cube(x) + 1: "
                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            )
        expect(
            program.primitives() == ["cube", "add"],
            f"cube(x) + 1 traces to one cube equation and an add ({x.dtype})",
            f"cube(x) + 1 traced to {program.primitives()}; cube must bind one new "
            "primitive named 'cube' (not jnp or lax calls, which record their own).",
        )
        out = program.equations[0].outputs[0].abstract
        expect(
            (out.shape, out.dtype) == (x.shape, x.dtype),
            f"its abstract value keeps shape and dtype ({out})",
            f"the abstract evaluation of cube gives {out} for "
            f"{minijit.abstract_of(x)}: "
            "it should return the input's abstract value unchanged.",
        )
        got = call_answer(minijit.jit(lambda v: cube(v) + 1), x)
        expect(
            judge.agrees(got, np.asarray(x, np.float32) ** 3 + 1, atol=1e-2, rtol=1e-2),
            f"minijit compiles and runs it ({x.dtype})",
            "minijit.jit(lambda x: cube(x) + 1)(x) did not give x ** 3 + 1: check the "
            "emitter you put in minijit.EMITTERS['cube'].",
        )


_VALUES = {
    "the Python float 1.0": 1.0,
    "the Python int 2": 2,
    "the Python bool True": True,
    "jnp.float32(1.0)": jnp.float32(1.0),
    "jnp.asarray(1.0)": jnp.asarray(1.0),
    "np.float32(1.0)": np.float32(1.0),
    "jnp.ones(3)": jnp.ones(3),
}


@exercise("minijit.weak-types", "abstract_with_weak_type", "abstract values", 1)
def _weak_types(answer):
    """Python int, float and complex scalars are weak (bool is not); a jax.Array
    carries its own .weak_type; numpy values are never weak.
    """
    for label, value in _VALUES.items():
        got = call_answer(answer, value)
        want = jax.typeof(value)
        expect(
            type(got) is minijit.Abstract
            and type(got.shape) is tuple
            and all(type(n) is int for n in got.shape)
            and isinstance(got.dtype, np.dtype)
            and type(got.weak_type) is bool
            and (got.shape, got.dtype, got.weak_type)
            == (tuple(want.shape), want.dtype, want.weak_type),
            f"{label}: {minijit.Abstract(want.shape, want.dtype, want.weak_type)}",
            f"for {label} you returned {got!r}; jit sees shape {tuple(want.shape)}, "
            f"dtype {want.dtype} and weak_type={want.weak_type}.",
        )
    calls = [1.0, jnp.float32(1.0), 2.0, jnp.asarray(3.0)]
    ours = minijit.MiniJit(minijit.new_function(_plus_one), abstractify=answer)
    theirs = fresh_jit(_plus_one)
    for value in calls:
        ours(value)
    with judge.compiles_of(theirs) as counted:
        for value in calls:
            theirs(value)
    expect(
        ours.compiles == counted.count,
        f"the cache compiles as often as jax.jit ({ours.compiles})",
        f"over the calls 1.0, jnp.float32(1.0), 2.0, jnp.asarray(3.0), minijit with "
        f"your abstract values compiled {ours.compiles} times, jax.jit "
        f"{counted.count}.",
    )


def _plus_one(x):
    return x + 1


_V = jnp.ones(3)
_MISSES = [
    ("a new shape", ((_V,), {}), ((jnp.ones(4),), {}), ["shape", "f32[3]", "f32[4]"]),
    ("a new dtype", ((_V,), {}), ((_V.astype(jnp.float16),), {}), ["dtype", "f16[3]"]),
    ("a weak type", ((jnp.float32(1),), {}), ((1.0,), {}), ["weak"]),
    ("a new structure", (((_V, _V),), {}), (([_V, _V],), {}), ["structure"]),
    ("a static value", ((_V,), {"n": 2}), ((_V,), {"n": 3}), ["static", "n", "2", "3"]),
]


@exercise("minijit.explain-miss", "explain_miss", "the cache key", 2)
def _explain_miss(answer):
    """A key is (tree structure, abstract values, static values): compare the parts in
    that order, and each abstract value's shape, dtype and weak_type.
    """
    for label, (old_args, old_static), (new_args, new_static), words in _MISSES:
        old = minijit.cache_key(old_args, old_static)
        new = minijit.cache_key(new_args, new_static)
        got = call_answer(answer, old, new)
        missing = [w for w in words if w not in str(got)]
        expect(
            type(got) is str and not missing,
            f"{label}: {got}",
            f"for {label} your explanation was {got!r}; it should name "
            + ", ".join(repr(w) for w in missing)
            + ".",
        )
