"""Bind-time values of shape computations, and the static graph they give.

An ONNX model with symbolic dimensions computes shapes in its graph
(``Shape -> Gather -> Concat -> Reshape``, ``Shape -> Cast -> Mul -> Resize``,
``Range`` by a computed limit). acc-host keeps those computations as
operators (``_onnx_shape``, ``_onnx_size``, and the ``_dyn_*`` operators of
:mod:`acc_host.ops.dynamic_ops`, whose output shape depends on input
values), and works them out here, on the host, once the input shapes are
known:

* :class:`ValueInference` runs with shape inference: a ``_onnx_shape`` or
  ``_onnx_size`` node's value comes from its input's shape; a node reading
  such values (and small arguments, the model's constants) is evaluated with
  its numpy implementation; a ``_dyn_*`` node's output shape comes from its
  quantities' values. A value that depends on data (NonZero, a Reshape by
  a value computed from an input's contents) stays unknown, and so do the
  shapes after it.
* :func:`specialise` rewrites the graph for those values: each ``_dyn_*``
  node becomes its static operator (``Reshape``, ``_onnx_slice``,
  ``_onnx_resize``, ...) with the resolved attributes, each known value read
  by another operator becomes a constant variable, and the shape
  computations, now read by nothing, drop out. What is left is a static
  graph that partitions and plans like any other: an accelerator sees no
  shape arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..abi.tensor import numpy_dtype
from ..errors import AccHostError, GraphError, TensorError
from ..ops import registry
from ..ops.params import Attrs, format_value
from .symbol_json import Node

if TYPE_CHECKING:
    from . import Graph

__all__ = ["ValueInference", "specialise", "SHAPE_OPS", "MAX_VALUE_ELEMENTS", "is_dynamic",
           "first_value_input"]

#: Operators whose value is their input's shape (or size).
SHAPE_OPS = frozenset({"_onnx_shape", "_onnx_size"})

#: The largest value (elements) kept by value inference: shape computations
#: hold a handful; an argument larger than this is never read as a value.
MAX_VALUE_ELEMENTS = 4096

ValueOf = Callable[[str], "np.ndarray | None"]


def first_value_input(op: registry.OpDef) -> int | None:
    """The position of a dynamic operator's first value input (the inputs
    from there on are values), or None for other operators."""
    if op.resolve is None or not op.value_inputs:
        return None
    return op.value_inputs[0]


def is_dynamic(graph: Graph) -> bool:
    """Whether graph computes shapes (or has a data-dependent shape)."""
    return any(op is not None and (op.name in SHAPE_OPS or op.resolve is not None
                                   or op.data_dependent) for op in graph.ops)


def _shaped(shape: Sequence[int]) -> np.ndarray:
    """An array of shape that holds no memory (for _onnx_shape/_onnx_size)."""
    return np.lib.stride_tricks.as_strided(np.zeros((), np.uint8), shape=tuple(shape),
                                           strides=(0,) * len(shape))


def _needed(graph: Graph) -> set[int]:
    """Entries whose values decide a shape: the value inputs of dynamic
    operators and, upstream of them, what they are computed from (up to
    shape operators and variables)."""
    needed: set[int] = set()
    stack: list[int] = []
    for k, op in enumerate(graph.ops):
        first = None if op is None else first_value_input(op)
        if first is not None:
            stack.extend(graph.input_entries(k)[first:])
    producer_of = {entry: k for k in range(len(graph.nodes)) for entry in graph.output_entries(k)}
    while stack:
        entry = stack.pop()
        if entry in needed:
            continue
        needed.add(entry)
        k = producer_of[entry]
        op = graph.ops[k]
        if op is None or op.name in SHAPE_OPS:
            continue
        stack.extend(graph.input_entries(k))
    return needed


class ValueInference:
    """Values of shape computations, worked out during shape inference
    (``Graph.infer_shapes_values``). value_of(name): the value of a small
    argument (a model constant), or None when unknown."""

    def __init__(self, graph: Graph, value_of: ValueOf | None) -> None:
        self.graph = graph
        self.value_of = value_of or (lambda name: None)
        self.values: dict[int, np.ndarray] = {}
        self.needed = _needed(graph)
        self._derived: set[int] = set()
        self._looked_up: set[int] = set()
        self._variable = {graph.entry_start[k]: node.name for k, node in enumerate(graph.nodes)
                          if node.is_variable}
        self._variable_index = {graph.entry_start[k]: k for k, node in enumerate(graph.nodes)
                                if node.is_variable}

    def value(self, entry: int) -> np.ndarray | None:
        if entry in self.values:
            return self.values[entry]
        name = self._variable.get(entry)
        if name is not None and entry not in self._looked_up:
            self._looked_up.add(entry)
            value = self._declared_value(entry)
            if value is None:
                value = self.value_of(name)
            if value is not None and np.size(value) <= MAX_VALUE_ELEMENTS:
                self.values[entry] = np.asarray(value)
                return self.values[entry]
        return None

    def _declared_value(self, entry: int) -> np.ndarray | None:
        """The value a variable declares in its "__value__" attribute (the
        ONNX importer's shape-sized constants), in its "__dtype__"."""
        node = self.graph.nodes[self._variable_index[entry]]
        text = node.attrs.get("__value__")
        if text is None:
            return None
        try:
            dtype = numpy_dtype(int(node.attrs["__dtype__"])) if "__dtype__" in node.attrs \
                else None
            return np.asarray(json.loads(text), dtype=dtype)
        except (ValueError, TypeError, KeyError, TensorError) as error:
            raise GraphError(f"variable {node.name!r}: bad __value__ {text!r}: {error}") \
                from None

    def infer(self, k: int, op: registry.OpDef, attrs: Attrs,
              shapes: list[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
        """Shape inference of node k (the graph's rule), then its value."""
        first = first_value_input(op)
        entries = self.graph.input_entries(k)
        if first is not None:
            values = [self.value(entry) for entry in entries[first:]]
            missing = [op.input_names(attrs)[first + i] for i, v in enumerate(values) if v is None]
            if missing:
                raise registry.ShapeUnknownError(
                    f"{op.name}: the values of {', '.join(missing)} are not known")
            for position, shape in enumerate(shapes[:first]):
                if shape is None:
                    raise registry.ShapeUnknownError(
                        f"{op.name}: the shape of input {position} is unknown")
            result = op.resolve(attrs, list(shapes[:first]), values)  # type: ignore[misc,arg-type]
            if isinstance(result, np.ndarray):
                outputs: Sequence[Any] = [tuple(result.shape)]
                if result.size <= MAX_VALUE_ELEMENTS or self.graph.entry_start[k] in self.needed:
                    self._keep(k, result)
            else:
                static = registry.get(result[0])
                _, outputs = static.infer_shape(static.parse(result[1]), list(shapes[:first]))
            filled: Sequence[Any] = list(shapes)
        else:
            filled, outputs = op.infer_shape(attrs, shapes)
        if self.graph.entry_start[k] not in self.values:
            self._evaluate(k, op, attrs, list(filled), list(outputs))
        return filled, outputs

    def _keep(self, k: int, value: np.ndarray) -> None:
        entry = self.graph.entry_start[k]
        self.values[entry] = value
        self._derived.add(entry)

    def _evaluate(self, k: int, op: registry.OpDef, attrs: Attrs, shapes: list[Any],
                  out_shapes: list[Any]) -> None:
        graph = self.graph
        outputs = list(graph.output_entries(k))
        entries = graph.input_entries(k)
        if op.name in SHAPE_OPS:
            if shapes and shapes[0] is not None:
                result = op.run(attrs, [_shaped(shapes[0])])
                for entry, value in zip(outputs, result):
                    self.values[entry] = value
                    self._derived.add(entry)
            return
        wanted = any(entry in self.needed for entry in outputs)
        if not wanted and not any(entry in self._derived for entry in entries):
            return
        if op.data_dependent and not wanted:
            return
        values = [self.value(entry) for entry in entries]
        if any(value is None for value in values):
            return
        try:
            result = op.run(attrs, values)  # type: ignore[arg-type]
        except AccHostError:
            if wanted:
                raise
            return
        for entry, value, shape in zip(outputs, result, out_shapes):
            value = np.asarray(value)
            if shape is not None and value.shape != tuple(shape) and \
                    value.size == int(np.prod(shape)):
                value = value.reshape(shape)  # MXNet operators give 0-d results as (1,)
            if value.size <= MAX_VALUE_ELEMENTS:
                self.values[entry] = value
                self._derived.add(entry)


def specialise(graph: Graph, heads: Sequence[tuple[Node, int]], shapes: Sequence[Any],
               values: dict[int, np.ndarray]
               ) -> tuple[list[tuple[Node, int]], dict[str, np.ndarray], list[str]]:
    """(heads of the static graph, its constant variables by name and value,
    the dynamic nodes left as they are because their values depend on data)
    for graph with the shapes and values of its entries (see
    ValueInference)."""
    new: dict[int, Node] = {}
    constants: dict[str, np.ndarray] = {}
    constant_nodes: dict[int, Node] = {}
    values = dict(values)
    unresolved: list[str] = []

    def source(producer: Node, output: int, version: int) -> tuple[Node, int, int]:
        k = graph.index[id(producer)]
        entry = graph.entry_start[k] + output
        if not producer.is_variable and entry in values:
            node = constant_nodes.get(entry)
            if node is None:
                name = f"{producer.name}_output{output}__value"
                node = Node("null", name)
                constants[name] = values[entry]
                constant_nodes[entry] = node
            return node, 0, 0
        return new[k], output, version

    for k, node in enumerate(graph.nodes):
        op, attrs = graph.ops[k], graph.attrs[k]
        if op is None or attrs is None:
            new[k] = node
            continue
        first = first_value_input(op)
        entries = graph.input_entries(k)
        if first is not None:
            found = [values.get(entry) for entry in entries[first:]]
            known = [value for value in found if value is not None]
            if len(known) == len(found) \
                    and all(shapes[entry] is not None for entry in entries[:first]):
                assert op.resolve is not None
                result = op.resolve(attrs, [shapes[e] for e in entries[:first]], known)
                if isinstance(result, np.ndarray):
                    values[graph.entry_start[k]] = result
                    continue
                static_name, static_attrs = result
                new[k] = Node(static_name, node.name,
                              {key: format_value(v) for key, v in static_attrs.items()},
                              [source(*entry) for entry in node.inputs[:first]],
                              dict(node.extra))
                continue
            unresolved.append(node.name)
        elif op.data_dependent:
            unresolved.append(node.name)
        inputs = [source(*entry) for entry in node.inputs]
        if all(a[0] is b[0] and a[1] == b[1] for a, b in zip(inputs, node.inputs)):
            new[k] = node
        else:
            new[k] = Node(node.op, node.name, dict(node.attrs), inputs, dict(node.extra),
                          node.num_outputs)
    new_heads = []
    for node, output in heads:
        k = graph.index[id(node)]
        if k in new:  # an output stays the operator that computes it
            new_heads.append((new[k], output))
        else:  # resolved into a value (ConstantOfShape, Range)
            producer, out, _ = source(node, output, 0)
            new_heads.append((producer, out))
    from . import topological_order  # the package imports this module lazily

    reachable = {node.name for node in topological_order(new_heads) if node.is_variable}
    return new_heads, {name: value for name, value in constants.items()
                       if name in reachable}, unresolved
