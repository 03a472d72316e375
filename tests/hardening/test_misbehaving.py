"""Misbehaving plugins (issue 10, point 5; docs/robustness.md).

tests/plugins/misbehaving_acc.c runs relu graphs correctly in its "good"
mode and breaks one rule of mxnet_acc.h in each other mode, switched per
device with configure(mode=...). Each misbehaviour must reach the caller as
a typed acc_host error that names the plugin and what went wrong, and a
forward that failed must leave its executor (or Module) usable: with the
plugin good again, the next forward gives numpy's answer, on both engines,
with the plugin in host memory and with a plugin that has device memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from support.engines import settle_engine, using_engine
from support.plugin_builds import SANITIZE

import acc_host as mx
from acc_host.errors import PluginContractError, PluginError, PluginOutOfMemoryError
from acc_host.plugins import registry
from acc_host.runtime.subgraph import AccFallbackWarning

SRC = Path(mx.__file__).resolve().parent.parent
SHAPE = (2, 5)
# relu(relu(data)): three nodes, two of them operators the plugin runs.
SYMBOL = mx.sym.Activation(mx.sym.Activation(mx.sym.Variable("data"), act_type="relu",
                                             name="r1"), act_type="relu", name="r2")
KINDS = ("host_memory", "device_memory")
@pytest.fixture(scope="module")
def plugins(build_test_plugin: Callable[..., Path]) -> dict[str, mx.Context]:
    """The plugin symbolic-only (host memory) and with device memory."""
    host = registry.register(build_test_plugin("misbehaving_acc.c", "misbehave"))
    device = registry.register(build_test_plugin("misbehaving_acc.c", "misbehave_dev",
                                                 MISB_IMPERATIVE=True), "misbehave_dev")
    assert not host.supports_imperative and device.supports_imperative
    return {"host_memory": mx.Context(host.name, 0), "device_memory": mx.Context(device.name, 0)}


@pytest.fixture(autouse=True)
def good_again(plugins: dict[str, mx.Context]) -> Iterator[None]:
    yield
    settle_engine()
    for ctx in plugins.values():
        for dev_id in range(ctx.library.num_devices):
            mx.Context(ctx.device_type, dev_id).configure(mode="good", delay_ms=500)


@pytest.fixture(params=KINDS)
def ctx(request: pytest.FixtureRequest, plugins: dict[str, mx.Context]) -> mx.Context:
    return plugins[request.param]


def _data(seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
    values[0, 0] = np.nan  # relu keeps NaN
    return values


def _expected(values: np.ndarray) -> np.ndarray:
    return np.maximum(values, 0)  # numpy's maximum propagates NaN


class _ExecutorPath:
    def __init__(self, ctx: mx.Context) -> None:
        self.exe = SYMBOL.simple_bind(ctx, data=SHAPE)

    def run(self, values: np.ndarray) -> np.ndarray:
        return self.exe.forward(data=values)[0].asnumpy()

    def placement(self) -> set[str]:
        return set(self.exe.placement().values())


class _ModulePath:
    def __init__(self, ctx: mx.Context) -> None:
        self.mod = mx.mod.Module(SYMBOL, data_names=["data"], label_names=None, context=ctx)
        self.mod.bind([("data", SHAPE)], for_training=False)
        self.mod.init_params()

    def run(self, values: np.ndarray) -> np.ndarray:
        self.mod.forward(mx.io.DataBatch([mx.nd.array(values)]))
        return self.mod.get_outputs()[0].asnumpy()

    def placement(self) -> set[str]:
        return set(self.mod.executor.placement().values())


PATHS = {"executor": _ExecutorPath, "module": _ModulePath}


def _assert_runs(path: _ExecutorPath | _ModulePath, seed: int) -> None:
    values = _data(seed)
    np.testing.assert_array_equal(path.run(values), _expected(values))


# ---- supportedOps --------------------------------------------------------------------------

IDS_MODES = [
    ("ids_out_of_range", "returned ids [1, 2, 8] that are not ascending, unique node ids below 3"),
    ("ids_negative", "returned ids [1, 2, -7] that are not ascending, unique node ids below 3"),
    ("ids_unsorted", "returned ids [2, 1] that are not ascending, unique node ids below 3"),
    ("ids_duplicate", "returned ids [1, 2, 2] that are not ascending, unique node ids below 3"),
    ("ids_variable", "listed variable nodes [0]; only operator nodes may be listed"),
    ("ids_count_overflow", "reported 6 ids for a graph of 3 nodes"),
    ("ids_count_unset", "reported -1 ids (or left *num_ids unset) for a graph of 3 nodes"),
    ("ids_write_past", "wrote past the end of ids, whose capacity was 3: a buffer overrun, "
                       "caught in the guard the host puts after it"),
]


@pytest.mark.parametrize("mode, message", IDS_MODES, ids=[mode for mode, _ in IDS_MODES])
def test_a_broken_supported_ops_answer_is_a_contract_error(ctx: mx.Context, mode: str,
                                                           message: str) -> None:
    ctx.configure(mode=mode)
    with pytest.raises(PluginContractError) as error:
        SYMBOL.simple_bind(ctx, data=SHAPE)
    assert str(error.value) == f"{ctx.device_type}: supportedOps() {message}"
    ctx.configure(mode="good")
    path = _ExecutorPath(ctx)
    assert path.placement() == {str(ctx)}
    _assert_runs(path, 1)


@pytest.mark.parametrize("mode, detail", [
    ("supported_fail", ": supportedOps: the device is on fire (mode supported_fail)"),
    ("supported_fail_silent", "")])
def test_a_failing_supported_ops_fails_the_bind(ctx: mx.Context, mode: str, detail: str) -> None:
    ctx.configure(mode=mode)
    with pytest.raises(PluginError) as error:
        SYMBOL.simple_bind(ctx, data=SHAPE)
    assert type(error.value) is PluginError
    assert str(error.value) == (f"{ctx.device_type}: supportedOps failed with "
                                f"MX_ACC_ERR_INTERNAL{detail}")
    assert error.value.function == "supportedOps" and error.value.code == 8


# ---- failing loadModel and infer: the error, then a working forward -----------------------------

FAILURES = [
    # mode, the exception class, its message after "<plugin>: "
    ("load_fail", PluginError, "loadModel ({id}) failed with MX_ACC_ERR_INTERNAL: loadModel: "
                               "the compiler ran out of registers (mode load_fail)"),
    ("load_fail_silent", PluginError, "loadModel ({id}) failed with MX_ACC_ERR_INTERNAL"),
    ("load_oom", PluginOutOfMemoryError, "loadModel ({id}) failed with MX_ACC_ERR_OUT_OF_MEMORY: "
                                         "loadModel: the device memory is full"),
    ("infer_fail", PluginError, "infer ({id}) failed with MX_ACC_ERR_INTERNAL: infer: the "
                                "device lost its queue (mode infer_fail)"),
    ("infer_fail_silent", PluginError, "infer ({id}) failed with MX_ACC_ERR_INTERNAL"),
    ("infer_oom", PluginOutOfMemoryError, "infer ({id}) failed with MX_ACC_ERR_OUT_OF_MEMORY: "
                                          "infer: no room for the activations"),
    ("infer_bad_status", PluginError, "infer ({id}) failed with unknown status 42"),
]


@pytest.mark.parametrize("path_kind", list(PATHS))
@pytest.mark.parametrize("mode, error_class, message", FAILURES,
                         ids=[mode for mode, _, _ in FAILURES])
def test_a_failed_forward_leaves_the_executor_usable(ctx: mx.Context, engine_kind: str,
                                                     path_kind: str, mode: str,
                                                     error_class: type[PluginError],
                                                     message: str) -> None:
    path = PATHS[path_kind](ctx)
    assert path.placement() == {str(ctx)}
    if mode.startswith("infer"):
        _assert_runs(path, 1)  # compiled and run once before the plugin turns bad
    ctx.configure(mode=mode)
    with pytest.raises(error_class) as error:
        path.run(_data(2))
    assert type(error.value) is error_class
    text = str(error.value)
    assert text.startswith(f"{ctx.device_type}: ")
    model_id = text.split("(", 1)[1].split(":", 1)[0]
    assert model_id.startswith("acc_host.")
    where = text.split(" (", 1)[1].rsplit(") failed", 1)[0]  # the id, subgraph and its nodes
    assert where.startswith(f"{model_id}: subgraph 0 on {ctx.device_type}(0): ")
    assert text == f"{ctx.device_type}: " + message.format(id=where)
    ctx.configure(mode="good")
    _assert_runs(path, 3)
    _assert_runs(path, 4)
    mx.nd.waitall()  # no failure is left behind, undelivered


def test_a_failure_reaches_the_arrays_of_later_forwards_until_read(
        plugins: dict[str, mx.Context]) -> None:
    """ThreadedEngine: a forward pushed behind a failing one, before anyone
    read the failure, inherits it (as every operation touching a failed
    array does); once a read delivered it, forwards run again."""
    ctx = plugins["host_memory"]
    with using_engine("ThreadedEngine"):
        path = _ExecutorPath(ctx)
        _assert_runs(path, 1)
        ctx.configure(mode="infer_fail")
        path.exe.forward(data=_data(2))
        mx.engine.drain()  # the failing infer() ran; nothing read its failure
        ctx.configure(mode="good")
        path.exe.forward(data=_data(3))  # queued behind the failure on the outputs
        with pytest.raises(PluginError, match="lost its queue"):
            path.exe.outputs[0].asnumpy()
        _assert_runs(path, 4)


def test_a_plugin_that_declines_to_compile_runs_on_the_cpu(ctx: mx.Context,
                                                           engine_kind: str) -> None:
    path = _ExecutorPath(ctx)
    ctx.configure(mode="load_unsupported")
    values = _data(5)
    with pytest.warns(AccFallbackWarning, match="compiles nothing today"):
        result = path.run(values)
    np.testing.assert_array_equal(result, _expected(values))
    assert path.placement() == {"cpu(0)"}


def test_a_failed_imperative_operator_leaves_the_context_usable(plugins: dict[str, mx.Context],
                                                                engine_kind: str) -> None:
    """mx.nd.<op> on a symbolic plugin compiles one model per signature and
    runs it with infer(): a failure is the operator's, the next call works."""
    ctx = plugins["host_memory"]
    values = _data(6)
    array = mx.nd.array(values, ctx=ctx)
    np.testing.assert_array_equal(mx.nd.Activation(array, act_type="relu").asnumpy(),
                                  _expected(values))
    ctx.configure(mode="infer_fail")
    with pytest.raises(PluginError, match="infer .* failed with MX_ACC_ERR_INTERNAL"):
        mx.nd.Activation(array, act_type="relu").asnumpy()
    ctx.configure(mode="good")
    np.testing.assert_array_equal(mx.nd.Activation(array, act_type="relu").asnumpy(),
                                  _expected(values))


# ---- outputs infer() did not write --------------------------------------------------------------


def test_unwritten_outputs_are_not_detected_by_default(plugins: dict[str, mx.Context]) -> None:
    """Without MXNET_ACC_CHECK_OUTPUTS the host trusts MX_ACC_OK: the
    executor's outputs keep what they held (here, the previous results)."""
    path = _ExecutorPath(plugins["host_memory"])
    previous = path.run(_data(1))
    plugins["host_memory"].configure(mode="infer_unwritten")
    np.testing.assert_array_equal(path.run(_data(2)), previous)


@pytest.mark.parametrize("mode, unwritten", [("infer_unwritten", 10), ("infer_partial", 5)])
def test_checked_outputs_catch_unwritten_elements(ctx: mx.Context, engine_kind: str,
                                                  monkeypatch: pytest.MonkeyPatch, mode: str,
                                                  unwritten: int) -> None:
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    path = _ExecutorPath(ctx)
    _assert_runs(path, 1)  # loaded (in checked mode) and run once
    ctx.configure(mode=mode)
    with pytest.raises(PluginContractError) as error:
        path.run(_data(2))
    assert str(error.value).startswith(f"{ctx.device_type}: infer (acc_host.")
    assert (f"returned MX_ACC_OK but left {unwritten} of the 10 elements of output "
            f"'r2_output' unwritten") in str(error.value)
    ctx.configure(mode="good")
    _assert_runs(path, 3)


def test_checked_outputs_accept_what_good_plugins_write(monkeypatch: pytest.MonkeyPatch,
                                                        plugins: dict[str, mx.Context],
                                                        offload_everything: None) -> None:
    """No false alarm: NaN and Inf results, float and integer outputs, on
    the test plugin, cpu_ref and mlu_sim."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    values = _data(7)
    values[1, 1], values[1, 2] = np.inf, -np.inf
    for ctx in plugins.values():
        exe = SYMBOL.simple_bind(ctx, data=SHAPE)
        assert set(exe.placement().values()) == {str(ctx)}
        np.testing.assert_array_equal(exe.forward(data=values)[0].asnumpy(), _expected(values))
    tanh = mx.sym.Activation(mx.sym.Variable("data"), act_type="tanh")
    for ctx in (mx.cpu_ref(0), mx.mlu(0)):
        exe = tanh.simple_bind(ctx, data=SHAPE)
        assert set(exe.placement().values()) == {str(ctx)}
        np.testing.assert_allclose(exe.forward(data=values)[0].asnumpy(), np.tanh(values),
                                   rtol=1e-5, atol=1e-6)
    exe = mx.sym.transpose(mx.sym.Variable("a")).simple_bind(mx.cpu_ref(0), a=(3, 4),
                                                             type_dict={"a": np.int32})
    assert set(exe.placement().values()) == {"cpu_ref(0)"}
    ints = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(exe.forward(a=ints)[0].asnumpy(), ints.T)


# ---- a slow plugin ------------------------------------------------------------------------------

DELAY_S = 1.5


def test_a_slow_plugin_holds_up_only_its_own_device(plugins: dict[str, mx.Context]) -> None:
    """ThreadedEngine: a forward on the slow device returns at once; the
    other device and the CPU keep working while its infer() sleeps."""
    ctx = plugins["host_memory"]
    other = mx.Context(ctx.device_type, 1)
    with using_engine("ThreadedEngine"):
        slow, fast = _ExecutorPath(ctx), _ExecutorPath(other)
        _assert_runs(slow, 1)
        _assert_runs(fast, 1)
        ctx.configure(mode="slow", delay_ms=int(DELAY_S * 1000))
        values = _data(8)
        start = time.monotonic()
        slow.exe.forward(data=values)
        pushed = time.monotonic() - start
        fast_result = fast.exe.forward(data=values)[0].asnumpy()
        fast_done = time.monotonic() - start
        cpu_result = (mx.nd.array(values) * 2).asnumpy()
        cpu_done = time.monotonic() - start
        slow_result = slow.exe.outputs[0].asnumpy()
        slow_done = time.monotonic() - start
    assert slow_done >= DELAY_S
    assert pushed < DELAY_S / 2 and fast_done < slow_done and cpu_done < slow_done
    for result in (fast_result, slow_result):
        np.testing.assert_array_equal(result, _expected(values))
    np.testing.assert_array_equal(cpu_result, values * 2)


def test_a_slow_plugin_blocks_only_the_calling_thread_under_naive_engine(
        plugins: dict[str, mx.Context]) -> None:
    ctx = plugins["device_memory"]
    with using_engine("NaiveEngine"):
        slow, fast = _ExecutorPath(ctx), _ExecutorPath(mx.Context(ctx.device_type, 1))
        _assert_runs(slow, 1)
        _assert_runs(fast, 1)
        ctx.configure(mode="slow", delay_ms=int(DELAY_S * 1000))
        values = _data(9)
        results: dict[str, np.ndarray] = {}
        thread = threading.Thread(target=lambda: results.update(slow=slow.run(values)))
        start = time.monotonic()
        thread.start()
        time.sleep(0.1)  # the thread is inside infer()
        results["fast"] = fast.run(values)
        fast_alive = thread.is_alive()
        thread.join(timeout=60)
        slow_done = time.monotonic() - start
    assert fast_alive and slow_done >= DELAY_S
    for name in ("slow", "fast"):
        np.testing.assert_array_equal(results[name], _expected(values))


# ---- a plugin that crashes ----------------------------------------------------------------------

CHILD = """
import sys
import numpy as np
import acc_host as mx
ctx = mx.load_acc(sys.argv[1])
exe = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu").simple_bind(ctx, data=(2, 5))
print("good forward:", exe.forward(data=np.ones((2, 5)))[0].asnumpy().sum(), flush=True)
ctx.configure(mode="crash")
print("forwarding into the crash", flush=True)
exe.forward(data=np.ones((2, 5)))[0].asnumpy()
print("survived", flush=True)
"""


def test_a_crashing_plugin_kills_only_its_process(plugins: dict[str, mx.Context],
                                                  build_test_plugin: Callable[..., Path]) -> None:
    """Loaded in process, a plugin that crashes takes its process with it:
    run in a child process, the crash is reported as the child's death by
    SIGSEGV, with faulthandler's Python stack, and this process carries on.
    Loaded isolated (``load_acc(path, isolate=True)``), the same crash is a
    PluginCrashedError and the host keeps running: tests/isolate/test_isolation.py."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]))
    env.pop("MXNET_ACC_ISOLATE", None)  # this test is about the in-process case
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CHILD,
         str(build_test_plugin("misbehaving_acc.c", "misbehave"))],
        capture_output=True, text=True, timeout=300, env=env)
    assert "good forward: 10.0" in child.stdout, child.stderr
    assert "forwarding into the crash" in child.stdout and "survived" not in child.stdout
    if SANITIZE:  # AddressSanitizer's handler reports the signal and exits
        assert child.returncode != 0 and "SEGV" in child.stderr, child.stderr
    else:
        assert child.returncode == -signal.SIGSEGV, (child.returncode, child.stderr)
        assert "Fatal Python error: Segmentation fault" in child.stderr
        assert "forward" in child.stderr  # the Python stack names the call
    # This process, with the same plugin loaded, is unaffected.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_runs(_ExecutorPath(plugins["host_memory"]), 10)
