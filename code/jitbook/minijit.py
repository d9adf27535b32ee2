"""A small jit of the book's own: trace to a program, cache it on abstract values, compile it.

It borrows only JAX's primitives (each knows its abstract evaluation rule) and the hook
that routes every ``primitive.bind`` to the current trace. The tracer, the program, the
cache, the error on Python control flow and the compile step are written here, in the
order jit runs them. Taught in Build your own jit.
"""

import dataclasses
import itertools
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import numpy as np
from jax._src import core, dtypes

_canonical = dtypes.canonicalize_value

# --- abstract values -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Abstract:
    """What a traced program may know of a value: its shape, dtype and weak type."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False

    def __str__(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"{self.dtype.name}[{dims}]" + ("{weak}" if self.weak_type else "")

    def to_jax(self) -> core.ShapedArray:
        return core.ShapedArray(self.shape, self.dtype, weak_type=self.weak_type)


def abstract_of(value: Any) -> Abstract:
    """The abstract value of an argument: a Python number is weakly typed, as in JAX."""
    aval = core.typeof(_canonical(value))
    weak = isinstance(value, (bool, int, float, complex)) or aval.weak_type
    return Abstract(tuple(aval.shape), np.dtype(aval.dtype), bool(weak))


def shape_and_dtype(value: Any) -> Abstract:
    """An abstract value that forgets weak types: the mistake the chapter starts from."""
    full = abstract_of(value)
    return Abstract(full.shape, full.dtype)


# --- the program ---------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Var:
    """A value of the program: an input, a constant or an equation's output."""

    name: str
    abstract: Abstract

    def __str__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class Literal:
    """A Python scalar written into an equation, as a jaxpr writes ``2.0:f32[]``."""

    value: Any

    def __str__(self) -> str:
        return repr(self.value)


@dataclasses.dataclass
class Equation:
    """One primitive applied to inputs, with the primitive's parameters."""

    primitive: Any
    inputs: list
    outputs: list[Var]
    params: dict

    def __str__(self) -> str:
        outs = " ".join(f"{v}:{v.abstract}" for v in self.outputs)
        ins = " ".join(map(str, self.inputs))
        return f"{outs} = {self.primitive.name} {ins}"


@dataclasses.dataclass
class Program:
    """Inputs, constants captured from the function's closure, equations and outputs."""

    inputs: list[Var]
    constvars: list[Var]
    consts: list[Any]
    equations: list[Equation]
    outputs: list
    out_tree: Any = None

    def __str__(self) -> str:
        heads = [f"{v}:{v.abstract}" for v in self.constvars + self.inputs]
        lines = [f"{{ lambda {' '.join(heads)} ."]
        lines += [f"    {eqn}" for eqn in self.equations]
        lines.append(f"  in ({', '.join(map(str, self.outputs))}) }}")
        return "\n".join(lines)

    def primitives(self) -> list[str]:
        return [eqn.primitive.name for eqn in self.equations]


# --- the tracer ----------------------------------------------------------------------


class TracerControlFlowError(TypeError):
    """Python asked a tracer for a concrete value it does not have."""


class Tracer(core.Tracer):
    """Stands in for an argument while the function runs: it carries only a ``Var``."""

    __slots__ = ["var"]

    def __init__(self, trace: "Recorder", var: Var):
        super().__init__(trace, var.abstract.to_jax())
        self.var = var

    def _refuse(self, what: str):
        raise TracerControlFlowError(
            f"{what} needs the value of {self.var} ({self.var.abstract}), but while "
            "tracing it is only a shape and a dtype. Use jax.lax.cond or jnp.where for "
            "a branch on it, or make the argument static."
        )

    def __bool__(self):
        self._refuse("Python's if/while (bool)")

    def __int__(self):
        self._refuse("int()")

    def __float__(self):
        self._refuse("float()")

    def __index__(self):
        self._refuse("an index (__index__)")


class Recorder(core.Trace):
    """The trace that every ``primitive.bind`` reaches while the function runs."""

    def __init__(self):
        super().__init__()
        self.equations: list[Equation] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self._names = (f"v{i}" for i in itertools.count())

    def new_var(self, abstract: Abstract) -> Var:
        return Var(next(self._names), abstract)

    def new_tracer(self, abstract: Abstract) -> Tracer:
        return Tracer(self, self.new_var(abstract))

    def atom(self, value: Any):
        """A tracer's variable, a scalar as a literal, an array as a captured constant."""
        if isinstance(value, Tracer) and value._trace is self:
            return value.var
        if isinstance(value, core.Tracer):
            raise TypeError("minijit does not nest inside another transformation.")
        if np.ndim(value) == 0:
            return Literal(value)
        var = self.new_var(abstract_of(value))
        self.constvars.append(var)
        self.consts.append(value)
        return var

    def process_primitive(self, primitive, args, params):
        if _inlined(primitive, params):
            # jnp functions are small jitted programs that JAX splices into the caller
            closed = params["jaxpr"]
            with core.set_current_trace(self):
                return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
        if primitive.name == "convert_element_type" and not isinstance(args[0], Tracer):
            # a constant converted is a constant: jaxprs fold it the same way
            with core.set_current_trace(core.eval_trace):
                return primitive.bind(*args, **params)
        inputs = [self.atom(a) for a in args]
        avals = [_aval(a) for a in inputs]
        out_avals, _ = primitive.abstract_eval(*avals, **params)
        many = primitive.multiple_results
        outputs = [
            self.new_tracer(_abstract(a)) for a in (out_avals if many else [out_avals])
        ]
        self.equations.append(
            Equation(primitive, inputs, [t.var for t in outputs], params)
        )
        return outputs if many else outputs[0]

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **_):
        return self.record_call(primitive, fun.call_wrapped, tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **_):
        return self.record_call(primitive, fun.call_wrapped, tracers)

    def record_call(self, primitive, body_fn: Callable, args) -> list:
        """One equation for a function with its own derivative rule, as jaxprs show it;
        its body is a program of its own (the rule itself does not matter to jit)."""
        inputs = [self.atom(a) for a in args]
        body = trace_abstract(body_fn, [_abstract(_aval(a)) for a in inputs])
        outputs = [self.new_tracer(v.abstract) for v in body.outputs]
        self.equations.append(
            Equation(primitive, inputs, [t.var for t in outputs], {"body": body})
        )
        return outputs


def _inlined(primitive, params) -> bool:
    inline = params.get("inline") if primitive.name == "jit" else None
    return getattr(inline, "value", inline) in ("jax_early", True)


def _aval(atom) -> core.ShapedArray:
    if isinstance(atom, Literal):
        return core.typeof(_canonical(atom.value))
    return atom.abstract.to_jax()


def _abstract(aval) -> Abstract:
    return Abstract(tuple(aval.shape), np.dtype(aval.dtype), bool(aval.weak_type))


def trace(fn: Callable, *args, abstractify: Callable = abstract_of) -> Program:
    """Run ``fn`` on tracers that stand for ``args`` and record what it does."""
    flat, tree = jax.tree.flatten(args)
    return trace_abstract(
        lambda *leaves: fn(*jax.tree.unflatten(tree, leaves)),
        [abstractify(a) for a in flat],
    )


def trace_abstract(fn: Callable, abstracts: Sequence[Abstract]) -> Program:
    """Run ``fn`` on one tracer per abstract value; ``fn`` takes the leaves."""
    recorder = Recorder()
    tracers = [recorder.new_tracer(a) for a in abstracts]
    with core.set_current_trace(recorder):
        out = fn(*tracers)
    outputs = [recorder.atom(o) for o in jax.tree.leaves(out)]
    return Program(
        [t.var for t in tracers],
        recorder.constvars,
        recorder.consts,
        recorder.equations,
        outputs,
        jax.tree.structure(out),
    )


# --- the compile step ----------------------------------------------------------------

#: How to emit a primitive that JAX's own ``bind`` cannot (the exercises add to it).
EMITTERS: dict[str, Callable] = {}


def evaluate(program: Program, consts: Sequence, *args) -> list:
    """Replay the equations on concrete values, or on jax.jit's own tracers."""
    env: dict[Var, Any] = dict(zip(program.constvars, consts))
    env.update(zip(program.inputs, args))

    def read(atom):
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in program.equations:
        emit = EMITTERS.get(eqn.primitive.name)
        ins = [read(a) for a in eqn.inputs]
        if "body" in eqn.params:
            out = evaluate(eqn.params["body"], eqn.params["body"].consts, *ins)
        elif emit is not None:
            out = emit(*ins, **eqn.params)
        else:
            out = eqn.primitive.bind(*ins, **eqn.params)
        outs = out if eqn.primitive.multiple_results else [out]
        env.update(zip(eqn.outputs, outs))
    return [read(a) for a in program.outputs]


def compile_program(program: Program) -> Callable:
    """XLA's executable for the program: jax.jit stages the replayed equations."""
    avals = [
        jax.ShapeDtypeStruct(v.abstract.shape, v.abstract.dtype) for v in program.inputs
    ]
    replay = jax.jit(lambda consts, *args: evaluate(program, consts, *args))
    executable = replay.lower(program.consts, *avals).compile()
    return lambda *args: executable(program.consts, *args)


# --- the cache -----------------------------------------------------------------------


def cache_key(args: tuple, static: dict, abstractify: Callable = abstract_of) -> tuple:
    """What decides a hit: the arguments' structure and abstract values, and the static
    values with their type (compared at the top level only, as jit does)."""
    flat, tree = jax.tree.flatten(args)
    statics = tuple((name, type(v), v) for name, v in sorted(static.items()))
    return tree, tuple(abstractify(a) for a in flat), statics


class MiniJit:
    """``jax.jit`` in small: the cache, its counters, and the trace-and-compile on a miss.

    The cache is global and keyed first on the function, as jit's is: wrapping the same
    function again finds its programs; a new closure is a new function and starts empty.
    """

    programs: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()

    def __init__(
        self,
        fn: Callable,
        static_argnames: Sequence[str] = (),
        abstractify: Callable = abstract_of,
    ):
        if not callable(fn):
            raise TypeError(
                f"minijit.jit takes a function, got {type(fn).__name__}; "
                "write minijit.jit(f), not minijit.jit(f(x))."
            )
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        self.fn, self.static_argnames = fn, tuple(static_argnames)
        self.abstractify = abstractify
        self.cache: dict[Hashable, tuple[Program, Callable]] = (
            MiniJit.programs.setdefault(fn, {})
        )
        self.traces = self.compiles = self.hits = 0
        self.misses: list[tuple] = []

    def __call__(self, *args, **kwargs):
        static = {k: kwargs.pop(k) for k in self.static_argnames if k in kwargs}
        if kwargs:
            raise TypeError(
                f"minijit passes keyword arguments only when static; got "
                f"{sorted(kwargs)}: add them to static_argnames or pass "
                "them by position."
            )
        for name, value in static.items():
            _check_hashable(name, value)
        key = cache_key(args, static, self.abstractify)
        if key in self.cache:
            self.hits += 1
            program, run = self.cache[key]
        else:
            self.misses.append(key)
            program = self.trace(*args, **static)
            run = compile_program(program)
            self.compiles += 1
            self.cache[key] = (program, run)
        outs = run(*jax.tree.leaves(args))
        return jax.tree.unflatten(program.out_tree, outs)

    def trace(self, *args, **static) -> Program:
        """The program for these arguments (not cached): what a miss records."""
        self.traces += 1
        return trace(
            lambda *a: self.fn(*a, **static), *args, abstractify=self.abstractify
        )


def _check_hashable(name: str, value: Any) -> None:
    try:
        hash(value)
    except TypeError:
        raise ValueError(
            f"static argument {name}={value!r} is not hashable, so it cannot be part of "
            "a cache key; pass a tuple instead of a list, or make it a traced argument."
        ) from None


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] = ()):
    """``minijit.jit(f)`` or ``@minijit.jit(static_argnames=...)``, like ``jax.jit``."""
    if fn is None:
        return lambda f: MiniJit(f, static_argnames)
    return MiniJit(fn, static_argnames)
