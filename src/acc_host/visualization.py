"""``mx.viz``: MXNet's per-layer table of a symbol (``print_summary``) and
its picture (``plot_network``, drawn without Graphviz by acc_host.drawing).

The table is MXNet 1.9's, to the character: one row per operator node
(and for the first head when it is a variable) with its name and op, its
output shape without the batch axis (when shapes are given), its parameter
count and the operator nodes (or head variables) it reads. Parameters are
counted as MXNet counts them: Convolution in_channels * num_filter /
num_group * kernel (+ num_filter bias), FullyConnected (in + 1) *
num_hidden (in * num_hidden without bias), BatchNorm 2 * channels,
Embedding input_dim * output_dim, where "in" is the sum of the first
non-batch extents of the node's operator inputs. MXNet's ``heads`` test
compares node numbers with the first head's [node, output, version]
triple, and that is kept too, so the rows are the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidArgumentError, ShapeError
from .symbol import Symbol

__all__ = ["print_summary", "plot_network", "NetworkPlot"]


def _kernel(text: str) -> list[int]:
    return [int(part) for part in text.strip("()[] ").split(",") if part.strip()]


def _row(fields: Sequence[Any], positions: Sequence[int]) -> str:
    line = ""
    for field, stop in zip(fields, positions):
        line = (line + str(field))[:stop]
        line += " " * (stop - len(line))
    return line


def _param_count(node: Mapping[str, Any], in_extent: int, out_shape: Sequence[int] | None
                 ) -> int:
    op, attrs = node["op"], node.get("attrs", {})
    no_bias = attrs.get("no_bias") == "True"
    if op == "Convolution":
        count = in_extent * int(attrs["num_filter"]) // int(attrs.get("num_group", "1"))
        for extent in _kernel(attrs["kernel"]):
            count *= extent
        return count if no_bias else count + int(attrs["num_filter"])
    if op == "FullyConnected":
        return (in_extent if no_bias else in_extent + 1) * int(attrs["num_hidden"])
    if op == "BatchNorm":
        return 2 * int(out_shape[0]) if out_shape else 0
    if op == "Embedding":
        return int(attrs["input_dim"]) * int(attrs["output_dim"])
    return 0


def summary_lines(symbol: Any, shape: Mapping[str, Any] | None = None, line_length: int = 120,
                  positions: Sequence[float] = (.44, .64, .74, 1.)) -> list[str]:
    """The lines print_summary prints."""
    if not isinstance(symbol, Symbol):
        raise InvalidArgumentError(f"print_summary needs a Symbol, got {type(symbol).__name__}")
    shapes: dict[str, tuple[int, ...]] = {}
    if shape is not None:
        internals = symbol.get_internals()
        _, out_shapes, _ = internals.infer_shape(**shape)
        if out_shapes is None:
            raise ShapeError("print_summary: the input shapes are incomplete")
        shapes = {name: tuple(s) for name, s in zip(internals.list_outputs(), out_shapes)}
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    heads = set(graph["heads"][0])
    stops = [int(line_length * p) if positions[-1] <= 1 else int(p) for p in positions]

    def shape_of(index: int) -> tuple[int, ...] | None:
        node = nodes[index]
        key = node["name"] + "_output" if node["op"] != "null" else node["name"]
        return shapes[key][1:] if key in shapes else None

    lines = ["_" * line_length, _row(["Layer (type)", "Output Shape", "Param #",
                                      "Previous Layer"], stops), "=" * line_length]
    total = 0
    for index, node in enumerate(nodes):
        if node["op"] == "null" and index > 0:
            continue
        out_shape = shape_of(index) if (node["op"] != "null" or index in heads) else None
        previous: list[str] = []
        in_extent = 0
        if node["op"] != "null":
            for source, *_ in node["inputs"]:
                if nodes[source]["op"] != "null" or source in heads:
                    previous.append(nodes[source]["name"])
                    source_shape = shape_of(source)
                    if source_shape is not None:
                        in_extent += int(source_shape[0])
        count = _param_count(node, in_extent, out_shape)
        total += count
        lines.append(_row([f"{node['name']}({node['op']})",
                           "x".join(str(n) for n in (out_shape or ())), count,
                           previous[0] if previous else ""], stops))
        lines += [_row(["", "", "", name], stops) for name in previous[1:]]
        lines.append(("=" if index == len(nodes) - 1 else "_") * line_length)
    lines += [f"Total params: {total}", "_" * line_length]
    return lines


def print_summary(symbol: Any, shape: Mapping[str, Any] | None = None, line_length: int = 120,
                  positions: Sequence[float] = (.44, .64, .74, 1.)) -> None:
    """Prints MXNet's layer table of symbol (shapes when shape is given)."""
    print("\n".join(summary_lines(symbol, shape, line_length, positions)))


# MXNet's palette: inputs, weighted layers, activations, BatchNorm, pooling,
# Concat/Flatten/Reshape, Softmax, everything else.
_PALETTE = ("#8dd3c7", "#fb8072", "#ffffb3", "#bebada", "#80b1d3", "#fdb462", "#b3de69",
            "#fccde5")
_WEIGHT_SUFFIXES = ("_weight", "_bias", "_beta", "_gamma", "_moving_var", "_moving_mean",
                    "_running_var", "_running_mean")
_FORMATS = ("svg", "png", "pdf")


def _joined(text: str) -> str:
    return "x".join(str(value) for value in _kernel(text))


def _label_and_colour(node: Mapping[str, Any]) -> tuple[str, str]:
    """MXNet 1.9's label and fill colour of an operator node."""
    op, attrs = node["op"], node.get("attrs", {})
    if op == "Convolution":
        stride = _joined(attrs["stride"]) if "stride" in attrs else "1"
        return (f"Convolution\n{_joined(attrs['kernel'])}/{stride}, {attrs['num_filter']}",
                _PALETTE[1])
    if op == "FullyConnected":
        return f"FullyConnected\n{attrs['num_hidden']}", _PALETTE[1]
    if op == "BatchNorm":
        return node["name"], _PALETTE[3]
    if op == "Activation":
        return f"Activation\n{attrs['act_type']}", _PALETTE[2]
    if op == "LeakyReLU":
        return f"LeakyReLU\n{attrs.get('act_type', 'Leaky')}", _PALETTE[2]
    if op == "Pooling":
        kernel = _joined(attrs["kernel"]) if "kernel" in attrs else "[]"
        stride = _joined(attrs["stride"]) if "stride" in attrs else "1"
        return f"Pooling\n{attrs['pool_type']}, {kernel}/{stride}", _PALETTE[4]
    if op in ("Concat", "Flatten", "Reshape"):
        return node["name"], _PALETTE[5]
    if op == "Softmax":
        return node["name"], _PALETTE[6]
    if op == "Custom":
        return attrs.get("op_type", node["name"]), _PALETTE[7]
    return node["name"], _PALETTE[7]


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class NetworkPlot:
    """What ``mx.viz.plot_network`` returns: MXNet's picture of a symbol,
    drawn by acc_host.drawing (grandalf's layered layout, SVG written
    directly, PNG and PDF through matplotlib) instead of Graphviz, with the
    surface of the graphviz ``Digraph`` MXNet returns that makes sense
    without Graphviz: ``name``, ``format``, ``filename``, ``directory``,
    ``source`` (the graph in DOT, for Graphviz where it is installed),
    :meth:`render`, :meth:`save`, :meth:`pipe` and ``_repr_svg_`` (notebooks
    show it). ``drawing`` is the acc_host.drawing.Drawing; ``nodes`` and
    ``edges`` are what MXNet would add to its Digraph."""

    def __init__(self, drawing: Any, name: str, fmt: str, nodes: list[dict[str, str]],
                 edges: list[dict[str, str]]) -> None:
        self.drawing = drawing
        self.name = name
        self.format = fmt
        self.nodes = nodes
        self.edges = edges
        self.directory = ""
        self.filename = f"{name}.gv"

    @property
    def source(self) -> str:
        """The graph in Graphviz's DOT language (edges as MXNet adds them:
        reader -> input, drawn backwards)."""
        lines = [f"digraph {_dot_quote(self.name)} {{"]
        for node in self.nodes:
            lines.append(f"\t{_dot_quote(node['name'])} [label={_dot_quote(node['label'])} "
                         f"fillcolor={_dot_quote(node['fillcolor'])} "
                         f"shape={node['shape']} style=filled]")
        for edge in self.edges:
            lines.append(f"\t{_dot_quote(edge['target'])} -> {_dot_quote(edge['source'])} "
                         f"[label={_dot_quote(edge['label'])} arrowtail=open dir=back]")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.source

    def pipe(self, format: str | None = None) -> bytes:  # noqa: A002  (graphviz's name)
        """The picture in format (default: self.format): svg, png or pdf."""
        # Imported here: the drawing module loads matplotlib only for PNG/PDF.
        from .drawing import render, to_svg

        fmt = (format or self.format).lower()
        if fmt not in _FORMATS:
            raise InvalidArgumentError(f"plot_network: format {fmt!r} is not one of "
                                       f"{', '.join(_FORMATS)} (acc-host draws without "
                                       "Graphviz)")
        if fmt == "svg":
            return to_svg(self.drawing).encode("utf-8")
        return render(self.drawing, fmt)

    def _repr_svg_(self) -> str:
        return self.pipe("svg").decode("utf-8")

    def save(self, filename: str | None = None, directory: str | None = None) -> str:
        """Writes the DOT source to directory/filename (default
        self.filename); returns the path."""
        import os

        path = os.path.join(directory if directory is not None else self.directory,
                            filename or self.filename)
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.source)
        return path

    def render(self, filename: str | None = None, directory: str | None = None,
               view: bool = False, cleanup: bool = False,
               format: str | None = None) -> str:  # noqa: A002  (graphviz's name)
        """Saves the source (see save), writes the picture next to it as
        <path>.<format> and returns that path; cleanup removes the source.
        view is refused: acc-host opens no viewer."""
        import os

        if view:
            raise InvalidArgumentError("plot_network: render(view=True) is not supported "
                                       "(acc-host opens no viewer); open the returned file")
        fmt = (format or self.format).lower()
        data = self.pipe(fmt)
        source = self.save(filename, directory)
        target = f"{source}.{fmt}"
        with open(target, "wb") as handle:
            handle.write(data)
        if cleanup:
            os.remove(source)
        return target

    def view(self, *args: Any, **kwargs: Any) -> str:
        raise InvalidArgumentError("plot_network: view() is not supported (acc-host opens no "
                                   "viewer); use render() and open the file")


def plot_network(symbol: Any, title: str = "plot", save_format: str = "pdf",
                 shape: Mapping[str, Any] | None = None, dtype: Mapping[str, Any] | None = None,
                 node_attrs: Mapping[str, str] | None = None,
                 hide_weights: bool = True) -> NetworkPlot:
    """MXNet's picture of symbol: inputs as ovals, operators as boxes with
    MXNet's labels and colours, arrows from each input to its reader
    labelled with the shape (without the batch axis) when shape is given and
    the dtype when dtype is given; weights hidden unless hide_weights is
    False. node_attrs' "fillcolor" overrides every node's colour (other
    Graphviz attributes have no meaning here). Drawn without Graphviz; see
    NetworkPlot."""
    # Imported here: print_summary does not need the drawing package.
    import numpy as np

    from .drawing import DrawEdge, Drawing, DrawNode

    if not isinstance(symbol, Symbol):
        raise InvalidArgumentError(f"plot_network needs a Symbol, got {type(symbol).__name__}")
    fmt = str(save_format).lower()
    if fmt not in _FORMATS:
        raise InvalidArgumentError(f"plot_network: save_format {save_format!r} is not one of "
                                   f"{', '.join(_FORMATS)} (acc-host draws without Graphviz)")
    internals = symbol.get_internals()
    shapes: dict[str, Any] = {}
    if shape is not None:
        _, out_shapes, _ = internals.infer_shape(**shape)
        if out_shapes is None:
            raise ShapeError("plot_network: the input shapes are incomplete")
        shapes = dict(zip(internals.list_outputs(), out_shapes))
    types: dict[str, Any] = {}
    if dtype is not None:
        _, out_types, _ = internals.infer_type(**dtype)
        if out_types is None:
            raise ShapeError("plot_network: the input types are incomplete")
        types = dict(zip(internals.list_outputs(), out_types))
    fill = dict(node_attrs or {}).get("fillcolor")
    nodes = json.loads(symbol.tojson())["nodes"]
    drawn: list[dict[str, str]] = []
    hidden: set[str] = set()
    weights: set[str] = set()
    for node in nodes:
        if node["op"] == "null":
            if node["name"].endswith(_WEIGHT_SUFFIXES):
                (hidden if hide_weights else weights).add(node["name"])
                continue
            drawn.append({"name": node["name"], "label": node["name"],
                          "fillcolor": _PALETTE[0], "shape": "oval"})
            continue
        label, colour = _label_and_colour(node)
        drawn.append({"name": node["name"], "label": label, "fillcolor": colour,
                      "shape": "box"})
    edges: list[dict[str, str]] = []
    for node in nodes:
        if node["op"] == "null":
            continue
        inputs = node["inputs"][:1] if node["op"] == "_contrib_BilinearResize2D" else \
            node["inputs"]
        for source, *_ in inputs:
            producer = nodes[source]
            if producer["name"] in hidden:
                continue
            # MXNet's key: a multi-output operator's last output.
            key = producer["name"]
            if producer["op"] != "null":
                key += "_output"
                outputs = producer.get("attrs", {}).get("num_outputs")
                if outputs is not None:
                    key += str(int(outputs) - 1)
            label = "x".join(str(extent) for extent in shapes[key][1:]) if shapes else ""
            if types:
                label += f"({np.dtype(types[key]).name})"
            edges.append({"source": producer["name"], "target": node["name"], "label": label})
    drawing = Drawing(title=title if title != "plot" else "")
    for item in drawn:
        drawing.nodes.append(DrawNode(item["name"], tuple(item["label"].split("\n")),
                                      fill=fill or item["fillcolor"],
                                      kind="variable" if item["shape"] == "oval" else "operator",
                                      oval=item["shape"] == "oval"))
    for name in sorted(weights):
        drawing.nodes.append(DrawNode(name, (name,), fill=fill or "#ffffff", kind="weight"))
    for edge in edges:
        drawing.edges.append(DrawEdge(edge["source"], edge["target"], edge["label"]))
    return NetworkPlot(drawing, title, fmt, drawn, edges)
