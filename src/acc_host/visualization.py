"""``mx.viz.print_summary``: MXNet's per-layer table of a symbol.

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

__all__ = ["print_summary", "plot_network"]


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


def plot_network(*args: Any, **kwargs: Any) -> Any:
    """Not provided: MXNet draws with the graphviz package; ``acc-host
    partition`` shows where each operator runs."""
    raise InvalidArgumentError("mx.viz.plot_network is not provided by acc-host (MXNet's "
                               "needs graphviz); use print_summary or `acc-host partition`")
