"""The graph of one operator: what a symbolic-only plugin compiles to run an
imperative ``mx.nd.<Op>(...)`` call (:mod:`acc_host.ndarray.dispatch`).

Variables ``arg0`` .. ``arg<N-1>`` feed the operator node, named after the
operator in lower case; the JSON is the one ``mx.sym.<Op>(*variables,
name=...)`` writes, attributes of an active ``mx.AttrScope`` included, and
it is annotated for the plugin with every variable marked "data".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..abi.annotate import annotate_graph
from ..abi.tensor import TensorSpec
from ..errors import OperatorError
from ..ops import registry
from . import Graph
from .attribute import current_attrs
from .symbol_json import MXNET_VERSION, Node, write_graph

__all__ = ["one_op_graph"]


def one_op_graph(op_name: str, attrs: Mapping[str, str], inputs: Sequence[TensorSpec],
                 dev_id: int) -> dict[str, Any]:
    """The annotated graph arg0 .. arg<N-1> -> op_name(attrs), for inputs of
    these specs on device dev_id."""
    op = registry.get(op_name)
    names = [f"arg{index}" for index in range(len(inputs))]
    scope = {key: str(value) for key, value in current_attrs(None).items()}
    variables = [Node("null", name, dict(scope)) for name in names]
    given = dict(attrs)
    if "num_args" in op._params_by_name and "num_args" not in given and variables:
        given["num_args"] = str(len(variables))
    parsed = op.parse(given)
    input_names = op.input_names(parsed)
    if len(variables) != len(input_names):
        raise OperatorError(f"{op.name}: {len(variables)} inputs given, it takes "
                            f"{len(input_names)}")
    node = Node(op.name, op.name.lower(), {**parsed.raw, **scope},
                [(variable, 0, 0) for variable in variables])
    heads = [(node, output) for output in range(len(op.output_names(parsed)))]
    graph = Graph(heads)
    graph_json = write_graph(graph.nodes, [(head, output, 0) for head, output in heads],
                             {"mxnet_version": MXNET_VERSION},
                             [graph.num_total(k) for k in range(len(graph.nodes))])
    shapes = {name: spec.shape for name, spec in zip(names, inputs)}
    dtypes = {name: spec.dtype for name, spec in zip(names, inputs)}
    return annotate_graph(graph, graph_json, shapes, weights=(), dtypes=dtypes, dev_id=dev_id)
