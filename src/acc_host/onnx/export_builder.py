"""The ONNX graph under construction, as the per-operator exporters see it.

An exporter (one function per MXNet operator, see :mod:`export_ops`) gets a
:class:`GraphBuilder` and an :class:`OpNode` describing one MXNet node with
every shape and dtype already inferred, and appends ONNX nodes that write
the node's outputs to the value names ``node.outputs``. Helpers here create
constants (initializers), fresh value names and the common small patterns
(Reshape to a static shape, Cast, Unsqueeze, reductions) in the form the
target opset wants.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops.params import Attrs
from ._onnx import require_onnx

__all__ = ["ExportUnsupported", "OpNode", "GraphBuilder", "onnx_dtype"]

Shape = tuple[int, ...]


class ExportUnsupported(Exception):
    """Raised by an exporter for an operator form ONNX cannot express; the
    exporter collects every one and reports them in one error."""


@dataclass(frozen=True)
class OpNode:
    """One MXNet node: its attributes, and per input and visible output the
    ONNX value name, static shape and dtype."""

    name: str
    op: str
    attrs: Attrs
    inputs: list[str]
    input_shapes: list[Shape]
    input_dtypes: list[np.dtype]
    outputs: list[str]
    output_shapes: list[Shape]
    output_dtypes: list[np.dtype]

    @property
    def shape(self) -> Shape:
        """The first input's shape."""
        return self.input_shapes[0]

    @property
    def dtype(self) -> np.dtype:
        """The first input's dtype."""
        return self.input_dtypes[0]

    @property
    def out(self) -> str:
        """The first output's value name."""
        return self.outputs[0]


def onnx_dtype(dtype: Any) -> int:
    """The TensorProto element type of a numpy dtype."""
    onnx = require_onnx()
    return int(onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


class GraphBuilder:
    """Nodes and initializers of the graph being written, for one opset."""

    def __init__(self, opset: int) -> None:
        self.onnx = require_onnx()
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.scope = "graph"
        self.used_names: set[str] = set()
        self._counter = itertools.count()

    # ---- names and constants ----------------------------------------------------

    def reserve(self, name: str) -> str:
        """name, or name with a numeric suffix when it is taken."""
        candidate, suffix = name, 1
        while candidate in self.used_names:
            candidate = f"{name}_{suffix}"
            suffix += 1
        self.used_names.add(candidate)
        return candidate

    def fresh(self, hint: str) -> str:
        """A new value name inside the current node's scope."""
        return self.reserve(f"{self.scope}__{hint}{next(self._counter)}")

    def const(self, value: Any, hint: str = "const", dtype: Any = None) -> str:
        """An initializer holding value; its name."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
        return name

    def int64s(self, values: Sequence[int], hint: str = "shape") -> str:
        """A 1-D int64 initializer (shapes, axes, starts and ends)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint)

    def scalar(self, value: float, dtype: Any, hint: str = "scalar") -> str:
        """A 0-d initializer of dtype, converted as MXNet converts scalars."""
        with np.errstate(all="ignore"):
            return self.const(np.asarray(value, dtype=np.float64).astype(dtype), hint)

    # ---- nodes -----------------------------------------------------------------------

    def add(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | int = 1,
            **attrs: Any) -> list[str]:
        """Appends an ONNX node; outputs are names, or a count of fresh names.
        Attributes whose value is None are left out. Returns the outputs."""
        names = ([self.fresh(op_type.lower()) for _ in range(outputs)]
                 if isinstance(outputs, int) else list(outputs))
        node = self.onnx.helper.make_node(
            op_type, list(inputs), names, name=self.reserve(f"{self.scope}/{op_type}"),
            **{key: value for key, value in attrs.items() if value is not None})
        self.nodes.append(node)
        return names

    def add1(self, op_type: str, inputs: Sequence[str], out: str | None = None,
             **attrs: Any) -> str:
        """add() for one output (a fresh name unless out is given)."""
        return self.add(op_type, inputs, [out] if out else 1, **attrs)[0]

    # ---- small patterns ---------------------------------------------------------------

    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        return self.add1("Reshape", [x, self.int64s(shape)], out)

    def identity(self, x: str, out: str | None = None) -> str:
        return self.add1("Identity", [x], out)

    def cast(self, x: str, dtype: Any, out: str | None = None) -> str:
        return self.add1("Cast", [x], out, to=onnx_dtype(dtype))

    def to_bool(self, x: str) -> str:
        return self.add1("Cast", [x], to=self.onnx.TensorProto.BOOL)

    def unsqueeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.add1("Unsqueeze", [x, self.int64s(axes, "axes")], out)

    def transpose(self, x: str, perm: Sequence[int], out: str | None = None) -> str:
        return self.add1("Transpose", [x], out, perm=list(perm))

    def reduce(self, op_type: str, x: str, axes: Sequence[int] | None, keepdims: bool,
               out: str | None = None) -> str:
        """A Reduce* node: axes as an input (ReduceSum from opset 13, the
        others from 18) or as an attribute; None reduces every axis."""
        keep = int(keepdims)
        if axes is None:
            return self.add1(op_type, [x], out, keepdims=keep)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.add1(op_type, [x, self.int64s(axes, "axes")], out, keepdims=keep)
        return self.add1(op_type, [x], out, axes=list(axes), keepdims=keep)

    def to_shape(self, x: str, current: Shape, wanted: Shape, out: str | None = None) -> str:
        """x reshaped to wanted when its static shape differs (an Identity
        into out when it already has it and out is given)."""
        if tuple(current) != tuple(wanted):
            return self.reshape(x, wanted, out)
        return self.identity(x, out) if out else x
