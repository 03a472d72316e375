"""Isolated mode (acc_host.isolate, docs/isolation.md): a plugin in a child
process gives the same results as in this process, through executors,
imperative operators and device memory; its crashes, aborts, exits and hangs
(tests/plugins/crashing_acc.c) become exceptions here, after which this
process keeps working and the library loads again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.engines import settle_engine
from support.paths import ROOT
from support.plugin_builds import SANITIZE

import acc_host as mx
from acc_host import isolate, trace
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec
from acc_host.isolate import IsolatedLibrary, Timeouts
from acc_host.plugins import registry

MODELS = ROOT / "tests" / "models"
rng = np.random.default_rng(11)


def _normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _expect_signal(error: mx.PluginCrashedError, name: str) -> None:
    # Under the sanitizers a segmentation fault is reported, then an exit.
    if SANITIZE and name == "SIGSEGV":
        assert error.signal == name or error.exit_code not in (None, 0)
    else:
        assert error.signal == name, error


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, mx.Context]:
    """Copies of the bundled plugins' files, loaded isolated as iso_cpu_ref
    and iso_mlu (one file is loaded once: a copy can sit beside the
    in-process library)."""
    directory = tmp_path_factory.mktemp("isolated")
    contexts = {}
    for name in ("cpu_ref", "mlu"):
        copy = directory / f"lib{name}_isolated.so"
        shutil.copy(mx.get_library(name).path, copy)
        contexts[name] = mx.load_acc(copy, acc_name=f"iso_{name}", isolate=True)
    return contexts


@pytest.fixture(scope="module")
def crashacc_path(build_test_plugin: Callable[..., Path]) -> Path:
    return build_test_plugin("crashing_acc.c", "crashacc")


def _close_crashacc() -> None:
    for library in mx.libraries():
        if library.name == "crashacc" and isinstance(library, IsolatedLibrary):
            library.close()


@pytest.fixture
def crashacc(crashacc_path: Path) -> Iterator[Callable[..., mx.Context]]:
    """crashacc(call=..., load=...): crashacc in a new process, with those
    timeouts (seconds) when given."""
    def load(**timeouts: float) -> mx.Context:
        _close_crashacc()
        ctx = mx.load_acc(crashacc_path, isolate=True)
        if timeouts:
            ctx.library.timeouts = Timeouts(**timeouts)
        return ctx

    yield load
    settle_engine()
    _close_crashacc()


def _relu_graph() -> mx.sym.Symbol:
    return mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")


def _forward(ctx: mx.Context, data: np.ndarray) -> np.ndarray:
    exe = _relu_graph().simple_bind(ctx, data=data.shape)
    return exe.forward(data=data)[0].asnumpy()


# ---- same results ------------------------------------------------------------------------


def _squeezenet(ctx: mx.Context) -> np.ndarray:
    sym, arg, aux = mx.model.load_checkpoint(str(MODELS / "squeezenet1_1" / "model"), 0)
    image = np.load(MODELS / "squeezenet1_1" / "input_0.npy")
    exe = sym.simple_bind(ctx, data=image.shape)
    for name, value in {**arg, **aux}.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    out = exe.forward(data=image)[0].asnumpy()
    assert np.array_equal(out, exe.forward(data=image)[0].asnumpy())  # a second forward too
    exe.close()
    return out


@pytest.mark.parametrize("plugin", ["cpu_ref", "mlu"])
def test_squeezenet_is_identical(isolated: dict[str, mx.Context], plugin: str) -> None:
    library = isolated[plugin].library
    assert library.isolated and library.alive and library.pid != os.getpid()
    expected = _squeezenet(getattr(mx, plugin)(0))
    got = _squeezenet(isolated[plugin])
    assert np.array_equal(got, expected)
    reference = np.load(MODELS / "squeezenet1_1" / "expected_0.npy")
    np.testing.assert_allclose(got, reference, rtol=1e-3, atol=1e-4)


IMPERATIVE_CASES: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("Convolution", [_normal(2, 3, 9, 9), _normal(4, 3, 3, 3), _normal(4)],
     {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1)}),
    ("FullyConnected", [_normal(4, 10), _normal(5, 10), _normal(5)], {"num_hidden": 5}),
    ("Activation", [_normal(2, 3, 4)], {"act_type": "tanh"}),
    ("Pooling", [_normal(2, 3, 8, 8)], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"}),
    ("elemwise_add", [_normal(3, 4), _normal(3, 4)], {}),
    ("softmax", [_normal(3, 5)], {"axis": -1}),
]


@pytest.mark.parametrize("plugin", ["cpu_ref", "mlu"])
def test_imperative_operators_are_identical(isolated: dict[str, mx.Context],
                                            plugin: str) -> None:
    """mx.nd operators on device arrays: accGetExecutor, executor forward
    (a callback into the host, forwarded) and release, mx_alloc/copies."""
    for op, inputs, attrs in IMPERATIVE_CASES:
        results = []
        for ctx in (getattr(mx, plugin)(0), isolated[plugin]):
            arrays = [mx.nd.array(value, ctx=ctx) for value in inputs]
            results.append(getattr(mx.nd, op)(*arrays, **attrs).asnumpy())
        assert np.array_equal(results[0], results[1]), op


def test_device_memory_and_messages(isolated: dict[str, mx.Context]) -> None:
    library = isolated["cpu_ref"].library
    values = _normal(3, 5)
    buffer = DeviceBuffer(library, 0, TensorSpec.of(values))
    buffer.copy_from_host(values)
    assert np.array_equal(buffer.to_host(), values)
    strided = np.arange(30, dtype=np.float32).reshape(3, 10)[:, ::2]
    buffer.copy_from_host(strided)
    out = np.zeros((3, 5), np.float32)
    assert buffer.to_host(out) is out and np.array_equal(out, strided)
    buffer.free()
    # A failure status comes back with the plugin's own message.
    with pytest.raises(mx.PluginError, match="configure") as caught:
        isolated["cpu_ref"].configure(no_such_key=1)
    assert caught.value.plugin_message
    assert library.alive


def test_shared_arrays_cross_without_copies(isolated: dict[str, mx.Context]) -> None:
    library = isolated["cpu_ref"].library
    graph = annotate_symbol(_relu_graph(), {"data": (256, 64)}, weights=[])
    model = LoadedModel(library, graph, {})
    x = isolate.shared_array(_normal(256, 64))
    out = isolate.shared_empty((256, 64))
    assert isolate.is_shared(x) and isolate.is_shared(out) and not isolate.is_shared(x[:, ::2])
    before = library.process.copied_bytes
    model.infer({"data": x}, {"relu_output": out})
    assert library.process.copied_bytes == before  # nothing staged
    assert np.array_equal(out, np.maximum(x, 0))
    ordinary = np.empty_like(out)
    model.infer({"data": np.array(x)}, {"relu_output": ordinary})
    assert library.process.copied_bytes == before + 3 * x.nbytes  # input, output in and back
    assert np.array_equal(ordinary, out)
    model.close()
    del x, out  # their segments are unmapped in the child with the next call
    assert np.array_equal(_forward(isolated["cpu_ref"], np.ones((2, 2), np.float32)),
                          np.ones((2, 2)))


def test_concurrent_calls_use_channels(isolated: dict[str, mx.Context]) -> None:
    """Threads calling one isolated library at once, on several devices of
    mlu: each call has a channel (and a thread in the child) of its own."""
    library = isolated["mlu"].library
    devices = min(library.num_devices, 4)
    data = [_normal(8, 16) for _ in range(devices)]
    results: dict[int, np.ndarray] = {}

    def work(dev_id: int) -> None:
        ctx = mx.Context("iso_mlu", dev_id)
        for _ in range(5):
            results[dev_id] = _forward(ctx, data[dev_id])

    threads = [threading.Thread(target=work, args=(dev_id,)) for dev_id in range(devices)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    for dev_id in range(devices):
        assert np.array_equal(results[dev_id], np.maximum(data[dev_id], 0))


def test_trace_records_isolated_calls(isolated: dict[str, mx.Context], tmp_path: Path) -> None:
    trace_path = tmp_path / "isolated.trace"
    trace.start(trace_path)
    try:
        _forward(isolated["cpu_ref"], np.ones((2, 3), np.float32))
    finally:
        trace.stop()
    records = [json.loads(line) for line in trace_path.read_text().splitlines()]
    functions = {record["fn"] for record in records if record.get("kind") == "call"}
    assert {"loadModel", "infer", "copyToAcc"} <= functions


# ---- crashes and hangs ---------------------------------------------------------------------


def test_segfault_in_infer(crashacc: Callable[..., mx.Context], engine_kind: str) -> None:
    ctx = crashacc()
    library = ctx.library
    data = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    exe = _relu_graph().simple_bind(ctx, data=data.shape)
    assert np.array_equal(exe.forward(data=data)[0].asnumpy(), np.maximum(data, 0))
    buffer = DeviceBuffer(library, 0, TensorSpec.of(data))
    model = LoadedModel(library, annotate_symbol(_relu_graph(), {"data": data.shape}, []), {})
    ctx.configure(fail="infer:segv")
    with pytest.raises(mx.PluginCrashedError) as caught:
        exe.forward(data=data)[0].asnumpy()
    error = caught.value
    _expect_signal(error, "SIGSEGV")
    assert error.function == "infer" and error.accelerator == "crashacc"
    assert f"pid {library.pid}" in str(error) and "during infer(" in str(error)
    assert not library.alive and library.death is error
    settle_engine()
    # The executor bound to the dead library fails at once, clearly.
    with pytest.raises(mx.LibraryDeadError, match="plugin process is gone") as dead:
        exe.forward(data=data)[0].asnumpy()
    assert dead.value.cause is error
    with pytest.raises(mx.LibraryDeadError):
        ctx.configure(query="stats")
    with pytest.raises(mx.LibraryDeadError):
        mx.nd.array(data, ctx=ctx)
    # What would be released went with the process: releasing succeeds.
    buffer.free()
    model.close()
    exe.close()
    # This process is fine, and the library loads again in a new process.
    assert np.array_equal(_forward(mx.cpu_ref(0), data), np.maximum(data, 0))
    again = mx.load_acc(library.path, isolate=True)
    assert again.library is not library and again.library.alive
    assert again.library.pid != library.pid
    assert mx.get_library("crashacc") is again.library
    assert np.array_equal(_forward(again, data), np.maximum(data, 0))
    assert again.configure(query="stats")["pid"] == str(again.library.pid)


def test_abort_in_load_model(crashacc: Callable[..., mx.Context]) -> None:
    ctx = crashacc()
    ctx.configure(fail="load:abort")
    with pytest.raises(mx.PluginCrashedError) as caught:
        _forward(ctx, np.ones((2, 2), np.float32))
    _expect_signal(caught.value, "SIGABRT")
    assert caught.value.function == "loadModel"
    assert np.array_equal(_forward(crashacc(), -np.ones((2, 2), np.float32)), np.zeros((2, 2)))


def test_exit_in_executor_forward(crashacc: Callable[..., mx.Context]) -> None:
    """Imperative mode: the crash happens in an executor's forward, reached
    through a callback, and still raises the crash (not a status error)."""
    ctx = crashacc()
    array = mx.nd.array(np.array([-1.0, 2.0], np.float32), ctx=ctx)
    assert np.array_equal(mx.nd.Activation(array, act_type="relu").asnumpy(), [0.0, 2.0])
    ctx.configure(fail="forward:exit")
    with pytest.raises(mx.PluginCrashedError) as caught:
        mx.nd.Activation(array, act_type="relu").asnumpy()
    assert caught.value.exit_code == 3 and caught.value.signal is None
    assert "exited with status 3 during executor forward(Activation)" in str(caught.value)


def test_hang_times_out(crashacc: Callable[..., mx.Context], engine_kind: str) -> None:
    ctx = crashacc(call=1.0, load=5.0)
    library = ctx.library
    data = np.ones((2, 2), np.float32)
    exe = _relu_graph().simple_bind(ctx, data=data.shape)
    exe.forward(data=data)[0].wait_to_read()
    ctx.configure(fail="infer:hang")
    start = time.monotonic()
    with pytest.raises(mx.PluginTimeoutError) as caught:
        exe.forward(data=data)[0].asnumpy()
    assert 0.9 < time.monotonic() - start < 10
    error = caught.value
    assert isinstance(error, TimeoutError) and isinstance(error, mx.PluginCrashedError)
    assert error.timeout == 1.0 and "MXNET_ACC_ISOLATE_TIMEOUT" in str(error)
    assert not library.alive
    with pytest.raises(OSError):  # the child was killed and reaped
        os.kill(library.pid, 0)
    assert np.array_equal(_forward(crashacc(), data), data)


def test_timeout_from_environment(crashacc_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _close_crashacc()
    monkeypatch.setenv("MXNET_ACC_ISOLATE_TIMEOUT", "0.5")
    monkeypatch.setenv("CRASHACC_FAIL", "supported:hang")  # inherited by the child
    ctx = mx.load_acc(crashacc_path, isolate=True)
    assert ctx.library.timeouts == Timeouts(0.5, 600.0)
    with pytest.raises(mx.PluginTimeoutError, match="supportedOps"):
        _forward(ctx, np.ones(3, np.float32))
    _close_crashacc()


def test_crash_while_loading(crashacc_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _close_crashacc()
    monkeypatch.setenv("CRASHACC_FAIL", "initialize:segv")
    with pytest.raises(mx.PluginCrashedError) as caught:
        mx.load_acc(crashacc_path, isolate=True)
    assert caught.value.function == "initialize"
    monkeypatch.setenv("CRASHACC_FAIL", "initialize:error")
    with pytest.raises(mx.PluginError, match="initialize failed on request"):
        mx.load_acc(crashacc_path, isolate=True)
    monkeypatch.delenv("CRASHACC_FAIL")
    ctx = mx.load_acc(crashacc_path, isolate=True)
    assert np.array_equal(_forward(ctx, np.ones(3, np.float32)), np.ones(3))
    _close_crashacc()


def test_error_status_keeps_the_process(crashacc: Callable[..., mx.Context]) -> None:
    ctx = crashacc()
    ctx.configure(fail="infer:error")
    with pytest.raises(mx.PluginError, match="infer failed on request"):
        _forward(ctx, np.ones(3, np.float32))
    assert ctx.library.alive
    ctx.configure(fail="none")
    assert np.array_equal(_forward(ctx, np.ones(3, np.float32)), np.ones(3))


def test_close_and_reload(crashacc: Callable[..., mx.Context]) -> None:
    ctx = crashacc()
    library = ctx.library
    library.close()
    library.close()
    assert not library.alive
    with pytest.raises(mx.LibraryDeadError, match="closed"):
        ctx.configure(query="stats")
    assert mx.load_acc(library.path, isolate=True).library.alive


def test_reload_keeps_the_given_name(crashacc_path: Path, tmp_path: Path) -> None:
    copy = shutil.copy(crashacc_path, tmp_path / "libcrash_renamed.so")
    ctx = mx.load_acc(copy, acc_name="crash_renamed", isolate=True)
    ctx.configure(fail="infer:abort")
    with pytest.raises(mx.PluginCrashedError):
        _forward(ctx, np.ones(2, np.float32))
    settle_engine()
    again = mx.load_acc(copy, isolate=True)  # no acc_name: the dead library's
    assert again == mx.Context("crash_renamed", 0) and again.library.alive
    assert np.array_equal(_forward(mx.crash_renamed(0), -np.ones(2, np.float32)), np.zeros(2))
    again.library.close()


@pytest.mark.stress
def test_misbehaving_plugin_crash_and_hang(build_test_plugin: Callable[..., Path],
                                           tmp_path: Path) -> None:
    """docs/robustness.md's plugin-crash row, isolated: the crash mode of
    tests/plugins/misbehaving_acc.c raises here, and its slow mode is cut
    short by the timeout. (A copy: test_misbehaving loads the file
    in-process.)"""
    copy = shutil.copy(build_test_plugin("misbehaving_acc.c", "misbehave"),
                       tmp_path / "libmisbehave_isolated.so")
    ctx = mx.load_acc(copy, acc_name="misbehave_iso", isolate=True)
    data = np.linspace(-1, 1, 6, dtype=np.float32)
    assert np.array_equal(_forward(ctx, data), np.maximum(data, 0))
    ctx.configure(mode="crash")
    with pytest.raises(mx.PluginCrashedError, match="during infer") as caught:
        _forward(ctx, data)
    _expect_signal(caught.value, "SIGSEGV")
    settle_engine()
    ctx = mx.load_acc(copy, isolate=True)
    ctx.library.timeouts = Timeouts(call=0.5, load=10.0)
    ctx.configure(mode="slow", delay_ms=5000)
    with pytest.raises(mx.PluginTimeoutError):
        _forward(ctx, data)
    settle_engine()
    ctx = mx.load_acc(copy, isolate=True)
    assert np.array_equal(_forward(ctx, data), np.maximum(data, 0))
    ctx.library.close()


# ---- loading ----------------------------------------------------------------------------


def test_load_errors(tmp_path: Path, isolated: dict[str, mx.Context]) -> None:
    text = tmp_path / "libnot.so"
    text.write_text("not a library")
    with pytest.raises(mx.NotALibraryError, match="not a loadable library"):
        mx.load_acc(text, isolate=True)
    with pytest.raises(mx.LibraryNotFoundError):
        mx.load_acc(tmp_path / "libmissing.so", isolate=True)
    # A file is loaded once: not both ways (the bundled cpu_ref is isolated
    # when the suite runs with MXNET_ACC_ISOLATE=1).
    bundled = mx.get_library("cpu_ref")
    where = "a child process" if bundled.isolated else "this process"
    with pytest.raises(mx.LibraryError, match=f"already loaded in {where}"):
        mx.load_acc(bundled.path, isolate=not bundled.isolated)
    with pytest.raises(mx.LibraryError, match="already loaded in a child process"):
        mx.load_acc(isolated["cpu_ref"].library.path, isolate=False)
    assert mx.load_acc(isolated["cpu_ref"].library.path) == isolated["cpu_ref"]


def test_environment_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("1", True), ("0", False), ("", False), ("yes", True)):
        monkeypatch.setenv("MXNET_ACC_ISOLATE", value)
        assert isolate.isolate_by_default() is expected
    monkeypatch.setenv("MXNET_ACC_ISOLATE", "maybe")
    with pytest.raises(mx.InvalidArgumentError, match="MXNET_ACC_ISOLATE"):
        isolate.isolate_by_default()
    monkeypatch.setenv("MXNET_ACC_ISOLATE_TIMEOUT", "900")
    monkeypatch.delenv("MXNET_ACC_ISOLATE_LOAD_TIMEOUT", raising=False)
    assert isolate.timeouts_from_environment() == Timeouts(900.0, 900.0)
    monkeypatch.setenv("MXNET_ACC_ISOLATE_LOAD_TIMEOUT", "30")
    assert isolate.timeouts_from_environment() == Timeouts(900.0, 30.0)
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("MXNET_ACC_ISOLATE_TIMEOUT", bad)
        with pytest.raises(mx.InvalidArgumentError, match="MXNET_ACC_ISOLATE_TIMEOUT"):
            isolate.timeouts_from_environment()
    assert Timeouts(2.0, 5.0).of("infer") == 2.0 and Timeouts(2.0, 5.0).of("loadModel") == 5.0


@pytest.mark.stress
def test_environment_switch_isolates_discovery() -> None:
    """MXNET_ACC_ISOLATE=1: the libraries discovery loads at import (through
    the registry) run in child processes."""
    program = (
        "import numpy as np, acc_host as mx\n"
        "libraries = [mx.get_library(name) for name in ('cpu_ref', 'mlu')]\n"
        "print([library.isolated for library in libraries])\n"
        "x = mx.nd.array(np.array([-1.0, 1.0], np.float32), ctx=mx.cpu_ref(0))\n"
        "print(mx.nd.Activation(x, act_type='relu').asnumpy().tolist())\n")
    environment = {**os.environ, "MXNET_ACC_ISOLATE": "1",
                   "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            env=environment, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[True, True]", "[0.0, 1.0]"]


def test_registry_replaces_only_dead_libraries(isolated: dict[str, mx.Context]) -> None:
    library = isolated["cpu_ref"].library
    assert registry.register(library.path) is library
    assert mx.load_acc(library.path, isolate=True).library is library
