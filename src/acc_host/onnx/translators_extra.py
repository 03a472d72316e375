"""ONNX BitCast, Unique, SwiGLU, CausalConvWithState and TensorScatter ->
the host operators of :mod:`acc_host.ops.onnx_bitcast`,
:mod:`acc_host.ops.onnx_attention` and :mod:`acc_host.ops.onnx_state`
(registered into TRANSLATORS on import)."""

from __future__ import annotations

from .translators import _host_dtype, _input, _np_dtype_name, onnx_op


@onnx_op("BitCast", since=26)
def _bitcast(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_bitcast", cx.sym(inputs[0]), dtype=_host_dtype(attrs["to"]))]


@onnx_op("Unique", since=11)
def _unique(cx, node, attrs, inputs, opset):
    dtype = cx.dtype(inputs[0])
    if dtype is not None:
        _np_dtype_name(dtype)  # Unsupported for bfloat16 and the float8 types
    result = cx.op("_onnx_unique", cx.sym(inputs[0]), axis=attrs.get("axis"),
                   sorted=bool(attrs.get("sorted", 1)))
    return [result[i] for i in range(len(node.output))]


@onnx_op("SwiGLU", since=1)
def _swiglu(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_swiglu", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  alpha=attrs.get("alpha", 1.0))]


@onnx_op("CausalConvWithState", since=1)
def _causal_conv_with_state(cx, node, attrs, inputs, opset):
    bias, past = _input(inputs, 2), _input(inputs, 3)
    activation = attrs.get("activation", "none")
    if isinstance(activation, bytes):
        activation = activation.decode()
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + [cx.sym(n) for n in (bias, past) if n]
    result = cx.op("_onnx_causal_conv_with_state", *args, activation=activation,
                   has_bias=bias is not None, has_past_state=past is not None)
    return [result[i] for i in range(len(node.output))]


@onnx_op("TensorScatter", since=24)
def _tensor_scatter(cx, node, attrs, inputs, opset):
    indices = _input(inputs, 2)
    mode = attrs.get("mode", "linear")
    if isinstance(mode, bytes):
        mode = mode.decode()
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + ([cx.sym(indices)] if indices else [])
    return [cx.op("_onnx_tensor_scatter", *args, axis=attrs.get("axis", -2), mode=mode,
                  has_write_indices=indices is not None)]
