"""The executor's one-call direct path (DirectRun.fast, fast_predict: the
inputs' check, the engine's grant, the step's checks and LoadedModel's
direct call in one closure) keeps every check of the general path: each
test warms an executor until forward() takes the path, then breaks one
thing and checks that the check fires (the error, or the general path
taking over with the right result). numpy's maximum is the oracle."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.direct_calls import count_direct_calls, count_output_reads
from support.engines import using_engine

import acc_host as mx
from acc_host import engine, trace
from acc_host.errors import GraphError, ShapeError, TensorError

SHAPE = (1, 16)


class _Counter:
    """Counts the calls of the hook that install (a tests/support/
    direct_calls counter) places on the path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch,
                 install: Callable[[pytest.MonkeyPatch, Callable[[], None]], None]) -> None:
        self.count = 0
        install(monkeypatch, self._add)

    def _add(self) -> None:
        self.count += 1


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    """Counts the direct path's calls."""
    return _Counter(monkeypatch, count_direct_calls)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    """Counts the copies of the executor outputs' one-copy reader."""
    return _Counter(monkeypatch, count_output_reads)


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)


def _warm_relu() -> mx.runtime.executor.Executor:
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    exe = relu.simple_bind(mx.cpu_ref(0), data=SHAPE)
    for seed in range(3):  # loads the model, then makes the direct path
        exe.forward(data=_x(seed))
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(seed), 0))
    return exe


@pytest.mark.usefixtures("engine_kind")
def test_forward_and_predict_take_the_one_call_path(calls: _Counter) -> None:
    exe = _warm_relu()
    before = calls.count
    for seed in range(3, 8):
        assert exe.forward(data=_x(seed)) is exe.forward(data=_x(seed))
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(seed), 0))
        (got,) = exe.predict(data=_x(seed + 10))
        np.testing.assert_array_equal(got, np.maximum(_x(seed + 10), 0))
    assert calls.count == before + 15
    # Without inputs: the argument as it is; other dtypes, layouts and
    # NDArrays converted as the general path converts them.
    exe.arg_dict["data"][:] = _x(20)
    exe.forward()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(20), 0))
    wide = np.zeros((1, 32), np.float64)
    wide[:, ::2] = _x(21)
    exe.forward(data=wide[:, ::2])
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(21), 0))
    exe.forward(data=mx.nd.array(_x(22)))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(22), 0))
    assert calls.count == before + 18
    exe.close()


@pytest.mark.usefixtures("engine_kind")
def test_bad_inputs_are_refused_and_leave_the_argument(calls: _Counter) -> None:
    exe = _warm_relu()
    before = calls.count
    with pytest.raises(ShapeError, match="'data' has shape"):
        exe.forward(data=np.zeros((2, 16), np.float32))
    with pytest.raises(ShapeError, match="'data' has shape"):
        exe.predict(data=np.zeros((16,), np.float32))
    with pytest.raises(TensorError, match="cannot be converted"):
        exe.forward(data=np.array([["a"] * 16]))
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), _x(2))
    with pytest.raises(GraphError, match="'label' is not an argument"):
        exe.forward(data=_x(5), label=_x(6))
    assert calls.count == before
    exe.close()


@pytest.mark.parametrize("which", ["inputs", "outputs"])
@pytest.mark.usefixtures("engine_kind")
def test_a_freed_buffer_is_refused_before_the_plugin_sees_it(calls: _Counter,
                                                              which: str) -> None:
    exe = _warm_relu()
    before = calls.count
    step = exe.bound_step(exe.subgraphs[0])
    assert step is not None
    next(iter(getattr(step.infer, which).values())).free()
    with pytest.raises(TensorError, match="freed"):
        exe.forward(data=_x(5))
        exe.outputs[0].asnumpy()  # ThreadedEngine: the output's wait reports it
    assert calls.count == before


@pytest.mark.usefixtures("engine_kind", "offload_everything")
def test_weights_written_since_the_model_saw_them_are_used(calls: _Counter) -> None:
    data, weight = mx.sym.Variable("data"), mx.sym.Variable("w")
    net = mx.sym.FullyConnected(data, weight=weight, num_hidden=4, no_bias=True, name="fc")
    exe = net.simple_bind(mx.cpu_ref(0), data=SHAPE)
    w = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    exe.arg_dict["w"][:] = w
    for seed in range(3):
        exe.forward(data=_x(seed))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), _x(2) @ w.T, rtol=1e-5, atol=1e-5)
    before = calls.count
    exe.forward(data=_x(3))
    assert calls.count == before + 1
    exe.arg_dict["w"][:] = 2 * w  # the model holds its own copy: it must be refreshed
    exe.forward(data=_x(4))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), _x(4) @ (2 * w).T,
                               rtol=1e-5, atol=1e-5)
    (got,) = exe.predict(data=_x(5))
    np.testing.assert_allclose(got, _x(5) @ (2 * w).T, rtol=1e-5, atol=1e-5)
    exe.close()


def test_a_pending_write_orders_the_forward_after_it(calls: _Counter) -> None:
    """ThreadedEngine: a write to the argument pushed before forward() and
    still queued on a worker is seen by it (the path stands aside while
    anything is pending on its vars); then the path runs again."""
    with using_engine("ThreadedEngine"):
        exe = _warm_relu()
        before = calls.count
        release = threading.Event()
        data = exe.arg_dict["data"]

        def slow_write(_run_ctx: object) -> None:
            release.wait(10)
            data._write_now(_x(30))

        engine.get().push_sync(slow_write, data.context, (), [data._var])
        threading.Timer(0.2, release.set).start()
        exe.forward()
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(30), 0))
        assert calls.count == before
        exe.forward(data=_x(31))
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(31), 0))
        assert calls.count == before + 1
        exe.close()

def _check_whole_forwards_seen(read: Callable[[mx.runtime.executor.Executor], np.ndarray]) -> None:
    """Forwards 1000 constant inputs (1 to 5) on the direct path while
    another thread reads the output with read(exe): every value read is one
    whole forward's output (or the output before them), never a mix."""
    exe = _warm_relu()
    inputs = [np.full(SHAPE, float(k), np.float32) for k in range(1, 6)]
    seen: list[np.ndarray] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            seen.append(read(exe))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(200):
            for value in inputs:
                exe.forward(data=value)
    finally:
        done.set()
        thread.join(30)
    assert seen
    warm = np.maximum(_x(2), 0)  # the output before the first of these forwards
    for values in seen:
        assert np.array_equal(values, warm) or (
            np.all(values == values.flat[0]) and values.flat[0] in range(1, 6))
    exe.close()


def test_threads_pushing_reads_of_the_output_see_whole_forwards(calls: _Counter) -> None:
    """ThreadedEngine: forwards on the path while another thread pushes
    operations reading the output: each read sees the output of one whole
    forward (one of the inputs given), never a mix or a stale buffer."""
    with using_engine("ThreadedEngine"):
        _check_whole_forwards_seen(lambda exe: (exe.outputs[0] * 1).asnumpy())
        assert calls.count > 0


@pytest.mark.usefixtures("engine_kind")
def test_a_trace_sees_the_copies(tmp_path: Path, calls: _Counter) -> None:
    exe = _warm_relu()
    before = calls.count
    path = tmp_path / "run.trace"
    trace.start(path)
    try:
        exe.forward(data=_x(7))
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(7), 0))
    finally:
        trace.stop()
    names = [record["fn"] for record in trace.read_trace(path).calls()]
    # the traced library's copies, not the callables the path resolved
    assert "copyToAcc" in names and "copyFromAcc" in names
    assert calls.count == before
    exe.close()


def test_checked_mode_keeps_its_guards(monkeypatch: pytest.MonkeyPatch, calls: _Counter,
                                      reads: _Counter) -> None:
    """MXNET_ACC_CHECK_OUTPUTS=1: the buffers carry guards, and the path's
    one call stands aside for the checked copies and infer()."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    exe = _warm_relu()
    exe.forward(data=_x(8))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(_x(8), 0))
    (got,) = exe.predict(data=_x(9))
    np.testing.assert_array_equal(got, np.maximum(_x(9), 0))
    assert calls.count == 0
    assert reads.count == 0  # the output's read is the guarded copy too
    exe.close()


# ---- the outputs' one-copy read (runtime.executor_output) --------------------------------


@pytest.mark.usefixtures("engine_kind")
def test_output_reads_take_one_copy_and_keep_their_checks(reads: _Counter) -> None:
    exe = _warm_relu()
    out = exe.outputs[0]
    before = reads.count
    for seed in range(3, 6):
        exe.forward(data=_x(seed))
        got = out.asnumpy()
        np.testing.assert_array_equal(got, np.maximum(_x(seed), 0))
        assert got is not out.asnumpy()  # a new array per read
    assert reads.count == before + 6
    # A view reads through NDArray's path.
    np.testing.assert_array_equal(out[0].asnumpy(), np.maximum(_x(5), 0)[0])
    assert reads.count == before + 6
    # A write into the output from outside is what the next read sees.
    out[:] = 7.0
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 7.0, np.float32))
    exe.forward(data=_x(6))
    np.testing.assert_array_equal(out.asnumpy(), np.maximum(_x(6), 0))
    exe.close()


@pytest.mark.usefixtures("engine_kind")
def test_a_freed_output_buffer_is_refused_by_the_read(reads: _Counter) -> None:
    exe = _warm_relu()
    before = reads.count
    step = exe.bound_step(exe.subgraphs[0])
    assert step is not None
    next(iter(step.infer.outputs.values())).free()
    with pytest.raises(TensorError, match="freed"):
        exe.outputs[0].asnumpy()
    assert reads.count == before


def test_an_output_read_waits_for_a_pending_write_and_reports_a_failure(
        reads: _Counter) -> None:
    """ThreadedEngine: a write to the output still queued on a worker is
    waited for (the read stands aside), and a failure stored on the
    output's var is raised by the read."""
    with using_engine("ThreadedEngine"):
        exe = _warm_relu()
        out = exe.outputs[0]
        before = reads.count
        release = threading.Event()

        def slow_write(_run_ctx: object) -> None:
            release.wait(10)
            out._write_now(np.full(SHAPE, 3.0, np.float32))

        engine.get().push_sync(slow_write, out.context, (), [out._var])
        threading.Timer(0.2, release.set).start()
        np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 3.0, np.float32))
        assert reads.count == before

        def failing(_run_ctx: object) -> None:
            raise TensorError("the test's failure")

        engine.get().push_sync(failing, out.context, (), [out._var])
        with pytest.raises(TensorError, match="the test's failure"):
            out.asnumpy()
        assert reads.count == before
        exe.forward(data=_x(40))  # the next forward's output is read again
        np.testing.assert_array_equal(out.asnumpy(), np.maximum(_x(40), 0))
        exe.close()


def test_threads_reading_the_output_see_whole_forwards(reads: _Counter) -> None:
    """ThreadedEngine: another thread reading the output with asnumpy()
    while forwards run on the direct path sees one whole forward's output
    each time (the executor's lock orders the read with the forward)."""
    with using_engine("ThreadedEngine"):
        _check_whole_forwards_seen(lambda exe: exe.outputs[0].asnumpy())
        assert reads.count > 0


@pytest.mark.usefixtures("engine_kind")
def test_onnx_backend_run_takes_the_exact_path_only_for_inputs_as_bound(
        calls: _Counter) -> None:
    """The ONNX backend hands a list of one array to the executor's exact
    direct predict; anything else (another shape, a layout to convert)
    takes the backend's own path, with the right results."""
    from onnx import TensorProto, helper

    from acc_host.onnx.backend import prepare

    graph = helper.make_graph(
        [helper.make_node("Relu", ["data"], ["y"])], "relu",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16])])
    rep = prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  accelerator=mx.cpu_ref(0))
    for seed in range(3):
        (got,) = rep.run([_x(seed)])
        np.testing.assert_array_equal(got, np.maximum(_x(seed), 0))
    before = calls.count
    (got,) = rep.run([_x(3)])
    np.testing.assert_array_equal(got, np.maximum(_x(3), 0))
    assert calls.count == before + 1
    two = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
    (got,) = rep.run([two])  # another shape: bound anew
    np.testing.assert_array_equal(got, np.maximum(two, 0))
    wide = np.zeros((1, 32), np.float32)
    wide[:, ::2] = _x(5)
    (got,) = rep.run([wide[:, ::2]])  # not C-contiguous: converted
    np.testing.assert_array_equal(got, np.maximum(_x(5), 0))
    (got,) = rep.run([_x(6).astype(np.float64)])
    np.testing.assert_allclose(got, np.maximum(_x(6), 0))


@pytest.mark.usefixtures("engine_kind")
def test_module_forward_of_one_batch_keeps_labels_and_rebinding(calls: _Counter) -> None:
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    module = mx.mod.Module(relu, data_names=["data"], label_names=None,
                           context=mx.cpu_ref(0))
    module.bind(data_shapes=[("data", SHAPE)], for_training=False)
    module.init_params()
    for seed in range(3):
        module.forward(mx.io.DataBatch([mx.nd.array(_x(seed))]), is_train=False)
        np.testing.assert_array_equal(module.get_outputs()[0].asnumpy(),
                                      np.maximum(_x(seed), 0))
    before = calls.count
    module.forward(mx.io.DataBatch([mx.nd.array(_x(3))]), is_train=False)
    np.testing.assert_array_equal(module.get_outputs()[0].asnumpy(), np.maximum(_x(3), 0))
    assert calls.count == before + 1
    two = np.random.default_rng(4).standard_normal((2, 16)).astype(np.float32)
    module.forward(mx.io.DataBatch([mx.nd.array(two)]), is_train=False)  # rebinds
    np.testing.assert_array_equal(module.get_outputs()[0].asnumpy(), np.maximum(two, 0))
    with pytest.raises(GraphError, match="data arrays"):
        module.forward(mx.io.DataBatch([mx.nd.array(two), mx.nd.array(two)]))


@pytest.mark.usefixtures("engine_kind")
def test_operators_on_an_output_are_planned_as_on_any_ndarray(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor's outputs are ExecutorOutputs: operators given one take
    the planned call NDArrays take (not the unplanned one, 4x slower), with
    the same results, and write into one with out=."""
    from acc_host.ndarray import call_plan

    planned: list[list[object]] = []
    call = call_plan._CallPlan.call

    def counted(plan: object, inputs: list[object], out: object = None) -> object:
        planned.append(list(inputs))
        return call(plan, inputs, out)  # type: ignore[arg-type]

    monkeypatch.setattr(call_plan._CallPlan, "call", counted)
    exe = _warm_relu()
    out = exe.outputs[0]
    assert isinstance(out, mx.nd.NDArray)
    for seed in range(3, 6):
        exe.forward(data=_x(seed))
        np.testing.assert_array_equal(mx.nd.relu(out * 2).asnumpy(),
                                      2 * np.maximum(_x(seed), 0))
    # the calls after the first of each signature, the output's included
    assert any(any(array is out for array in inputs) for inputs in planned)
    target = mx.nd.zeros(SHAPE, ctx=mx.cpu_ref(0))
    mx.nd.relu(mx.nd.array(_x(7), ctx=mx.cpu_ref(0)), out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.maximum(_x(7), 0))
    mx.nd.relu(out, out=target)
    np.testing.assert_array_equal(target.asnumpy(), np.maximum(_x(7), 0))
    exe.close()
