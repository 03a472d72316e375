"""MXNet's fused ``RNN`` operator and ``_rnn_param_concat``.

``RNN`` runs ``num_layers`` stacked recurrent layers (``rnn_relu``,
``rnn_tanh``, ``lstm``, ``gru``), each in one or two directions, over data
(T, N, I) (always time-major). Its inputs, as MXNet 1.9 names them: data,
parameters, state, [state_cell] (lstm), [sequence_length]
(use_sequence_length). Its outputs: the last layer's outputs (T, N, D*H')
and, with state_outputs, the final hidden states (L*D, N, H') and for lstm
the final cell states (L*D, N, H); H' is projection_size for an LSTMP and
the hidden size otherwise.

MXNet's packed parameter vector (:func:`unpack`) holds first every weight,
layer by layer and within a layer direction by direction (left then
right): i2h (G*H, in), h2h (G*H, H'), and for an LSTMP h2r (P, H); then
every bias in the same order: i2h (G*H,), h2h (G*H,). The layer input
``in`` is I for layer 0 and D*H' above. Gate rows are i, f, g, o for lstm
and r, z, n for gru. Dropout (p) acts between layers in training only: the
identity here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import OperatorError, ShapeError
from .params import Attrs, Param, choice, optional, parse_bool, parse_count, parse_float, parse_int
from .registry import OpDef, Shape, get, register, require_known
from .rnn_core import GATES, Cell, run_direction

__all__ = ["Layout", "layout", "parameter_count", "unpack", "rnn_forward"]

Shapes = list[Shape | None]

_OP = "RNN"


@dataclass(frozen=True)
class Layout:
    """The sizes of one RNN operator: mode, layers, directions, input size,
    hidden size, projection size (0 for none)."""

    mode: str
    layers: int
    directions: int
    input_size: int
    hidden: int
    projection: int

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def out_hidden(self) -> int:
        """H': what one direction outputs and carries as its hidden state."""
        return self.projection or self.hidden

    def layer_input(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.directions * self.out_hidden

    def weight_shapes(self, layer: int) -> list[tuple[int, int]]:
        """i2h, h2h[, h2r] of one direction of a layer."""
        rows = self.gates * self.hidden
        shapes = [(rows, self.layer_input(layer)), (rows, self.out_hidden)]
        if self.projection:
            shapes.append((self.projection, self.hidden))
        return shapes

    def state_shape(self, batch: int) -> Shape:
        return (self.layers * self.directions, batch, self.out_hidden)

    def cell_shape(self, batch: int) -> Shape:
        return (self.layers * self.directions, batch, self.hidden)


def layout(attrs: Attrs, input_size: int) -> Layout:
    """The Layout of an RNN node with these attributes over inputs of
    input_size features, after checking the attributes."""
    projection = attrs.projection_size or 0
    if projection and attrs.mode != "lstm":
        raise OperatorError(f"{_OP}: projection_size is only supported with mode='lstm', "
                            f"not {attrs.mode!r}")
    if projection and projection >= attrs.state_size:
        raise OperatorError(f"{_OP}: projection_size={projection} must be smaller than "
                            f"state_size={attrs.state_size}")
    if not 0.0 <= attrs.p <= 1.0:
        raise OperatorError(f"{_OP}: p={attrs.p} must lie in [0, 1]")
    if input_size < 1:
        raise ShapeError(f"{_OP}: data must have at least one feature, got {input_size}")
    return Layout(attrs.mode, attrs.num_layers, 2 if attrs.bidirectional else 1, input_size,
                  attrs.state_size, projection)


def parameter_count(sizes: Layout) -> int:
    """The length of the packed parameter vector."""
    total = 0
    for layer in range(sizes.layers):
        per_direction = sum(rows * cols for rows, cols in sizes.weight_shapes(layer))
        per_direction += 2 * sizes.gates * sizes.hidden
        total += sizes.directions * per_direction
    return total


def unpack(sizes: Layout, vector: np.ndarray) -> list[list[dict[str, np.ndarray]]]:
    """The packed vector as [layer][direction] -> {"i2h_weight", "h2h_weight",
    ["h2r_weight"], "i2h_bias", "h2h_bias"} (views)."""
    expected = parameter_count(sizes)
    if vector.shape != (expected,):
        raise ShapeError(f"{_OP}: parameters has shape {vector.shape}, expected ({expected},) "
                         f"for {sizes}")
    names = ["i2h_weight", "h2h_weight", "h2r_weight"]
    result: list[list[dict[str, np.ndarray]]] = []
    offset = 0
    for layer in range(sizes.layers):
        result.append([])
        for _ in range(sizes.directions):
            entry = {}
            for name, (rows, cols) in zip(names, sizes.weight_shapes(layer)):
                entry[name] = vector[offset:offset + rows * cols].reshape(rows, cols)
                offset += rows * cols
            result[layer].append(entry)
    rows = sizes.gates * sizes.hidden
    for layer in range(sizes.layers):
        for direction in range(sizes.directions):
            for name in ("i2h_bias", "h2h_bias"):
                result[layer][direction][name] = vector[offset:offset + rows]
                offset += rows
    return result


def _argument_names(attrs: Attrs) -> list[str]:
    names = ["data", "parameters", "state"]
    if attrs.mode == "lstm":
        names.append("state_cell")
    if attrs.use_sequence_length:
        names.append("sequence_length")
    return names


def _output_names(attrs: Attrs) -> list[str]:
    if not attrs.state_outputs:
        return ["output"]
    return ["output", "hy", "cy"] if attrs.mode == "lstm" else ["output", "hy"]


def _assign(shapes: Shapes, index: int, name: str, expected: Shape) -> None:
    given = shapes[index]
    if given is not None and tuple(given) != tuple(expected):
        raise ShapeError(f"{_OP}: {name} has shape {tuple(given)}, expected {tuple(expected)}")
    shapes[index] = tuple(expected)


def _infer_shape(attrs: Attrs, shapes: Shapes) -> tuple[Shapes, list[Shape]]:
    data = require_known(_OP, shapes, 0, "data")
    if len(data) != 3:
        raise ShapeError(f"{_OP}: data must be 3-D (sequence, batch, features), got shape {data}")
    steps, batch, features = data
    sizes = layout(attrs, features)
    filled = list(shapes)
    names = _argument_names(attrs)
    _assign(filled, 1, "parameters", (parameter_count(sizes),))
    _assign(filled, 2, "state", sizes.state_shape(batch))
    if "state_cell" in names:
        _assign(filled, names.index("state_cell"), "state_cell", sizes.cell_shape(batch))
    if "sequence_length" in names:
        _assign(filled, names.index("sequence_length"), "sequence_length", (batch,))
    outputs: list[tuple[int, ...]] = [(steps, batch, sizes.directions * sizes.out_hidden)]
    if attrs.state_outputs:
        outputs.append(sizes.state_shape(batch))
        if attrs.mode == "lstm":
            outputs.append(sizes.cell_shape(batch))
    return filled, outputs


def _infer_type(attrs: Attrs, dtypes: list[np.dtype | None]
                ) -> tuple[list[np.dtype | None], list[np.dtype]]:
    names = _argument_names(attrs)
    dtype = np.dtype(dtypes[0]) if dtypes[0] is not None else np.dtype(np.float32)
    if dtype.kind != "f":
        raise ShapeError(f"{_OP}: data must be floating point, got {dtype}")
    filled: list[np.dtype | None] = []
    for name, given in zip(names, dtypes):
        if name == "sequence_length":
            filled.append(given if given is not None else np.dtype(np.int32))
            continue
        if given is not None and np.dtype(given) != dtype:
            raise ShapeError(f"{_OP}: {name} has dtype {np.dtype(given)}, the data {dtype}")
        filled.append(dtype)
    return filled, [dtype] * len(_output_names(attrs))


def _lengths(values: np.ndarray, steps: int) -> list[int]:
    lengths = [int(v) for v in np.asarray(values).reshape(-1)]
    bad = [v for v in lengths if not 1 <= v <= steps]
    if bad or not np.all(np.asarray(values) == np.round(np.asarray(values, dtype=np.float64))):
        raise ShapeError(f"{_OP}: sequence_length must hold integers from 1 to {steps}, "
                         f"got {np.asarray(values).reshape(-1).tolist()}")
    return lengths


def rnn_forward(attrs: Attrs, data: np.ndarray, parameters: np.ndarray, state: np.ndarray,
                state_cell: np.ndarray | None, lengths: Sequence[int] | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(outputs, final hidden states, final cell states or None) in float64."""
    sizes = layout(attrs, data.shape[2])
    params = unpack(sizes, np.asarray(parameters, dtype=np.float64))
    base = Cell.mxnet(attrs.mode)
    clip = (attrs.lstm_state_clip_min, attrs.lstm_state_clip_max)
    layer_in = np.asarray(data, dtype=np.float64)
    h_all = np.asarray(state, dtype=np.float64)
    c_all = None if state_cell is None else np.asarray(state_cell, dtype=np.float64)
    hy, cy = np.zeros_like(h_all), None if c_all is None else np.zeros_like(c_all)
    for layer in range(sizes.layers):
        outputs = []
        for direction in range(sizes.directions):
            index = layer * sizes.directions + direction
            weights = params[layer][direction]
            projection = weights.get("h2r_weight")
            cell = Cell(base.kind, f=base.f, g=base.g, h=base.h, state_clip=clip,
                        projection=projection)
            out, h, c = run_direction(cell, layer_in, weights["i2h_weight"],
                                      weights["h2h_weight"], weights["i2h_bias"],
                                      weights["h2h_bias"], h_all[index],
                                      None if c_all is None else c_all[index],
                                      lengths, reverse=direction == 1)
            outputs.append(out)
            hy[index] = h
            if cy is not None and c is not None:
                cy[index] = c
        layer_in = np.concatenate(outputs, axis=2) if len(outputs) > 1 else outputs[0]
    return layer_in, hy, cy


def _compute(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    filled, _ = _infer_shape(attrs, [array.shape for array in inputs])
    names = _argument_names(attrs)
    data = inputs[0]
    state_cell = inputs[names.index("state_cell")] if "state_cell" in names else None
    lengths = (_lengths(inputs[names.index("sequence_length")], data.shape[0])
               if "sequence_length" in names else None)
    out, hy, cy = rnn_forward(attrs, data, inputs[1], inputs[2], state_cell, lengths)
    results = [out.astype(data.dtype)]
    if attrs.state_outputs:
        results.append(hy.astype(data.dtype))
        if cy is not None:
            results.append(cy.astype(data.dtype))
    return results


RNN_PARAMS = (
    Param("state_size", parse_count, doc="Hidden size H of each direction."),
    Param("num_layers", parse_count, doc="Stacked layers."),
    Param("mode", choice("rnn_relu", "rnn_tanh", "lstm", "gru")),
    Param("bidirectional", parse_bool, False, "Two directions per layer."),
    Param("p", parse_float, 0.0, "Dropout between layers: training only, ignored."),
    Param("state_outputs", parse_bool, False, "Also output the final states."),
    Param("projection_size", optional(parse_int), None, "LSTMP projection size P."),
    Param("lstm_state_clip_min", optional(parse_float), None, "Clip the LSTM cell state."),
    Param("lstm_state_clip_max", optional(parse_float), None, "Clip the LSTM cell state."),
    Param("lstm_state_clip_nan", parse_bool, False, "Ignored (no NaNs to clip at inference)."),
    Param("use_sequence_length", parse_bool, False,
          "Take sequence_length (N,): per-sample lengths."),
)

register(OpDef(
    name="RNN",
    params=RNN_PARAMS,
    arguments=_argument_names,
    outputs=_output_names,
    compute=_compute,
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    doc="Stacked, optionally bidirectional rnn_relu/rnn_tanh/lstm/gru layers over (T, N, I) "
        "with MXNet's packed parameter vector.",
))


def _param_concat_shape(attrs: Attrs, shapes: Shapes) -> tuple[Shapes, list[Shape]]:
    filled, outputs = get("Concat").infer_shape(attrs, shapes)
    return list(filled), list(outputs)


register(OpDef(
    name="_rnn_param_concat",
    params=(Param("num_args", parse_count), Param("dim", parse_int, 1)),
    arguments=lambda attrs: [f"arg{k}" for k in range(attrs.num_args)],
    compute=lambda attrs, inputs: get("Concat").compute(attrs, inputs),
    infer_shape=_param_concat_shape,
    infer_type=lambda attrs, dtypes: get("Concat").infer_type(attrs, dtypes),
    doc="Concat, as gluon's RNN layers join their parameters into RNN's vector.",
))


def _swap_axes(op: str, attrs: Attrs, ndim: int) -> tuple[int, int]:
    for name in ("dim1", "dim2"):
        if not -ndim <= attrs[name] < ndim:
            raise ShapeError(f"{op}: {name}={attrs[name]} is out of range for {ndim} dimensions")
    return attrs.dim1 % ndim, attrs.dim2 % ndim


def _swap_axis_shape(attrs: Attrs, shapes: Shapes) -> tuple[Shapes, list[Shape]]:
    data = require_known("SwapAxis", shapes, 0, "data")
    first, second = _swap_axes("SwapAxis", attrs, len(data))
    out = list(data)
    out[first], out[second] = data[second], data[first]
    return [data], [tuple(out)]


def _swap_axis(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    first, second = _swap_axes("SwapAxis", attrs, inputs[0].ndim)
    return [np.ascontiguousarray(np.swapaxes(inputs[0], first, second))]


# gluon's RNN layers with layout="NTC" swap the batch and time axes around RNN
register(OpDef(
    name="SwapAxis",
    params=(Param("dim1", parse_int, 0), Param("dim2", parse_int, 0)),
    compute=_swap_axis,
    infer_shape=_swap_axis_shape,
    aliases=("swapaxes",),
    doc="Exchanges dimensions dim1 and dim2.",
))
