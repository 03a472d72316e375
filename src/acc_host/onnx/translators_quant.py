"""ONNX linear quantization -> the host operators of
:mod:`acc_host.ops.onnx_quant` (registered into TRANSLATORS on import)."""

from __future__ import annotations

import numpy as np

from ..ops.onnx_quant import QUANT_DTYPES
from .translators import Unsupported, _host_dtype, _input, onnx_op


def _quant_dtype(name: str) -> str:
    if name not in QUANT_DTYPES:
        raise Unsupported(f"quantized dtype {name} is not supported (the host quantizes to "
                          f"{', '.join(QUANT_DTYPES)})")
    return name


def _dtype_of(cx, name: str) -> str | None:
    try:
        dtype = cx.dtype(name)
    except (KeyError, TypeError):
        return None
    if dtype is None:
        return None
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


@onnx_op("QuantizeLinear", since=10)
def _quantize_linear(cx, node, attrs, inputs, opset):
    zero = _input(inputs, 2)
    dtype: str | None = "uint8"
    if zero is not None:
        zero_dtype = _dtype_of(cx, zero)
        # Unknown (computed in the graph): the operator takes the zero point's.
        dtype = None if zero_dtype is None else _quant_dtype(zero_dtype)
    elif attrs.get("output_dtype"):
        dtype = _quant_dtype(_host_dtype(attrs["output_dtype"]))
    precision = attrs.get("precision")
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + ([cx.sym(zero)] if zero else [])
    return [cx.op("_onnx_quantize_linear", *args, axis=attrs.get("axis", 1),
                  block_size=attrs.get("block_size", 0), dtype=dtype,
                  precision=_host_dtype(precision) if precision else None,
                  has_zero_point=zero is not None)]


@onnx_op("DequantizeLinear", since=10)
def _dequantize_linear(cx, node, attrs, inputs, opset):
    x_dtype = _dtype_of(cx, inputs[0])
    if x_dtype is not None and x_dtype != "int32":  # int32 is also a dequantizable input
        _quant_dtype(x_dtype)
    zero = _input(inputs, 2)
    output = attrs.get("output_dtype")
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + ([cx.sym(zero)] if zero else [])
    return [cx.op("_onnx_dequantize_linear", *args, axis=attrs.get("axis", 1),
                  block_size=attrs.get("block_size", 0),
                  dtype=_host_dtype(output) if output else None,
                  has_zero_point=zero is not None)]


@onnx_op("DynamicQuantizeLinear", since=11)
def _dynamic_quantize_linear(cx, node, attrs, inputs, opset):
    result = cx.op("_onnx_dynamic_quantize_linear", cx.sym(inputs[0]))
    return [result[0], result[1], result[2]]


@onnx_op("MatMulInteger", since=10)
def _matmul_integer(cx, node, attrs, inputs, opset):
    a_zero, b_zero = _input(inputs, 2), _input(inputs, 3)
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])]
    args += [cx.sym(name) for name in (a_zero, b_zero) if name]
    return [cx.op("_onnx_matmul_integer", *args, has_a_zero_point=a_zero is not None,
                  has_b_zero_point=b_zero is not None)]


@onnx_op("QLinearMatMul", since=10)
def _qlinear_matmul(cx, node, attrs, inputs, opset):
    if len(inputs) < 8 or not all(inputs[:8]):
        raise Unsupported("QLinearMatMul needs all eight inputs")
    return [cx.op("_onnx_qlinear_matmul", *(cx.sym(name) for name in inputs[:8]))]
