"""cpu_ref checks what it receives through the ABI: wrong names, shapes,
devices, pointers and states are failure codes with messages, never crashes.

Most calls here go to the raw cffi functions, bypassing the host's own
checks, to reach the plugin's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.direct_calls import count_direct_calls

import acc_host as mx
from acc_host.abi import header
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.header import ffi
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer, HostCopies
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.tensor import CStrings, TensorArray, TensorSpec

F32 = np.dtype(np.float32)


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _relu_graph(op_version: str | None = None) -> dict:
    total = mx.sym.elemwise_add(mx.sym.Variable("data"), mx.sym.Variable("w"), name="add")
    out = mx.sym.Activation(total, act_type="relu", name="act")
    graph = annotate_symbol(out, {"data": (2, 3), "w": (2, 3)}, weights=["w"])
    if op_version is not None:
        graph["nodes"][3]["attrs"]["__op_version__"] = op_version
    return graph


def _status(library, function: str, *args) -> tuple[str, str]:
    code = getattr(library.lib, function)(*args)
    return header.status_name(code), library.last_error()


def test_supported_ops_declines_unknown_operator_versions(library) -> None:
    graph = _relu_graph(op_version="2")
    assert library.supported_ops(json.dumps(graph), {}, 4) == [2]
    assert library.supported_ops(json.dumps(_relu_graph()), {}, 4) == [2, 3]


def test_supported_ops_rejects_malformed_json(library) -> None:
    with pytest.raises(mx.PluginError, match="graph json"):
        library.supported_ops('{"nodes": [', {}, 1)


def test_supported_ops_capacity_is_respected(library) -> None:
    ids, count = ffi.new("int[]", 1), ffi.new("int *")
    graph = ffi.new("char[]", json.dumps(_relu_graph()).encode())
    code, message = _status(library, "supportedOps", graph, ffi.NULL, ffi.NULL, 0, 0, ids, 1,
                            count)
    assert code == "MX_ACC_ERR_INVALID_ARG" and "ids holds 1" in message


def test_load_model_checks_weights_and_ids(library) -> None:
    graph = _relu_graph()
    with pytest.raises(mx.InvalidArgumentError, match="weights missing \\['w'\\]"):
        LoadedModel(library, graph, {})
    with pytest.raises(mx.TensorError, match="expects \\(2, 3\\)"):
        LoadedModel(library, graph, {"w": np.zeros((3, 2), np.float32)})
    weight = np.ones((2, 3), np.float32)
    with LoadedModel(library, graph, {"w": weight}, model_id="dup") as model:
        with pytest.raises(mx.PluginError, match='model "dup" is already loaded') as error:
            LoadedModel(library, graph, {"w": weight}, model_id="dup")
        assert error.value.code_name == "MX_ACC_ERR_STATE"
        assert model.infer({"data": np.full((2, 3), -5, np.float32)})["act_output"].max() == 0


def test_load_model_rejects_unsupported_graph(library) -> None:
    with pytest.raises(mx.PluginUnsupportedError, match="version \"2\" is not supported"):
        LoadedModel(library, _relu_graph(op_version="2"), {"w": np.ones((2, 3), np.float32)})


def test_infer_checks_names_and_shapes(library) -> None:
    with LoadedModel(library, _relu_graph(), {"w": np.ones((2, 3), np.float32)}) as model:
        model_id = ffi.new("char[]", model.model_id.encode())
        data = np.ones((2, 3), np.float32)
        out = np.empty((2, 3), np.float32)

        def call(in_names, in_specs, out_names, out_specs):
            inputs, outputs = TensorArray(in_specs), TensorArray(out_specs)
            for index in range(len(in_specs)):
                inputs.set_host_array(index, np.ones(in_specs[index].shape, F32))
            for index in range(len(out_specs)):
                outputs.set_host_array(index, np.empty(out_specs[index].shape, F32),
                                       writable=True)
            names_in, names_out = CStrings(in_names), CStrings(out_names)
            return _status(library, "infer", model_id, names_in.pointer, names_out.pointer,
                           inputs.pointer, outputs.pointer, len(in_names), len(out_names))

        spec = TensorSpec((2, 3), F32)
        assert call(["data"], [spec], ["act_output"], [spec]) == ("MX_ACC_OK", "")
        assert call(["nope"], [spec], ["act_output"], [spec]) == (
            "MX_ACC_ERR_INVALID_ARG", 'infer: input "nope" is not a graph input')
        assert call([], [], ["act_output"], [spec]) == (
            "MX_ACC_ERR_INVALID_ARG", 'infer: data input "data" is missing')
        assert call(["data", "data"], [spec, spec], ["act_output"], [spec]) == (
            "MX_ACC_ERR_INVALID_ARG", 'infer: input "data" is given twice')
        # A wrong tensor is named in the message (the name is formatted only
        # after a check failed).
        code, message = call(["data"], [TensorSpec((3, 2), F32)], ["act_output"], [spec])
        assert code == "MX_ACC_ERR_INVALID_ARG" and "shape (3, 2), expected (2, 3)" in message
        assert message.startswith('infer: input "data"'), message
        code, message = call(["data"], [spec], ["add_output"], [spec])
        assert code == "MX_ACC_ERR_INVALID_ARG" and "not an output" in message
        code, message = call(["data"], [spec], ["act_output"], [TensorSpec((6,), F32)])
        assert code == "MX_ACC_ERR_INVALID_ARG" and "shape (6), expected (2, 3)" in message
        assert message.startswith('infer: output "act_output"'), message
        assert model.infer({"data": data}, {"act_output": out}) == {"act_output": out}
        np.testing.assert_array_equal(out, 2 * data)
    code, message = _status(library, "unloadModel", model_id)
    assert code == "MX_ACC_ERR_NOT_FOUND" and "is not loaded" in message


def test_changed_weights_reach_the_model(library) -> None:
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    with LoadedModel(library, _relu_graph(), {"w": np.zeros((2, 3), np.float32)}) as model:
        np.testing.assert_array_equal(model.infer({"data": data})["act_output"], data)
        updated = model.infer({"data": data}, weights={"w": np.full((2, 3), 10, np.float32)})
        np.testing.assert_array_equal(updated["act_output"], data + 10)
        # The new weight stays in effect.
        np.testing.assert_array_equal(model.infer({"data": data})["act_output"], data + 10)


def test_models_can_use_device_memory(library) -> None:
    spec = TensorSpec((2, 3), F32)
    weight, data, out = (DeviceBuffer(library, 0, spec) for _ in range(3))
    weight.copy_from_host(np.full((2, 3), -1, np.float32))
    data.copy_from_host(np.full((2, 3), 4, np.float32))
    with LoadedModel(library, _relu_graph(), {"w": weight}) as model:
        model.infer({"data": data}, {"act_output": out})
    np.testing.assert_array_equal(out.to_host(), np.full((2, 3), 3, np.float32))


def test_memory_checks(library) -> None:
    before = mx.cpu_ref(0).configure(query="memory")
    pointer = ffi.new("void **")
    assert _status(library, "mx_alloc", 0, 16, pointer)[0] == "MX_ACC_OK"
    assert _status(library, "mx_alloc", 7, 16, pointer)[0] == "MX_ACC_ERR_DEVICE"
    assert _status(library, "mx_alloc", 0, 16, ffi.NULL)[0] == "MX_ACC_ERR_INVALID_ARG"
    allocated = pointer[0]
    assert _status(library, "mx_free", 0, allocated) == ("MX_ACC_OK", "")
    code, message = _status(library, "mx_free", 0, allocated)
    assert code == "MX_ACC_ERR_NOT_FOUND" and "already freed" in message
    assert _status(library, "mx_free", 0, ffi.NULL)[0] == "MX_ACC_OK"
    assert mx.cpu_ref(0).configure(query="memory") == before


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_large_copies_are_exact_on_every_thread_count(library, threads: int) -> None:
    # Large enough to be shared between threads, and not a whole number of
    # the 64-byte lines the threads take, at an offset that is not one.
    values = np.random.default_rng(threads).standard_normal(300_001).astype(np.float32)
    host = values[1:]
    spec = TensorSpec(host.shape, F32)
    buffer = DeviceBuffer(library, 0, spec)
    mx.cpu_ref(0).configure(num_threads=threads)
    try:
        buffer.copy_from_host(host)
        back = buffer.to_host()
    finally:
        mx.cpu_ref(0).configure(num_threads=1)
        buffer.free()
    assert back.tobytes() == host.tobytes()


def test_copies_check_sizes_and_devices(library) -> None:
    buffer = DeviceBuffer(library, 0, TensorSpec((4,), F32))
    with pytest.raises(mx.TensorError, match="does not match"):
        buffer.copy_from_host(np.zeros(5, np.float32))
    small = TensorArray([TensorSpec((8,), F32)], 0)
    small.set_data(0, buffer.pointer, 0)  # claims 8 elements in a 4-element buffer
    host = TensorArray([TensorSpec((8,), F32)])
    host.set_host_array(0, np.zeros(8, np.float32))
    code, message = _status(library, "copyToAcc", small.pointer, host.pointer)
    assert code == "MX_ACC_ERR_INVALID_ARG" and "allocation holds 16" in message
    code, message = _status(library, "copyFromAcc", host.pointer, host.pointer)
    assert code == "MX_ACC_ERR_DEVICE" and "device -1 does not exist" in message
    buffer.free()
    buffer.free()  # idempotent
    with pytest.raises(mx.TensorError, match="freed"):
        buffer.to_host()


def test_executor_errors(library) -> None:
    spec = TensorSpec((2, 3), F32)
    with pytest.raises(mx.PluginUnsupportedError, match="operator Frobnicate is not supported"):
        OperatorExecutor(library, "Frobnicate", [spec], [spec])
    with pytest.raises(mx.PluginUnsupportedError, match="version \"9\""):
        OperatorExecutor(library, "Activation", [spec], [spec], {"act_type": "relu",
                                                          "__op_version__": "9"})
    with pytest.raises(mx.PluginUnsupportedError, match="attribute \"colour\""):
        OperatorExecutor(library, "Activation", [spec], [spec],
                         {"act_type": "relu", "colour": "red"})
    with pytest.raises(mx.PluginUnsupportedError, match="only float32"):
        OperatorExecutor(library, "Activation", [TensorSpec((2, 3), np.float64)],
                         [TensorSpec((2, 3), np.float64)], {"act_type": "relu"})
    with pytest.raises(mx.PluginError, match="output shape \\(3, 2\\), expected \\(2, 3\\)"):
        OperatorExecutor(library, "Activation", [spec], [TensorSpec((3, 2), F32)],
                         {"act_type": "relu"})
    with pytest.raises(mx.PluginError, match="attribute num_hidden is required"):
        OperatorExecutor(library, "FullyConnected", [spec, TensorSpec((4, 3), F32)],
                         [TensorSpec((2, 4), F32)], {"no_bias": True})
    with pytest.raises(mx.PluginError, match="kernel=\"\\(0, 3\\)\""):
        OperatorExecutor(library, "Convolution", [TensorSpec((1, 1, 5, 5), F32)] * 2,
                         [TensorSpec((1, 1, 5, 5), F32)], {"kernel": "(0, 3)", "num_filter": "1",
                                                   "no_bias": "True"})


def test_executor_forward_needs_device_memory(library) -> None:
    spec = TensorSpec((2, 3), F32)
    executor = OperatorExecutor(library, "Activation", [spec], [spec], {"act_type": "relu"})
    host = TensorArray([spec])
    host.set_host_array(0, np.ones((2, 3), np.float32))
    handle = executor._handle
    status = handle.forward(handle, host.pointer, 1, host.pointer, 1)
    assert header.status_name(status) == "MX_ACC_ERR_INVALID_ARG"
    assert "on device -1, executor on 0" in library.last_error()
    assert header.status_name(handle.forward(handle, host.pointer, 2, host.pointer, 1)) == \
        "MX_ACC_ERR_INVALID_ARG"
    wrong = DeviceBuffer(library, 0, TensorSpec((3, 2), F32))
    with pytest.raises(mx.TensorError, match="expected \\(2, 3\\)"):
        executor.forward([wrong], [wrong])
    executor.close()
    with pytest.raises(mx.TensorError, match="released"):
        executor.forward([wrong], [wrong])


def test_scalar_and_strided_inputs(library) -> None:
    out = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="act")
    scalar = annotate_symbol(out, {"data": ()}, weights=[])
    with LoadedModel(library, scalar, {}) as model:
        result = model.infer({"data": np.array(-3.0, np.float32)})["act_output"]
    assert result.shape == () and result == 0
    matrix = annotate_symbol(out, {"data": (3, 2)}, weights=[])
    strided = np.arange(6, dtype=np.float32).reshape(2, 3).T - 2  # not C-contiguous
    with LoadedModel(library, matrix, {}) as model:
        np.testing.assert_array_equal(model.infer({"data": strided})["act_output"],
                                      np.maximum(strided, 0))
        with pytest.raises(mx.TensorError, match="not C-contiguous"):
            model.infer({"data": strided}, {"act_output": np.empty((2, 3), np.float32).T})


def test_infer_host_checks_name_what_is_wrong(library) -> None:
    """LoadedModel.infer's per-call path points at arrays in place and sends
    everything else through checks naming the tensor."""
    with LoadedModel(library, _relu_graph(), {"w": np.ones((2, 3), np.float32)}) as model:
        data = np.arange(6, dtype=np.float32).reshape(2, 3)
        with pytest.raises(mx.InvalidArgumentError, match="inputs \\['x'\\] do not match"):
            model.infer({"x": data})
        with pytest.raises(mx.InvalidArgumentError, match="outputs \\['y'\\] do not match"):
            model.infer({"data": data}, {"y": np.empty((2, 3), np.float32)})
        with pytest.raises(mx.TensorError, match="data: got \\(3, 2\\) float32"):
            model.infer({"data": data.reshape(3, 2)})
        with pytest.raises(mx.TensorError, match="data: got \\(2, 3\\) float64"):
            model.infer({"data": data.astype(np.float64)})
        with pytest.raises(mx.TensorError, match="data: expected a numpy array"):
            model.infer({"data": data.tolist()})
        frozen = np.empty((2, 3), np.float32)
        frozen.flags.writeable = False
        with pytest.raises(mx.TensorError, match="read-only"):
            model.infer({"data": data}, {"act_output": frozen})
        strided = np.empty((2, 6), np.float32)[:, ::2]
        with pytest.raises(mx.TensorError, match="not C-contiguous"):
            model.infer({"data": data}, {"act_output": strided})
        # A strided input is copied, not refused; results match numpy.
        wide = np.arange(12, dtype=np.float32).reshape(2, 6) - 6
        np.testing.assert_array_equal(model.infer({"data": wide[:, ::2]})["act_output"],
                                      np.maximum(wide[:, ::2] + 1, 0))
        # The arrays of the last call are not kept alive by the model.
        out = np.empty((2, 3), np.float32)
        model.infer({"data": data}, {"act_output": out})
        np.testing.assert_array_equal(out, data + 1)


def test_executor_outputs_are_written_in_place(library, monkeypatch) -> None:
    """A forward on cpu_ref copies the given input in (copyToAcc) and lets the
    subgraph write the output buffer itself: nothing goes device -> host ->
    device on the way out."""
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    exe = relu.simple_bind(mx.cpu_ref(0), data=(2, 3))
    calls = []
    for method in ("to_host", "copy_from_host"):
        original = getattr(DeviceBuffer, method)
        monkeypatch.setattr(DeviceBuffer, method,
                            lambda self, *a, _m=method, _o=original, **k:
                            (calls.append(_m), _o(self, *a, **k))[1])
    # Once the model is loaded, forward() copies its inputs in on the direct
    # path (acc_host.runtime.direct_run), through the argument buffers'
    # prebuilt descriptors: the same copyToAcc into the same buffer, then
    # infer(), reading nothing back (a forward's direct call is given no
    # outputs to read).
    write_locked = HostCopies.write_locked
    monkeypatch.setattr(HostCopies, "write_locked", lambda self, values: (
        calls.extend(["copy_from_host"] * len(values)), write_locked(self, values))[1])
    count_direct_calls(monkeypatch, lambda: calls.append("copy in and infer"))
    data = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    for _ in range(3):
        calls.clear()
        exe.forward(data=data)
        exe.outputs[0].wait_to_read()
        assert calls in (["copy_from_host"], ["copy in and infer"])
        np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(data, 0))
