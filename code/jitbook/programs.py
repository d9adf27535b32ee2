"""Look inside programs: jaxprs, their equations, and a function walked down to compiled
code.

``stats`` counts what a jaxpr holds (equations by primitive, constants, literals, text
sizes) and ``side_by_side`` puts several variants side by side. ``walk`` takes a
function through jit's ahead- of-time stages (trace, lower, compile, call), timed by
``timing.stages``, and shows what each stage made.
"""

import collections
import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence

import jax
import jax.extend.core
import numpy as np

from jitbook import timing
from jitbook.arguments import whole_number
from jitbook.display import Markdown, clip_lines, table


def equations(jaxpr) -> Iterator:
    """Every equation of ``jaxpr``, including those inside loop bodies and branches."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from equations(sub)


def count_equations(jaxpr) -> int:
    """Equations in a jaxpr, counting those inside nested jaxprs (loop bodies, branches)
    too.

    Taught in Tracing through control flow and loops, Python loops unroll.
    """
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # a ClosedJaxpr holds its Jaxpr in .jaxpr
    if not isinstance(jaxpr, jax.extend.core.Jaxpr):
        raise TypeError(
            f"count_equations takes a jaxpr (from jax.make_jaxpr), "
            f"got {type(jaxpr).__name__}."
        )
    return sum(1 for _ in equations(jaxpr))


def _atom(v) -> str:
    if isinstance(v, jax.extend.core.Literal):
        return f"literal {np.asarray(v.val).item()!r} ({v.aval})"
    return str(v.aval)


def anatomy(jaxpr) -> Markdown:
    """A jaxpr taken apart, one row per constant, input, equation and output, each with
    its type.

    Taught in jaxprs, Reading a jaxpr.
    """
    if not hasattr(jaxpr, "eqns"):
        raise TypeError(
            f"anatomy takes a jaxpr (make_jaxpr(f)(x)), got {type(jaxpr).__name__}."
        )

    def row(part, type_, primitive="", reads=""):
        return {"part": part, "primitive": primitive, "reads": reads, "type": type_}

    rows = [row("constant", str(v.aval)) for v in jaxpr.constvars]
    rows += [row("input", str(v.aval)) for v in jaxpr.invars]
    rows += [
        row(
            "equation",
            ", ".join(str(v.aval) for v in e.outvars),
            f"`{e.primitive.name}`",
            ", ".join(_atom(v) for v in e.invars),
        )
        for e in jaxpr.eqns
    ]
    rows += [row("output", _atom(v)) for v in jaxpr.outvars]
    return table(rows)


def _nbytes(value) -> int:
    return int(np.asarray(value).nbytes)


@dataclasses.dataclass
class JaxprStats:
    """What a function's jaxpr holds, for given arguments: counts and sizes."""

    name: str
    jaxpr: object = dataclasses.field(repr=False)
    equations: int
    all_equations: int
    primitives: collections.Counter
    constants: int
    constant_bytes: int
    literals: int
    inputs: list[str]
    jaxpr_lines: int
    stablehlo_lines: int | None
    stablehlo_chars: int | None

    def sizes(self) -> dict:
        """The size figures as one row (no per-primitive counts)."""
        row = {
            "variant": self.name,
            "equations": self.equations,
            "with nested": self.all_equations,
            "constants": self.constants,
            "constant bytes": self.constant_bytes,
            "literals": self.literals,
            "jaxpr lines": self.jaxpr_lines,
        }
        if self.stablehlo_lines is not None:
            row["StableHLO lines"] = self.stablehlo_lines
            row["StableHLO characters"] = self.stablehlo_chars
        return row

    def _repr_markdown_(self) -> str:
        return side_by_side(self).text


def stats(
    fn: Callable,
    *args,
    name: str | None = None,
    static_argnums: int | Sequence[int] = (),
    lower: bool = True,
    **kwargs,
) -> JaxprStats:
    """Trace ``fn(*args, **kwargs)`` with ``jax.make_jaxpr`` and count what its jaxpr
    holds.

    With ``lower=True`` it also lowers ``jax.jit(fn)`` to StableHLO to count that text's
    lines.

    Taught in jaxprs, Counting what a jaxpr holds.
    """
    timing.check_callable(fn, "stats")
    jaxpr = jax.make_jaxpr(fn, static_argnums=static_argnums)(*args, **kwargs)
    eqns = list(equations(jaxpr))
    literals = sum(
        isinstance(v, jax.extend.core.Literal) for e in eqns for v in e.invars
    )
    hlo = None
    if lower:
        hlo = (
            jax.jit(fn, static_argnums=static_argnums)
            .trace(*args, **kwargs)
            .lower()
            .as_text()
        )
    return JaxprStats(
        name=name or getattr(fn, "__name__", type(fn).__name__),
        jaxpr=jaxpr,
        equations=len(jaxpr.eqns),
        all_equations=len(eqns),
        primitives=collections.Counter(e.primitive.name for e in eqns),
        constants=len(jaxpr.consts),
        constant_bytes=sum(_nbytes(c) for c in jaxpr.consts),
        literals=literals,
        inputs=[str(v.aval) for v in jaxpr.invars],
        jaxpr_lines=len(jaxpr.pretty_print(use_color=False).splitlines()),
        stablehlo_lines=None if hlo is None else len(hlo.splitlines()),
        stablehlo_chars=None if hlo is None else len(hlo),
    )


def side_by_side(*variants: JaxprStats, primitives: bool = True) -> Markdown:
    """Variants side by side: one column each, a row per size figure and (optionally)
    per primitive."""
    if not variants or not all(isinstance(v, JaxprStats) for v in variants):
        raise TypeError(
            "side_by_side takes one or more results of stats(...), e.g. "
            "side_by_side(stats(f, x), stats(g, x))."
        )
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(
            f"variant names must differ to be told apart, got {names}; pass name=... "
            "to stats."
        )
    sizes = [v.sizes() for v in variants]
    keys = [k for k in sizes[0] if k != "variant"] + [
        k for s in sizes[1:] for k in s if k not in sizes[0]
    ]
    rows = [{"": k, **{s["variant"]: s.get(k, "") for s in sizes}} for k in keys]
    if primitives:
        prims = sorted({p for v in variants for p in v.primitives})
        rows += [
            {"": f"`{p}`", **{v.name: v.primitives.get(p, 0) for v in variants}}
            for p in prims
        ]
    return table(rows)


COSTS = ("flops", "bytes accessed", "transcendentals")


def cost_summary(analysis) -> dict[str, float]:
    """Flops, bytes accessed and transcendentals from XLA's cost analysis.

    ``Compiled.cost_analysis()`` is a dict on current JAX and was a list of dicts (one
    per program) on older versions; both are accepted, lists are summed. A figure XLA
    leaves out counts as 0.

    Taught in jaxprs, The road to XLA.
    """
    if hasattr(analysis, "cost_analysis"):
        analysis = analysis.cost_analysis()
    if analysis is None:
        return {k: 0.0 for k in COSTS}
    parts = [analysis] if isinstance(analysis, dict) else list(analysis)
    if not all(isinstance(p, dict) for p in parts):
        raise TypeError(
            f"cost_summary takes a compiled function or its cost_analysis() (a dict "
            f"or a list of dicts), got {type(analysis).__name__}."
        )
    return {k: float(sum(p.get(k, 0.0) for p in parts)) for k in COSTS}


@dataclasses.dataclass
class Walk:
    """One function taken through trace, lower, compile and call, with what each stage
    produced."""

    stages: timing.Stages
    stablehlo: str
    cost: dict[str, float]
    excerpt_lines: int = 12

    @property
    def jaxpr_text(self) -> str:
        return self.stages.jaxpr.pretty_print(
            use_color=False
        )  # no terminal colour codes in Markdown

    @property
    def compiled(self):
        return self.stages.compiled

    def excerpt(self) -> str:
        """The first ``excerpt_lines`` lines of the StableHLO module, and how many lines
        were left out.
        """
        lines = self.stablehlo.splitlines()
        head = clip_lines("\n".join(lines[: self.excerpt_lines])).splitlines()
        if len(lines) > len(head):
            head.append(f"// ... {len(lines) - len(head)} more lines")
        return "\n".join(head)

    def _repr_markdown_(self) -> str:
        s = self.stages
        ms = lambda t: f"{1e3 * t:.1f} ms"  # noqa: E731
        cost = table(
            [
                {"figure": k, "value": int(v) if v.is_integer() else v}
                for k, v in self.cost.items()
            ]
        ).text
        return "\n\n".join(
            [
                f"**1. trace** ({ms(s.trace)}): the jaxpr\n\n"
                f"```\n{self.jaxpr_text}\n```",
                f"**2. lower** ({ms(s.lower)}): StableHLO, "
                f"{len(self.stablehlo.splitlines())} lines\n\n"
                f"```\n{self.excerpt()}\n```",
                f"**3. compile** ({ms(s.compile)}): "
                f"XLA's cost analysis of the executable\n\n{cost}",
                f"**4. call** ({ms(s.run)}): the first run of the executable",
            ]
        )


def walk(
    fn: Callable,
    *args,
    static_argnums: int | Sequence[int] = (),
    excerpt_lines: int = 12,
    **kwargs,
) -> Walk:
    """Take ``jax.jit(fn)`` through its ahead-of-time stages (timed by
    ``timing.stages``) and keep each product.

    Taught in jaxprs, The road to XLA.
    """
    timing.check_callable(fn, "walk")
    whole_number(excerpt_lines, "excerpt_lines")
    stages = timing.stages(fn, *args, static_argnums=static_argnums, **kwargs)
    return Walk(
        stages, stages.lowered.as_text(), cost_summary(stages.compiled), excerpt_lines
    )


_INSTRUCTION = re.compile(r"^\s*(ROOT )?%?([\w.-]+) = (\S+) (\w[\w-]*)\(")


def compiled_instructions(compiled) -> list[dict]:
    """The instructions of the optimized HLO's entry computation
    (``compiled.as_text()``), one row each: name, result type, opcode and whether it is
    the output (the ROOT). A ``fusion`` is one loop over memory that XLA made of several
    operations.

    Taught in jaxprs, What XLA did.
    """
    if not hasattr(compiled, "as_text"):
        raise TypeError(
            f"compiled_instructions takes a compiled function "
            f"(jax.jit(f).lower(x).compile()), got {type(compiled).__name__}."
        )
    text = compiled.as_text()
    entry = text[text.index("\nENTRY") :]
    entry = entry[: entry.index("\n}")]
    rows = []
    for line in entry.splitlines()[1:]:
        if (m := _INSTRUCTION.match(line)) is not None:
            rows.append(
                {
                    "instruction": m.group(2),
                    "type": re.sub(r"\{[\d,]*\}", "", m.group(3)),
                    "opcode": m.group(4),
                    "output": m.group(1)
                    is not None,  # the ROOT: what the program returns
                }
            )
    return rows
