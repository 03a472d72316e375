"""cpu_ref folds the transposes around a float32 MatMul into the product
(attention's K^T, its heads split off and merged back): the GEMM reads an
operand, or writes the output, through the transpose's strides, and the
transpose runs no step. The results are numpy's, also where the fold must
not happen (a transposed value read twice or a graph output) and with
broadcast batch axes; the profile lines show which transposes still ran."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="building the graphs needs the onnx package")
from onnx import TensorProto, helper  # noqa: E402

from acc_host.onnx.backend import prepare  # noqa: E402

PROFILE = re.compile(r"cpu_ref profile: step \d+ (\S+) [\d.]+ us")
B, S, H, D = 2, 5, 3, 4


def _model(nodes: list, inputs: dict, outputs: dict, inits: dict | None = None) -> Any:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.ravel()) for n, v in
         (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(model: Any, feeds: dict, monkeypatch: pytest.MonkeyPatch,
         capfd: pytest.CaptureFixture[str]) -> tuple[list[np.ndarray], list[str]]:
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    rep = prepare(model, accelerator="cpu_ref")
    capfd.readouterr()
    outputs = [np.asarray(out) for out in rep.run(feeds)]
    return outputs, PROFILE.findall(capfd.readouterr().err)


def _attention_nodes(out_name: str = "o") -> list:
    """BERT's pattern: q, k, v (B, S, H*D) split into heads, Q.K^T, P.V,
    the heads merged back."""
    shape = helper.make_tensor("heads", TensorProto.INT64, [4], [B, S, H, D])
    merged = helper.make_tensor("merged", TensorProto.INT64, [3], [B, S, H * D])
    return [
        helper.make_node("Constant", [], ["heads_shape"], value=shape),
        helper.make_node("Constant", [], ["merged_shape"], value=merged),
        helper.make_node("Reshape", ["q", "heads_shape"], ["q4"]),
        helper.make_node("Reshape", ["k", "heads_shape"], ["k4"]),
        helper.make_node("Reshape", ["v", "heads_shape"], ["v4"]),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
        helper.make_node("MatMul", ["scores", "vh"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merged_shape"], [out_name]),
    ]


def _attention_numpy(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    heads = [x.reshape(B, S, H, D).transpose(0, 2, 1, 3) for x in (q, k, v)]
    scores = heads[0] @ heads[1].transpose(0, 1, 3, 2)
    return (scores @ heads[2]).transpose(0, 2, 1, 3).reshape(B, S, H * D)


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal((B, S, H * D)).astype(np.float32) for name in "qkv"}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def test_attention_transposes_fold_into_the_products(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    nodes = _attention_nodes("ctx_m") + [helper.make_node("Sigmoid", ["ctx_m"], ["o"])]
    io = {name: [B, S, H * D] for name in "qkv"}
    feeds = _feeds(0)
    (out,), steps = _run(_model(nodes, io, {"o": [B, S, H * D]}), feeds, monkeypatch, capfd)
    np.testing.assert_allclose(out, _sigmoid(_attention_numpy(**feeds)), rtol=1e-5, atol=1e-6)
    assert "transpose" not in steps and steps.count("_onnx_matmul") == 2


def test_a_transposed_value_read_twice_or_returned_is_not_folded(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    # kt also a graph output; qh also read by a Sigmoid; the product's output
    # transposed into a graph output (written in place: allowed).
    nodes = _attention_nodes() + [helper.make_node("Sigmoid", ["qh"], ["qs"])]
    io = {name: [B, S, H * D] for name in "qkv"}
    outs = {"o": [B, S, H * D], "kt": [B, H, D, S], "qs": [B, H, S, D]}
    feeds = _feeds(1)
    (o, kt, qs), steps = _run(_model(nodes, io, outs), feeds, monkeypatch, capfd)
    np.testing.assert_allclose(o, _attention_numpy(**feeds), rtol=1e-5, atol=1e-6)
    k4 = feeds["k"].reshape(B, S, H, D)
    np.testing.assert_array_equal(kt, k4.transpose(0, 2, 3, 1))
    q4 = feeds["q"].reshape(B, S, H, D).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(qs, _sigmoid(q4), rtol=1e-6, atol=1e-7)
    assert steps.count("transpose") == 2  # qh and kt still materialised


def test_a_transposed_weight_broadcast_over_the_batch(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    w = np.random.default_rng(2).standard_normal((1, 6, D)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "wt"], ["y"]),
             helper.make_node("Transpose", ["y"], ["yt"], perm=[1, 0, 2]),
             helper.make_node("Relu", ["yt"], ["o"])]
    x = np.random.default_rng(3).standard_normal((B, S, D)).astype(np.float32)
    model = _model(nodes, {"x": [B, S, D]}, {"o": [S, B, 6]}, {"w": w})
    (out,), steps = _run(model, {"x": x}, monkeypatch, capfd)
    want = np.maximum((x @ w.transpose(0, 2, 1)).transpose(1, 0, 2), 0.0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert "transpose" not in steps


def test_an_output_transpose_that_moves_the_last_axis_still_runs(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["yt"], ["o"])]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((B, S, D)).astype(np.float32)
    w = rng.standard_normal((B, D, 6)).astype(np.float32)
    model = _model(nodes, {"x": [B, S, D], "w": [B, D, 6]}, {"o": [B, 6, S]})
    (out,), steps = _run(model, {"x": x, "w": w}, monkeypatch, capfd)
    np.testing.assert_allclose(out, np.maximum((x @ w).transpose(0, 2, 1), 0.0),
                               rtol=1e-5, atol=1e-6)
    assert steps.count("transpose") == 1
