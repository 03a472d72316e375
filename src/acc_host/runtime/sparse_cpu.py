"""The CPU path's operators on sparse inputs, in numpy alone (no scipy).

The executor's CPU steps read a sparse variable (a CSR or row-sparse
NDArray bound as an argument) as it is when its operator has a sparse form
here, and as its dense value otherwise (MXNet's storage fallback):

* ``dot(csr, dense)`` (``transpose_b`` allowed) and ``FullyConnected`` whose
  data is CSR: each stored value times its weight row, summed per row
  (``np.add.reduceat`` over the row offsets), so the work is proportional to
  the nonzeros, not to the dense matrix;
* ``Embedding`` whose weight is row-sparse, and ``take`` (axis 0) from a
  row-sparse table: each id is looked up among the stored rows
  (``np.searchsorted``); absent rows read zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import OperatorError

__all__ = ["is_sparse", "sparse_kernel", "dense_value"]

_TRUE = {"true", "1"}


def is_sparse(value: Any) -> bool:
    """Whether value is a sparse NDArray (stype "csr" or "row_sparse")."""
    return getattr(value, "stype", "default") in ("csr", "row_sparse")


def dense_value(value: Any) -> Any:
    """A sparse NDArray's dense value (numpy); anything else unchanged."""
    return value.asnumpy() if is_sparse(value) else value


def _flag(attrs: Mapping[str, str], key: str) -> bool:
    return str(attrs.get(key, "False")).strip().lower() in _TRUE


def _csr(value: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """values, column indices, row offsets and shape of a CSR NDArray (its
    host arrays themselves, no copy)."""
    indptr, indices = value.aux_arrays
    return (value.values, indices.astype(np.int64, copy=False),
            indptr.astype(np.int64, copy=False), tuple(value.shape))


def _csr_times(value: Any, weight_rows: np.ndarray) -> np.ndarray:
    """CSR (M, K) x W, W given as its K rows (K, N): sum over each row's
    nonzeros of value * W[column]."""
    data, indices, indptr, (rows, _) = _csr(value)
    width = weight_rows.shape[1]
    out = np.zeros((rows, width), np.result_type(data.dtype, weight_rows.dtype))
    if data.size == 0:
        return out
    products = data[:, None] * weight_rows[indices]
    filled = np.flatnonzero(np.diff(indptr) > 0)
    out[filled] = np.add.reduceat(products, indptr[filled], axis=0)
    return out


def _dot(attrs: Mapping[str, str], values: Sequence[Any]) -> list[np.ndarray] | None:
    rhs = np.asarray(values[1])
    if _flag(attrs, "transpose_a") or rhs.ndim != 2:
        return None  # no sparse form: the dense values
    return [_csr_times(values[0], rhs.T if _flag(attrs, "transpose_b") else rhs)]


def _fully_connected(attrs: Mapping[str, str], values: Sequence[Any]) -> list[np.ndarray]:
    weight = np.asarray(values[1])
    out = _csr_times(values[0], weight.T)
    if not _flag(attrs, "no_bias"):
        out += np.asarray(values[2])
    return [out.astype(weight.dtype, copy=False)]


def _rows(table: Any, positions: np.ndarray) -> np.ndarray:
    """Dense rows positions (int64, in range) of a row-sparse table."""
    stored = table.values
    ids = table.aux_arrays[0].astype(np.int64, copy=False)
    out = np.zeros((positions.size, *table.shape[1:]), stored.dtype)
    if ids.size:
        where = np.minimum(np.searchsorted(ids, positions), ids.size - 1)
        hit = ids[where] == positions
        out[hit] = stored[where[hit]]
    return out


def _embedding(attrs: Mapping[str, str], values: Sequence[Any]) -> list[np.ndarray]:
    ids, table = np.asarray(values[0]), values[1]
    rows = table.shape[0]
    flat = np.nan_to_num(np.trunc(ids.astype(np.float64).ravel()), nan=0.0)
    positions = np.clip(flat, 0, rows - 1).astype(np.int64)
    return [_rows(table, positions).reshape(*ids.shape, *table.shape[1:])]


def _take(attrs: Mapping[str, str], values: Sequence[Any]) -> list[np.ndarray] | None:
    table, indices = values[0], np.asarray(values[1])
    if int(attrs.get("axis", 0)) not in (0, -len(table.shape)):
        return None  # no sparse form: the dense values
    rows = table.shape[0]
    positions = np.trunc(indices.astype(np.float64).ravel()).astype(np.int64)
    mode = str(attrs.get("mode", "clip"))
    if mode == "wrap":
        positions = np.mod(positions, rows)
    elif mode == "raise":
        if positions.size and (positions.min() < -rows or positions.max() >= rows):
            raise OperatorError(f"take: an index is out of range [-{rows}, {rows})")
        positions = np.where(positions < 0, positions + rows, positions)
    else:
        positions = np.clip(positions, 0, rows - 1)
    return [_rows(table, positions).reshape(*indices.shape, *table.shape[1:])]


# op name -> (the input that may be sparse, its stype, the kernel: None
# where these attributes have no sparse form)
_KERNELS: dict[str, tuple[int, str, Callable[[Mapping[str, str], Sequence[Any]],
                                              list[np.ndarray] | None]]] = {
    "dot": (0, "csr", _dot),
    "FullyConnected": (0, "csr", _fully_connected),
    "Embedding": (1, "row_sparse", _embedding),
    "take": (0, "row_sparse", _take),
}


def sparse_kernel(op: str, attrs: Mapping[str, str], values: Sequence[Any]
                  ) -> list[np.ndarray] | None:
    """The outputs of op on values when it has a sparse form for exactly
    these sparse inputs; None otherwise (run it on the dense values)."""
    known = _KERNELS.get(op)
    if known is None:
        return None
    position, stype, kernel = known
    for index, value in enumerate(values):
        wanted = stype if index == position else None
        if (getattr(value, "stype", None) if is_sparse(value) else None) != wanted:
            return None
    return kernel(attrs, [value if is_sparse(value) else np.asarray(value) for value in values])
