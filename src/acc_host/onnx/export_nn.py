"""Exporters of the neural-network operators (acc_host/ops/nn.py) to ONNX.

One function per MXNet operator; each writes ONNX nodes that compute what
the operator computes at inference (Dropout is the identity, BatchNorm uses
the moving statistics), using the static shapes inferred for the node.
"""

from __future__ import annotations

import math

import numpy as np

from ..ops import nn
from ..ops.registry import normalize_axis
from .export_builder import ExportUnsupported, GraphBuilder, OpNode
from .export_ops import exports

SQRT2 = math.sqrt(2.0)


def _optional_bias(n: OpNode) -> list[str]:
    return [] if n.attrs.no_bias else [n.inputs[2]]


# ---- convolution and fully connected ----------------------------------------------------


@exports("Convolution")
def convolution(g: GraphBuilder, n: OpNode) -> None:
    window, groups = nn._conv_window(n.op, n.attrs)
    g.add("Conv", n.inputs[:2] + _optional_bias(n), [n.out],
          kernel_shape=list(window.kernel), strides=list(window.stride),
          dilations=list(window.dilate), pads=list(window.pad) * 2, group=groups)


@exports("Deconvolution")
def deconvolution(g: GraphBuilder, n: OpNode) -> None:
    window, groups, adj = nn._deconv_window(n.op, n.attrs)
    pads, adjs = nn._deconv_padding(n.op, n.attrs, window, adj, n.shape[2:])
    g.add("ConvTranspose", n.inputs[:2] + _optional_bias(n), [n.out],
          kernel_shape=list(window.kernel), strides=list(window.stride),
          dilations=list(window.dilate), pads=list(pads) * 2, output_padding=list(adjs),
          group=groups)


@exports("FullyConnected")
def fully_connected(g: GraphBuilder, n: OpNode) -> None:
    x, weight = n.inputs[:2]
    bias = None
    if not n.attrs.no_bias:
        bias = n.inputs[2]
        if len(n.input_shapes[2]) != 1:  # MXNet also takes a (num_hidden, 1) bias
            bias = g.reshape(bias, [n.attrs.num_hidden])
    if n.attrs.flatten:
        if len(n.shape) != 2:
            x = g.add1("Flatten", [x], axis=1)
        g.add("Gemm", [x, weight] + ([bias] if bias else []), [n.out], transB=1)
        return
    product = g.add1("MatMul", [x, g.transpose(weight, [1, 0])],
                     None if bias else n.out)
    if bias:
        g.add("Add", [product, bias], [n.out])


# ---- activations -------------------------------------------------------------------------


def _softplus_neg(g: GraphBuilder, x: str, out: str) -> None:
    """log(sigmoid(x)) = -softplus(-x)."""
    g.add("Neg", [g.add1("Softplus", [g.add1("Neg", [x])])], [out])


def _mish(g: GraphBuilder, x: str, out: str) -> None:
    if g.opset >= 18:
        g.add("Mish", [x], [out])
    else:
        g.add("Mul", [x, g.add1("Tanh", [g.add1("Softplus", [x])])], [out])


_SIMPLE_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh",
                       "softrelu": "Softplus", "softsign": "Softsign"}


@exports("Activation")
def activation(g: GraphBuilder, n: OpNode) -> None:
    kind = n.attrs.act_type
    if kind in _SIMPLE_ACTIVATIONS:
        g.add(_SIMPLE_ACTIVATIONS[kind], [n.inputs[0]], [n.out])
    elif kind == "log_sigmoid":
        _softplus_neg(g, n.inputs[0], n.out)
    else:
        _mish(g, n.inputs[0], n.out)


def gelu(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    """x * (1 + erf(x / sqrt 2)) / 2, MXNet's exact GELU."""
    if g.opset >= 20:
        g.add("Gelu", [x], [out], approximate="none")
        return
    erf = g.add1("Erf", [g.add1("Div", [x, g.scalar(SQRT2, dtype)])])
    half = g.add1("Mul", [x, g.add1("Add", [erf, g.scalar(1.0, dtype)])])
    g.add("Mul", [half, g.scalar(0.5, dtype)], [out])


@exports("LeakyReLU")
def leaky_relu(g: GraphBuilder, n: OpNode) -> None:
    kind, attrs, x = n.attrs.act_type, n.attrs, n.inputs[0]
    if kind == "leaky":
        g.add("LeakyRelu", [x], [n.out], alpha=attrs.slope)
    elif kind == "rrelu":
        g.add("LeakyRelu", [x], [n.out], alpha=(attrs.lower_bound + attrs.upper_bound) / 2)
    elif kind == "elu":
        g.add("Elu", [x], [n.out], alpha=attrs.slope)
    elif kind == "selu":
        g.add("Selu", [x], [n.out], alpha=nn._SELU_ALPHA, gamma=nn._SELU_LAMBDA)
    elif kind == "gelu":
        gelu(g, x, n.dtype, n.out)
    else:  # prelu: gamma aligned with the data as MXNet broadcasts it
        aligned = nn._prelu_gamma(n.op, n.input_shapes[1], n.shape)
        slope = g.to_shape(n.inputs[1], n.input_shapes[1], aligned)
        g.add("PRelu", [x, slope], [n.out])


# ---- pooling -----------------------------------------------------------------------------


def _pool_pads(n: OpNode) -> tuple[nn._Window, list[int], list[int]]:
    """(window, pads, tails): MXNet's output extents written as ONNX explicit
    padding: pad before, pad + tail after, where tail makes floor-mode
    pooling produce MXNet's (full / same convention) window count."""
    spatial = n.shape[2:]
    window = nn._pool_window(n.op, n.attrs, spatial)
    out = n.output_shapes[0][2:]
    pads, tails = [], []
    for axis, size in enumerate(spatial):
        kernel, stride, pad = window.kernel[axis], window.stride[axis], window.pad[axis]
        last_start = (out[axis] - 1) * stride - pad
        if last_start >= size:
            raise ExportUnsupported(
                f"a pooling window lies wholly outside the data along spatial axis {axis}")
        pads.append(pad)
        tails.append(max(0, last_start + kernel - (size + pad)))
    return window, pads, tails


@exports("Pooling")
def pooling(g: GraphBuilder, n: OpNode) -> None:
    attrs, x = n.attrs, n.inputs[0]
    kind = attrs.pool_type
    if kind == "lp" and attrs.p_value != 2:
        raise ExportUnsupported(f"lp pooling with p_value={attrs.p_value}: MXNet sums signed "
                                "powers, ONNX LpPool absolute values (only p_value=2 agrees)")
    if attrs.global_pool:
        _global_pooling(g, n)
        return
    window, pads, tails = _pool_pads(n)
    geometry = {"kernel_shape": list(window.kernel), "strides": list(window.stride)}
    ends = [pad + tail for pad, tail in zip(pads, tails)]
    if kind == "max":
        g.add("MaxPool", [x], [n.out], pads=pads + ends, **geometry)
    elif kind == "lp":
        g.add("LpPool", [x], [n.out], pads=pads + ends, p=2, **geometry)
    elif kind == "avg" and attrs.count_include_pad is False:
        g.add("AveragePool", [x], [n.out], pads=pads + ends, count_include_pad=0, **geometry)
    elif kind == "avg" and not any(tails):
        g.add("AveragePool", [x], [n.out], pads=pads + ends, count_include_pad=1, **geometry)
    elif kind == "avg":
        # MXNet counts the padding but not what lies past it: pad with zeros
        # explicitly, then average over what each window covers.
        padded = _zero_pad(g, x, n.dtype, pads, pads)
        g.add("AveragePool", [padded], [n.out], pads=[0] * len(pads) + tails,
              count_include_pad=0, **geometry)
    else:  # sum: the average over zero-padded windows times the kernel size
        padded = _zero_pad(g, x, n.dtype, pads, ends)
        mean = g.add("AveragePool", [padded], 1, **geometry)[0]
        g.add("Mul", [mean, g.scalar(math.prod(window.kernel), n.dtype)], [n.out])


def _zero_pad(g: GraphBuilder, x: str, dtype: np.dtype, before: list[int],
              after: list[int]) -> str:
    if not any(before) and not any(after):
        return x
    pads = g.int64s([0, 0, *before, 0, 0, *after], "pads")
    return g.add1("Pad", [x, pads, g.scalar(0.0, dtype)], mode="constant")


def _global_pooling(g: GraphBuilder, n: OpNode) -> None:
    kind, x = n.attrs.pool_type, n.inputs[0]
    if kind == "max":
        g.add("GlobalMaxPool", [x], [n.out])
    elif kind == "avg":
        g.add("GlobalAveragePool", [x], [n.out])
    elif kind == "lp":
        g.add("GlobalLpPool", [x], [n.out], p=2)
    else:
        g.reduce("ReduceSum", x, list(range(2, len(n.shape))), True, n.out)


# ---- normalization -----------------------------------------------------------------------


def _along(g: GraphBuilder, vector: str, axis: int, ndim: int) -> str:
    """A (C,) vector reshaped to broadcast along axis of ndim-D data."""
    if axis == ndim - 1:
        return vector
    shape = [1] * ndim
    shape[axis] = -1
    return g.reshape(vector, shape)


@exports("BatchNorm")
def batch_norm(g: GraphBuilder, n: OpNode) -> None:
    attrs = n.attrs
    data, gamma, beta, mean, var = n.inputs
    ndim = len(n.shape)
    axis = normalize_axis(n.op, attrs.axis, ndim)
    param_dtype = n.input_dtypes[1]
    if attrs.fix_gamma:
        gamma = g.const(np.ones(n.input_shapes[1], dtype=param_dtype), "ones")
    if axis == 1 and ndim >= 2 and param_dtype == n.dtype:
        g.add("BatchNormalization", [data, gamma, beta, mean, var], [n.out],
              epsilon=attrs.eps)
        invstd = None
    else:
        invstd = g.add1("Reciprocal", [g.add1("Sqrt", [
            g.add1("Add", [var, g.scalar(attrs.eps, param_dtype)])])])
        scale = g.add1("Mul", [invstd, gamma])
        shift = g.add1("Sub", [beta, g.add1("Mul", [mean, scale])])
        if param_dtype != n.dtype:
            scale, shift = g.cast(scale, n.dtype), g.cast(shift, n.dtype)
        scaled = g.add1("Mul", [data, _along(g, scale, axis, ndim)])
        g.add("Add", [scaled, _along(g, shift, axis, ndim)], [n.out])
    if attrs.output_mean_var:
        g.identity(mean, n.outputs[1])
        if invstd is None:
            g.add("Reciprocal", [g.add1("Sqrt", [
                g.add1("Add", [var, g.scalar(attrs.eps, param_dtype)])])], [n.outputs[2]])
        else:
            g.identity(invstd, n.outputs[2])


@exports("LayerNorm")
def layer_norm(g: GraphBuilder, n: OpNode) -> None:
    attrs = n.attrs
    data, gamma, beta = n.inputs
    ndim = len(n.shape)
    axis = normalize_axis(n.op, attrs.axis, ndim)
    if axis == ndim - 1 and g.opset >= 17 and not attrs.output_mean_var:
        g.add("LayerNormalization", [data, gamma, beta], [n.out], axis=-1, epsilon=attrs.eps)
        return
    mean = g.reduce("ReduceMean", data, [axis], True)
    centered = g.add1("Sub", [data, mean])
    var = g.reduce("ReduceMean", g.add1("Mul", [centered, centered]), [axis], True)
    std = g.add1("Sqrt", [g.add1("Add", [var, g.scalar(attrs.eps, n.dtype)])])
    normed = g.add1("Mul", [g.add1("Div", [centered, std]), _along(g, gamma, axis, ndim)])
    g.add("Add", [normed, _along(g, beta, axis, ndim)], [n.out])
    if attrs.output_mean_var:
        g.identity(mean, n.outputs[1])
        g.identity(std, n.outputs[2])


@exports("InstanceNorm")
def instance_norm(g: GraphBuilder, n: OpNode) -> None:
    g.add("InstanceNormalization", n.inputs, [n.out], epsilon=n.attrs.eps)


# ---- softmax family ----------------------------------------------------------------------


def _softmax(g: GraphBuilder, n: OpNode, op_type: str) -> None:
    attrs, x = n.attrs, n.inputs[0]
    if attrs.temperature is not None and attrs.temperature != 1.0:
        x = g.add1("Div", [x, g.scalar(attrs.temperature, n.dtype)])
    out_dtype = n.output_dtypes[0]
    if out_dtype != n.dtype:
        g.cast(g.add1(op_type, [x], axis=attrs.axis), out_dtype, n.out)
    else:
        g.add(op_type, [x], [n.out], axis=attrs.axis)


@exports("softmax")
def softmax(g: GraphBuilder, n: OpNode) -> None:
    _softmax(g, n, "Softmax")


@exports("log_softmax")
def log_softmax(g: GraphBuilder, n: OpNode) -> None:
    _softmax(g, n, "LogSoftmax")


@exports("SoftmaxActivation")
def softmax_activation(g: GraphBuilder, n: OpNode) -> None:
    g.add("Softmax", [n.inputs[0]], [n.out], axis=1 if n.attrs.mode == "channel" else -1)


@exports("SoftmaxOutput")
def softmax_output(g: GraphBuilder, n: OpNode) -> None:
    """The forward pass only: the label input is not read."""
    attrs, x, shape = n.attrs, n.inputs[0], n.shape
    if attrs.multi_output:
        g.add("Softmax", [x], [n.out], axis=1)
    elif attrs.preserve_shape or len(shape) <= 2:
        g.add("Softmax", [x], [n.out], axis=-1)
    else:
        flat = g.add1("Flatten", [x], axis=1)
        g.reshape(g.add1("Softmax", [flat], axis=1), shape, n.out)


# ---- the rest ----------------------------------------------------------------------------


@exports("Dropout")
def dropout(g: GraphBuilder, n: OpNode) -> None:
    g.identity(n.inputs[0], n.out)


@exports("Flatten")
def flatten(g: GraphBuilder, n: OpNode) -> None:
    g.add("Flatten", [n.inputs[0]], [n.out], axis=1)


@exports("Embedding")
def embedding(g: GraphBuilder, n: OpNode) -> None:
    """weight[clip(trunc(data), 0, input_dim - 1)]: clipping to integer bounds
    commutes with truncation, so Clip runs in the data's dtype first."""
    data, weight = n.inputs
    low, high = g.scalar(0, n.dtype), g.scalar(n.attrs.input_dim - 1, n.dtype)
    rows = g.cast(g.add1("Clip", [data, low, high]), np.int64)
    g.add("Gather", [weight, rows], [n.out], axis=0)


@exports("UpSampling")
def upsampling(g: GraphBuilder, n: OpNode) -> None:
    if n.attrs.sample_type != "nearest":
        raise ExportUnsupported("only nearest upsampling is exported")
    height = n.output_shapes[0][2]
    single = n.attrs.num_args == 1
    scaled = []
    for x, shape in zip(n.inputs, n.input_shapes):
        factor = float(height // shape[2])
        scales = g.const(np.array([1, 1, factor, factor], dtype=np.float32), "scales")
        scaled.append(g.add1("Resize", [x, "", scales], n.out if single else None,
                             mode="nearest", coordinate_transformation_mode="asymmetric",
                             nearest_mode="floor"))
    if len(scaled) == 1:
        return
    if n.attrs.multi_input_mode == "sum":
        g.add("Sum", scaled, [n.out])
    else:
        g.add("Concat", scaled, [n.out], axis=1)


@exports("Pad")
def pad(g: GraphBuilder, n: OpNode) -> None:
    widths = n.attrs.pad_width
    pads = g.int64s(list(widths[0::2]) + list(widths[1::2]), "pads")
    inputs = [n.inputs[0], pads]
    if n.attrs.mode == "constant":
        inputs.append(g.scalar(n.attrs.constant_value, n.dtype))
    g.add("Pad", inputs, [n.out], mode=n.attrs.mode)
