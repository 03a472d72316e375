"""A :class:`Drawing` as PNG without any optional package: the laid-out
picture the SVG writer draws (same geometry, colours and labels) rasterised
into an RGB buffer and encoded with zlib.

Boxes are filled per row with bytearray slices (a solid outline is the box
in the stroke colour with its inside filled over it); a dashed outline (5 on,
3 off, as the SVG's ``stroke-dasharray``, for declined nodes) walks the
box's perimeter; edges are one-pixel lines without anti-aliasing,
ending in a filled arrowhead; text uses the 5x7 bitmap font below (one glyph
per printable ASCII character, bold drawn twice one pixel apart), so labels
are narrower than the layout's 7.5 px per character and centred in their
boxes. :func:`acc_host.drawing.to_png` uses matplotlib when it is installed
(smoother text) and this writer otherwise.
"""

from __future__ import annotations

import math
import struct
import zlib

from .layout import CHAR_WIDTH, LINE_HEIGHT, Layout, layout
from .model import Drawing
from .svg import legend_height

__all__ = ["to_png", "Canvas", "parse_colour", "GLYPH_WIDTH", "GLYPH_HEIGHT"]

GLYPH_WIDTH, GLYPH_HEIGHT = 5, 7
_ADVANCE = GLYPH_WIDTH + 1  # pixels from one character to the next
_LEGEND_ROW = 20.0
_EDGE = (0x55, 0x55, 0x55)
_EDGE_LABEL = (0x44, 0x44, 0x44)
_TEXT = (0, 0, 0)
_WHITE = (255, 255, 255)
_NAMED = {"white": _WHITE, "black": (0, 0, 0), "red": (255, 0, 0), "green": (0, 128, 0),
          "blue": (0, 0, 255), "grey": (128, 128, 128), "gray": (128, 128, 128),
          "lightgrey": (211, 211, 211), "lightgray": (211, 211, 211), "none": _WHITE}

# The font: a character, a space, then its 7 rows of 5 pixels ('#' on).
# Lower-case letters use rows 2 to 6; those with a tail are drawn _DESCENT
# rows lower, below the line the others stand on.
_DESCENDERS, _DESCENT = "gjpqy", 2
_FONT_TEXT = r"""
  .....|.....|.....|.....|.....|.....|.....
! ..#..|..#..|..#..|..#..|..#..|.....|..#..
" .#.#.|.#.#.|.#.#.|.....|.....|.....|.....
# .#.#.|.#.#.|#####|.#.#.|#####|.#.#.|.#.#.
$ ..#..|.####|#.#..|.###.|..#.#|####.|..#..
% ##...|##..#|...#.|..#..|.#...|#..##|...##
& .##..|#..#.|#.#..|.#...|#.#.#|#..#.|.##.#
' ..#..|..#..|.#...|.....|.....|.....|.....
( ...#.|..#..|.#...|.#...|.#...|..#..|...#.
) .#...|..#..|...#.|...#.|...#.|..#..|.#...
* .....|..#..|#.#.#|.###.|#.#.#|..#..|.....
+ .....|..#..|..#..|#####|..#..|..#..|.....
, .....|.....|.....|.....|.##..|..#..|.#...
- .....|.....|.....|#####|.....|.....|.....
. .....|.....|.....|.....|.....|.##..|.##..
/ .....|....#|...#.|..#..|.#...|#....|.....
0 .###.|#...#|#..##|#.#.#|##..#|#...#|.###.
1 ..#..|.##..|..#..|..#..|..#..|..#..|.###.
2 .###.|#...#|....#|...#.|..#..|.#...|#####
3 #####|...#.|..#..|...#.|....#|#...#|.###.
4 ...#.|..##.|.#.#.|#..#.|#####|...#.|...#.
5 #####|#....|####.|....#|....#|#...#|.###.
6 ..##.|.#...|#....|####.|#...#|#...#|.###.
7 #####|....#|...#.|..#..|.#...|.#...|.#...
8 .###.|#...#|#...#|.###.|#...#|#...#|.###.
9 .###.|#...#|#...#|.####|....#|...#.|.##..
: .....|.##..|.##..|.....|.##..|.##..|.....
; .....|.##..|.##..|.....|.##..|..#..|.#...
< ...#.|..#..|.#...|#....|.#...|..#..|...#.
= .....|.....|#####|.....|#####|.....|.....
> .#...|..#..|...#.|....#|...#.|..#..|.#...
? .###.|#...#|....#|...#.|..#..|.....|..#..
@ .###.|#...#|....#|.##.#|#.#.#|#.#.#|.###.
A .###.|#...#|#...#|#####|#...#|#...#|#...#
B ####.|#...#|#...#|####.|#...#|#...#|####.
C .###.|#...#|#....|#....|#....|#...#|.###.
D ###..|#..#.|#...#|#...#|#...#|#..#.|###..
E #####|#....|#....|####.|#....|#....|#####
F #####|#....|#....|####.|#....|#....|#....
G .###.|#...#|#....|#.###|#...#|#...#|.####
H #...#|#...#|#...#|#####|#...#|#...#|#...#
I .###.|..#..|..#..|..#..|..#..|..#..|.###.
J ..###|...#.|...#.|...#.|...#.|#..#.|.##..
K #...#|#..#.|#.#..|##...|#.#..|#..#.|#...#
L #....|#....|#....|#....|#....|#....|#####
M #...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#
N #...#|#...#|##..#|#.#.#|#..##|#...#|#...#
O .###.|#...#|#...#|#...#|#...#|#...#|.###.
P ####.|#...#|#...#|####.|#....|#....|#....
Q .###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#
R ####.|#...#|#...#|####.|#.#..|#..#.|#...#
S .####|#....|#....|.###.|....#|....#|####.
T #####|..#..|..#..|..#..|..#..|..#..|..#..
U #...#|#...#|#...#|#...#|#...#|#...#|.###.
V #...#|#...#|#...#|#...#|#...#|.#.#.|..#..
W #...#|#...#|#...#|#.#.#|#.#.#|#.#.#|.#.#.
X #...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#
Y #...#|#...#|.#.#.|..#..|..#..|..#..|..#..
Z #####|....#|...#.|..#..|.#...|#....|#####
[ .###.|.#...|.#...|.#...|.#...|.#...|.###.
\ .....|#....|.#...|..#..|...#.|....#|.....
] .###.|...#.|...#.|...#.|...#.|...#.|.###.
^ ..#..|.#.#.|#...#|.....|.....|.....|.....
_ .....|.....|.....|.....|.....|.....|#####
` .#...|..#..|...#.|.....|.....|.....|.....
a .....|.....|.###.|....#|.####|#...#|.####
b #....|#....|#.##.|##..#|#...#|#...#|####.
c .....|.....|.###.|#....|#....|#...#|.###.
d ....#|....#|.##.#|#..##|#...#|#...#|.####
e .....|.....|.###.|#...#|#####|#....|.###.
f ..##.|.#..#|.#...|###..|.#...|.#...|.#...
g .....|.####|#...#|#...#|.####|....#|.###.
h #....|#....|#.##.|##..#|#...#|#...#|#...#
i ..#..|.....|.##..|..#..|..#..|..#..|.###.
j ...#.|.....|..##.|...#.|...#.|#..#.|.##..
k #....|#....|#..#.|#.#..|##...|#.#..|#..#.
l .##..|..#..|..#..|..#..|..#..|..#..|.###.
m .....|.....|##.#.|#.#.#|#.#.#|#...#|#...#
n .....|.....|#.##.|##..#|#...#|#...#|#...#
o .....|.....|.###.|#...#|#...#|#...#|.###.
p .....|.....|####.|#...#|####.|#....|#....
q .....|.....|.##.#|#..##|.####|....#|....#
r .....|.....|#.##.|##..#|#....|#....|#....
s .....|.....|.###.|#....|.###.|....#|####.
t .#...|.#...|###..|.#...|.#...|.#..#|..##.
u .....|.....|#...#|#...#|#...#|#..##|.##.#
v .....|.....|#...#|#...#|#...#|.#.#.|..#..
w .....|.....|#...#|#...#|#.#.#|#.#.#|.#.#.
x .....|.....|#...#|.#.#.|..#..|.#.#.|#...#
y .....|.....|#...#|#...#|.####|....#|.###.
z .....|.....|#####|...#.|..#..|.#...|#####
{ ...#.|..#..|..#..|.#...|..#..|..#..|...#.
| ..#..|..#..|..#..|..#..|..#..|..#..|..#..
} .#...|..#..|..#..|...#.|..#..|..#..|.#...
~ .....|.....|.#...|#.#.#|...#.|.....|.....
"""


def _glyphs() -> dict[str, tuple[tuple[int, int], ...]]:
    """Each character's lit pixels as (column, row) offsets."""
    table: dict[str, tuple[tuple[int, int], ...]] = {}
    for line in _FONT_TEXT.strip("\n").split("\n"):
        rows = line[2:].split("|")
        drop = _DESCENT if line[0] in _DESCENDERS else 0
        table[line[0]] = tuple((column, row + drop) for row, bits in enumerate(rows)
                               for column, bit in enumerate(bits) if bit == "#")
    table["\u2026"] = ((0, 6), (2, 6), (4, 6))  # the layout's ellipsis
    return table


_GLYPHS = _glyphs()


def parse_colour(colour: str) -> tuple[int, int, int]:
    """An SVG colour ("#rrggbb", "#rgb" or a few names) as (r, g, b);
    anything else is drawn mid grey."""
    text = colour.strip().lower()
    if text in _NAMED:
        return _NAMED[text]
    digits = text[1:] if text.startswith("#") else ""
    if len(digits) == 3:
        digits = "".join(digit * 2 for digit in digits)
    try:
        if len(digits) == 6:
            return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)
    except ValueError:
        pass
    return (128, 128, 128)


class Canvas:
    """A white RGB picture, 3 bytes a pixel, row after row. Drawing
    outside it is clipped."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = max(1, width), max(1, height)
        self.pixels = bytearray(b"\xff" * (3 * self.width * self.height))

    def get(self, x: int, y: int) -> tuple[int, int, int]:
        at = 3 * (y * self.width + x)
        return self.pixels[at], self.pixels[at + 1], self.pixels[at + 2]

    def dot(self, x: int, y: int, rgb: bytes) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            at = 3 * (y * self.width + x)
            self.pixels[at:at + 3] = rgb

    def span(self, x0: int, x1: int, y: int, rgb: bytes) -> None:
        """Pixels x0..x1 (inclusive) of row y."""
        x0, x1 = max(x0, 0), min(x1, self.width - 1)
        if 0 <= y < self.height and x0 <= x1:
            at = 3 * (y * self.width)
            self.pixels[at + 3 * x0:at + 3 * x1 + 3] = rgb * (x1 - x0 + 1)

    def rounded_box(self, left: float, top: float, width: float, height: float, radius: float,
                    fill: bytes, stroke: bytes, stroke_width: int, dashed: bool) -> None:
        """A filled box with corners of radius, outlined stroke_width
        pixels wide (dashed 5 on, 3 off when dashed)."""
        x0, y0 = round(left), round(top)
        x1, y1 = round(left + width) - 1, round(top + height) - 1
        radius = max(0.0, min(radius, (x1 - x0) / 2, (y1 - y0) / 2))
        if not dashed:
            # Solid: the whole box in stroke, then the inside in fill (all spans).
            self._fill_rounded(x0, y0, x1, y1, radius, stroke)
            inner = stroke_width
            self._fill_rounded(x0 + inner, y0 + inner, x1 - inner, y1 - inner,
                               max(0.0, radius - inner), fill)
            return
        self._fill_rounded(x0, y0, x1, y1, radius, fill)
        for index, (x, y) in enumerate(_perimeter(x0, y0, x1, y1, radius)):
            if index % 8 >= 5:
                continue
            for dy in range(stroke_width):
                for dx in range(stroke_width):
                    # Thicken inwards: the outline stays inside the box.
                    self.dot(x + (dx if x < (x0 + x1) / 2 else -dx),
                             y + (dy if y < (y0 + y1) / 2 else -dy), stroke)

    def _fill_rounded(self, x0: int, y0: int, x1: int, y1: int, radius: float,
                      rgb: bytes) -> None:
        for y in range(y0, y1 + 1):
            inset = _inset(y - y0, y1 - y, radius)
            self.span(x0 + inset, x1 - inset, y, rgb)

    def line(self, start: tuple[float, float], end: tuple[float, float], rgb: bytes) -> None:
        """A one-pixel line (Bresenham's), no anti-aliasing."""
        x0, y0, x1, y1 = round(start[0]), round(start[1]), round(end[0]), round(end[1])
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error = dx + dy
        while True:
            self.dot(x0, y0, rgb)
            if x0 == x1 and y0 == y1:
                return
            twice = 2 * error
            if twice >= dy:
                error += dy
                x0 += sx
            if twice <= dx:
                error += dx
                y0 += sy

    def triangle(self, corners: list[tuple[float, float]], rgb: bytes) -> None:
        """A filled triangle: each row between its top and bottom spans
        the crossings of that row's centre with the three sides."""
        top = math.floor(min(y for _, y in corners))
        bottom = math.ceil(max(y for _, y in corners))
        for y in range(top, bottom + 1):
            centre = y + 0.5 if top != bottom else float(y)
            crossings = []
            for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1]):
                if ay == by:
                    continue
                if min(ay, by) <= centre <= max(ay, by):
                    crossings.append(ax + (centre - ay) * (bx - ax) / (by - ay))
            if crossings:
                self.span(round(min(crossings)), round(max(crossings)), y, rgb)

    def text(self, x: float, top: float, text: str, rgb: bytes, bold: bool = False,
             anchor: str = "start") -> None:
        """text in the 5x7 font, its glyphs' top row at top; anchor
        "middle" centres it on x, "start" begins it there."""
        advance = _ADVANCE + (1 if bold else 0)
        width = len(text) * advance - 1
        left = round(x - width / 2) if anchor == "middle" else round(x)
        row = round(top)
        for index, char in enumerate(text):
            origin = left + index * advance
            for column, line in _GLYPHS.get(char, _GLYPHS["?"]):
                self.dot(origin + column, row + line, rgb)
                if bold:
                    self.dot(origin + column + 1, row + line, rgb)

    def png(self) -> bytes:
        """The picture as a PNG file: 8-bit RGB, filter 0 on every row."""
        stride = 3 * self.width
        raw = b"".join(b"\x00" + self.pixels[row * stride:(row + 1) * stride]
                       for row in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + b"".join(
            _chunk(kind, data) for kind, data in
            ((b"IHDR", header), (b"IDAT", zlib.compress(raw, 6)), (b"IEND", b"")))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def _inset(from_top: int, from_bottom: int, radius: float) -> int:
    """How far a rounded box's row starts in from its straight sides."""
    near = min(from_top, from_bottom)
    if near >= radius:
        return 0
    off = radius - near - 0.5
    return round(radius - math.sqrt(max(0.0, radius * radius - off * off)))


def _perimeter(x0: int, y0: int, x1: int, y1: int, radius: float
               ) -> list[tuple[int, int]]:
    """The outline of a rounded box, one point per pixel step, clockwise
    from the top left (so that dashes run around it)."""
    r = radius
    points: list[tuple[int, int]] = []

    def straight(ax: float, ay: float, bx: float, by: float) -> None:
        steps = max(1, round(max(abs(bx - ax), abs(by - ay))))
        points.extend((round(ax + (bx - ax) * i / steps), round(ay + (by - ay) * i / steps))
                      for i in range(steps))

    def arc(cx: float, cy: float, start: float) -> None:
        steps = max(1, round(r * math.pi / 2))
        for i in range(steps):
            angle = start + (math.pi / 2) * i / steps
            points.append((round(cx + r * math.cos(angle)), round(cy + r * math.sin(angle))))

    straight(x0 + r, y0, x1 - r, y0)
    arc(x1 - r, y0 + r, -math.pi / 2)
    straight(x1, y0 + r, x1, y1 - r)
    arc(x1 - r, y1 - r, 0.0)
    straight(x1 - r, y1, x0 + r, y1)
    arc(x0 + r, y1 - r, math.pi / 2)
    straight(x0, y1 - r, x0, y0 + r)
    arc(x0 + r, y0 + r, math.pi)
    return points


def _arrowhead(start: tuple[float, float], end: tuple[float, float]
               ) -> list[tuple[float, float]]:
    """The SVG marker's triangle (9.6 px long and wide at stroke width 1.2)
    with its tip at end, pointing away from start."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    back = (end[0] - 9.6 * ux, end[1] - 9.6 * uy)
    return [end, (back[0] - 4.8 * uy, back[1] + 4.8 * ux), (back[0] + 4.8 * uy, back[1] - 4.8 * ux)]


def _rgb(colour: str) -> bytes:
    return bytes(parse_colour(colour))


def to_png(drawing: Drawing, placed: Layout | None = None) -> bytes:
    """drawing as PNG bytes, drawn here (no matplotlib) one pixel per SVG
    unit, over the SVG's width and height."""
    placed = placed if placed is not None else layout(drawing)
    width = max(placed.width, max((len(entry.text) * CHAR_WIDTH + 60 for entry in
                                   drawing.legend), default=0.0))
    height = placed.height + legend_height(drawing)
    canvas = Canvas(round(width), round(height))
    half = GLYPH_HEIGHT // 2
    if drawing.title:
        canvas.text(width / 2, 26 - GLYPH_HEIGHT, drawing.title, bytes(_TEXT), bold=True,
                    anchor="middle")
    edge, edge_label = bytes(_EDGE), bytes(_EDGE_LABEL)
    for item in placed.edges:
        points = item.points
        for start, end in zip(points, points[1:]):
            canvas.line(start, end, edge)
        canvas.triangle(_arrowhead(points[-2], points[-1]), edge)
        if item.label:
            (x0, y0), (x1, y1) = points[0], points[1]
            canvas.text((x0 + x1) / 2 + 4, (y0 + y1) / 2 + 4 - GLYPH_HEIGHT, item.label,
                        edge_label)
    for box in placed.nodes.values():
        node = box.node
        canvas.rounded_box(box.x - box.w / 2, box.y - box.h / 2, box.w, box.h,
                           box.h / 2 if node.oval else 4.0, _rgb(node.fill), _rgb(node.stroke),
                           2 if node.dashed else 1, node.dashed)
        first = box.y - (len(box.lines) - 1) * LINE_HEIGHT / 2
        for index, line in enumerate(box.lines):
            canvas.text(box.x, first + index * LINE_HEIGHT - half, line, bytes(_TEXT),
                        bold=index == 0, anchor="middle")
    for index, entry in enumerate(drawing.legend):
        y = placed.height + 8 + index * _LEGEND_ROW
        canvas.rounded_box(20, y, 28, 14, 3.0, _rgb(entry.fill), _rgb(entry.stroke),
                           2 if entry.dashed else 1, entry.dashed)
        canvas.text(56, y + 11 - GLYPH_HEIGHT, entry.text, bytes(_TEXT))
    return canvas.png()
