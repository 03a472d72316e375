"""A :class:`Drawing` as PNG or PDF, drawn with matplotlib (an optional
dependency: ``pip install acc-host[pictures]``) from the same layout as the
SVG. Without matplotlib, PDF is a MissingDependencyError and PNG is drawn by
the built-in rasteriser (acc_host.drawing.pixels)."""

from __future__ import annotations

import io
import math

from ..errors import MissingDependencyError
from .layout import FONT_SIZE, LINE_HEIGHT, Layout, layout
from .model import Drawing
from .svg import legend_height

__all__ = ["to_png", "render", "RASTER_FORMATS"]

RASTER_FORMATS = ("png", "pdf")
_DPI = 96.0


def _pyplot() -> object:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as pyplot
    except ImportError as error:
        raise MissingDependencyError(
            "a PDF picture needs matplotlib (pip install 'acc-host[pictures]' or pip "
            f"install matplotlib); SVG and PNG need nothing: {error}") from None
    return pyplot


def _arrowhead(start: tuple[float, float], end: tuple[float, float]
               ) -> list[tuple[float, float]]:
    """The triangle of an arrow ending at end, coming from start."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    back = (end[0] - 8 * ux, end[1] - 8 * uy)
    return [end, (back[0] - 4 * uy, back[1] + 4 * ux), (back[0] + 4 * uy, back[1] - 4 * ux)]


def render(drawing: Drawing, fmt: str = "png", placed: Layout | None = None,
           scale: float = 1.0) -> bytes:
    """drawing in fmt ("png" or "pdf"), drawn by matplotlib at 96 dpi times
    scale. Without matplotlib, PNG comes from acc_host.drawing.pixels (one
    pixel per SVG unit: scale is ignored) and PDF is a
    MissingDependencyError."""
    if fmt not in RASTER_FORMATS:
        raise ValueError(f"format {fmt!r} is not one of {RASTER_FORMATS}")
    try:
        pyplot = _pyplot()
    except MissingDependencyError:
        if fmt != "png":
            raise
        from .pixels import to_png as builtin_png

        return builtin_png(drawing, placed)
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.patches import FancyBboxPatch, Rectangle

    placed = placed if placed is not None else layout(drawing)
    width = placed.width
    height = placed.height + legend_height(drawing)
    figure = pyplot.figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI * scale)  # type: ignore[attr-defined]
    try:
        axes = figure.add_axes((0, 0, 1, 1))
        axes.set_xlim(0, width)
        axes.set_ylim(height, 0)
        axes.axis("off")
        points_per_pixel = 72.0 / _DPI
        font = FONT_SIZE * points_per_pixel
        if drawing.title:
            axes.text(width / 2, 22, drawing.title, ha="center", va="center",
                      fontsize=font + 3, fontweight="bold")
        lines, heads = [], []
        for edge in placed.edges:
            lines.append(list(edge.points))
            heads.append(_arrowhead(edge.points[-2], edge.points[-1]))
            if edge.label:
                (x0, y0), (x1, y1) = edge.points[0], edge.points[1]
                axes.text((x0 + x1) / 2 + 4, (y0 + y1) / 2, edge.label, fontsize=font - 1.5,
                          color="#444444", va="center")
        axes.add_collection(LineCollection(lines, colors="#555555", linewidths=1.0))
        axes.add_collection(PolyCollection(heads, facecolors="#555555", edgecolors="none"))
        for box in placed.nodes.values():
            node = box.node
            axes.add_patch(FancyBboxPatch(
                (box.x - box.w / 2, box.y - box.h / 2), box.w, box.h,
                boxstyle=f"round,pad=0,rounding_size={box.h / 2 if node.oval else 4}",
                facecolor=node.fill,
                edgecolor=node.stroke, linewidth=1.6 if node.dashed else 0.8,
                linestyle="--" if node.dashed else "-"))
            first = box.y - (len(box.lines) - 1) * LINE_HEIGHT / 2
            for index, line in enumerate(box.lines):
                axes.text(box.x, first + index * LINE_HEIGHT, line, ha="center", va="center",
                          fontsize=font, fontweight="bold" if index == 0 else "normal")
        for index, entry in enumerate(drawing.legend):
            y = placed.height + 8 + index * 20.0
            axes.add_patch(Rectangle((20, y), 28, 14, facecolor=entry.fill,
                                     edgecolor=entry.stroke, linestyle="--" if entry.dashed
                                     else "-", linewidth=1.4 if entry.dashed else 0.8))
            axes.text(56, y + 7, entry.text, va="center", fontsize=font)
        buffer = io.BytesIO()
        figure.savefig(buffer, format=fmt, dpi=_DPI * scale)
        return buffer.getvalue()
    finally:
        pyplot.close(figure)  # type: ignore[attr-defined]


def to_png(drawing: Drawing, placed: Layout | None = None, scale: float = 1.0) -> bytes:
    """drawing as PNG bytes: drawn by matplotlib where it is installed
    (smoother text), else by acc_host.drawing.pixels (see render)."""
    return render(drawing, "png", placed, scale)
