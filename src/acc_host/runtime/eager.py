"""The host run of a graph whose shapes depend on data.

A model with a NonZero, or a Reshape (Expand, Slice, Range, ...) by a value
computed from an input's contents, has shapes that are known only once the
data is: no plan can be made ahead of a forward, and no accelerator can
compile it. Such a graph runs here, every operator on the host CPU path in
topological order, each result a new array of whatever shape it has, and
the executor's outputs are the latest forward's results. Binding refuses
for offload by name the data-dependent nodes (the executor's
``unresolved``) and what depends on their shapes; the static part before
them (:func:`static_part`: every operator whose outputs have shapes known
at bind time and that reads nothing of a data-dependent node) is bound as
an executor of its own on the accelerator, run first on each forward, its
results feeding the host run of the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..context import cpu
from ..errors import ShapeError, TensorError
from ..graph import Graph
from ..ndarray import NDArray
from ..ndarray import array as nd_array
from .direct_run import FastForward, FastPredict

__all__ = ["EagerRunner", "static_part"]


def static_part(graph: Graph, shapes: Sequence[Any],
                unresolved: Sequence[str]) -> tuple[set[int], list[int]]:
    """(the operator nodes of graph whose shapes are known at bind time and
    that read nothing of a data-dependent node, in topological closure; the
    entries of theirs that the other nodes or the heads read, in order)."""
    refused = set(unresolved)
    static: set[int] = set()
    variables = {k for k, node in enumerate(graph.nodes) if node.is_variable}
    producer = {}
    for k in range(len(graph.nodes)):
        for entry in range(graph.entry_start[k], graph.entry_start[k] + graph.num_total(k)):
            producer[entry] = k
    for k, node in enumerate(graph.nodes):
        if node.is_variable or node.name in refused:
            continue
        start = graph.entry_start[k]
        if any(shapes[entry] is None for entry in range(start, start + graph.num_visible(k))):
            continue
        if all(producer[entry] in variables or producer[entry] in static
               for entry in graph.input_entries(k)):
            static.add(k)
    read = {entry for entry in heads_of(graph) if producer[entry] in static}
    for k in range(len(graph.nodes)):
        if k not in static and k not in variables:
            read.update(entry for entry in graph.input_entries(k) if producer[entry] in static)
    return static, sorted(read)


def heads_of(graph: Graph) -> list[int]:
    return [graph.entry(node, output) for node, output in graph.heads]


class EagerRunner:
    """Runs graph for its executor on the host, node by node (the Runner's
    interface, without a plan). bound: the arrays the graph's variables read;
    outputs: the executor's output list, whose items each forward replaces."""

    def __init__(self, graph: Graph, heads: Sequence[int], bound: Mapping[str, NDArray],
                 outputs: list[NDArray], static: Any = None,
                 static_nodes: frozenset[int] = frozenset(),
                 static_entries: Sequence[int] = ()) -> None:
        """static: the executor of the static part (static_nodes, whose
        entries static_entries are its outputs, in order), or None."""
        self._graph = graph
        self._heads = list(heads)
        self._bound = bound
        self.outputs = outputs
        # no direct path (see runner.Runner.fast)
        self.fast: FastForward | None = None
        self.fast_predict: FastPredict | None = None
        self.exact_predict: FastPredict | None = None
        self.steps: list[Any] = []
        self.bound_steps: dict[int, Any] = {}
        self._static = static
        self._static_nodes = static_nodes
        self._static_entries = list(static_entries)
        self.subgraphs: list[Any] = list(static.subgraphs) if static is not None else []
        self.differential: Any = None

    def run(self, inputs: Mapping[str, Any], synchronous: bool) -> Any:
        graph = self._graph
        given: dict[str, np.ndarray] = {}
        for name, value in inputs.items():
            target = self._bound.get(name)
            if target is None:
                raise ShapeError(f"forward: {name!r} is not an input of the executor")
            try:
                host = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
                given[name] = host.astype(target.dtype, copy=False)
            except (TypeError, ValueError) as error:
                raise TensorError(f"forward: {name!r} cannot be converted to "
                                  f"{target.dtype}: {error}") from None
            if given[name].shape == target.shape:
                target[...] = given[name]  # the arguments hold the inputs, as MXNet's do
        values: dict[int, np.ndarray] = {}
        static = self._static
        if static is not None:
            feed = {name: value for name, value in given.items() if name in static.arg_dict}
            produced = static.forward(**feed)
            for entry, result in zip(self._static_entries, produced):
                values[entry] = result.asnumpy()
        for k, node in enumerate(graph.nodes):
            start = graph.entry_start[k]
            if k in self._static_nodes:
                continue
            if node.is_variable:
                values[start] = given[node.name] if node.name in given \
                    else self._bound[node.name].asnumpy()
                continue
            op, attrs = graph.ops[k], graph.attrs[k]
            assert op is not None and attrs is not None
            results = op.run(attrs, [values[entry] for entry in graph.input_entries(k)])
            for output, result in enumerate(results[:graph.num_visible(k)]):
                values[start + output] = np.asarray(result)
        results = [values[entry] for entry in self._heads]
        for position, result in enumerate(results):
            self.outputs[position] = nd_array(result, cpu(), dtype=result.dtype)
        if synchronous:
            return [result.copy() for result in results]
        return list(self.outputs)

    def run_on_cpu(self, nodes: Sequence[int], values: dict[int, Any]) -> None:
        raise ShapeError("a graph with data-dependent shapes has no subgraphs to check")

    def direct_run(self) -> None:
        return None

    def close(self) -> None:
        if self._static is not None:
            self._static.close()
