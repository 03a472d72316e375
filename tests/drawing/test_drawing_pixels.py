"""The built-in PNG writer (acc_host.drawing.pixels): its files parsed back
here with zlib and struct (signature, chunk CRCs, IHDR, one filter byte and
3 bytes a pixel per row) and its pixels checked against the layout the SVG
writer uses: box fills at the node centres, dashed outlines, arrows, text."""

from __future__ import annotations

import struct
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.drawing import (
    DrawEdge,
    Drawing,
    DrawNode,
    LegendEntry,
    layout,
    pixels,
    raster,
    to_svg,
)
from acc_host.drawing.pixels import Canvas, parse_colour
from acc_host.errors import MissingDependencyError

MODELS = Path(__file__).resolve().parents[1] / "models"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
Pixel = tuple[int, int, int]


class Picture:
    """A decoded 8-bit RGB PNG (the only kind the writer makes)."""

    def __init__(self, data: bytes) -> None:
        assert data[:8] == PNG_MAGIC
        at, chunks = 8, []
        while at < len(data):
            (length,) = struct.unpack(">I", data[at:at + 4])
            kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
            (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
            assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
            chunks.append((kind, body))
            at += 12 + length
        assert at == len(data)
        kinds = [kind for kind, _ in chunks]
        assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and set(kinds) == {
            b"IHDR", b"IDAT", b"IEND"}
        self.width, self.height, depth, colour, compression, filtering, interlace = (
            struct.unpack(">IIBBBBB", chunks[0][1]))
        assert (depth, colour, compression, filtering, interlace) == (8, 2, 0, 0, 0)
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
        stride = 1 + 3 * self.width
        assert len(raw) == self.height * stride
        assert all(raw[row * stride] == 0 for row in range(self.height))
        self.rows = [raw[row * stride + 1:(row + 1) * stride] for row in range(self.height)]

    def at(self, x: float, y: float) -> Pixel:
        row, column = self.rows[round(y)], 3 * round(x)
        return row[column], row[column + 1], row[column + 2]

    def window(self, x: float, y: float, half: int) -> Counter[Pixel]:
        return Counter(self.at(x + dx, y + dy) for dx in range(-half, half + 1)
                       for dy in range(-half, half + 1))


def _small() -> Drawing:
    return Drawing(
        nodes=[DrawNode("a", ("conv0", "Convolution"), fill="#8ecae6"),
               DrawNode("b", ("relu",), fill="#ffb703", stroke="#c0392b", dashed=True),
               DrawNode("c", ("data",), fill="#90be6d", oval=True)],
        edges=[DrawEdge("c", "a"), DrawEdge("a", "b", "16384 B")],
        title="a small picture",
        legend=[LegendEntry("#8ecae6", "on the device"),
                LegendEntry("#ffb703", "declined", "#c0392b", True)])


def test_the_png_decodes_with_the_svg_size() -> None:
    drawing = _small()
    placed = layout(drawing)
    picture = Picture(pixels.to_png(drawing, placed))
    svg = to_svg(drawing, placed)
    head = svg.split("<svg", 1)[1]
    width = int(head.split('width="', 1)[1].split('"', 1)[0])
    height = int(head.split('height="', 1)[1].split('"', 1)[0])
    assert (picture.width, picture.height) == (width, height)


def test_boxes_outlines_arrows_and_text_land_where_the_layout_says() -> None:
    drawing = _small()
    placed = layout(drawing)
    picture = Picture(pixels.to_png(drawing, placed))
    black = (0, 0, 0)
    for box in placed.nodes.values():
        fill = parse_colour(box.node.fill)
        around = picture.window(box.x, box.y, 5)
        assert around.most_common(1)[0][0] == fill, box.node.id
        # the box's first line of text, bold, in black
        first = box.y - (len(box.lines) - 1) * 8.0
        assert picture.window(box.x, first, 4)[black] > 10, box.node.id
        # just inside the left side, halfway down: fill, and the stroke on the side
        assert picture.at(box.x - box.w / 2 + 4, box.y) == fill
        assert picture.at(box.x - box.w / 2, box.y) == parse_colour(box.node.stroke) or (
            box.node.oval)
    # the dashed outline: along its top side, stroke and gaps (the fill) alternate
    dashed = placed.nodes["b"]
    top = [picture.at(x, dashed.y - dashed.h / 2)
           for x in range(round(dashed.x - dashed.w / 2 + 6), round(dashed.x + dashed.w / 2 - 6))]
    assert set(top) == {parse_colour("#c0392b"), parse_colour("#ffb703")}
    solid = placed.nodes["a"]
    top = {picture.at(x, solid.y - solid.h / 2)
           for x in range(round(solid.x - solid.w / 2 + 6), round(solid.x + solid.w / 2 - 6))}
    assert top == {parse_colour("#333333")}
    # every edge: its line halfway and its arrowhead filled just above the target
    for edge in placed.edges:
        (x0, y0), (x1, y1) = edge.points[-2], edge.points[-1]
        assert picture.window((x0 + x1) / 2, (y0 + y1) / 2, 1)[(0x55, 0x55, 0x55)] >= 1
        assert picture.at(x1, y1 - 4) == (0x55, 0x55, 0x55)
    # the title and the legend's swatches and text
    assert picture.window(picture.width / 2, 22, 6)[black] > 10
    legend_top = placed.height + 8
    assert picture.at(34, legend_top + 7) == parse_colour("#8ecae6")
    assert picture.at(34, legend_top + 27) == parse_colour("#ffb703")
    assert Counter(picture.rows[round(legend_top + 7)][3 * 56:3 * 150])[0] > 0


def test_without_matplotlib_to_png_draws_it_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> object:
        raise MissingDependencyError("a PNG or PDF picture needs matplotlib (blocked here)")

    monkeypatch.setattr(raster, "_pyplot", missing)
    drawing = _small()
    placed = layout(drawing)
    assert raster.to_png(drawing, placed) == pixels.to_png(drawing, placed)
    with pytest.raises(MissingDependencyError, match="needs matplotlib"):
        raster.render(drawing, "pdf", placed)
    # mx.viz.plot_network's png goes the same way
    plot = mx.viz.plot_network(mx.sym.Activation(mx.sym.Variable("data"), act_type="relu"))
    assert Picture(plot.pipe("png")).width > 0


@pytest.mark.parametrize("colour, rgb", [("#8ecae6", (0x8E, 0xCA, 0xE6)), ("#fff", (255,) * 3),
                                         ("white", (255,) * 3), ("#ABCDEF", (0xAB, 0xCD, 0xEF)),
                                         ("no such colour", (128,) * 3), ("#12345z", (128,) * 3)])
def test_colours(colour: str, rgb: Pixel) -> None:
    assert parse_colour(colour) == rgb


def test_canvas_clips_and_lines_are_one_pixel_wide() -> None:
    canvas = Canvas(20, 10)
    canvas.line((-5, 5), (30, 5), b"\x00\x00\x00")
    canvas.span(-3, 100, 0, b"\x01\x02\x03")
    canvas.text(15, 8, "Wide text off the edge", b"\x00\x00\x00")
    picture = Picture(canvas.png())
    assert (picture.width, picture.height) == (20, 10)
    assert {picture.at(x, 5) for x in range(20)} == {(0, 0, 0)}
    assert {picture.at(x, 4) for x in range(20)} == {(255, 255, 255)}
    assert {picture.at(x, 0) for x in range(20)} == {(1, 2, 3)}


def test_every_printable_character_has_a_glyph() -> None:
    for code in range(32, 127):
        canvas = Canvas(8, 10)
        canvas.text(1, 1, chr(code), b"\x00\x00\x00")
        lit = sum(1 for y in range(10) for x in range(8) if canvas.get(x, y) == (0, 0, 0))
        assert (lit == 0) == (chr(code) == " "), repr(chr(code))
    # glyphs differ from one another (a copy-paste slip would repeat one)
    shapes = {pixels._GLYPHS[chr(code)] for code in range(32, 127)}
    assert len(shapes) == 95


def test_squeezenet_partition_picture_is_quick_and_coloured() -> None:
    from acc_host.cli.partition_cmd import refiner
    from acc_host.partition.picture import partition_drawing

    name = "squeezenet_biased"
    sym, _, _ = mx.model.load_checkpoint(str(MODELS / name / "model"), 0)
    shape = np.load(MODELS / name / "input_0.npy").shape
    ctx = mx.Context("cpu_ref", 0)
    exe = sym.simple_bind(ctx, data=shape)
    try:
        partition = exe.partition
        explanation = partition.explain(refiner(ctx.library, partition), True)
        drawing = partition_drawing(partition, explanation, "squeezenet_biased on cpu_ref")
    finally:
        exe.close()
    placed = layout(drawing)
    start = time.perf_counter()
    data = pixels.to_png(drawing, placed)
    seconds = time.perf_counter() - start
    assert seconds < 2.0, seconds
    picture = Picture(data)
    assert len(placed.nodes) > 60
    for box in placed.nodes.values():
        assert picture.window(box.x, box.y, 5).most_common(1)[0][0] == parse_colour(
            box.node.fill), box.node.id
