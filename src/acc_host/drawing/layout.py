"""Placing a :class:`Drawing`: grandalf's layered (Sugiyama) layout.

Each connected component is ranked top to bottom (sources first), ordered
within its layers to reduce crossings, and given coordinates by Brandes and
Koepf's method (grandalf's SugiyamaLayout); components sit side by side,
left to right in the order of their first node. Box sizes come from the
text: 7 px per character at the 12 px font the writers use, 16 px per
line. An edge spanning several layers bends through the places grandalf
keeps free for it (its dummy vertices).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError
from .model import Drawing, DrawNode

__all__ = ["Layout", "PlacedNode", "PlacedEdge", "layout", "CHAR_WIDTH", "LINE_HEIGHT",
           "FONT_SIZE"]

FONT_SIZE = 12
CHAR_WIDTH = 7.5
LINE_HEIGHT = 16.0
_PAD_X, _PAD_Y = 10.0, 6.0
_X_SPACE, _Y_SPACE = 24.0, 36.0
_COMPONENT_GAP = 40.0
_MARGIN = 20.0
_MAX_LINE = 48  # characters: longer lines are cut with an ellipsis in a box


@dataclass(frozen=True)
class PlacedNode:
    """A node and its box: centre (x, y), width w and height h."""

    node: DrawNode
    x: float
    y: float
    w: float
    h: float
    lines: tuple[str, ...]


@dataclass(frozen=True)
class PlacedEdge:
    """An edge's polyline, from the source's bottom to the target's top."""

    source: str
    target: str
    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Layout:
    """Where everything goes; the picture spans (0, 0) to (width, height)
    below a title band of title_height."""

    nodes: dict[str, PlacedNode]
    edges: list[PlacedEdge]
    width: float
    height: float
    title_height: float


def _short(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE - 1] + "\u2026"


def box_size(lines: tuple[str, ...]) -> tuple[float, float]:
    """The width and height of a box holding lines."""
    longest = max((len(line) for line in lines), default=1)
    return (max(40.0, longest * CHAR_WIDTH + 2 * _PAD_X),
            max(1, len(lines)) * LINE_HEIGHT + 2 * _PAD_Y)


class _View:
    """grandalf's vertex view: the box size in, the centre out."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)


class _EdgeView:
    def __init__(self) -> None:
        self.path: list[tuple[float, float]] = []

    def setpath(self, points: list[tuple[float, float]]) -> None:
        self.path = [(float(x), float(y)) for x, y in points]


def layout(drawing: Drawing) -> Layout:
    """Places drawing's nodes and routes its edges (grandalf's Sugiyama
    layout per connected component). InvalidArgumentError when an edge
    names a node the drawing lacks or two nodes share an id."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    vertices: dict[str, Vertex] = {}
    for node in drawing.nodes:
        if node.id in vertices:
            raise InvalidArgumentError(f"drawing: two nodes have the id {node.id!r}")
        lines = tuple(_short(line) for line in node.lines) or (node.id,)
        vertex = Vertex(node)
        vertex.view = _View(*box_size(lines))
        vertex.lines = lines
        vertices[node.id] = vertex
    edges: list[tuple[Edge, str]] = []
    for edge in drawing.edges:
        if edge.source not in vertices or edge.target not in vertices:
            missing = edge.source if edge.source not in vertices else edge.target
            raise InvalidArgumentError(f"drawing: an edge names the node {missing!r}, which "
                                       "the drawing does not have")
        if edge.source == edge.target:
            continue
        item = Edge(vertices[edge.source], vertices[edge.target])
        item.view = _EdgeView()
        edges.append((item, edge.label))
    graph = Graph(list(vertices.values()), [item for item, _ in edges])
    title_height = 30.0 if drawing.title else 0.0
    offset_x, height = _MARGIN, 0.0
    order = {node.id: index for index, node in enumerate(drawing.nodes)}
    components = sorted(graph.C, key=lambda c: min(order[v.data.id] for v in c.sV))
    placed: dict[str, PlacedNode] = {}
    for component in components:
        sugiyama = SugiyamaLayout(component)
        sugiyama.xspace, sugiyama.yspace = _X_SPACE, _Y_SPACE
        sugiyama.init_all()
        sugiyama.draw()
        left = min(v.view.xy[0] - v.view.w / 2 for v in component.sV)
        right = max(v.view.xy[0] + v.view.w / 2 for v in component.sV)
        top = min(v.view.xy[1] - v.view.h / 2 for v in component.sV)
        dx, dy = offset_x - left, _MARGIN + title_height - top
        for vertex in component.sV:
            x, y = vertex.view.xy
            placed[vertex.data.id] = PlacedNode(vertex.data, x + dx, y + dy, vertex.view.w,
                                                vertex.view.h, vertex.lines)
            height = max(height, y + dy + vertex.view.h / 2)
        for item in component.sE:
            item.view.path = [(x + dx, y + dy) for x, y in item.view.path]
        offset_x += right - left + _COMPONENT_GAP
    routed = []
    for item, label in edges:
        source, target = placed[item.v[0].data.id], placed[item.v[1].data.id]
        middle = item.view.path[1:-1]
        routed.append(PlacedEdge(source.node.id, target.node.id, label, (
            (source.x, source.y + source.h / 2), *middle, (target.x, target.y - target.h / 2))))
    width = max(offset_x - _COMPONENT_GAP + _MARGIN, 2 * _MARGIN)
    width = max(width, len(drawing.title) * CHAR_WIDTH * 1.2 + 2 * _MARGIN)
    return Layout(placed, routed, width, height + _MARGIN, title_height)
