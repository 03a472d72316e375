"""Random sparse arrays for the sparse-ABI tests: CSR and row-sparse parts
(acc_host.abi.sparse) with their dense values, built with numpy alone."""

from __future__ import annotations

import numpy as np

from acc_host.abi.sparse import CsrParts, RowSparseParts

__all__ = ["random_csr", "random_row_sparse", "csr_of"]


def csr_of(dense: np.ndarray) -> CsrParts:
    """The CSR parts of a 2-D dense array (its nonzeros, row by row)."""
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return CsrParts.checked(dense[rows, cols], cols, indptr, dense.shape)


def random_csr(rng: np.random.Generator, shape: tuple[int, int],
               density: float) -> tuple[CsrParts, np.ndarray]:
    """A float32 CSR matrix of about density nonzeros, and its dense value
    (empty rows included)."""
    dense = np.where(rng.random(shape) < density, rng.standard_normal(shape), 0.0)
    dense = dense.astype(np.float32)
    return csr_of(dense), dense


def random_row_sparse(rng: np.random.Generator, shape: tuple[int, ...],
                      stored: int) -> tuple[RowSparseParts, np.ndarray]:
    """A float32 row-sparse array with `stored` rows, and its dense value."""
    rows = np.sort(rng.choice(shape[0], stored, replace=False))
    values = rng.standard_normal((stored, *shape[1:])).astype(np.float32)
    parts = RowSparseParts.checked(values, rows, shape)
    return parts, parts.dense()
