"""OperatorExecutor.forward_new_locked: an imperative plan's executor call
into new output buffers, resolved once. It computes what forward() does,
takes its outputs from the device's pool, refuses a released executor and
a freed input on every call, and leaves to forward() (returns None,
running nothing) every call it does not fit: a missing or foreign input, a
spec that differs, checked mode, a traced library."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi.header import ffi
from acc_host.abi.memory import DeviceBuffer, pooled
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import TensorError

SPEC = TensorSpec((2, 3), np.dtype(np.float32))
VALUES = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)


@pytest.fixture()
def library():
    return mx.get_library("cpu_ref")


def _relu(library) -> OperatorExecutor:
    return OperatorExecutor(library, "Activation", [SPEC], [SPEC], {"act_type": "relu"})


def _buffer(library, values: np.ndarray = VALUES) -> DeviceBuffer:
    buffer = DeviceBuffer(library, 0, TensorSpec.of(values))
    buffer.copy_from_host(values)
    return buffer


def _locked(library, executor: OperatorExecutor, inputs: list) -> list | None:
    with library.device_lock(0):
        return executor.forward_new_locked(inputs)


def test_outputs_hold_the_operator_result_on_every_call(library) -> None:
    executor = _relu(library)
    source = _buffer(library)
    for _ in range(3):  # the first call resolves, the others reuse
        outputs = _locked(library, executor, [source])
        assert outputs is not None and len(outputs) == 1
        assert outputs[0].spec.shape == (2, 3) and outputs[0].library is library
        np.testing.assert_array_equal(outputs[0].to_host(), np.maximum(VALUES, 0))
    executor.close()


def test_outputs_come_from_the_pool(library) -> None:
    executor = _relu(library)
    source = _buffer(library)
    first = _locked(library, executor, [source])
    assert first is not None
    address = int(ffi.cast("uintptr_t", first[0].pointer))
    before = pooled(library, 0)
    del first  # pooled when collected
    assert pooled(library, 0) == before + 1
    second = _locked(library, executor, [source])
    assert second is not None
    assert int(ffi.cast("uintptr_t", second[0].pointer)) == address
    assert pooled(library, 0) == before
    np.testing.assert_array_equal(second[0].to_host(), np.maximum(VALUES, 0))
    executor.close()


def test_a_freed_input_and_a_released_executor_are_refused_every_call(library) -> None:
    executor = _relu(library)
    source = _buffer(library)
    source.free()
    for _ in range(2):
        with pytest.raises(TensorError, match="input 0 is .*freed"):
            _locked(library, executor, [source])
    executor.close()
    for _ in range(2):
        with pytest.raises(TensorError, match="released"):
            _locked(library, executor, [_buffer(library)])


def test_calls_that_do_not_fit_are_left_to_forward(library,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    executor = _relu(library)
    assert _locked(library, executor, [None]) is None  # an input in host memory
    assert _locked(library, executor, []) is None  # a count that differs
    assert _locked(library, executor, [_buffer(library, VALUES.T.copy())]) is None  # shape
    assert _locked(library, executor, [_buffer(library, VALUES.astype(np.float64))]) is None
    assert _locked(library, executor, [VALUES]) is None  # not a device buffer
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")  # guarded outputs: forward()'s
    assert _locked(library, executor, [_buffer(library)]) is None
    monkeypatch.delenv("MXNET_ACC_CHECK_OUTPUTS")
    assert _locked(library, executor, [_buffer(library)]) is not None
    executor.close()
