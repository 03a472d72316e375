"""Differential checking: every offloaded subgraph also run on the CPU.

``report = acc_host.differential.check(executor, data=x)`` runs one forward
in which each accelerator subgraph, right after the plugin ran it, is run
again by the host's own CPU operators on the same inputs and weights; every
subgraph output is compared with dtype-aware tolerances
(:data:`TOLERANCES`): ``|a - b| <= rtol * |b| + atol * max|b|``, the
absolute term scaled by the output's largest magnitude so that outputs of
any scale are judged alike; NaN equals NaN. On a mismatch the subgraph is narrowed down to its
first diverging node: prefixes of the subgraph (its nodes in execution
order) are loaded on the plugin alone and fed the CPU's values, and a
bisection finds the shortest prefix whose outputs differ; its last node is
the first one the plugin computes differently given correct inputs.

This is a debugging mode: it costs a CPU run of every subgraph, and a
mismatch costs about log2(nodes) extra compiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .abi.loaded_model import LoadedModel
from .compare import mismatch
from .errors import AccHostError
from .partition.segment import region_spec
from .runtime.subgraph import to_host

if TYPE_CHECKING:
    from .ndarray import NDArray
    from .runtime.executor import Executor
    from .runtime.subgraph import SubgraphOperator, Value

__all__ = ["TOLERANCES", "Mismatch", "DifferentialReport", "check", "tolerance"]

# (rtol, atol) by dtype name, atol relative to the output's largest
# magnitude; integer and boolean types compare exactly.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-4),
    "float64": (1e-9, 1e-9),
}


def tolerance(dtype: Any, overrides: Mapping[str, tuple[float, float]] | None = None
              ) -> tuple[float, float]:
    name = np.dtype(dtype).name
    return {**TOLERANCES, **(overrides or {})}.get(name, (0.0, 0.0))


@dataclass
class Mismatch:
    """One subgraph output the plugin computed differently from the CPU."""

    subgraph: int
    output: str
    detail: str
    node: str | None = None     # the first diverging node, when narrowing found it
    op: str | None = None

    def __str__(self) -> str:
        where = f"; first diverging node {self.node} ({self.op})" if self.node else ""
        return f"subgraph {self.subgraph}, output {self.output}: {self.detail}{where}"


@dataclass
class DifferentialReport:
    subgraphs_checked: int = 0
    outputs_checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def format_text(self) -> str:
        lines = [f"checked {self.outputs_checked} outputs of {self.subgraphs_checked} "
                 f"subgraphs against the CPU path"]
        lines += [f"  MISMATCH {mismatch}" for mismatch in self.mismatches]
        if self.ok:
            lines.append("  all within tolerance")
        return "\n".join(lines)


def _difference(got: np.ndarray, want: np.ndarray,
                overrides: Mapping[str, tuple[float, float]] | None) -> str | None:
    """None when got matches want within the dtype's tolerance."""
    return mismatch(got, want, *tolerance(want.dtype, overrides))


class _Checker:
    """Installed on an executor for one forward (Executor._differential)."""

    def __init__(self, overrides: Mapping[str, tuple[float, float]] | None, narrow: bool) -> None:
        self.overrides, self.narrow = overrides, narrow
        self.report = DifferentialReport()

    def after_subgraph(self, executor: Executor, operator: SubgraphOperator,
                       values: Mapping[int, Value], weights: Mapping[str, NDArray],
                       produced: Mapping[int, Value]) -> None:
        spec = operator.spec
        cpu_values: dict[int, Value] = {}
        for name, entry in spec.inputs.items():
            source = (operator._weight_value(weights[name]) if name in spec.weights
                      else values[entry])
            cpu_values[entry] = np.array(to_host(source))
        executor._run_on_cpu(spec.nodes, cpu_values)
        self.report.subgraphs_checked += 1
        for name, entry in spec.outputs.items():
            self.report.outputs_checked += 1
            got = np.asarray(to_host(produced[entry]))
            difference = _difference(got, np.asarray(cpu_values[entry]), self.overrides)
            if difference is None:
                continue
            mismatch = Mismatch(spec.index, name, difference)
            if self.narrow:
                node = self._first_diverging(executor, operator, cpu_values)
                if node is not None:
                    graph_node = executor._graph.nodes[node]
                    mismatch.node, mismatch.op = graph_node.name, graph_node.op
            self.report.mismatches.append(mismatch)

    def _prefix_diverges(self, executor: Executor, operator: SubgraphOperator,
                         prefix: Sequence[int], cpu_values: Mapping[int, Value]) -> bool:
        spec = region_spec(executor._graph, prefix, executor._shapes, executor._dtypes,
                           operator.spec.weights, operator.dev_id)
        model = LoadedModel(operator.library, spec.graph,
                            {name: cpu_values[spec.inputs[name]] for name in spec.weights},
                            operator.dev_id)
        try:
            outputs = model.infer({name: cpu_values[entry] for name, entry in spec.inputs.items()
                                   if name not in spec.weights})
        finally:
            model.close()
        return any(_difference(np.asarray(to_host(outputs[name])), np.asarray(cpu_values[entry]),
                               self.overrides) is not None
                   for name, entry in spec.outputs.items())

    def _first_diverging(self, executor: Executor, operator: SubgraphOperator,
                         cpu_values: Mapping[int, Value]) -> int | None:
        """The node ending the shortest diverging prefix (bisection), or None
        when no prefix the plugin accepts on its own diverges."""
        nodes = operator.spec.nodes
        low, high = 0, len(nodes) - 1  # invariant: the whole subgraph diverges
        try:
            while low < high:
                middle = (low + high) // 2
                if self._prefix_diverges(executor, operator, nodes[:middle + 1], cpu_values):
                    high = middle
                else:
                    low = middle + 1
            if not self._prefix_diverges(executor, operator, nodes[:low + 1], cpu_values):
                return None
        except AccHostError:
            return None  # the plugin refuses a prefix on its own: report the output only
        return nodes[low]


def check(executor: Executor, tolerances: Mapping[str, tuple[float, float]] | None = None,
          narrow: bool = True, **inputs: Any) -> DifferentialReport:
    """Runs executor.forward(**inputs) with every accelerator subgraph also
    run on the CPU, waits for the outputs and returns what differed."""
    checker = _Checker(tolerances, narrow)
    executor._differential = checker
    try:
        for output in executor.forward(**inputs):
            output.wait_to_read()
    finally:
        executor._differential = None
    return checker.report
