"""What mxnet_acc.h 1.1 settles on the host's side, held by the host:
infer's outputs alias no input and no other output, host pointers are
aligned, and configure is serialized with the calls for its device."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec


@pytest.fixture
def relu_model() -> LoadedModel:
    library = mx.cpu_ref(0).library
    sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    graph = annotate_symbol(sym, {"data": (8,)}, weights={}, dtypes={"data": np.float32})
    model = LoadedModel(library, graph, {}, 0)
    yield model
    model.close()


def _values() -> np.ndarray:
    return np.linspace(-2, 2, 8, dtype=np.float32)


def test_an_output_overlapping_an_input_gets_the_input_copied(relu_model: LoadedModel) -> None:
    shared = _values()
    expected = np.maximum(shared, 0)
    result = relu_model.infer({"data": shared}, {"relu_output": shared})
    assert result["relu_output"] is shared
    np.testing.assert_array_equal(shared, expected)


def test_outputs_sharing_memory_are_refused() -> None:
    library = mx.cpu_ref(0).library
    data = mx.sym.Variable("data")
    sym = mx.sym.Group([mx.sym.Activation(data, act_type="relu", name="a"),
                        mx.sym.Activation(data, act_type="relu", name="b")])
    graph = annotate_symbol(sym, {"data": (8,)}, weights={}, dtypes={"data": np.float32})
    with LoadedModel(library, graph, {}, 0) as model:
        out = np.empty(8, np.float32)
        with pytest.raises(mx.InvalidArgumentError, match="a_output and b_output share memory"):
            model.infer({"data": _values()}, {"a_output": out, "b_output": out})


def test_a_device_buffer_as_input_and_output_is_refused(relu_model: LoadedModel) -> None:
    buffer = DeviceBuffer(relu_model.library, 0, TensorSpec((8,), np.float32))
    buffer.copy_from_host(_values())
    with pytest.raises(mx.InvalidArgumentError, match="is also an output's buffer"):
        relu_model.infer({"data": buffer}, {"relu_output": buffer})
    buffer.free()


def test_host_pointers_are_aligned(relu_model: LoadedModel) -> None:
    raw = bytearray(8 * 4 + 1)
    unaligned = np.frombuffer(raw, np.float32, count=8, offset=1)
    assert not unaligned.flags.aligned
    unaligned[...] = _values()  # writable: the bytearray's memory
    got = relu_model.infer({"data": unaligned})["relu_output"]
    np.testing.assert_array_equal(got, np.maximum(_values(), 0))
    with pytest.raises(mx.TensorError, match="not aligned"):
        relu_model.infer({"data": _values()}, {"relu_output": unaligned})


def test_configure_waits_for_a_call_on_its_device() -> None:
    library = mx.cpu_ref(0).library
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def busy_device() -> None:  # a long call for device 0, as an infer would be
        with library.device_lock(0):
            held.set()
            release.wait(10)

    def configure() -> None:
        library.configure(0, {"query": "version"})
        done.set()

    holder = threading.Thread(target=busy_device)
    holder.start()
    assert held.wait(10)
    caller = threading.Thread(target=configure)
    caller.start()
    assert not done.wait(0.3), "configure ran while a call for its device was running"
    release.set()
    assert done.wait(10)
    holder.join()
    caller.join()
