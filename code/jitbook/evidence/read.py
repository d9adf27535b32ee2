"""Evidence read back in the grader's process: plain values with limits, and
exported programs as data to inspect and run.

Nothing here runs Python the student wrote: values are JSON and ``.npy`` bytes read
with ``allow_pickle=False``; a program is StableHLO deserialized by ``jax.export``,
refused when it calls back into a host, and run by XLA on inputs the grader draws.
"""

import base64
import collections
import dataclasses
import io
import re

import numpy as np

MAX_BYTES = 64 * 2**20  # all the evidence of one notebook, as read
MAX_ARRAY = 16 * 2**20  # bytes of one array
_CUSTOM_CALL = re.compile(r"custom_call\s*@([\w.$-]+)")
_OP = re.compile(r"\b(stablehlo|chlo|mhlo|func|sdy)\.([a-z_]+)")


class Unreadable(ValueError):
    """Evidence that is not what the collector writes."""


@dataclasses.dataclass(frozen=True)
class Failed:
    """A request the answer did not meet: it raised, or was missing."""

    message: str
    line: str = ""
    missing: str = ""
    placeholder: bool = False


def value(data, depth: int = 0):
    """A collected value: exact builtin types, tuples, lists, str-keyed dicts and
    NumPy arrays; anything else is ``Unreadable``."""
    if depth > 20 or not isinstance(data, dict) or len(data) != 1:
        raise Unreadable("a value is not in the collector's form")
    ((tag, inner),) = data.items()
    if tag == "py" and type(inner) in (bool, int, str, type(None)):
        return inner
    if tag == "float" and type(inner) is str and len(inner) < 40:
        return float(inner)
    if tag == "npy" and type(inner) is str:
        return _array(inner)
    if tag in ("tuple", "list") and type(inner) is list:
        made = [value(v, depth + 1) for v in inner]
        return tuple(made) if tag == "tuple" else made
    if tag == "dict" and type(inner) is dict:
        return {str(k): value(v, depth + 1) for k, v in inner.items()}
    if tag == "other" and type(inner) is str:
        return Other(inner[:200])
    raise Unreadable(f"a value tagged {str(tag)[:20]!r}")


@dataclasses.dataclass(frozen=True)
class Other:
    """A value of a type the collector does not copy (a class instance, a subclass)."""

    type_name: str


def _array(text: str) -> np.ndarray:
    raw = base64.b64decode(text, validate=True)
    if len(raw) > MAX_ARRAY:
        raise Unreadable(f"an array of {len(raw):,} bytes (at most {MAX_ARRAY:,})")
    array = np.load(io.BytesIO(raw), allow_pickle=False)
    if array.dtype.kind not in "biufc":
        raise Unreadable(f"an array of dtype {array.dtype}")
    return array


class Program:
    """An exported program: its signature and StableHLO to read, and a way to run it
    here on the grader's inputs."""

    def __init__(self, serialized: bytes) -> None:
        from jax import export

        self.exported = export.deserialize(bytearray(serialized))
        self.text = self.exported.mlir_module()
        hosts = [t for t in self.custom_calls() if "callback" in t.lower()]
        if hosts:
            raise Unreadable(f"the program calls back into a host ({hosts[0]})")

    @property
    def in_avals(self) -> tuple:
        return tuple(self.exported.in_avals)

    @property
    def out_avals(self) -> tuple:
        return tuple(self.exported.out_avals)

    def custom_calls(self) -> list[str]:
        return _CUSTOM_CALL.findall(self.text)

    def ops(self) -> collections.Counter:
        """How often each StableHLO operation occurs (``while``, ``dot_general``)."""
        return collections.Counter(name for _, name in _OP.findall(self.text))

    def __call__(self, *args):
        """Run the program on ``args``; the results as NumPy arrays."""
        import jax

        out = self.exported.call(*args)
        return jax.tree_util.tree_map(np.asarray, out)


def evidence(item) -> object:
    """One collected answer: a value, a ``Program``, a text or a ``Failed``."""
    if not isinstance(item, dict):
        raise Unreadable("an answer is not a JSON object")
    if "missing" in item:
        return Failed(
            "",
            missing=str(item["missing"])[:100],
            placeholder=bool(item.get("placeholder")),
        )
    if "error" in item:
        return Failed(
            str(item["error"])[:600],
            str(item.get("line", ""))[:300],
            placeholder=bool(item.get("placeholder")),
        )
    if "value" in item:
        return value(item["value"])
    if "exported" in item and type(item["exported"]) is str:
        raw = base64.b64decode(item["exported"], validate=True)
        return Program(raw)
    if "text" in item and type(item["text"]) is str:
        return item["text"]
    raise Unreadable("an answer of no known kind")


def size(evidence_json) -> int:
    """Bytes of the evidence as JSON text (checked against ``MAX_BYTES``)."""
    import json

    return len(json.dumps(evidence_json))
