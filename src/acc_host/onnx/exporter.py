"""mx.onnx.export_model: an MXNet symbol and its parameters -> an ONNX model.

The walk: load the symbol and parameters (objects or files), infer every
shape and dtype from the given input shapes with the host's own inference,
then hand each node to its exporter (:mod:`export_ops`), which writes ONNX
nodes computing the node's outputs under MXNet's output names
(``<node>_output``, ``<node>_output0``, ...). Parameters become initializers,
the other arguments graph inputs of the given shapes and dtypes. Every
operator (or operator form) that cannot be written is reported in one
:class:`UnsupportedOnnxExportError`.

The model is static-shape: MXNet's reshape codes, pooling conventions and
every other shape-dependent attribute are resolved for the input shapes
given. onnx is used only to build and save the protobuf.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import ndarray as nd
from .. import symbol as sym_mod
from ..errors import InvalidArgumentError, ShapeError, UnsupportedOnnxExportError
from ..graph import Graph
from ._onnx import require_onnx
from .export_builder import ExportUnsupported, GraphBuilder, OpNode, onnx_dtype
from .export_ops import canonical, exporter_for

__all__ = ["export_model", "DEFAULT_OPSET", "MIN_OPSET"]

LOG = logging.getLogger("acc_host.onnx.export")

# Opset 17 has LayerNormalization and is read by every onnxruntime since 1.14.
DEFAULT_OPSET = 17
MIN_OPSET = 13

# Inputs an operator does not read at inference (SoftmaxOutput's label):
# variables used only there are not graph inputs.
_UNREAD_INPUTS = {"SoftmaxOutput": {1}}


def _load_symbol(sym: Any) -> sym_mod.Symbol:
    if isinstance(sym, (str, os.PathLike)):
        return sym_mod.load(Path(os.fspath(sym)))
    if not isinstance(sym, sym_mod.Symbol):
        raise InvalidArgumentError(f"export_model: sym must be a Symbol or a path to a "
                                   f"-symbol.json file, got {type(sym).__name__}")
    return sym


def _as_numpy(value: Any) -> np.ndarray:
    return value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)


def _load_params(params: Any) -> dict[str, np.ndarray]:
    """name -> array from a .params path, a dict (arg and aux together, keys
    with or without MXNet's "arg:"/"aux:" prefixes) or [arg_params, aux_params]."""
    if isinstance(params, (str, os.PathLike)):
        loaded = nd.load(Path(os.fspath(params)))
        if not isinstance(loaded, Mapping):
            raise InvalidArgumentError(f"export_model: {params} holds no parameter names")
        params = loaded
    if isinstance(params, (list, tuple)):
        merged: dict[str, Any] = {}
        for part in params:
            merged.update(part or {})
        params = merged
    if not isinstance(params, Mapping):
        raise InvalidArgumentError("export_model: params must be a path, a dict, or "
                                   f"[arg_params, aux_params], got {type(params).__name__}")
    result = {}
    for key, value in params.items():
        name = key.split(":", 1)[1] if key.startswith(("arg:", "aux:")) else key
        result[name] = _as_numpy(value)
    return result


def _shape_list(in_shapes: Any, count: int, names: list[str]) -> list[tuple[int, ...]]:
    if in_shapes is None:
        raise InvalidArgumentError(f"export_model: in_shapes is required (one shape for each "
                                   f"data input: {', '.join(names)})")
    shapes = list(in_shapes)
    if shapes and all(isinstance(d, (int, np.integer)) for d in shapes):
        shapes = [shapes]  # one shape given bare
    if len(shapes) != count:
        raise InvalidArgumentError(f"export_model: {len(shapes)} input shapes for {count} data "
                                   f"inputs ({', '.join(names)}); every other argument must be "
                                   "in params")
    return [tuple(int(d) for d in shape) for shape in shapes]


def _type_list(in_types: Any, count: int) -> list[np.dtype]:
    if isinstance(in_types, (list, tuple)):
        if len(in_types) != count:
            raise InvalidArgumentError(f"export_model: {len(in_types)} input types for "
                                       f"{count} data inputs")
        return [np.dtype(t) for t in in_types]
    return [np.dtype(in_types)] * count


def _unread_variables(graph: Graph) -> set[int]:
    """Variables read only through inputs an operator ignores at inference."""
    unread: set[int] = set()
    read: set[int] = set()
    for node, op in zip(graph.nodes, graph.ops):
        if op is None:
            continue
        skipped = _UNREAD_INPUTS.get(op.name, set())
        for position, (producer, _, _) in enumerate(node.inputs):
            if producer.is_variable:
                (unread if position in skipped else read).add(graph.index[id(producer)])
    return unread - read


class _Walk:
    """One export: the symbol's graph, inferred shapes and dtypes, and the
    ONNX graph being built."""

    def __init__(self, symbol: sym_mod.Symbol, params: dict[str, np.ndarray],
                 in_shapes: Any, in_types: Any, opset: int) -> None:
        self.symbol = symbol
        self.graph = graph = symbol.graph
        unread = _unread_variables(graph)
        variables = [k for k, node in enumerate(graph.nodes) if node.is_variable]
        self.data = [k for k in variables
                     if graph.nodes[k].name not in params and k not in unread]
        names = [graph.nodes[k].name for k in self.data]
        shapes = _shape_list(in_shapes, len(self.data), names)
        types = _type_list(in_types, len(self.data))
        self.data_shapes = dict(zip(names, shapes))
        self.data_types = dict(zip(names, types))
        self.params = {graph.nodes[k].name: params[graph.nodes[k].name]
                       for k in variables if graph.nodes[k].name in params}
        given_shapes = {**{n: v.shape for n, v in self.params.items()}, **self.data_shapes}
        given_types = {**{n: v.dtype for n, v in self.params.items()}, **self.data_types}
        self.shapes = graph.infer_shapes(given_shapes)
        self.dtypes = graph.infer_dtypes(given_types)
        self._check_inferred()
        self.builder = GraphBuilder(opset)
        self.values: list[str] = [""] * graph.num_entries

    def _check_inferred(self) -> None:
        graph, missing = self.graph, []
        for k, node in enumerate(graph.nodes):
            for output in range(graph.num_visible(k)):
                entry = graph.entry_start[k] + output
                if self.shapes[entry] is None or self.dtypes[entry] is None:
                    missing.append(node.name)
        if missing:
            raise ShapeError("export_model: the shapes or dtypes of "
                             f"{', '.join(sorted(set(missing)))} cannot be inferred from the "
                             "given input shapes")

    def _shape(self, entry: int) -> tuple[int, ...]:
        shape = self.shapes[entry]
        assert shape is not None  # _check_inferred
        return tuple(shape)

    def _name_values(self) -> None:
        graph, builder = self.graph, self.builder
        for k, node in enumerate(graph.nodes):
            start = graph.entry_start[k]
            if node.is_variable:
                self.values[start] = builder.reserve(node.name)
        for k, node in enumerate(graph.nodes):
            op, attrs = graph.ops[k], graph.attrs[k]
            if op is None or attrs is None:
                continue
            for output, suffix in enumerate(op.output_names(attrs)):
                self.values[graph.entry_start[k] + output] = builder.reserve(
                    f"{node.name}_{suffix}")

    def run(self, verbose: bool) -> list[tuple[str, str, str]]:
        """Writes every node; returns the (node, operator, reason) problems."""
        self._name_values()
        graph, builder = self.graph, self.builder
        problems = []
        for k, node in enumerate(graph.nodes):
            op, attrs = graph.ops[k], graph.attrs[k]
            if op is None or attrs is None:
                continue
            exporter = exporter_for(node.op)
            if exporter is None:
                problems.append((node.name, node.op, "no ONNX exporter for this operator"))
                continue
            inputs = graph.input_entries(k)
            outputs = [graph.entry_start[k] + j for j in range(graph.num_visible(k))]
            op_node = OpNode(
                name=node.name, op=canonical(node.op), attrs=attrs,
                inputs=[self.values[e] for e in inputs],
                input_shapes=[self._shape(e) for e in inputs],
                input_dtypes=[np.dtype(self.dtypes[e]) for e in inputs],
                outputs=[self.values[e] for e in outputs],
                output_shapes=[self._shape(e) for e in outputs],
                output_dtypes=[np.dtype(self.dtypes[e]) for e in outputs])
            builder.scope = node.name
            first = len(builder.nodes)
            try:
                exporter(builder, op_node)
            except ExportUnsupported as error:
                problems.append((node.name, node.op, str(error)))
                del builder.nodes[first:]
                continue
            if verbose:
                written = ", ".join(n.op_type for n in builder.nodes[first:])
                LOG.info("%s (%s) -> %s", node.name, node.op, written)
        return problems

    def _value_info(self, name: str, entry: int) -> Any:
        onnx = self.builder.onnx
        return onnx.helper.make_tensor_value_info(name, onnx_dtype(self.dtypes[entry]),
                                                  list(self._shape(entry)))

    def model(self, graph_name: str) -> Any:
        graph, builder = self.graph, self.builder
        onnx = builder.onnx
        inputs = [self._value_info(self.values[graph.entry_start[k]], graph.entry_start[k])
                  for k in self.data]
        outputs, seen = [], set()
        builder.scope = "output"
        for node, output in self.symbol._outputs:
            entry = graph.entry(node, output)
            name = self.values[entry]
            if node.is_variable or name in seen:
                name = builder.identity(name, builder.reserve(f"{name}_output"))
            seen.add(name)
            outputs.append(self._value_info(name, entry))
        consumed = {name for n in builder.nodes for name in n.input}
        initializers = []
        for k, node in enumerate(graph.nodes):
            if node.is_variable and node.name in self.params and node.name in consumed:
                value = self.params[node.name].astype(self.dtypes[graph.entry_start[k]],
                                                      copy=False)
                initializers.append(onnx.numpy_helper.from_array(value, node.name))
        initializers += [init for init in builder.initializers if init.name in consumed]
        declared = {v.name for v in inputs + outputs}
        value_info = [self._value_info(self.values[e], e)
                      for k, node in enumerate(graph.nodes) if not node.is_variable
                      for e in range(graph.entry_start[k],
                                     graph.entry_start[k] + graph.num_visible(k))
                      if self.values[e] not in declared]
        produced = {name for n in builder.nodes for name in n.output}
        value_info = [info for info in value_info if info.name in produced]
        onnx_graph = onnx.helper.make_graph(builder.nodes, graph_name, inputs, outputs,
                                            initializers, value_info=value_info)
        opsets = [onnx.helper.make_opsetid("", builder.opset)]
        model = onnx.helper.make_model(onnx_graph, opset_imports=opsets,
                                       producer_name="acc_host", producer_version="0.1.0")
        model.ir_version = onnx.helper.find_min_ir_version_for(opsets)
        return model


def _raise(problems: list[tuple[str, str, str]]) -> None:
    lines = [f"  {name} ({op}): {reason}" for name, op, reason in problems]
    raise UnsupportedOnnxExportError(
        f"ONNX export: {len(problems)} node(s) cannot be exported:\n" + "\n".join(lines),
        problems)


def _opset(opset_version: int | None) -> int:
    onnx = require_onnx()
    highest = onnx.defs.onnx_opset_version()
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= highest:
        raise InvalidArgumentError(f"export_model: opset_version {opset} is outside the "
                                   f"supported range {MIN_OPSET}..{highest}")
    return opset


def export_model(sym: Any, params: Any, in_shapes: Any = None, in_types: Any = np.float32,
                 onnx_file_path: str | os.PathLike[str] | None = None, verbose: bool = False,
                 dynamic: bool = False, dynamic_input_shapes: Sequence[Any] | None = None,
                 run_shape_inference: bool = False, input_type: Any = None,
                 input_shape: Any = None, large_model: bool = False,
                 opset_version: int | None = None) -> Any:
    """See :func:`acc_host.onnx.export_model`."""
    onnx = require_onnx()
    if dynamic or dynamic_input_shapes:
        raise InvalidArgumentError(
            "export_model: dynamic input shapes are not supported; the model is written for "
            "the static in_shapes given (reshapes and pooling windows are resolved for them)")
    if input_shape is not None:
        in_shapes = input_shape
    if input_type is not None:
        in_types = input_type
    opset = _opset(opset_version)
    symbol = _load_symbol(sym)
    walk = _Walk(symbol, _load_params(params), in_shapes, in_types, opset)
    problems = walk.run(verbose)
    if problems:
        _raise(problems)
    name = Path(os.fspath(onnx_file_path)).stem if onnx_file_path else "acc_host_model"
    model = walk.model(name)
    if run_shape_inference:
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    if onnx_file_path is None:
        return model
    path = os.fspath(onnx_file_path)
    if large_model:
        onnx.save_model(model, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=Path(path).name + ".data")
    else:
        onnx.save_model(model, path)
    if verbose:
        LOG.info("wrote %s (opset %d, %d nodes)", path, opset, len(model.graph.node))
    return path
