"""The symptom index's table: one ``Symptom`` per message the book shows, with its
pattern, meaning, section and producer (``symptoms_producers``).

To add a message a new page shows: append a ``Symptom`` to ``INDEX`` with a short
pattern (tables clip long cells), the meaning, the section id and heading it is shown
under, and a producer that calls what that page calls.

Taught in Symptom index, The index.
"""

import dataclasses
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import symptoms_producers as produce
from jitbook.errors import raised


@dataclasses.dataclass(frozen=True)
class Symptom:
    """One message: the class (or ``log``/``warning``) it comes as, a regular expression
    that recognises it, what it means, where the book shows it (the section's id and the
    heading it sits under), and its producer."""

    kind: str
    pattern: str
    meaning: str
    section: str
    heading: str
    produce: Callable[[], str]

    def matches(self, message: str) -> bool:
        return re.search(self.pattern, message) is not None


# --- the index

INDEX: list[Symptom] = [
    # tracing
    Symptom(
        "TracerBoolConversionError",
        r"TracerBoolConversionError: Attempted boolean conversion of traced array",
        "Python `if`/`while`/`and` needed True or False from a traced value; use "
        "`lax.cond`, `jnp.where`, or make the value static.",
        "sec-tracing-control",
        "Branching on a value fails",
        lambda: produce.err(jax.jit(produce.tracing("sin_or_cos")), jnp.ones(5), 1.0),
    ),
    Symptom(
        "ConcretizationTypeError",
        r"ConcretizationTypeError: Abstract tracer value encountered where concrete",
        "Python or NumPy needed a concrete value (a size, an index, a shape) from a "
        "tracer; use a static argument or a fixed-size form (`size=`).",
        "sec-tracing-shapes",
        "Shapes that depend on values",
        lambda: produce.err(jax.jit(jnp.nonzero), produce.v()),
    ),
    Symptom(
        "TracerIntegerConversionError",
        r"TracerIntegerConversionError: The __index__\(\) method was called",
        "`range(n)`, `operator.index(n)` or indexing a Python list or tuple with `n` "
        "needed a Python int from a traced value (`int(n)` raises "
        "`ConcretizationTypeError` instead); make `n` static or loop with "
        "`lax.fori_loop`.",
        "sec-minijit-control-flow",
        "Python control flow meets a tracer",
        lambda: produce.err(jax.jit(produce.tracing("python_loop")), jnp.ones(3), 3),
    ),
    Symptom(
        "NonConcreteBooleanIndexError",
        r"NonConcreteBooleanIndexError: Array boolean indices must be concrete",
        "`x[x > 0]` has a shape that depends on values; use `jnp.where` or "
        "`size=` to keep a fixed shape.",
        "sec-tracing-shapes",
        "Shapes that depend on values",
        lambda: produce.err(jax.jit(produce.tracing("positives")), produce.v()),
    ),
    Symptom(
        "UnexpectedTracerError",
        r"UnexpectedTracerError: Encountered an unexpected tracer",
        "A tracer escaped its trace (stored in a global or a list) and was used "
        "later; return values instead of storing them.",
        "sec-tracing-side-effects",
        "Appending to a global list",
        produce.leaked_tracer,
    ),
    Symptom(
        "Exception",
        r"Exception: Leaked trace",
        "`jax.checking_leaks()` caught a tracer kept alive after its trace ended.",
        "sec-tracing-side-effects",
        "Appending to a global list",
        produce.checking_leaks,
    ),
    Symptom(
        "ValueError",
        r"Reverse-mode differentiation does not work for lax\.while_loop",
        "`grad` through a loop whose length is traced; give `fori_loop` static "
        "bounds (it becomes a scan) or use `lax.scan`.",
        "sec-tracing-loops",
        "A traced trip count cannot be differentiated backwards",
        produce.while_grad,
    ),
    Symptom(
        "ValueError",
        r"Non-hashable static arguments are not supported",
        "A static argument must be hashable (an array is not); pass arrays traced, "
        "or a tuple of Python numbers.",
        "sec-recompilation-static",
        "Static arguments",
        produce.unhashable_static,
    ),
    Symptom(
        "IndexError",
        r"IndexError: Array slice indices must have static start/stop/step",
        "A slice bound is traced; make it static or use `lax.dynamic_slice` with a "
        "static size.",
        "sec-recompilation",
        "Control flow without recompiling",
        lambda: produce.err(jax.jit(produce.recompilation("first_k")), jnp.ones(5), 2),
    ),
    # cache-miss explanations and compile logs
    Symptom(
        "log",
        r"^TRACING CACHE MISS at",
        "`jax_explain_cache_misses`: this call traced anew; the lines under it say "
        "what differed from the keys in the cache.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "TRACING CACHE MISS"),
    ),
    Symptom(
        "log",
        r"^all previously seen cache keys differ",
        "The function was seen before, but with another key; the next lines name "
        "the closest one and how it differs.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "all previously seen"),
    ),
    Symptom(
        "log",
        r"^different input types",
        "An argument's shape, dtype, weak type or sharding changed since the "
        "closest cached call.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "different input types"),
    ),
    Symptom(
        "log",
        r"^\* at \S+, now .* and before ",
        "Which argument changed, and its type now and before (weak types and "
        "shardings included).",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "* at "),
    ),
    Symptom(
        "log",
        r"^Tracing context doesn't match",
        "A setting that is part of the key (here a config option) changed "
        "between the calls.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "Tracing context"),
    ),
    Symptom(
        "log",
        r"^\* jax_\w+ differs: now",
        "The config option that changed, its value now and before.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "* jax_"),
    ),
    Symptom(
        "log",
        r"^cache miss explanation unavailable",
        "JAX could not say why; in this book it follows a new static argument value.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.miss_story, "cache miss explanation unavailable"),
    ),
    Symptom(
        "log",
        r"^never seen function",
        "A trace missed jit's tracing cache and no entry holds this function "
        "object: its first trace, or a new lambda or closure at each call (a new "
        "`jax.jit(f)` of an `f` already traced logs nothing).",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "never seen function"),
    ),
    Symptom(
        "log",
        r"^but seen another function defined on the same line",
        "The same source line made a new function again: jit is built inside a "
        "loop; build it once, outside.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "but seen another function"),
    ),
    Symptom(
        "log",
        r"^Finished tracing \S+ for jit in [\d.]+ sec",
        "`jax.log_compiles`: the Python function was traced into a jaxpr, in that "
        "time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "Finished tracing"),
    ),
    Symptom(
        "log",
        r"^Compiling jit\(.*\) with global shapes and types",
        "`jax.log_compiles`: a new program goes to XLA, for these abstract "
        "arguments and shardings.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "Compiling jit("),
    ),
    Symptom(
        "log",
        r"^Finished jaxpr to MLIR module conversion",
        "`jax.log_compiles`: the jaxpr was lowered to StableHLO, in that time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "Finished jaxpr to MLIR"),
    ),
    Symptom(
        "log",
        r"^Finished XLA compilation of",
        "`jax.log_compiles`: XLA compiled the program, in that time.",
        "sec-recompilation-diagnose",
        "Diagnosing a recompile",
        produce.first(produce.loop_story, "Finished XLA compilation"),
    ),
    # stages and compiled programs
    Symptom(
        "RuntimeError",
        r"RuntimeError: re-tracing function ",
        "`jax.no_tracing(True)` stopped a call that left jit's C++ fast path: a new "
        "trace, or a call that does not trace at all (a function holding "
        "`jax.debug.print`, a committed array).",
        "sec-jaxprs-shapes",
        "Calling an executable with other shapes",
        produce.no_tracing,
    ),
    Symptom(
        "TypeError",
        r"Argument types differ from the types for which",
        "A compiled executable runs only on the shapes and dtypes it was compiled "
        "for; call the jitted function, which compiles again.",
        "sec-jaxprs-shapes",
        "Calling an executable with other shapes",
        produce.compiled_other_shape,
    ),
    # methods
    Symptom(
        "TypeError",
        r"Error interpreting argument to .* as an abstract array",
        "An argument (often `self`) is neither an array nor a pytree; make the "
        "class a pytree or mark the argument static.",
        "sec-methods",
        "The problem: `@jax.jit` on a method",
        lambda: produce.err(
            produce.methods("DecoratedLayer")(produce.w(), "relu").predict, produce.x()
        ),
    ),
    Symptom(
        "FrozenInstanceError",
        r"FrozenInstanceError: cannot assign to field",
        "The object is frozen (a frozen dataclass or an Equinox module): build a new "
        "one with `dataclasses.replace`.",
        "sec-methods-static-self",
        "Strategy 2: `self` as a static argument",
        produce.frozen,
    ),
    Symptom(
        "TypeError",
        r"unhashable type: '",
        "A value used as a static argument or in a cache key cannot be hashed (an "
        "array, a dict).",
        "sec-methods-static-self",
        "Strategy 2: `self` as a static argument",
        lambda: (
            str(
                raised(
                    produce.methods("HashedLayer")(produce.w(), "relu").predict,
                    produce.x(),
                )
            )
            .strip()
            .splitlines()[-1]
        ),
    ),
    Symptom(
        "ValueError",
        r"The truth value of an array with more than one element is ambiguous",
        "An array sits in static pytree metadata, and comparing keys compared it "
        "elementwise; keep arrays in the children.",
        "sec-methods-metadata",
        "Pitfall: an array in the static metadata",
        produce.metadata_cause,
    ),
    Symptom(
        "AttributeError",
        r"object has no attribute '_cache_size'",
        "A method under `eqx.filter_jit` is a bound wrapper without jit's private "
        "cache methods.",
        "sec-methods-eqx-cache",
        "One cache for all instances",
        produce.cache_size,
    ),
    # artifacts
    Symptom(
        "RuntimeError",
        r"Array has been deleted with shape=",
        "The array was donated to a jitted call (or deleted); use the result "
        "instead, or copy before donating.",
        "sec-artifacts-donation",
        "Buffer donation",
        produce.donated_reuse,
    ),
    Symptom(
        "warning",
        r"Some donated buffers were not usable",
        "A donated input matched no output's shape and dtype, so nothing was "
        "reused; donate only what an output can take over.",
        "sec-artifacts-unusable",
        "When donation cannot be used",
        produce.donation_unusable,
    ),
    Symptom(
        "ValueError",
        r"Shape mismatch for args\[\d+\]\.shape\[\d+\]",
        "An exported program was called with a fixed dimension of another size.",
        "sec-artifacts-export",
        "One export, many batch sizes",
        lambda: produce.export_mismatch(constraint=False),
    ),
    Symptom(
        "ValueError",
        r"Input shapes do not match the symbolic shape constraint",
        "A symbolic dimension broke a constraint given at export (`b >= 2`).",
        "sec-artifacts-export",
        "One export, many batch sizes",
        lambda: produce.export_mismatch(constraint=True),
    ),
    Symptom(
        "ValueError",
        r"was exported for platforms .* but it is used on",
        "An export runs only on the platforms it was made for: export with "
        '`platforms=("cpu", "cuda")` to ship one program to both.',
        "sec-artifacts-export",
        "One export, many platforms",
        produce.other_platform,
    ),
    Symptom(
        "JaxRuntimeError",
        r"No such compile option",
        "`compiler_options` named an option this XLA does not know.",
        "sec-artifacts-knobs",
        "The other knobs of `jax.jit`",
        produce.compile_option,
    ),
    # devices
    Symptom(
        "RuntimeError",
        r"jax_num_cpu_devices config should be updated",
        "The number of CPU devices is fixed when JAX starts; set it first thing.",
        "sec-devices",
        "Many devices on one CPU",
        lambda: produce.late_devices(ours=False),
    ),
    Symptom(
        "RuntimeError",
        r"JAX's backend already started with \d+ device\(s\)",
        "The book's `devices.use_cpu_devices` saying the same, with what to do.",
        "sec-devices",
        "Many devices on one CPU",
        lambda: produce.late_devices(ours=True),
    ),
    Symptom(
        "ShardingTypeError",
        r"ShardingTypeError: Contracting dimensions are sharded",
        "In explicit sharding mode, a matmul over a sharded dimension needs "
        "`out_sharding=`.",
        "sec-devices-sharded",
        "Sharded inputs under jit",
        produce.sharded_contraction,
    ),
    # the worked example
    Symptom(
        "ValueError",
        r"Y \(counts\) must be whole numbers",
        "The book's `pln.fit` refusing counts that are not whole numbers.",
        "sec-pln",
        "The data and the problem size",
        produce.pln_counts,
    ),
    Symptom(
        "ValueError",
        r"Exception raised while checking equality of metadata",
        "Arrays in a pytree's static metadata were compared as part of jit's key.",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        produce.pln_seed_copy,
    ),
    Symptom(
        "TypeError",
        r"Shapes must be 1D sequences of concret",
        "A size became a tracer (it rode in a scan carry); keep sizes as Python "
        "ints read from shapes.",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        produce.size_in_carry,
    ),
    Symptom(
        "RuntimeWarning",
        r"RuntimeWarning: invalid value encountered in log",
        "NumPy's log of a negative number: a NaN, with a warning (JAX gives the NaN "
        "silently).",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        produce.numpy_log_warning,
    ),
    # pitfalls
    Symptom(
        "TypeError",
        r"JAX arrays are immutable",
        "`x[i] = v` on a JAX array; write `x = x.at[i].set(v)`.",
        "sec-pitfalls-state",
        "State under jit",
        lambda: produce.err(jnp.arange(4.0).__setitem__, 0, 9.0),
    ),
    Symptom(
        "ValueError",
        r"mutable array references cannot be returned",
        "A jitted function returned a `jax.new_ref`; return its value (`ref[...]`) "
        "or pass the reference in.",
        "sec-pitfalls-state",
        "State under jit",
        lambda: produce.err(produce.pitfalls("leak_ref"), jnp.ones(3)),
    ),
    Symptom(
        "log",
        r"^Invalid nan value encountered in the output of a jax\.jit function",
        "`jax_debug_nans` found a NaN and reruns the function op by op to find "
        "where it came from.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: produce.log(produce.debug_nans_lines(), "Invalid nan value"),
    ),
    Symptom(
        "FloatingPointError",
        r"FloatingPointError: invalid value \(nan\) encountered in",
        "`jax_debug_nans` names the operation that made the NaN.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: produce.log(produce.debug_nans_lines(), "FloatingPointError"),
    ),
    Symptom(
        "checkify",
        r"out-of-bounds indexing for array of shape",
        "`checkify` with `index_checks` caught an index that jit would have "
        "clamped silently.",
        "sec-pitfalls-debugging",
        "Debugging inside compiled code",
        lambda: produce.pitfalls("checked_take")(jnp.arange(3.0), 5)[0].strip(),
    ),
    # exercises
    Symptom(
        "NotImplementedError",
        r"NotImplementedError: replace that line with your code",
        "An exercise's answer still has the starter's `raise NotImplementedError()`: "
        "replace that line with your code.",
        "sec-teachers",
        "How students check their work",
        produce.unfinished_answer,
    ),
    Symptom(
        "TracerArrayConversionError",
        r"TracerArrayConversionError: The numpy\.ndarray conversion method",
        "NumPy (`np.sin`, `np.asarray`) was given a tracer; use `jnp` inside jit, "
        "or compute with NumPy outside it.",
        "sec-tracing-numpy",
        "NumPy and Python values inside jit",
        lambda: produce.err(jax.jit(lambda v: np.sin(v)), jnp.arange(3.0)),
    ),
    Symptom(
        "ValueError",
        r"None is not a valid value for jnp\.array",
        "A pytree class whose constructor checks its fields was rebuilt with "
        "`None` leaves (as `jax.tree.map` does); keep checks out of unflatten.",
        "sec-methods-unflatten-values",
        "What `tree_unflatten` receives",
        produce.none_leaves,
    ),
    Symptom(
        "ValueError",
        r"Sharding passed to jit does not match the sharding on the respective arg",
        "An argument is committed to another sharding than `in_shardings` says; "
        "move it with `jax.device_put` or drop `in_shardings`.",
        "sec-devices-placement",
        "Saying where values go",
        produce.sharding_mismatch,
    ),
    Symptom(
        "RuntimeError",
        r"with_sharding_constraint requires a non-empty mesh in context",
        "A bare `PartitionSpec` names mesh axes, so it needs `jax.set_mesh(mesh)` "
        "around the call (or a full `NamedSharding`).",
        "sec-devices-placement",
        "Saying where values go",
        produce.no_mesh,
    ),
    Symptom(
        "TracerControlFlowError",
        r"TracerControlFlowError: Python's if/while \(bool\) needs the value",
        "The book's own small jit refusing a Python branch on a traced value, as "
        "`jax.jit` does with `TracerBoolConversionError`.",
        "sec-minijit-control-flow",
        "Python control flow meets a tracer",
        produce.minijit_branch,
    ),
    Symptom(
        "TracerControlFlowError",
        r"TracerControlFlowError: an index \(__index__\) needs the value",
        "The book's own small jit refusing `range(n)` on a traced `n`, as `jax.jit` "
        "does with `TracerIntegerConversionError`.",
        "sec-minijit-control-flow",
        "Python control flow meets a tracer",
        produce.minijit_index,
    ),
    # the PLN pages
    Symptom(
        "TypeError",
        r"is not a valid JAX type",
        "An object that is neither an array, a scalar nor a registered pytree reached "
        "a JAX function (here a plain class carried through `lax.scan`); register it "
        "as a pytree (`jax.tree_util.register_dataclass`) or pass its arrays.",
        "sec-pln-seed-bugs",
        "Bugs in the 2023 code",
        lambda: produce.err(produce.plain_class_through_scan),
    ),
]
