"""The plan of a forward: a pure function of the graph and its partition.

``make_plan`` orders the work of a forward into steps (one CPU operator, or
one accelerator subgraph of the partition), and works out each
intermediate result's lifetime: the step after which nothing reads it, so
that a forward drops it there. It calls no plugin and allocates nothing;
partitioning (which asks the plugin's supportedOps) happens before and
hands the planner a :class:`~acc_host.partition.segment.Partition` value.
What the runner may do with the plan (run it as one bound call) is a
property of the plan, worked out here once: ``single_subgraph``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..graph import Graph
from ..partition.segment import Partition, SubgraphSpec

__all__ = ["Plan", "PlanStep", "make_plan"]


@dataclass(frozen=True)
class PlanStep:
    """One CPU operator (``subgraph`` None, ``nodes`` its one node), or one
    accelerator subgraph of the partition (``subgraph`` its spec). Entries
    are the graph's output entries (Graph.entry). ``release``: the entries
    no later step reads, dropped once this step is done (intermediates
    only: never an argument or an executor output)."""

    node: int
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]
    subgraph: SubgraphSpec | None = None


@dataclass(frozen=True)
class Plan:
    """The steps of a forward, in an order that respects the graph, with
    what the runner needs from them. ``heads``: the executor outputs'
    entries, in order; ``variables``: the argument entries by entry;
    ``readers``: for each entry some step releases, how many steps read it
    (0 for an output nobody reads); ``producer``: the step computing each
    entry; ``single_subgraph``: the whole graph is one accelerator subgraph
    whose outputs are the executor outputs, each once (none an argument):
    the plan the runner can run as one bound call."""

    steps: tuple[PlanStep, ...]
    heads: tuple[int, ...]
    variables: Mapping[int, str]
    readers: Mapping[int, int] = field(compare=False)
    producer: Mapping[int, int] = field(compare=False)
    single_subgraph: bool

    def memory(self, size: Callable[[int], int]) -> tuple[int, int]:
        """(the most bytes of intermediate results alive at once under the
        plan, the bytes of all of them) for entries of size(entry) bytes."""
        heads = set(self.heads)
        alive = peak = total = 0
        for step in self.steps:
            produced = sum(size(entry) for entry in step.outputs if entry not in heads)
            alive += produced
            total += produced
            peak = max(peak, alive)
            alive -= sum(size(entry) for entry in step.release)
        return peak, total


def _node_entries(graph: Graph, k: int) -> tuple[int, ...]:
    start = graph.entry_start[k]
    return tuple(range(start, start + graph.num_visible(k)))


def make_plan(graph: Graph, partition: Partition | None, heads: Sequence[int]) -> Plan:
    """The plan of graph, whose outputs are the entries heads: every operator
    on the CPU when partition is None, else the partition's segments in
    order, each an accelerator subgraph or its operators one by one."""
    variables = {graph.entry_start[k]: node.name for k, node in enumerate(graph.nodes)
                 if node.is_variable}
    units: list[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...],
                      SubgraphSpec | None]] = []

    def on_cpu(nodes: Sequence[int]) -> None:
        units.extend((k, (k,), tuple(graph.input_entries(k)), _node_entries(graph, k), None)
                     for k in nodes)

    if partition is None:
        on_cpu([k for k, node in enumerate(graph.nodes) if not node.is_variable])
    else:
        subgraphs = {spec.nodes: spec for spec in partition.subgraphs}
        for segment in partition.segments:
            spec = subgraphs.get(segment.nodes)
            if spec is None:
                on_cpu(segment.nodes)
            else:
                units.append((segment.nodes[0], spec.nodes, tuple(spec.inputs.values()),
                              tuple(spec.outputs.values()), spec))
    last_reader: dict[int, int] = {}
    for position, (_, _, inputs, _, _) in enumerate(units):
        for entry in inputs:
            last_reader[entry] = position
    keep = set(heads) | set(variables)
    steps = []
    for position, (k, nodes, inputs, outputs, spec) in enumerate(units):
        release = tuple(sorted({entry for entry in inputs
                                if last_reader[entry] == position and entry not in keep}
                               | {entry for entry in outputs
                                  if entry not in last_reader and entry not in keep}))
        steps.append(PlanStep(k, nodes, inputs, outputs, release, spec))
    released = {entry for step in steps for entry in step.release}
    readers = dict.fromkeys(released, 0)
    for step in steps:
        for entry in set(step.inputs) & released:
            readers[entry] += 1
    producer = {entry: index for index, step in enumerate(steps) for entry in step.outputs}
    single = (len(steps) == 1 and steps[0].subgraph is not None
              and len(set(heads)) == len(heads) and set(heads) <= set(steps[0].outputs)
              and set(steps[0].outputs) <= set(heads)
              and not set(steps[0].outputs) & set(steps[0].inputs))
    return Plan(tuple(steps), tuple(heads), variables, readers, producer, single)
