"""Why every operator of a partition runs where it does.

:func:`explain` works from what :class:`acc_host.partition.segment.Partition` keeps
(supportedOps' answer per device, the placement, the kept-on-CPU verdicts of
cost-aware partitioning, the entry shapes and dtypes), after the fact, so
partitioning itself records nothing more than references. Each operator gets
one reason, a ``kind`` scripts can test and a sentence people can read:

==================  ==========================================================
kind                meaning
==================  ==========================================================
``offloaded``       supportedOps accepted it; it runs in a subgraph
``other_device``    the first device refused it, a later device runs it
``placed``          its ``__ctx_group__`` placed it on that device
``cycle_cut``       offloaded, in a subgraph kept apart from an earlier one on
                    the same device: merging them would make a cycle
``unsupported``     supportedOps did not accept it (refined, when the caller
                    can probe, into ``unsupported_op`` or ``unsupported_dtype``);
                    a plugin with supportedOpsReasons (ABI 1.1) says why, in
                    ``plugin_reason``, which the text ends with
``no_abi_dtype``    a value it reads or writes has a dtype the ABI cannot
                    describe, so it was never offered
``placed_cpu``      its ``__ctx_group__`` placed it on the CPU
``below_min_size``  its candidate subgraph had fewer operators than the
                    plugin's ``min_subgraph_ops``
``not_paying``      its candidate subgraph's copies and launch would cost more
                    than offloading gains (acc_host.partition.offload)
``control_flow``    a control-flow node: the host runs it, and its bodies,
                    partitioned on their own, are listed under it
==================  ==========================================================

The boundary report lists every tensor entering or leaving each subgraph,
with its shape, dtype and bytes, and whether it is copied per forward
(``copy``), once at load (``weight``) or stays on the device (``device``,
between subgraphs of one device).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..abi.sparse import STYPE_NAMES
from ..abi.tensor import dtype_code
from .offload import KeptOnCpu

if TYPE_CHECKING:  # types only: the partition (segment) calls this module, not the reverse
    from .segment import Partition, SubgraphSpec

__all__ = ["NodeReason", "BoundaryTensor", "Explanation", "Refine", "explain"]

CPU_NAME = "cpu(0)"
# Kinds of reason where the plugin was not asked, or accepted the node.
_NOT_ASKED = frozenset({"offloaded", "placed", "cycle_cut", "no_abi_dtype", "placed_cpu"})
# Pairs of subgraphs x nodes beyond which cycle witnesses are not searched.
_CYCLE_SEARCH_LIMIT = 20_000_000

Refine = Callable[[int, int], "tuple[str, str] | None"]
"""refine(node, dev_id) -> (kind, reason) for a node supportedOps refused, or
None to keep the plain "unsupported" reason."""


@dataclass(frozen=True)
class NodeReason:
    """Where one operator runs and why."""

    node: int
    name: str
    op: str
    where: str             # "cpu(0)" or "<accelerator>(<dev>)"
    subgraph: int | None   # index of its subgraph, None on the CPU
    kind: str
    reason: str
    # The plugin's own words on why it declined the node (supportedOpsReasons,
    # ABI 1.1), prefixed with the device when several devices declined it;
    # None when the plugin gave none. ``reason`` ends with it too.
    plugin_reason: str | None = None
    # For an operator reading a sparse variable (ABI 1.2): whether the sparse
    # array reaches the plugin as it is, is densified at the subgraph
    # boundary, or stays on the CPU, and why (acc_host.partition.storage).
    # ``reason`` ends with it too.
    storage: str | None = None


@dataclass(frozen=True)
class BoundaryTensor:
    """One tensor entering or leaving a subgraph."""

    subgraph: int
    where: str
    direction: str         # "in" or "out"
    name: str
    entry: int
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    transfer: str          # "copy" (per forward), "weight" (once, at load), "device"
    peer: str              # the producer ("in") or the readers ("out")


@dataclass(frozen=True)
class Explanation:
    """Every operator's reason, and every subgraph boundary."""

    accelerator: str
    nodes: tuple[NodeReason, ...]
    boundaries: tuple[BoundaryTensor, ...]
    device_memory: bool | None  # whether the plugin keeps its own memory (None: unknown)
    # The bodies of control-flow nodes, each partitioned on its own: (node,
    # body label, its explanation), shown under their node.
    bodies: tuple[tuple[int, str, Explanation], ...] = ()

    def counts(self) -> dict[str, int]:
        """How many operators have each kind of reason."""
        counts: dict[str, int] = {}
        for item in self.nodes:
            counts[item.kind] = counts.get(item.kind, 0) + 1
        return counts

    def totals(self) -> dict[str, int]:
        """Bytes per forward copied in and out, and weight bytes at load."""
        totals = {"copied_in_bytes": 0, "copied_out_bytes": 0, "copies": 0,
                  "weight_bytes": 0, "on_device_bytes": 0}
        for tensor in self.boundaries:
            if tensor.transfer == "copy":
                key = "copied_in_bytes" if tensor.direction == "in" else "copied_out_bytes"
                totals[key] += tensor.nbytes
                totals["copies"] += 1
            elif tensor.transfer == "weight":
                totals["weight_bytes"] += tensor.nbytes
            else:
                totals["on_device_bytes"] += tensor.nbytes
        return totals

    def entry_bytes(self) -> dict[int, int]:
        """Bytes of each entry that crosses a boundary (weights excluded)."""
        return {tensor.entry: tensor.nbytes for tensor in self.boundaries
                if tensor.transfer != "weight"}

    def to_json(self) -> dict[str, Any]:
        document = {"accelerator": self.accelerator, "device_memory": self.device_memory,
                    "counts": self.counts(), "totals": self.totals(),
                    "nodes": [asdict(item) for item in self.nodes],
                    "boundaries": [{**asdict(tensor), "shape": list(tensor.shape)}
                                   for tensor in self.boundaries]}
        if self.bodies:
            document["bodies"] = [{"node": node, "body": label, "explain": body.to_json()}
                                  for node, label, body in self.bodies]
        return document

    def format_text(self) -> str:
        """A table of the operators and one of the boundaries."""
        lines = ["why each operator runs where it does:"]
        name_width = max((len(item.name) for item in self.nodes), default=4)
        op_width = max((len(item.op) for item in self.nodes), default=2)
        name_width, op_width = min(max(name_width, 4), 40), min(max(op_width, 2), 24)
        for item in self.nodes:
            where = item.where if item.subgraph is None else f"{item.where} sg{item.subgraph}"
            lines.append(f"  {item.name:<{name_width}} {item.op:<{op_width}} {where:<14} "
                         f"{item.kind}: {item.reason}")
            for node, label, body in self.bodies:
                if node == item.node:
                    lines += [f"    {line}" for line in body._format_body(label)]
        counts = ", ".join(f"{kind} {count}" for kind, count in sorted(self.counts().items()))
        lines.append(f"  ({counts})")
        lines += self._format_boundaries()
        return "\n".join(lines)

    def _format_body(self, label: str) -> list[str]:
        """A body's placement, to be indented under its control-flow node."""
        offloaded = sum(1 for item in self.nodes if item.subgraph is not None)
        subgraphs = len({item.subgraph for item in self.nodes if item.subgraph is not None})
        lines = [f"body {label}: {offloaded}/{len(self.nodes)} operators on {self.accelerator} "
                 f"in {subgraphs} subgraph(s), compiled once, run every iteration"]
        text = [line.replace("  per forward: ", "  per body run: ", 1)
                for line in self.format_text().splitlines()[1:]]
        return lines + text

    def _format_boundaries(self) -> list[str]:
        if not self.boundaries:
            return ["no subgraph boundaries: nothing runs on the accelerator"]
        memory = {True: "the plugin keeps its own memory: copyToAcc / copyFromAcc",
                  False: "the plugin works in host memory: passed by pointer, not copied",
                  None: "whether they are copied depends on the plugin's memory"}
        lines = [f"tensors crossing subgraph boundaries ({memory[self.device_memory]}):"]
        width = min(max(len(tensor.name) for tensor in self.boundaries), 48)
        current = -1
        for tensor in self.boundaries:
            if tensor.subgraph != current:
                current = tensor.subgraph
                lines.append(f"  subgraph {current} on {tensor.where}:")
            shape = "x".join(str(d) for d in tensor.shape) or "scalar"
            lines.append(f"    {tensor.direction:<3} {tensor.name:<{width}} {shape:>16} "
                         f"{tensor.dtype:<8} {tensor.nbytes:>10} B  {tensor.transfer:<6} "
                         f"{tensor.peer}")
        totals = self.totals()
        lines.append(f"  per forward: {totals['copied_in_bytes']} B in, "
                     f"{totals['copied_out_bytes']} B out in {totals['copies']} transfers; "
                     f"{totals['on_device_bytes']} B stay on the device; weights "
                     f"{totals['weight_bytes']} B once, at loadModel")
        return lines


# ---- computing it -------------------------------------------------------------------


def explain(partition: Partition, refine: Refine | None = None,
            device_memory: bool | None = None) -> Explanation:
    """The reasons and boundaries of partition; refine names a refusal more
    precisely (see :data:`Refine`), device_memory says whether the plugin
    keeps its own memory (supportsImperative)."""
    context = _Context(partition)
    reasons = [context.reason(k, refine) for seg in partition.segments for k in seg.nodes]
    boundaries = [tensor for spec in partition.subgraphs for tensor in context.boundary(spec)]
    return Explanation(partition.accelerator, tuple(reasons), tuple(boundaries), device_memory)


class _Context:
    """Lookups over one partition, built once for all nodes."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        graph = partition.graph
        self.graph = graph
        self.segment_of = {k: number for number, seg in enumerate(partition.segments)
                           for k in seg.nodes}
        self.spec_of_segment: dict[int, SubgraphSpec] = {}
        by_nodes = {spec.nodes: spec for spec in partition.subgraphs}
        for number, seg in enumerate(partition.segments):
            if seg.nodes in by_nodes:
                self.spec_of_segment[number] = by_nodes[seg.nodes]
        self.offered = {dev: set(ids) for dev, ids in partition.offered.items()}
        self.kept: dict[int, KeptOnCpu] = {k: verdict for verdict in partition.kept_on_cpu
                                           for k in verdict.nodes}
        self.predecessors = [[graph.index[id(producer)] for producer, _, _ in node.inputs
                              if not producer.is_variable] for node in graph.nodes]
        self.cuts = _cycle_cuts(partition, self.predecessors)

    def where(self, k: int) -> tuple[str, int | None, int | None]:
        """(context text, subgraph index, device) of operator k."""
        number = self.segment_of[k]
        spec = self.spec_of_segment.get(number)
        if spec is None:
            return CPU_NAME, None, None
        device = self.partition.devices[spec.device_class - 1]
        return f"{self.partition.accelerator}({device})", spec.index, device

    def reason(self, k: int, refine: Refine | None) -> NodeReason:
        node = self.graph.nodes[k]
        where, subgraph, device = self.where(k)
        if subgraph is None or device is None:
            kind, text = self._on_cpu(k, refine)
            devices = self._offered_to(k)
        else:
            kind, text = self._offloaded(k, subgraph, device)
            devices = list(self.partition.devices[:self.partition.devices.index(device)])
        said = self._plugin_reason(k, devices) if kind not in _NOT_ASKED else None
        if said is not None:
            text = f"{text}; {self.partition.accelerator} says: {said}"
        storage = self._storage_text(k, subgraph)
        if storage is not None:
            text = f"{text}; {storage}"
        return NodeReason(k, node.name, node.op, where, subgraph, kind, text, said, storage)

    def _storage_text(self, k: int, subgraph: int | None) -> str | None:
        """What became of node k's sparse inputs (see NodeReason.storage)."""
        verdict = self.partition.storage.get(k)
        if verdict is None:
            return None
        inputs = ", ".join(f"input {position} ({name}) is {stype}"
                           for position, name, stype in verdict.sparse_inputs)
        if subgraph is None:
            why = "" if verdict.verdict == "cpu" else \
                f"; {self.partition.accelerator} would take it {verdict.verdict}"
            return f"{inputs}: the CPU runs it on the sparse array ({verdict.reason}{why})"
        spec = self.partition.subgraphs[subgraph]
        if all(name in spec.sparse_inputs for _, name, _ in verdict.sparse_inputs):
            return f"{inputs}: kept sparse across the ABI (MXTensor.isSparse)"
        if verdict.verdict == "sparse":
            return (f"{inputs}: densified at the subgraph boundary (another reader in the "
                    "subgraph takes it dense)")
        return f"{inputs}: densified at the subgraph boundary ({verdict.reason})"

    def _offered_to(self, k: int) -> list[int]:
        placement = self.partition.placement
        if placement is not None and placement.get(k) is not None:
            return [placement[k]]  # type: ignore[list-item]
        return list(self.partition.devices)

    def _plugin_reason(self, k: int, devices: Sequence[int]) -> str | None:
        """The plugin's reasons for declining node k on devices, or None."""
        said = [(device, self.partition.declined.get(device, {}).get(k)) for device in devices]
        given = [(device, text) for device, text in said if text]
        if not given:
            return None
        if len({text for _, text in given}) == 1 and len(given) == len(devices):
            return given[0][1]
        return "; ".join(f"{self._label(device)}: {text}" for device, text in given)

    def _label(self, device: int) -> str:
        return f"{self.partition.accelerator}({device})"

    def _offloaded(self, k: int, subgraph: int, device: int) -> tuple[str, str]:
        placement = self.partition.placement
        devices = self.partition.devices
        if subgraph in self.cuts:
            earlier, via = self.cuts[subgraph]
            return "cycle_cut", (f"offloaded, in subgraph {subgraph}, kept apart from subgraph "
                                 f"{earlier} on {self._label(device)}: merging them would make "
                                 f"a cycle through {via}")
        if placement is not None and len(devices) > 1 and placement.get(k) == device:
            return "placed", f"{self._placed_by(k)} places it on {self._label(device)}"
        refused = [dev for dev in devices[:devices.index(device)]
                   if k not in self.offered.get(dev, ())]
        if refused:
            return "other_device", (f"{', '.join(self._label(d) for d in refused)} did not "
                                    f"accept it; {self._label(device)} did")
        return "offloaded", f"supportedOps on {self._label(device)} accepted it"

    def _on_cpu(self, k: int, refine: Refine | None) -> tuple[str, str]:
        verdict = self.kept.get(k)
        if verdict is not None:
            names = [self.graph.nodes[n].name for n in verdict.nodes]
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4
                                            else "")
            return verdict.kind, (f"not offloaded to {self._label(verdict.device)} with "
                                  f"[{shown}]: {verdict.reason}")
        placement = self.partition.placement
        if placement is not None and k in placement and placement[k] is None:
            return "placed_cpu", f"{self._placed_by(k)} places it on cpu(0)"
        bad = self._abi_dtype_problem(k)
        if bad is not None:
            return "no_abi_dtype", f"{bad}: never offered to the plugin"
        devices = list(self.partition.devices)
        if placement is not None and placement.get(k) is not None:
            devices = [placement[k]]  # type: ignore[list-item]
        node = self.graph.nodes[k]
        dtype = self._dtype_text(k)
        for device in devices:
            if refine is not None:
                refined = refine(k, device)
                if refined is not None:
                    return refined
        listed = ", ".join(self._label(d) for d in devices)
        return "unsupported", f"supportedOps on {listed} did not accept {node.op} ({dtype})"

    def _placed_by(self, k: int) -> str:
        group = self.graph.nodes[k].attrs.get("__ctx_group__")
        return f"its __ctx_group__ {group!r}" if group else "the executor's context"

    def _dtype_text(self, k: int) -> str:
        dtypes = self.partition.dtypes
        start = self.graph.entry_start[k]
        if start >= len(dtypes) or dtypes[start] is None:
            return "dtype unknown"
        return str(np.dtype(dtypes[start]))

    def _abi_dtype_problem(self, k: int) -> str | None:
        dtypes = self.partition.dtypes
        if not dtypes:
            return None
        graph = self.graph
        entries = [*graph.input_entries(k), *graph.output_entries(k)]
        for entry in entries:
            dtype = dtypes[entry]
            if dtype is None:
                return "a value's dtype could not be inferred"
            try:
                dtype_code(dtype)
            except Exception:
                return f"it reads or writes {np.dtype(dtype)}, which the ABI has no type code for"
        return None

    # ---- boundaries ---------------------------------------------------------------------

    def boundary(self, spec: SubgraphSpec) -> list[BoundaryTensor]:
        device = self.partition.devices[spec.device_class - 1]
        where = self._label(device)
        producers = self._producers
        tensors = []
        for name, entry in spec.inputs.items():
            producer = producers.get(entry)
            sparse = STYPE_NAMES.get(spec.sparse_inputs.get(name, 0), "default")
            if name in spec.weights:
                transfer, peer = "weight", "once, at loadModel"
            elif producer is None:
                transfer, peer = "copy", "graph input"
            else:
                transfer, peer = self._transfer_from(producer, device)
            if sparse != "default":  # passed by pointer, host memory (ABI 1.2)
                peer = f"{peer}, {sparse} (bytes of the dense size)"
            tensors.append(self._tensor(spec.index, where, "in", name, entry, transfer, peer))
        readers = self._readers
        heads = {self.graph.entry(node, output) for node, output in self.graph.heads}
        for name, entry in spec.outputs.items():
            transfer, peer = self._transfer_to(readers.get(entry, []), entry in heads, spec,
                                               device)
            tensors.append(self._tensor(spec.index, where, "out", name, entry, transfer, peer))
        return tensors

    def _tensor(self, subgraph: int, where: str, direction: str, name: str, entry: int,
                transfer: str, peer: str) -> BoundaryTensor:
        shape = tuple(int(d) for d in (self.partition.shapes[entry] or ()))
        dtype = np.dtype(self.partition.dtypes[entry] or np.float32)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return BoundaryTensor(subgraph, where, direction, name, entry, shape, str(dtype), nbytes,
                              transfer, peer)

    @functools.cached_property
    def _producers(self) -> dict[int, int]:
        """The operator node producing each entry."""
        graph = self.graph
        return {entry: k for k, node in enumerate(graph.nodes) if not node.is_variable
                for entry in graph.output_entries(k)}

    @functools.cached_property
    def _readers(self) -> dict[int, list[int]]:
        """The nodes reading each entry."""
        readers: dict[int, list[int]] = {}
        for k, node in enumerate(self.graph.nodes):
            for producer, output, _ in node.inputs:
                readers.setdefault(self.graph.entry(producer, output), []).append(k)
        return readers

    def _transfer_from(self, producer: int, device: int) -> tuple[str, str]:
        where, subgraph, other = self.where(producer)
        name = self.graph.nodes[producer].name
        if subgraph is not None and other == device:
            return "device", f"from subgraph {subgraph} ({name})"
        return "copy", f"from {where} ({name})"

    def _transfer_to(self, readers: Iterable[int], is_head: bool, spec: SubgraphSpec,
                     device: int) -> tuple[str, str]:
        outside = [k for k in readers if k not in spec.nodes]
        places = []
        copied = is_head
        for k in outside:
            where, subgraph, other = self.where(k)
            if subgraph is not None and other == device:
                places.append(f"subgraph {subgraph}")
            else:
                places.append(f"{where} ({self.graph.nodes[k].name})")
                copied = True
        if is_head:
            places.append("graph output")
        unique = list(dict.fromkeys(places))
        peer = "to " + ", ".join(unique[:3]) + (f" and {len(unique) - 3} more"
                                                 if len(unique) > 3 else "")
        return ("copy" if copied else "device"), peer


def _cycle_cuts(partition: Partition, predecessors: Sequence[Sequence[int]]
                ) -> dict[int, tuple[int, str]]:
    """For each subgraph kept apart from an earlier subgraph of its device
    because merging would make a cycle: (that subgraph, the node outside
    both on the path from it)."""
    specs = list(partition.subgraphs)
    pairs = sum(1 for i, a in enumerate(specs) for b in specs[i + 1:]
                if a.device_class == b.device_class)
    if pairs == 0 or pairs * len(predecessors) > _CYCLE_SEARCH_LIMIT:
        return {}
    where = {k: CPU_NAME for k in range(len(predecessors))}
    for spec in specs:
        label = f"subgraph {spec.index}"
        for k in spec.nodes:
            where[k] = label
    names = partition.graph.nodes
    cuts: dict[int, tuple[int, str]] = {}
    for i, later in enumerate(specs):
        for earlier in reversed(specs[:i]):
            if earlier.device_class != later.device_class:
                continue
            via = _outside_path(predecessors, set(earlier.nodes), set(later.nodes))
            if via is not None:
                cuts[later.index] = (earlier.index, f"{names[via].name} ({where[via]})")
                break
    return cuts


def _outside_path(predecessors: Sequence[Sequence[int]], first: set[int],
                  second: set[int]) -> int | None:
    """A node outside first and second on a path from first to second, or
    None when every path between them is direct."""
    origin: dict[int, int] = {}
    queue: deque[int] = deque()
    for k in second:
        for p in predecessors[k]:
            if p not in second and p not in first and p not in origin:
                origin[p] = p
                queue.append(p)
    while queue:
        k = queue.popleft()
        for p in predecessors[k]:
            if p in first:
                return origin[k]
            if p not in origin and p not in second:
                origin[p] = origin[k]
                queue.append(p)
    return None
