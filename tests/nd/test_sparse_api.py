"""Sparse NDArrays beyond MXNet's reference cases: copies, contexts, item
assignment, pickling, optional scipy, typed errors, and random operands
against numpy's dense results (the independent oracle)."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import acc_host as mx
from acc_host.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    OperatorError,
    TensorError,
)
from acc_host.ndarray.sparse import check_csr, check_row_sparse

DENSE = np.array([[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]], dtype=np.float32)


def test_copyto_converts_into_the_targets_storage() -> None:
    a = mx.nd.array(DENSE).tostype("csr")
    dense = mx.nd.zeros((3, 4))
    assert a.copyto(dense) is dense and dense.stype == "default"
    np.testing.assert_array_equal(dense.asnumpy(), DENSE)
    rsp = mx.nd.sparse.zeros("row_sparse", (3, 4))
    version = rsp.version
    a.copyto(rsp)
    assert rsp.stype == "row_sparse" and rsp.version == version + 1
    np.testing.assert_array_equal(rsp.indices.asnumpy(), [0, 2])
    with pytest.raises(TensorError, match="shape"):
        a.copyto(mx.nd.zeros((4, 3)))


def test_contexts_copies_and_pickling() -> None:
    a = mx.nd.array(DENSE).tostype("csr")
    moved = a.as_in_context(mx.cpu(1))
    assert moved.context == mx.cpu(1) and moved.stype == "csr" and a.context == mx.cpu(0)
    assert a.as_in_context(mx.cpu(0)) is a
    copy = a.copy()
    copy.data.asnumpy()  # the copy owns its components
    assert copy.values is not a.values
    restored = pickle.loads(pickle.dumps(a))
    assert isinstance(restored, mx.nd.CSRNDArray)
    np.testing.assert_array_equal(restored.asnumpy(), DENSE)


def test_whole_assignment_and_refused_indexing() -> None:
    a = mx.nd.array(DENSE).tostype("csr")
    a[:] = np.eye(3, 4, dtype=np.float32)
    assert a.stype == "csr" and a.nnz == 3
    a[:] = 0
    assert a.nnz == 0
    with pytest.raises(InvalidArgumentError, match=r"x\[:\]"):
        a[1] = 5
    with pytest.raises(InvalidArgumentError, match="step 1"):
        a[::2]
    with pytest.raises(InvalidArgumentError, match="out of range"):
        a[3]
    with pytest.raises(InvalidArgumentError, match="row indexing"):
        a[1, 2]
    with pytest.raises(InvalidArgumentError, match="reshape"):
        a.reshape((4, 3))
    r = mx.nd.array(DENSE).tostype("row_sparse")
    assert r[:] is r
    with pytest.raises(InvalidArgumentError, match="retain"):
        r[1]


def test_classes_are_not_called_directly() -> None:
    with pytest.raises(InvalidArgumentError, match="csr_matrix"):
        mx.nd.CSRNDArray(DENSE)


def test_scipy_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    a = mx.nd.array(DENSE).tostype("csr")
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    with pytest.raises(MissingDependencyError, match=r"acc-host\[scipy\]"):
        a.asscipy()


def test_typed_errors_for_bad_operands() -> None:
    a = mx.nd.array(DENSE).tostype("csr")
    with pytest.raises(TensorError, match="shape mismatch"):
        mx.nd.sparse.dot(a, mx.nd.ones((3, 2)))
    with pytest.raises(TensorError, match="differ"):
        mx.nd.sparse.elemwise_add(a, mx.nd.ones((3, 5)).tostype("csr"))
    with pytest.raises(OperatorError, match="clip"):
        mx.nd.clip(a, a_min=1.0, a_max=2.0)
    with pytest.raises(InvalidArgumentError, match="row_sparse"):
        mx.nd.sparse.retain(a, [0])
    with pytest.raises(TensorError, match="out of range"):
        mx.nd.sparse.retain(a.tostype("row_sparse"), [7])
    with pytest.raises(InvalidArgumentError, match="out of range"):
        mx.nd.slice(a, begin=(1,), end=(5,))
    with pytest.raises(TensorError, match="2-D"):
        mx.nd.ones((2, 2, 2)).tostype("csr")


def test_mx_nd_entry_points_give_sparse_arrays() -> None:
    assert isinstance(mx.nd.zeros((2, 3), stype="csr"), mx.nd.CSRNDArray)
    assert isinstance(mx.nd.zeros((2, 3), stype="row_sparse"), mx.nd.RowSparseNDArray)
    a = mx.nd.array(DENSE).tostype("csr")
    assert isinstance(mx.nd.array(a), mx.nd.CSRNDArray)
    assert mx.nd.cast_storage(a, "default").stype == "default"
    equal = a == mx.nd.array(DENSE)
    assert equal.stype == "default" and equal.asnumpy().all()


def test_dense_operators_on_an_accelerator_context_read_sparse_inputs() -> None:
    ctx = mx.cpu_ref(0)
    a = mx.nd.array(DENSE).tostype("csr").as_in_context(ctx)
    weights = mx.nd.array(np.arange(8, dtype=np.float32).reshape(4, 2), ctx=ctx)
    product = mx.nd.sparse.dot(a, weights)
    assert product.context == ctx
    np.testing.assert_allclose(product.asnumpy(), DENSE @ weights.asnumpy())
    np.testing.assert_allclose(mx.nd.exp(a).asnumpy(), np.exp(DENSE), rtol=1e-6)


def _matrix(draw: st.DrawFn, shape: tuple[int, int]) -> np.ndarray:
    values = draw(st.lists(st.integers(-3, 3), min_size=shape[0] * shape[1],
                           max_size=shape[0] * shape[1]))
    return np.array(values, dtype=np.float32).reshape(shape)


@st.composite
def _operands(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols, out = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 4))
    return _matrix(draw, (rows, cols)), _matrix(draw, (rows, cols)), _matrix(draw, (cols, out))


@settings(max_examples=60, deadline=None)
@given(_operands())
def test_random_operands_match_numpy(operands: tuple[np.ndarray, np.ndarray, np.ndarray]
                                     ) -> None:
    x, y, w = operands
    a, b = mx.nd.array(x).tostype("csr"), mx.nd.array(y).tostype("csr")
    ra, rb = mx.nd.array(x).tostype("row_sparse"), mx.nd.array(y).tostype("row_sparse")
    for result, expected in [(a + b, x + y), (a - b, x - y), (a * b, x * y), (ra + rb, x + y),
                             (ra * rb, x * y), (a * mx.nd.array(y), x * y), (a * 3, x * 3),
                             (mx.nd.relu(a), np.maximum(x, 0)), (a[1:], x[1:])]:
        np.testing.assert_array_equal(result.asnumpy(), expected)
        if result.stype == "csr":
            check_csr(result.shape, result.values, *result.aux_arrays)
        elif result.stype == "row_sparse":
            check_row_sparse(result.shape, result.values, *result.aux_arrays)
    np.testing.assert_allclose(mx.nd.sparse.dot(a, mx.nd.array(w)).asnumpy(), x @ w)
    transposed = mx.nd.sparse.dot(a, mx.nd.array(x), transpose_a=True)
    assert transposed.stype == "row_sparse"
    np.testing.assert_allclose(transposed.asnumpy(), x.T @ x)
    np.testing.assert_allclose(mx.nd.sparse.dot(mx.nd.array(x.T), a).asnumpy(), x.T @ x)
