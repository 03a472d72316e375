"""simple_bind's arrays on an accelerator start as zeros held on the host
(nothing copied into device memory) and move into a device buffer at the
first write of the whole array. Whatever the order of reads, views and
writes, they must behave as the device arrays they stand for: zeros until
written, every view seeing every write, the forward agreeing with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import ContextError

ACC = mx.Context("cpu_ref", 0)


def _net() -> mx.sym.Symbol:
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    return mx.sym.relu(fc, name="out")


def _reference(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    return np.maximum(x @ weight.T + bias, 0.0)


def _params() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    return (rng.standard_normal((2, 5)).astype(np.float32),
            rng.standard_normal((4, 5)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32))


def test_arrays_read_as_zeros_and_the_forward_uses_them() -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    for array in (*exe.arg_dict.values(), *exe.aux_dict.values()):
        assert array.context == ACC
        np.testing.assert_array_equal(array.asnumpy(), np.zeros(array.shape, np.float32))
    x, _, _ = _params()
    out = exe.forward(data=mx.nd.array(x))[0].asnumpy()
    np.testing.assert_array_equal(out, np.zeros((2, 4), np.float32))


def test_copy_params_from_then_forward_matches_numpy() -> None:
    x, weight, bias = _params()
    exe = _net().simple_bind(ACC, data=(2, 5))
    exe.copy_params_from({"fc_weight": mx.nd.array(weight), "fc_bias": mx.nd.array(bias)})
    out = exe.forward(data=mx.nd.array(x))[0].asnumpy()
    np.testing.assert_allclose(out, _reference(x, weight, bias), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(exe.arg_dict["fc_weight"].asnumpy(), weight)


def test_forward_before_the_weights_then_after() -> None:
    """A forward on the zeros loads the model; writing the weights after it
    must reach the next forward."""
    x, weight, bias = _params()
    exe = _net().simple_bind(ACC, data=(2, 5))
    first = exe.forward(data=mx.nd.array(x))[0].asnumpy()
    np.testing.assert_array_equal(first, np.zeros((2, 4), np.float32))
    exe.arg_dict["fc_weight"][:] = weight
    mx.nd.array(bias).copyto(exe.arg_dict["fc_bias"])
    out = exe.forward(data=mx.nd.array(x))[0].asnumpy()
    np.testing.assert_allclose(out, _reference(x, weight, bias), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("key", [slice(1, 3), 2], ids=["rows", "integer"])
def test_a_view_taken_before_the_first_write_sees_it(key: object) -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    weight = exe.arg_dict["fc_weight"]
    view = weight[key]
    values = np.arange(20, dtype=np.float32).reshape(4, 5)
    weight[:] = values
    if isinstance(key, slice):  # rows share the array's storage, as in MXNet
        np.testing.assert_array_equal(view.asnumpy(), values[key])
    else:  # an integer index is a copy, taken when the array held zeros
        np.testing.assert_array_equal(view.asnumpy(), np.zeros(5, np.float32))
    np.testing.assert_array_equal(weight.asnumpy(), values)


def test_a_write_through_a_view_then_a_whole_write() -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    weight = exe.arg_dict["fc_weight"]
    weight[1:2] = np.full((1, 5), 7.0, np.float32)
    expected = np.zeros((4, 5), np.float32)
    expected[1] = 7.0
    np.testing.assert_array_equal(weight.asnumpy(), expected)
    weight[:] = expected + 1.0
    np.testing.assert_array_equal(weight.asnumpy(), expected + 1.0)
    np.testing.assert_array_equal(weight[1:2].asnumpy(), expected[1:2] + 1.0)


def test_a_partial_write_keeps_the_other_zeros() -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    bias = exe.arg_dict["fc_bias"]
    bias[2] = 5.0
    np.testing.assert_array_equal(bias.asnumpy(), np.array([0, 0, 5, 0], np.float32))


def test_an_operator_writes_into_the_array_with_out() -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    bias = exe.arg_dict["fc_bias"]
    source = mx.nd.array(np.array([1, 2, 3, 4], np.float32), ctx=ACC)
    mx.nd.relu(source, out=bias)
    np.testing.assert_array_equal(bias.asnumpy(), np.array([1, 2, 3, 4], np.float32))
    bias += 1
    np.testing.assert_array_equal(bias.asnumpy(), np.array([2, 3, 4, 5], np.float32))


def test_dlpack_refuses_them_as_device_arrays() -> None:
    exe = _net().simple_bind(ACC, data=(2, 5))
    with pytest.raises(ContextError):
        exe.arg_dict["fc_weight"].__dlpack__()


def test_the_host_context_keeps_plain_zeros() -> None:
    exe = _net().simple_bind(mx.cpu(), data=(2, 5))
    weight = exe.arg_dict["fc_weight"]
    view = weight[0:2]
    weight[:] = np.ones((4, 5), np.float32)
    np.testing.assert_array_equal(view.asnumpy(), np.ones((2, 5), np.float32))
