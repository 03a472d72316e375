"""PyTorch-style ONNX models on cpu_ref run image by image: ONNX Flatten
with axis 1 (before a classifier) flattens each image alone, and
HardSwish, Sigmoid and Mul (SiLU, squeeze-excitation scales) treat each
image alone where every operand of the Mul has the output's rank; so
they no longer keep the model layer by layer. The results are
onnxruntime's. A Flatten with axis 0, or a Mul whose lower-rank operand
broadcasts across the images, keeps the model layer by layer. cpu_ref's
ACC_CPU_REF_PROFILE lines show which (a step printed once per image, with
a batch of 1)."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX tests need the onnx test extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle")

from onnx import ModelProto, TensorProto, helper, numpy_helper  # noqa: E402

from acc_host.onnx import backend  # noqa: E402

PROFILE = re.compile(r"cpu_ref profile: step \d+ (\S+) [\d.]+ us in (\d+)")


def _classifier(flatten_axis: int, seed: int) -> ModelProto:
    """Conv 3 -> 8 (3 x 3, pad 1), Relu, GlobalAveragePool, Flatten and, on
    axis 1, Gemm to 5 classes, with a symbolic batch."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=flatten_axis)]
    inits = [w, b]
    if flatten_axis == 1:
        fc = numpy_helper.from_array(rng.standard_normal((5, 8)).astype(np.float32), "fc")
        nodes.append(helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1))
        inits.append(fc)
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])
    else:
        out = helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, None])
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 12, 12])], [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _model(nodes: list, inits: list, x_shape: list, out: str, out_shape: list) -> ModelProto:
    graph = helper.make_graph(
        nodes, "graph", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _steps(model: ModelProto, data: np.ndarray, monkeypatch: pytest.MonkeyPatch,
           capfd: pytest.CaptureFixture[str]) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """cpu_ref's output for data, and (op, batch of its input) for each
    step it ran, image by image wherever the model allows it."""
    monkeypatch.setenv("ACC_CPU_REF_IMAGE_SPLIT", "1")
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    rep = backend.prepare(model, accelerator="cpu_ref")
    capfd.readouterr()
    out = np.array(rep.run([data])[0])
    steps = [(m[1], int(m[2])) for m in PROFILE.finditer(capfd.readouterr().err)]
    return out, steps


def _onnxruntime(model: ModelProto, data: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": data})[0])


def test_a_flatten_on_axis_1_runs_image_by_image(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    model = _classifier(1, seed=0)
    data = np.random.default_rng(1).standard_normal((3, 3, 12, 12)).astype(np.float32)
    out, steps = _steps(model, data, monkeypatch, capfd)
    # the flatten is a view of its input (no step); the rest run per image
    assert "_onnx_flatten" not in [op for op, _ in steps]
    assert steps and all(batch == 1 for _, batch in steps)
    assert len(steps) % 3 == 0 and steps[: len(steps) // 3] * 3 == steps
    np.testing.assert_allclose(out, _onnxruntime(model, data), rtol=1e-4, atol=1e-5)


def test_a_flatten_on_axis_0_keeps_the_model_layer_by_layer(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    model = _classifier(0, seed=2)
    data = np.random.default_rng(3).standard_normal((3, 3, 12, 12)).astype(np.float32)
    out, steps = _steps(model, data, monkeypatch, capfd)
    assert steps and all(batch == 3 for _, batch in steps)
    assert out.shape == (1, 24)
    np.testing.assert_allclose(out, _onnxruntime(model, data), rtol=1e-4, atol=1e-5)


def test_squeeze_excitation_and_hardswish_run_image_by_image(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Conv, HardSwish, then a squeeze-excitation gate (GlobalAveragePool,
    1 x 1 Conv, Sigmoid) that Mul applies to the features, and a SiLU."""
    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    se = numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "se")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c"], ["h"]),
             helper.make_node("GlobalAveragePool", ["h"], ["g"]),
             helper.make_node("Conv", ["g", "se"], ["s"]),
             helper.make_node("Sigmoid", ["s"], ["gate"]),
             helper.make_node("Mul", ["h", "gate"], ["scaled"]),
             helper.make_node("Sigmoid", ["scaled"], ["sig"]),
             helper.make_node("Mul", ["scaled", "sig"], ["y"])]
    model = _model(nodes, [w, se], ["n", 3, 12, 12], "y", ["n", 8, 12, 12])
    data = rng.standard_normal((3, 3, 12, 12)).astype(np.float32)
    out, steps = _steps(model, data, monkeypatch, capfd)
    ops = {op for op, _ in steps}
    # the HardSwish runs in the convolution's epilogue (the conv's only reader)
    assert {"Convolution", "sigmoid", "broadcast_mul"} <= ops
    assert "_onnx_unary" not in ops
    assert steps and all(batch == 1 for _, batch in steps)
    assert len(steps) % 3 == 0 and steps[: len(steps) // 3] * 3 == steps
    np.testing.assert_allclose(out, _onnxruntime(model, data), rtol=1e-4, atol=1e-5)


def test_a_mul_broadcasting_a_lower_rank_operand_stays_layer_by_layer(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """(12, 12) per-image means times (12, 12, 12, 12) features: the
    means' axis 0 (the images) lines up with the features' rows, so each
    output mixes images."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=1),
             helper.make_node("Mul", ["x", "f"], ["y"])]
    model = _model(nodes, [], [12, 12, 12, 12], "y", [12, 12, 12, 12])
    data = np.random.default_rng(5).standard_normal((12, 12, 12, 12)).astype(np.float32)
    out, steps = _steps(model, data, monkeypatch, capfd)
    assert ("broadcast_mul", 12) in steps
    assert steps and all(batch == 12 for _, batch in steps)
    np.testing.assert_allclose(out, _onnxruntime(model, data), rtol=1e-4, atol=1e-5)
