"""cpu_ref's executor forward() checks every tensor it receives without
formatting a name per tensor, and names the tensor in the message when a
check fails (the checks run again, with the names, for the message): the
input or output, its index and the operator. A call after a failure runs
normally."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import header
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.tensor import TensorArray, TensorSpec

SPEC = TensorSpec((2, 3), np.dtype(np.float32))


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _device_array(library, buffers: list[DeviceBuffer], specs: list[TensorSpec]) -> TensorArray:
    array = TensorArray(specs, 0)
    for index, buffer in enumerate(buffers):
        array.set_data(index, buffer.pointer, 0, buffer)
    return array


def _forward(library, executor: OperatorExecutor, inputs: TensorArray, outputs: TensorArray
             ) -> tuple[str, str]:
    handle = executor._handle
    with library.device_lock(0):
        status = handle.forward(handle, inputs.pointer, len(inputs), outputs.pointer,
                                len(outputs))
        return header.status_name(status), library.last_error()


def test_failures_name_the_tensor(library) -> None:
    add = OperatorExecutor(library, "elemwise_add", [SPEC, SPEC], [SPEC])
    lhs, rhs, out = (DeviceBuffer(library, 0, SPEC) for _ in range(3))
    host = TensorArray([SPEC, SPEC])
    host.set_host_array(0, np.ones((2, 3), np.float32))
    host.set_host_array(1, np.ones((2, 3), np.float32))
    status, message = _forward(library, add, host, _device_array(library, [out], [SPEC]))
    assert status == "MX_ACC_ERR_INVALID_ARG"
    assert "forward elemwise_add: input 0: tensor is on device -1, executor on 0" in message
    # the second input, then an output of another shape
    mixed = _device_array(library, [lhs], [SPEC, SPEC])
    mixed.set_host_array(1, np.ones((2, 3), np.float32))
    status, message = _forward(library, add, mixed, _device_array(library, [out], [SPEC]))
    assert "forward elemwise_add: input 1: tensor is on device -1" in message
    wide = TensorSpec((3, 2), np.dtype(np.float32))
    status, message = _forward(library, add, _device_array(library, [lhs, rhs], [SPEC, SPEC]),
                               _device_array(library, [out], [wide]))
    assert status == "MX_ACC_ERR_INVALID_ARG"
    assert "forward elemwise_add: output 0: shape (3, 2), expected (2, 3)" in message
    # an output overlapping an input
    status, message = _forward(library, add, _device_array(library, [lhs, rhs], [SPEC, SPEC]),
                               _device_array(library, [lhs], [SPEC]))
    assert "forward elemwise_add: output 0 overlaps input 0" in message
    # and a call that fits runs
    lhs.copy_from_host(np.full((2, 3), 2, np.float32))
    rhs.copy_from_host(np.arange(6, dtype=np.float32).reshape(2, 3))
    status, _ = _forward(library, add, _device_array(library, [lhs, rhs], [SPEC, SPEC]),
                         _device_array(library, [out], [SPEC]))
    assert status == "MX_ACC_OK"
    np.testing.assert_array_equal(out.to_host(), 2 + np.arange(6).reshape(2, 3))
    add.close()


def test_an_unallocated_pointer_is_named(library) -> None:
    relu = OperatorExecutor(library, "Activation", [SPEC], [SPEC], {"act_type": "relu"})
    source, out = DeviceBuffer(library, 0, SPEC), DeviceBuffer(library, 0, SPEC)
    outputs = _device_array(library, [out], [SPEC])
    inputs = _device_array(library, [source], [SPEC])
    inputs.set_data(0, header.ffi.cast("void *", 16), 0)  # no allocation of the device
    status, message = _forward(library, relu, inputs, outputs)
    assert status == "MX_ACC_ERR_INVALID_ARG"
    assert "forward Activation: input 0: data" in message
    assert "is not memory allocated on this device" in message
    relu.close()
