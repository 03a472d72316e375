"""``_onnx_rnn``: ONNX's RNN, LSTM and GRU with ONNX's own semantics.

The importer uses MXNet's ``RNN`` where the semantics agree (see
acc_host.onnx.translate_rnn) and this operator otherwise: non-default
activations, clip, peepholes, input_forget, GRU with linear_before_reset=0,
per-sample sequence_lens, absent initial states.

Inputs, as ONNX orders them, present ones only (the has_* attributes say
which): X, W (D, G*H, I), R (D, G*H, H), [B (D, 2*G*H)], [sequence_lens
(N,)], [initial_h (D, N, H)], [initial_c (D, N, H)], [P (D, 3*H)]. Outputs:
Y (T, D, N, H), Y_h (D, N, H), and for LSTM Y_c (D, N, H); with layout=1
X is (N, T, I), Y (N, T, D, H) and the states (N, D, H). ONNX's gate order
(LSTM i, o, f, c; GRU z, r, h; peepholes i, o, f) is turned into MXNet's
before the shared recurrence (acc_host.ops.rnn_core) runs.
"""

from __future__ import annotations

import numpy as np

from ..errors import OperatorError, ShapeError
from .params import (
    Attrs,
    Param,
    choice,
    optional,
    parse_bool,
    parse_count,
    parse_float,
    parse_int,
    parse_str,
)
from .registry import OpDef, Shape, register, require_known
from .rnn_core import Cell, activation, run_direction

__all__ = ["ONNX_GATE_ORDER", "DEFAULT_ACTIVATIONS"]

_OP = "_onnx_rnn"

#: rows of MXNet's gate k in ONNX's weights: gate ONNX_GATE_ORDER[kind][k]
ONNX_GATE_ORDER = {"RNN": (0,), "LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}
_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}
_MXNET_KIND = {"RNN": "rnn_tanh", "LSTM": "lstm", "GRU": "gru"}
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "LSTM": ("Sigmoid", "Tanh", "Tanh"),
                       "GRU": ("Sigmoid", "Tanh")}

Shapes = list[Shape | None]


def _floats(text: str) -> tuple[float, ...]:
    stripped = text.strip().strip("()[]")
    return tuple(float(item) for item in stripped.split(",") if item.strip())


def _argument_names(attrs: Attrs) -> list[str]:
    names = ["X", "W", "R"]
    for flag, name in (("has_b", "B"), ("has_sequence_lens", "sequence_lens"),
                       ("has_initial_h", "initial_h"), ("has_initial_c", "initial_c"),
                       ("has_p", "P")):
        if attrs[flag]:
            names.append(name)
    return names


def _output_names(attrs: Attrs) -> list[str]:
    return ["Y", "Y_h", "Y_c"] if attrs.kind == "LSTM" else ["Y", "Y_h"]


def _directions(attrs: Attrs) -> int:
    return 2 if attrs.direction == "bidirectional" else 1


def _check_attrs(attrs: Attrs) -> None:
    if attrs.layout not in (0, 1):
        raise OperatorError(f"{_OP}: layout={attrs.layout} must be 0 or 1")
    if attrs.kind != "LSTM" and (attrs.has_initial_c or attrs.has_p or attrs.input_forget):
        raise OperatorError(f"{_OP}: initial_c, P and input_forget belong to LSTM, not "
                            f"{attrs.kind}")
    count = len(_activation_names(attrs))
    wanted = len(DEFAULT_ACTIVATIONS[attrs.kind]) * _directions(attrs)
    if count != wanted:
        raise OperatorError(f"{_OP}: {attrs.kind} with direction={attrs.direction} takes "
                            f"{wanted} activations, got {count}")


def _activation_names(attrs: Attrs) -> list[str]:
    given = [name.strip() for name in attrs.activations.split(",") if name.strip()]
    if given:
        return given
    return list(DEFAULT_ACTIVATIONS[attrs.kind]) * _directions(attrs)


def _assign(shapes: Shapes, index: int, name: str, expected: Shape) -> None:
    given = shapes[index]
    if given is not None and tuple(given) != tuple(expected):
        raise ShapeError(f"{_OP}: {name} has shape {tuple(given)}, expected {tuple(expected)}")
    shapes[index] = tuple(expected)


def _infer_shape(attrs: Attrs, shapes: Shapes) -> tuple[Shapes, list[Shape]]:
    _check_attrs(attrs)
    x = require_known(_OP, shapes, 0, "X")
    if len(x) != 3:
        raise ShapeError(f"{_OP}: X must be 3-D, got shape {x}")
    steps, batch, features = (x[1], x[0], x[2]) if attrs.layout == 1 else x
    dirs, hidden, gates = _directions(attrs), attrs.hidden_size, _GATES[attrs.kind]
    filled = list(shapes)
    names = _argument_names(attrs)
    state = (batch, dirs, hidden) if attrs.layout == 1 else (dirs, batch, hidden)
    expected = {"W": (dirs, gates * hidden, features), "R": (dirs, gates * hidden, hidden),
                "B": (dirs, 2 * gates * hidden), "sequence_lens": (batch,),
                "initial_h": state, "initial_c": state, "P": (dirs, 3 * hidden)}
    for index, name in enumerate(names[1:], start=1):
        _assign(filled, index, name, expected[name])
    y = (batch, steps, dirs, hidden) if attrs.layout == 1 else (steps, dirs, batch, hidden)
    return filled, [y] + [state] * (len(_output_names(attrs)) - 1)


def _infer_type(attrs: Attrs, dtypes: list[np.dtype | None]
                ) -> tuple[list[np.dtype | None], list[np.dtype]]:
    dtype = np.dtype(dtypes[0]) if dtypes[0] is not None else np.dtype(np.float32)
    if dtype.kind != "f":
        raise ShapeError(f"{_OP}: X must be floating point, got {dtype}")
    filled: list[np.dtype | None] = [
        given if name == "sequence_lens" and given is not None
        else (np.dtype(np.int32) if name == "sequence_lens" else dtype)
        for name, given in zip(_argument_names(attrs), dtypes)]
    return filled, [dtype] * len(_output_names(attrs))


def _reorder(kind: str, rows: np.ndarray, hidden: int) -> np.ndarray:
    """Gate blocks of rows (axis 0) from ONNX's order to MXNet's."""
    return np.concatenate([rows[k * hidden:(k + 1) * hidden] for k in ONNX_GATE_ORDER[kind]])


def _compute(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _infer_shape(attrs, [array.shape for array in inputs])
    given = dict(zip(_argument_names(attrs), inputs))
    x = np.asarray(given["X"], dtype=np.float64)
    if attrs.layout == 1:
        x = x.transpose(1, 0, 2)
    steps, batch, _ = x.shape
    kind = attrs.kind
    dirs, hidden, gates = _directions(attrs), attrs.hidden_size, _GATES[kind]
    lengths = None
    if "sequence_lens" in given:
        lengths = [int(v) for v in np.asarray(given["sequence_lens"]).reshape(-1)]
        if any(not 0 <= v <= steps for v in lengths):
            raise ShapeError(f"{_OP}: sequence_lens must lie in [0, {steps}], got {lengths}")

    def state(name: str) -> np.ndarray:
        if name not in given:
            return np.zeros((dirs, batch, hidden))
        value = np.asarray(given[name], dtype=np.float64)
        return value.transpose(1, 0, 2) if attrs.layout == 1 else value

    h0, c0 = state("initial_h"), state("initial_c")
    bias = (np.asarray(given["B"], dtype=np.float64) if "B" in given
            else np.zeros((dirs, 2 * gates * hidden)))
    names = _activation_names(attrs)
    alphas, betas = list(attrs.activation_alpha), list(attrs.activation_beta)
    per_direction = len(DEFAULT_ACTIVATIONS[kind])
    y = np.zeros((steps, dirs, batch, hidden))
    y_h, y_c = np.zeros((dirs, batch, hidden)), np.zeros((dirs, batch, hidden))
    for direction in range(dirs):
        functions = [activation(_OP, name, alphas, betas)
                     for name in names[direction * per_direction:(direction + 1) * per_direction]]
        peepholes = None
        if "P" in given:
            p = np.asarray(given["P"][direction], dtype=np.float64)
            peepholes = np.stack([p[:hidden], p[2 * hidden:], p[hidden:2 * hidden]])
        cell = Cell(_MXNET_KIND[kind] if kind != "RNN" else "rnn_tanh", f=functions[0],
                    g=functions[1] if per_direction > 1 else functions[0],
                    h=functions[2] if per_direction > 2 else functions[0],
                    clip=attrs.clip, peepholes=peepholes, input_forget=attrs.input_forget,
                    linear_before_reset=attrs.linear_before_reset)
        w = _reorder(kind, np.asarray(given["W"][direction], dtype=np.float64), hidden)
        r = _reorder(kind, np.asarray(given["R"][direction], dtype=np.float64), hidden)
        b_x = _reorder(kind, bias[direction, :gates * hidden], hidden)
        b_h = _reorder(kind, bias[direction, gates * hidden:], hidden)
        reverse = attrs.direction == "reverse" or direction == 1
        out, h, c = run_direction(cell, x, w, r, b_x, b_h, h0[direction],
                                  c0[direction] if kind == "LSTM" else None, lengths, reverse)
        if lengths is not None:
            # a sample of length 0 keeps its initial state
            empty = np.asarray(lengths) == 0
            h[empty] = h0[direction][empty]
            if c is not None:
                c[empty] = c0[direction][empty]
        y[:, direction] = out
        y_h[direction] = h
        if c is not None:
            y_c[direction] = c
    dtype = inputs[0].dtype
    if attrs.layout == 1:
        y, y_h, y_c = y.transpose(2, 0, 1, 3), y_h.transpose(1, 0, 2), y_c.transpose(1, 0, 2)
    results = [np.ascontiguousarray(y, dtype=dtype), np.ascontiguousarray(y_h, dtype=dtype)]
    if kind == "LSTM":
        results.append(np.ascontiguousarray(y_c, dtype=dtype))
    return results


register(OpDef(
    name=_OP,
    params=(Param("kind", choice("RNN", "LSTM", "GRU")),
            Param("hidden_size", parse_count),
            Param("direction", choice("forward", "reverse", "bidirectional"), "forward"),
            Param("layout", parse_int, 0, "0: (T, N, ...), 1: (N, T, ...)."),
            Param("activations", parse_str, "", "Comma-separated ONNX activation names."),
            Param("activation_alpha", _floats, ()),
            Param("activation_beta", _floats, ()),
            Param("clip", optional(parse_float), None),
            Param("input_forget", parse_bool, False),
            Param("linear_before_reset", parse_bool, False),
            Param("has_b", parse_bool, False),
            Param("has_sequence_lens", parse_bool, False),
            Param("has_initial_h", parse_bool, False),
            Param("has_initial_c", parse_bool, False),
            Param("has_p", parse_bool, False)),
    arguments=_argument_names,
    outputs=_output_names,
    compute=_compute,
    infer_shape=_infer_shape,
    infer_type=_infer_type,
    doc="ONNX RNN/LSTM/GRU with ONNX's semantics (activations, clip, peepholes, layout, "
        "sequence_lens, linear_before_reset).",
))
