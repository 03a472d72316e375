"""Planned element-wise CPU kernels (acc_host.ops.tensor.planned_kernel):
binary add/sub/mul of one shape and dtype, the same with a scalar, and
relu. Each gives the registered compute's values bit for bit (NaN, inf,
overflow and signed zeros included), raises no floating-point warning, and
writes out= in place when given one (the input may be the output)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from acc_host.ops import registry
from acc_host.ops.tensor import planned_kernel, writes_out

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.uint8, np.int8]


def _data(dtype: type, seed: int, shape: tuple[int, ...] = (4, 5)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        values = rng.standard_normal(shape) * 10
        flat = values.reshape(-1)
        flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.finfo(dtype).max]
        return values.astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def _same(left: np.ndarray, right: np.ndarray) -> None:
    assert left.dtype == right.dtype and left.shape == right.shape
    assert left.flags.c_contiguous
    np.testing.assert_array_equal(left.view(np.uint8), right.view(np.uint8))


CASES = [("broadcast_add", {}), ("broadcast_sub", {}), ("broadcast_mul", {}),
         ("elemwise_add", {}), ("elemwise_mul", {}),
         ("_plus_scalar", {"scalar": "3.5"}), ("_minus_scalar", {"scalar": "1e5"}),
         ("_rminus_scalar", {"scalar": "-2"}), ("_mul_scalar", {"scalar": "70000"}),
         ("relu", {})]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize(("name", "raw"), CASES, ids=[name for name, _ in CASES])
def test_planned_kernels_match_the_compute(name: str, raw: dict, dtype: type) -> None:
    op = registry.get(name)
    attrs = op.parse(raw)
    values = [_data(dtype, seed) for seed in range(len(op.input_names(attrs)))]
    kernel = planned_kernel(op, attrs, [(value.shape, value.dtype) for value in values])
    if name == "relu" and dtype is np.float16:  # float16's maximum keeps -0: the compute's
        assert kernel is None
        return
    assert kernel is not None and writes_out(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither path may warn
        expected = op.compute(attrs, [value.copy() for value in values])
        planned = kernel(values)
        _same(planned[0], expected[0])
        out = values[0].copy()
        written = kernel([out, *values[1:]], out=out)  # in place: the input is the output
        assert written[0] is out
        _same(out, expected[0])


def test_calls_the_kernels_do_not_cover_keep_the_compute() -> None:
    add, plus = registry.get("broadcast_add"), registry.get("_plus_scalar")
    f32, f64 = np.dtype(np.float32), np.dtype(np.float32).newbyteorder("=")
    assert planned_kernel(add, add.parse({}), [((2, 3), f32), ((1, 3), f32)]) is None
    assert planned_kernel(add, add.parse({}), [((2, 3), f32), ((2, 3), np.dtype(np.int32))]) \
        is None
    assert planned_kernel(plus, plus.parse({"scalar": "1"}), [((), f64)]) is None  # 0-d
    relu = registry.get("relu")
    assert planned_kernel(relu, relu.parse({}), [((2,), np.dtype(np.bool_))]) is None
    divide = registry.get("broadcast_div")
    assert planned_kernel(divide, divide.parse({}), [((2,), f32), ((2,), f32)]) is None
