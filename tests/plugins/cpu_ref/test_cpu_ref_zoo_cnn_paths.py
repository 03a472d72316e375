"""The paths of cpu_ref's symbolic mode that the PyTorch-exported CNNs
(EfficientNet, MobileNetV3) take: SiLU written as x * sigmoid(x) fused into
one step, the squeeze-excitation scale broadcast over whole planes, 5 x 5
and 7 x 7 depthwise convolutions at stride 1 and 2 with their vector
kernels, ONNX HardSwish / HardSigmoid vectorised, and residuals written
as broadcast_add fused into their convolution. Results match the
host's unfused CPU path (MXNet graphs) or onnxruntime (ONNX graphs)."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import host_outputs, loaded_on_cpu_ref, random_weights

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5


def _silu(x: mx.sym.Symbol, name: str, swapped: bool = False) -> mx.sym.Symbol:
    gate = mx.sym.sigmoid(x, name=f"{name}_sigmoid")
    if swapped:
        return mx.sym.elemwise_mul(gate, x, name=f"{name}_mul")
    return mx.sym.broadcast_mul(x, gate, name=f"{name}_mul")


def _graph() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    stem = mx.sym.Convolution(data, num_filter=16, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = _silu(stem, "stem")
    # Depthwise 5 x 5 at stride 1 (rows of 21: a vector and a masked tail)
    # and at stride 2, then 7 x 7, each followed by SiLU in either order.
    dw5 = mx.sym.Convolution(stem, num_filter=16, num_group=16, kernel=(5, 5), pad=(2, 2),
                             name="dw5")
    dw5 = _silu(dw5, "dw5", swapped=True)
    dw5s2 = mx.sym.Convolution(dw5, num_filter=16, num_group=16, kernel=(5, 5), pad=(2, 2),
                               stride=(2, 2), name="dw5s2")
    dw5s2 = mx.sym.BatchNorm(dw5s2, fix_gamma=False, eps=1e-3, name="dw5s2_bn")
    dw5s2 = _silu(dw5s2, "dw5s2")
    dw7 = mx.sym.Convolution(dw5s2, num_filter=16, num_group=16, kernel=(7, 7), pad=(3, 3),
                             name="dw7")
    # Squeeze-excitation: pooled, two 1 x 1 layers, sigmoid, the planes
    # scaled channel by channel.
    squeeze = mx.sym.Pooling(dw7, kernel=(1, 1), global_pool=True, pool_type="avg",
                             name="se_pool")
    squeeze = mx.sym.Convolution(squeeze, num_filter=4, kernel=(1, 1), name="se_reduce")
    squeeze = _silu(squeeze, "se_reduce")
    squeeze = mx.sym.Convolution(squeeze, num_filter=16, kernel=(1, 1), name="se_expand")
    scaled = mx.sym.broadcast_mul(dw7, mx.sym.sigmoid(squeeze, name="se_gate"), name="se_scale")
    # A sigmoid that is also a graph output stays a step of its own.
    head_gate = mx.sym.sigmoid(scaled, name="head_gate")
    out = mx.sym.broadcast_mul(scaled, head_gate, name="head_mul")
    return mx.sym.Group([out, head_gate])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 2])
def test_efficientnet_style_graph_matches_host(threads: int, batch: int) -> None:
    sym = _graph()
    data = np.random.default_rng(0).standard_normal((batch, 3, 21, 21)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=3)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        got = list(model.infer({"data": data}).values())
    want = host_outputs(sym, data, weights)
    assert len(got) == len(want) == 2
    for ours, theirs in zip(got, want):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def _residual_graph() -> mx.sym.Symbol:
    """ResNet's block as PyTorch exports it: the residual a broadcast_add of
    two operands of one shape (fused into the convolution with the relu
    after it), then a broadcast_add that does broadcast (not fused)."""
    data = mx.sym.Variable("data")
    stem = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = mx.sym.Activation(stem, act_type="relu", name="stem_relu")
    body = mx.sym.Convolution(stem, num_filter=8, kernel=(3, 3), pad=(1, 1), name="body")
    body = mx.sym.BatchNorm(body, fix_gamma=False, eps=1e-3, name="body_bn")
    body = mx.sym.broadcast_add(stem, body, name="residual")
    body = mx.sym.Activation(body, act_type="relu", name="body_relu")
    shift = mx.sym.Variable("shift", shape=(1, 8, 1, 1))
    last = mx.sym.Convolution(body, num_filter=8, kernel=(1, 1), name="last")
    return mx.sym.broadcast_add(last, shift, name="shifted")


@pytest.mark.parametrize("threads", [1, 2])
def test_broadcast_add_residual_matches_host(threads: int) -> None:
    sym = _residual_graph()
    data = np.random.default_rng(1).standard_normal((2, 3, 10, 12)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=4)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        got = next(iter(model.infer({"data": data}).values()))
    np.testing.assert_allclose(got, host_outputs(sym, data, weights)[0], rtol=RTOL, atol=ATOL)


def test_silu_keeps_extreme_values() -> None:
    """x * sigmoid(x) fused: large negative inputs give -0 or tiny values,
    large positive ones x itself, NaN stays NaN, as the unfused steps."""
    data = mx.sym.Variable("data")
    sym = mx.sym.broadcast_mul(data, mx.sym.sigmoid(data))
    values = np.array([[-1e4, -100.0, -88.5, -20.0, -1.0, -0.0, 0.0, 1e-3, 3.0, 30.0, 1e4,
                        np.nan, np.inf, -np.inf, 5.5, -5.5]], np.float32)
    with loaded_on_cpu_ref(sym, values, {}, 1) as model:
        got = next(iter(model.infer({"data": values}).values()))
    with np.errstate(over="ignore", invalid="ignore"):
        want = values * (1.0 / (1.0 + np.exp(-values.astype(np.float64))))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-30)
    assert np.isnan(got[0, 11])
    assert got[0, 12] == np.inf


def _onnx_hard_activations(path: str) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c"], ["hs"]),
        helper.make_node("HardSigmoid", ["hs"], ["y"], alpha=0.25, beta=0.4),
        helper.make_node("HardSigmoid", ["c"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "hard", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 9, 11]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 8, 9, 11])],
        initializer=[weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.mark.needs_onnx
@pytest.mark.parametrize("threads", [1, 2])
def test_onnx_hard_swish_and_hard_sigmoid_match_onnxruntime(tmp_path, threads: int) -> None:
    onnx = pytest.importorskip("onnx", reason="the onnx package builds the model")
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle")
    from acc_host.onnx.backend import prepare

    path = str(tmp_path / "hard.onnx")
    _onnx_hard_activations(path)
    x = (3 * np.random.default_rng(6).standard_normal((2, 3, 9, 11))).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    mx.cpu_ref(0).configure(num_threads=threads)
    try:
        got = prepare(onnx.load(path), accelerator="cpu_ref").run({"x": x})
    finally:
        mx.cpu_ref(0).configure(num_threads=1)
    for ours, theirs in zip(got, want):
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=RTOL, atol=ATOL)
