"""acc_host.serve's pieces without a server (docs/serving.md): the
servable's request checks and outputs, dynamic batching's merge and split,
the JSON log format, the device metrics, the command line's usage errors,
and that ``import acc_host`` loads no serving package."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest
from support.paths import ONNX_MODELS
from support.serving import in_process_outputs

import acc_host as mx
from acc_host.cli import main
from acc_host.serve.batching import merge_batch, split_outputs
from acc_host.serve.logs import JsonFormatter
from acc_host.serve.servable import (
    BadRequestError,
    PluginFailure,
    TensorInfo,
    UnknownInputError,
    check_request,
    load_servable,
)

RESNET = ONNX_MODELS / "resnet_small.onnx"
INPUTS = [TensorInfo("a", np.dtype(np.float32), (-1, 3)), TensorInfo("b", np.dtype(np.int64),
                                                                    (-1,))]


def _request(batch: int, fill: float = 0.0) -> dict[str, np.ndarray]:
    return {"a": np.full((batch, 3), fill, np.float32), "b": np.arange(batch, dtype=np.int64)}


def test_import_acc_host_loads_no_serving_package() -> None:
    code = ("import sys, acc_host; bad = [m for m in ('kserve', 'ray', 'fastapi', "
            "'prometheus_client', 'acc_host.serve') if m in sys.modules]; print(bad)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("arrays", "error", "text"), [
    ({"a": np.zeros((1, 3), np.float32)}, BadRequestError, "'b' is missing"),
    ({**_request(1), "c": np.zeros(1)}, UnknownInputError, "no input 'c'"),
    ({**_request(1), "a": np.zeros((1, 3), np.float64)}, BadRequestError, "dtype float64"),
    ({**_request(1), "a": np.zeros((1, 4), np.float32)}, BadRequestError, "shape [1, 4]"),
    ({**_request(1), "a": np.zeros((3,), np.float32)}, BadRequestError, "shape [3]"),
    ({"a": np.zeros((2, 3), np.float32), "b": np.zeros(3, np.int64)}, BadRequestError,
     "same batch"),
    ({"a": np.zeros((0, 3), np.float32), "b": np.zeros(0, np.int64)}, BadRequestError,
     "batch >= 1"),
])
def test_bad_requests_are_typed_errors(arrays: dict[str, np.ndarray], error: type,
                                       text: str) -> None:
    with pytest.raises(error, match=None) as caught:
        check_request("m", INPUTS, arrays)
    assert text in str(caught.value) and isinstance(caught.value, mx.AccHostError)


def test_a_good_request_passes_any_batch() -> None:
    for batch in (1, 5):
        checked = check_request("m", INPUTS, _request(batch))
        assert checked["a"].shape == (batch, 3) and checked["b"].dtype == np.int64


def test_merge_and_split() -> None:
    requests = [_request(1, 1.0), _request(2, 2.0), {"a": np.zeros((1, 3), np.float32)},
                _request(3, 3.0)]
    groups = merge_batch(requests)
    assert [indices for indices, _ in groups] == [[0, 1, 3], [2]]
    merged = groups[0][1]
    assert merged["a"].shape == (6, 3) and list(merged["b"]) == [0, 0, 1, 0, 1, 2]
    parts = split_outputs("m", {"y": merged["a"] * 2}, [1, 2, 3])
    assert [part["y"].shape[0] for part in parts] == [1, 2, 3]
    assert np.array_equal(parts[1]["y"], np.full((2, 3), 4.0, np.float32))
    with pytest.raises(PluginFailure, match="axis 0 is not the batch"):
        split_outputs("m", {"y": np.zeros((5, 3))}, [1, 2, 3])


def test_servable_equals_the_in_process_outputs() -> None:
    servable = load_servable(str(RESNET), "cpu_ref", 0)
    assert [(t.name, t.shape) for t in servable.inputs] == [("input", (-1, 3, 32, 32))]
    assert [(t.name, t.shape) for t in servable.outputs] == [("logits", (-1, 10))]
    images = np.load(ONNX_MODELS / "resnet_small.npz")["input"]
    for batch in (1, 2):
        arrays = {"input": np.ascontiguousarray(images[:batch])}
        got = servable.infer(arrays)["logits"]
        assert np.array_equal(got, in_process_outputs(RESNET, mx.cpu_ref(0), arrays)[0])
    with pytest.raises(UnknownInputError):
        servable.infer({"data": images})
    assert servable.device_stats() == {}  # cpu_ref has no stats query
    servable.close()


def test_json_log_lines() -> None:
    record = logging.LogRecord("acc_host.serve", logging.WARNING, __file__, 1,
                               "infer failed: %s", ("boom",), None)
    record.model, record.batch = "m", 4
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["message"] == "infer failed: boom"
    assert line["model"] == "m" and line["batch"] == 4 and line["time"].endswith("Z")


@pytest.mark.serve
def test_device_utilisation_from_the_busy_stat() -> None:
    from prometheus_client import REGISTRY

    from acc_host.serve.metrics import record_device_stats

    record_device_stats("unit_acc", 2, {"sim_time_ns": 1e9, "launches": 3.0}, now=100.0)
    record_device_stats("unit_acc", 2, {"sim_time_ns": 1.5e9, "launches": 5.0}, now=102.0)
    labels = {"accelerator": "unit_acc", "device": "2"}
    assert REGISTRY.get_sample_value("acc_host_serve_device_utilisation", labels) == 0.25
    assert REGISTRY.get_sample_value("acc_host_serve_device_stat",
                                     {**labels, "stat": "launches"}) == 5.0


@pytest.mark.parametrize("argv", [["serve", "m.onnx", "--shape", "data"],
                                  ["serve", "m.onnx", "--shape", "data=1,x"],
                                  ["serve", "m.onnx", "--max-batch", "0"],
                                  ["serve", "m.onnx", "--http-port", "70000"],
                                  ["serve", "m.onnx", "--ray", "--devices", "a,b"]])
def test_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_a_graph_with_its_batch_fixed_serves_that_batch() -> None:
    # bert_small reshapes to constant extents of batch 2: it runs at batch 2 only
    source = ONNX_MODELS / "bert_small.onnx"
    servable = load_servable(str(source), "cpu_ref", 0)
    assert not servable.batch_free
    assert all(info.shape[0] == 2 for info in servable.inputs + servable.outputs)
    samples = np.load(ONNX_MODELS / "bert_small.npz")
    arrays = {info.name: samples[info.name] for info in servable.inputs}
    got = servable.infer(arrays)
    expected = in_process_outputs(source, mx.cpu_ref(0), arrays)
    assert all(np.array_equal(a, b) for a, b in zip(got.values(), expected))
    one = {name: value[:1] for name, value in arrays.items()}
    with pytest.raises(BadRequestError, match="shape"):
        servable.infer(one)
    servable.close()


def test_model_errors_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    # a checkpoint without its data shape: a usage error; a missing file or
    # accelerator: the environment's
    squeezenet = str(ONNX_MODELS.parent / "models" / "squeezenet1_1" / "model")
    assert main(["serve", squeezenet, "--acc", "cpu_ref"]) == 2
    assert "--shape data=" in capsys.readouterr().err
    assert main(["serve", "no_such_model.onnx"]) == 3
    assert main(["serve", str(RESNET), "--acc", "no_such_acc"]) == 3
    assert main(["serve", str(RESNET), "--shape", "nope=1,2"]) == 2
    assert "no model has an input 'nope'" in capsys.readouterr().err
