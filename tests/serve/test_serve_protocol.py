"""``acc-host serve`` over the Open Inference Protocol (docs/serving.md),
spoken to by Triton's client library over HTTP and gRPC: health, metadata,
outputs equal bit for bit to the in-process ones for a shared MXNet model
(tests/models/squeezenet1_1) and an ONNX model (tests/onnx_models), on
cpu_ref and on the MLU simulator; every kind of bad request answered with
the protocol's error, the server serving on after it; metrics; a stop
that finishes the requests in flight."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS, ONNX_MODELS
from support.serving import ServerProcess, in_process_outputs, infer_grpc, infer_http

import acc_host as mx

pytestmark = [pytest.mark.serve]

SQUEEZENET = MODELS / "squeezenet1_1" / "model"
RESNET = ONNX_MODELS / "resnet_small.onnx"
SQUEEZENET_OUT = "squeezenet0_flatten0_flatten0_output"


def _image() -> np.ndarray:
    return np.load(MODELS / "squeezenet1_1" / "input_0.npy")


def _small(batch: int = 2) -> np.ndarray:
    values = np.load(ONNX_MODELS / "resnet_small.npz")["input"]
    return np.ascontiguousarray(np.resize(values, (batch, *values.shape[1:])))


def _serve(acc: str, log: Path) -> ServerProcess:
    return ServerProcess([f"squeezenet={SQUEEZENET}", str(RESNET), "--acc", acc,
                          "--shape", "data=1,3,224,224"], log)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = _serve("cpu_ref", tmp_path_factory.mktemp("serve") / "server.log")
    yield process
    process.stop()


def _still_serving(server: ServerProcess) -> None:
    """The server answers a good request after a bad one."""
    assert server.alive(), server.output()[-3000:]
    out = infer_http(server.http_url, "resnet_small", {"input": _small(1)})
    assert out["logits"].shape == (1, 10)


# ---- health, metadata, outputs ------------------------------------------------------------


def test_health_and_metadata(server: ServerProcess) -> None:
    import tritonclient.grpc as grpc
    import tritonclient.http as http

    client = http.InferenceServerClient(server.http_url)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("squeezenet") and client.is_model_ready("resnet_small")
    metadata = client.get_model_metadata("squeezenet")
    assert metadata["inputs"] == [{"name": "data", "datatype": "FP32",
                                   "shape": [-1, 3, 224, 224]}]
    assert metadata["outputs"] == [{"name": SQUEEZENET_OUT, "datatype": "FP32",
                                    "shape": [-1, 1000]}]
    stub = grpc.InferenceServerClient(server.grpc_url)
    assert stub.is_server_ready() and stub.is_model_ready("resnet_small")
    onnx_meta = stub.get_model_metadata("resnet_small", as_json=True)
    assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]])
            for t in onnx_meta["inputs"]] == [("input", "FP32", [-1, 3, 32, 32])]
    assert [(t["name"], [int(d) for d in t["shape"]])
            for t in onnx_meta["outputs"]] == [("logits", [-1, 10])]


@pytest.mark.parametrize("protocol", ["http-binary", "http-json", "grpc"])
def test_outputs_equal_the_in_process_ones(server: ServerProcess, protocol: str) -> None:
    cases = [("squeezenet", SQUEEZENET, {"data": _image()}, SQUEEZENET_OUT),
             ("resnet_small", RESNET, {"input": _small(2)}, "logits")]
    for model, source, arrays, output in cases:
        if protocol == "grpc":
            got = infer_grpc(server.grpc_url, model, arrays)
        else:
            got = infer_http(server.http_url, model, arrays, binary=protocol == "http-binary")
        expected = in_process_outputs(source, mx.cpu_ref(0), arrays)[0]
        assert got[output].dtype == expected.dtype and np.array_equal(got[output], expected)
        if model == "squeezenet":  # and MXNet's own output, to MXNet's tolerance
            np.testing.assert_allclose(got[output], np.load(MODELS / "squeezenet1_1" /
                                                            "expected_0.npy"),
                                       rtol=1e-3, atol=1e-7)


def test_any_batch_runs(server: ServerProcess) -> None:
    for batch in (1, 3):
        arrays = {"input": _small(batch)}
        got = infer_grpc(server.grpc_url, "resnet_small", arrays)["logits"]
        assert np.array_equal(got, in_process_outputs(RESNET, mx.cpu_ref(0), arrays)[0])


# ---- bad requests: the protocol's errors, and the server serves on ------------------------


def _http_error(server: ServerProcess, model: str, arrays: dict[str, np.ndarray]) -> str:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as caught:
        infer_http(server.http_url, model, arrays)
    return f"{caught.value.status()} {caught.value.message()}"


def _grpc_error(server: ServerProcess, model: str, arrays: dict[str, np.ndarray]) -> str:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException) as caught:
        infer_grpc(server.grpc_url, model, arrays)
    return f"{caught.value.status()} {caught.value.message()}"


def test_wrong_shape(server: ServerProcess) -> None:
    bad = {"input": np.zeros((2, 3, 31, 32), np.float32)}
    assert "400" in _http_error(server, "resnet_small", bad)
    message = _grpc_error(server, "resnet_small", bad)
    assert "INVALID_ARGUMENT" in message and "[2, 3, 31, 32]" in message
    _still_serving(server)


def test_wrong_dtype(server: ServerProcess) -> None:
    bad = {"input": _small(1).astype(np.float64)}
    message = _http_error(server, "resnet_small", bad)
    assert message.startswith("400") and "float64" in message
    assert "INVALID_ARGUMENT" in _grpc_error(server, "resnet_small", bad)
    _still_serving(server)


def test_unknown_model(server: ServerProcess) -> None:
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    client = http.InferenceServerClient(server.http_url)
    tensor = http.InferInput("input", [1, 3, 32, 32], "FP32")
    tensor.set_data_from_numpy(_small(1))
    with pytest.raises(InferenceServerException) as caught:
        client.infer("no_such_model", [tensor])
    assert caught.value.status() == "404" and "no_such_model" in caught.value.message()
    import tritonclient.grpc as grpc

    stub = grpc.InferenceServerClient(server.grpc_url)
    tensor = grpc.InferInput("input", [1, 3, 32, 32], "FP32")
    tensor.set_data_from_numpy(_small(1))
    with pytest.raises(InferenceServerException) as caught:
        stub.infer("no_such_model", [tensor])
    assert caught.value.status() == "StatusCode.NOT_FOUND"
    _still_serving(server)


def test_unknown_input(server: ServerProcess) -> None:
    bad = {"input": _small(1), "extra": np.zeros((1, 3), np.float32)}
    message = _http_error(server, "resnet_small", bad)
    assert message.startswith("400") and "no input 'extra'" in message
    assert "no input 'extra'" in _grpc_error(server, "resnet_small", bad)
    _still_serving(server)


def test_missing_input(server: ServerProcess) -> None:
    bad = {"other": _small(1)}
    assert _http_error(server, "resnet_small", bad).startswith("400")
    _still_serving(server)


def _post(server: ServerProcess, path: str, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_malformed_body(server: ServerProcess) -> None:
    status, text = _post(server, "/v2/models/resnet_small/infer", b"{not json")
    assert status == 400, text
    # data that does not fill the shape it claims
    body = {"inputs": [{"name": "input", "shape": [1, 3, 32, 32], "datatype": "FP32",
                        "data": [0.5, 1.5]}]}
    status, text = _post(server, "/v2/models/resnet_small/infer", json.dumps(body).encode())
    assert status == 400 and "error" in json.loads(text), text
    # a datatype the protocol does not have
    body["inputs"][0].update(datatype="FP128", shape=[2], data=[0.5, 1.5])
    status, text = _post(server, "/v2/models/resnet_small/infer", json.dumps(body).encode())
    assert status == 400, text
    _still_serving(server)


def test_metrics(server: ServerProcess) -> None:
    infer_http(server.http_url, "resnet_small", {"input": _small(1)})
    with urllib.request.urlopen(f"http://{server.http_url}/metrics", timeout=30) as response:
        text = response.read().decode()
    assert 'acc_host_serve_requests_total{model="resnet_small",outcome="ok"}' in text
    assert "acc_host_serve_request_seconds_bucket" in text
    assert 'acc_host_serve_batch_size_count{model="resnet_small"}' in text


def test_logs_are_json(server: ServerProcess) -> None:
    lines = [line for line in server.output().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    assert any(record["message"] == "serving" and record["logger"] == "acc_host.serve"
               for record in records)
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)


# ---- the MLU simulator, and a graceful stop -------------------------------------------------


@pytest.mark.slow
def test_mlu_outputs_equal_the_in_process_ones(tmp_path: Path) -> None:
    server = _serve("mlu", tmp_path / "server.log")
    try:
        for model, source, arrays, output in [
                ("squeezenet", SQUEEZENET, {"data": _image()}, SQUEEZENET_OUT),
                ("resnet_small", RESNET, {"input": _small(2)}, "logits")]:
            expected = in_process_outputs(source, mx.mlu(0), arrays)[0]
            for got in (infer_http(server.http_url, model, arrays),
                        infer_grpc(server.grpc_url, model, arrays)):
                assert np.array_equal(got[output], expected)
        text = urllib.request.urlopen(f"http://{server.http_url}/metrics", timeout=30).read()
        assert b'acc_host_serve_device_stat{accelerator="mlu",device="0",stat="launches"}' \
            in text
    finally:
        assert server.stop() == 0, server.output()[-3000:]


@pytest.mark.slow
def test_stop_finishes_requests_in_flight(tmp_path: Path) -> None:
    server = _serve("cpu_ref", tmp_path / "server.log")
    images = np.ascontiguousarray(np.repeat(_image(), 8, axis=0))
    results: dict[str, object] = {}

    def call(name: str) -> None:
        try:
            if name == "grpc":
                results[name] = infer_grpc(server.grpc_url, "squeezenet", {"data": images})
            else:
                results[name] = infer_http(server.http_url, "squeezenet", {"data": images})
        except Exception as error:  # reported below
            results[name] = error

    threads = [threading.Thread(target=call, args=(name,)) for name in ("http", "grpc")]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    status = server.stop()
    for thread in threads:
        thread.join()
    for name in ("http", "grpc"):
        assert isinstance(results[name], dict), (name, results[name])
        assert results[name][SQUEEZENET_OUT].shape == (8, 1000)  # type: ignore[index]
    assert status == 0, server.output()[-3000:]
