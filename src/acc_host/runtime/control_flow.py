"""Control-flow bodies on an accelerator: each body of a ``_cond``,
``_foreach``, ``_while_loop`` or ``_loop`` node bound as an executor of its
own, partitioned by the accelerator's supportedOps like any graph, its
subgraphs compiled (loadModel) at the body's first run and reused on every
iteration after it.

The host runs the loop (acc_host.graph.control_flow.ControlFlowOp); for
each body run it hands the body's inputs to :class:`BodyExecutors`, which
keeps one body executor per (node, body, input shapes and dtypes) and runs
its plan inline, inside the control-flow node's own engine operation: CPU
steps with the host's operators, subgraph steps as one ``infer`` each
(``SubgraphOperator.forward``). Every body input is data (passed on every
iteration); nothing is written into the body executor's bound arrays.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..context import Context
from ..errors import PluginUnsupportedError
from ..graph import Graph
from ..graph.control_flow import BodyRunner, ControlFlowOp, body_inputs
from ..graph.symbol_json import MXNET_VERSION, write_graph
from ..ndarray import NDArray
from ..ndarray import array as nd_array
from .subgraph import AccFallbackWarning, to_host

__all__ = ["BodyExecutors", "BodySymbol", "body_executors_of"]

#: The most body executors (shapes) one control-flow node keeps.
MAX_BODY_SHAPES = 16


class BodySymbol:
    """A body graph as the executor takes a symbol (its graph, names and
    JSON): a symbol without the front end's construction API."""

    def __init__(self, graph: Graph, name: str) -> None:
        self.graph = graph
        self.name = name
        self._outputs = list(graph.heads)

    def list_arguments(self) -> list[str]:
        arguments, _ = self.graph.variables()
        return [self.graph.nodes[k].name for k in arguments]

    def list_auxiliary_states(self) -> list[str]:
        _, aux = self.graph.variables()
        return [self.graph.nodes[k].name for k in aux]

    def list_outputs(self) -> list[str]:
        names = []
        for node, output in self._outputs:
            k = self.graph.index[id(node)]
            op, attrs = self.graph.ops[k], self.graph.attrs[k]
            names.append(node.name if op is None or attrs is None
                         else f"{node.name}_{op.output_names(attrs)[output]}")
        return names

    def tojson(self) -> str:
        graph = self.graph
        return write_graph(graph.nodes, [(node, output, 0) for node, output in self._outputs],
                           {"mxnet_version": MXNET_VERSION},
                           [graph.num_total(k) for k in range(len(graph.nodes))])

    def __repr__(self) -> str:
        return f"<body {self.name}>"


class _BodyRun:
    """One bound body: its executor (for partition, plan and subgraph
    operators) and the inline run of its plan."""

    def __init__(self, executor: Any, graph: Graph) -> None:
        self.executor = executor
        self.graph = graph
        self.inputs = [graph.entry_start[k] for k in body_inputs(graph)]
        self.heads = [graph.entry(node, output) for node, output in graph.heads]
        self.runs = 0

    def run(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        runner = self.executor._runner
        entries: dict[int, Any] = dict(zip(self.inputs, values))
        bound = {**self.executor.arg_dict, **self.executor.aux_dict}
        for step in runner.steps:
            operator = step.subgraph
            if operator is None:
                runner.run_on_cpu((step.node,), entries)
            elif operator.declined:
                runner.run_on_cpu(operator.spec.nodes, entries)
            else:
                try:
                    entries.update(operator.forward(entries, bound, {}))
                except PluginUnsupportedError as error:
                    if operator.loads:
                        raise
                    operator.decline(str(error))
                    warnings.warn(f"{operator.library.name}: a control-flow body's subgraph "
                                  f"runs on the CPU: {error}", AccFallbackWarning, stacklevel=2)
                    runner.run_on_cpu(operator.spec.nodes, entries)
        self.runs += 1
        return [np.array(to_host(entries[entry]), copy=True) for entry in self.heads]

    def close(self) -> None:
        self.executor.close()


class BodyExecutors:
    """The body executors of one executor's control-flow nodes, on ctx.
    executor_type makes them (the runtime's Executor, handed down)."""

    def __init__(self, ctx: Context, executor_type: Callable[..., Any]) -> None:
        self.ctx = ctx
        self._executor_type = executor_type
        self._bodies: dict[tuple, _BodyRun] = {}

    def runner(self, node: int, op: ControlFlowOp) -> BodyRunner:
        def run(index: int, values: list[np.ndarray]) -> list[np.ndarray]:
            arrays = [np.ascontiguousarray(value) for value in values]
            key = (node, index, tuple((array.shape, array.dtype.str) for array in arrays))
            body = self._bodies.get(key)
            if body is None:
                body = self._bind(node, index, op, arrays, key)
            return body.run(arrays)
        return run

    def _bind(self, node: int, index: int, op: ControlFlowOp, arrays: Sequence[np.ndarray],
              key: tuple) -> _BodyRun:
        if sum(1 for other in self._bodies if other[:2] == key[:2]) >= MAX_BODY_SHAPES:
            for other in [other for other in self._bodies if other[:2] == key[:2]][:1]:
                self._bodies.pop(other).close()
        graph = op.bodies[index]
        symbol = BodySymbol(graph, f"{op.node_name}/body{index}")
        names = [graph.nodes[k].name for k in body_inputs(graph)]
        arrays_by_name = {name: array for name, array in zip(names, arrays)}
        arguments, aux = symbol.list_arguments(), symbol.list_auxiliary_states()
        arg_dict = {name: _array(arrays_by_name[name], self.ctx) for name in arguments}
        aux_dict = {name: _array(arrays_by_name[name], self.ctx) for name in aux}
        executor = self._executor_type(symbol, self.ctx, arg_dict, aux_dict,
                                       data_names=list(arguments))
        body = self._bodies[key] = _BodyRun(executor, graph)
        return body

    def placement(self, node: int) -> list[tuple[int, Any]]:
        """(body index, body executor) of node's bound bodies."""
        return [(key[1], body.executor) for key, body in self._bodies.items() if key[0] == node]

    def close(self) -> None:
        for body in self._bodies.values():
            body.close()
        self._bodies.clear()


def _array(value: np.ndarray, ctx: Context) -> NDArray:
    """A bound array of a body input: its first value (the arguments are
    data, passed on every run; auxiliary states keep this value)."""
    return nd_array(value, ctx, value.dtype)


def body_executors_of(executor: Any) -> BodyExecutors | None:
    """The body executors of an executor (None when it has none)."""
    return getattr(executor._runner, "bodies", None)
