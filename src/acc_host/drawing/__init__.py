"""Pictures of graphs without Graphviz (``acc_host.drawing``).

A :class:`Drawing` is boxes and arrows: nodes with lines of text, a fill
colour, a tooltip and an optional dashed outline, edges between them with
an optional label, a title and a legend. :func:`layout` places it with
grandalf's layered (Sugiyama) layout, the algorithm Graphviz's ``dot``
uses, in pure Python; :func:`to_svg` writes SVG directly and
:func:`to_png` (or :func:`render` to PDF) draws the same layout with
matplotlib where it is installed; without it, PNG is drawn by the built-in
rasteriser in :mod:`acc_host.drawing.pixels` (standard library only).
``acc-host partition --format svg|png`` and ``mx.viz.plot_network`` draw
through here; Graphviz stays an option (``--format dot``).
"""

from __future__ import annotations

from .layout import Layout, PlacedEdge, PlacedNode, layout
from .model import DrawEdge, Drawing, DrawNode, LegendEntry
from .raster import RASTER_FORMATS, render, to_png
from .svg import to_svg

__all__ = ["Drawing", "DrawNode", "DrawEdge", "LegendEntry", "Layout", "PlacedNode",
           "PlacedEdge", "layout", "to_svg", "to_png", "render", "RASTER_FORMATS"]
