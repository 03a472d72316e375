"""The host-only ONNX operators (Attention, GridSample, NonMaxSuppression,
QuantizeLinear/DequantizeLinear, DFT, ...) against onnxruntime at shapes
and attributes the backend suite's node cases do not draw, and their typed
errors for bad attributes and inputs, naming the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX host operators need the onnx test extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle here")

from onnx import TensorProto, helper  # noqa: E402

from acc_host.errors import AccHostError, UnsupportedOnnxOperatorError  # noqa: E402
from acc_host.onnx.backend import AccHostBackend  # noqa: E402

F32 = TensorProto.FLOAT


def _model(node: Any, inputs: list[tuple[str, int, list]], outputs: list[tuple[str, int]],
           opset: int) -> Any:
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _both(model: Any, feeds: dict[str, np.ndarray]) -> tuple[list, list]:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    actual = AccHostBackend.prepare(model).run([feeds[i.name] for i in model.graph.input])
    return list(actual), expected


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_onnxruntime(mode: str, padding: str, align: int) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    # Coordinates beyond [-1, 1] exercise the padding modes.
    grid = rng.uniform(-1.4, 1.4, (2, 4, 7, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode,
                            padding_mode=padding, align_corners=align)
    model = _model(node, [("x", F32, list(x.shape)), ("grid", F32, list(grid.shape))],
                   [("y", F32)], 20)
    actual, expected = _both(model, {"x": x, "grid": grid})
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression_matches_onnxruntime(center: int) -> None:
    rng = np.random.default_rng(3)
    corner = rng.uniform(0, 10, (2, 30, 2))
    size = rng.uniform(0.5, 4, (2, 30, 2))
    boxes = np.concatenate([corner, size], -1) if center else np.concatenate(
        [corner, corner + size], -1)
    scores = rng.uniform(0, 1, (2, 3, 30)).astype(np.float32)
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"],
                            ["selected"], center_point_box=center)
    model = _model(node, [("boxes", F32, [2, 30, 4]), ("scores", F32, [2, 3, 30]),
                          ("max", TensorProto.INT64, [1]), ("iou", F32, [1]),
                          ("score", F32, [1])], [("selected", TensorProto.INT64)], 11)
    feeds = {"boxes": boxes.astype(np.float32), "scores": scores,
             "max": np.array([5], np.int64), "iou": np.array([0.3], np.float32),
             "score": np.array([0.2], np.float32)}
    actual, expected = _both(model, feeds)
    np.testing.assert_array_equal(actual[0], expected[0])


@pytest.mark.parametrize("axis, block", [(0, 0), (1, 0), (1, 4), (0, 3)])
def test_quantize_dequantize_match_onnxruntime(axis: int, block: int) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 8)).astype(np.float32) * 50
    if block:
        shape = [6, 8]
        shape[axis] = -(-shape[axis] // block)
    else:
        shape = [x.shape[axis]]
    scale = rng.uniform(0.2, 1.0, shape).astype(np.float32)
    zero = rng.integers(-20, 20, shape).astype(np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"], axis=axis,
                              block_size=block),
             helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"], axis=axis,
                              block_size=block)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F32, [6, 8])],
        [helper.make_tensor_value_info("q", TensorProto.INT8, None),
         helper.make_tensor_value_info("y", F32, None)],
        [onnx.numpy_helper.from_array(scale, "scale"), onnx.numpy_helper.from_array(zero, "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    actual, expected = _both(model, {"x": x})
    np.testing.assert_array_equal(actual[0], expected[0])
    np.testing.assert_allclose(actual[1], expected[1], rtol=1e-6)


@pytest.mark.parametrize("inverse, onesided", [(0, 0), (0, 1), (1, 0)])
def test_dft_matches_numpy(inverse: int, onesided: int) -> None:
    rng = np.random.default_rng(1)
    last = 1 if onesided else 2
    x = rng.standard_normal((3, 16, last)).astype(np.float64)
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"], inverse=inverse,
                            onesided=onesided)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        [onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    out = AccHostBackend.prepare(model).run([x])[0]
    signal = x[..., 0] + (1j * x[..., 1] if last == 2 else 0)
    spectrum = (np.fft.ifft if inverse else np.fft.fft)(signal, axis=1)
    if onesided:
        spectrum = spectrum[:, :9]
    np.testing.assert_allclose(out[..., 0], spectrum.real, atol=1e-12)
    np.testing.assert_allclose(out[..., 1], spectrum.imag, atol=1e-12)


def test_attention_3d_without_head_counts_names_the_node() -> None:
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn_no_heads")
    model = _model(node, [(n, F32, [1, 4, 8]) for n in "qkv"], [("y", F32)], 23)
    feeds = [np.zeros((1, 4, 8), np.float32)] * 3
    with pytest.raises(AccHostError, match="q_num_heads"):
        AccHostBackend.prepare(model).run(feeds)


def test_attention_head_count_not_dividing_hidden_is_a_shape_error() -> None:
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=3,
                            kv_num_heads=3)
    model = _model(node, [(n, F32, [1, 4, 8]) for n in "qkv"], [("y", F32)], 23)
    with pytest.raises(AccHostError, match="not a multiple of its 3 heads"):
        AccHostBackend.prepare(model).run([np.zeros((1, 4, 8), np.float32)] * 3)


def test_quantize_to_int4_is_refused_by_name() -> None:
    node = helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", F32, [4])],
        [helper.make_tensor_value_info("q", TensorProto.INT4, None)],
        [helper.make_tensor("scale", F32, [], [1.0]),
         helper.make_tensor("zero", TensorProto.INT4, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(UnsupportedOnnxOperatorError, match="QuantizeLinear.*int4"):
        AccHostBackend.prepare(model)


def test_grid_sample_grid_of_wrong_shape_is_a_shape_error() -> None:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"])
    model = _model(node, [("x", F32, [1, 1, 4, 4]), ("grid", F32, [1, 3, 3, 3])],
                   [("y", F32)], 20)
    with pytest.raises(AccHostError, match="grid must have shape"):
        AccHostBackend.prepare(model).run([np.zeros((1, 1, 4, 4), np.float32),
                                           np.zeros((1, 3, 3, 3), np.float32)])


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("softcap", [0.0, 3.0])
def test_attention_gqa_with_cache_matches_onnxruntime(causal: int, softcap: float) -> None:
    rng = np.random.default_rng(11)
    batch, hq, hkv, q_len, past, head = 2, 6, 2, 3, 4, 8
    feeds = {"q": rng.standard_normal((batch, q_len, hq * head)).astype(np.float32),
             "k": rng.standard_normal((batch, q_len, hkv * head)).astype(np.float32),
             "v": rng.standard_normal((batch, q_len, hkv * head)).astype(np.float32),
             "mask": rng.uniform(-1, 0, (q_len, past + q_len)).astype(np.float32),
             "past_k": rng.standard_normal((batch, hkv, past, head)).astype(np.float32),
             "past_v": rng.standard_normal((batch, hkv, past, head)).astype(np.float32)}
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "past_k", "past_v"],
                            ["y", "present_k", "present_v"], q_num_heads=hq, kv_num_heads=hkv,
                            is_causal=causal, softcap=softcap, scale=0.3)
    model = _model(node, [(name, F32, list(value.shape)) for name, value in feeds.items()],
                   [("y", F32), ("present_k", F32), ("present_v", F32)], 23)
    actual, expected = _both(model, feeds)
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_onnxruntime(mode: str, transform: str, ratio: int) -> None:
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    corner = rng.uniform(-2, 9, (5, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0.5, 6, (5, 2))], 1).astype(np.float32)
    indices = rng.integers(0, 2, 5).astype(np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode,
                            coordinate_transformation_mode=transform, output_height=3,
                            output_width=4, sampling_ratio=ratio, spatial_scale=0.9)
    model = _model(node, [("x", F32, [2, 3, 10, 12]), ("rois", F32, [5, 4]),
                          ("idx", TensorProto.INT64, [5])], [("y", F32)], 16)
    actual, expected = _both(model, {"x": x, "rois": rois, "idx": indices})
    np.testing.assert_allclose(actual[0], expected[0], rtol=1e-5, atol=1e-5)
