"""A small jit of the book's own: trace to a program, cache it on abstract values,
compile it.

It borrows only JAX's primitives (each knows its abstract evaluation rule) and the hook
that routes every ``primitive.bind`` to the current trace. The tracer, the program, the
cache, the error on Python control flow and the compile step are written here, in the
order jit runs them. Taught in Build your own jit, The tracer.
"""

import contextlib
import dataclasses
import functools
import itertools
import os
import sys
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
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
        weak = "~" if self.weak_type else ""  # JAX marks weak types the same way
        return weak + self.to_jax().str_short(short_dtypes=True)

    def to_jax(self) -> core.ShapedArray:
        return core.ShapedArray(self.shape, self.dtype, weak_type=self.weak_type)


def abstract_of(value: Any) -> Abstract:
    """The abstract value of an argument, as jit sees it: a Python int, float or complex
    is weakly typed (it will yield to the dtype of the array it meets); bool is not."""
    if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        dtype = np.dtype(_canonical(np.asarray(value)).dtype)
        return Abstract((), dtype, weak_type=True)
    aval = jax.typeof(value)
    return Abstract(tuple(aval.shape), np.dtype(aval.dtype), bool(aval.weak_type))


def shape_and_dtype(value: Any) -> Abstract:
    """An abstract value that forgets weak types: the mistake the chapter starts
    from."""
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
        return f"{np.asarray(self.value).item()!r}:{_aval(self).str_short(True)}"


@dataclasses.dataclass
class Equation:
    """One primitive applied to inputs, with the primitive's parameters."""

    primitive: Any
    inputs: list
    outputs: list[Var]
    params: dict
    line: str = ""  # the Python function and line that made it

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
        consts = " ".join(f"{v}:{v.abstract}" for v in self.constvars)
        inputs = " ".join(f"{v}:{v.abstract}" for v in self.inputs)
        head = f"{consts} ; {inputs}" if consts else f"; {inputs}"
        lines = [f"{{ lambda {head} ."]  # constants ; inputs, as a jaxpr prints them
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
        """A tracer's variable, a Python or NumPy scalar as a literal, a ``jax.Array``
        (even of one number, as JAX does) as a captured constant."""
        if isinstance(value, Tracer) and value._trace is self:
            return value.var
        if isinstance(value, core.Tracer):
            raise TypeError("minijit does not nest inside another transformation.")
        if np.ndim(value) == 0 and not isinstance(value, jax.Array):
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
            # a constant converted is a constant: jaxprs fold it the same way (a Python
            # scalar stays a literal: NumPy's value, not a jax.Array, which JAX keeps a
            # constvar)
            with core.set_current_trace(core.eval_trace):
                out = primitive.bind(*args, **params)
            return out if isinstance(args[0], jax.Array) else np.asarray(out)
        inputs = [self.atom(a) for a in args]
        # each primitive knows the shape and dtype of its result: no data needed
        out_avals, _ = primitive.abstract_eval(*map(_aval, inputs), **params)
        many = primitive.multiple_results
        outputs = self.record(
            primitive, inputs, out_avals if many else [out_avals], params
        )
        return outputs if many else outputs[0]

    def record(self, primitive, inputs: list, out_avals, params: dict) -> list[Tracer]:
        """Append one equation; its outputs are new tracers for the function to go on
        with."""
        outputs = [self.new_tracer(_abstract(a)) for a in out_avals]
        outvars = [t.var for t in outputs]
        self.equations.append(
            Equation(primitive, inputs, outvars, params, _user_line())
        )
        return outputs

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **_):
        return self.record_call(primitive, fun.call_wrapped, tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **_):
        return self.record_call(primitive, fun.call_wrapped, tracers)

    def record_call(self, primitive, body_fn: Callable, args) -> list:
        """One equation for a function with its own derivative rule, as jaxprs show it;
        its body is a program of its own (the rule itself does not matter to jit)."""
        inputs = [self.atom(a) for a in args]
        body = trace_abstract(body_fn, [_abstract(_aval(a)) for a in inputs])
        out_avals = [v.abstract.to_jax() for v in body.outputs]
        return self.record(primitive, inputs, out_avals, {"body": body})


_NOT_USER = (os.path.dirname(jax.__file__), __file__)


def _user_line() -> str:
    """``function:line`` of the Python code that made the current equation (no
    paths)."""
    frame = sys._getframe(1)
    while frame and frame.f_code.co_filename.startswith(_NOT_USER):
        frame = frame.f_back
    return f"{frame.f_code.co_name}:{frame.f_lineno}" if frame else ""


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
    env: dict[Var, Any] = dict(zip(program.constvars, consts, strict=True))
    env.update(zip(program.inputs, args, strict=True))

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
        env.update(zip(eqn.outputs, outs, strict=True))
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
    """``jax.jit`` in small: the cache, its counters, and the trace-and-compile on a
    miss.

    The cache is global and keyed first on the function, as jit's is: wrapping the same
    function again finds its programs; a new closure is a new function and starts empty.
    """

    programs: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()

    def __init__(
        self,
        fn: Callable,
        static_argnames: Sequence[str] = (),
        abstractify: Callable = abstract_of,
        explain: Callable[[tuple, tuple], str] | None = None,
    ):
        if not callable(fn):
            raise TypeError(
                f"minijit.jit takes a function, got {type(fn).__name__}; "
                "write minijit.jit(f), not minijit.jit(f(x))."
            )
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        self.fn, self.static_argnames = fn, tuple(static_argnames)
        self.abstractify, self.explain = abstractify, explain
        self.explanations: list[str] = []
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
            if self.explain is not None and self.cache:
                self.explanations.append(self.explain(list(self.cache)[-1], key))
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
            f"static argument {name}={value!r} is not hashable, so it cannot be "
            "part of a cache key; pass a tuple instead of a list, or make it a traced "
            "argument."
        ) from None


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] = ()):
    """``minijit.jit(f)`` or ``@minijit.jit(static_argnames=...)``, like ``jax.jit``."""
    if fn is None:
        return lambda f: MiniJit(f, static_argnames)
    return MiniJit(fn, static_argnames)


# --- for the chapter: side by side with JAX ------------------------------------------


def compiles_side_by_side(
    fn: Callable, calls: Sequence[tuple[str, tuple, dict]], static_argnames=()
) -> list[dict]:
    """One row per call: minijit's compiles so far and jax.jit's, each starting
    empty."""
    from jitbook.cache import count_compiles, fresh_jit

    ours = MiniJit(new_function(fn), static_argnames)
    theirs = fresh_jit(fn, static_argnames=static_argnames)
    rows = []
    with count_compiles() as log:
        for label, args, kwargs in calls:
            ours(*args, **kwargs)
            theirs(*args, **kwargs)
            rows.append(
                {
                    "call": label,
                    "minijit compiles": ours.compiles,
                    "jax.jit compiles": log.count_for(fn.__name__),
                }
            )
    return rows


def precision_side_by_side(fn: Callable, *args) -> list[dict]:
    """``fn(*args)`` called three times by both jits, the second call inside
    ``jax.default_matmul_precision("highest")``: compiles so far, each starting empty.

    JAX's cache key holds the configuration that tracing reads; minijit's holds none,
    so it reuses a program compiled under another precision. Taught in Build your own
    jit, Where the small jit differs from JAX.
    """
    from jitbook.cache import count_compiles, fresh_jit

    ours, theirs = MiniJit(new_function(fn)), fresh_jit(fn)
    contexts = {
        "default precision": contextlib.nullcontext,
        'inside default_matmul_precision("highest")': lambda: (
            jax.default_matmul_precision("highest")
        ),
        "default precision again": contextlib.nullcontext,
    }
    rows = []
    with count_compiles() as log:
        for label, context in contexts.items():
            with context():
                ours(*args)
                theirs(*args)
            rows.append(
                {
                    "call": label,
                    "minijit compiles": ours.compiles,
                    "jax.jit compiles": log.count_for(fn.__name__),
                }
            )
    return rows


def new_function(fn: Callable) -> Callable:
    """A new function object that calls ``fn``: a cache that starts empty."""
    return functools.wraps(fn)(lambda *args, **kwargs: fn(*args, **kwargs))


def trace_steps(program: Program) -> tuple[list[dict], list[dict]]:
    """The program equation by equation, for a slider: bytes written so far, and the
    program up to that equation with the Python line that made it."""
    rows, panels, written = [], [], 0
    lines = str(program).splitlines()
    for i, eqn in enumerate(program.equations):
        written += sum(_nbytes(v.abstract) for v in eqn.outputs)
        rows.append(
            {
                "equation": i + 1,
                "bytes written so far": written,
                "primitive": eqn.primitive.name,
            }
        )
        shown = lines[: i + 2] + ["    ..."] * (i + 1 < len(program.equations))
        shown[i + 1] = "->" + shown[i + 1][2:]
        panels.append(
            {
                "the program so far": "\n".join(shown),
                "made by the Python line": eqn.line or "(inside JAX)",
            }
        )
    return rows, panels


def _nbytes(abstract: Abstract) -> int:
    return int(np.prod(abstract.shape, dtype=int)) * abstract.dtype.itemsize


def book_functions() -> list[tuple[str, Callable, tuple, dict]]:
    """Functions of the book's chapters, with arguments and static values, to hold
    minijit to JAX: (name, function, arguments, static keyword arguments)."""
    from jitbook.chapters import jaxprs, recompilation, tracing, why_compile

    x = jnp.linspace(-2.0, 3.0, 12).reshape(3, 4)
    v = jnp.linspace(-1.0, 1.0, 5)
    mask = jnp.array([1.0, 0.0, 1.0, 1.0, 0.0])
    return [
        ("standardize_softplus", why_compile.standardize_softplus, (x,), {}),
        ("tiny", why_compile.tiny, (v,), {}),
        ("divide_by_huge", why_compile.divide_by_huge, (v,), {}),
        ("step", tracing.step, (v,), {}),
        ("python_loop", tracing.python_loop, (v,), {"n": 3}),
        ("fori_version", tracing.fori_version, (v, 3), {}),
        ("scan_version", tracing.scan_version, (v,), {"n": 4}),
        ("sin_or_cos", tracing.sin_or_cos, (v,), {"t": 1}),
        ("sin_or_cos_where", tracing.sin_or_cos_where, (v, 0.5), {}),
        ("sin_or_cos_cond", tracing.sin_or_cos_cond, (v, -0.5), {}),
        ("sqrt_or_zero_safe", tracing.sqrt_or_zero_safe, (v,), {}),
        ("scale_by_argument", tracing.scale_by_argument, (v, 3.0), {}),
        ("make_scaler(2.0)", tracing.make_scaler(2.0), (v,), {}),
        ("by_rank (a matrix)", jaxprs.by_rank, (x,), {}),
        ("by_rank (a vector)", jaxprs.by_rank, (v,), {}),
        ("update", jaxprs.update, (v,), {}),
        ("update_f32_constant", jaxprs.update_f32_constant, (v,), {}),
        ("with_closure(table)", jaxprs.with_closure(jnp.arange(5.0)), (v,), {}),
        ("with_argument", jaxprs.with_argument, (v, jnp.arange(5.0)), {}),
        ("outer (a jitted inner)", jaxprs.outer, (v,), {}),
        ("power", recompilation.power, (v,), {"n": 3}),
        ("total (a dict)", recompilation.total, ({"a": v, "b": x},), {}),
        ("soft_mean", recompilation.soft_mean, (v, mask), {}),
        ("soft_threshold", recompilation.soft_threshold, (v, 0.5), {}),
    ]


def against_jax(functions: Sequence[tuple[str, Callable, tuple, dict]]) -> list[dict]:
    """Per function: equations in minijit's program and in JAX's jaxpr, whether the
    primitives match in order, and whether the compiled results agree."""
    rows = []
    for name, fn, args, static in functions:
        bound = functools.partial(fn, **static)
        ours, theirs = trace(bound, *args), jax.make_jaxpr(bound)(*args)
        got = MiniJit(fn, tuple(static))(*args, **static)
        want = jax.jit(fn, static_argnames=tuple(static))(*args, **static)
        same = all(
            a.dtype == b.dtype and np.allclose(a, b, rtol=1e-6)
            for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
        )
        rows.append(
            {
                "function": name,
                "minijit equations": len(ours.equations),
                "jaxpr equations": len(theirs.eqns),
                "same primitives": ours.primitives()
                == [e.primitive.name for e in theirs.eqns],
                "same result": same,
            }
        )
    return rows
