"""Exercises of the chapter "jit on a GPU": each checker reads the answer's exported
program (trip count, precision per dot) or asks it about compiled programs drawn per
student, all on the CPU."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import gpu
from jitbook.display import plural

from . import ask, exercise, expect, judge


@exercise(
    "gpu.static-trip-count",
    answer="decay",
    topic="static against traced trip counts",
    difficulty=1,
    hint="A fori_loop whose bounds are Python ints at trace time has a known trip "
    "count: make n static (static_argnums) so it is a Python int inside.",
)
def _static_trip_count(rng):
    size, n = int(rng.integers(4, 40)), int(rng.integers(20, 90))
    x = rng.uniform(0.5, 2.0, size).astype(np.float32)
    (program,) = yield [ask.export(ask.spec((size,)), n)]
    traced = len(program.in_avals) > 1
    args = (x, np.int32(n)) if traced else (x,)
    expect(
        judge.agrees(program(*args), x.astype(np.float64) * 0.999**n, atol=1e-5),
        f"decays x by 0.999 per iteration, n = {n} times",
        f"decay(x, {n}) is not x * 0.999**{n}.",
    )
    expect(
        program.ops()["while"] >= 1,
        "keeps the loop (a while loop in the program)",
        "the program has no while loop: keep the loop (lax.fori_loop), so the trip "
        "count is something XLA reads.",
    )
    expect(
        not traced,
        "n is not an input of the program",
        "n reached the program as an input (a traced value), so the loop tests its "
        "condition at every turn. Mark it static when you jit decay.",
    )
    compiled = jax.jit(program.exported.call).lower(x).compile().as_text()
    expect(
        gpu.trip_count(compiled) == n,
        f"XLA knows the loop runs {n} times",
        f"compiled here, the while loop has no known trip count of {n}: the loop's "
        "bounds must be Python ints when decay is traced.",
    )


def _dot_precisions(text: str) -> dict[tuple[str, str], str]:
    """(operand shapes, result shape) -> the precision of each ``dot_general``."""
    found = {}
    for line in text.splitlines():
        if "dot_general" in line and "->" in line:
            prec = re.search(r"precision = \[(\w+), (\w+)\]", line)
            shape = re.search(r"->\s*tensor<([0-9x]+)x\w+>", line)
            found[shape.group(1) if shape else "?"] = (
                prec.group(1) if prec else "DEFAULT"
            )
    return found


@exercise(
    "gpu.one-exact-dot",
    answer="gram_and_step",
    topic="matmul precision for one dot",
    difficulty=2,
    hint="jnp.matmul(a, b, precision='highest') sets the precision of that one "
    "product; a jax.default_matmul_precision block would set both.",
)
def _one_exact_dot(rng):
    p = int(rng.integers(2, 9))
    n = p + int(rng.integers(1, 30))  # n != p: the two products differ in shape
    M = rng.standard_normal((n, p)).astype(np.float32)
    Omega = rng.standard_normal((p, p)).astype(np.float32)
    (program,) = yield [ask.export(ask.spec((n, p)), ask.spec((p, p)))]
    got = program(M, Omega)
    M64 = M.astype(np.float64)
    expect(
        type(got) in (tuple, list)
        and len(got) == 2
        and judge.agrees(got[0], M64.T @ M64, atol=1e-4)
        and judge.agrees(got[1], M64 @ Omega, atol=1e-4),
        "returns M^T M and M Omega",
        f"for a {n} x {p} M, gram_and_step(M, Omega) must return (M.T @ M, M @ Omega).",
    )
    found = _dot_precisions(program.text)
    gram, step = f"{p}x{p}", f"{n}x{p}"
    expect(
        found.get(gram) == "HIGHEST",
        "M^T M is computed at precision HIGHEST",
        f"the product M.T @ M has precision {found.get(gram, 'DEFAULT')}; ask for "
        "'highest' on that one product.",
    )
    expect(
        found.get(step) == "DEFAULT",
        "M Omega keeps the default precision",
        f"the product M @ Omega has precision {found.get(step)}: only M^T M should "
        "change.",
    )


def _blocks(rng) -> dict:
    """Building blocks of the programs to count: each a function of a square matrix."""
    k = int(rng.integers(40, 80))
    unroll = int(rng.integers(1, 4))  # a while loop stays, unrolled or not by XLA
    return {
        "elementwise kernels": lambda x: jnp.tanh(x) * 2 + 1,
        "a product and a sum": lambda x: x @ x + jnp.sum(x, axis=0),
        "a sort between two passes": lambda x: jnp.sort(jnp.exp(x)) - x,
        f"a loop of {k} walled kernels": lambda x: gpu.scan_unrolled(
            x, k, unroll=unroll, fusable=False
        ),
        "a cumulative sum": lambda x: jnp.cumsum(jnp.cos(x), axis=0) * x,
    }


def _programs(rng) -> list[tuple[str, str]]:
    """Compiled programs drawn per student: one to three blocks chained, at a drawn
    size."""
    size = int(rng.integers(8, 96))
    blocks = list(_blocks(rng).items())
    loop = next(i for i, (name, _) in enumerate(blocks) if name.startswith("a loop"))
    made = []
    for turn in range(4):
        picked = list(rng.choice(len(blocks), size=int(rng.integers(1, 4))))
        if turn == 0 and loop not in picked:  # fusions in a loop body, at least once
            picked[int(rng.integers(len(picked)))] = loop
        parts = [blocks[i] for i in picked]

        def chained(x, parts=parts):
            for _, fn in parts:
                x = fn(x)
            return x

        x = jax.ShapeDtypeStruct((size, size), jnp.float32)
        text = jax.jit(chained).lower(x).compile().as_text()
        made.append((" then ".join(name for name, _ in parts), _without_sources(text)))
    return made


_SOURCES = re.compile(
    r", metadata=\{[^{}]*\}"
    r"|\n\n(FileNames|FunctionNames|FileLocations|StackFrames)\n.*?(?=\n\n|\Z)",
    re.S,
)


def _without_sources(hlo: str) -> str:
    """The program without where it was traced from (paths and lines of this process),
    so a seed draws the same text in every process."""
    return _SOURCES.sub("", hlo)


@exercise(
    "gpu.kernel-count",
    answer="count_fusions",
    topic="kernels in a compiled program",
    difficulty=2,
    hint="In compiled.as_text(), find the block that starts with ENTRY and count its "
    "lines whose instruction is fusion(...).",
)
def _kernel_count(rng):
    programs = _programs(rng)
    results = yield [ask.call(text) for _, text in programs]
    for (name, text), got in zip(programs, results, strict=True):
        want = sum(gpu.opcode(ln) == "fusion" for ln in gpu.kernels(text))
        got = judge.number(got, "count_fusions")
        expect(
            type(got) is int,
            "returns a whole number",
            f"count_fusions returned a {type(got).__name__}; return an int.",
        )
        expect(
            got == want,
            f"{name}: {plural(want, 'fusion')} in the entry computation",
            f"for {name}, count_fusions says {got}; the ENTRY computation has {want} "
            "fusion instructions (count only the ENTRY block, not the fused "
            "computations it calls).",
        )
