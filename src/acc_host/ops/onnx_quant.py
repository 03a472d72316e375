"""Host operators for ONNX's linear quantization: QuantizeLinear,
DequantizeLinear (per tensor, per axis and blocked), DynamicQuantizeLinear,
MatMulInteger and QLinearMatMul.

They run on the CPU path only (no plugin's supportedOps names them). The
quantized dtypes are those numpy holds: uint8, int8, uint16, int16; the
ONNX importer refuses int4/int2 and the float8/float4 types by name.
Rounding is to the nearest even value and results saturate to the dtype's
range, as the ONNX specification says.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, choice, optional, parse_bool, parse_int
from .registry import OpDef, ShapeUnknownError, normalize_axis, register

QUANT_DTYPES = ("uint8", "int8", "uint16", "int16")
_FLOATS = ("float16", "float32", "float64")


def _scale_like(op: str, what: str, value: np.ndarray, shape: tuple[int, ...], axis: int,
                block_size: int) -> np.ndarray:
    """A scale or zero point made broadcastable to shape: per tensor (a
    scalar or one value), per axis (1-D of shape[axis] values) or blocked
    (shape but for axis, which holds ceil(shape[axis] / block_size))."""
    if value.ndim == 0:
        return value
    if value.size == 1 and not block_size:
        return value.reshape(())
    axis = normalize_axis(op, axis, len(shape))
    if not block_size:
        if value.ndim != 1 or value.shape[0] != shape[axis]:
            raise ShapeError(f"{op}: per-axis {what} of shape {value.shape} does not match "
                             f"axis {axis} of the input's shape {tuple(shape)}")
        dims = [1] * len(shape)
        dims[axis] = value.shape[0]
        return value.reshape(dims)
    if block_size < 0:
        raise OperatorError(f"{op}: block_size must be positive, got {block_size}")
    blocks = -(-shape[axis] // block_size)
    expected = tuple(shape[:axis]) + (blocks,) + tuple(shape[axis + 1:])
    if value.shape != expected:
        raise ShapeError(f"{op}: blocked {what} has shape {value.shape}, expected {expected} "
                         f"(block_size {block_size} along axis {axis} of {tuple(shape)})")
    return np.repeat(value, block_size, axis=axis).take(np.arange(shape[axis]), axis=axis)


def _saturate(values: np.ndarray, dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


def _check_float(op: str, what: str, array: np.ndarray) -> None:
    if array.dtype.kind != "f":
        raise DTypeError(f"{op}: {what} must be a float tensor, got {array.dtype.name}")


# ---- QuantizeLinear ------------------------------------------------------------------------

_QUANTIZE = "_onnx_quantize_linear"


def _quantize(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, scale = inputs[0], inputs[1]
    _check_float(_QUANTIZE, "x", x)
    _check_float(_QUANTIZE, "y_scale", scale)
    scale = _scale_like(_QUANTIZE, "y_scale", scale, x.shape, attrs.axis, attrs.block_size)
    if attrs.precision is not None:
        x, scale = x.astype(attrs.precision), scale.astype(attrs.precision)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.rint(x / scale)
    dtype = _quantize_dtype(attrs, [inputs[2].dtype] if len(inputs) > 2 else [])
    if len(inputs) > 2:
        zero = inputs[2]
        if zero.dtype.name != dtype:
            raise DTypeError(f"{_QUANTIZE}: y_zero_point is {zero.dtype.name}, the output "
                             f"dtype is {dtype}")
        q = q + _scale_like(_QUANTIZE, "y_zero_point", zero, x.shape, attrs.axis,
                            attrs.block_size).astype(np.float64)
    q = np.nan_to_num(q.astype(np.float64), nan=0.0)
    return [_saturate(q, dtype)]


def _quantize_dtype(attrs: Attrs, zero: list) -> str:
    """The output dtype: the attribute, else the zero point's, else uint8."""
    if attrs.dtype is not None:
        return str(attrs.dtype)
    if not zero:
        return "uint8"
    if zero[0] is None:
        raise ShapeUnknownError(f"{_QUANTIZE}: the dtype of y_zero_point is unknown")
    name = np.dtype(zero[0]).name
    if name not in QUANT_DTYPES:
        raise DTypeError(f"{_QUANTIZE}: y_zero_point is {name}; the host quantizes to "
                         f"{', '.join(QUANT_DTYPES)}")
    return name


def _same_shape(name: str) -> Any:
    def infer(attrs: Attrs, shapes: list) -> tuple[list, list]:
        if shapes[0] is None:
            raise ShapeUnknownError(f"{name}: the shape of the input is unknown")
        return list(shapes), [tuple(shapes[0])]
    return infer


def _quant_arguments(names: tuple[str, ...]) -> Any:
    return lambda attrs: list(names) if attrs.has_zero_point else list(names[:2])


register(OpDef(
    name=_QUANTIZE, compute=_quantize, infer_shape=_same_shape(_QUANTIZE),
    infer_type=lambda attrs, dtypes: (list(dtypes),
                                      [np.dtype(_quantize_dtype(attrs, dtypes[2:3]))]),
    params=(Param("axis", parse_int, 1), Param("block_size", parse_int, 0),
            Param("dtype", optional(choice(*QUANT_DTYPES)), None),
            Param("precision", optional(choice(*_FLOATS)), None),
            Param("has_zero_point", parse_bool, False)),
    arguments=_quant_arguments(("data", "y_scale", "y_zero_point")),
    doc="ONNX QuantizeLinear: saturate(rint(x / y_scale) + y_zero_point) in dtype (None: "
        "y_zero_point's, uint8 without one), per tensor, per axis or blocked along axis. "
        "Host only."))


# ---- DequantizeLinear ----------------------------------------------------------------------

_DEQUANTIZE = "_onnx_dequantize_linear"


def _dequantize(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, scale = inputs[0], inputs[1]
    if x.dtype.kind not in "iu":
        raise DTypeError(f"{_DEQUANTIZE}: x must be an integer tensor, got {x.dtype.name}")
    _check_float(_DEQUANTIZE, "x_scale", scale)
    values = x.astype(np.float32)
    if len(inputs) > 2:
        zero = inputs[2]
        if zero.dtype != x.dtype:
            raise DTypeError(f"{_DEQUANTIZE}: x_zero_point is {zero.dtype.name}, x is "
                             f"{x.dtype.name}")
        values = values - _scale_like(_DEQUANTIZE, "x_zero_point", zero, x.shape, attrs.axis,
                                      attrs.block_size).astype(np.float32)
    out = values * _scale_like(_DEQUANTIZE, "x_scale", scale, x.shape, attrs.axis,
                               attrs.block_size)
    return [out.astype(attrs.dtype or scale.dtype)]


def _dequantize_type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
    if attrs.dtype is not None:
        return list(dtypes), [np.dtype(attrs.dtype)]
    if len(dtypes) < 2 or dtypes[1] is None:
        raise ShapeUnknownError(f"{_DEQUANTIZE}: the dtype of x_scale is unknown")
    return list(dtypes), [np.dtype(dtypes[1])]


register(OpDef(
    name=_DEQUANTIZE, compute=_dequantize, infer_shape=_same_shape(_DEQUANTIZE),
    infer_type=_dequantize_type,
    params=(Param("axis", parse_int, 1), Param("block_size", parse_int, 0),
            Param("dtype", optional(choice(*_FLOATS)), None),
            Param("has_zero_point", parse_bool, False)),
    arguments=_quant_arguments(("data", "x_scale", "x_zero_point")),
    doc="ONNX DequantizeLinear: (x - x_zero_point) * x_scale, per tensor, per axis or "
        "blocked along axis; dtype None: x_scale's. Host only."))


# ---- DynamicQuantizeLinear -----------------------------------------------------------------

_DYNAMIC = "_onnx_dynamic_quantize_linear"


def _dynamic_quantize(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    _check_float(_DYNAMIC, "x", x)
    x32 = x.astype(np.float32)
    high = np.float32(max(0.0, float(x32.max()))) if x32.size else np.float32(0)
    low = np.float32(min(0.0, float(x32.min()))) if x32.size else np.float32(0)
    if not (np.isfinite(high) and np.isfinite(low)):
        raise OperatorError(f"{_DYNAMIC}: the input holds NaN or infinity")
    scale = np.float32(1.0 if high == low else high - low) / np.float32(255)
    zero = np.rint(np.clip(np.float32(0) - low / scale, 0, 255))
    q = np.clip(np.rint(x32 / scale) + zero, 0, 255).astype(np.uint8)
    return [q, np.array(scale, dtype=x.dtype), np.array(zero, dtype=np.uint8)]


def _dynamic_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_DYNAMIC}: the shape of the input is unknown")
    return list(shapes), [tuple(shapes[0]), (), ()]


register(OpDef(
    name=_DYNAMIC, compute=_dynamic_quantize, infer_shape=_dynamic_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(np.uint8),
                                                     np.dtype(dtypes[0] or np.float32),
                                                     np.dtype(np.uint8)]),
    outputs=("y", "y_scale", "y_zero_point"),
    doc="ONNX DynamicQuantizeLinear: uint8 quantization of x over the range [min(x, 0), "
        "max(x, 0)], with that scale and zero point. Host only."))


# ---- MatMulInteger and QLinearMatMul -------------------------------------------------------

_MATMUL_INTEGER = "_onnx_matmul_integer"
_QLINEAR_MATMUL = "_onnx_qlinear_matmul"


def _centered(op: str, what: str, x: np.ndarray, zero: np.ndarray | None) -> np.ndarray:
    if x.dtype.kind not in "iu" or x.dtype.itemsize > 2:
        raise DTypeError(f"{op}: {what} must be an 8- or 16-bit integer tensor, got "
                         f"{x.dtype.name}")
    out = x.astype(np.int32)
    if zero is not None:
        if zero.dtype != x.dtype:
            raise DTypeError(f"{op}: {what}'s zero point is {zero.dtype.name}, {what} is "
                             f"{x.dtype.name}")
        if zero.ndim == 1 and zero.size > 1 and x.ndim >= 2:
            # Per-row zero points of A (M,) and per-column ones of B (N,).
            zero = zero.reshape(-1, 1) if what == "a" else zero.reshape(1, -1)
        try:
            out = out - zero.astype(np.int32)
        except ValueError:
            raise ShapeError(f"{op}: {what}'s zero point of shape {zero.shape} does not fit "
                             f"{what}'s shape {x.shape}") from None
    return out


def _matmul(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"{op}: inputs must have at least one dimension, got {a.shape} and "
                         f"{b.shape}")
    try:
        return np.matmul(a, b)
    except ValueError as error:
        raise ShapeError(f"{op}: {a.shape} x {b.shape}: {error}") from None


def _matmul_integer(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    zeros = inputs[2:] + [None] * (4 - len(inputs))
    a_zero = zeros[0] if attrs.has_a_zero_point else None
    b_zero = (zeros[1] if attrs.has_a_zero_point else zeros[0]) if attrs.has_b_zero_point \
        else None
    a = _centered(_MATMUL_INTEGER, "a", inputs[0], a_zero)
    b = _centered(_MATMUL_INTEGER, "b", inputs[1], b_zero)
    return [_matmul(_MATMUL_INTEGER, a, b).astype(np.int32)]


def _matmul_shape(name: str) -> Any:
    def infer(attrs: Attrs, shapes: list) -> tuple[list, list]:
        a, b = shapes[0], shapes[1 if name == _MATMUL_INTEGER else 3]
        if a is None or b is None:
            raise ShapeUnknownError(f"{name}: the shapes of the matrices are unknown")
        out = _matmul(name, np.empty(a, np.int8), np.empty(b, np.int8)).shape
        return list(shapes), [out]
    return infer


def _matmul_integer_arguments(attrs: Attrs) -> list[str]:
    return (["a", "b"] + (["a_zero_point"] if attrs.has_a_zero_point else [])
            + (["b_zero_point"] if attrs.has_b_zero_point else []))


register(OpDef(
    name=_MATMUL_INTEGER, compute=_matmul_integer, infer_shape=_matmul_shape(_MATMUL_INTEGER),
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(np.int32)]),
    params=(Param("has_a_zero_point", parse_bool, False),
            Param("has_b_zero_point", parse_bool, False)),
    arguments=_matmul_integer_arguments,
    doc="ONNX MatMulInteger: (a - a_zero_point) @ (b - b_zero_point) in int32. Host only."))


def _qlinear_matmul(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = inputs
    for what, scale in (("a_scale", a_scale), ("b_scale", b_scale), ("y_scale", y_scale)):
        _check_float(_QLINEAR_MATMUL, what, scale)
        if scale.size != 1:
            raise ShapeError(f"{_QLINEAR_MATMUL}: {what} must hold one value, got shape "
                             f"{scale.shape}")
    product = _matmul(_QLINEAR_MATMUL, _centered(_QLINEAR_MATMUL, "a", a, a_zero),
                      _centered(_QLINEAR_MATMUL, "b", b, b_zero))
    factor = (a_scale.reshape(()) * b_scale.reshape(()) / y_scale.reshape(())).astype(
        np.float32 if a_scale.dtype == np.float16 else a_scale.dtype)
    if y_zero.dtype.name not in QUANT_DTYPES or y_zero.size != 1:
        raise DTypeError(f"{_QLINEAR_MATMUL}: y_zero_point must be one integer value, got "
                         f"{y_zero.dtype.name} of shape {y_zero.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.rint(product * factor + y_zero.reshape(()).astype(np.float64))
    return [_saturate(np.nan_to_num(values), y_zero.dtype.name)]


register(OpDef(
    name=_QLINEAR_MATMUL, compute=_qlinear_matmul, infer_shape=_matmul_shape(_QLINEAR_MATMUL),
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[7] or np.uint8)]),
    arguments=("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
               "y_zero_point"),
    doc="ONNX QLinearMatMul: the quantized product of two quantized matrices, with per-"
        "tensor scales and zero points. Host only."))
