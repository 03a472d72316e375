"""What a picture shows: nodes, edges, a title and a legend."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DrawNode", "DrawEdge", "LegendEntry", "Drawing"]


@dataclass(frozen=True)
class DrawNode:
    """One box: ``id`` (unique in the drawing), its ``lines`` of text, the
    ``fill`` colour, a ``tooltip`` (SVG ``<title>``), a ``dashed`` outline
    in ``stroke`` colour for nodes to point out, a ``kind`` written as the
    SVG element's class (for scripts and tests) and ``oval`` for a
    pill-shaped box."""

    id: str
    lines: tuple[str, ...]
    fill: str = "#ffffff"
    tooltip: str = ""
    stroke: str = "#333333"
    dashed: bool = False
    kind: str = ""
    oval: bool = False  # a pill-shaped box (MXNet draws its inputs as ovals)


@dataclass(frozen=True)
class DrawEdge:
    """An arrow from node ``source`` to node ``target`` (ids), with an
    optional ``label`` (a shape, bytes crossing a boundary)."""

    source: str
    target: str
    label: str = ""


@dataclass(frozen=True)
class LegendEntry:
    """One legend row: a swatch of ``fill`` (dashed in ``stroke`` when
    ``dashed``) and its ``text``."""

    fill: str
    text: str
    stroke: str = "#333333"
    dashed: bool = False


@dataclass
class Drawing:
    """A graph to draw. Edges must name nodes of the drawing."""

    nodes: list[DrawNode] = field(default_factory=list)
    edges: list[DrawEdge] = field(default_factory=list)
    title: str = ""
    legend: list[LegendEntry] = field(default_factory=list)

    def node(self, node_id: str) -> DrawNode:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)
