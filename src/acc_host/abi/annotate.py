"""The annotated graph JSON that plugins receive (mxnet_acc.h, section 8).

The host adds, as string attributes: "__out_shapes__" and "__out_dtypes__"
on every node, "__kind__" ("data" or "weight") on every variable,
"__op_version__" and "__dev_id__" on every operator node; with sparse
entries (ABI 1.2, mxnet_acc.h section 12), "__out_stypes__" on a node with a
sparse visible output and "__in_stypes__" on an operator node reading one.
This module writes those annotations and reads them back to learn a graph's
inputs and outputs.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi.operator_versions import OP_VERSION_ATTR, op_version
from ..abi.sparse import stype_code
from ..abi.tensor import TensorSpec, dtype_code, numpy_dtype
from ..errors import InvalidArgumentError

__all__ = ["annotate", "annotate_graph", "annotate_symbol", "output_name", "GraphSignature",
           "signature"]

DATA, WEIGHT = "data", "weight"


def _attrs(node: dict[str, Any]) -> dict[str, str]:
    """The node's attributes, with older MXNet files' "attr" and "param"
    merged into "attrs" as the ABI promises."""
    attrs = node.setdefault("attrs", {})
    for legacy in ("attr", "param"):
        attrs.update(node.pop(legacy, None) or {})
    return attrs


OUT_STYPES, IN_STYPES = "__out_stypes__", "__in_stypes__"


def _format_shapes(specs: Sequence[TensorSpec]) -> str:
    return json.dumps([list(spec.shape) for spec in specs], separators=(",", ":"))


def annotate(graph: Mapping[str, Any], node_outputs: Sequence[Sequence[TensorSpec]],
             weights: Iterable[str], dev_id: int = 0, *, in_place: bool = False
             ) -> dict[str, Any]:
    """A copy of graph (MXNet symbol JSON as a dict) with the annotations
    (graph itself, annotated, when in_place: a dict the caller made for it).

    node_outputs[i] lists the visible outputs of node i; variables named in
    weights are marked "weight", all other variables "data".
    """
    annotated = dict(graph) if in_place else copy.deepcopy(dict(graph))
    nodes = annotated.get("nodes", [])
    if len(node_outputs) != len(nodes):
        raise InvalidArgumentError(
            f"{len(node_outputs)} output lists for a graph of {len(nodes)} nodes")
    weight_names = set(weights)
    for node, outputs in zip(nodes, node_outputs):
        attrs = _attrs(node)
        attrs["__out_shapes__"] = _format_shapes(outputs)
        attrs["__out_dtypes__"] = json.dumps([dtype_code(spec.dtype) for spec in outputs])
        if any(spec.stype for spec in outputs):
            attrs[OUT_STYPES] = json.dumps([spec.stype for spec in outputs])
        if node["op"] != "null":
            in_stypes = [_input_stype(node_outputs, entry) for entry in node.get("inputs", ())]
            if any(in_stypes):
                attrs[IN_STYPES] = json.dumps(in_stypes)
        if node["op"] == "null":
            attrs["__kind__"] = WEIGHT if node["name"] in weight_names else DATA
        else:
            attrs[OP_VERSION_ATTR] = str(op_version(node["op"]))
            attrs["__dev_id__"] = str(dev_id)
    return annotated


def _input_stype(node_outputs: Sequence[Sequence[TensorSpec]], entry: Sequence[int]) -> int:
    producer, index = int(entry[0]), int(entry[1])
    outputs = node_outputs[producer] if 0 <= producer < len(node_outputs) else ()
    # A hidden output (BatchNorm's statistics) is dense.
    return outputs[index].stype if index < len(outputs) else 0


def annotate_symbol(symbol: Any, shapes: Mapping[str, Sequence[int]],
                    weights: Iterable[str] | Mapping[str, Any],
                    dtypes: Mapping[str, Any] | None = None,
                    dev_id: int = 0,
                    stypes: Mapping[str, str | int] | None = None) -> dict[str, Any]:
    """The annotated JSON of a Symbol, inferring every node's output shapes
    and dtypes from the given input shapes (and dtypes, float32 by default).

    weights names the variables that are weights; a mapping of names to
    arrays (numpy arrays, NDArrays: anything with ``shape`` and ``dtype``)
    also gives their shapes and dtypes where shapes and dtypes do not, which
    a weight read only by operators that cannot infer it backwards (a
    scalar operand, Gather's table, a Concat operand: an imported ONNX
    model's constants) needs."""
    document = symbol.json_document() if hasattr(symbol, "json_document") else symbol.tojson()
    return annotate_graph(symbol.graph, document, shapes, weights, dtypes, dev_id, stypes)


def annotate_graph(graph: Any, graph_json: str | dict[str, Any],
                   shapes: Mapping[str, Sequence[int]],
                   weights: Iterable[str] | Mapping[str, Any],
                   dtypes: Mapping[str, Any] | None = None,
                   dev_id: int = 0,
                   stypes: Mapping[str, str | int] | None = None) -> dict[str, Any]:
    """:func:`annotate_symbol` for a :class:`acc_host.graph.Graph` and its
    symbol JSON (the text, or the parsed dict, which is annotated in
    place). stypes gives the storage type ("csr", "row_sparse") of sparse
    variables (ABI 1.2; only for a plugin that accepts sparse
    tensors, see :func:`acc_host.abi.sparse.accepts_sparse`); operator
    outputs are dense."""
    variable_stypes = {name: stype_code(stype) for name, stype in (stypes or {}).items()}
    shapes = dict(shapes)
    dtypes = dict(dtypes or {})
    if isinstance(weights, Mapping):
        names = {node.name for node in graph.nodes if node.is_variable}
        for name, value in weights.items():
            if name not in names:
                continue
            shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
            if shape is None or dtype is None:
                raise InvalidArgumentError(
                    f"weight {name!r}: expected an array (with shape and dtype), got "
                    f"{type(value).__name__}")
            shapes.setdefault(name, tuple(int(d) for d in shape))
            dtypes.setdefault(name, np.dtype(dtype))
    entry_shapes = graph.infer_shapes(shapes)
    entry_dtypes = graph.infer_dtypes(dtypes)
    node_outputs = []
    for k, node in enumerate(graph.nodes):
        entries = range(graph.entry_start[k], graph.entry_start[k] + graph.num_visible(k))
        unknown = [entry for entry in entries if entry_shapes[entry] is None]
        if unknown:
            raise InvalidArgumentError(f"cannot annotate: the shape of {node.name!r} is unknown")
        stype = variable_stypes.get(node.name, 0) if node.is_variable else 0
        node_outputs.append([TensorSpec(entry_shapes[entry],
                                        entry_dtypes[entry] or np.dtype(np.float32), stype)
                             for entry in entries])
    # (the parsed JSON is this call's own: annotated in place, not copied)
    document = json.loads(graph_json) if isinstance(graph_json, str) else graph_json
    return annotate(document, node_outputs, weights, dev_id, in_place=True)


def output_name(node_name: str, index: int, num_outputs: int) -> str:
    """Name of output index of a node, by the rule of mxnet_acc.h."""
    return f"{node_name}_output" if num_outputs <= 1 else f"{node_name}_output{index}"


def _node_specs(node: Mapping[str, Any]) -> list[TensorSpec]:
    attrs = node.get("attrs", {})
    try:
        shapes = json.loads(attrs["__out_shapes__"])
        dtypes = json.loads(attrs["__out_dtypes__"])
        stypes = json.loads(attrs.get(OUT_STYPES, "[]")) or [0] * len(shapes)
        return [TensorSpec(shape, numpy_dtype(code), int(stype))
                for shape, code, stype in zip(shapes, dtypes, stypes)]
    except (KeyError, ValueError, TypeError) as error:
        raise InvalidArgumentError(
            f"node {node.get('name')!r} lacks valid shape/dtype annotations: {error}") from None


@dataclass(frozen=True)
class GraphSignature:
    """What an annotated graph takes and returns, in graph order."""

    data: dict[str, TensorSpec]
    weights: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]


def signature(graph: Mapping[str, Any]) -> GraphSignature:
    """Reads the inputs and named outputs of an annotated graph."""
    nodes = graph["nodes"]
    specs = [_node_specs(node) for node in nodes]
    data: dict[str, TensorSpec] = {}
    weights: dict[str, TensorSpec] = {}
    for node, node_specs in zip(nodes, specs):
        if node["op"] == "null":
            kind = node.get("attrs", {}).get("__kind__")
            (weights if kind == WEIGHT else data)[node["name"]] = node_specs[0]
    outputs = {}
    for head in graph["heads"]:
        node_index, index = head[0], head[1]
        node = nodes[node_index]
        outputs[output_name(node["name"], index, len(specs[node_index]))] = \
            specs[node_index][index]
    return GraphSignature(data, weights, outputs)
