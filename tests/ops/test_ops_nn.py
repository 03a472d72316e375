"""The neural-network operators of acc_host.ops.nn against independent oracles:
small cases computed by hand, scipy, and explicit loops written from MXNet's
definitions."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import signal, special

from acc_host.errors import OperatorError, ShapeError
from acc_host.ops import get
from acc_host.ops.registry import ShapeUnknownError

RNG = np.random.default_rng(20240611)
F32_MIN = float(np.finfo(np.float32).min)


def run(name: str, inputs: list[np.ndarray], **attrs: Any) -> list[np.ndarray]:
    op = get(name)
    return op.run(op.parse(attrs), [np.asarray(array) for array in inputs])


def run1(name: str, inputs: list[np.ndarray], **attrs: Any) -> np.ndarray:
    (result,) = run(name, inputs, **attrs)
    return result


def infer(name: str, shapes: list[tuple[int, ...] | None], **attrs: Any) -> tuple[list, list]:
    op = get(name)
    return op.infer_shape(op.parse(attrs), list(shapes))


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def row(*values: float) -> np.ndarray:
    """A (1, 1, len) float32 array: one sample, one channel."""
    return np.array(values, dtype=np.float32).reshape(1, 1, -1)


# ---- registry entries ----------------------------------------------------------------

OPERATORS = ["Convolution", "Deconvolution", "FullyConnected", "Activation", "LeakyReLU",
             "Pooling", "BatchNorm", "LayerNorm", "InstanceNorm", "Dropout", "Flatten",
             "flatten", "softmax", "log_softmax", "SoftmaxActivation", "SoftmaxOutput",
             "Softmax", "Embedding", "UpSampling", "Pad"]

REQUIRED = {
    "Convolution": {"kernel": (3, 3), "num_filter": 4},
    "Deconvolution": {"kernel": (3, 3), "num_filter": 4},
    "FullyConnected": {"num_hidden": 4},
    "Activation": {"act_type": "relu"},
    "Embedding": {"input_dim": 5, "output_dim": 3},
    "UpSampling": {"scale": 2, "sample_type": "nearest", "num_args": 1},
    "Pad": {"pad_width": (0, 0, 0, 0, 1, 1, 1, 1)},
}


def parse(name: str, **attrs: Any) -> Any:
    return get(name).parse({**REQUIRED.get(name, {}), **attrs})


@pytest.mark.parametrize("name", OPERATORS)
def test_registered(name: str) -> None:
    assert get(name) is not None


def test_aliases_share_the_definition() -> None:
    assert get("flatten") is get("Flatten")
    assert get("Softmax") is get("SoftmaxOutput")


@pytest.mark.parametrize("name, attr, default", [
    ("Convolution", "no_bias", False), ("Convolution", "num_group", 1),
    ("Convolution", "workspace", 1024), ("Convolution", "stride", ()),
    ("Convolution", "layout", None),
    ("Deconvolution", "no_bias", True), ("Deconvolution", "workspace", 512),
    ("Deconvolution", "adj", ()), ("Deconvolution", "target_shape", ()),
    ("FullyConnected", "no_bias", False), ("FullyConnected", "flatten", True),
    ("LeakyReLU", "act_type", "leaky"), ("LeakyReLU", "slope", 0.25),
    ("LeakyReLU", "lower_bound", 0.125), ("LeakyReLU", "upper_bound", 0.334),
    ("Pooling", "pool_type", "max"), ("Pooling", "pooling_convention", "valid"),
    ("Pooling", "global_pool", False), ("Pooling", "kernel", ()),
    ("Pooling", "count_include_pad", None), ("Pooling", "p_value", None),
    ("BatchNorm", "eps", 1e-3), ("BatchNorm", "momentum", 0.9),
    ("BatchNorm", "fix_gamma", True), ("BatchNorm", "use_global_stats", False),
    ("BatchNorm", "output_mean_var", False), ("BatchNorm", "axis", 1),
    ("LayerNorm", "axis", -1), ("LayerNorm", "eps", 1e-5),
    ("LayerNorm", "output_mean_var", False), ("InstanceNorm", "eps", 1e-3),
    ("Dropout", "p", 0.5), ("Dropout", "mode", "training"), ("Dropout", "axes", ()),
    ("softmax", "axis", -1), ("softmax", "temperature", None), ("softmax", "dtype", None),
    ("log_softmax", "axis", -1), ("SoftmaxActivation", "mode", "instance"),
    ("SoftmaxOutput", "grad_scale", 1.0), ("SoftmaxOutput", "ignore_label", -1.0),
    ("SoftmaxOutput", "multi_output", False), ("SoftmaxOutput", "preserve_shape", False),
    ("SoftmaxOutput", "normalization", "null"),
    ("Embedding", "dtype", "float32"), ("Embedding", "sparse_grad", False),
    ("UpSampling", "multi_input_mode", "concat"), ("UpSampling", "num_filter", 0),
    ("Pad", "mode", "constant"), ("Pad", "constant_value", 0.0),
])
def test_mxnet_defaults(name: str, attr: str, default: Any) -> None:
    assert parse(name)[attr] == default


@pytest.mark.parametrize("name, attrs, arguments, aux, outputs, total", [
    ("Convolution", {}, ["data", "weight", "bias"], [], ["output"], 1),
    ("Convolution", {"no_bias": True}, ["data", "weight"], [], ["output"], 1),
    ("Deconvolution", {}, ["data", "weight"], [], ["output"], 1),
    ("Deconvolution", {"no_bias": False}, ["data", "weight", "bias"], [], ["output"], 1),
    ("FullyConnected", {}, ["data", "weight", "bias"], [], ["output"], 1),
    ("LeakyReLU", {}, ["data"], [], ["output"], 1),
    ("LeakyReLU", {"act_type": "prelu"}, ["data", "gamma"], [], ["output"], 1),
    ("LeakyReLU", {"act_type": "rrelu"}, ["data"], [], ["output"], 2),
    ("BatchNorm", {}, ["data", "gamma", "beta"], ["moving_mean", "moving_var"],
     ["output"], 3),
    ("BatchNorm", {"output_mean_var": True}, ["data", "gamma", "beta"],
     ["moving_mean", "moving_var"], ["output", "mean", "var"], 3),
    ("LayerNorm", {"output_mean_var": True}, ["data", "gamma", "beta"], [],
     ["output", "mean", "std"], 3),
    ("InstanceNorm", {}, ["data", "gamma", "beta"], [], ["output"], 3),
    ("Dropout", {}, ["data"], [], ["output"], 2),
    ("SoftmaxOutput", {}, ["data", "label"], [], ["output"], 1),
    ("Embedding", {}, ["data", "weight"], [], ["output"], 1),
    ("UpSampling", {"num_args": 3}, ["arg0", "arg1", "arg2"], [], ["output"], 1),
    ("Pooling", {}, ["data"], [], ["output"], 1),
])
def test_input_and_output_names(name: str, attrs: dict, arguments: list, aux: list,
                                outputs: list, total: int) -> None:
    op = get(name)
    parsed = parse(name, **attrs)
    assert op.argument_names(parsed) == arguments
    assert op.aux_names(parsed) == aux
    assert op.output_names(parsed) == outputs
    assert op.total_outputs(parsed) == total


# ---- Convolution ---------------------------------------------------------------------


def test_convolution_by_hand() -> None:
    x, w = row(1, 2, 3, 4), np.array([[[1, 2, 3]]], np.float32)
    # [1*1 + 2*2 + 3*3, 2*1 + 3*2 + 4*3], plus the bias
    out = run1("Convolution", [x, w, np.array([0.5], np.float32)], kernel=(3,), num_filter=1)
    np.testing.assert_array_equal(out, [[[14.5, 20.5]]])
    # zero padding by 1: [0,1,2,3,4,0]
    out = run1("Convolution", [x, w], kernel=(3,), num_filter=1, no_bias=True, pad=(1,))
    np.testing.assert_array_equal(out, [[[8, 14, 20, 11]]])
    out = run1("Convolution", [x, w], kernel=(3,), num_filter=1, no_bias=True, pad=(1,),
               stride=(3,))
    np.testing.assert_array_equal(out, [[[8, 11]]])
    # dilation 2 takes taps 0, 2, 4: [1 + 2*3 + 3*5, 2 + 2*4 + 3*6]
    out = run1("Convolution", [row(1, 2, 3, 4, 5, 6), w], kernel=(3,), num_filter=1,
               no_bias=True, dilate=(2,))
    np.testing.assert_array_equal(out, [[[22, 28]]])
    assert out.dtype == np.float32


def conv_oracle(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple,
                pad: tuple, dilate: tuple, groups: int) -> np.ndarray:
    """MXNet's convolution from scipy's N-D correlation: pad, dilate the
    kernel with zeros, correlate each filter with its group's channels, keep
    every stride-th position."""
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    kernel = w.shape[2:]
    dilated = np.zeros(w.shape[:2] + tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilate)))
    dilated[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilate)] = w
    filters, per_group = w.shape[0], w.shape[1]
    results = []
    for n in range(x.shape[0]):
        planes = []
        for f in range(filters):
            group = f // (filters // groups)
            plane = sum(signal.correlate(padded[n, group * per_group + c], dilated[f, c],
                                         mode="valid") for c in range(per_group))
            plane = plane[tuple(slice(None, None, s) for s in stride)]
            planes.append(plane + (0 if b is None else b[f]))
        results.append(planes)
    return np.array(results)


@pytest.mark.parametrize("spatial, kernel, stride, pad, dilate", [
    ((9,), (3,), (2,), (1,), (1,)),
    ((8, 7), (3, 2), (1, 2), (1, 0), (2, 1)),
    ((7, 8), (3, 3), (2, 2), (2, 1), (1, 2)),
    ((5, 6, 4), (2, 3, 2), (2, 1, 1), (1, 1, 0), (1, 1, 2)),
])
@pytest.mark.parametrize("channels, filters, groups", [(3, 4, 1), (4, 6, 2), (4, 8, 4)])
def test_convolution_matches_scipy(spatial: tuple, kernel: tuple, stride: tuple, pad: tuple,
                                   dilate: tuple, channels: int, filters: int,
                                   groups: int) -> None:
    x = randn(2, channels, *spatial)
    w = randn(filters, channels // groups, *kernel)
    b = randn(filters)
    out = run1("Convolution", [x, w, b], kernel=kernel, stride=stride, pad=pad, dilate=dilate,
               num_filter=filters, num_group=groups)
    np.testing.assert_allclose(out, conv_oracle(x, w, b, stride, pad, dilate, groups),
                               rtol=1e-5, atol=1e-5)


def test_depthwise_convolution_is_per_channel() -> None:
    # num_group == channels: each output channel sees only its own input channel
    x = randn(1, 3, 5, 5)
    w = randn(3, 1, 3, 3)
    out = run1("Convolution", [x, w], kernel=(3, 3), num_filter=3, num_group=3, no_bias=True)
    for c in range(3):
        expected = signal.correlate(x[0, c].astype(np.float64), w[c, 0], mode="valid")
        np.testing.assert_allclose(out[0, c], expected, rtol=1e-5, atol=1e-5)


def test_convolution_shape_inference_fills_weight_and_bias() -> None:
    filled, out = infer("Convolution", [(2, 6, 9, 9), None, None], kernel=(3, 3), num_filter=4,
                        num_group=2, stride=(2, 2), pad=(1, 1))
    assert filled == [(2, 6, 9, 9), (4, 3, 3, 3), (4,)]
    assert out == [(2, 4, 5, 5)]
    filled, out = infer("Convolution", [(1, 2, 10), None], kernel=(3,), num_filter=5,
                        no_bias=True, dilate=(3,))
    assert filled == [(1, 2, 10), (5, 2, 3)] and out == [(1, 5, 4)]


def test_convolution_dtype_inference() -> None:
    op = get("Convolution")
    attrs = parse("Convolution")
    f16 = np.dtype(np.float16)
    assert op.infer_type(attrs, [f16, None, None]) == ([f16] * 3, [f16])
    with pytest.raises(ShapeError, match="Convolution"):
        op.infer_type(attrs, [f16, np.dtype(np.float32), None])


@pytest.mark.parametrize("attrs, shapes, error, message", [
    ({"kernel": (3, 3), "num_filter": 4, "num_group": 2}, [(1, 3, 8, 8), None, None],
     ShapeError, "not divisible by num_group"),
    ({"kernel": (3, 3), "num_filter": 3, "num_group": 2}, [(1, 4, 8, 8), None, None],
     OperatorError, "num_filter=3"),
    ({"kernel": (5, 5), "num_filter": 1}, [(1, 1, 4, 8), None, None],
     ShapeError, "exceeds the input"),
    ({"kernel": (3, 3), "num_filter": 1}, [(1, 1, 8), None, None], ShapeError, "4-D"),
    ({"kernel": (3, 3), "num_filter": 1}, [(1, 1, 8, 8), (1, 1, 2, 2), None],
     ShapeError, "weight has shape"),
    ({"kernel": (3, 3), "num_filter": 1, "stride": (1,)}, [(1, 1, 8, 8), None, None],
     OperatorError, "stride"),
    ({"kernel": (3, 3), "num_filter": 1, "layout": "NHWC"}, [(1, 8, 8, 1), None, None],
     OperatorError, "NHWC"),
    ({"kernel": (3, 3, 3, 3), "num_filter": 1}, [(1, 1, 4, 4, 4, 4), None, None],
     OperatorError, "kernel"),
    ({"kernel": (0, 3), "num_filter": 1}, [(1, 1, 4, 4), None, None], OperatorError, "kernel"),
])
def test_convolution_errors(attrs: dict, shapes: list, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        infer("Convolution", shapes, **attrs)
    assert str(caught.value).startswith("Convolution:")


def test_unknown_data_shape_is_reported_as_unknown() -> None:
    with pytest.raises(ShapeUnknownError):
        infer("Convolution", [None, (1, 1, 3, 3), None], kernel=(3, 3), num_filter=1)


# ---- Deconvolution -------------------------------------------------------------------

DECONV_W = np.array([[[1, 2, 3]]], np.float32)


@pytest.mark.parametrize("attrs, expected", [
    # x0 = 1 scatters [1, 2, 3] at 0..2, x1 = 2 scatters [2, 4, 6] at 2..4
    ({"stride": (2,)}, [1, 2, 5, 4, 6]),
    ({"stride": (2,), "pad": (1,)}, [2, 5, 4]),
    ({"stride": (2,), "pad": (1,), "adj": (1,)}, [2, 5, 4, 6]),
    ({"stride": (2,), "adj": (1,)}, [1, 2, 5, 4, 6, 0]),
    # target_shape 4: surplus 1 -> pad 1, adj 1; target 3: surplus 2 -> pad 1
    ({"stride": (2,), "target_shape": (4,)}, [2, 5, 4, 6]),
    ({"stride": (2,), "target_shape": (3,)}, [2, 5, 4]),
    ({"stride": (2,), "pad": (5,), "adj": (1,), "target_shape": (5,)}, [1, 2, 5, 4, 6]),
    # dilation 2: x0 at 0, 2, 4 and x1 at 1, 3, 5
    ({"dilate": (2,)}, [1, 2, 2, 4, 3, 6]),
])
def test_deconvolution_by_hand(attrs: dict, expected: list) -> None:
    out = run1("Deconvolution", [row(1, 2), DECONV_W], kernel=(3,), num_filter=1, **attrs)
    np.testing.assert_array_equal(out, [[expected]])


def deconv_oracle(x: np.ndarray, w: np.ndarray, stride: tuple, pad: tuple, dilate: tuple,
                  groups: int, out_spatial: tuple) -> np.ndarray:
    """out[n, g*F/g + f, i*s + k*d - p] += x[n, g*C/g + c, i] * w[g*C/g + c, f, k]."""
    batch, channels = x.shape[:2]
    per_group_in, per_group_out = channels // groups, w.shape[1]
    out = np.zeros((batch, groups * per_group_out, *out_spatial))
    for n, c in itertools.product(range(batch), range(channels)):
        group = c // per_group_in
        for i in itertools.product(*(range(size) for size in x.shape[2:])):
            for k in itertools.product(*(range(size) for size in w.shape[2:])):
                o = tuple(a * s + b * d - p for a, b, s, d, p in zip(i, k, stride, dilate, pad))
                if all(0 <= index < size for index, size in zip(o, out_spatial)):
                    for f in range(per_group_out):
                        out[(n, group * per_group_out + f, *o)] += x[(n, c, *i)] * w[(c, f, *k)]
    return out


@pytest.mark.parametrize("spatial, kernel, stride, pad, dilate, adj, groups", [
    ((4,), (3,), (2,), (1,), (1,), (1,), 1),
    ((3, 4), (3, 2), (2, 1), (1, 0), (1, 2), (1, 0), 2),
    ((3, 3), (2, 2), (3, 2), (0, 1), (1, 1), (2, 1), 1),
    ((2, 3, 2), (2, 2, 3), (2, 1, 2), (0, 1, 1), (1, 1, 1), (1, 0, 0), 2),
])
def test_deconvolution_matches_loop(spatial: tuple, kernel: tuple, stride: tuple, pad: tuple,
                                    dilate: tuple, adj: tuple, groups: int) -> None:
    channels, filters = 4, 6
    x = randn(2, channels, *spatial)
    w = randn(channels, filters // groups, *kernel)
    b = randn(filters)
    out = run1("Deconvolution", [x, w, b], kernel=kernel, stride=stride, pad=pad,
               dilate=dilate, adj=adj, num_filter=filters, num_group=groups, no_bias=False)
    out_spatial = tuple(s * (n - 1) + d * (k - 1) + 1 - 2 * p + a for n, k, s, p, d, a
                        in zip(spatial, kernel, stride, pad, dilate, adj))
    expected = deconv_oracle(x, w, stride, pad, dilate, groups, out_spatial)
    expected += b.reshape((1, -1) + (1,) * len(spatial))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups", [1, 3])
def test_deconvolution_is_the_adjoint_of_convolution(groups: int) -> None:
    # <conv(x; w), y> == <x, deconv(y; w)> for the same weight array
    x, w = randn(2, 3, 9, 8), randn(6, 3 // groups, 3, 2)
    kernel, stride, pad, dilate = (3, 2), (2, 3), (1, 1), (2, 1)
    conv_attrs = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_group=groups)
    y = randn(*run1("Convolution", [x, w], num_filter=6, no_bias=True, **conv_attrs).shape)
    adj = tuple((n + 2 * p - (d * (k - 1) + 1)) % s
                for n, k, s, p, d in zip(x.shape[2:], kernel, stride, pad, dilate))
    back = run1("Deconvolution", [y, w], num_filter=3, adj=adj, **conv_attrs)
    assert back.shape == x.shape
    forward = run1("Convolution", [x, w], num_filter=6, no_bias=True, **conv_attrs)
    np.testing.assert_allclose(np.vdot(forward.astype(np.float64), y),
                               np.vdot(x.astype(np.float64), back), rtol=1e-4)


def test_deconvolution_shape_inference() -> None:
    filled, out = infer("Deconvolution", [(1, 4, 5, 5), None], kernel=(3, 3), num_filter=6,
                        num_group=2, stride=(2, 2), pad=(1, 1), adj=(1, 1))
    assert filled == [(1, 4, 5, 5), (4, 3, 3, 3)]
    assert out == [(1, 6, 10, 10)]
    filled, out = infer("Deconvolution", [(2, 3, 7, 7), None, None], kernel=(4, 4),
                        num_filter=2, stride=(2, 2), target_shape=(14, 13), no_bias=False)
    assert filled[1:] == [(3, 2, 4, 4), (2,)] and out == [(2, 2, 14, 13)]


@pytest.mark.parametrize("attrs, error, message", [
    ({"stride": (2,), "adj": (2,)}, OperatorError, "adj"),
    ({"stride": (2,), "target_shape": (9,)}, ShapeError, "too big"),
    # stride 1 leaves no room for the odd remainder target_shape puts into adj
    ({"target_shape": (3,)}, OperatorError, "adj"),
    ({"stride": (2,), "pad": (3,)}, ShapeError, "pad"),
])
def test_deconvolution_errors(attrs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        infer("Deconvolution", [(1, 1, 2), None], kernel=(3,), num_filter=1, **attrs)
    assert str(caught.value).startswith("Deconvolution:")


# ---- FullyConnected ------------------------------------------------------------------


def test_fully_connected_by_hand() -> None:
    x = np.array([[1, 2], [3, 4]], np.float32)
    w = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    b = np.array([1, 2, 3], np.float32)
    out = run1("FullyConnected", [x, w, b], num_hidden=3)
    np.testing.assert_array_equal(out, [[2, 4, 6], [4, 6, 10]])
    out = run1("FullyConnected", [x, w, b.reshape(3, 1)], num_hidden=3)  # (H, 1) bias
    np.testing.assert_array_equal(out, [[2, 4, 6], [4, 6, 10]])


def test_fully_connected_flatten_and_not() -> None:
    x, b = randn(2, 3, 4), randn(5)
    w_flat, w_last = randn(5, 12), randn(5, 4)
    out = run1("FullyConnected", [x, w_flat, b], num_hidden=5)
    flat = x.reshape(2, 12).astype(np.float64)
    expected = [[sum(flat[n, i] * w_flat[h, i] for i in range(12)) + b[h] for h in range(5)]
                for n in range(2)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    out = run1("FullyConnected", [x, w_last, b], num_hidden=5, flatten=False)
    expected = [[[sum(float(x[n, t, i]) * w_last[h, i] for i in range(4)) + b[h]
                  for h in range(5)] for t in range(3)] for n in range(2)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_fully_connected_shape_inference() -> None:
    assert infer("FullyConnected", [(8, 3, 4, 5), None, None], num_hidden=10) == (
        [(8, 3, 4, 5), (10, 60), (10,)], [(8, 10)])
    assert infer("FullyConnected", [(8, 3, 5), None], num_hidden=10, flatten=False,
                 no_bias=True) == ([(8, 3, 5), (10, 5)], [(8, 3, 10)])
    with pytest.raises(ShapeError, match="FullyConnected: weight"):
        infer("FullyConnected", [(8, 5), (10, 4), None], num_hidden=10)


# ---- Activation and LeakyReLU --------------------------------------------------------

X_ACT = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)


@pytest.mark.parametrize("act_type, formula", [
    ("relu", lambda x: np.maximum(x, 0)),
    ("sigmoid", special.expit),
    ("tanh", np.tanh),
    ("softrelu", lambda x: np.log1p(np.exp(x))),
    ("softsign", lambda x: x / (1 + abs(x))),
    ("log_sigmoid", lambda x: np.log(special.expit(x))),
    ("mish", lambda x: x * np.tanh(np.log1p(np.exp(x)))),
])
def test_activation(act_type: str, formula: Any) -> None:
    x = np.concatenate([X_ACT, randn(20)])
    out = run1("Activation", [x], act_type=act_type)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, formula(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("attrs, expected", [
    ({}, [-0.5, -0.125, 0, 1.5]),
    ({"slope": 0.1}, [-0.2, -0.05, 0, 1.5]),
    ({"act_type": "rrelu"}, [-0.459, -0.11475, 0, 1.5]),  # slope (0.125 + 0.334) / 2
    ({"act_type": "elu", "slope": 2.0}, [2 * math.expm1(-2), 2 * math.expm1(-0.5), 0, 1.5]),
    ({"act_type": "selu"}, [1.0507009873554805 * 1.6732632423543772 * math.expm1(-2),
                            1.0507009873554805 * 1.6732632423543772 * math.expm1(-0.5),
                            0, 1.0507009873554805 * 1.5]),
])
def test_leaky_relu_by_hand(attrs: dict, expected: list) -> None:
    np.testing.assert_allclose(run1("LeakyReLU", [X_ACT], **attrs), expected, rtol=1e-6)


def test_gelu_is_the_erf_form() -> None:
    x = np.concatenate([X_ACT, randn(50) * 3]).astype(np.float64)
    out = run1("LeakyReLU", [x], act_type="gelu")
    np.testing.assert_allclose(out, 0.5 * x * (1 + special.erf(x / np.sqrt(2))), rtol=1e-12)


def test_prelu_scales_each_channel() -> None:
    x, gamma = randn(2, 3, 4), np.array([0.1, 0.2, 0.3], np.float32)
    out = run1("LeakyReLU", [x, gamma], act_type="prelu")
    for n, c, i in itertools.product(range(2), range(3), range(4)):
        value = x[n, c, i]
        assert out[n, c, i] == pytest.approx(value if value > 0 else gamma[c] * value)
    shared = run1("LeakyReLU", [x, np.array([0.5], np.float32)], act_type="prelu")
    np.testing.assert_allclose(shared, np.where(x > 0, x, 0.5 * x))


def test_prelu_infers_gamma() -> None:
    assert infer("LeakyReLU", [(2, 7, 5), None], act_type="prelu") == (
        [(2, 7, 5), (7,)], [(2, 7, 5)])
    with pytest.raises(ShapeError, match="LeakyReLU: gamma"):
        infer("LeakyReLU", [(2, 7, 5), (3,)], act_type="prelu")


# ---- Pooling -------------------------------------------------------------------------

POOL_X = row(1, 2, 3, 4, 5, 6)
POOL_3_2_1 = {"kernel": (3,), "stride": (2,), "pad": (1,)}


@pytest.mark.parametrize("attrs, expected", [
    # windows over [_,1,2,3,4,5,6,_]: [-1,2) [1,4) [3,6), full adds [5,7)
    ({"pool_type": "max"}, [2, 4, 6]),
    ({"pool_type": "max", "pooling_convention": "full"}, [2, 4, 6, 6]),
    ({"pool_type": "sum", "pooling_convention": "full"}, [3, 9, 15, 6]),
    # the last window ends at size + pad = 7: 2 positions, not 3
    ({"pool_type": "avg", "pooling_convention": "full"}, [1, 3, 5, 3]),
    ({"pool_type": "avg", "pooling_convention": "full", "count_include_pad": False},
     [1.5, 3, 5, 6]),
    ({"pool_type": "avg", "count_include_pad": True}, [1, 3, 5]),
])
def test_pooling_1d_by_hand(attrs: dict, expected: list) -> None:
    out = run1("Pooling", [POOL_X], **POOL_3_2_1, **attrs)
    np.testing.assert_allclose(out, [[expected]])
    assert out.dtype == np.float32


def test_pooling_window_past_the_padded_edge() -> None:
    # full convention: 1 + ceil((5 - 1) / 3) = 3 windows starting at 0, 3, 6;
    # the last lies wholly past the data
    x = row(1, 2, 3, 4, 5)
    attrs = dict(kernel=(1,), stride=(3,), pooling_convention="full")
    np.testing.assert_array_equal(run1("Pooling", [x], **attrs), [[[1, 4, F32_MIN]]])
    np.testing.assert_array_equal(run1("Pooling", [x], pool_type="sum", **attrs), [[[1, 4, 0]]])
    # A window with no data averages to 0 (MXNet 1.9.1 prints [[[1. 4. 0.]]]
    # here and [[[1. 3. 0.]]] for both below), whatever its divisor would be.
    np.testing.assert_array_equal(run1("Pooling", [x], pool_type="avg", **attrs), [[[1, 4, 0]]])
    for include_pad in (True, False):
        out = run1("Pooling", [row(1, 2, 3, 4)], pool_type="avg", count_include_pad=include_pad,
                   **attrs | {"stride": (2,)})
        np.testing.assert_array_equal(out, [[[1, 3, 0]]])


def test_pooling_windows_of_padding_only() -> None:
    # Printed by MXNet 1.9.1 for arange(1, 10) as a 3x3 image, kernel 2,
    # stride 2, pad 1, full convention: the last row and column of windows
    # hold padding only and average to 0 with and without counting it.
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    attrs = dict(kernel=(2, 2), stride=(2, 2), pad=(1, 1), pool_type="avg",
                 pooling_convention="full")
    out = run1("Pooling", [x], count_include_pad=True, **attrs)
    np.testing.assert_allclose(out.ravel(), [0.25, 1.25, 0, 2.75, 7, 0, 0, 0, 0])
    out = run1("Pooling", [x], count_include_pad=False, **attrs)
    np.testing.assert_allclose(out.ravel(), [1, 2.5, 0, 5.5, 7, 0, 0, 0, 0])


def test_pooling_same_convention() -> None:
    # ceil(5 / 2) = 3 windows [0,2) [2,4) [4,5)
    x = row(1, 2, 3, 4, 5)
    attrs = dict(kernel=(2,), stride=(2,), pooling_convention="same")
    np.testing.assert_array_equal(run1("Pooling", [x], **attrs), [[[2, 4, 5]]])
    np.testing.assert_array_equal(run1("Pooling", [x], pool_type="avg", **attrs),
                                  [[[1.5, 3.5, 5]]])
    assert infer("Pooling", [(2, 3, 11)], **attrs | {"stride": (3,)})[1] == [(2, 3, 4)]


@pytest.mark.parametrize("p, expected", [
    (1, [-1, 3]),  # plain sums: no absolute value
    (2, [5, math.sqrt(5)]),
    (3, [np.cbrt(27 - 64), np.cbrt(9)]),
])
def test_lp_pooling_by_hand(p: int, expected: list) -> None:
    out = run1("Pooling", [row(3, -4, 1, 2)], kernel=(2,), stride=(2,), pool_type="lp",
               p_value=p)
    np.testing.assert_allclose(out, [[expected]], rtol=1e-6)


def test_global_pooling() -> None:
    x = randn(2, 3, 4, 5)
    out = run1("Pooling", [x], global_pool=True, pool_type="avg")
    np.testing.assert_allclose(out, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    out = run1("Pooling", [x], global_pool=True, kernel=(2, 2), pad=(1, 1))  # both ignored
    np.testing.assert_array_equal(out, x.max(axis=(2, 3), keepdims=True))
    assert infer("Pooling", [(2, 3, 4, 5, 6)], global_pool=True)[1] == [(2, 3, 1, 1, 1)]


def pool_oracle(x: np.ndarray, kernel: tuple, stride: tuple, pad: tuple, pool_type: str,
                convention: str, include_pad: bool, p: int = 1) -> np.ndarray:
    """MXNet's pooling, one window at a time: window [o*s - p, min(o*s - p + k,
    x + p)) clipped to the data; avg divides by the unclipped or clipped size."""
    spatial = x.shape[2:]
    rounding = math.floor if convention == "valid" else math.ceil
    out = [rounding((n + 2 * q - k) / s) + 1 for n, k, s, q in zip(spatial, kernel, stride, pad)]
    result = np.empty(x.shape[:2] + tuple(out))
    for n, c, *position in itertools.product(range(x.shape[0]), range(x.shape[1]),
                                             *(range(o) for o in out)):
        starts = [o * s - q for o, s, q in zip(position, stride, pad)]
        ends = [min(a + k, size + q) for a, k, size, q in zip(starts, kernel, spatial, pad)]
        lows = [max(a, 0) for a in starts]
        highs = [min(e, size) for e, size in zip(ends, spatial)]
        region = x[n, c][tuple(slice(lo, hi) for lo, hi in zip(lows, highs))].astype(np.float64)
        if pool_type == "max":
            value = region.max() if region.size else F32_MIN
        elif pool_type == "lp":
            value = float(np.sum(region ** p)) ** (1 / p)
        else:
            value = region.sum()
            if pool_type == "avg" and region.size:  # no data: 0
                sizes = zip(starts, ends) if include_pad else zip(lows, highs)
                value /= math.prod(b - a for a, b in sizes)
        result[(n, c, *position)] = value
    return result


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
@pytest.mark.parametrize("convention", ["valid", "full"])
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("spatial, kernel, stride, pad", [
    ((7, 9), (3, 2), (2, 3), (1, 1)),
    ((6, 5, 7), (2, 3, 3), (2, 1, 2), (1, 1, 0)),
])
def test_pooling_matches_loop(pool_type: str, convention: str, include_pad: bool,
                              spatial: tuple, kernel: tuple, stride: tuple,
                              pad: tuple) -> None:
    x = randn(2, 3, *spatial)
    out = run1("Pooling", [x], kernel=kernel, stride=stride, pad=pad, pool_type=pool_type,
               pooling_convention=convention, count_include_pad=include_pad)
    expected = pool_oracle(x, kernel, stride, pad, pool_type, convention, include_pad)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_lp2_pooling_matches_loop() -> None:
    x = randn(2, 2, 7, 6)
    out = run1("Pooling", [x], kernel=(3, 2), stride=(2, 2), pad=(1, 0), pool_type="lp",
               p_value=2, pooling_convention="full")
    expected = pool_oracle(x, (3, 2), (2, 2), (1, 0), "lp", "full", True, p=2)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("attrs, shape, error, message", [
    ({"kernel": (5,)}, (1, 1, 3), ShapeError, "exceeds the input"),
    # MXNet and onnxruntime refuse an empty spatial axis too (fuzzing found it)
    ({"kernel": (1, 1), "global_pool": True}, (1, 2, 0, 3), ShapeError, "axis 0 .* size 0"),
    ({"kernel": (2, 2), "pad": (1, 1), "pool_type": "avg"}, (1, 2, 3, 0), ShapeError,
     "axis 1 .* size 0"),
    ({"kernel": (2, 2), "pooling_convention": "same"}, (1, 1, 4, 4), ShapeError, "same"),
    ({"kernel": (2,), "pooling_convention": "same", "pad": (1,)}, (1, 1, 4), OperatorError,
     "same"),
    ({"kernel": (2,), "pool_type": "lp"}, (1, 1, 4), OperatorError, "p_value"),
    ({"kernel": (2,), "pool_type": "lp", "p_value": 4}, (1, 1, 4), OperatorError, "p_value"),
    ({}, (1, 1, 4), OperatorError, "kernel is required"),
    ({"kernel": (2, 2)}, (1, 1, 4), ShapeError, "4-D data"),
    ({"kernel": (2,)}, (4, 4), ShapeError, "3-D or 4-D or 5-D"),
    ({"kernel": (2, 2), "layout": "NHWC"}, (1, 4, 4, 1), OperatorError, "NHWC"),
])
def test_pooling_errors(attrs: dict, shape: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        infer("Pooling", [shape], **attrs)
    assert str(caught.value).startswith("Pooling:")


def test_pooling_shapes() -> None:
    attrs = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    assert infer("Pooling", [(1, 3, 32, 32)], **attrs)[1] == [(1, 3, 16, 16)]
    assert infer("Pooling", [(1, 3, 32, 32)], pooling_convention="full", **attrs)[1] == [
        (1, 3, 17, 17)]


# ---- BatchNorm -----------------------------------------------------------------------

BN_X = np.array([1, 3, 2, 6], np.float32).reshape(1, 2, 1, 2)
# eps 1 makes the inverse standard deviations 1/sqrt(3 + 1) and 1/sqrt(15 + 1)
BN_PARAMS = [np.array(v, np.float32) for v in ([2, 3], [10, 20], [1, 2], [3, 15])]


def test_batch_norm_by_hand() -> None:
    # fix_gamma (the default) ignores gamma: (x - mean) * invstd + beta
    out = run1("BatchNorm", [BN_X, *BN_PARAMS], eps=1.0)
    np.testing.assert_array_equal(out, [[[[10, 11]], [[20, 21]]]])
    out = run1("BatchNorm", [BN_X, *BN_PARAMS], eps=1.0, fix_gamma=False)
    np.testing.assert_array_equal(out, [[[[10, 12]], [[20, 23]]]])


def test_batch_norm_mean_var_outputs() -> None:
    # MXNet's CPU kernels put the moving mean and 1/sqrt(moving_var + eps) there
    out, mean, var = run("BatchNorm", [BN_X, *BN_PARAMS], eps=1.0, output_mean_var=True)
    np.testing.assert_array_equal(out, [[[[10, 11]], [[20, 21]]]])
    np.testing.assert_array_equal(mean, [1, 2])
    np.testing.assert_array_equal(var, [0.5, 0.25])


def test_batch_norm_along_last_axis() -> None:
    x = randn(4, 3)
    gamma, beta, mean = randn(3), randn(3), randn(3)
    var = RNG.random(3).astype(np.float32)
    out = run1("BatchNorm", [x, gamma, beta, mean, var], axis=-1, fix_gamma=False)
    expected = [[(x[n, c] - mean[c]) / math.sqrt(var[c] + 1e-3) * gamma[c] + beta[c]
                 for c in range(3)] for n in range(4)]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_batch_norm_inference() -> None:
    op = get("BatchNorm")
    assert infer("BatchNorm", [(2, 5, 3, 3), None, None, None, None]) == (
        [(2, 5, 3, 3)] + [(5,)] * 4, [(2, 5, 3, 3)])
    assert infer("BatchNorm", [(2, 5, 3), None, None, None, None], axis=2,
                 output_mean_var=True)[1] == [(2, 5, 3), (3,), (3,)]
    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)
    assert op.infer_type(parse("BatchNorm"), [f16, None, None, None, None]) == (
        [f16] + [f32] * 4, [f16])
    with pytest.raises(ShapeError, match="BatchNorm: gamma"):
        infer("BatchNorm", [(2, 5, 3, 3), (4,), None, None, None])
    with pytest.raises(ShapeError, match="BatchNorm: axis 4"):
        infer("BatchNorm", [(2, 5, 3, 3), None, None, None, None], axis=4)


def test_batch_norm_float16_data_float32_parameters() -> None:
    out = run1("BatchNorm", [BN_X.astype(np.float16), *BN_PARAMS], eps=1.0)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [[[[10, 11]], [[20, 21]]]])


# ---- LayerNorm and InstanceNorm ------------------------------------------------------


def test_layer_norm_by_hand() -> None:
    # mean 2.5, variance 1.25
    x = np.array([[1, 2, 3, 4]], np.float32)
    out = run1("LayerNorm", [x, np.ones(4, np.float32), np.zeros(4, np.float32)], eps=0.0)
    np.testing.assert_allclose(out, [[-1.5, -0.5, 0.5, 1.5]] / np.sqrt(1.25), rtol=1e-6)


def test_layer_norm_along_axis_1() -> None:
    x, gamma, beta = randn(2, 3, 4), randn(3), randn(3)
    out, mean, std = run("LayerNorm", [x, gamma, beta], axis=1, output_mean_var=True)
    x64 = x.astype(np.float64)
    for n, i in itertools.product(range(2), range(4)):
        column = x64[n, :, i]
        mu = sum(column) / 3
        sigma = math.sqrt(sum((column - mu) ** 2) / 3 + 1e-5)
        np.testing.assert_allclose(out[n, :, i], (column - mu) / sigma * gamma + beta,
                                   rtol=1e-5, atol=1e-6)
        assert mean[n, 0, i] == pytest.approx(mu, rel=1e-5, abs=1e-6)
        assert std[n, 0, i] == pytest.approx(sigma, rel=1e-5)
    assert infer("LayerNorm", [(2, 3, 4), None, None], output_mean_var=True) == (
        [(2, 3, 4), (4,), (4,)], [(2, 3, 4), (2, 3, 1), (2, 3, 1)])


def test_instance_norm() -> None:
    x, gamma, beta = randn(2, 3, 4, 5), randn(3), randn(3)
    out = run1("InstanceNorm", [x, gamma, beta])
    for n, c in itertools.product(range(2), range(3)):
        plane = x[n, c].astype(np.float64)
        expected = (plane - plane.mean()) / math.sqrt(plane.var() + 1e-3) * gamma[c] + beta[c]
        np.testing.assert_allclose(out[n, c], expected, rtol=1e-5, atol=1e-5)
    assert infer("InstanceNorm", [(2, 3, 4), None, None]) == ([(2, 3, 4), (3,), (3,)],
                                                             [(2, 3, 4)])
    with pytest.raises(ShapeError, match="InstanceNorm"):
        infer("InstanceNorm", [(2, 3), None, None])


# ---- Dropout, Flatten ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["training", "always"])
def test_dropout_is_identity(mode: str) -> None:
    x = randn(3, 4)
    out = run1("Dropout", [x], p=0.7, mode=mode, axes=(1,), cudnn_off=True)
    np.testing.assert_array_equal(out, x)
    assert out is not x
    with pytest.raises(OperatorError, match="Dropout: p=1.5"):
        run("Dropout", [x], p=1.5)


def test_flatten() -> None:
    x = randn(2, 3, 4)
    for name in ("Flatten", "flatten"):
        np.testing.assert_array_equal(run1(name, [x]), x.reshape(2, 12))
    assert infer("Flatten", [(5,)]) == ([(5,)], [(5, 1)])


# ---- softmax family ------------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("temperature", [None, 0.5])
def test_softmax_and_log_softmax(axis: int, temperature: float | None) -> None:
    x = randn(3, 4, 5) * 4
    scaled = x.astype(np.float64) / (temperature or 1)
    attrs = {"axis": axis} | ({} if temperature is None else {"temperature": temperature})
    np.testing.assert_allclose(run1("softmax", [x], **attrs), special.softmax(scaled, axis),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run1("log_softmax", [x], **attrs),
                               special.log_softmax(scaled, axis), rtol=1e-5, atol=1e-6)


def test_softmax_by_hand_and_dtype() -> None:
    # softmax([0, ln 3]) = [1/4, 3/4]
    out = run1("softmax", [np.array([0, math.log(3)], np.float32)], dtype="float64")
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [0.25, 0.75], rtol=1e-7)
    op = get("softmax")
    f16 = np.dtype(np.float16)
    assert op.infer_type(op.parse({"dtype": "float32"}), [f16]) == ([f16], [np.float32])
    with pytest.raises(OperatorError, match="softmax: use_length"):
        infer("softmax", [(2, 3), (2,)], use_length=True)


def test_softmax_activation_modes() -> None:
    x = randn(2, 3, 4)
    np.testing.assert_allclose(run1("SoftmaxActivation", [x]), special.softmax(x, -1),
                               rtol=1e-5)
    np.testing.assert_allclose(run1("SoftmaxActivation", [x], mode="channel"),
                               special.softmax(x, 1), rtol=1e-5)
    with pytest.raises(ShapeError, match="SoftmaxActivation"):
        infer("SoftmaxActivation", [(2, 3)], mode="channel")


def test_softmax_output_forward() -> None:
    x, label = randn(2, 3, 4), np.zeros((2, 3), np.float32)
    # by default the data is flattened to (N, -1)
    np.testing.assert_allclose(run1("SoftmaxOutput", [x, label]),
                               special.softmax(x.reshape(2, 12), 1).reshape(2, 3, 4), rtol=1e-5)
    np.testing.assert_allclose(run1("SoftmaxOutput", [x, label], preserve_shape=True),
                               special.softmax(x, -1), rtol=1e-5)
    np.testing.assert_allclose(run1("Softmax", [x, np.zeros((2, 4))], multi_output=True),
                               special.softmax(x, 1), rtol=1e-5)


def test_softmax_output_label_shape() -> None:
    assert infer("SoftmaxOutput", [(8, 10), None]) == ([(8, 10), (8,)], [(8, 10)])
    assert infer("SoftmaxOutput", [(2, 3, 4), None])[0][1] == (2, 3)
    assert infer("SoftmaxOutput", [(2, 3, 4, 5), None], multi_output=True)[0][1] == (2, 20)
    for label in [(2, 4, 5), (2, 1, 4, 5), (2, 3, 4, 5)]:
        assert infer("SoftmaxOutput", [(2, 3, 4, 5), label], multi_output=True)[0][1] == label
    with pytest.raises(ShapeError, match="SoftmaxOutput: label"):
        infer("SoftmaxOutput", [(8, 10), (10,)])


# ---- Embedding -----------------------------------------------------------------------


def test_embedding_by_hand() -> None:
    weight = np.array([[0, 1], [10, 11], [20, 21], [30, 31]], np.float32)
    # indices truncate toward zero and clip into [0, 3]
    data = np.array([[0.0, 2.7], [-1.5, 9.0]], np.float32)
    out = run1("Embedding", [data, weight], input_dim=4, output_dim=2)
    np.testing.assert_array_equal(out, [[[0, 1], [20, 21]], [[0, 1], [30, 31]]])
    assert out.dtype == np.float32
    out = run1("Embedding", [data, weight.astype(np.float64)], input_dim=4, output_dim=2,
               dtype="float64")
    assert out.dtype == np.float64


def test_embedding_inference() -> None:
    assert infer("Embedding", [(2, 5), None], input_dim=7, output_dim=3) == (
        [(2, 5), (7, 3)], [(2, 5, 3)])
    op = get("Embedding")
    attrs = op.parse({"input_dim": 7, "output_dim": 3, "dtype": "float16"})
    i32, f16 = np.dtype(np.int32), np.dtype(np.float16)
    assert op.infer_type(attrs, [i32, None]) == ([i32, f16], [f16])
    with pytest.raises(ShapeError, match="Embedding: weight"):
        infer("Embedding", [(2, 5), (6, 3)], input_dim=7, output_dim=3)


# ---- UpSampling ----------------------------------------------------------------------


def test_upsampling_nearest_by_hand() -> None:
    x = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    out = run1("UpSampling", [x], scale=2, sample_type="nearest", num_args=1)
    np.testing.assert_array_equal(out[0, 0], [[1, 1, 2, 2], [1, 1, 2, 2],
                                              [3, 3, 4, 4], [3, 3, 4, 4]])


def test_upsampling_several_inputs() -> None:
    # every input is scaled to arg0's size * scale, then concatenated
    a, b, c = randn(1, 1, 2, 2), randn(1, 2, 4, 4), np.full((1, 1, 1, 1), 7, np.float32)
    out = run1("UpSampling", [a, b, c], scale=2, sample_type="nearest", num_args=3)
    assert out.shape == (1, 4, 4, 4)
    for i, j in itertools.product(range(4), range(4)):
        assert out[0, 0, i, j] == a[0, 0, i // 2, j // 2]
        np.testing.assert_array_equal(out[0, 1:3, i, j], b[0, :, i, j])
        assert out[0, 3, i, j] == 7
    summed = run1("UpSampling", [a, c], scale=2, sample_type="nearest", num_args=2,
                  multi_input_mode="sum")
    np.testing.assert_allclose(summed[0, 0], a[0, 0].repeat(2, 0).repeat(2, 1) + 7)


@pytest.mark.parametrize("attrs, shapes, error, message", [
    ({"sample_type": "bilinear", "num_args": 1}, [(1, 1, 2, 2), None], OperatorError,
     "bilinear"),
    ({"num_args": 2}, [(1, 1, 2, 2), (1, 1, 3, 3)], ShapeError, "whole factor"),
    ({"num_args": 2, "multi_input_mode": "sum"}, [(1, 1, 2, 2), (1, 2, 4, 4)], ShapeError,
     "equal channels"),
    ({"num_args": 1}, [(1, 2, 2)], ShapeError, "4-D"),
])
def test_upsampling_errors(attrs: dict, shapes: list, error: type, message: str) -> None:
    attrs = {"scale": 2, "sample_type": "nearest"} | attrs
    with pytest.raises(error, match=message) as caught:
        infer("UpSampling", shapes, **attrs)
    assert str(caught.value).startswith("UpSampling:")


# ---- Pad -----------------------------------------------------------------------------

PAD_X = np.array([[1, 2, 3], [4, 5, 6]], np.float32).reshape(1, 1, 2, 3)
PAD_WIDTH = (0, 0, 0, 0, 1, 0, 0, 2)  # one row before, two columns after


@pytest.mark.parametrize("attrs, expected", [
    ({"constant_value": 9}, [[9, 9, 9, 9, 9], [1, 2, 3, 9, 9], [4, 5, 6, 9, 9]]),
    ({"mode": "edge"}, [[1, 2, 3, 3, 3], [1, 2, 3, 3, 3], [4, 5, 6, 6, 6]]),
    ({"mode": "reflect"}, [[4, 5, 6, 5, 4], [1, 2, 3, 2, 1], [4, 5, 6, 5, 4]]),
])
def test_pad_by_hand(attrs: dict, expected: list) -> None:
    out = run1("Pad", [PAD_X], pad_width=PAD_WIDTH, **attrs)
    np.testing.assert_array_equal(out[0, 0], expected)
    assert out.dtype == np.float32


def test_pad_5d_shape() -> None:
    assert infer("Pad", [(1, 2, 3, 4, 5)], pad_width=(0, 0, 0, 0, 1, 2, 0, 0, 3, 3))[1] == [
        (1, 2, 6, 4, 11)]


@pytest.mark.parametrize("shape, attrs, error, message", [
    ((2, 3, 4), {"pad_width": (0, 0, 0, 0, 1, 1)}, ShapeError, "4-D or 5-D"),
    ((1, 1, 2, 3), {"pad_width": (0, 1, 0, 0, 1, 1, 1, 1)}, OperatorError, "first two"),
    ((1, 1, 2, 3), {"pad_width": (0, 0, 0, 0, 1, 1)}, OperatorError, "8 entries"),
    ((1, 1, 2, 3), {"pad_width": (0, 0, 0, 0, 2, 0, 0, 0), "mode": "reflect"}, ShapeError,
     "reflect"),
])
def test_pad_errors(shape: tuple, attrs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        infer("Pad", [shape], **attrs)
    assert str(caught.value).startswith("Pad:")


# ---- attribute errors ----------------------------------------------------------------


@pytest.mark.parametrize("name, attrs, message", [
    ("Convolution", {"kernel": (3, 3)}, "'num_filter' is required"),
    ("Pooling", {"pool_type": "median"}, "pool_type"),
    ("LeakyReLU", {"act_type": "swish"}, "act_type"),
    ("BatchNorm", {"fix_gamma": "maybe"}, "fix_gamma"),
    ("Activation", {"act_type": "relu", "slope": 1}, "unknown attribute 'slope'"),
    ("Embedding", {"input_dim": 3}, "'output_dim' is required"),
])
def test_bad_attributes_name_the_operator(name: str, attrs: dict, message: str) -> None:
    with pytest.raises(OperatorError, match=message) as caught:
        get(name).parse(attrs)
    assert str(caught.value).startswith(f"{name}:")


def test_tuning_attributes_are_accepted() -> None:
    parse("Convolution", workspace=2048, cudnn_tune="fastest", cudnn_off=True)
    parse("BatchNorm", cudnn_off=True, min_calib_range=-1.0, max_calib_range=1.0)
    parse("Pooling", cudnn_off=True)
