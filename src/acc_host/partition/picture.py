"""The partition as a picture: every operator a box coloured by where it
runs, declined operators outlined in red with the plugin's reason, and
the bytes of every tensor crossing a subgraph boundary on its arrow.

:func:`partition_drawing` builds an :class:`acc_host.drawing.Drawing`,
which ``acc-host partition --format svg|png`` lays out and writes without
Graphviz. A node's box reads its name, its operator and where it runs; an
operator left on the CPU adds a line with its reason kind
(``unsupported_op``, ``not_paying``, ...), and its tooltip (the SVG
``<title>``) carries the whole sentence of the explain report, which for
an operator the plugin declined is :attr:`NodeReason.reason` (the plugin's
own reason once it gives one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..drawing import DrawEdge, Drawing, DrawNode, LegendEntry

if TYPE_CHECKING:  # types only
    from .explain import Explanation, NodeReason
    from .segment import Partition

__all__ = ["partition_drawing", "DEVICE_COLOURS", "CPU_COLOUR", "DECLINED_STROKE",
           "is_declined"]

CPU_COLOUR = "#dddddd"
# One per accelerator device, in the partition's device order.
DEVICE_COLOURS = ("#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db", "#a8dadc")
DECLINED_STROKE = "#c0392b"
_REASON_CHARS = 48


def is_declined(reason: NodeReason) -> bool:
    """Whether the plugin refused the operator (supportedOps said no), as
    opposed to the host keeping it on the CPU."""
    return reason.subgraph is None and reason.kind.startswith("unsupported")


def _node_ids(partition: Partition) -> dict[int, str]:
    """Operator index -> drawing id: its name, made unique with #index."""
    graph = partition.graph
    ids: dict[int, str] = {}
    seen: set[str] = set()
    for k, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        name = node.name if node.name not in seen else f"{node.name}#{k}"
        seen.add(name)
        ids[k] = name
    return ids


def partition_drawing(partition: Partition, explanation: Explanation,
                      title: str = "") -> Drawing:
    """The operators of partition (variables left out) as a Drawing."""
    graph = partition.graph
    ids = _node_ids(partition)
    reasons = {item.node: item for item in explanation.nodes}
    where_colour = {"cpu(0)": CPU_COLOUR}
    for number, dev_id in enumerate(partition.devices):
        where_colour[f"{partition.accelerator}({dev_id})"] = \
            DEVICE_COLOURS[number % len(DEVICE_COLOURS)]
    drawing = Drawing(title=title)
    used: dict[str, int] = {}
    declined = 0
    for k, node_id in ids.items():
        node = graph.nodes[k]
        reason = reasons.get(k)
        where = reason.where if reason is not None else "cpu(0)"
        used[where] = used.get(where, 0) + 1
        lines = [node.name, node.op, where if reason is None or reason.subgraph is None
                 else f"{where}, subgraph {reason.subgraph}"]
        tooltip = [f"{node.name} ({node.op})", f"runs on {lines[2]}"]
        refused = reason is not None and is_declined(reason)
        if reason is not None and reason.subgraph is None and reason.kind:
            short = reason.reason if len(reason.reason) <= _REASON_CHARS else \
                reason.reason[:_REASON_CHARS - 1] + "\u2026"
            lines.append(("declined: " if refused else "kept: ") + reason.kind)
            if refused:
                lines.append(short)
            tooltip.append(f"{reason.kind}: {reason.reason}")
        declined += refused
        drawing.nodes.append(DrawNode(
            id=node_id, lines=tuple(lines), fill=where_colour.get(where, CPU_COLOUR),
            tooltip="\n".join(tooltip), stroke=DECLINED_STROKE if refused else "#333333",
            dashed=refused, kind="declined" if refused else
            ("offloaded" if reason is not None and reason.subgraph is not None else "cpu")))
    crossing = explanation.entry_bytes()
    segment_of = {k: number for number, seg in enumerate(partition.segments) for k in seg.nodes}
    for k, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        for producer, output, _ in node.inputs:
            if producer.is_variable:
                continue
            p = graph.index[id(producer)]
            entry = graph.entry(producer, output)
            label = f"{crossing[entry]} B" if (segment_of.get(p) != segment_of.get(k)
                                               and entry in crossing) else ""
            drawing.edges.append(DrawEdge(ids[p], ids[k], label))
    for where, colour in where_colour.items():
        if where in used:
            drawing.legend.append(LegendEntry(colour, f"{where}: {used[where]} operator(s)"))
    if declined:
        drawing.legend.append(LegendEntry(
            CPU_COLOUR, f"declined by {partition.accelerator}'s supportedOps ({declined}): the "
            "reason is in the box and its tooltip", stroke=DECLINED_STROKE, dashed=True))
    return drawing
