"""The CPU kernels an imperative call plan calls straight
(acc_host.ops.tensor.planned_kernel: dot of two matrices, sum): the same
results as the operator's compute, bit for bit, and as numpy's; shapes
the kernel does not take (transposes, vectors) are left to the compute;
a bad shape is still refused at the call that plans it."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import ShapeError
from acc_host.ops import registry
from acc_host.ops.tensor import planned_kernel


def _values(seed: int, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal(shape) * 10
    return values.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("shapes", [((8, 8), (8, 8)), ((3, 5), (5, 2)), ((1, 7), (7, 1))])
def test_planned_dot_is_the_compute(dtype: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    op = registry.get("dot")
    attrs = op.parse({})
    left, right = _values(1, shapes[0], dtype), _values(2, shapes[1], dtype)
    kernel = planned_kernel(op, attrs, [(left.shape, left.dtype), (right.shape, right.dtype)])
    assert kernel is not None
    got, = kernel([left, right])
    expected, = op.compute(attrs, [left, right])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("attrs, shapes", [
    ({"transpose_a": True}, ((8, 8), (8, 8))),
    ({"transpose_b": True}, ((8, 8), (8, 8))),
    ({}, ((8,), (8,))),
    ({}, ((2, 3, 4), (4, 5))),
])
def test_dot_shapes_the_kernel_leaves_to_the_compute(attrs: dict[str, object],
                                                     shapes: tuple[tuple[int, ...], ...]
                                                     ) -> None:
    op = registry.get("dot")
    specs = [(shape, np.dtype(np.float32)) for shape in shapes]
    assert planned_kernel(op, op.parse(attrs), specs) is None


@pytest.mark.parametrize("attrs", [{}, {"axis": 0}, {"axis": (0, 1), "keepdims": True},
                                   {"axis": 1, "exclude": True}, {"axis": -1}])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_planned_sum_is_the_compute(attrs: dict[str, object], dtype: str) -> None:
    op = registry.get("sum")
    parsed = op.parse(attrs)
    x = _values(3, (4, 6), dtype)
    kernel = planned_kernel(op, parsed, [(x.shape, x.dtype)])
    assert kernel is not None
    got, = kernel([x])
    expected, = op.compute(parsed, [x])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_planned_sum_overflowing_the_dtype_is_inf_without_a_warning() -> None:
    op = registry.get("sum")
    x = np.full((4, 4), 3e38, np.float32)
    kernel = planned_kernel(op, op.parse({}), [(x.shape, x.dtype)])
    assert kernel is not None
    with np.errstate(all="raise"):
        got, = kernel([x])
    assert got.shape == (1,) and np.isinf(got[0])


@pytest.mark.usefixtures("engine_kind")
def test_planned_calls_through_mx_nd_follow_their_inputs() -> None:
    for seed in range(3):  # the first call plans; the others run the kernel
        x, y = _values(seed, (8, 8)), _values(seed + 5, (8, 8))
        a, b = mx.nd.array(x), mx.nd.array(y)
        np.testing.assert_allclose(mx.nd.dot(a, b).asnumpy(), x @ y, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(a.sum().asnumpy(), [x.sum()], rtol=1e-5)
        np.testing.assert_allclose(mx.nd.sum(a, axis=1).asnumpy(), x.sum(axis=1), rtol=1e-5)


def test_a_bad_dot_is_refused_on_every_call() -> None:
    a, b = mx.nd.ones((2, 3)), mx.nd.ones((4, 5))
    for _ in range(2):
        with pytest.raises(ShapeError):
            mx.nd.dot(a, b)
