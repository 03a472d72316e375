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
(``SubgraphOperator.forward``). The inputs that change from one iteration
to the next (a data slice, a loop-carried value, the iteration number) are
the body executor's data, passed on every run; the inputs the loop only
reads (an RNN cell's weights, outer values) are its weights, written into
its bound arrays when they changed since the node's last run (once per
node run at most), so a plugin that compiles weights into its model
(mlu_sim) takes them at loadModel, as in any executor.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..abi.tensor import contiguous, dtype_code
from ..context import Context, cpu
from ..errors import PluginUnsupportedError, TensorError
from ..graph import Graph
from ..graph.control_flow import BodyRunner, ControlFlowOp, body_inputs
from ..graph.symbol_json import MXNET_VERSION, write_graph
from ..ndarray import NDArray, zeros
from ..ndarray import array as nd_array
from ..ops.control_flow import BODIES
from ..partition.explain import Explanation
from .subgraph import AccFallbackWarning, to_host

__all__ = ["BodyExecutors", "BodyRun", "BodySymbol", "body_executors_of", "with_bodies"]

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


class BodyRun:
    """One bound body: its executor (for partition, plan and subgraph
    operators) and the inline run of its plan."""

    def __init__(self, executor: Any, graph: Graph, invariant: Sequence[bool]) -> None:
        self.executor = executor
        self.graph = graph
        self.inputs = [graph.entry_start[k] for k in body_inputs(graph)]
        self.names = [graph.nodes[k].name for k in body_inputs(graph)]
        self.invariant = list(invariant)
        self.heads = [graph.entry(node, output) for node, output in graph.heads]
        self.runs = 0
        self._seen: dict[str, np.ndarray] = {}
        # The weights' values as the subgraphs take them (host arrays).
        self.weights: dict[str, NDArray] = {}

    def refresh(self, values: Sequence[np.ndarray]) -> None:
        """Takes the loop-invariant inputs (the body's weights) of a node
        run: a weight that changed since the last one makes the body's
        subgraphs load again (with it) at their next run."""
        changed = False
        for name, value, invariant in zip(self.names, values, self.invariant):
            if not invariant:
                continue
            seen = self._seen.get(name)
            if seen is None or seen.shape != value.shape or not np.array_equal(seen, value):
                changed = changed or seen is not None
                self._seen[name] = np.array(value, copy=True)
                self.weights[name] = NDArray(self._seen[name], cpu())
        if changed:
            for operator in self.executor._runner.subgraphs:
                if operator.model is not None:
                    operator.close()

    def run(self, values: Sequence[np.ndarray]) -> list[np.ndarray]:
        runner = self.executor._runner
        # Every input, the weights too: a CPU step may read them (a
        # subgraph reads its weights from the bound arrays).
        entries: dict[int, Any] = dict(zip(self.inputs, values))
        bound = {**self.executor.arg_dict, **self.executor.aux_dict, **self.weights}
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
        shapes = self.executor._shapes
        # As inferred: a plugin may hand a 0-d value back as shape (1,).
        return [np.array(to_host(entries[entry]), copy=True).reshape(shapes[entry])
                for entry in self.heads]

    def close(self) -> None:
        self.executor.close()


class BodyExecutors:
    """The body executors of one executor's control-flow nodes, on ctx.
    executor_type makes them (the runtime's Executor, handed down)."""

    def __init__(self, ctx: Context, executor_type: Callable[..., Any]) -> None:
        self.ctx = ctx
        self._executor_type = executor_type
        self._bodies: dict[tuple, BodyRun] = {}
        self._weights: dict[int, frozenset[int]] = {}  # see prepare

    def runner(self, node: int, op: ControlFlowOp) -> BodyRunner:
        """The body runner of one run of node (its weights refreshed at
        each body's first run in it)."""
        refreshed: set[tuple] = set()

        def run(index: int, values: list[np.ndarray]) -> list[np.ndarray]:
            arrays = [contiguous(np.asarray(value)) for value in values]
            key = (node, index, tuple((array.shape, array.dtype.str) for array in arrays))
            body = self._bodies.get(key)
            if body is None:
                body = self._bind(node, index, op, arrays, key)
            if key not in refreshed:
                body.refresh(arrays)
                refreshed.add(key)
            return body.run(arrays)
        return run

    def _bind(self, node: int, index: int, op: ControlFlowOp, arrays: Sequence[np.ndarray],
              key: tuple) -> BodyRun:
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
        weights = self._weights.get(node, frozenset())
        invariant = [source[0] == "in" and source[1] in weights and _has_dtype(array.dtype)
                     for source, array in zip(op.sources[index], arrays)]
        data = [name for name, fixed in zip(names, invariant) if not fixed and name in arg_dict]
        executor = self._executor_type(symbol, self.ctx, arg_dict, aux_dict, data_names=data)
        body = self._bodies[key] = BodyRun(executor, graph, invariant)
        return body

    def prepare(self, graph: Graph, shapes: Sequence[Any], dtypes: Sequence[Any],
                weights: frozenset[str], bound: Mapping[str, NDArray]) -> None:
        """Binds every body of graph's control-flow nodes now, from the
        shapes and dtypes bind inferred (partitioned, nothing compiled yet),
        so that a body's placement is known before the first forward.
        weights: the graph's variables that are weights; a body input taken
        from one is the body's weight too, bound with its value (bound: the
        graph's arrays by name)."""

        for k, op in enumerate(graph.ops):
            if not isinstance(op, ControlFlowOp):
                continue
            entries = graph.input_entries(k)
            self._weights[k] = frozenset(
                position for position, (producer, _, _) in enumerate(graph.nodes[k].inputs)
                if producer.is_variable and producer.name in weights)
            for index in range(len(op.bodies)):
                arrays = []
                for source in op.sources[index]:
                    if source[0] == "iter":
                        arrays.append(np.zeros((), np.int64))
                    elif source[0] == "cond":
                        arrays.append(np.zeros((), np.bool_))
                    elif source[0] == "in" and source[1] in self._weights[k]:
                        producer = graph.nodes[k].inputs[source[1]][0]
                        arrays.append(contiguous(bound[producer.name].asnumpy()))
                    else:
                        entry = entries[source[-1] if source[0] != "slice" else source[1]]
                        shape = tuple(shapes[entry])
                        arrays.append(np.zeros(shape[1:] if source[0] == "slice" else shape,
                                               dtypes[entry]))
                key = (k, index, tuple((array.shape, array.dtype.str) for array in arrays))
                if key not in self._bodies:
                    self._bind(k, index, op, arrays, key)

    def adopt(self, other: BodyExecutors | None) -> BodyExecutors:
        """These body executors, with other's (bound for the same graph at
        other shapes) for the shapes these lack: the executors of a reshape
        family share their bodies."""
        if other is not None and other is not self:
            for key, body in other._bodies.items():
                if key in self._bodies:
                    body.close()
                else:
                    self._bodies[key] = body
            for node, weights in other._weights.items():
                self._weights.setdefault(node, weights)
        return self

    def items(self) -> list[tuple[int, int, BodyRun]]:
        """(node, body index, bound body) of every body bound so far (one per
        input shape)."""
        return [(key[0], key[1], body) for key, body in self._bodies.items()]

    def close(self) -> None:
        for body in self._bodies.values():
            body.close()
        self._bodies.clear()


def _has_dtype(dtype: Any) -> bool:
    try:
        dtype_code(dtype)
    except TensorError:
        return False
    return True


def _array(value: np.ndarray, ctx: Context) -> NDArray:
    """A bound array of a body input: its first value (the arguments are
    data, passed on every run; auxiliary states keep this value), in host
    memory when the ABI has no dtype for it (a bool condition)."""
    try:
        dtype_code(value.dtype)
    except TensorError:
        array = zeros(value.shape, cpu(), value.dtype)
        array[...] = value
        return array
    return nd_array(value, ctx, value.dtype)


def body_executors_of(executor: Any) -> BodyExecutors | None:
    """The body executors of an executor (None when it has none)."""
    return getattr(executor._runner, "bodies", None)


def body_lines(executor: Any) -> list[str]:
    """One line per control-flow body of executor: where its operators run
    and how often it ran (the CLI's run summary)."""
    bodies = body_executors_of(executor)
    lines = []
    for node, index, body in ([] if bodies is None else bodies.items()):
        placement = list(body.executor.placement().values())
        offloaded = len(placement) - placement.count("cpu(0)")
        lines.append(f"body {index} of {executor._graph.nodes[node].name}: {offloaded}/"
                     f"{len(placement)} operators offloaded in "
                     f"{len(body.executor.subgraphs)} subgraph(s), run {body.runs} times")
    return lines


def body_subgraphs(executor: Any) -> list[Any]:
    """The accelerator subgraphs of executor's control-flow bodies (they
    compile at their body's first run)."""
    bodies = body_executors_of(executor)
    return [] if bodies is None else [operator for _, _, body in bodies.items()
                                      for operator in body.executor.subgraphs]


def with_bodies(executor: Any, explanation: Explanation) -> Explanation:
    """explanation (of executor's partition) with the placement of every
    control-flow body, nested bodies inside theirs."""
    bodies = body_executors_of(executor)
    if bodies is None:
        return explanation
    items = []
    for node, index, body in bodies.items():
        partition = body.executor.partition
        if partition is None:
            continue
        op = executor._graph.ops[node]
        inner = with_bodies(body.executor, partition.explain(None, explanation.device_memory))
        items.append((node, f"{index} ({BODIES[op.name][index]})", inner))
    nodes = tuple(dataclasses.replace(
        item, kind="control_flow", reason="the host runs the control flow; each body is "
        "partitioned on its own (below)") if isinstance(executor._graph.ops[item.node],
                                                        ControlFlowOp) else item
        for item in explanation.nodes)
    return dataclasses.replace(explanation, nodes=nodes, bodies=tuple(items))
