"""ONNX control flow -> the host's control-flow nodes.

* ``If`` -> ``_cond`` (MXNet's semantics are ONNX's: a cond body passing
  the condition through, the then and else bodies). A constant condition
  is decided at import: the chosen branch's nodes are translated in place.
* ``Scan`` (opset 9 and later) -> ``_foreach``: scan inputs along an axis
  other than 0 are transposed first, reversed ones flipped, and the outputs
  moved back. Scan-8 (a batch axis first, each batch row scanned on its
  own) -> a ``_foreach`` over the batch whose body is the ``_foreach`` over
  the sequence.
* ``Loop`` -> ``_loop``: a trip count and a condition together, scan
  outputs as long as the loop ran, which no MXNet operator has (MXNet's
  ``_while_loop`` pads its outputs to ``max_iterations``).

A body is translated with the same translators as the graph, in a
:class:`BodyContext`: its formal inputs are variables, a value of an
enclosing graph it reads (an outer-scope value, at any depth) becomes a body
variable of that name and an input of the control-flow node, and constants
go to the model's parameters as everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import symbol as sym_mod
from ..graph import topological_order
from ..graph.symbol_json import Node, Subgraph
from ..ops import registry
from .proto import AttributeProto
from .translators import Unsupported, onnx_op, translator_for

__all__ = ["BodyContext", "implicit_inputs"]

#: The trip count of a Loop that has none (ONNX: run while the condition
#: holds); the host's MAX_LOOP_ITERATIONS stops a loop that never ends.
NO_TRIP_COUNT = np.iinfo(np.int64).max


def _context_type() -> Any:
    from .importer import Context  # the importer imports the translators: at call time

    return Context


class BodyContext:
    """Made by :func:`body_context`: an import Context for one body. A
    name the body does not define is looked up in the enclosing contexts;
    reading one makes a body variable (listed in ``outer``)."""


def body_context(parent: Any, graph: Any) -> Any:
    Context = _context_type()

    class _Body(Context, BodyContext):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(parent.opsets)
            self.parent = parent
            self.consts = parent.consts  # one set of parameters for the model
            self.shapes = dict(parent.shapes)
            self.dtypes = dict(parent.dtypes)
            self.outer: list[str] = []
            self.node_name = parent.node_name
            self._count = 0

        def knows(self, name: str) -> bool:
            """Whether name is a value of this body or of a graph around it."""
            if name in self.symbols or name in self.consts:
                return True
            if isinstance(self.parent, BodyContext):
                return bool(self.parent.knows(name))  # type: ignore[attr-defined]
            return name in self.parent.symbols

        def sym(self, name: str) -> Any:
            if name in self.symbols or name in self.consts:
                return super().sym(name)
            if self.knows_outside(name):
                self.symbols[name] = sym_mod.Variable(name)
                self.outer.append(name)
                return self.symbols[name]
            raise Unsupported(f"input {name!r} is produced by no node")

        def knows_outside(self, name: str) -> bool:
            if isinstance(self.parent, BodyContext):
                return bool(self.parent.knows(name))  # type: ignore[attr-defined]
            return name in self.parent.symbols

        def name(self, hint: str) -> str:
            self._count += 1
            return f"{self.node_name}_{hint}{self._count}"

    body = _Body()
    # importer imports this module (implicit_inputs): its helpers at call time.
    from .importer import _tensor_type, index_graph

    for value in [*graph.input, *graph.value_info, *graph.output]:
        shape, dtype = _tensor_type(value)
        if shape is not None:
            body.shapes[value.name] = shape
        if dtype is not None:
            body.dtypes[value.name] = dtype
    index_graph(body, graph, outputs_read=False)
    return body


def implicit_inputs(node: Any) -> list[str]:
    """The values of enclosing graphs that node's bodies read (at any
    depth): the names its subgraphs use but do not define."""
    found: list[str] = []

    def visit(graph: Any, outer_defined: set[str]) -> None:
        defined = set(outer_defined)
        defined.update(value.name for value in graph.input)
        defined.update(init.name for init in graph.initializer)
        for item in graph.node:
            for name in item.input:
                if name and name not in defined and name not in found:
                    found.append(name)
            for attr in item.attribute:
                if attr.type == AttributeProto.GRAPH:
                    visit(attr.g, defined)
                elif attr.type == AttributeProto.GRAPHS:
                    for body in attr.graphs:
                        visit(body, defined)
            defined.update(name for name in item.output if name)
        for value in graph.output:
            if value.name not in defined and value.name not in found:
                found.append(value.name)

    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            visit(attr.g, set())
        elif attr.type == AttributeProto.GRAPHS:
            for body in attr.graphs:
                visit(body, set())
    return found


def translate_nodes(cx: Any, graph: Any) -> None:
    """Translates a (body) graph's nodes into cx, in order."""
    from .importer import DEFAULT_DOMAINS, _bind_outputs, attr_value

    outer_name = cx.node_name
    for index, node in enumerate(graph.node):
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        opset = cx.opsets.get(domain, 0)
        fn = translator_for(domain, node.op_type, opset)
        if fn is None:
            raise Unsupported(f"its body has {node.op_type} (opset {opset}), which has no "
                              "translation")
        cx.node_name = f"{outer_name}_{node.name or node.op_type}_{index}".replace(" ", "_")
        attrs = {attr.name: attr_value(attr) for attr in node.attribute}
        try:
            results = fn(cx, node, attrs, list(node.input), opset)
        except Unsupported as error:
            raise Unsupported(f"its body's {node.op_type} {node.name!r}: {error}",
                              error.dynamic) from None
        _bind_outputs(cx, node, results)
    cx.node_name = outer_name


def _body(cx: Any, graph: Any, formal: Sequence[str] | None = None) -> tuple[Any, list[Any]]:
    """(the body's context, its output symbols): graph translated with its
    formal inputs as variables (formal: other names for them)."""
    body = body_context(cx, graph)
    for position, value in enumerate(graph.input):
        name = formal[position] if formal else value.name
        body.symbols[value.name] = sym_mod.Variable(name)
    translate_nodes(body, graph)
    outputs = [body.sym(value.name) for value in graph.output]
    return body, outputs


def _subgraph(outputs: Sequence[Any]) -> tuple[Subgraph, list[Node]]:
    heads = [symbol._outputs[0] for symbol in outputs]
    nodes = topological_order(heads)
    return (Subgraph(nodes, [(node, output, 0) for node, output in heads]),
            [node for node in nodes if node.is_variable])


def _node(cx: Any, op_name: str, bodies: list[Subgraph], inputs: Sequence[Any],
          attrs: dict[str, Any]) -> Any:
    """A control-flow node of op_name over inputs (symbols)."""
    text = {"num_args": str(len(inputs) + len(bodies))}
    text.update({key: str(list(value)) if isinstance(value, (list, tuple)) else str(value)
                 for key, value in attrs.items()})
    node = Node(op_name, cx.name(op_name.strip("_")), text,
                [(*symbol._outputs[0], 0) for symbol in inputs], subgraphs=bodies)
    op = registry.get(op_name)
    count = len(op.output_names(op.parse(text)))
    return sym_mod.Symbol([(node, output) for output in range(count)])


def _outer_input(cx: Any, name: str, inputs: list[Any], names: list[str]) -> int:
    """The node input of outer value name (added once)."""
    if name not in names:
        names.append(name)
        inputs.append(cx.sym(name))
    return len(inputs) - len(names) + names.index(name)


# ---- If -----------------------------------------------------------------------------------


@onnx_op("If", since=1)
def _if(cx, node, attrs, inputs, opset):
    cond = cx.const(inputs[0])
    if cond is not None:  # decided at import: the branch's nodes, in place
        branch = attrs["then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else
                       "else_branch"]
        cx.consumed.update(name for item in branch.node for name in item.input if name)
        cx.consumed.update(value.name for value in branch.output)
        translate_nodes(cx, branch)
        return [cx.consts[value.name] if value.name in cx.consts and value.name not in
                cx.symbols else cx.sym(value.name) for value in branch.output]
    node_inputs = [cx.sym(inputs[0])]
    pred = sym_mod.Variable(f"{cx.node_name}_cond")
    pred_body, _ = _subgraph([sym_mod._create("_copy", [pred], {},
                                              name=f"{cx.node_name}_pred")])
    bodies, locations = [pred_body], [[0]]
    names: list[str] = []
    for key in ("then_branch", "else_branch"):
        body, outputs = _body(cx, attrs[key])
        if any(not isinstance(value, sym_mod.Symbol) for value in outputs):
            raise Unsupported(f"its {key} has an output that is not a tensor")
        subgraph, variables = _subgraph([_single(body, value) for value in outputs])
        locations.append([_outer_input(cx, variable.name, node_inputs, names)
                          for variable in variables])
        bodies.append(subgraph)
    then_count = len(attrs["then_branch"].output)
    result = _node(cx, "_cond", bodies, node_inputs, {
        "cond_input_locs": locations[0], "then_input_locs": locations[1],
        "else_input_locs": locations[2], "num_outputs": then_count})
    return [result[k] for k in range(then_count)]


def _single(body: Any, value: Any) -> Any:
    """A body output as one symbol output."""
    return value if len(value) == 1 else value[0]


# ---- Loop ---------------------------------------------------------------------------------


@onnx_op("Loop", since=1)
def _loop(cx, node, attrs, inputs, opset):
    graph = attrs["body"]
    carried = [name for name in inputs[2:]]
    if len(graph.input) != 2 + len(carried):
        raise Unsupported(f"its body takes {len(graph.input)} inputs for {len(carried)} "
                          "loop-carried values (expected 2 more)")
    trip = inputs[0] if len(inputs) > 0 and inputs[0] else None
    cond = inputs[1] if len(inputs) > 1 and inputs[1] else None
    if trip is None:
        trip = _constant(cx, "trip_count", np.array(NO_TRIP_COUNT, np.int64))
    if cond is None:
        cond = _constant(cx, "cond", np.array(True))
    node_inputs = [cx.sym(trip), cx.sym(cond)] + [cx.sym(name) for name in carried]
    body, outputs = _body(cx, graph)
    formal = {value.name: position for position, value in enumerate(graph.input)}
    subgraph, variables = _subgraph(outputs)
    names: list[str] = []
    locs = []
    for variable in variables:
        if variable.name in formal and variable.name not in body.outer:
            locs.append(formal[variable.name])
        else:
            locs.append(_outer_input(cx, variable.name, node_inputs, names))
    count = len(carried)
    scans = len(graph.output) - 1 - count
    if scans < 0:
        raise Unsupported(f"its body has {len(graph.output)} outputs for {count} "
                          "loop-carried values")
    result = _node(cx, "_loop", [subgraph], node_inputs, {
        "num_carried": count, "body_input_locs": locs, "num_outputs": count + scans})
    return [result[k] for k in range(count + scans)]


def _constant(cx: Any, hint: str, value: np.ndarray) -> str:
    name = f"{cx.node_name}_{hint}"
    cx.consts[name] = value
    return name


# ---- Scan ---------------------------------------------------------------------------------


def _axes(attrs: dict[str, Any], key: str, count: int) -> list[int]:
    values = list(attrs.get(key) or [0] * count)
    if len(values) != count:
        raise Unsupported(f"{key} has {len(values)} entries for {count} values")
    return [int(value) for value in values]


def _rank(cx: Any, name: str) -> int | None:
    shape = cx.shape(name) or cx.infer_shape(name)
    return None if shape is None else len(shape)


def _move_axis(cx: Any, symbol: Any, axis: int, rank: int | None, to_front: bool) -> Any:
    """symbol with axis moved to the front (or the front moved to axis)."""
    if axis == 0:
        return symbol
    if rank is None:
        raise Unsupported("a scan axis other than 0 needs the value's rank at import")
    axis = axis % rank
    order = list(range(rank))
    if to_front:
        order = [axis] + [k for k in order if k != axis]
    else:
        order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
    return cx.op("transpose", symbol, axes=tuple(order))


@onnx_op("Scan", since=8)
def _scan(cx, node, attrs, inputs, opset):
    graph = attrs["body"]
    count = int(attrs["num_scan_inputs"])
    if opset < 9:
        if inputs and inputs[0]:
            raise Unsupported("Scan-8 with sequence_lens (rows of different lengths) is not "
                              "supported")
        return _scan8(cx, attrs, inputs[1:], count)
    states, scanned = inputs[:len(inputs) - count], inputs[len(inputs) - count:]
    in_axes = _axes(attrs, "scan_input_axes", count)
    in_dirs = _axes(attrs, "scan_input_directions", count)
    data = []
    for name, axis, direction in zip(scanned, in_axes, in_dirs):
        value = _move_axis(cx, cx.sym(name), axis, _rank(cx, name), True)
        data.append(_reversed(cx, value) if direction else value)
    results = _foreach(cx, graph, [cx.sym(name) for name in states], data)
    scans = len(graph.output) - len(states)
    out_axes = _axes(attrs, "scan_output_axes", scans)
    out_dirs = _axes(attrs, "scan_output_directions", scans)
    final = results[scans:]
    outputs = []
    for k in range(scans):
        value = results[k]
        if out_dirs[k]:
            value = _reversed(cx, value)
        rank = None
        if out_axes[k]:
            from .importer import _tensor_type

            shape = _tensor_type(graph.output[len(states) + k])[0]
            rank = None if shape is None else len(shape) + 1
        outputs.append(_move_axis(cx, value, out_axes[k], rank, False))
    return final + outputs


def _reversed(cx: Any, symbol: Any) -> Any:
    """symbol with axis 0 in reverse order."""
    return cx.op("slice", symbol, begin=(None,), end=(None,), step=(-1,))


def _foreach(cx: Any, graph: Any, states: Sequence[Any], data: Sequence[Any],
             formal: Sequence[str] | None = None) -> list[Any]:
    """A _foreach of graph (a Scan body: states, then scan slices; outputs
    new states, then scan outputs) over data; returns the node's outputs
    (scan outputs stacked, then final states)."""
    body, outputs = _body(cx, graph, formal)
    count = len(states)
    heads = [_single(body, value) for value in outputs[count:] + outputs[:count]]
    subgraph, variables = _subgraph(heads)
    positions = {variable.name: k for k, variable in enumerate(variables)}
    formal_names = [sym.name for sym in
                    (body.symbols[value.name] for value in graph.input)]
    missing = [name for name in formal_names if name not in positions]
    if missing:
        raise Unsupported(f"its body does not read its input(s) {', '.join(missing)}")
    node_inputs = list(data) + list(states)
    names: list[str] = []
    remain = []
    for k, variable in enumerate(variables):
        if variable.name not in formal_names:
            _outer_input(cx, variable.name, node_inputs, names)
            remain.append(k)
    result = _node(cx, "_foreach", [subgraph], node_inputs, {
        "in_data_locs": [positions[name] for name in formal_names[count:]],
        "in_state_locs": [positions[name] for name in formal_names[:count]],
        "num_out_data": len(outputs) - count, "num_outputs": len(outputs),
        "remain_locs": remain})
    return [result[k] for k in range(len(outputs))]


def _scan8(cx: Any, attrs: dict[str, Any], inputs: Sequence[str], count: int) -> list[Any]:
    """Scan-8: axis 0 of every input is a batch; each batch row is scanned
    on its own (a _foreach over the rows whose body scans one row)."""
    graph = attrs["body"]
    if any(attrs.get("directions") or []):
        raise Unsupported("Scan-8 with reversed directions is not supported")
    states, scanned = list(inputs[:len(inputs) - count]), list(inputs[len(inputs) - count:])
    # The outer body: its inputs are one batch row of every value, named
    # after the values; it holds the inner _foreach over the sequence.
    prefix = f"{cx.node_name}_row"
    outer = body_context(cx, graph)
    row_states = [sym_mod.Variable(f"{prefix}_{name}") for name in states]
    row_data = [sym_mod.Variable(f"{prefix}_{name}") for name in scanned]
    inner = _foreach(outer, graph, row_states, row_data)
    scans = len(graph.output) - len(states)
    heads = [_single(outer, value) for value in inner]  # scan outputs, then final states
    subgraph, variables = _subgraph(heads)
    positions = {variable.name: k for k, variable in enumerate(variables)}
    node_inputs = [cx.sym(name) for name in scanned] + [cx.sym(name) for name in states]
    # The row of every value is a data slice; the outer body carries no state.
    row_names = [f"{prefix}_{name}" for name in scanned + states]
    names: list[str] = []
    remain = []
    for k, variable in enumerate(variables):
        if variable.name not in row_names:
            _outer_input(cx, variable.name, node_inputs, names)
            remain.append(k)
    missing = [name for name in row_names if name not in positions]
    if missing:
        raise Unsupported(f"its body does not read its input(s) {', '.join(missing)}")
    result = _node(cx, "_foreach", [subgraph], node_inputs, {
        "in_data_locs": [positions[name] for name in row_names], "in_state_locs": [],
        "num_out_data": len(heads), "num_outputs": len(heads), "remain_locs": remain})
    # The node stacks every output over the batch: final states, then scans.
    return [result[scans + k] for k in range(len(states))] + [result[k] for k in range(scans)]
