"""NDArray on the CPU: creation, conversion, arithmetic, indexing, versions,
interop and files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import acc_host as mx


def test_creation_and_properties() -> None:
    a = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    assert a.shape == (2, 3) and a.dtype == np.float32 and a.context == mx.cpu()
    assert a.ndim == 2 and a.size == 6 and len(a) == 2
    assert mx.nd.array(np.arange(4, dtype=np.int32)).dtype == np.int32
    assert mx.nd.array([1, 2], dtype="float64").dtype == np.float64
    np.testing.assert_array_equal(mx.nd.zeros((2, 2)).asnumpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(mx.nd.ones(3, dtype="int64").asnumpy(), [1, 1, 1])
    np.testing.assert_array_equal(mx.nd.full((2,), 7).asnumpy(), [7, 7])
    np.testing.assert_array_equal(mx.nd.arange(0, 6, 2).asnumpy(), [0, 2, 4])
    np.testing.assert_array_equal(mx.nd.arange(3, repeat=2).asnumpy(), [0, 0, 1, 1, 2, 2])
    assert mx.nd.empty((0, 4)).shape == (0, 4)
    with pytest.raises(mx.TensorError):
        mx.nd.array(np.array(["a"]))
    assert "<NDArray 2x3 @cpu(0)>" in repr(a)


def test_arithmetic_and_comparison_follow_broadcasting() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([1, 2, 3], dtype=np.float32)
    a, b = mx.nd.array(x), mx.nd.array(y)
    for result, expected in [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y),
                             (a + 1, x + 1), (1 - a, 1 - x), (2 * a, 2 * x), (a / 2, x / 2),
                             (1 / (a + 1), 1 / (x + 1)), (a ** 2, x ** 2), (-a, -x),
                             (a % 4, x % 4), (a > 2, (x > 2).astype(np.float32)),
                             (a == b, (x == y).astype(np.float32)),
                             (a <= 3, (x <= 3).astype(np.float32))]:
        assert result.dtype == np.float32
        np.testing.assert_allclose(result.asnumpy(), expected, rtol=1e-6)
    a += 1
    np.testing.assert_array_equal(a.asnumpy(), x + 1)


def test_indexing_views_and_versions() -> None:
    a = mx.nd.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    version = a.version
    row = a[1]
    np.testing.assert_array_equal(row.asnumpy(), [4, 5, 6, 7])
    row[:] = 0  # a view: writes reach the array
    assert a.asnumpy()[1].sum() == 0 and a.version > version
    a[0, 0] = 100
    assert a.asnumpy()[0, 0] == 100
    np.testing.assert_array_equal(a[:, 1:3].asnumpy(), a.asnumpy()[:, 1:3])
    picked = a[mx.nd.array([2, 0])]  # advanced indexing copies
    picked[:] = -1
    assert a.asnumpy().min() >= 0
    before = a.version
    a[:] = np.ones((3, 4))
    assert a.version == before + 1


def test_copies_and_contexts() -> None:
    a = mx.nd.array([1.0, 2.0])
    b = a.copyto(mx.cpu())
    b[:] = 5
    assert a.asnumpy().tolist() == [1.0, 2.0]
    target = mx.nd.zeros(2)
    a.copyto(target)
    assert target.asnumpy().tolist() == [1.0, 2.0]
    assert a.as_in_context(mx.cpu()) is a
    with pytest.raises(mx.TensorError, match="shapes differ"):
        a.copyto(mx.nd.zeros(3))
    a.wait_to_read()
    mx.nd.waitall()
    assert a.astype("int32").dtype == np.int32
    assert mx.nd.array([3.5]).asscalar() == 3.5


def test_numpy_and_dlpack_interop() -> None:
    a = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(np.asarray(a), a.asnumpy())
    shared = np.from_dlpack(a)
    shared[0, 0] = 42  # zero-copy: the same memory
    assert a.asnumpy()[0, 0] == 42
    back = mx.nd.from_dlpack(np.arange(3, dtype=np.float32))
    assert back.asnumpy().tolist() == [0.0, 1.0, 2.0]


def test_operators_by_name() -> None:
    x = mx.nd.array([[-1.0, 2.0]])
    np.testing.assert_array_equal(mx.nd.Activation(x, act_type="relu").asnumpy(), [[0, 2]])
    np.testing.assert_array_equal(mx.nd.elemwise_add(lhs=x, rhs=x).asnumpy(), [[-2, 4]])
    out = mx.nd.zeros((1, 2))
    mx.nd.Activation(x, act_type="relu", out=out)
    assert out.asnumpy().tolist() == [[0.0, 2.0]]
    with pytest.raises(mx.OperatorError, match="rhs"):
        mx.nd.elemwise_add(x)
    with pytest.raises(AttributeError):
        mx.nd.NoSuchOperator  # noqa: B018


def test_save_and_load(tmp_path: Path) -> None:
    arrays = {"w": mx.nd.array(np.random.rand(3, 2)), "b": mx.nd.array([1, 2], dtype="int64")}
    mx.nd.save(tmp_path / "named.params", arrays)
    loaded = mx.nd.load(tmp_path / "named.params")
    assert list(loaded) == ["w", "b"]
    for key in arrays:
        np.testing.assert_array_equal(loaded[key].asnumpy(), arrays[key].asnumpy())
        assert loaded[key].dtype == arrays[key].dtype
    mx.nd.save(tmp_path / "list.params", [arrays["w"]])
    as_list = mx.nd.load(tmp_path / "list.params")
    assert isinstance(as_list, list) and len(as_list) == 1
