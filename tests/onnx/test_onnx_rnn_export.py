"""MXNet's RNN exported to ONNX (acc_host/onnx/export_rnn.py), run by
onnxruntime (a test-only oracle) against MXNet 1.9.1's own outputs for the
gluon exports of tests/models/rnn, and imported back by acc-host."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import acc_host as mx  # noqa: E402
from acc_host.errors import UnsupportedOnnxExportError  # noqa: E402
from acc_host.onnx.backend import prepare  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "models" / "rnn"


def _export(name: str, path: Path) -> dict[str, np.ndarray]:
    io = dict(np.load(MODELS / f"{name}-io.npz"))
    inputs = sorted(key[len("input_"):] for key in io if key.startswith("input_"))
    symbol, args, aux = mx.model.load_checkpoint(str(MODELS / name), 0)
    feeds = {key: io[f"input_{key}"] for key in inputs}
    mx.onnx.export_model(symbol, [args, aux], [feeds[key].shape for key in inputs],
                         [feeds[key].dtype for key in inputs], onnx_file_path=str(path))
    return {"feeds": feeds, **{key: value for key, value in io.items()
                               if key.startswith("output_")}}


@pytest.mark.parametrize("name", ["lstm_bi2", "gru_bi2", "rnn_tanh_ntc"])
def test_export_runs_in_onnxruntime_as_in_mxnet(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.onnx"
    io = _export(name, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = session.run(None, {value.name: io["feeds"][value.name]
                                 for value in session.get_inputs()})
    assert len(outputs) == sum(key.startswith("output_") for key in io)
    for k, value in enumerate(outputs):
        np.testing.assert_allclose(value, io[f"output_{k}"], rtol=1e-5, atol=1e-6)
    # and back: the ONNX nodes import to MXNet's RNN again
    rep = prepare(onnx.load(str(path)), accelerator=mx.cpu_ref(0))
    for ours, theirs in zip(rep.run(io["feeds"]), outputs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    ops = [node["op"] for node in json.loads(rep.imported.symbol.tojson())["nodes"]]
    assert "RNN" in ops and "_onnx_rnn" not in ops


def test_projection_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOnnxExportError, match="projection_size"):
        _export("lstmp", tmp_path / "lstmp.onnx")
