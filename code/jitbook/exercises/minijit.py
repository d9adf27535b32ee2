"""Exercises of the chapter "Build your own jit".

Their answers take or return minijit objects (keys, abstract values, primitives),
which cannot cross as data: probes hand them over in the student's process, and
what comes back is marked self-reported. Abstract values are read field by field
from plain calls.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import minijit, tracing
from jitbook.evidence import probes, read

from . import Wrong, ask, exercise, expect, judge


@exercise("minijit.emit-primitive", "make_cube", "primitives and the compile step", 2)
def _emit_primitive(rng):
    """cube_p = jax.extend.core.Primitive('cube'); cube_p.def_abstract_eval(lambda a:
    a); minijit.EMITTERS['cube'] = lambda x: x * x * x; return cube_p.bind.
    """
    inputs = [
        rng.uniform(-1.0, 2.0, size=int(rng.integers(2, 7))).astype(np.float32),
        rng.uniform(-1.0, 1.0, size=tuple(rng.integers(2, 4, size=2))).astype(
            np.float16
        ),
    ]
    found = yield [ask.probe("minijit_cube", x, allow_error=True) for x in inputs]
    for x, got in zip(inputs, found, strict=True):
        if isinstance(got, read.Failed):
            raise Wrong(
                f"minijit could not trace or run cube(x) + 1: {got.message}"
                + (f" ({got.line})" if got.line else ""),
                details=got.message,
            )
        expect(
            "returned" not in got,
            "make_cube() returns a function",
            f"make_cube() returned {got.get('returned')}; return the function that "
            "binds your primitive (cube_p.bind).",
            self_reported=True,
        )
        expect(
            got["primitives"] == ["cube", "add"],
            f"cube(x) + 1 traces to one cube equation and an add ({x.dtype})",
            f"cube(x) + 1 traced to {got['primitives']}; cube must bind one new "
            "primitive named 'cube' (not jnp or lax calls, which record their own).",
            self_reported=True,
        )
        want = minijit.abstract_of(x)
        expect(
            got.get("abstract") == [list(x.shape), str(x.dtype)],
            f"its abstract value keeps shape and dtype ({want})",
            f"the abstract evaluation of cube gives shape and dtype "
            f"{got.get('abstract')} for {want}: it should return the input's "
            "abstract value unchanged.",
            self_reported=True,
        )
        expect(
            judge.agrees(
                got["value"], x.astype(np.float64) ** 3 + 1, atol=1e-2, rtol=1e-2
            ),
            f"minijit compiles and runs it ({x.dtype})",
            "minijit.jit(lambda x: cube(x) + 1)(x) did not give x ** 3 + 1: check the "
            "emitter you put in minijit.EMITTERS['cube'].",
            self_reported=True,
        )


def _read_fields(value) -> list[dict]:
    """The answer's shape, dtype (as text) and weak_type of ``value``, a call each."""
    arg = ask.numpy(value) if isinstance(value, np.generic) else value
    return [
        ask.call(arg, then=(("__getattribute__", ("shape",)),)),
        ask.call(arg, then=(("__getattribute__", ("dtype",)), ("__str__", ()))),
        ask.call(arg, then=(("__getattribute__", ("weak_type",)),)),
    ]


def _weak_values(rng) -> dict:
    """Values drawn per student: Python scalars, NumPy and JAX arrays (labels to
    values; a NumPy scalar is sent as NumPy, an array as a JAX array)."""
    k = int(rng.integers(2, 6))
    return {
        "a Python float": float(rng.integers(-40, 40)) / 4,
        "a Python int": int(rng.integers(-9, 9)),
        "a Python bool": bool(rng.integers(0, 2)),
        "np.float32(...)": np.float32(rng.integers(1, 9) / 4),
        "np.float16(...)": np.float16(rng.integers(1, 9) / 4),
        "a float32 JAX array": rng.normal(size=k).astype(np.float32),
        "an int32 JAX array": rng.integers(0, 9, size=(2, k)).astype(np.int32),
    }


def _jit_compiles(values: list) -> int:
    """The reference: compiles of a fresh jax.jit on these values (one per trace)."""
    counted = tracing.BodyCounter(lambda v: v + 1)
    jitted = jax.jit(counted)
    for value in values:
        jitted(value)
    return counted.runs


@exercise("minijit.weak-types", "abstract_with_weak_type", "abstract values", 1)
def _weak_types(rng):
    """Python int, float and complex scalars are weak (bool is not); a jax.Array
    carries its own .weak_type; numpy values are never weak.
    """
    values = _weak_values(rng)
    a, b, c = (float(v) for v in rng.integers(1, 40, size=3) / 4)
    recipe = [
        ["float", a],
        ["jnp.float32", b],
        ["float", c],
        ["jnp.asarray", a],
        ["jnp.float32", c],
        ["int", int(rng.integers(1, 9))],
    ]
    asked = [r for value in values.values() for r in _read_fields(value)]
    *fields, compiles = yield [
        *asked,
        ask.probe("minijit_compiles", recipe, allow_error=True),
    ]
    for i, (label, value) in enumerate(values.items()):
        shape, dtype, weak = fields[3 * i : 3 * i + 3]
        seen = jax.typeof(
            jnp.asarray(value) if isinstance(value, np.ndarray) else value
        )
        want = (tuple(seen.shape), str(seen.dtype), bool(seen.weak_type))
        expect(
            type(shape) is tuple
            and all(type(n) is int for n in shape)
            and type(weak) is bool
            and (shape, dtype, weak) == want,
            f"{label}: {minijit.Abstract(*want[:1], np.dtype(want[1]), want[2])}",
            f"for {label} ({value!r}) your abstract value has shape {shape!r}, dtype "
            f"{dtype!r} and weak_type={weak!r}; jit sees shape {want[0]}, dtype "
            f"{want[1]} and weak_type={want[2]}.",
        )
    if isinstance(compiles, read.Failed):
        raise Wrong(
            f"minijit with your abstract values could not run: {compiles.message}"
            + (f" ({compiles.line})" if compiles.line else "")
            + "; return a minijit.Abstract.",
            details=compiles.message,
        )
    made = [probes.made(kind, number) for kind, number in recipe]
    expect(
        compiles["weak_types"] == [bool(jax.typeof(v).weak_type) for v in made],
        "a JAX array keeps its own weak type",
        f"for the values {[f'{k}({n})' for k, n in recipe]} your weak types were "
        f"{compiles['weak_types']}; a JAX array carries its own .weak_type "
        "(jnp.asarray of a Python float is weak).",
        self_reported=True,
    )
    want = _jit_compiles(made)
    calls = ", ".join(f"{kind}({number})" for kind, number in recipe)
    expect(
        compiles["compiles"] == want,
        f"the cache compiles as often as jax.jit ({want})",
        f"over the calls {calls}, minijit with your abstract values compiled "
        f"{compiles['compiles']} times, jax.jit {want}.",
        self_reported=True,
    )


def _misses(rng) -> list[tuple[str, tuple, dict, tuple, dict]]:
    """One miss of each kind, drawn per student: (label, old args, old static, new
    args, new static)."""
    a, b = (int(v) for v in rng.choice(np.arange(2, 9), 2, replace=False))
    v = rng.normal(size=a).astype(np.float32)
    other = v.astype(str(rng.choice(["float16", "int32"])))
    name = str(rng.choice(["steps", "depth", "width", "mode"]))
    p, q = (int(n) for n in rng.choice(np.arange(10, 99), 2, replace=False))
    scalar = float(rng.integers(1, 9))
    return [
        ("a new shape", (v,), {}, (rng.normal(size=(b,)).astype(np.float32),), {}),
        ("a new dtype", (v,), {}, (other,), {}),
        ("a weak type", (np.array(scalar, np.float32),), {}, (scalar,), {}),
        ("a new structure", ((v, v),), {}, ([v, v],), {}),
        ("a static value", (v,), {name: p}, (v,), {name: q}),
    ]


def _words(label: str, old_args, old_static, new_args, new_static) -> list[str]:
    """What an explanation of this miss must name."""
    if label in ("a new shape", "a new dtype"):
        (old,), (new,) = old_args, new_args
        old, new = (str(minijit.abstract_of(jnp.asarray(x))) for x in (old, new))
        return ["shape", old, new] if label == "a new shape" else ["dtype", new]
    if label == "a static value":
        return [
            "static",
            *old_static,
            str(*old_static.values()),
            str(*new_static.values()),
        ]
    return {"a weak type": ["weak"], "a new structure": ["structure"]}[label]


@exercise("minijit.explain-miss", "explain_miss", "the cache key", 2)
def _explain_miss(rng):
    """A key is (tree structure, abstract values, static values): compare the parts in
    that order, and each abstract value's shape, dtype and weak_type.
    """
    misses = _misses(rng)
    results = yield [ask.probe("explained_miss", *m[1:]) for m in misses]
    for (label, *keys), got in zip(misses, results, strict=True):
        missing = [w for w in _words(label, *keys) if w not in str(got)]
        expect(
            type(got) is str and not missing,
            f"{label}: {got}",
            f"for {label} your explanation was {got!r}; it should name "
            + ", ".join(repr(w) for w in missing)
            + ".",
            self_reported=True,
        )
