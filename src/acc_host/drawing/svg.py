"""A :class:`Drawing` as SVG, written directly (no Graphviz).

Every node is ``<g class="node KIND" id="node-ID" data-id="ID">`` holding a
``<title>`` (its tooltip: browsers show it on hover), a ``<rect>`` and one
``<text>`` per line; every edge is ``<g class="edge" data-source="ID"
data-target="ID">`` with a ``<title>`` "source -> target", a ``<polyline>``
ending in an arrowhead and its label. The legend is ``<g class="legend">``.
Scripts (and the tests) read the picture back with any XML parser.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .layout import CHAR_WIDTH, FONT_SIZE, LINE_HEIGHT, Layout, layout
from .model import Drawing

__all__ = ["to_svg", "legend_height"]

_LEGEND_ROW = 20.0
_FONT = "Helvetica, Arial, sans-serif"


def legend_height(drawing: Drawing) -> float:
    return (len(drawing.legend) * _LEGEND_ROW + 16.0) if drawing.legend else 0.0


def _points(points: tuple[tuple[float, float], ...]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def to_svg(drawing: Drawing, placed: Layout | None = None) -> str:
    """drawing as an SVG document (laid out by acc_host.drawing.layout
    unless placed is given)."""
    placed = placed if placed is not None else layout(drawing)
    legend_top = placed.height
    width = max(placed.width, max((len(entry.text) * CHAR_WIDTH + 60 for entry in
                                   drawing.legend), default=0.0))
    height = placed.height + legend_height(drawing)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family={quoteattr(_FONT)} '
        f'font-size="{FONT_SIZE}">',
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
        "markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\">"
        "<path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555555\"/></marker></defs>",
        f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
    ]
    if drawing.title:
        out.append(f'<text class="title" x="{width / 2:.1f}" y="26" text-anchor="middle" '
                   f'font-size="{FONT_SIZE + 4}" font-weight="bold">{escape(drawing.title)}'
                   "</text>")
    for edge in placed.edges:
        out.append(f'<g class="edge" data-source={quoteattr(edge.source)} '
                   f'data-target={quoteattr(edge.target)}>'
                   f"<title>{escape(edge.source)} -&gt; {escape(edge.target)}"
                   f"{escape(': ' + edge.label) if edge.label else ''}</title>"
                   f'<polyline points="{_points(edge.points)}" fill="none" stroke="#555555" '
                   'stroke-width="1.2" marker-end="url(#arrow)"/>')
        if edge.label:
            (x0, y0), (x1, y1) = edge.points[0], edge.points[1]
            out.append(f'<text class="edge-label" x="{(x0 + x1) / 2 + 4:.1f}" '
                       f'y="{(y0 + y1) / 2 + 4:.1f}" font-size="{FONT_SIZE - 2}" '
                       f'fill="#444444">{escape(edge.label)}</text>')
        out.append("</g>")
    for node_id, box in placed.nodes.items():
        node = box.node
        classes = "node" + (f" {node.kind}" if node.kind else "")
        dash = ' stroke-dasharray="5,3"' if node.dashed else ""
        stroke_width = 2.0 if node.dashed else 1.0
        out.append(f'<g class={quoteattr(classes)} id={quoteattr("node-" + node_id)} '
                   f'data-id={quoteattr(node_id)}>')
        out.append(f"<title>{escape(node.tooltip or chr(10).join(node.lines))}</title>")
        radius = box.h / 2 if node.oval else 4.0
        out.append(f'<rect x="{box.x - box.w / 2:.1f}" y="{box.y - box.h / 2:.1f}" '
                   f'width="{box.w:.1f}" height="{box.h:.1f}" rx="{radius:.1f}" '
                   f'fill={quoteattr(node.fill)} '
                   f'stroke={quoteattr(node.stroke)} stroke-width="{stroke_width}"{dash}/>')
        first = box.y - (len(box.lines) - 1) * LINE_HEIGHT / 2 + FONT_SIZE / 3
        for index, line in enumerate(box.lines):
            weight = ' font-weight="bold"' if index == 0 else ""
            out.append(f'<text x="{box.x:.1f}" y="{first + index * LINE_HEIGHT:.1f}" '
                       f'text-anchor="middle"{weight}>{escape(line)}</text>')
        out.append("</g>")
    if drawing.legend:
        out.append('<g class="legend">')
        for index, entry in enumerate(drawing.legend):
            y = legend_top + 8 + index * _LEGEND_ROW
            dash = ' stroke-dasharray="5,3" stroke-width="2"' if entry.dashed else ""
            out.append(f'<rect x="20" y="{y:.1f}" width="28" height="14" rx="3" '
                       f'fill={quoteattr(entry.fill)} stroke={quoteattr(entry.stroke)}{dash}/>')
            out.append(f'<text x="56" y="{y + 11:.1f}">{escape(entry.text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
