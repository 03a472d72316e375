"""ONNX RNN, LSTM and GRU -> MXNet's fused ``RNN``, or ``_onnx_rnn``.

MXNet's ``RNN`` (which accelerators implement) is used where its semantics
are ONNX's: direction forward or bidirectional, default activations (Tanh
or Relu for RNN), no clip, no input_forget, no peepholes (or all-zero
ones), GRU with linear_before_reset=1, no sequence_lens, constant W/R/B,
and initial states that are given or whose batch is known at import
(zeros then).
ONNX's W/R/B are repacked into MXNet's parameter vector and gate order
(LSTM i, o, f, c -> i, f, g, o; GRU z, r, h -> r, z, n); ONNX's Y
(T, D, N, H) is MXNet's output (T, N, D*H) reshaped and transposed, and
layout=1 transposes the batch to the front. Everything else becomes
``_onnx_rnn`` (acc_host.ops.rnn_onnx), which implements ONNX's semantics on
the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops.rnn_onnx import DEFAULT_ACTIVATIONS, ONNX_GATE_ORDER
from .translators import Unsupported, _input, onnx_op

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _directions(attrs: dict) -> int:
    return 2 if attrs.get("direction", "forward") == "bidirectional" else 1


def _activations(kind: str, attrs: dict) -> list[str]:
    given = [str(name) for name in attrs.get("activations", [])]
    return given or list(DEFAULT_ACTIVATIONS[kind]) * _directions(attrs)


def _mxnet_mode(kind: str, attrs: dict) -> str | None:
    """MXNet's mode for this node's activations, or None when none matches."""
    names = [name.lower() for name in _activations(kind, attrs)]
    per = len(DEFAULT_ACTIVATIONS[kind])
    if any(names[k * per:(k + 1) * per] != names[:per] for k in range(_directions(attrs))):
        return None
    if kind == "RNN":
        return {"tanh": "rnn_tanh", "relu": "rnn_relu"}.get(names[0])
    default = [name.lower() for name in DEFAULT_ACTIVATIONS[kind]]
    if names[:per] != default:
        return None
    return kind.lower()


def _reorder(kind: str, rows: np.ndarray, hidden: int) -> np.ndarray:
    return np.concatenate([rows[k * hidden:(k + 1) * hidden] for k in ONNX_GATE_ORDER[kind]])


def pack_parameters(kind: str, w: np.ndarray, r: np.ndarray, b: np.ndarray | None,
                    hidden: int) -> np.ndarray:
    """ONNX's W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H) as MXNet's packed
    vector of one layer: every direction's i2h and h2h weights, then every
    direction's i2h and h2h biases, gates in MXNet's order."""
    directions, rows = w.shape[0], w.shape[1]
    if b is None:
        b = np.zeros((directions, 2 * rows), dtype=w.dtype)
    weights, biases = [], []
    for d in range(directions):
        weights += [_reorder(kind, w[d], hidden).reshape(-1),
                    _reorder(kind, r[d], hidden).reshape(-1)]
        biases += [_reorder(kind, b[d, :rows], hidden), _reorder(kind, b[d, rows:], hidden)]
    return np.ascontiguousarray(np.concatenate(weights + biases), dtype=w.dtype)


def _mxnet_rnn(cx: Any, node: Any, attrs: dict, inputs: list[str], mode: str) -> list | None:
    """The node as MXNet's RNN, or None when its inputs do not allow it."""
    kind, hidden = node.op_type, int(attrs["hidden_size"])
    w, r = cx.const(inputs[1]), cx.const(inputs[2])
    b_name = _input(inputs, 3)
    b = cx.const(b_name) if b_name else None
    if w is None or r is None or (b_name and b is None) or w.dtype.kind != "f":
        return None
    peep = _input(inputs, 7)
    if peep is not None:
        value = cx.const(peep)
        if value is None or np.any(value != 0):
            return None
    layout = int(attrs.get("layout", 0))
    directions = _directions(attrs)
    x = cx.sym(inputs[0])
    if layout == 1:
        x = cx.op("transpose", x, axes=(1, 0, 2))

    def state(index: int) -> Any:
        name = _input(inputs, index)
        if name is not None:
            value = cx.sym(name)
            return cx.op("transpose", value, axes=(1, 0, 2)) if layout == 1 else value
        shape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
        if shape is None:
            return None
        batch = shape[0] if layout == 1 else shape[1]
        zeros = np.zeros((directions, batch, hidden), dtype=w.dtype)
        zero_name = cx.name("zero_state")
        cx.consts[zero_name] = zeros
        return cx.sym(zero_name)

    h0 = state(5)
    c0 = state(6) if kind == "LSTM" else None
    if h0 is None or (kind == "LSTM" and c0 is None):
        return None
    vector_name = f"{node.output[0] or cx.name('rnn')}_parameters"
    cx.plan_constant(int(w.nbytes + r.nbytes + (b.nbytes if b is not None else 0)),
                     f"{kind} parameters")
    cx.consts[vector_name] = pack_parameters(kind, w, r, b, hidden)
    args = [x, cx.sym(vector_name), h0] + ([c0] if c0 is not None else [])
    result = cx.op("RNN", *args, mode=mode, state_size=hidden, num_layers=1,
                   bidirectional=directions == 2, state_outputs=True)
    # (T, N, D*H) -> (T, N, D, H) -> ONNX's (T, D, N, H), or (N, T, D, H) for layout 1
    y = cx.op("Reshape", result[0], shape=(0, 0, directions, hidden))
    y = cx.op("transpose", y, axes=(1, 0, 2, 3) if layout == 1 else (0, 2, 1, 3))
    states = [result[1]] + ([result[2]] if kind == "LSTM" else [])
    if layout == 1:
        states = [cx.op("transpose", s, axes=(1, 0, 2)) for s in states]
    return [y] + states


def _onnx_rnn(cx: Any, node: Any, attrs: dict, inputs: list[str]) -> list:
    kind = node.op_type
    flags = {"has_b": 3, "has_sequence_lens": 4, "has_initial_h": 5, "has_initial_c": 6,
             "has_p": 7}
    present = {flag: _input(inputs, index) is not None for flag, index in flags.items()}
    args = [cx.sym(inputs[0]), cx.sym(inputs[1]), cx.sym(inputs[2])]
    args += [cx.sym(inputs[index]) for flag, index in flags.items() if present[flag]]
    clip = attrs.get("clip")
    result = cx.op("_onnx_rnn", *args, kind=kind, hidden_size=int(attrs["hidden_size"]),
                   direction=attrs.get("direction", "forward"),
                   layout=int(attrs.get("layout", 0)),
                   activations=",".join(_activations(kind, attrs)),
                   activation_alpha=tuple(float(a) for a in attrs.get("activation_alpha", [])),
                   activation_beta=tuple(float(a) for a in attrs.get("activation_beta", [])),
                   clip=None if clip is None else float(clip),
                   input_forget=bool(attrs.get("input_forget", 0)),
                   linear_before_reset=bool(attrs.get("linear_before_reset", 0)), **present)
    return [result[k] for k in range(3 if kind == "LSTM" else 2)]


@onnx_op("RNN", "LSTM", "GRU", since=1)
def _recurrent(cx, node, attrs, inputs, opset):
    kind = node.op_type
    if "hidden_size" not in attrs:
        raise Unsupported(f"{kind} without hidden_size")
    if kind == "GRU" and opset < 3 and "linear_before_reset" not in attrs:
        attrs = dict(attrs, linear_before_reset=0)
    mode = _mxnet_mode(kind, attrs)
    # MXNet's RNN runs forward or both ways, never backward alone
    agrees = (mode is not None and attrs.get("clip") is None
              and attrs.get("direction", "forward") != "reverse"
              and not attrs.get("input_forget", 0) and _input(inputs, 4) is None
              and (kind != "GRU" or attrs.get("linear_before_reset", 0) == 1))
    if agrees:
        result = _mxnet_rnn(cx, node, attrs, inputs, mode)
        if result is not None:
            return result
    return _onnx_rnn(cx, node, attrs, inputs)
