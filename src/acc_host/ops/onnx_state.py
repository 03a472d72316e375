"""Host operators for ONNX's decoder-state updates: CausalConvWithState (a
depthwise causal 1-D convolution carrying its last k-1 inputs as state) and
TensorScatter (writing an update into a key/value cache at per-batch
positions, linear or circular). Host only."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, choice, parse_bool, parse_int
from .registry import OpDef, ShapeUnknownError, normalize_axis, register

_CAUSAL_CONV = "_onnx_causal_conv_with_state"
_TENSOR_SCATTER = "_onnx_tensor_scatter"


def _conv_arguments(attrs: Attrs) -> list[str]:
    return (["data", "weight"] + (["bias"] if attrs.has_bias else [])
            + (["past_state"] if attrs.has_past_state else []))


def _conv_shapes(attrs: Attrs, shapes: list) -> tuple[tuple, tuple]:
    named = dict(zip(_conv_arguments(attrs), shapes))
    x, w = tuple(named["data"]), tuple(named["weight"])
    if len(x) != 3 or len(w) != 3 or w[0] != x[1] or w[1] != 1 or w[2] < 1:
        raise ShapeError(f"{_CAUSAL_CONV}: input must be (batch, channels, length) and weight "
                         f"(channels, 1, k), got {x} and {w}")
    k = w[2]
    if "bias" in named and tuple(named["bias"]) != (x[1],):
        raise ShapeError(f"{_CAUSAL_CONV}: bias has shape {tuple(named['bias'])}, expected "
                         f"({x[1]},)")
    if "past_state" in named and tuple(named["past_state"]) != (x[0], x[1], k - 1):
        raise ShapeError(f"{_CAUSAL_CONV}: past_state has shape {tuple(named['past_state'])}, "
                         f"expected {(x[0], x[1], k - 1)}")
    return x, (x[0], x[1], k - 1)


def _causal_conv(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    named = dict(zip(_conv_arguments(attrs), inputs))
    x, w = named["data"], named["weight"]
    if x.dtype.kind != "f":
        raise DTypeError(f"{_CAUSAL_CONV}: input must be a float tensor, got {x.dtype.name}")
    _, state_shape = _conv_shapes(attrs, [a.shape for a in inputs])
    k = w.shape[2]
    past = named.get("past_state")
    if past is None:
        past = np.zeros(state_shape, dtype=x.dtype)
    padded = np.concatenate([past.astype(x.dtype, copy=False), x], axis=2)
    length = x.shape[2]
    work = padded.astype(np.float64)
    out = np.zeros(x.shape, dtype=np.float64)
    for j in range(k):  # out[t] = sum_j padded[t + j] * w[j]
        out += work[:, :, j:j + length] * w[None, :, 0, j, None].astype(np.float64)
    if "bias" in named:
        out += named["bias"].astype(np.float64)[None, :, None]
    out = out.astype(x.dtype)
    if attrs.activation in ("silu", "swish"):
        f = out.astype(np.float32)
        out = (f / (1 + np.exp(-f))).astype(x.dtype)
    return [out, np.ascontiguousarray(padded[:, :, padded.shape[2] - (k - 1):])]


def _causal_conv_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if any(shape is None for shape in shapes):
        raise ShapeUnknownError(f"{_CAUSAL_CONV}: an input shape is unknown")
    out, state = _conv_shapes(attrs, shapes)
    return list(shapes), [out, state]


register(OpDef(
    name=_CAUSAL_CONV, compute=_causal_conv, infer_shape=_causal_conv_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)] * 2),
    params=(Param("activation", choice("none", "silu", "swish"), "none"),
            Param("has_bias", parse_bool, False), Param("has_past_state", parse_bool, False)),
    arguments=_conv_arguments, outputs=("output", "present_state"),
    doc="ONNX CausalConvWithState: depthwise causal 1-D convolution of (batch, channels, "
        "length) by weight (channels, 1, k) after the past_state (zeros when absent), with "
        "an optional SiLU; present_state is the last k-1 inputs. Host only."))


def _scatter_arguments(attrs: Attrs) -> list[str]:
    return ["past_cache", "update"] + (["write_indices"] if attrs.has_write_indices else [])


def _tensor_scatter(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    cache, update = inputs[0], inputs[1]
    _scatter_check(attrs, cache.shape, update.shape)
    axis = normalize_axis(_TENSOR_SCATTER, attrs.axis, cache.ndim)
    batch = cache.shape[0]
    if len(inputs) > 2:
        starts = inputs[2]
        if starts.dtype.kind not in "iu" or starts.shape != (batch,):
            raise ShapeError(f"{_TENSOR_SCATTER}: write_indices must be {batch} integers, got "
                             f"{starts.dtype.name} of shape {starts.shape}")
        starts = starts.astype(np.int64)
    else:
        starts = np.zeros(batch, dtype=np.int64)
    capacity, length = cache.shape[axis], update.shape[axis]
    out = cache.copy()
    for b in range(batch):
        positions = starts[b] + np.arange(length)
        if attrs.mode == "circular":
            positions = positions % capacity if capacity else positions
        elif length and (starts[b] < 0 or positions[-1] >= capacity):
            raise ShapeError(f"{_TENSOR_SCATTER}: batch {b} writes positions {starts[b]}.."
                             f"{positions[-1]} outside the cache's {capacity}")
        # Views of batch b with the sequence axis first: writing them writes out.
        np.moveaxis(out[b], axis - 1, 0)[positions] = np.moveaxis(update[b], axis - 1, 0)
    return [out]


def _scatter_check(attrs: Attrs, cache: tuple, update: tuple) -> None:
    cache, update = tuple(cache), tuple(update)
    if len(cache) < 2 or len(update) != len(cache):
        raise ShapeError(f"{_TENSOR_SCATTER}: past_cache and update must have the same rank "
                         f"(at least 2), got {cache} and {update}")
    axis = normalize_axis(_TENSOR_SCATTER, attrs.axis, len(cache))
    if axis == 0:
        raise OperatorError(f"{_TENSOR_SCATTER}: axis {attrs.axis} is the batch axis")
    for i, (c, u) in enumerate(zip(cache, update)):
        if (i != axis and c != u) or (i == axis and u > c):
            raise ShapeError(f"{_TENSOR_SCATTER}: update shape {update} does not fit cache "
                             f"shape {cache} (axis {axis})")


def _scatter_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None or shapes[1] is None:
        raise ShapeUnknownError(f"{_TENSOR_SCATTER}: the input shapes are unknown")
    _scatter_check(attrs, shapes[0], shapes[1])
    return list(shapes), [tuple(shapes[0])]


register(OpDef(
    name=_TENSOR_SCATTER, compute=_tensor_scatter, infer_shape=_scatter_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("axis", parse_int, -2), Param("mode", choice("linear", "circular"), "linear"),
            Param("has_write_indices", parse_bool, False)),
    arguments=_scatter_arguments,
    doc="ONNX TensorScatter: past_cache with update written along axis from each batch's "
        "write index (linear, or circular modulo the cache length). Host only."))
