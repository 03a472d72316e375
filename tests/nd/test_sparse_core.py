"""CSR and row_sparse NDArrays: construction, validation, conversion."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import GraphError, InvalidArgumentError, TensorError

DENSE = np.array([[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 0, 4]], dtype=np.float32)


def test_csr_from_components_matches_dense() -> None:
    a = mx.nd.sparse.csr_matrix(([1, 2, 3, 4], [1, 3, 0, 3], [0, 2, 2, 4]), shape=(3, 4))
    assert isinstance(a, mx.nd.CSRNDArray) and isinstance(a, mx.nd.NDArray)
    assert a.stype == "csr" and a.shape == (3, 4) and a.dtype == np.float32
    assert a.indices.dtype == np.int64 and a.indptr.dtype == np.int64
    np.testing.assert_array_equal(a.asnumpy(), DENSE)
    np.testing.assert_array_equal(a.indptr.asnumpy(), [0, 2, 2, 4])


def test_csr_shape_inferred_and_dtype_kept() -> None:
    a = mx.nd.sparse.csr_matrix((np.array([5, 6], dtype=np.float64), [0, 2], [0, 1, 2]))
    assert a.shape == (2, 3) and a.dtype == np.float64


def test_csr_from_dense_coo_and_scipy() -> None:
    from_dense = mx.nd.sparse.csr_matrix(DENSE)
    np.testing.assert_array_equal(from_dense.data.asnumpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(from_dense.indices.asnumpy(), [1, 3, 0, 3])
    coo = mx.nd.sparse.csr_matrix(([4, 1, 3, 1, 1], ([2, 0, 2, 0, 0], [3, 1, 0, 3, 3])),
                                  shape=(3, 4))
    np.testing.assert_array_equal(coo.asnumpy(), DENSE)  # duplicates summed
    sp = pytest.importorskip("scipy.sparse", reason="scipy is an optional extra")
    from_scipy = mx.nd.sparse.csr_matrix(sp.csr_matrix(DENSE))
    np.testing.assert_array_equal(from_scipy.asnumpy(), DENSE)
    np.testing.assert_array_equal(from_dense.asscipy().toarray(), DENSE)


def test_row_sparse_from_components_and_dense() -> None:
    r = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [1, 3]), shape=(5, 2))
    assert r.stype == "row_sparse" and r.shape == (5, 2)
    expected = np.zeros((5, 2), np.float32)
    expected[[1, 3]] = [[1, 2], [3, 4]]
    np.testing.assert_array_equal(r.asnumpy(), expected)
    back = mx.nd.array(expected).tostype("row_sparse")
    np.testing.assert_array_equal(back.indices.asnumpy(), [1, 3])
    assert back.tostype("default").stype == "default"


def test_cast_storage_round_trips() -> None:
    dense = mx.nd.array(DENSE)
    for stype in ("csr", "row_sparse"):
        converted = mx.nd.cast_storage(dense, stype)
        assert converted.stype == stype
        np.testing.assert_array_equal(converted.tostype("default").asnumpy(), DENSE)


@pytest.mark.parametrize("components, message", [
    (([1, 2], [0, 5], [0, 1, 2]), "out of range"),
    (([1, 2], [2, 1], [0, 2, 2]), "strictly increasing"),
    (([1, 2], [0, 1], [0, 2, 1]), "non-decreasing"),
    (([1, 2], [0, 1], [0, 2]), "entries"),
    (([1], [0, 1], [0, 1, 2]), "values"),
])
def test_bad_csr_components_are_tensor_errors(components: tuple, message: str) -> None:
    with pytest.raises(TensorError, match=message):
        mx.nd.sparse.csr_matrix(components, shape=(2, 3))


def test_bad_row_sparse_components_are_tensor_errors() -> None:
    with pytest.raises(TensorError, match="strictly increasing"):
        mx.nd.sparse.row_sparse_array(([[1.0], [2.0]], [3, 1]), shape=(4, 1))
    with pytest.raises(TensorError, match="out of range"):
        mx.nd.sparse.row_sparse_array(([[1.0]], [4]), shape=(4, 1))
    with pytest.raises(TensorError, match="shape"):
        mx.nd.sparse.row_sparse_array(([[1.0, 2.0]], [0]), shape=(4, 1))
    with pytest.raises(InvalidArgumentError, match="storage type"):
        mx.nd.array(DENSE).tostype("coo")


def test_variable_stype_writes_mxnet_attribute() -> None:
    x = mx.sym.Variable("x", stype="csr")
    w = mx.sym.Variable("w", stype="row_sparse")
    assert x.attr("__storage_type__") == "2" and w.attr("__storage_type__") == "1"
    assert '"__storage_type__": "2"' in x.tojson()
    with pytest.raises(GraphError):
        mx.sym.Variable("y", stype="coo")
