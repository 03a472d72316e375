"""``mx.sym.contrib``: MXNet 1.9's symbolic control flow, ``foreach``,
``while_loop`` and ``cond``, and the registered ``_contrib_*`` operators.

Each control-flow function calls the user's Python functions once, on new
variables, inside an ``AttrScope(__subgraph_name__=...)``, so every node they
make is marked as the body's; the body is then cut from the outer graph (an
input of a marked node that comes from an unmarked one becomes a body
variable named after that outer output, and the outer output becomes an
input of the control-flow node), and the node is made with the body graphs
as its subgraphs and MXNet's ``*_locs`` attributes. The result is the graph,
and the symbol JSON, that MXNet 1.9.1 makes for the same functions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from . import nesting
from . import symbol as sym_mod
from .errors import GraphError
from .graph import topological_order
from .graph.attribute import AttrScope, current_attrs
from .graph.symbol_json import Node, Subgraph
from .ops import registry
from .symbol import Symbol

__all__ = ["foreach", "while_loop", "cond"]

_SUBGRAPH = "__subgraph_name__"
# MXNet's subgraph-name counters (AttrScope._subgraph_names), one per name
# for the process, as MXNet's; setdefault and next() on a count are atomic.
_subgraph_counters: dict[str, itertools.count[int]] = {}


def __getattr__(name: str) -> Callable[..., Symbol]:
    """mx.sym.contrib.<Op> for the registered "_contrib_<Op>" operators."""
    if registry.find(f"_contrib_{name}") is not None:
        return getattr(sym_mod, f"_contrib_{name}")
    raise AttributeError(f"module 'acc_host.symbol_contrib' has no attribute {name!r}")


def _unique_name(hint: str) -> str:
    """MXNet's subgraph names: the hint (prefixed by an enclosing body's
    name and "$") plus a counter per name."""
    outer = current_attrs().get(_SUBGRAPH, "")
    if outer:
        hint = f"{outer}${hint}"
    return f"{hint}{next(_subgraph_counters.setdefault(hint, itertools.count()))}"


def _flatten(value: Any, what: str) -> tuple[list[Symbol], Any]:
    """Symbols of a (nested) list, one per output, and the nesting."""
    return nesting.flatten(value, Symbol, what,
                           width=lambda symbol: len(symbol) if len(symbol) > 1 else 0)


_regroup = nesting.regroup


def _single(symbol: Symbol) -> tuple[Node, int]:
    if len(symbol) != 1:
        raise GraphError(f"a control-flow value must be one output, got {len(symbol)}")
    return symbol._outputs[0]


def _uniq_name(symbol: Symbol) -> str:
    node, output = _single(symbol)
    return f"{node.name}-{output}"


def _identity(symbol: Symbol) -> Symbol:
    return sym_mod._create("_copy", [symbol], {}, name=sym_mod._names.get("identity"))


def _in_body(symbol: Symbol, name: str) -> bool:
    return _single(symbol)[0].attrs.get(_SUBGRAPH, "") == name


def _body_outputs(outputs: Sequence[Symbol], name: str, states: Sequence[Symbol] = ()
                  ) -> list[Symbol]:
    """The body's outputs, an identity where one is a body input, comes
    from outside the body (or, for foreach's states, repeats an output)."""
    inputs = set(sym_mod.Group([*outputs, *states]).list_inputs()) if [*outputs, *states] else set()
    result = []
    for symbol in outputs:
        needs = symbol.name in inputs or not _in_body(symbol, name)
        result.append(_identity(symbol) if needs else symbol)
    output_names = {symbol.name for symbol in outputs}
    for symbol in states:
        needs = (symbol.name in inputs or symbol.name in output_names
                 or not _in_body(symbol, name))
        result.append(_identity(symbol) if needs else symbol)
    return result


def _output_name(node: Node, output: int) -> str:
    return Symbol([(node, output)]).list_outputs()[0]


def _cut(heads: Sequence[tuple[Node, int]], name: str) -> dict[str, tuple[Node, int]]:
    """Cuts the body (the nodes marked name) from the outer graph, in place:
    every input of a marked node from an unmarked node becomes a new body
    variable named after that output. Returns variable name -> the outer
    output it stands for."""
    if not heads or heads[0][0].attrs.get(_SUBGRAPH, "") != name:
        return {}
    cut: dict[str, tuple[Node, int]] = {}
    for node in topological_order(heads):
        if node.attrs.get(_SUBGRAPH, "") != name:
            continue
        for position, (producer, output, _version) in enumerate(node.inputs):
            if producer.attrs.get(_SUBGRAPH, "") == name:
                continue
            variable_name = _output_name(producer, output)
            cut[variable_name] = (producer, output)
            node.inputs[position] = (Node("null", variable_name), 0, 0)
    return cut


def _body(outputs: Sequence[Symbol]) -> tuple[Subgraph, list[Node]]:
    heads = [_single(symbol) for symbol in outputs]
    nodes = topological_order(heads)
    return (Subgraph(nodes, [(node, output, 0) for node, output in heads]),
            [node for node in nodes if node.is_variable])


def _check_unique(inputs: Sequence[Node]) -> None:
    names = [node.name for node in inputs]
    if len(set(names)) != len(names):
        raise GraphError(f"the inputs of the subgraph don't have unique names: {names}")


def _make(op_name: str, bodies: list[Subgraph], inputs: Sequence[tuple[Node, int]],
          attrs: dict[str, Any]) -> Symbol:
    attrs = {"num_args": len(inputs) + len(bodies), **attrs}
    text = {key: (str(list(value)) if isinstance(value, (list, tuple)) else str(value))
            for key, value in attrs.items()}
    text.update(current_attrs())
    node = Node(op_name, sym_mod._names.get(op_name.lower()), text,
                [(producer, output, 0) for producer, output in inputs], subgraphs=bodies)
    op = registry.get(op_name)
    count = len(op.output_names(op.parse(text)))
    result = Symbol([(node, output) for output in range(count)])
    result.graph  # noqa: B018  (checks the bodies and the locations now)
    return result


def foreach(body: Callable[[Any, Any], tuple[Any, Any]], data: Any, init_states: Any,
            name: str = "foreach") -> tuple[Any, Any]:
    """body(data_slice, states) -> (outputs, new_states), run over axis 0
    of data; returns (outputs stacked on axis 0, final states)."""
    flat_data, data_fmt = _flatten(data, "foreach input")
    flat_states, state_fmt = _flatten(init_states, "foreach states")
    name = _unique_name(name)
    with AttrScope(**{_SUBGRAPH: name}):
        slices, _ = _regroup([sym_mod.Variable(_uniq_name(s)) for s in flat_data], data_fmt)
        states, _ = _regroup([sym_mod.Variable(_uniq_name(s)) for s in flat_states],
                             _copy_fmt(state_fmt))
        outputs, new_states = body(slices, states)
        flat_out, out_fmt = _flatten(outputs, "foreach output")
        flat_new, new_fmt = _flatten(new_states, "foreach loop_vars")
        if new_fmt != state_fmt:
            raise GraphError("foreach: the input and output loop_vars have different format")
        heads = _body_outputs(flat_out, name, flat_new)
    cut = _cut([_single(s) for s in heads], name)
    subgraph, body_inputs = _body(heads)
    _check_unique(body_inputs)
    names = [node.name for node in body_inputs]
    data_names = [_uniq_name(s) for s in flat_data]
    state_names = [_uniq_name(s) for s in flat_states]
    for what, wanted in (("data", data_names), ("state", state_names)):
        for wanted_name in wanted:
            if wanted_name not in names:
                raise GraphError(f"foreach: the {what} arrays have to be used in the loop body")
    ordered = [_single(s) for s in flat_data] + [_single(s) for s in flat_states]
    remain = []
    for position, node in enumerate(body_inputs):
        if node.name in cut:
            ordered.append(cut[node.name])
            remain.append(position)
        elif node.name not in data_names and node.name not in state_names:
            raise GraphError(f"foreach: the body input {node.name!r} comes from nowhere")
    result = _make("_foreach", [subgraph], ordered, {
        "num_outputs": len(flat_out) + len(flat_new), "num_out_data": len(flat_out),
        "in_state_locs": [names.index(n) for n in state_names],
        "in_data_locs": [names.index(n) for n in data_names], "remain_locs": remain})
    outs, _ = _regroup([result[k] for k in range(len(flat_out))], out_fmt)
    final, _ = _regroup([result[len(flat_out) + k] for k in range(len(flat_new))], state_fmt)
    return outs, final


def _copy_fmt(fmt: Any) -> Any:
    return list(map(_copy_fmt, fmt)) if isinstance(fmt, list) else fmt


def _union(bodies: Sequence[tuple[Subgraph, list[Node], dict[str, tuple[Node, int]]]],
           named: Callable[[str, list[tuple[Node, int]]], tuple[Node, int] | None]
           ) -> tuple[list[tuple[Node, int]], list[list[int]]]:
    """The node's inputs over all bodies and each body's input locations,
    as MXNet unites them: a body input that named() resolves (a loop
    variable, or an input taken already) is shared; each cut one is an
    input of its own."""
    inputs: list[tuple[Node, int]] = []
    locations: list[list[int]] = []
    for _, body_inputs, cut in bodies:
        _check_unique(body_inputs)
        locs = []
        for node in body_inputs:
            source = named(node.name, inputs)
            if source is not None:
                position = next((k for k, item in enumerate(inputs)
                                 if item[0] is source[0] and item[1] == source[1]), None)
                if position is None:
                    position = len(inputs)
                    inputs.append(source)
            elif node.name in cut:
                position = len(inputs)
                inputs.append(cut[node.name])
            else:
                raise GraphError(f"the body input {node.name!r} comes from nowhere")
            locs.append(position)
        locations.append(locs)
    return inputs, locations


def while_loop(cond: Callable[..., Symbol], func: Callable[..., tuple[Any, Any]],
               loop_vars: Any, max_iterations: Any = None,
               name: str = "while_loop") -> tuple[Any, Any]:
    """MXNet's while_loop: func(*loop_vars) -> (step outputs, new loop_vars)
    while cond(*loop_vars); step outputs are stacked into max_iterations
    rows."""
    flat_vars, var_fmt = _flatten(loop_vars, "while loop_vars")
    if max_iterations is None:
        raise GraphError("while_loop: max_iterations should be specified")
    try:
        max_iterations = int(max_iterations.asscalar() if hasattr(max_iterations, "asscalar")
                             else max_iterations)
    except (TypeError, ValueError):
        raise GraphError(f"while_loop: cannot convert {max_iterations!r} to python int") from None
    if not flat_vars:
        raise GraphError("while_loop: loop_vars should contain at least one element")

    def make(hint: str, function: Callable[..., Any], is_cond: bool) -> tuple[Any, ...]:
        sub_name = _unique_name(hint)
        with AttrScope(**{_SUBGRAPH: sub_name}):
            fresh, _ = _regroup([sym_mod.Variable(_uniq_name(s)) for s in flat_vars], var_fmt)
            fresh = fresh if isinstance(fresh, list) else [fresh]
            if is_cond:
                result = function(*fresh)
                if not isinstance(result, Symbol):
                    raise GraphError("while_loop: the return of cond must be a Symbol")
                outputs, out_fmt = [result], 0
                states: list[Symbol] = []
            else:
                step, new_vars = function(*fresh)
                step = [] if step is None else list(step) if isinstance(step, tuple) else step
                new_vars = ([] if new_vars is None else list(new_vars)
                            if isinstance(new_vars, tuple) else new_vars)
                outputs, out_fmt = _flatten(step, "while output")
                states, _ = _flatten(new_vars, "while loop_vars")
                if len(states) != len(flat_vars):
                    raise GraphError("while_loop: the number of loop_vars should be consistent "
                                     "during the loop")
            heads = _body_outputs([*outputs, *states], sub_name)
        return heads, len(outputs), out_fmt, sub_name

    cond_heads, _, _, cond_name = make(name + "_cond", cond, True)
    func_heads, num_out_data, out_fmt, func_name = make(name + "_func", func, False)
    by_name = {_uniq_name(s): _single(s) for s in flat_vars}
    bodies = []
    for heads, sub_name in ((cond_heads, cond_name), (func_heads, func_name)):
        cut = _cut([_single(s) for s in heads], sub_name)
        subgraph, body_inputs = _body(heads)
        bodies.append((subgraph, body_inputs, cut))
    inputs, (cond_locs, func_locs) = _union(bodies, lambda n, _: by_name.get(n))
    var_positions = {_uniq_name(s): k for k, s in enumerate(flat_vars)}
    var_locs = [-1] * len(flat_vars)
    for position, node in enumerate(bodies[1][1]):
        if node.name in var_positions:
            var_locs[var_positions[node.name]] = position
    for k, loc in enumerate(var_locs, 1):
        if loc == -1:
            raise GraphError(f"while_loop: the {k}-th loop_var doesn't involve into the "
                             "computation")
    num_outputs = num_out_data + len(flat_vars)
    result = _make("_while_loop", [bodies[0][0], bodies[1][0]], inputs, {
        "max_iterations": max_iterations, "cond_input_locs": cond_locs,
        "func_input_locs": func_locs, "func_var_locs": var_locs,
        "num_out_data": num_out_data, "num_outputs": num_outputs})
    outputs, _ = _regroup([result[k] for k in range(num_out_data)], out_fmt)
    final, _ = _regroup([result[k] for k in range(num_out_data, num_outputs)], var_fmt)
    return outputs, final


def cond(pred: Symbol, then_func: Callable[[], Any], else_func: Callable[[], Any],
         name: str = "cond") -> Any:
    """MXNet's cond: then_func()'s outputs when pred (one value) is
    non-zero, else else_func()'s."""

    def make(hint: str, function: Callable[[], Any]) -> tuple[list[Symbol], Any, str]:
        sub_name = _unique_name(hint)
        with AttrScope(**{_SUBGRAPH: sub_name}):
            outputs, out_fmt = _flatten(function(), "cond outputs")
            heads = _body_outputs(outputs, sub_name)
        return heads, out_fmt, sub_name

    cond_heads, _, cond_name = make(name + "_pred", lambda: pred)
    if len(cond_heads) != 1:
        raise GraphError("cond: pred should always be a single output")
    then_heads, then_fmt, then_name = make(name + "_then", then_func)
    else_heads, _, else_name = make(name + "_else", else_func)
    if len(then_heads) != len(else_heads):
        raise GraphError("cond: the number of outputs differs between then-branch and "
                         "else-branch")
    bodies = []
    for heads, sub_name in ((cond_heads, cond_name), (then_heads, then_name),
                            (else_heads, else_name)):
        cut = _cut([_single(s) for s in heads], sub_name)
        subgraph, body_inputs = _body(heads)
        bodies.append((subgraph, body_inputs, cut))

    def earlier(variable: str, inputs: list[tuple[Node, int]]) -> tuple[Node, int] | None:
        for node, output in inputs:
            if node.name == variable:
                return node, output
        return None

    inputs, (cond_locs, then_locs, else_locs) = _union(bodies, earlier)
    result = _make("_cond", [body for body, _, _ in bodies], inputs, {
        "cond_input_locs": cond_locs, "then_input_locs": then_locs,
        "else_input_locs": else_locs, "num_outputs": len(then_heads)})
    outputs, _ = _regroup([result[k] for k in range(len(then_heads))], then_fmt)
    return outputs
