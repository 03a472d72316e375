"""Checked mode's guard bytes around device buffers, in process (issue 34,
item 3; docs/robustness.md, row ``plugin-device-output-overrun-checked``).

Under MXNET_ACC_CHECK_OUTPUTS=1 every DeviceBuffer is allocated with guard
bytes after it (acc_host.abi.guards): a plugin that writes a few bytes past
a device output is a PluginContractError naming the output, where
unchecked it would write into its own heap; host outputs keep their
guards on both sides.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import settle_engine

import acc_host as mx
from acc_host.abi.guards import GUARD_BYTES
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import PluginContractError

BUILDS = {"device_memory": {"MISB_IMPERATIVE": True}, "host_memory": {}}


@pytest.fixture(scope="module")
def misbehave_build(build_test_plugin: Callable[..., Path],
                    tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """misbehave_build(kind, label): a copy of tests/plugins/misbehaving_acc.c
    built with device memory or without (a file is loaded once: one copy per
    use)."""
    directory = tmp_path_factory.mktemp("guarded_copies")

    def build(kind: str, label: str) -> Path:
        library = build_test_plugin("misbehaving_acc.c", f"misbehave_{kind}", **BUILDS[kind])
        return Path(shutil.copy(library, directory / f"lib{label}.so"))
    return build


def _two_relus() -> mx.sym.Symbol:
    return mx.sym.Group([
        mx.sym.Activation(mx.sym.Variable("a"), act_type="relu", name="ra"),
        mx.sym.Activation(mx.sym.Variable("b"), act_type="relu", name="rb")])


@pytest.mark.parametrize("kind", list(BUILDS))
def test_a_few_bytes_past_an_output_are_caught_in_checked_mode(
        misbehave_build: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch,
        kind: str) -> None:
    """infer() writing 3 bytes past its first output: a PluginContractError
    naming the output, in device memory (the guard after the buffer) and in
    host memory (the guards around the scratch); the next good forward is
    right."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    ctx = mx.load_acc(misbehave_build(kind, f"few_{kind}"), acc_name=f"few_{kind[:4]}")
    assert ctx.library.supports_imperative == (kind == "device_memory")
    data = np.linspace(-1, 1, 6, dtype=np.float32)
    exe = _two_relus().simple_bind(ctx, a=data.shape, b=data.shape)
    ctx.configure(mode="infer_overrun_few")
    where = "put after its device buffer" if kind == "device_memory" else "put there"
    with pytest.raises(PluginContractError, match=rf"wrote past the end of output 'ra_output': "
                       rf"3 of the {GUARD_BYTES} guard bytes MXNET_ACC_CHECK_OUTPUTS {where}"):
        exe.forward(a=data, b=-data)[0].asnumpy()
    settle_engine()
    ctx.configure(mode="good")
    out = exe.forward(a=data, b=-data)
    assert np.array_equal(out[0].asnumpy(), np.maximum(data, 0))
    assert np.array_equal(out[1].asnumpy(), np.maximum(-data, 0))
    # predict(): the direct path (copies, infer, copies as one operation) too.
    ctx.configure(mode="infer_overrun_few")
    with pytest.raises(PluginContractError, match=r"wrote past the end of output 'ra_output'"):
        exe.predict(a=data, b=-data)
    settle_engine()
    ctx.configure(mode="good")
    first, second = exe.predict(a=-data, b=data)
    assert np.array_equal(first, np.maximum(-data, 0))
    assert np.array_equal(second, np.maximum(data, 0))


def test_device_buffers_carry_a_guard_only_in_checked_mode(
        misbehave_build: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer made in checked mode is GUARD_BYTES longer, its elements and
    guard intact after copies both ways; one made unchecked is not."""
    ctx = mx.load_acc(misbehave_build("device_memory", "plain_buffers"), acc_name="plainbuf")
    spec = TensorSpec((3, 5), np.float64)
    values = np.arange(15, dtype=np.float64).reshape(3, 5)
    assert not DeviceBuffer(ctx.library, 0, spec).guarded
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    buffer = DeviceBuffer(ctx.library, 1, spec)
    assert buffer.guarded
    buffer.copy_from_host(values)
    assert np.array_equal(buffer.to_host(), values)
    assert np.array_equal(buffer.checked_host("a test", "the buffer"), values)
    buffer.free()


@pytest.mark.parametrize("ctx", [mx.cpu_ref(0), mx.mlu(0)], ids=str)
def test_imperative_calls_check_their_device_outputs_without_false_alarms(
        ctx: mx.Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled plugins' executors write exactly their outputs: in checked
    mode every mx.nd call on them (guards read back after each forward and
    copy) returns the CPU path's values."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    values = np.linspace(-2, 2, 60, dtype=np.float32).reshape(3, 4, 5)
    data = mx.nd.array(values, ctx=ctx)
    assert data._device_storage is None or data._device_storage.guarded
    relu = mx.nd.relu(data)
    assert relu._device_storage is not None and relu._device_storage.guarded
    np.testing.assert_array_equal(relu.asnumpy(), np.maximum(values, 0))
    np.testing.assert_allclose(mx.nd.softmax(data, axis=-1).asnumpy(),
                               mx.nd.softmax(mx.nd.array(values), axis=-1).asnumpy(),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(mx.nd.transpose(data).asnumpy(), values.T)


def test_copies_that_write_past_their_destination_are_caught(
        misbehave_build: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """copyToAcc writing 3 bytes past the device buffer and copyFromAcc 3
    bytes past the host array: each a PluginContractError naming the
    buffer, the guard written again, the buffer usable on."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    ctx = mx.load_acc(misbehave_build("device_memory", "copy_overrun"), acc_name="copyover")
    values = np.arange(6, dtype=np.float32)
    buffer = DeviceBuffer(ctx.library, 0, TensorSpec.of(values))
    ctx.configure(mode="copy_overrun_few")
    with pytest.raises(PluginContractError, match=r"copyover: copyToAcc wrote past the end of "
                       r"DeviceBuffer\(copyover, \(6,\), float32, device 0\): 3 of the 64 guard "
                       r"bytes MXNET_ACC_CHECK_OUTPUTS put after its device buffer"):
        buffer.copy_from_host(values)
    with pytest.raises(PluginContractError, match=r"copyover: copyFromAcc of DeviceBuffer\("
                       r"copyover, \(6,\), float32, device 0\) wrote past the end of the host "
                       r"array it was given: 3 of the 64 guard bytes"):
        buffer.to_host()
    ctx.configure(mode="good")
    buffer.copy_from_host(values * 2)
    assert np.array_equal(buffer.to_host(), values * 2)
    assert np.array_equal(buffer.checked_host("a test", "the buffer"), values * 2)
    buffer.free()
