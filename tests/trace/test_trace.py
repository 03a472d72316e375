"""Call tracing (acc_host.trace): recording a real model run, replaying it
against the same plugin (no divergence) and against a build with one
changed kernel (the first diverging call named), the Chrome timeline, the
environment switch, and malformed traces."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support.paths import ROOT

import acc_host as mx
from acc_host import trace
from acc_host.errors import TraceError

SQUEEZENET = ROOT / "tests" / "models" / "squeezenet1_1"


@pytest.fixture
def tracing(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "run.trace"
    trace.start(path)
    try:
        yield path
    finally:
        trace.stop()


def _squeezenet_on(ctx: mx.Context) -> tuple[np.ndarray, np.ndarray]:
    symbol, args, aux = mx.model.load_checkpoint(str(SQUEEZENET / "model"), 0)
    x = np.load(SQUEEZENET / "input_0.npy")
    executor = symbol.bind(ctx, {"data": mx.nd.array(x), **args}, aux_states=aux)
    return executor.forward()[0].asnumpy(), np.load(SQUEEZENET / "expected_0.npy")


@pytest.fixture(scope="module")
def squeezenet_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of SqueezeNet 1.1 (MXNet 1.9.1's files) run on cpu_ref."""
    path = tmp_path_factory.mktemp("trace") / "squeezenet.trace"
    # Models of earlier tests that wait in reference cycles would be unloaded
    # by the collector inside the trace (calls its replay cannot repeat).
    gc.collect()
    trace.start(path)
    try:
        got, expected = _squeezenet_on(mx.cpu_ref(0))
    finally:
        trace.stop()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return path


def test_a_real_model_run_is_recorded_call_by_call(squeezenet_trace: Path) -> None:
    recorded = trace.read_trace(squeezenet_trace)
    calls = [record for record in recorded.calls()]
    functions = [record["fn"] for record in calls]
    assert {"supportedOpsReasons", "loadModel", "infer"} <= set(functions)
    load = next(record for record in calls if record["fn"] == "loadModel")
    assert load["ret"] == 0 and load["dur"] > 0 and load["thread"]
    weights = dict(zip(load["args"]["names"], load["args"]["data"]))
    conv = weights["squeezenet0_conv0_weight"]
    assert conv["shape"] == [64, 3, 3, 3] and conv["dtype"] == 0
    stored = np.frombuffer(recorded.blobs.get(conv["data"]), np.float32).reshape(64, 3, 3, 3)
    _, args, _ = mx.model.load_checkpoint(str(SQUEEZENET / "model"), 0)
    np.testing.assert_array_equal(stored, args["squeezenet0_conv0_weight"].asnumpy())
    graph = json.loads(recorded.blobs.get(load["args"]["json"]))
    assert any(node["op"] == "Convolution" for node in graph["nodes"])
    infer = next(record for record in calls if record["fn"] == "infer")
    assert infer["args"]["model_id"] == load["args"]["model_id"]


def test_replaying_against_the_same_plugin_finds_no_divergence(squeezenet_trace: Path) -> None:
    report = trace.replay(squeezenet_trace)
    assert report.matched, report.format_text()
    assert report.calls >= 4
    assert "no divergence" in report.format_text()


@pytest.mark.slow
def test_replaying_against_a_changed_kernel_names_the_first_diverging_call(
        squeezenet_trace: Path, perturbed_cpu_ref: Path) -> None:
    report = trace.replay(squeezenet_trace, {"cpu_ref": str(perturbed_cpu_ref)}, only="cpu_ref")
    assert not report.matched
    divergence = report.divergence
    assert divergence is not None
    first_infer = next(record["seq"] for record in trace.read_trace(squeezenet_trace).calls()
                       if record["fn"] == "infer")
    # the model's output stays on the device: infer writes it there and the
    # copy to the host is the first call whose bytes differ
    assert divergence.fn in ("infer", "copyFromAcc") and divergence.seq >= first_infer
    assert divergence.library == "cpu_ref"
    assert "largest absolute difference" in divergence.what
    assert f"call {divergence.seq}" in report.format_text()


def test_imperative_executors_are_traced_and_replayed(tracing: Path) -> None:
    x = mx.nd.array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), ctx=mx.cpu_ref(0))
    y = mx.nd.Activation(x, act_type="relu")
    np.testing.assert_array_equal(y.asnumpy(), np.maximum(x.asnumpy(), 0))
    trace.stop()
    functions = [record["fn"] for record in trace.read_trace(tracing).calls()]
    assert {"mx_alloc", "copyToAcc", "accGetExecutor", "executor_forward",
            "copyFromAcc"} <= set(functions)
    report = trace.replay(tracing)
    assert report.matched, report.format_text()
    assert any("the replayer called it" in note for note in report.notes)


def test_chrome_timeline_has_compile_copy_infer_and_cpu_operators(
        squeezenet_trace: Path, tracing: Path, tmp_path: Path) -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.softmax(mx.sym.FullyConnected(data, num_hidden=4, name="fc"), name="prob")
    x = np.ones((2, 3), np.float32)
    executor = net.simple_bind(mx.cpu(), data=x.shape)
    executor.forward(data=x)[0].wait_to_read()
    trace.stop()
    cpu_events = trace.chrome.chrome_events(trace.read_trace(tracing))
    cpu_ops = [event for event in cpu_events if event.get("cat") == "cpu_op"]
    assert {event["name"].split()[0] for event in cpu_ops} >= {"FullyConnected", "softmax"}
    out = trace.export_chrome(squeezenet_trace, tmp_path / "timeline.json")
    events = json.loads(out.read_text())["traceEvents"]
    categories = {event.get("cat") for event in events if event["ph"] == "X"}
    assert {"compile", "copy", "infer"} <= categories
    devices = {event["args"]["name"] for event in events if event["name"] == "process_name"}
    assert "cpu_ref(0)" in devices
    assert all(event["dur"] >= 0 for event in events if event["ph"] == "X")


def test_the_environment_switch_traces_from_import(tmp_path: Path) -> None:
    path = tmp_path / "env.trace"
    code = "import acc_host as mx; mx.nd.array([1.0, -2.0], ctx=mx.cpu_ref(0)).asnumpy()"
    env = {**os.environ, "MXNET_ACC_TRACE": str(path),
           "PYTHONPATH": str(Path(mx.__file__).resolve().parent.parent)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    recorded = trace.read_trace(path)
    names = {record["out"]["name"] for record in recorded.calls() if record["fn"] == "getAccName"}
    assert {"cpu_ref", "mlu"} <= names
    initialize = [record for record in recorded.calls() if record["fn"] == "initialize"]
    assert initialize and all(record["args"]["version"] == mx.API_VERSION
                              for record in initialize)
    assert trace.replay(path).matched


def test_failed_calls_carry_the_plugins_message(tracing: Path) -> None:
    with pytest.raises(mx.PluginError):
        mx.cpu_ref(0).configure(no_such_key="1")
    trace.stop()
    failed = [record for record in trace.read_trace(tracing).calls() if record["ret"] != 0]
    assert failed and "no_such_key" in failed[-1]["error"]


@pytest.mark.parametrize("content, message", [
    ("", "not an acc-host trace"),
    ("not json\n", "not JSON"),
    ('{"format": "acc-host-trace", "version": 99}\n', "version 99"),
    ('{"format": "acc-host-trace", "version": 1}\n{"kind": "call", "fn": "infer", '
     '"args": {}, "lib": 3}\n', "unknown library"),
    ('{"format": "acc-host-trace", "version": 1}\n{"kind": "bogus"}\n', "unknown kind"),
])
def test_malformed_traces_are_refused_clearly(tmp_path: Path, content: str,
                                              message: str) -> None:
    path = tmp_path / "bad.trace"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        trace.replay(path)


def test_a_missing_or_damaged_blob_and_an_unknown_library_are_clear_errors(
        squeezenet_trace: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.trace"
    copy.write_text(squeezenet_trace.read_text())
    with pytest.raises(TraceError, match="blob .* is missing"):
        trace.replay(copy, only="cpu_ref")
    blobs = Path(f"{copy}.blobs")
    blobs.mkdir()
    for blob in Path(f"{squeezenet_trace}.blobs").iterdir():
        (blobs / blob.name).write_bytes(blob.read_bytes()[:-1] + b"\0")
    with pytest.raises(TraceError, match="damaged"):
        trace.replay(copy, only="cpu_ref")
    with pytest.raises(TraceError, match="no library called nope"):
        trace.replay(squeezenet_trace, {"nope": "/x.so"})
