"""Basic slicing on the first axis of an array in an accelerator's memory
(cpu_ref) is a view, as in MXNet: it shares the array's storage, engine
var and version; reads see the array's later writes; writes through the
view land in the array; an operator on it gets its rows. The view is
host-side (rows, shape, dtype): device pointers are opaque (docs/abi.md)."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import ContextError


def _array(ctx: mx.Context) -> tuple[np.ndarray, mx.nd.NDArray]:
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    return x, mx.nd.array(x, ctx=ctx)


@pytest.mark.usefixtures("engine_kind")
def test_rows_of_a_device_array_are_a_view() -> None:
    x, a = _array(mx.cpu_ref(0))
    view = a[1:3]
    assert view.shape == (2, 4) and view.dtype == np.float32 and view.context == a.context
    np.testing.assert_array_equal(view.asnumpy(), x[1:3])
    a += 1
    np.testing.assert_array_equal(view.asnumpy(), x[1:3] + 1)
    assert view.version == a.version


@pytest.mark.usefixtures("engine_kind")
def test_writes_through_the_view_land_in_the_array() -> None:
    x, a = _array(mx.cpu_ref(0))
    view = a[2:5]
    view += 10
    expected = x.copy()
    expected[2:5] += 10
    np.testing.assert_array_equal(a.asnumpy(), expected)
    view[:] = -1
    expected[2:5] = -1
    np.testing.assert_array_equal(a.asnumpy(), expected)
    view[0] = mx.nd.array(np.full(4, 7, np.float32), ctx=a.context)
    expected[2] = 7
    np.testing.assert_array_equal(a.asnumpy(), expected)


@pytest.mark.usefixtures("engine_kind")
def test_operators_and_copies_of_a_view_get_its_rows() -> None:
    x, a = _array(mx.cpu_ref(0))
    view = a[-3:]
    rows = x[-3:]
    np.testing.assert_array_equal((view + 1).asnumpy(), rows + 1)
    np.testing.assert_array_equal(mx.nd.relu(view - 20).asnumpy(), np.maximum(rows - 20, 0))
    np.testing.assert_array_equal(view.sum().asnumpy(), [rows.sum()])
    np.testing.assert_array_equal(view[1].asnumpy(), rows[1])
    np.testing.assert_array_equal(view.copyto(mx.cpu()).asnumpy(), rows)
    np.testing.assert_array_equal(view.reshape((12,)).asnumpy(), rows.reshape(12))


def test_a_device_view_is_not_exported_through_dlpack() -> None:
    _, a = _array(mx.cpu_ref(0))
    with pytest.raises(ContextError, match="device memory"):
        a[1:3].__dlpack__()


def test_empty_and_strided_selections_are_copies() -> None:
    x, a = _array(mx.cpu_ref(0))
    np.testing.assert_array_equal(a[::2].asnumpy(), x[::2])
    assert a[3:3].shape == (0, 4)
