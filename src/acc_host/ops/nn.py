"""Neural-network operators: convolution, pooling, normalization,
activations, fully connected, softmax and friends.

Each operator is one ``register(OpDef(...))`` with its shape inference and a
numpy implementation that follows MXNet 1.9 exactly (accumulating in float64
where that keeps the result faithful, and returning the input dtype).
Inference only: Dropout is the identity, BatchNorm uses the moving
statistics, RReLU uses its mean slope.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import OperatorError, ShapeError
from .params import (
    REQUIRED,
    Attrs,
    Param,
    choice,
    optional,
    parse_bool,
    parse_count,
    parse_dtype,
    parse_float,
    parse_int,
    parse_tuple,
)
from .registry import OpDef, Shape, normalize_axis, register, require_known, same_shape

Shapes = list[Shape | None]
Dtypes = list[np.dtype | None]
ShapeResult = tuple[Sequence[Shape | None], Sequence[Shape]]
TypeResult = tuple[list[np.dtype], list[np.dtype]]

# ---- shared helpers ----------------------------------------------------------------

# Channel-first layouts by number of spatial dimensions; the channel-last ones
# MXNet also accepts are parsed but refused (see _check_layout).
_NC_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_LAYOUTS = ("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC")
_CUDNN_TUNE = ("fastest", "limited_workspace", "off")


def _f64(array: np.ndarray) -> np.ndarray:
    return np.asarray(array, dtype=np.float64)


def _like(value: np.ndarray, like: np.ndarray) -> np.ndarray:
    """value as a new C-contiguous array of like's dtype."""
    return np.array(value, dtype=like.dtype, order="C")


def _assign(op: str, shapes: Shapes, index: int, name: str, expected: Shape) -> None:
    """Fills in shapes[index], or checks a shape already given against MXNet's."""
    given = shapes[index]
    if given is not None and tuple(given) != tuple(expected):
        raise ShapeError(f"{op}: {name} has shape {tuple(given)}, expected {tuple(expected)}")
    shapes[index] = tuple(expected)


def _expect_ndim(op: str, shape: Shape, allowed: Sequence[int], what: str = "data") -> None:
    if len(shape) not in allowed:
        wanted = " or ".join(f"{n}-D" for n in allowed)
        raise ShapeError(f"{op}: {what} must be {wanted}, got shape {shape}")


def _uniform_type(op: str, outputs: int | Callable[[Attrs], int] = 1
                  ) -> Callable[[Attrs, Dtypes], TypeResult]:
    """MXNet's usual dtype rule: every input and output has the data's dtype
    (the first known one), and a different dtype given for another input is
    an error."""
    def infer(attrs: Attrs, dtypes: Dtypes) -> TypeResult:
        known = [np.dtype(dtype) for dtype in dtypes if dtype is not None]
        dtype = known[0] if known else np.dtype(np.float32)
        if any(other != dtype for other in known):
            raise ShapeError(f"{op}: inputs must share one dtype, got "
                             f"{', '.join(str(d) for d in known)}")
        count = outputs(attrs) if callable(outputs) else outputs
        return [dtype] * len(dtypes), [dtype] * count
    return infer


def _visible(attrs: Attrs) -> int:
    """Visible outputs of the normalization operators: 3 with output_mean_var."""
    return 3 if attrs.output_mean_var else 1


def _lowest(dtype: np.dtype) -> float:
    """MXNet's MinValue<DType>: what max pooling yields over an empty window."""
    if np.issubdtype(dtype, np.floating):
        return float(np.finfo(dtype).min)
    return float(np.iinfo(dtype).min)


def _positive(op: str, name: str, value: int) -> None:
    if value < 1:
        raise OperatorError(f"{op}: {name}={value} must be at least 1")


# ---- sliding windows (Convolution, Deconvolution) --------------------------------------


@dataclass(frozen=True)
class _Window:
    """Kernel geometry with MXNet's defaults filled in."""

    kernel: Shape
    stride: Shape
    dilate: Shape
    pad: Shape

    @property
    def ndim(self) -> int:
        return len(self.kernel)

    def span(self, axis: int) -> int:
        """Extent of the dilated kernel along a spatial axis."""
        return self.dilate[axis] * (self.kernel[axis] - 1) + 1


def _spatial_attr(op: str, attrs: Attrs, name: str, ndim: int, fill: int,
                  minimum: int) -> Shape:
    """stride/dilate/pad/adj: MXNet fills an empty tuple with `fill` per
    spatial axis; otherwise it must match the kernel's length."""
    value = attrs[name]
    if not value:
        return (fill,) * ndim
    if len(value) != ndim:
        raise OperatorError(f"{op}: {name}={value} must have {ndim} entries, like kernel")
    if any(entry is None or entry < minimum for entry in value):
        raise OperatorError(f"{op}: every entry of {name}={value} must be at least {minimum}")
    return tuple(value)


def _check_layout(op: str, layout: str | None, ndim: int) -> None:
    if layout is None or layout == _NC_LAYOUTS.get(ndim):
        return
    if layout in _NC_LAYOUTS.values():
        raise OperatorError(f"{op}: layout {layout} does not fit a {ndim}-D kernel "
                            f"(expected {_NC_LAYOUTS[ndim]})")
    raise OperatorError(f"{op}: layout {layout} is not supported; only channel-first "
                        "layouts (NCW, NCHW, NCDHW) are")


def _kernel_window(op: str, attrs: Attrs, kernel: Shape) -> _Window:
    if not 1 <= len(kernel) <= 3:
        raise OperatorError(f"{op}: kernel={kernel}: only 1-D, 2-D and 3-D kernels are supported")
    if any(entry is None or entry < 1 for entry in kernel):
        raise OperatorError(f"{op}: every entry of kernel={kernel} must be at least 1")
    ndim = len(kernel)
    # Pooling has no dilate attribute: its windows are dense.
    dilate = (_spatial_attr(op, attrs, "dilate", ndim, 1, 1) if "dilate" in attrs
              else (1,) * ndim)
    return _Window(tuple(kernel), _spatial_attr(op, attrs, "stride", ndim, 1, 1), dilate,
                   _spatial_attr(op, attrs, "pad", ndim, 0, 0))


def _conv_window(op: str, attrs: Attrs) -> tuple[_Window, int]:
    """(window, num_group) after checking the attributes that do not depend
    on the data."""
    window = _kernel_window(op, attrs, attrs.kernel)
    _check_layout(op, attrs.layout, window.ndim)
    _positive(op, "num_filter", attrs.num_filter)
    _positive(op, "num_group", attrs.num_group)
    if attrs.num_filter % attrs.num_group:
        raise OperatorError(f"{op}: num_filter={attrs.num_filter} is not divisible by "
                            f"num_group={attrs.num_group}")
    return window, attrs.num_group


def _conv_arguments(attrs: Attrs) -> tuple[str, ...]:
    return ("data", "weight") if attrs.no_bias else ("data", "weight", "bias")


def _conv_params(kernel_doc: str, workspace: int, no_bias: bool) -> tuple[Param, ...]:
    return (
        Param("kernel", parse_tuple, REQUIRED, kernel_doc),
        Param("stride", parse_tuple, (), "Stride per spatial axis; () means 1."),
        Param("dilate", parse_tuple, (), "Dilation per spatial axis; () means 1."),
        Param("pad", parse_tuple, (), "Zero padding per spatial axis; () means 0."),
        Param("num_filter", parse_int, REQUIRED, "Number of output channels."),
        Param("num_group", parse_int, 1, "Number of groups."),
        Param("workspace", parse_int, workspace, "Ignored (MXNet's scratch space in MB)."),
        Param("no_bias", parse_bool, no_bias, "Whether the bias argument is left out."),
        Param("cudnn_tune", optional(choice(*_CUDNN_TUNE)), None, "Ignored."),
        Param("cudnn_off", parse_bool, False, "Ignored."),
        Param("layout", optional(choice(*_LAYOUTS)), None,
              "None or the channel-first layout of the kernel's rank."),
    )


def _grouped_data_shape(op: str, shapes: Shapes, window: _Window, groups: int) -> Shape:
    data = require_known(op, shapes, 0, "data")
    _expect_ndim(op, data, (window.ndim + 2,))
    if data[1] % groups:
        raise ShapeError(f"{op}: {data[1]} input channels are not divisible by "
                         f"num_group={groups}")
    return data


def _bias_shape(op: str, attrs: Attrs, shapes: Shapes) -> None:
    if not attrs.no_bias:
        _assign(op, shapes, 2, "bias", (attrs.num_filter,))


def _add_bias(attrs: Attrs, result: np.ndarray, inputs: list[np.ndarray]) -> np.ndarray:
    if attrs.no_bias:
        return result
    bias = inputs[2].astype(result.dtype, copy=False)
    return result + bias.reshape((1, -1) + (1,) * (result.ndim - 2))


# ---- Convolution ---------------------------------------------------------------------


def _convolution_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Convolution"
    window, groups = _conv_window(op, attrs)
    data = _grouped_data_shape(op, shapes, window, groups)
    filled = list(shapes)
    _assign(op, filled, 1, "weight", (attrs.num_filter, data[1] // groups, *window.kernel))
    _bias_shape(op, attrs, filled)
    out = []
    for axis, size in enumerate(data[2:]):
        padded = size + 2 * window.pad[axis]
        if window.span(axis) > padded:
            raise ShapeError(f"{op}: the dilated kernel ({window.span(axis)}) exceeds the "
                             f"input ({size}, padded to {padded}) along spatial axis {axis}")
        out.append((padded - window.span(axis)) // window.stride[axis] + 1)
    return filled, [(data[0], attrs.num_filter, *out)]


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float64 stays float64; everything else computes in float32, as
    MXNet's CPU kernels do (float16 is widened, not computed natively)."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _grouped_correlation(padded: np.ndarray, weight: np.ndarray, window: _Window,
                         groups: int) -> np.ndarray:
    """Cross-correlation of already padded data (N, C, *x) with weight
    (F, C/groups, *k): MXNet's convolution without bias.

    Lowered to one batched matrix product per call (im2col): the windows of
    each group become rows of a (N * positions, C/groups * taps) matrix, so
    BLAS does the multiply-adds. Depthwise convolutions (one channel per
    group) sum over the taps directly instead, which avoids thousands of
    one-column products."""
    ndim = window.ndim
    spans = [window.span(axis) for axis in range(ndim)]
    views = sliding_window_view(padded, spans, axis=tuple(range(2, 2 + ndim)))
    # Keep every stride-th window position and every dilate-th tap inside it.
    views = views[(slice(None), slice(None))
                  + tuple(slice(None, None, s) for s in window.stride)
                  + tuple(slice(None, None, d) for d in window.dilate)]
    batch, channels = padded.shape[:2]
    filters = weight.shape[0]
    out_shape, kernel = views.shape[2:2 + ndim], views.shape[2 + ndim:]
    if groups == channels == filters:
        result = np.zeros((batch, channels, *out_shape), padded.dtype)
        for tap in np.ndindex(*kernel):
            scale = weight[(slice(None), 0) + tap].reshape((1, channels) + (1,) * ndim)
            result += views[(Ellipsis,) + tap] * scale
        return result
    per_group, filters_per_group = channels // groups, filters // groups
    taps = int(np.prod(kernel))
    grouped = views.reshape(batch, groups, per_group, *out_shape, *kernel)
    to_rows = (1, 0, *range(3, 3 + ndim), 2, *range(3 + ndim, 3 + 2 * ndim))
    rows = grouped.transpose(to_rows).reshape(groups, -1, per_group * taps)
    # contiguous: numpy's stacked matmul hands only contiguous-enough operands to BLAS
    # (a transposed view takes its element-by-element loop, ~100x slower)
    columns = np.ascontiguousarray(
        weight.reshape(groups, filters_per_group, per_group * taps).transpose(0, 2, 1))
    product = np.matmul(rows, columns).reshape(groups, batch, *out_shape, filters_per_group)
    to_output = (1, 0, 2 + ndim, *range(2, 2 + ndim))
    return product.transpose(to_output).reshape(batch, filters, *out_shape)


def _convolution(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _convolution_shape(attrs, [array.shape for array in inputs])
    window, groups = _conv_window("Convolution", attrs)
    data = inputs[0]
    dtype = _compute_dtype(data.dtype)
    padded = np.pad(data.astype(dtype, copy=False),
                    [(0, 0), (0, 0)] + [(p, p) for p in window.pad])
    result = _grouped_correlation(padded, inputs[1].astype(dtype, copy=False), window, groups)
    return [_like(_add_bias(attrs, result, inputs), data)]


register(OpDef(
    name="Convolution",
    params=_conv_params("Kernel size: (w,), (h, w) or (d, h, w).", 1024, False),
    arguments=_conv_arguments,
    compute=_convolution,
    infer_shape=_convolution_shape,
    infer_type=_uniform_type("Convolution"),
    doc="N-D grouped, strided, dilated and padded convolution (cross-correlation) "
        "of (N, C, *x) data with (num_filter, C/num_group, *kernel) weights.",
))


# ---- Deconvolution -------------------------------------------------------------------


def _deconv_window(op: str, attrs: Attrs) -> tuple[_Window, int, Shape]:
    """(window, num_group, adj)."""
    window, groups = _conv_window(op, attrs)
    adj = _spatial_attr(op, attrs, "adj", window.ndim, 0, 0)
    if window.ndim == 3 and any(d != 1 for d in window.dilate):
        raise OperatorError(f"{op}: dilate is not supported for 3-D deconvolution")
    return window, groups, adj


def _deconv_padding(op: str, attrs: Attrs, window: _Window, adj: Shape,
                    spatial: Shape) -> tuple[Shape, Shape]:
    """(pad, adj) per spatial axis. A target_shape with any nonzero entry
    overrides pad and adj: MXNet pads symmetrically by half the surplus and
    puts an odd remainder into adj."""
    target = attrs.target_shape
    if not any(target):
        pads, adjs = window.pad, adj
    else:
        if len(target) != window.ndim:
            raise OperatorError(f"{op}: target_shape={target} must have {window.ndim} entries")
        pad_list, adj_list = [], []
        for axis, size in enumerate(spatial):
            full = window.stride[axis] * (size - 1) + window.span(axis)
            if full < target[axis]:
                raise ShapeError(f"{op}: target_shape={target} is too big: at most {full} "
                                 f"along spatial axis {axis}")
            surplus = full - target[axis]
            pad_list.append((surplus + 1) // 2)
            adj_list.append(surplus % 2)
        pads, adjs = tuple(pad_list), tuple(adj_list)
    for axis, extra in enumerate(adjs):
        if extra >= window.stride[axis]:
            raise OperatorError(f"{op}: adj {extra} must be smaller than stride "
                                f"{window.stride[axis]} along spatial axis {axis}")
    return pads, adjs


def _deconvolution_sizes(op: str, attrs: Attrs, data: Shape) -> tuple[_Window, Shape, Shape]:
    """(window, pad, output spatial size)."""
    window, _, adj = _deconv_window(op, attrs)
    pads, adjs = _deconv_padding(op, attrs, window, adj, data[2:])
    out = []
    for axis, size in enumerate(data[2:]):
        length = (window.stride[axis] * (size - 1) + window.span(axis) - 2 * pads[axis]
                  + adjs[axis])
        if length < 1:
            raise ShapeError(f"{op}: the output would have {length} elements along spatial "
                             f"axis {axis} (pad {pads[axis]} is too large)")
        out.append(length)
    return window, pads, tuple(out)


def _deconvolution_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Deconvolution"
    window, groups, _ = _deconv_window(op, attrs)
    data = _grouped_data_shape(op, shapes, window, groups)
    filled = list(shapes)
    _assign(op, filled, 1, "weight",
            (data[1], attrs.num_filter // groups, *window.kernel))
    _bias_shape(op, attrs, filled)
    _, _, out = _deconvolution_sizes(op, attrs, data)
    return filled, [(data[0], attrs.num_filter, *out)]


def _transposed_correlation(data: np.ndarray, weight: np.ndarray, window: _Window,
                            groups: int) -> np.ndarray:
    """The unpadded transposed convolution of data (N, C, *x) with weight
    (C, F/groups, *k): every input element scatters weight * value onto
    output positions i * stride + k * dilate."""
    batch, channels, *spatial = data.shape
    per_group = weight.shape[1]
    full = [s * (size - 1) + window.span(axis)
            for axis, (s, size) in enumerate(zip(window.stride, spatial))]
    result = np.zeros((batch, groups, per_group, *full))
    grouped = data.reshape(batch, groups, channels // groups, *spatial)
    taps = weight.reshape(groups, channels // groups, per_group, *window.kernel)
    for offset in np.ndindex(*window.kernel):
        contribution = np.einsum("ngc...,gcf->ngf...", grouped, taps[(Ellipsis,) + offset])
        region = tuple(slice(k * d, k * d + s * (size - 1) + 1, s) for k, d, s, size
                       in zip(offset, window.dilate, window.stride, spatial))
        result[(slice(None),) * 3 + region] += contribution
    return result.reshape(batch, groups * per_group, *full)


def _crop(full: np.ndarray, pads: Shape, out: Shape) -> np.ndarray:
    """Output position o is full position o + pad; positions past the end of
    full (made by adj) stay zero."""
    result = np.zeros(full.shape[:2] + tuple(out))
    source, target = [], []
    for pad, length, available in zip(pads, out, full.shape[2:]):
        stop = min(pad + length, available)
        source.append(slice(pad, stop))
        target.append(slice(0, stop - pad))
    result[(slice(None), slice(None)) + tuple(target)] = full[(slice(None), slice(None))
                                                              + tuple(source)]
    return result


def _deconvolution(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    op = "Deconvolution"
    _deconvolution_shape(attrs, [array.shape for array in inputs])
    data = inputs[0]
    window, pads, out = _deconvolution_sizes(op, attrs, data.shape)
    full = _transposed_correlation(_f64(data), _f64(inputs[1]), window, attrs.num_group)
    return [_like(_add_bias(attrs, _crop(full, pads, out), inputs), data)]


register(OpDef(
    name="Deconvolution",
    params=(*_conv_params("Kernel size: (w,), (h, w) or (d, h, w).", 512, True),
            Param("adj", parse_tuple, (), "Extra output size at the end of each spatial axis "
                                          "(ignored when target_shape is set)."),
            Param("target_shape", parse_tuple, (), "Output spatial size; overrides pad "
                                                   "and adj.")),
    arguments=_conv_arguments,
    compute=_deconvolution,
    infer_shape=_deconvolution_shape,
    infer_type=_uniform_type("Deconvolution"),
    doc="Transposed convolution: the gradient of Convolution with respect to its data, "
        "with (C, num_filter/num_group, *kernel) weights. no_bias defaults to True.",
))


# ---- FullyConnected ------------------------------------------------------------------


def _fully_connected_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "FullyConnected"
    _positive(op, "num_hidden", attrs.num_hidden)
    data = require_known(op, shapes, 0, "data")
    if not data:
        raise ShapeError(f"{op}: data must have at least one dimension")
    hidden = attrs.num_hidden
    in_dim = math.prod(data[1:]) if attrs.flatten else data[-1]
    filled = list(shapes)
    _assign(op, filled, 1, "weight", (hidden, in_dim))
    # MXNet accepts a bias of shape (num_hidden,) or (num_hidden, 1).
    if not attrs.no_bias and filled[2] != (hidden, 1):
        _assign(op, filled, 2, "bias", (hidden,))
    out = (data[0], hidden) if attrs.flatten else (*data[:-1], hidden)
    return filled, [out]


def _fully_connected(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _fully_connected_shape(attrs, [array.shape for array in inputs])
    data = inputs[0]
    x = _f64(data)
    if attrs.flatten:
        x = x.reshape(x.shape[0], -1)
    result = x @ _f64(inputs[1]).T
    if not attrs.no_bias:
        result = result + _f64(inputs[2]).reshape(-1)
    return [_like(result, data)]


register(OpDef(
    name="FullyConnected",
    params=(Param("num_hidden", parse_int, REQUIRED, "Number of output units."),
            Param("no_bias", parse_bool, False, "Whether the bias argument is left out."),
            Param("flatten", parse_bool, True,
                  "Flatten all but the first axis; otherwise apply to the last axis.")),
    arguments=_conv_arguments,
    compute=_fully_connected,
    infer_shape=_fully_connected_shape,
    infer_type=_uniform_type("FullyConnected"),
    doc="data @ weight.T + bias with (num_hidden, in_dim) weights.",
))


# ---- Activation ----------------------------------------------------------------------


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softrelu": _softplus,
    "softsign": lambda x: x / (1 + np.abs(x)),
    # MXNet 1.9 documents these two as well: log(sigmoid(x)) and
    # x * tanh(softplus(x)).
    "log_sigmoid": lambda x: -_softplus(-x),
    "mish": lambda x: x * np.tanh(_softplus(x)),
}


def _activation(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    return [_ACTIVATIONS[attrs.act_type](x.astype(_compute_dtype(x.dtype))).astype(x.dtype)]


register(OpDef(
    name="Activation",
    params=(Param("act_type", choice(*_ACTIVATIONS)),),
    compute=_activation,
    infer_shape=same_shape("Activation"),
    inplace=((0, 0),),
    doc="Element-wise activation: relu, sigmoid, tanh, softrelu, softsign, log_sigmoid, mish.",
))


# ---- LeakyReLU -----------------------------------------------------------------------

# SELU's constants as MXNet spells them.
_SELU_LAMBDA = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717
# numpy has no erf; math.erf is exact and a reference may be slow.
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _leaky(x: np.ndarray, slope: float | np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, x * slope)


def _elu(x: np.ndarray, slope: float) -> np.ndarray:
    return np.where(x > 0, x, slope * np.expm1(np.minimum(x, 0)))


def _prelu_gamma(op: str, gamma: Shape, data: Shape) -> Shape:
    """gamma's shape aligned with data for broadcasting. MXNet matches
    gamma's trailing axes with data's axes up to axis 1 (the channels):
    a (C,) or (1,) gamma scales each channel."""
    aligned = [1] * len(data)
    position = len(gamma) - 1
    for axis in range(min(1, len(data) - 1), -1, -1):
        if position >= 0 and gamma[position] in (data[axis], 1):
            aligned[axis] = gamma[position]
            position -= 1
    if position != -1:
        raise ShapeError(f"{op}: gamma of shape {gamma} cannot broadcast to data of shape {data}")
    return tuple(aligned)


def _leaky_relu_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "LeakyReLU"
    data = require_known(op, shapes, 0, "data")
    filled = list(shapes)
    if attrs.act_type == "prelu":
        if len(data) < 2:
            raise ShapeError(f"{op}: prelu needs data with a channel axis, got shape {data}")
        gamma = filled[1] if filled[1] is not None else (data[1],)
        filled[1] = gamma
        _prelu_gamma(op, tuple(gamma), data)
    return filled, [data]


def _leaky_relu(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _leaky_relu_shape(attrs, [array.shape for array in inputs])
    data = inputs[0]
    x = _f64(data)
    kind = attrs.act_type
    if kind == "leaky":
        result = _leaky(x, attrs.slope)
    elif kind == "prelu":
        gamma = _f64(inputs[1])
        result = _leaky(x, gamma.reshape(_prelu_gamma("LeakyReLU", gamma.shape, x.shape)))
    elif kind == "rrelu":
        # At inference the random slope is fixed to the middle of its range.
        result = _leaky(x, (attrs.lower_bound + attrs.upper_bound) / 2)
    elif kind == "elu":
        result = _elu(x, attrs.slope)
    elif kind == "selu":
        result = _SELU_LAMBDA * _elu(x, _SELU_ALPHA)
    else:  # gelu, in MXNet 1.9's exact erf form
        result = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    return [_like(result, data)]


register(OpDef(
    name="LeakyReLU",
    params=(Param("act_type", choice("elu", "gelu", "leaky", "prelu", "rrelu", "selu"), "leaky",
                  "leaky: x>0 ? x : slope*x; prelu: learnt per-channel slope gamma; rrelu: "
                  "slope (lower_bound+upper_bound)/2; elu; selu; gelu."),
            Param("slope", parse_float, 0.25, "Slope for leaky and elu."),
            Param("lower_bound", parse_float, 0.125, "Lower bound of rrelu's slope."),
            Param("upper_bound", parse_float, 0.334, "Upper bound of rrelu's slope.")),
    arguments=lambda attrs: ("data", "gamma") if attrs.act_type == "prelu" else ("data",),
    num_outputs=lambda attrs: 2 if attrs.act_type == "rrelu" else 1,  # rrelu's hidden mask
    compute=_leaky_relu,
    infer_shape=_leaky_relu_shape,
    infer_type=_uniform_type("LeakyReLU"),
    doc="The leaky ReLU family: leaky, prelu, rrelu, elu, selu and gelu.",
))


# ---- Pooling -------------------------------------------------------------------------


@dataclass(frozen=True)
class _PoolPlan:
    """One pooling's windows: per spatial axis the (start, end, lo, hi) of
    every window, where start/end include the padding (end capped at
    size + pad, as MXNet does) and lo/hi are clipped to the data."""

    axes: tuple[tuple[tuple[int, int, int, int], ...], ...]

    @property
    def out(self) -> Shape:
        return tuple(len(windows) for windows in self.axes)


def _pool_window(op: str, attrs: Attrs, spatial: Shape) -> _Window:
    if attrs.global_pool:
        ndim = len(spatial)
        return _Window(tuple(spatial), (1,) * ndim, (1,) * ndim, (0,) * ndim)
    if not attrs.kernel:
        raise OperatorError(f"{op}: kernel is required unless global_pool is set")
    window = _kernel_window(op, attrs, attrs.kernel)
    if window.ndim != len(spatial):
        raise ShapeError(f"{op}: a {window.ndim}-D kernel needs {window.ndim + 2}-D data, "
                         f"got {len(spatial) + 2}-D data")
    return window


def _pool_outputs(op: str, convention: str, window: _Window, spatial: Shape) -> Shape:
    out = []
    for axis, size in enumerate(spatial):
        kernel, stride, pad = window.kernel[axis], window.stride[axis], window.pad[axis]
        if kernel > size + 2 * pad:
            raise ShapeError(f"{op}: kernel ({kernel}) exceeds the input ({size}, padded to "
                             f"{size + 2 * pad}) along spatial axis {axis}")
        if convention == "valid":
            out.append((size + 2 * pad - kernel) // stride + 1)
        elif convention == "full":
            out.append(-(-(size + 2 * pad - kernel) // stride) + 1)
        else:  # same: ceil(size / stride), with pad 0 enforced
            out.append(-(-(size + 2 * pad) // stride))
    return tuple(out)


def _pool_plan(attrs: Attrs, data: Shape) -> tuple[_Window, _PoolPlan]:
    op = "Pooling"
    if attrs.pool_type == "lp" and attrs.p_value not in (1, 2, 3):
        raise OperatorError(f"{op}: lp pooling needs p_value 1, 2 or 3, got {attrs.p_value}")
    _expect_ndim(op, data, (3, 4, 5))
    _check_layout(op, attrs.layout, len(data) - 2)
    spatial = tuple(data[2:])
    if 0 in spatial:
        # Nothing to pool over (a window of padding only is not a result):
        # MXNet and onnxruntime refuse it too.
        raise ShapeError(f"{op}: spatial axis {spatial.index(0)} of data {data} has size 0")
    if attrs.pooling_convention == "same":
        if len(data) != 3:
            raise ShapeError(f"{op}: pooling_convention 'same' supports only 3-D data "
                             f"(1-D pooling), got shape {data}")
        if any(attrs.pad):
            raise OperatorError(f"{op}: pooling_convention 'same' does not allow pad={attrs.pad}")
    window = _pool_window(op, attrs, spatial)
    out = ((1,) * len(spatial) if attrs.global_pool
           else _pool_outputs(op, attrs.pooling_convention, window, spatial))
    axes = []
    for axis, (size, count) in enumerate(zip(spatial, out)):
        kernel, stride, pad = window.kernel[axis], window.stride[axis], window.pad[axis]
        windows = []
        for index in range(count):
            start = index * stride - pad
            end = min(start + kernel, size + pad)
            windows.append((start, end, max(start, 0), min(end, size)))
        axes.append(tuple(windows))
    return window, _PoolPlan(tuple(axes))


def _pooling_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    data = require_known("Pooling", shapes, 0, "data")
    _, plan = _pool_plan(attrs, data)
    return [data], [(*data[:2], *plan.out)]


def _reduce_windows(values: np.ndarray, axis: int,
                    windows: Sequence[tuple[int, int, int, int]],
                    reduce: np.ufunc, empty: float) -> np.ndarray:
    """values reduced with the binary ufunc reduce over each window's clipped
    range [lo, hi) along axis; a
    window with nothing inside yields `empty`. Max, sum and the lp sums are
    separable, so pooling reduces one spatial axis at a time.

    The windows start every `stride` positions at -pad and span at most the
    kernel, so padding the axis with `empty` (the reduction's neutral value:
    the lowest value for max, 0 for sums) makes every window the same size,
    and one strided view reduces them all at once. What a window covers
    beyond its clipped range is padding, which cannot change the result."""
    starts = [start for start, _, _, _ in windows]
    kernel = max(end - start for start, end, _, _ in windows)
    stride = starts[1] - starts[0] if len(starts) > 1 else 1
    before = -starts[0]
    length = values.shape[axis]
    after = max(0, starts[-1] + kernel - length)
    widths = [(0, 0)] * values.ndim
    widths[axis] = (max(before, 0), after)
    padded = np.pad(values, widths, constant_values=empty)
    offset = max(-before, 0)  # windows that start inside the data
    # One strided slice per position in the window, combined element-wise:
    # kernels are small, and each slice is a fast contiguous-ish pass.
    index = [slice(None)] * values.ndim
    result = None
    for tap in range(kernel):
        first = offset + tap
        index[axis] = slice(first, first + stride * (len(windows) - 1) + 1, stride)
        part = padded[tuple(index)]
        result = part.copy() if result is None else reduce(result, part, out=result)
    assert result is not None
    return result


def _avg_divisor(plan: _PoolPlan, include_pad: bool) -> np.ndarray:
    """MXNet's pool_size: the product over axes of end - start (padding
    counted, end capped at size + pad) or of hi - lo (data only). A window
    with no data in it (padding only, or wholly past the edge) averages to
    0 in MXNet: its sum, 0, is divided by 1 here."""
    divisor = np.ones(())
    for windows in plan.axes:
        sizes = np.array([1 if hi <= lo else (end - start) if include_pad else (hi - lo)
                          for start, end, lo, hi in windows], dtype=np.float64)
        divisor = np.multiply.outer(divisor, sizes)
    return divisor


_LP_POWER: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    1: lambda x: x, 2: np.square, 3: lambda x: x * x * x}
_LP_ROOT: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    1: lambda x: x, 2: np.sqrt, 3: np.cbrt}


def _pooling(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    data = inputs[0]
    _, plan = _pool_plan(attrs, data.shape)
    kind = attrs.pool_type
    # Max needs no wider type; sums accumulate in float64 so that averages
    # of large windows stay exact to float32's precision.
    values = data.astype(_compute_dtype(data.dtype)) if kind == "max" else _f64(data)
    if kind == "lp":
        values = _LP_POWER[attrs.p_value](values)
    reduce, empty = (np.maximum, _lowest(data.dtype)) if kind == "max" else (np.add, 0.0)
    for axis, windows in enumerate(plan.axes):
        values = _reduce_windows(values, 2 + axis, windows, reduce, empty)
    if kind == "lp":
        values = _LP_ROOT[attrs.p_value](values)
    elif kind == "avg":
        include_pad = attrs.count_include_pad is not False
        values = values / _avg_divisor(plan, include_pad)
    return [_like(values, data)]


register(OpDef(
    name="Pooling",
    params=(Param("kernel", parse_tuple, (), "Window size; ignored with global_pool."),
            Param("pool_type", choice("max", "avg", "sum", "lp"), "max"),
            Param("global_pool", parse_bool, False, "Pool over all spatial positions."),
            Param("cudnn_off", parse_bool, False, "Ignored."),
            Param("pooling_convention", choice("full", "valid", "same"), "valid",
                  "Output size: valid floor((x+2p-k)/s)+1, full ceil((x+2p-k)/s)+1, "
                  "same ceil(x/s) (1-D only, no pad)."),
            Param("stride", parse_tuple, (), "Stride per spatial axis; () means 1."),
            Param("pad", parse_tuple, (), "Padding per spatial axis; () means 0."),
            Param("p_value", optional(parse_int), None, "p for lp pooling: 1, 2 or 3."),
            Param("count_include_pad", optional(parse_bool), None,
                  "avg: whether padding counts in the divisor (None means True)."),
            Param("layout", optional(choice(*_LAYOUTS)), None,
                  "None or the channel-first layout of the data's rank.")),
    compute=_pooling,
    infer_shape=_pooling_shape,
    infer_type=_uniform_type("Pooling"),
    doc="1-D/2-D/3-D max, average, sum and Lp pooling with MXNet's window rules.",
))


# ---- BatchNorm -----------------------------------------------------------------------


def _channel_shape(op: str, attrs: Attrs, shapes: Shapes) -> tuple[Shape, int, int]:
    """(data shape, channel axis, channel count)."""
    data = require_known(op, shapes, 0, "data")
    if not data:
        raise ShapeError(f"{op}: data must have at least one dimension")
    axis = normalize_axis(op, attrs.axis, len(data))
    return data, axis, data[axis]


def _batch_norm_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "BatchNorm"
    data, _, channels = _channel_shape(op, attrs, shapes)
    filled = list(shapes)
    for index, name in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
        _assign(op, filled, index, name, (channels,))
    return filled, [data, (channels,), (channels,)][:_visible(attrs)]


def _batch_norm_type(attrs: Attrs, dtypes: Dtypes) -> TypeResult:
    """float16 data keeps its parameters and statistics in float32; other
    dtypes keep them in the data's dtype."""
    op = "BatchNorm"
    data = np.dtype(dtypes[0]) if dtypes[0] is not None else np.dtype(np.float32)
    param = np.dtype(np.float32) if data == np.float16 else data
    names = ("gamma", "beta", "moving_mean", "moving_var")
    for name, dtype in zip(names, dtypes[1:]):
        if dtype is not None and np.dtype(dtype) != param:
            raise ShapeError(f"{op}: {name} has dtype {np.dtype(dtype)}, expected {param}")
    return [data] + [param] * (len(dtypes) - 1), [data, param, param][:_visible(attrs)]


def _broadcast_along(vector: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return _f64(vector).reshape(shape)


def _batch_norm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    op = "BatchNorm"
    _batch_norm_shape(attrs, [array.shape for array in inputs])
    data, gamma, beta, moving_mean, moving_var = inputs
    axis = normalize_axis(op, attrs.axis, data.ndim)
    invstd = 1 / np.sqrt(_f64(moving_var) + attrs.eps)
    scale = invstd if attrs.fix_gamma else invstd * _f64(gamma)
    # Folded into one multiply-add per element: the per-channel factors are
    # exact in float64, the element-wise work runs in the compute dtype.
    shift = _f64(beta) - _f64(moving_mean) * scale
    dtype = _compute_dtype(data.dtype)
    result = (data.astype(dtype, copy=False) * _broadcast_along(scale.astype(dtype), axis,
                                                                data.ndim)
              + _broadcast_along(shift.astype(dtype), axis, data.ndim))
    outputs = [_like(result, data)]
    if attrs.output_mean_var:
        # What MXNet's CPU kernels write at inference: the moving mean, and
        # in the "var" output the inverse standard deviation 1/sqrt(var + eps).
        outputs += [_like(moving_mean, moving_mean), _like(invstd, moving_var)]
    return outputs


register(OpDef(
    name="BatchNorm",
    params=(Param("eps", parse_float, 1e-3, "Added to the variance."),
            Param("momentum", parse_float, 0.9, "Ignored at inference."),
            Param("fix_gamma", parse_bool, True, "Treat gamma as 1."),
            Param("use_global_stats", parse_bool, False,
                  "Ignored: inference always uses the moving statistics."),
            Param("output_mean_var", parse_bool, False, "Also output mean and var."),
            Param("axis", parse_int, 1, "The channel axis."),
            Param("cudnn_off", parse_bool, False, "Ignored."),
            Param("min_calib_range", optional(parse_float), None, "Ignored."),
            Param("max_calib_range", optional(parse_float), None, "Ignored.")),
    arguments=("data", "gamma", "beta"),
    aux_states=("moving_mean", "moving_var"),
    outputs=lambda attrs: ("output", "mean", "var")[:_visible(attrs)],
    num_outputs=3,
    compute=_batch_norm,
    infer_shape=_batch_norm_shape,
    infer_type=_batch_norm_type,
    doc="(data - moving_mean) / sqrt(moving_var + eps) * gamma + beta along axis.",
))


# ---- LayerNorm and InstanceNorm ---------------------------------------------------------


def _layer_norm_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "LayerNorm"
    data, axis, channels = _channel_shape(op, attrs, shapes)
    filled = list(shapes)
    _assign(op, filled, 1, "gamma", (channels,))
    _assign(op, filled, 2, "beta", (channels,))
    moments = tuple(1 if k == axis else size for k, size in enumerate(data))
    return filled, [data, moments, moments][:_visible(attrs)]


def _layer_norm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    op = "LayerNorm"
    _layer_norm_shape(attrs, [array.shape for array in inputs])
    data, gamma, beta = inputs
    axis = normalize_axis(op, attrs.axis, data.ndim)
    x = _f64(data)
    mean = x.mean(axis=axis, keepdims=True)
    std = np.sqrt(np.square(x - mean).mean(axis=axis, keepdims=True) + attrs.eps)
    result = ((x - mean) / std * _broadcast_along(gamma, axis, x.ndim)
              + _broadcast_along(beta, axis, x.ndim))
    outputs = [_like(result, data)]
    if attrs.output_mean_var:
        outputs += [_like(mean, data), _like(std, data)]
    return outputs


register(OpDef(
    name="LayerNorm",
    params=(Param("axis", parse_int, -1, "The axis to normalize over."),
            Param("eps", parse_float, 1e-5, "Added to the variance."),
            Param("output_mean_var", parse_bool, False,
                  "Also output the mean and the standard deviation sqrt(var + eps).")),
    arguments=("data", "gamma", "beta"),
    outputs=lambda attrs: ("output", "mean", "std")[:_visible(attrs)],
    num_outputs=3,
    compute=_layer_norm,
    infer_shape=_layer_norm_shape,
    infer_type=_uniform_type("LayerNorm", _visible),
    doc="(data - mean) / sqrt(var + eps) * gamma + beta, statistics along axis.",
))


def _instance_norm_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "InstanceNorm"
    data = require_known(op, shapes, 0, "data")
    if len(data) < 3:
        raise ShapeError(f"{op}: data must have at least 3 dimensions, got shape {data}")
    filled = list(shapes)
    _assign(op, filled, 1, "gamma", (data[1],))
    _assign(op, filled, 2, "beta", (data[1],))
    return filled, [data]


def _instance_norm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _instance_norm_shape(attrs, [array.shape for array in inputs])
    data, gamma, beta = inputs
    x = _f64(data)
    spatial = tuple(range(2, x.ndim))
    mean = x.mean(axis=spatial, keepdims=True)
    var = np.square(x - mean).mean(axis=spatial, keepdims=True)
    result = ((x - mean) / np.sqrt(var + attrs.eps) * _broadcast_along(gamma, 1, x.ndim)
              + _broadcast_along(beta, 1, x.ndim))
    return [_like(result, data)]


register(OpDef(
    name="InstanceNorm",
    params=(Param("eps", parse_float, 1e-3, "Added to the variance."),),
    arguments=("data", "gamma", "beta"),
    num_outputs=3,  # output, and the hidden mean and var
    compute=_instance_norm,
    infer_shape=_instance_norm_shape,
    infer_type=_uniform_type("InstanceNorm"),
    doc="Normalizes each (sample, channel) over its spatial positions, then "
        "scales by gamma and shifts by beta per channel.",
))


# ---- Dropout and Flatten ---------------------------------------------------------------


def _dropout_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    if not 0 <= attrs.p <= 1:
        raise OperatorError(f"Dropout: p={attrs.p} must lie in [0, 1]")
    return same_shape("Dropout")(attrs, shapes)


def _dropout(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _dropout_shape(attrs, [inputs[0].shape])
    # Inference: identity. mode="always" would drop at random even here;
    # a deterministic reference cannot, so it is the identity as well.
    return [inputs[0].copy()]


register(OpDef(
    name="Dropout",
    params=(Param("p", parse_float, 0.5, "Drop probability (unused at inference)."),
            Param("mode", choice("always", "training"), "training"),
            Param("axes", parse_tuple, (), "Axes sharing one mask (unused at inference)."),
            Param("cudnn_off", optional(parse_bool), False, "Ignored.")),
    num_outputs=2,  # output and the hidden mask
    compute=_dropout,
    infer_shape=_dropout_shape,
    inplace=((0, 0),),
    doc="The identity at inference.",
))


def _flatten_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Flatten"
    data = require_known(op, shapes, 0, "data")
    if not data:
        raise ShapeError(f"{op}: data must have at least one dimension")
    return [data], [(data[0], math.prod(data[1:]))]


def _flatten(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    out = _flatten_shape(attrs, [inputs[0].shape])[1][0]
    return [inputs[0].reshape(out).copy()]


register(OpDef(
    name="Flatten",
    compute=_flatten,
    infer_shape=_flatten_shape,
    aliases=("flatten",),
    doc="(N, d1, d2, ...) -> (N, d1*d2*...).",
))


# ---- softmax family ------------------------------------------------------------------


def _softmax_values(x: np.ndarray, axis: int, temperature: float | None = None,
                    log: bool = False) -> np.ndarray:
    x = _f64(x)
    if x.size == 0:  # nothing to normalize (numpy's max has no identity)
        return x.copy()
    if temperature is not None:
        x = x / temperature
    shifted = x - x.max(axis=axis, keepdims=True)
    if log:
        return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def _softmax_shape(op: str) -> Callable[[Attrs, Shapes], ShapeResult]:
    def infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
        if attrs.use_length:
            raise OperatorError(f"{op}: use_length=True is not supported")
        data = require_known(op, shapes, 0, "data")
        normalize_axis(op, attrs.axis, max(len(data), 1))
        return [data], [data]
    return infer


def _softmax_type(attrs: Attrs, dtypes: Dtypes) -> TypeResult:
    data = np.dtype(dtypes[0]) if dtypes[0] is not None else np.dtype(np.float32)
    out = np.dtype(attrs.dtype) if attrs.dtype is not None else data
    return [data] * len(dtypes), [out]


def _softmax_op(name: str, log: bool) -> None:
    infer = _softmax_shape(name)

    def compute(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
        data = inputs[0]
        infer(attrs, [data.shape])
        result = _softmax_values(data, attrs.axis, attrs.temperature, log)
        dtype = np.dtype(attrs.dtype) if attrs.dtype is not None else data.dtype
        return [np.array(result, dtype=dtype, order="C")]

    formula = "log(softmax(x / t))" if log else "exp(x / t) / sum(exp(x / t))"
    register(OpDef(
        name=name,
        params=(Param("axis", parse_int, -1, "The axis to normalize over."),
                Param("temperature", optional(parse_float), None, "t; None means 1."),
                Param("dtype", optional(choice("float16", "float32", "float64")), None,
                      "Output dtype; None means the data's."),
                Param("use_length", optional(parse_bool), False, "Only False is supported.")),
        arguments=lambda attrs: ("data", "length") if attrs.use_length else ("data",),
        compute=compute,
        infer_shape=infer,
        infer_type=_softmax_type,
        doc=f"{formula} along axis.",
    ))


_softmax_op("softmax", log=False)
_softmax_op("log_softmax", log=True)


def _softmax_activation_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "SoftmaxActivation"
    data = require_known(op, shapes, 0, "data")
    if attrs.mode == "channel" and len(data) < 3:
        raise ShapeError(f"{op}: mode 'channel' needs data of at least 3 dimensions, "
                         f"got shape {data}")
    return [data], [data]


def _softmax_activation(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    data = inputs[0]
    _softmax_activation_shape(attrs, [data.shape])
    # "instance" flattens to 2-D the way MXNet's FlatTo2D does, keeping the
    # last axis: the softmax runs along the last axis.
    axis = 1 if attrs.mode == "channel" else -1
    return [_like(_softmax_values(data, axis), data)]


register(OpDef(
    name="SoftmaxActivation",
    params=(Param("mode", choice("instance", "channel"), "instance",
                  "instance: along the last axis; channel: along axis 1."),),
    compute=_softmax_activation,
    infer_shape=_softmax_activation_shape,
    infer_type=_uniform_type("SoftmaxActivation"),
    inplace=((0, 0),),
    doc="Deprecated softmax: per instance (last axis) or across channels (axis 1).",
))


def _softmax_output_label(op: str, attrs: Attrs, data: Shape, label: Shape | None) -> Shape:
    """MXNet's label shape: data's shape less the last axis; with
    multi_output (N, prod(data[2:])), data less axis 1, or data with axis 1
    set to 1. A label of data's own shape (probabilities) is also accepted."""
    if label is not None and tuple(label) == data:
        return data
    if not attrs.multi_output:
        expected = data[:-1]
        if label is not None and tuple(label) != expected:
            raise ShapeError(f"{op}: label has shape {tuple(label)}, expected {expected}")
        return expected
    if len(data) < 2:
        raise ShapeError(f"{op}: multi_output needs data of at least 2 dimensions")
    flat = (data[0], math.prod(data[2:]))
    accepted = (flat, (data[0], *data[2:]), (data[0], 1, *data[2:]))
    if label is None:
        return flat
    if tuple(label) not in accepted:
        raise ShapeError(f"{op}: label has shape {tuple(label)}, expected one of "
                         f"{', '.join(map(str, accepted))}")
    return tuple(label)


def _softmax_output_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "SoftmaxOutput"
    data = require_known(op, shapes, 0, "data")
    if not data:
        raise ShapeError(f"{op}: data must have at least one dimension")
    return [data, _softmax_output_label(op, attrs, data, shapes[1])], [data]


def _softmax_output(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    data = inputs[0]
    _softmax_output_shape(attrs, [data.shape, inputs[1].shape])
    if attrs.multi_output:
        values = _softmax_values(data.reshape(data.shape[0], data.shape[1], -1), 1)
    elif attrs.preserve_shape:
        values = _softmax_values(data, -1)
    else:
        values = _softmax_values(data.reshape(data.shape[0], -1), 1)
    return [_like(values.reshape(data.shape), data)]


register(OpDef(
    name="SoftmaxOutput",
    params=(Param("grad_scale", parse_float, 1.0, "Training only."),
            Param("ignore_label", parse_float, -1.0, "Training only."),
            Param("multi_output", parse_bool, False, "Softmax along axis 1."),
            Param("use_ignore", parse_bool, False, "Training only."),
            Param("preserve_shape", parse_bool, False, "Softmax along the last axis."),
            Param("normalization", choice("null", "batch", "valid"), "null", "Training only."),
            Param("out_grad", parse_bool, False, "Training only."),
            Param("smooth_alpha", parse_float, 0.0, "Training only.")),
    arguments=("data", "label"),
    compute=_softmax_output,
    infer_shape=_softmax_output_shape,
    infer_type=_uniform_type("SoftmaxOutput"),
    aliases=("Softmax",),
    doc="Forward of the softmax cross-entropy output: softmax over data flattened to "
        "(N, -1), along axis 1 with multi_output, along the last axis with preserve_shape.",
))


# ---- Embedding -----------------------------------------------------------------------


def _embedding_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Embedding"
    _positive(op, "input_dim", attrs.input_dim)
    _positive(op, "output_dim", attrs.output_dim)
    data = require_known(op, shapes, 0, "data")
    filled = list(shapes)
    _assign(op, filled, 1, "weight", (attrs.input_dim, attrs.output_dim))
    return filled, [(*data, attrs.output_dim)]


def _embedding_type(attrs: Attrs, dtypes: Dtypes) -> TypeResult:
    dtype = np.dtype(attrs.dtype)
    if dtypes[1] is not None and np.dtype(dtypes[1]) != dtype:
        raise ShapeError(f"Embedding: weight has dtype {np.dtype(dtypes[1])}, expected {dtype}")
    data = np.dtype(dtypes[0]) if dtypes[0] is not None else np.dtype(np.float32)
    return [data, dtype], [dtype]


def _embedding(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    _embedding_shape(attrs, [array.shape for array in inputs])
    data, weight = inputs
    # MXNet casts each index to an integer (truncating toward zero) and
    # clips it into [0, input_dim - 1].
    rows = np.clip(np.trunc(_f64(data)), 0, attrs.input_dim - 1).astype(np.int64)
    return [np.array(weight[rows], dtype=np.dtype(attrs.dtype), order="C")]


register(OpDef(
    name="Embedding",
    params=(Param("input_dim", parse_int, REQUIRED, "Vocabulary size."),
            Param("output_dim", parse_int, REQUIRED, "Embedding size."),
            Param("dtype", parse_dtype, "float32", "dtype of weight and output."),
            Param("sparse_grad", parse_bool, False, "Training only.")),
    arguments=("data", "weight"),
    compute=_embedding,
    infer_shape=_embedding_shape,
    infer_type=_embedding_type,
    doc="weight[clip(int(data), 0, input_dim - 1)]: data holds (float) indices.",
))


# ---- UpSampling ----------------------------------------------------------------------


def _upsampling_arguments(attrs: Attrs) -> tuple[str, ...]:
    if attrs.sample_type == "bilinear":
        return ("data", "weight")
    return tuple(f"arg{k}" for k in range(attrs.num_args))


def _upsampling_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "UpSampling"
    if attrs.sample_type != "nearest":
        raise OperatorError(f"{op}: sample_type {attrs.sample_type!r} is not supported "
                            "(only 'nearest')")
    _positive(op, "scale", attrs.scale)
    inputs = [require_known(op, shapes, k, f"arg{k}") for k in range(len(shapes))]
    for k, shape in enumerate(inputs):
        _expect_ndim(op, shape, (4,), f"arg{k}")
    first = inputs[0]
    height, width = first[2] * attrs.scale, first[3] * attrs.scale
    channels = first[1]
    for k, shape in enumerate(inputs[1:], start=1):
        if shape[0] != first[0]:
            raise ShapeError(f"{op}: arg{k} has batch size {shape[0]}, arg0 has {first[0]}")
        # Every input is scaled by output height / its height, in both axes.
        if height % shape[2] or width != shape[3] * (height // shape[2]):
            raise ShapeError(f"{op}: arg{k} of shape {shape} cannot be scaled by a whole "
                             f"factor to the output size {(height, width)}")
        if attrs.multi_input_mode == "sum":
            if shape[1] != channels:
                raise ShapeError(f"{op}: multi_input_mode 'sum' needs equal channels, arg{k} "
                                 f"has {shape[1]}, arg0 has {channels}")
        else:
            channels += shape[1]
    return inputs, [(first[0], channels, height, width)]


def _upsampling(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    (out,) = _upsampling_shape(attrs, [array.shape for array in inputs])[1]
    scaled = []
    for array in inputs:
        factor = out[2] // array.shape[2]
        scaled.append(array.repeat(factor, axis=2).repeat(factor, axis=3))
    if attrs.multi_input_mode == "sum":
        total = _f64(scaled[0])
        for array in scaled[1:]:
            total = total + _f64(array)
        return [_like(total, inputs[0])]
    return [_like(np.concatenate(scaled, axis=1), inputs[0])]


register(OpDef(
    name="UpSampling",
    params=(Param("scale", parse_int, REQUIRED, "Scale of arg0's height and width."),
            Param("num_filter", parse_int, 0, "bilinear only."),
            Param("sample_type", choice("bilinear", "nearest"), REQUIRED,
                  "Only nearest is supported."),
            Param("multi_input_mode", choice("concat", "sum"), "concat",
                  "How several inputs combine."),
            Param("num_args", parse_count, REQUIRED, "Number of inputs."),
            Param("workspace", parse_int, 512, "Ignored.")),
    arguments=_upsampling_arguments,
    compute=_upsampling,
    infer_shape=_upsampling_shape,
    infer_type=_uniform_type("UpSampling"),
    doc="Nearest-neighbour upsampling of 4-D inputs to arg0's size times scale, "
        "concatenated along channels (or summed).",
))


# ---- Pad -----------------------------------------------------------------------------

_NUMPY_PAD_MODES: dict[str, Literal["constant", "edge", "reflect"]] = {
    "constant": "constant", "edge": "edge", "reflect": "reflect"}


def _pad_shape(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Pad"
    data = require_known(op, shapes, 0, "data")
    _expect_ndim(op, data, (4, 5))
    widths = attrs.pad_width
    if len(widths) != 2 * len(data):
        raise OperatorError(f"{op}: pad_width={widths} must have {2 * len(data)} entries for "
                            f"{len(data)}-D data")
    if any(width is None or width < 0 for width in widths):
        raise OperatorError(f"{op}: pad_width={widths} must not be negative")
    if any(widths[:4]):
        raise OperatorError(f"{op}: pad_width={widths} must not pad the first two axes")
    if attrs.mode == "reflect":
        for axis in range(2, len(data)):
            size = data[axis]
            if max(widths[2 * axis], widths[2 * axis + 1]) >= size:
                raise ShapeError(f"{op}: reflect padding must be smaller than the input "
                                 f"({size}) along axis {axis}")
    out = tuple(size + widths[2 * k] + widths[2 * k + 1] for k, size in enumerate(data))
    return [data], [out]


def _pad(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    data = inputs[0]
    _pad_shape(attrs, [data.shape])
    widths = [(int(attrs.pad_width[2 * k]), int(attrs.pad_width[2 * k + 1]))
              for k in range(data.ndim)]
    mode = _NUMPY_PAD_MODES[attrs.mode]
    if mode == "constant":
        value = np.array(attrs.constant_value).astype(data.dtype)
        return [np.pad(data, widths, mode=mode, constant_values=value)]
    return [np.pad(data, widths, mode=mode)]


register(OpDef(
    name="Pad",
    params=(Param("mode", choice("constant", "edge", "reflect"), "constant"),
            Param("pad_width", parse_tuple, REQUIRED,
                  "(before, after) per axis; the first four entries must be 0."),
            Param("constant_value", parse_float, 0.0, "Fill value of constant mode.")),
    compute=_pad,
    infer_shape=_pad_shape,
    aliases=("pad",),
    doc="Pads the spatial axes of 4-D or 5-D data.",
))
