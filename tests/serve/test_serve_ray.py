"""``acc-host serve --ray`` (acc_host.serve.ray, docs/serving.md): Ray
Serve replicas on a local Ray cluster, one per device, behind the same
Open Inference Protocol, spoken to by Triton's client over HTTP and gRPC.
Requests sent one at a time run alone and equal the in-process outputs bit
for bit; concurrent ones are batched (the batch-size metric says so), run
on every device, and equal the in-process outputs of their batch to the
float tolerance; bad requests get the protocol's errors. Each server starts
and stops a Ray cluster (about 25 s): marked slow."""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS, ONNX_MODELS
from support.serving import ServerProcess, in_process_outputs, infer_grpc, infer_http

import acc_host as mx

pytestmark = [pytest.mark.serve, pytest.mark.slow]

SQUEEZENET = MODELS / "squeezenet1_1" / "model"
RESNET = ONNX_MODELS / "resnet_small.onnx"
SQUEEZENET_OUT = "squeezenet0_flatten0_flatten0_output"


def _small(batch: int, offset: int = 0) -> np.ndarray:
    values = np.load(ONNX_MODELS / "resnet_small.npz")["input"]
    rng = np.random.default_rng(offset)
    return (values[:1] + rng.standard_normal((batch, *values.shape[1:]))).astype(np.float32)


def _metrics(server: ServerProcess) -> str:
    with urllib.request.urlopen(f"http://{server.http_url}/metrics", timeout=30) as response:
        return str(response.read().decode())


@pytest.fixture(scope="module")
def mlu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("serve_ray") / "server.log"
    server = ServerProcess([str(RESNET), f"squeezenet={SQUEEZENET}", "--acc", "mlu", "--ray",
                            "--devices", "0,1,2,3", "--max-batch", "8", "--batch-wait-ms", "10",
                            "--shape", "data=1,3,224,224"], log, ready_timeout=240)
    yield server
    assert server.stop() == 0, server.output()[-3000:]


def test_one_at_a_time_equals_the_in_process_outputs(mlu_server: ServerProcess) -> None:
    for model, source, arrays, output in [
            ("resnet_small", RESNET, {"input": _small(2)}, "logits"),
            ("squeezenet", SQUEEZENET, {"data": np.load(MODELS / "squeezenet1_1" /
                                                        "input_0.npy")}, SQUEEZENET_OUT)]:
        expected = in_process_outputs(source, mx.mlu(0), arrays)[0]
        for _ in range(2):  # the replicas on other devices compute the same
            assert np.array_equal(infer_http(mlu_server.http_url, model, arrays)[output],
                                  expected)
            assert np.array_equal(infer_grpc(mlu_server.grpc_url, model, arrays)[output],
                                  expected)


def test_concurrent_requests_are_batched_on_every_device(mlu_server: ServerProcess) -> None:
    requests = [{"input": _small(1, offset=k)} for k in range(64)]
    results: list[object] = [None] * len(requests)

    def client(first: int) -> None:
        for k in range(first, len(requests), 16):
            try:
                results[k] = infer_grpc(mlu_server.grpc_url, "resnet_small", requests[k])
            except Exception as error:  # reported below
                results[k] = error

    threads = [threading.Thread(target=client, args=(first,)) for first in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    merged = np.concatenate([request["input"] for request in requests])
    expected = in_process_outputs(RESNET, mx.mlu(0), {"input": merged})[0]
    for k, result in enumerate(results):
        assert isinstance(result, dict), result
        np.testing.assert_allclose(result["logits"], expected[k:k + 1], rtol=1e-5, atol=1e-5)
    text = _metrics(mlu_server)
    count = float(re.search(r'acc_host_serve_batch_size_count\{model="resnet_small"\} (\S+)',
                            text).group(1))  # type: ignore[union-attr]
    alone = float(re.search(r'acc_host_serve_batch_size_bucket\{le="1.0",model="resnet_small"\}'
                            r' (\S+)', text).group(1))  # type: ignore[union-attr]
    assert alone < count  # some requests ran in batches of several
    devices = set(re.findall(r'acc_host_serve_device_stat\{accelerator="mlu",device="(\d)"',
                             text))
    assert devices == {"0", "1", "2", "3"}  # each replica owns its device
    assert "acc_host_serve_device_utilisation" in text


def test_bad_requests_get_the_protocol_errors(mlu_server: ServerProcess) -> None:
    from tritonclient.utils import InferenceServerException

    for arrays, status in [({"input": np.zeros((1, 3, 30, 32), np.float32)}, "400"),
                           ({"input": np.zeros((1, 3, 32, 32), np.int32)}, "400"),
                           ({"input": _small(1), "x": _small(1)}, "400")]:
        with pytest.raises(InferenceServerException) as caught:
            infer_http(mlu_server.http_url, "resnet_small", arrays)
        assert caught.value.status() == status
    with pytest.raises(InferenceServerException) as caught:
        infer_grpc(mlu_server.grpc_url, "no_such_model", {"input": _small(1)})
    assert caught.value.status() == "StatusCode.NOT_FOUND"
    assert infer_http(mlu_server.http_url, "resnet_small", {"input": _small(1)})["logits"].shape \
        == (1, 10)


def test_cpu_ref_without_batching(tmp_path: Path) -> None:
    server = ServerProcess([str(RESNET), "--acc", "cpu_ref", "--ray", "--max-batch", "1"],
                           tmp_path / "server.log", ready_timeout=240)
    try:
        arrays = {"input": _small(3)}
        expected = in_process_outputs(RESNET, mx.cpu_ref(0), arrays)[0]
        assert np.array_equal(infer_http(server.http_url, "resnet_small", arrays)["logits"],
                              expected)
        assert np.array_equal(infer_grpc(server.grpc_url, "resnet_small", arrays)["logits"],
                              expected)
    finally:
        assert server.stop() == 0, server.output()[-3000:]
