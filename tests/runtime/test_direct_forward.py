"""Executor.forward's direct path (acc_host.runtime.direct_run.DirectRun.forward):
a forward of an executor whose graph is one subgraph on fixed buffers
writes the inputs and calls infer() as one engine operation, leaving the
results in the outputs' device buffers. The CPU path is the oracle; the
tests check forward()'s side effects (arguments, outputs, versions) and
that the direct path ran, or stood aside and left the work to the general
path, as the case requires."""

from __future__ import annotations

import numpy as np
import pytest
from support.conv_fc_net import SHAPE, bind
from support.conv_fc_net import image as _image
from support.conv_fc_net import weights as _weights
from support.direct_calls import count_direct_calls

import acc_host as mx
from acc_host.errors import PluginError, ShapeError
from acc_host.runtime import direct_run

RTOL, ATOL = 1e-4, 1e-5


class _Counter:
    """Counts the direct forward's runs of the model: the one-call path's
    (BoundInference.direct's call, what forward() takes) and the engine
    operation's that replaces it in checked mode."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs = 0
        original = direct_run.DirectRun._forward_operation

        def counted(run: direct_run.DirectRun, run_ctx: object) -> None:
            original(run, run_ctx)  # type: ignore[arg-type]
            if run._failure is None and run._results is not None:
                self.runs += 1

        monkeypatch.setattr(direct_run.DirectRun, "_forward_operation", counted)
        count_direct_calls(monkeypatch, self._count, after=True)

    def _count(self) -> None:
        self.runs += 1


@pytest.fixture
def direct(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    return _Counter(monkeypatch)


def _expect(exe: mx.runtime.executor.Executor, cpu: mx.runtime.executor.Executor,
            image: np.ndarray) -> None:
    """exe's outputs against the CPU path's forward of image, and the
    argument holding image."""
    expected = [output.asnumpy() for output in cpu.forward(data=image)]
    for output, want in zip(exe.outputs, expected):
        np.testing.assert_allclose(output.asnumpy(), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), image)


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_forward_runs_directly_with_forwards_side_effects(direct: _Counter) -> None:
    weights = _weights(7)
    exe, cpu = bind(mx.cpu_ref(0), weights), bind(mx.cpu(), weights)
    exe.forward(data=_image(0))
    _expect(exe, cpu, _image(0))  # the first forward loads the model
    runs = direct.runs
    versions = [exe.arg_dict["data"].version, exe.outputs[0].version]
    returned = exe.forward(data=_image(1))
    assert returned == exe.outputs
    _expect(exe, cpu, _image(1))
    assert direct.runs == runs + 1
    # The argument and the output were written once each.
    assert [exe.arg_dict["data"].version, exe.outputs[0].version] == [v + 1 for v in versions]
    # A forward without inputs runs on the arguments as they are.
    exe.arg_dict["data"][:] = _image(2)
    exe.forward()
    _expect(exe, cpu, _image(2))
    assert direct.runs == runs + 2
    # A weight written since: the model refreshes on the general path, then
    # the direct path runs again.
    bias = np.full(3, 0.5, np.float32)
    exe.arg_dict["fc_bias"][:] = bias
    cpu.arg_dict["fc_bias"][:] = bias
    exe.forward(data=_image(3))
    _expect(exe, cpu, _image(3))
    exe.forward(data=_image(4))
    _expect(exe, cpu, _image(4))
    assert direct.runs >= runs + 3
    exe.close()


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_forward_converts_or_refuses_inputs_as_the_general_path(direct: _Counter) -> None:
    weights = _weights(8)
    exe, cpu = bind(mx.cpu_ref(0), weights), bind(mx.cpu(), weights)
    exe.forward(data=_image(0))
    _expect(exe, cpu, _image(0))
    with pytest.raises(ShapeError, match="'data' has shape"):
        exe.forward(data=np.zeros((1, 3, 5, 5), np.float32))
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), _image(0))
    # Another dtype, a strided view and an NDArray are converted.
    image = _image(1)
    wide = np.zeros((2, 3, 5, 10), np.float64)
    wide[..., ::2] = image
    runs = direct.runs
    exe.forward(data=wide[..., ::2])
    _expect(exe, cpu, image)
    exe.forward(data=mx.nd.array(_image(2)))
    _expect(exe, cpu, _image(2))
    assert direct.runs == runs + 2
    exe.close()


@pytest.mark.usefixtures("offload_everything")
def test_a_failure_on_the_direct_forward_is_reported_as_a_forwards(
        direct: _Counter, engine_kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Raised by forward() under NaiveEngine, by the output's wait under
    ThreadedEngine; the run is not repeated, and the next forward runs."""
    weights = _weights(9)
    exe, cpu = bind(mx.cpu_ref(0), weights), bind(mx.cpu(), weights)
    exe.forward(data=_image(0))
    _expect(exe, cpu, _image(0))
    library = exe.subgraphs[0].library
    real = library.lib
    calls = {"copyToAcc": 0}

    class Failing:
        """The library's functions as the direct path reaches them, copyToAcc
        failing."""

        def __getattr__(self, name: str) -> object:
            if name == "copyToAcc":
                def failing(*args: object) -> int:
                    calls["copyToAcc"] += 1
                    return 3  # MX_ACC_ERR_*: a plugin failure
                return failing
            return getattr(real, name)

    runs = direct.runs
    with monkeypatch.context() as patch:
        patch.setattr(type(library), "lib", property(lambda self: Failing()))
        if engine_kind == "NaiveEngine":
            with pytest.raises(PluginError, match="copyToAcc"):
                exe.forward(data=_image(1))
        else:
            exe.forward(data=_image(1))
            with pytest.raises(PluginError, match="copyToAcc"):
                exe.outputs[0].asnumpy()
    assert calls["copyToAcc"] == 1 and direct.runs == runs
    # ThreadedEngine: the general path, which drops the stale failure (it
    # was raised); NaiveEngine stores none, so the direct path runs.
    exe.forward(data=_image(2))
    _expect(exe, cpu, _image(2))
    mx.nd.waitall()
    exe.forward(data=_image(3))
    _expect(exe, cpu, _image(3))
    assert direct.runs == runs + (1 if engine_kind == "ThreadedEngine" else 2)
    exe.close()


@pytest.mark.usefixtures("offload_everything", "engine_kind")
def test_a_pending_write_to_the_input_is_waited_for(direct: _Counter) -> None:
    """An argument written by a pushed copy that has not run yet: the forward
    sees the value after it (the direct path stands aside or waits)."""
    weights = _weights(10)
    exe, cpu = bind(mx.cpu_ref(0), weights), bind(mx.cpu(), weights)
    exe.forward(data=_image(0))
    _expect(exe, cpu, _image(0))
    source = mx.nd.array(_image(1))
    source.copyto(exe.arg_dict["data"])
    exe.forward()
    _expect(exe, cpu, _image(1))
    assert SHAPE == exe.arg_dict["data"].shape
    exe.close()
