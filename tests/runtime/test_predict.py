"""Executor.predict and its direct path (acc_host.runtime.direct_run): a synchronous
inference that, for an executor whose graph is one subgraph on fixed
buffers, writes the inputs, calls infer() and copies the outputs out as one
engine operation. The CPU path is the oracle; every test also checks that
the side effects are forward()'s (the arguments hold the inputs, the
outputs the results) and that the direct path is the one that ran, or
stood aside, as the case requires."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support.conv_fc_net import SHAPE, bind, conv_fc_net
from support.conv_fc_net import image as _image
from support.conv_fc_net import weights as _weights
from support.direct_calls import count_direct_calls
from support.engines import using_engine

import acc_host as mx
from acc_host import engine
from acc_host.errors import GraphError, PluginError, ShapeError
from acc_host.runtime import direct_run

RTOL, ATOL = 1e-4, 1e-5


def _bind(ctx: mx.Context, values: dict[str, np.ndarray]) -> mx.runtime.executor.Executor:
    """The network with the relu's output as a second head (two outputs)."""
    return bind(ctx, values, with_activation_head=True)


class _Counter:
    """Counts the direct path's runs: the one-call path's (what predict()
    takes) and DirectRun._work's (checked mode's, and a predict() that makes
    the path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs = 0
        original = direct_run.DirectRun._work

        def counted(run: direct_run.DirectRun, values: object) -> list[np.ndarray]:
            self.runs += 1
            return original(run, values)  # type: ignore[arg-type]

        monkeypatch.setattr(direct_run.DirectRun, "_work", counted)
        count_direct_calls(monkeypatch, self._count)

    def _count(self) -> None:
        self.runs += 1


@pytest.fixture
def direct(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    return _Counter(monkeypatch)


def _check(exe: mx.runtime.executor.Executor, cpu: mx.runtime.executor.Executor,
           image: np.ndarray) -> None:
    """exe.predict(data=image) against the CPU path's forward, and the side
    effects: the argument holds image, the outputs hold the results."""
    results = exe.predict(data=image)
    expected = [output.asnumpy() for output in cpu.forward(data=image)]
    assert len(results) == len(expected)
    for got, want, output in zip(results, expected, exe.outputs):
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(output.asnumpy(), got)
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), image)


@pytest.mark.usefixtures("offload_everything", "engine_kind")
@pytest.mark.parametrize("accelerator", ["cpu_ref", "mlu"])
def test_predict_runs_directly_and_follows_data_and_weights(accelerator: str,
                                                            direct: _Counter) -> None:
    weights = _weights(0)
    exe, cpu = _bind(mx.Context(accelerator, 0), weights), _bind(mx.cpu(), weights)
    assert len(exe.plan.steps) == 1 and len(exe.subgraphs) == 1
    _check(exe, cpu, _image(0))  # compiles: the general path
    assert direct.runs == 0
    for seed in (1, 2):
        _check(exe, cpu, _image(seed))
    assert direct.runs == 2
    # A written weight: the general path refreshes the model once, then
    # the direct path runs again.
    for target in (exe, cpu):
        target.arg_dict["conv_weight"][:] = target.arg_dict["conv_weight"].asnumpy() * -2.0
        target.arg_dict["fc_bias"] += 1.0
    _check(exe, cpu, _image(3))
    assert direct.runs == 2
    assert exe.subgraphs[0].weight_refreshes == 1
    _check(exe, cpu, _image(4))
    assert direct.runs == 3
    # Without inputs: the arguments as they are (written before, with a
    # write still pending under ThreadedEngine).
    image = _image(5)
    exe.arg_dict["data"][:] = image
    cpu.arg_dict["data"][:] = image
    results = exe.predict()
    np.testing.assert_allclose(results[0], cpu.forward()[0].asnumpy(), rtol=RTOL, atol=ATOL)
    # forward() and predict() mix.
    image = _image(6)
    np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(),
                               cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    _check(exe, cpu, _image(7))
    # Closed: the next predict loads the model again (general path), then
    # runs directly on the same buffers.
    runs = direct.runs
    exe.close()
    _check(exe, cpu, _image(8))
    _check(exe, cpu, _image(9))
    assert exe.subgraphs[0].loads == 2 and direct.runs == runs + 1
    exe.close()


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_executors_sharing_weights_each_see_a_write_to_them(direct: _Counter) -> None:
    """Each loaded model watches the weights' vars (engine.WriteWatch): a
    write to an array two executors share reaches both direct paths."""
    ctx = mx.cpu_ref(0)
    first = _bind(ctx, _weights(0))
    shared = {name: array for name, array in first.arg_dict.items() if name != "data"}
    second = conv_fc_net(True).bind(ctx, {**shared, "data": mx.nd.zeros(SHAPE, ctx)})
    cpu = _bind(mx.cpu(), _weights(0))
    for exe in (first, second, first, second):
        _check(exe, cpu, _image(1))
    assert direct.runs == 2
    for target in (first, cpu):  # first's arrays are second's
        target.arg_dict["fc_weight"][:] = target.arg_dict["fc_weight"].asnumpy() + 0.5
    for exe in (first, second, first, second):
        _check(exe, cpu, _image(2))
    assert direct.runs == 4  # each refreshed its model once, then ran directly
    assert [exe.subgraphs[0].weight_refreshes for exe in (first, second)] == [1, 1]
    for exe in (first, second):
        exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_predict_takes_the_general_path_where_the_direct_one_does_not_fit(
        direct: _Counter) -> None:
    # A CPU operator after the subgraph: two steps.
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=2, kernel=(1, 1), name="conv")
    net = mx.sym.Cast(mx.sym.arcsinh(mx.sym.Cast(conv, dtype="float64"), name="bent"),
                      dtype="float32")
    exe = net.simple_bind(mx.cpu_ref(0), data=(1, 2, 3, 3))
    cpu = net.simple_bind(mx.cpu(), data=(1, 2, 3, 3))
    for target in (exe, cpu):
        target.arg_dict["conv_weight"][:] = np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1)
    image = _image(1)[:1, :2, :3, :3].copy()
    for _ in range(3):
        np.testing.assert_allclose(exe.predict(data=image)[0],
                                   cpu.forward(data=image)[0].asnumpy(), rtol=RTOL)
    assert len(exe.plan.steps) > 1 and direct.runs == 0
    exe.close()
    # The CPU path: no subgraph at all.
    cpu_exe = _bind(mx.cpu(), _weights(2))
    np.testing.assert_allclose(cpu_exe.predict(data=_image(2))[1],
                               _bind(mx.cpu(), _weights(2)).forward(data=_image(2))[1].asnumpy())
    assert direct.runs == 0


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_predict_stands_aside_for_a_trace_and_a_differential_check(
        direct: _Counter, tmp_path: object) -> None:
    from acc_host import trace

    weights = _weights(3)
    exe, cpu = _bind(mx.cpu_ref(0), weights), _bind(mx.cpu(), weights)
    _check(exe, cpu, _image(0))
    _check(exe, cpu, _image(1))
    assert direct.runs == 1
    path = f"{tmp_path}/trace.jsonl"
    trace.start(path)
    try:
        _check(exe, cpu, _image(2))
    finally:
        trace.stop()
    assert direct.runs == 1
    exe._differential = object()  # what check() sets while it runs
    try:
        assert exe._direct_run() is None
    finally:
        exe._differential = None
    _check(exe, cpu, _image(3))
    assert direct.runs == 2
    exe.close()


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_predict_refuses_bad_inputs_and_leaves_the_executor_as_it_was(direct: _Counter) -> None:
    weights = _weights(4)
    exe, cpu = _bind(mx.cpu_ref(0), weights), _bind(mx.cpu(), weights)
    _check(exe, cpu, _image(0))
    _check(exe, cpu, _image(1))
    with pytest.raises(ShapeError, match="'data' has shape"):
        exe.predict(data=np.zeros((1, 3, 5, 5), np.float32))
    with pytest.raises(GraphError, match="'nothing' is not an argument"):
        exe.predict(nothing=np.zeros(SHAPE, np.float32))
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), _image(1))
    # Another dtype and a strided view are converted, as forward() does.
    image = _image(2)
    wide = np.zeros((2, 3, 5, 10), np.float64)
    wide[..., ::2] = image
    results = exe.predict(data=wide[..., ::2])
    np.testing.assert_allclose(results[0], cpu.forward(data=image)[0].asnumpy(), rtol=RTOL,
                               atol=ATOL)
    # A weight as input: the general path writes it (the model refreshes).
    runs = direct.runs
    bias = np.full(3, 2.0, np.float32)
    cpu.arg_dict["fc_bias"][:] = bias
    np.testing.assert_allclose(exe.predict(data=image, fc_bias=bias)[0],
                               cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    assert direct.runs == runs
    _check(exe, cpu, _image(3))
    assert direct.runs == runs + 1
    exe.close()


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_a_plugin_failure_on_the_direct_path_is_raised_once(
        direct: _Counter, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = _weights(5)
    exe, cpu = _bind(mx.cpu_ref(0), weights), _bind(mx.cpu(), weights)
    library = exe.subgraphs[0].library
    real = library.lib
    failing = [False]

    class Failing:
        """The library's functions, copyFromAcc failing while failing[0]
        (the direct path resolves its callables once, when it is made)."""

        def __getattr__(self, name: str) -> object:
            function = getattr(real, name)
            if name == "copyFromAcc":
                # MX_ACC_ERR_*: a plugin failure
                return lambda *args: 3 if failing[0] else function(*args)
            return function

    monkeypatch.setattr(type(library), "lib", property(lambda self: Failing()))
    _check(exe, cpu, _image(0))
    _check(exe, cpu, _image(1))
    failing[0] = True
    with pytest.raises(PluginError, match="copyFromAcc"):
        exe.predict(data=_image(2))
    failing[0] = False
    monkeypatch.undo()
    mx.nd.waitall()  # nothing stale left on any array
    _check(exe, cpu, _image(3))
    assert direct.runs >= 2
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_threads_sharing_an_executor_get_their_own_results(direct: _Counter) -> None:
    weights = _weights(6)
    exe, cpu = _bind(mx.cpu_ref(0), weights), _bind(mx.cpu(), weights)
    exe.predict(data=_image(0))
    images = [_image(seed) for seed in range(8)]
    expected = [cpu.forward(data=image)[0].asnumpy() for image in images]
    failures: list[str] = []

    def work(index: int) -> None:
        for _ in range(5):
            got = exe.predict(data=images[index])[0]
            if not np.allclose(got, expected[index], rtol=RTOL, atol=ATOL):
                failures.append(f"thread {index}")

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures and direct.runs >= 40
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_predict_waits_for_a_pending_weight_write(direct: _Counter) -> None:
    """Program order: a weight write pushed before predict() (still queued
    on a worker) is seen by it; the direct path stands aside until the
    write is done."""
    with using_engine("ThreadedEngine"):
        weights = _weights(7)
        exe, cpu = _bind(mx.cpu_ref(0), weights), _bind(mx.cpu(), weights)
        _check(exe, cpu, _image(0))
        _check(exe, cpu, _image(1))
        runs = direct.runs
        release = threading.Event()
        bias = exe.arg_dict["fc_bias"]
        new_bias = np.full(3, -4.0, np.float32)

        def slow_write(_run_ctx: object) -> None:
            release.wait(10)
            bias._write_now(new_bias)

        engine.get().push_sync(slow_write, bias.context, (), [bias._var])
        threading.Timer(0.2, release.set).start()
        cpu.arg_dict["fc_bias"][:] = new_bias
        _check(exe, cpu, _image(2))
        assert direct.runs == runs  # the general path, after the write
        _check(exe, cpu, _image(3))
        assert direct.runs == runs + 1
        exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_predict_runs_directly_on_an_isolated_plugin(direct: _Counter,
                                                     tmp_path: pytest.TempPathFactory) -> None:
    """The direct path's copies and infer() go through the isolated
    library's seam like any other call (descriptors into shared memory)."""
    import shutil
    from pathlib import Path

    copy = Path(str(tmp_path)) / "libcpu_ref_predict.so"
    shutil.copy(mx.get_library("cpu_ref").path, copy)
    ctx = mx.load_acc(copy, acc_name="predict_iso", isolate=True)
    weights = _weights(8)
    exe, cpu = _bind(ctx, weights), _bind(mx.cpu(), weights)
    for seed in range(3):
        _check(exe, cpu, _image(seed))
    assert direct.runs == 2
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_a_dropped_executor_is_freed_at_once() -> None:
    """The executor and its runner form no reference cycle: dropping the
    last reference frees it (its device buffers and models) without waiting
    for the cyclic garbage collector."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        exe = _bind(mx.cpu_ref(0), _weights(3))
        exe.predict(data=_image(0))
        exe.forward(data=_image(1))[0].wait_to_read()
        engine.drain()
        freed = weakref.ref(exe)
        del exe
        assert freed() is None
    finally:
        gc.enable()
