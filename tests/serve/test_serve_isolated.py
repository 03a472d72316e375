"""A plugin that crashes under ``acc-host serve`` in isolated mode
(docs/serving.md, docs/isolation.md): the request that meets the crash
gets the protocol's server error, the server loads the library again in a
new process, and the next request is answered. The plugin is
tests/plugins/crashing_acc.c (crashacc: relu on float32, in a one-node ONNX
model); its process is found from the plugin's own stats ("pid", exported
as a metric) and killed with SIGSEGV, as a crash in the plugin would kill
it."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.serving import ServerProcess, infer_grpc, infer_http

pytestmark = [pytest.mark.serve, pytest.mark.needs_onnx, pytest.mark.slow]


def _relu_model(folder: Path) -> Path:
    """relu.onnx: one Relu from data (N x 4, float32) to relu_output."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["data"], ["relu_output"])], "relu",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("relu_output", TensorProto.FLOAT, ["N", 4])])
    path = folder / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _plugin_pid(server: ServerProcess) -> int:
    """The crashacc process's pid, from its stats on /metrics."""
    time.sleep(0.3)  # past the interval between two stats queries
    infer_http(server.http_url, "relu", {"data": np.ones((1, 4), np.float32)})
    with urllib.request.urlopen(f"http://{server.http_url}/metrics", timeout=30) as response:
        text = response.read().decode()
    found = re.search(r'acc_host_serve_device_stat\{accelerator="crashacc",device="0",'
                      r'stat="pid"\} ([0-9.e+]+)', text)
    assert found, text[-2000:]
    return int(float(found.group(1)))


def test_a_plugin_crash_is_an_error_response_and_the_server_recovers(
        tmp_path: Path, build_test_plugin: Callable[..., Path]) -> None:
    from tritonclient.utils import InferenceServerException

    library = build_test_plugin("crashing_acc.c", "crashacc")
    server = ServerProcess([str(_relu_model(tmp_path)), "--acc", str(library)],
                           tmp_path / "server.log",
                           env={"MXNET_ACC_ISOLATE": "1", "MXNET_ACC_OFFLOAD_COST": "0"})
    try:
        x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
        assert np.array_equal(infer_grpc(server.grpc_url, "relu", {"data": x})["relu_output"],
                              np.maximum(x, 0))
        pid = _plugin_pid(server)
        assert pid != server.process.pid
        os.kill(pid, signal.SIGSEGV)  # the plugin's process dies
        time.sleep(0.2)
        with pytest.raises(InferenceServerException) as caught:
            infer_http(server.http_url, "relu", {"data": x})
        assert caught.value.status() == "500" and "crashacc" in caught.value.message()
        assert server.alive()
        for call in (infer_http, infer_grpc):  # a new process answers
            assert np.array_equal(call(server.http_url if call is infer_http else
                                       server.grpc_url, "relu", {"data": x})["relu_output"],
                                  np.maximum(x, 0))
        assert _plugin_pid(server) not in (pid, server.process.pid)
    finally:
        assert server.stop() == 0, server.output()[-3000:]
