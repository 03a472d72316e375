"""Depthwise convolutions computed sixteen channels at a time on AVX-512
(MobileNetV3's and EfficientNet's 5 x 5 and small 3 x 3 layers): the planes
transposed into a padded position-major block, each output bias then the
taps in (kh, kw) order by fused multiply-adds, then the fused residual and
activation, transposed back. The values are those of the row kernels bit
for bit: a channel count not a multiple of 16 leaves its last planes to
those kernels, so rotating the channels by 16 moves planes from one path to
the other, and each plane must come out the same. They are the same on 1
and 2 threads (whose shares cut the groups of 16), and within float
rounding of onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx

pytestmark = pytest.mark.needs_onnx

RTOL, ATOL = 1e-4, 1e-5


def _model(channels: int, height: int, width: int, k: int, stride: int, act: str,
           residual: bool, seed: int, bias: bool = True):  # -> onnx.ModelProto
    """x -> depthwise Conv (k x k, padding k // 2) [-> Add r] [-> act]."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((channels, 1, k, k)) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32),
                                             "b"))
        ins.append("b")
    out_h = (height + 2 * (k // 2) - k) // stride + 1
    out_w = (width + 2 * (k // 2) - k) // stride + 1
    nodes = [helper.make_node("Conv", ins, ["c"], pads=[k // 2] * 4, strides=[stride] * 2,
                              group=channels)]
    last = "c"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                            [1, channels, height, width])]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT,
                                                    [1, channels, out_h, out_w]))
        nodes.append(helper.make_node("Add", [last, "r"], ["sum"]))
        last = "sum"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    elif act == "clip":
        inits += [numpy_helper.from_array(np.float32(0.0), "lo"),
                  numpy_helper.from_array(np.float32(6.0), "hi")]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
    elif act == "hard_swish":
        nodes.append(helper.make_node("HardSwish", [last], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "dw", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(model, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 100)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _on_cpu_ref(model, feeds: dict[str, np.ndarray], threads: int) -> np.ndarray:
    from acc_host.onnx.backend import prepare

    rep = prepare(model, accelerator="cpu_ref")
    mx.cpu_ref(0).configure(num_threads=threads)
    try:
        return np.asarray(rep.run(feeds)[0])
    finally:
        mx.cpu_ref(0).configure(num_threads=1)


def _on_onnxruntime(model, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _rotated(model, feeds: dict[str, np.ndarray], shift: int):
    """The same layer with its channels rolled by shift (weights, biases,
    inputs): output channel c of the original is channel c + shift."""
    from onnx import numpy_helper

    rolled = type(model)()
    rolled.CopyFrom(model)
    for init in rolled.graph.initializer:
        if init.name in ("w", "b"):
            init.CopyFrom(numpy_helper.from_array(
                np.roll(numpy_helper.to_array(init), shift, axis=0), init.name))
    return rolled, {name: np.roll(v, shift, axis=1) for name, v in feeds.items()}


CASES = [  # channels, height, width, k, stride, act, residual
    (16, 7, 7, 5, 1, "relu", False),
    (24, 14, 14, 5, 2, "hard_swish", False),
    (40, 28, 28, 5, 1, "clip", True),
    (40, 7, 7, 3, 1, "hard_swish", True),
    (24, 14, 14, 3, 2, "clip", False),
    (40, 9, 11, 5, 2, "none", False),
    (40, 11, 9, 3, 1, "relu", True),
    (24, 28, 28, 3, 1, "none", False),  # the row kernels: the block is for 7 x 7
    (40, 14, 14, 7, 1, "relu", False),
    (72, 56, 56, 5, 2, "hard_swish", False),  # 2 threads: five groups, by planes
]


@pytest.mark.parametrize(("channels", "height", "width", "k", "stride", "act", "residual"),
                         CASES)
def test_block_matches_onnxruntime_and_threads(channels: int, height: int, width: int, k: int,
                                               stride: int, act: str, residual: bool) -> None:
    model = _model(channels, height, width, k, stride, act, residual, seed=channels + height)
    feeds = _feeds(model, channels + width)
    one = _on_cpu_ref(model, feeds, 1)
    np.testing.assert_allclose(one, _on_onnxruntime(model, feeds), rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(_on_cpu_ref(model, feeds, 2), one)


@pytest.mark.parametrize(("height", "width", "k", "stride", "residual"),
                         [(7, 7, 5, 1, True), (14, 14, 5, 2, False), (28, 28, 5, 1, False),
                          (9, 11, 3, 1, True), (14, 14, 3, 2, False), (56, 56, 5, 2, False),
                          (7, 7, 7, 1, False)])
def test_block_equals_row_kernels_bit_for_bit(height: int, width: int, k: int, stride: int,
                                              residual: bool) -> None:
    """40 channels: planes 0-31 in two blocks, 32-39 by the row kernels.
    Rolled by 16, planes 16-23 move to 32-39 (the row kernels) and 32-39
    to 8-15 (a block): those planes take both paths."""
    model = _model(40, height, width, k, stride, "hard_swish", residual, seed=height * width)
    feeds = _feeds(model, k)
    base = _on_cpu_ref(model, feeds, 1)
    rolled, rolled_feeds = _rotated(model, feeds, 16)
    moved = np.roll(_on_cpu_ref(rolled, rolled_feeds, 1), -16, axis=1)
    np.testing.assert_array_equal(moved, base)
    np.testing.assert_allclose(base, _on_onnxruntime(model, feeds), rtol=RTOL, atol=ATOL)

