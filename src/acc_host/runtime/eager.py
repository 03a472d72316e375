"""The host run of a graph whose shapes depend on data.

A model with a NonZero, or a Reshape (Expand, Slice, Range, ...) by a value
computed from an input's contents, has shapes that are known only once the
data is: no plan can be made ahead of a forward, and no accelerator can
compile it. Such a graph runs here, every operator on the host CPU path in
topological order, each result a new array of whatever shape it has, and
the executor's outputs are the latest forward's results. Binding refuses it
for offload by name (the executor's ``unresolved`` nodes, the warning, and
``explain``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..context import cpu
from ..errors import ShapeError, TensorError
from ..graph import Graph
from ..ndarray import NDArray
from ..ndarray import array as nd_array

__all__ = ["EagerRunner"]


class EagerRunner:
    """Runs graph for its executor on the host, node by node (the Runner's
    interface, without a plan). bound: the arrays the graph's variables read;
    outputs: the executor's output list, whose items each forward replaces."""

    def __init__(self, graph: Graph, heads: Sequence[int], bound: Mapping[str, NDArray],
                 outputs: list[NDArray]) -> None:
        self._graph = graph
        self._heads = list(heads)
        self._bound = bound
        self.outputs = outputs
        self.steps: list[Any] = []
        self.bound_steps: dict[int, Any] = {}
        self.subgraphs: list[Any] = []
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
        for k, node in enumerate(graph.nodes):
            start = graph.entry_start[k]
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
        return None
