"""Partitioning a graph into accelerator subgraphs and CPU operators.

A chain of pure functions:

1. **classify**: each operator node gets a class, the CPU (0) or one
   accelerator device (1, 2, ...), from the plugin's supportedOps() answer
   and the node's device.
2. **segment**: the operator nodes are put in a topological order that
   keeps nodes of one class together (Kahn's algorithm with one ready queue
   per class: it keeps taking nodes of the current class while any is ready,
   and when none is, switches, to the CPU first since CPU nodes unblock
   accelerator nodes). Every maximal run of one class in that order is a
   segment. A run of consecutive positions in a topological order is always
   convex: a path that left it and came back would pass a node positioned
   inside the run. So no partition can create a cycle, and the segments, in
   order, are a topological order of the partitioned graph. Cost: O(nodes +
   edges), deterministic (ties go to the lowest node index).
3. **extract**: each accelerator segment becomes a subgraph: its external
   inputs become variables, the entries used outside it (or graph outputs)
   its heads.

The "fusion segment" rule of the CNML design (a segment's input operators
all precede its output operators in topological order) holds for every
segment this produces, since the segment is contiguous in the order.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..abi.annotate import annotate, output_name
from ..abi.tensor import TensorSpec
from ..graph import Graph
from .explain import Explanation, Refine, explain
from .offload import KeptOnCpu, OffloadCosts, judge
from .storage import StorageVerdict, sparse_entries_kept

__all__ = ["CPU", "Segment", "segment", "SubgraphSpec", "extract", "Partition", "partition_graph",
           "offerable_region", "region_spec", "region_graph"]

CPU = 0


@dataclass(frozen=True)
class Segment:
    """Operator nodes (in execution order) that run together on one class."""

    device_class: int
    nodes: tuple[int, ...]


def segment(num_nodes: int, predecessors: Sequence[Sequence[int]],
            classes: Sequence[int]) -> list[Segment]:
    """Segments of a DAG given as predecessor lists (indices < num_nodes)
    and one class per node; see the module docstring."""
    successors: list[list[int]] = [[] for _ in range(num_nodes)]
    missing = [0] * num_nodes
    for node, preds in enumerate(predecessors):
        # A predecessor listed twice is counted, and lists the node, twice
        # (next to each other): it becomes ready at the same point as with
        # the duplicates removed, without a set per node.
        missing[node] = len(preds)
        for pred in preds:
            successors[pred].append(node)
    # One queue per class, made once (the loop below runs once per node).
    ready: dict[int, deque[int]] = {device_class: deque() for device_class in set(classes)}
    for node in range(num_nodes):
        if missing[node] == 0:
            ready[classes[node]].append(node)
    segments: list[tuple[int, list[int]]] = []
    queue: deque[int] = deque()
    members: list[int] = []
    for _ in range(num_nodes):
        if not queue:
            current = _next_class(ready)
            queue, members = ready[current], []
            segments.append((current, members))
        node = queue.popleft()
        members.append(node)
        for successor in successors[node]:
            missing[successor] -= 1
            if missing[successor] == 0:
                ready[classes[successor]].append(successor)
    return [Segment(device_class, tuple(nodes)) for device_class, nodes in segments]


def _next_class(ready: Mapping[int, deque[int]]) -> int:
    if ready.get(CPU):
        return CPU
    candidates = [(queue[0], device_class) for device_class, queue in ready.items() if queue]
    if not candidates:
        raise ValueError("the graph has a cycle")
    return min(candidates)[1]


# ---- subgraph extraction -----------------------------------------------------------


@dataclass(frozen=True)
class SubgraphSpec:
    """An accelerator segment as a graph of its own.

    ``inputs`` maps each subgraph variable to the full graph's entry it
    reads, ``outputs`` each subgraph output name to the entry it produces,
    ``weights`` names the variables that are parameters."""

    index: int
    device_class: int
    nodes: tuple[int, ...]
    graph: dict[str, Any]
    inputs: dict[str, int]
    outputs: dict[str, int]
    weights: frozenset[str]
    # Inputs passed sparse (name -> MXTensor.isSparse value, ABI 1.2); the
    # other sparse variables it reads are densified at its boundary.
    sparse_inputs: Mapping[str, int] = field(default_factory=dict)


def extract(graph: Graph, seg: Segment, index: int, shapes: Sequence[Any],
            dtypes: Sequence[Any], weight_names: frozenset[str], leaving: set[int],
            dev_id: int, sparse_entries: Mapping[int, int] | None = None) -> SubgraphSpec:
    """The annotated subgraph of one segment of graph; leaving holds the
    entries read outside their own segment or returned by the graph;
    sparse_entries the entries it takes sparse (entry -> isSparse value,
    see acc_host.partition.storage)."""
    members = set(seg.nodes)
    sparse_entries = sparse_entries or {}
    sparse_inputs: dict[str, int] = {}
    nodes_json: list[dict[str, Any]] = []
    position: dict[int, int] = {}  # full-graph entry -> (subgraph node id), for inputs
    inputs: dict[str, int] = {}
    used_names = {graph.nodes[k].name for k in seg.nodes}
    node_outputs: list[list[TensorSpec]] = []

    def spec(entry: int) -> TensorSpec:
        return TensorSpec(shapes[entry], dtypes[entry])

    def input_variable(entry: int, producer: int, output: int) -> int:
        if entry in position:
            return position[entry]
        node = graph.nodes[producer]
        if node.is_variable:
            name, attrs = node.name, {key: value for key, value in node.attrs.items()
                                      if not key.startswith("__")}
        else:
            name = _unique(f"{node.name}_output{output}", used_names)
            attrs = {}
        used_names.add(name)
        position[entry] = len(nodes_json)
        inputs[name] = entry
        nodes_json.append({"op": "null", "name": name, "attrs": attrs, "inputs": []})
        stype = sparse_entries.get(entry, 0)
        if stype:
            sparse_inputs[name] = stype
        node_outputs.append([TensorSpec(shapes[entry], dtypes[entry], stype)])
        return position[entry]

    node_ids: dict[int, int] = {}
    for k in seg.nodes:
        node = graph.nodes[k]
        references = []
        for producer_node, output, _ in node.inputs:
            producer = graph.index[id(producer_node)]
            entry = graph.entry(producer_node, output)
            if producer in members:
                references.append([node_ids[producer], output, 0])
            else:
                references.append([input_variable(entry, producer, output), 0, 0])
        node_ids[k] = len(nodes_json)
        nodes_json.append({"op": node.op, "name": node.name, "attrs": dict(node.attrs),
                           "inputs": references})
        node_outputs.append([spec(entry) for entry in _node_entries(graph, k)])
    outputs: dict[str, int] = {}
    head_refs = []
    for k in seg.nodes:
        entries = _node_entries(graph, k)
        for output, entry in enumerate(entries):
            if entry in leaving:
                outputs[output_name(graph.nodes[k].name, output, len(entries))] = entry
                head_refs.append([node_ids[k], output, 0])
    document = {"nodes": nodes_json,
                "arg_nodes": [i for i, node in enumerate(nodes_json) if node["op"] == "null"],
                "heads": head_refs, "attrs": {"mxnet_version": ["int", 10901]}}
    weights = frozenset(name for name in inputs if name in weight_names)
    # document is built here, none of it shared with the graph: annotated
    # in place rather than deep-copied
    annotated = annotate(document, node_outputs, weights, dev_id, in_place=True)
    return SubgraphSpec(index, seg.device_class, seg.nodes, annotated, inputs, outputs, weights,
                        sparse_inputs)


def _node_entries(graph: Graph, k: int) -> list[int]:
    return list(graph.output_entries(k))


def _leaving_entries(graph: Graph, segments: Sequence[Segment]) -> set[int]:
    """Entries read by a node of another segment, or graph outputs."""
    segment_of = {k: number for number, seg in enumerate(segments) for k in seg.nodes}
    leaving = {graph.entry(node, output) for node, output in graph.heads}
    for k, node in enumerate(graph.nodes):
        for producer, output, _ in node.inputs:
            if segment_of.get(graph.index[id(producer)]) != segment_of.get(k):
                leaving.add(graph.entry(producer, output))
    return leaving


def _unique(name: str, taken: set[str]) -> str:
    candidate, suffix = name, 1
    while candidate in taken:
        candidate, suffix = f"{name}_{suffix}", suffix + 1
    return candidate


def offerable_region(graph: Graph, dtypes: Sequence[Any],
                     has_code: Callable[[Any], bool]) -> list[int]:
    """Operator nodes whose inputs and outputs all have dtypes the ABI can
    describe (has_code): the only nodes a plugin can be offered. The rest
    stay on the CPU whatever the plugin supports."""
    region = []
    for k, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        entries = [*graph.input_entries(k), *_node_entries(graph, k)]
        if all(dtypes[entry] is not None and has_code(dtypes[entry]) for entry in entries):
            region.append(k)
    return region


def region_spec(graph: Graph, region: Sequence[int], shapes: Sequence[Any],
                dtypes: Sequence[Any], weight_names: frozenset[str], dev_id: int) -> SubgraphSpec:
    """region alone as a subgraph: inputs from outside it become variables,
    and every entry read outside it (or returned by graph) is an output."""
    members = set(region)
    seg = Segment(1, tuple(region))
    rest = Segment(CPU, tuple(k for k, node in enumerate(graph.nodes)
                              if not node.is_variable and k not in members))
    return extract(graph, seg, 0, shapes, dtypes, weight_names,
                   _leaving_entries(graph, [seg, rest]), dev_id)


def region_graph(graph: Graph, region: Sequence[int], shapes: Sequence[Any],
                 dtypes: Sequence[Any], weight_names: frozenset[str],
                 dev_id: int) -> tuple[dict[str, Any], dict[int, int]]:
    """The annotated graph of region alone (inputs from outside it become
    variables) and the map from its operator node ids to graph's."""
    spec = region_spec(graph, region, shapes, dtypes, weight_names, dev_id)
    operator_ids = [i for i, node in enumerate(spec.graph["nodes"]) if node["op"] != "null"]
    return spec.graph, dict(zip(operator_ids, region))


# ---- the whole partition ----------------------------------------------------------------


@dataclass(frozen=True)
class Partition:
    """Execution order of a graph: CPU nodes and accelerator subgraphs."""

    graph: Graph
    segments: tuple[Segment, ...]
    subgraphs: tuple[SubgraphSpec, ...]
    accelerator: str
    devices: tuple[int, ...]  # device id of each accelerator class (class k -> devices[k - 1])
    kept_on_cpu: tuple[KeptOnCpu, ...] = ()  # candidates that would not pay (offload.py)
    # What the partition was made from, kept (by reference, nothing copied)
    # for explain(): supportedOps' answer per device, the placement, and the
    # graph's entry shapes and dtypes and weight names.
    offered: Mapping[int, Sequence[int]] = field(default_factory=dict, compare=False)
    placement: Mapping[int, int | None] | None = field(default=None, compare=False)
    shapes: Sequence[Any] = field(default=(), compare=False)
    dtypes: Sequence[Any] = field(default=(), compare=False)
    weight_names: frozenset[str] = field(default=frozenset(), compare=False)
    # The plugin's reason per declined node, per device (supportedOpsReasons).
    declined: Mapping[int, Mapping[int, str]] = field(default_factory=dict, compare=False)
    # How each operator reading a sparse variable runs (ABI 1.2; storage.py).
    storage: Mapping[int, StorageVerdict] = field(default_factory=dict, compare=False)

    def summary(self) -> str:
        """One line per segment: where it runs, how many operators, which."""
        lines = []
        subgraphs = {spec.nodes: spec for spec in self.subgraphs}
        for number, seg in enumerate(self.segments):
            ops = [self.graph.nodes[k].op for k in seg.nodes]
            counts: dict[str, int] = {}
            for op in ops:
                counts[op] = counts.get(op, 0) + 1
            listed = ", ".join(f"{op} x{count}" if count > 1 else op
                               for op, count in counts.items())
            if seg.device_class == CPU:
                where = "cpu(0)"
            else:
                spec = subgraphs[seg.nodes]
                where = (f"{self.accelerator}({self.devices[seg.device_class - 1]}) "
                         f"subgraph {spec.index}: {len(spec.inputs)} in, "
                         f"{len(spec.outputs)} out")
            lines.append(f"segment {number}: {where}: {len(ops)} operators [{listed}]")
        for kept in self.kept_on_cpu:
            names = ", ".join(self.graph.nodes[k].name for k in kept.nodes)
            lines.append(f"kept on cpu(0), not offloaded to {self.accelerator}({kept.device}): "
                         f"[{names}]: {kept.reason}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The partitioned graph: CPU operators as they are, each accelerator
        subgraph as one "_acc_subgraph" node carrying its graph under
        "subgraphs" (MXNet's convention for subgraph operators)."""
        graph = self.graph
        node_of_entry: dict[int, tuple[int, int]] = {}
        nodes: list[dict[str, Any]] = []
        subgraphs = {spec.nodes: spec for spec in self.subgraphs}

        def ref(producer: Any, output: int) -> list[int]:
            return [*node_of_entry[graph.entry(producer, output)], 0]

        for k, node in enumerate(graph.nodes):
            if node.is_variable:
                node_of_entry[graph.entry_start[k]] = (len(nodes), 0)
                nodes.append({"op": "null", "name": node.name, "inputs": []})
        for seg in self.segments:
            if seg.device_class == CPU:
                for k in seg.nodes:
                    node = graph.nodes[k]
                    inputs = [ref(producer, output) for producer, output, _ in node.inputs]
                    for output, entry in enumerate(_node_entries(graph, k)):
                        node_of_entry[entry] = (len(nodes), output)
                    nodes.append({"op": node.op, "name": node.name, "attrs": dict(node.attrs),
                                  "inputs": inputs})
                continue
            spec = subgraphs[seg.nodes]
            inputs = []
            for entry in spec.inputs.values():
                inputs.append([*node_of_entry[entry], 0])
            for output, entry in enumerate(spec.outputs.values()):
                node_of_entry[entry] = (len(nodes), output)
            nodes.append({"op": "_acc_subgraph", "name": f"{self.accelerator}_subgraph{spec.index}",
                          "attrs": {"__accelerator__": self.accelerator,
                                    "__dev_id__": str(self.devices[seg.device_class - 1])},
                          "inputs": inputs, "subgraphs": [spec.graph]})
        heads = [[*node_of_entry[graph.entry(node, output)], 0] for node, output in graph.heads]
        return {"nodes": nodes,
                "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"],
                "heads": heads, "attrs": {"mxnet_version": ["int", 10901]}}

    def explain(self, refine: Refine | None = None,
                device_memory: bool | None = None) -> Explanation:
        """Why every operator runs where it does, and the tensors (and bytes)
        crossing every subgraph boundary; see :mod:`acc_host.partition.explain`.
        refine(node, dev_id) may name the reason a node was refused more
        precisely (the op, or its dtype) than supportedOps' answer can;
        device_memory: whether the plugin keeps its own memory."""
        return explain(self, refine, device_memory)

    def to_dot(self, explanation: Explanation | None = None) -> str:
        """Graphviz DOT of the operators, filled by where they run; with an
        explanation, CPU operators also say why, and edges crossing a
        boundary carry the bytes of the tensor."""
        palette = ["#dddddd", "#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db"]
        graph = self.graph
        why = {} if explanation is None else {
            item.node: item.kind for item in explanation.nodes if item.subgraph is None}
        crossing = {} if explanation is None else explanation.entry_bytes()
        segment_of = {k: number for number, seg in enumerate(self.segments) for k in seg.nodes}
        lines = ["digraph partition {", "  rankdir=TB;", '  node [shape=box, style=filled];']
        for number, seg in enumerate(self.segments):
            color = palette[seg.device_class % len(palette)]
            where = "cpu(0)" if seg.device_class == CPU else \
                f"{self.accelerator}({self.devices[seg.device_class - 1]})"
            lines.append(f"  subgraph cluster_{number} {{")
            lines.append(f'    label="{_dot_text(where)}"; color="{color}";')
            for k in seg.nodes:
                node = graph.nodes[k]
                label = f"{_dot_text(node.name)}\\n{_dot_text(node.op)}"
                if k in why:
                    label += f"\\n({_dot_text(why[k])})"
                lines.append(f'    n{k} [label="{label}", fillcolor="{color}"];')
            lines.append("  }")
        for k, node in enumerate(graph.nodes):
            if node.is_variable:
                continue
            for producer, output, _ in node.inputs:
                p = graph.index[id(producer)]
                if producer.is_variable:
                    continue
                entry = graph.entry(producer, output)
                if segment_of.get(p) != segment_of.get(k) and entry in crossing:
                    lines.append(f'  n{p} -> n{k} [label="{crossing[entry]} B"];')
                else:
                    lines.append(f"  n{p} -> n{k};")
        lines.append("}")
        return "\n".join(lines)

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2)


def _dot_text(text: str) -> str:
    """text inside a double-quoted DOT string."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def partition_graph(graph: Graph, accelerator: str, supported: Callable[[int], Sequence[int]],
                    devices: Sequence[int], shapes: Sequence[Any], dtypes: Sequence[Any],
                    weight_names: frozenset[str],
                    placement: Mapping[int, int | None] | None = None,
                    costs: Callable[[int], OffloadCosts | None] | None = None,
                    declined: Mapping[int, Mapping[int, str]] | None = None,
                    storage: Mapping[int, StorageVerdict] | None = None,
                    stypes: Mapping[str, int] | None = None) -> Partition:
    """Partitions graph for one accelerator.

    supported(dev_id) returns the node indices the plugin runs on that
    device; devices lists the device of each accelerator class. Without
    placement a node goes to the first device that supports it; with it,
    node k may go only to device placement[k] (None: the CPU), when that
    device supports it (the executor's group2ctx). With costs (a device's
    OffloadCosts, or None), a candidate subgraph whose estimated copies and
    launch cost more than it gains stays on the CPU (acc_host.partition.offload).
    declined: the plugin's reasons for the nodes it declined, per device
    (kept for explain()). storage: the verdict on each operator reading a
    sparse variable, stypes: the sparse variables (name -> isSparse value;
    acc_host.partition.storage)."""
    op_nodes = [k for k, node in enumerate(graph.nodes) if not node.is_variable]
    local = {k: i for i, k in enumerate(op_nodes)}
    classes = [CPU] * len(op_nodes)
    offered: dict[int, Sequence[int]] = {}
    for number, dev_id in enumerate(devices, start=1):
        offered[dev_id] = supported(dev_id)
        for k in offered[dev_id]:
            if k in local and classes[local[k]] == CPU and (
                    placement is None or placement.get(k) == dev_id):
                classes[local[k]] = number
    predecessors = [[local[graph.index[id(producer)]] for producer, _, _ in graph.nodes[k].inputs
                     if not producer.is_variable] for k in op_nodes]
    kept: list[KeptOnCpu] = []
    while True:
        local_segments = segment(len(op_nodes), predecessors, classes)
        segments = tuple(Segment(seg.device_class, tuple(op_nodes[i] for i in seg.nodes))
                         for seg in local_segments)
        leaving = _leaving_entries(graph, segments)
        rejected = [] if costs is None else _not_paying(graph, segments, devices, costs, shapes,
                                                          dtypes, weight_names, leaving)
        if not rejected:
            break
        kept += rejected
        for verdict in rejected:  # back to the CPU; segment again (neighbours may merge)
            for k in verdict.nodes:
                classes[local[k]] = CPU
    subgraphs: list[SubgraphSpec] = []
    for seg in segments:
        if seg.device_class != CPU:
            kept_sparse = (sparse_entries_kept(graph, seg.nodes, stypes, storage or {})
                           if stypes else None)
            subgraphs.append(extract(graph, seg, len(subgraphs), shapes, dtypes, weight_names,
                                     leaving, devices[seg.device_class - 1], kept_sparse))
    return Partition(graph, segments, tuple(subgraphs), accelerator, tuple(devices), tuple(kept),
                     offered, placement, shapes, dtypes, weight_names, declined or {},
                     storage or {})


def _not_paying(graph: Graph, segments: Sequence[Segment], devices: Sequence[int],
                costs: Callable[[int], OffloadCosts | None], shapes: Sequence[Any],
                dtypes: Sequence[Any], weight_names: frozenset[str],
                leaving: set[int]) -> list[KeptOnCpu]:
    rejected = []
    for seg in segments:
        if seg.device_class == CPU:
            continue
        device = devices[seg.device_class - 1]
        device_costs = costs(device)
        if device_costs is None:
            continue
        verdict = judge(graph, seg.nodes, device, device_costs, shapes, dtypes, weight_names,
                        leaving)
        if verdict is not None:
            rejected.append(verdict)
    return rejected
