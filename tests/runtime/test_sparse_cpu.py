"""The CPU path's operators on sparse arguments (runtime/sparse_cpu.py, numpy
alone): executors on the CPU given CSR data or a row-sparse table, against
numpy on the dense values."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.runtime.sparse_cpu import sparse_kernel


def _csr(rng: np.random.Generator, shape: tuple[int, int], density: float):
    dense = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0)
    dense = dense.astype(np.float32)
    dense[1] = 0  # an empty row
    return mx.nd.sparse.csr_matrix(dense), dense


@pytest.mark.parametrize("transpose_b", [False, True])
def test_dot_csr_on_the_cpu(transpose_b) -> None:
    csr, dense = _csr(np.random.default_rng(1), (5, 30), 0.2)
    rhs = np.random.default_rng(2).standard_normal((4, 30) if transpose_b else (30, 4))
    rhs = rhs.astype(np.float32)
    out = mx.sym.dot(mx.sym.Variable("a", stype="csr"), mx.sym.Variable("b"),
                     transpose_b=transpose_b)
    exe = out.bind(mx.cpu(), args={"a": csr, "b": mx.nd.array(rhs)}, data_names=["a"])
    np.testing.assert_allclose(exe.forward()[0].asnumpy(),
                               dense @ (rhs.T if transpose_b else rhs), rtol=1e-5, atol=1e-5)


def test_fully_connected_and_embedding_on_the_cpu() -> None:
    rng = np.random.default_rng(3)
    csr, dense = _csr(rng, (4, 20), 0.3)
    weight = rng.standard_normal((3, 20)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    table = mx.nd.sparse.row_sparse_array(
        (rng.standard_normal((2, 3)).astype(np.float32), [1, 6]), shape=(8, 3))
    ids = np.array([0, 1, 6, 7], np.float32)
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=3, name="fc") + \
        mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=8,
                         output_dim=3, name="emb")
    exe = out.bind(mx.cpu(), args={"x": csr, "fc_weight": mx.nd.array(weight),
                                   "fc_bias": mx.nd.array(bias), "ids": mx.nd.array(ids),
                                   "w": table}, data_names=["x", "ids"])
    expected = dense @ weight.T + bias + table.asnumpy()[ids.astype(np.int64)]
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
def test_take_from_row_sparse(mode) -> None:
    table = mx.nd.sparse.row_sparse_array(
        (np.arange(6, dtype=np.float32).reshape(3, 2), [0, 2, 4]), shape=(5, 2))
    indices = np.array([4, 1, -1, 7] if mode != "raise" else [4, 1, -1], np.float32)
    (got,) = sparse_kernel("take", {"mode": mode}, [table, indices])
    np.testing.assert_array_equal(got, np.take(table.asnumpy(), indices.astype(np.int64),
                                               axis=0, mode=mode))


def test_other_storage_combinations_fall_back_to_dense() -> None:
    csr, _ = _csr(np.random.default_rng(4), (3, 4), 0.5)
    assert sparse_kernel("dot", {}, [np.ones((3, 4), np.float32), csr]) is None
    assert sparse_kernel("relu", {}, [csr]) is None
    assert sparse_kernel("dot", {"transpose_a": "True"}, [csr, np.ones((3, 2))]) is None
