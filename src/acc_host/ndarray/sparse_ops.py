"""Operators on sparse NDArrays with MXNet 1.9's storage-type rules.

:func:`invoke_sparse` is where ``mx.nd.<op>`` (and NDArray's operators)
go when an input is sparse: an operator with a sparse implementation here
computes its result in the storage type MXNet's FInferStorageType gives;
any other returns None and the dense path reads the sparse inputs as dense
values (MXNet's storage fallback), giving dense outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from . import NDArray
from .sparse import INDEX_DTYPE, CSRNDArray, make_csr, to_stype

__all__ = ["invoke_sparse", "cast_storage", "slice_csr", "ND_FUNCTIONS"]


def _slice_bounds(extent: int, begin: Any, end: Any, axis: int) -> tuple[int, int]:
    """MXNet's slice bounds on one axis (None: the whole axis; negative:
    from the end), refused when empty or reversed."""
    first = 0 if begin is None else int(begin)
    last = extent if end is None else int(end)
    first = first + extent if first < 0 else first
    last = last + extent if last < 0 else last
    if not 0 <= first <= last <= extent:
        raise InvalidArgumentError(f"slice: bounds [{begin}, {end}) on axis {axis} are out of "
                                   f"range for extent {extent}")
    return first, last


def slice_csr(array: CSRNDArray, begin: Sequence[Any], end: Sequence[Any]) -> CSRNDArray:
    """Rows begin[0]:end[0] (and columns begin[1]:end[1], when given) of a
    CSR array, as a CSR array (MXNet's slice on csr storage)."""
    if len(begin) != len(end) or not 1 <= len(begin) <= 2:
        raise InvalidArgumentError(f"slice: a csr array takes 1 or 2 bounds, got begin={begin} "
                                   f"and end={end}")
    rows, cols = array.shape
    row0, row1 = _slice_bounds(rows, begin[0], end[0], 0)
    col0, col1 = (0, cols) if len(begin) == 1 else _slice_bounds(cols, begin[1], end[1], 1)
    indptr, indices = array.aux_arrays
    start, stop = int(indptr[row0]), int(indptr[row1])
    values, kept = array.values[start:stop], indices[start:stop]
    row_ptr = indptr[row0:row1 + 1] - start
    if (col0, col1) != (0, cols):
        inside = (kept >= col0) & (kept < col1)
        running = np.concatenate(([0], np.cumsum(inside, dtype=np.int64)))
        counts = running[row_ptr[1:]] - running[row_ptr[:-1]]
        row_ptr = np.zeros(row1 - row0 + 1, dtype=INDEX_DTYPE)
        np.cumsum(counts, out=row_ptr[1:])
        values, kept = values[inside], kept[inside] - col0
    return make_csr((row1 - row0, col1 - col0), np.array(values), row_ptr.astype(INDEX_DTYPE),
                    np.array(kept, dtype=INDEX_DTYPE), array.context, check=False)


def invoke_sparse(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any],
                  out: Any = None) -> list[NDArray] | None:
    """The outputs of op_name on inputs of which one is sparse, or None
    when op_name has no sparse implementation (dense fallback)."""
    return None


def cast_storage(data: NDArray, stype: str, out: Any = None) -> NDArray:
    """data in storage type stype (MXNet's cast_storage)."""
    result = to_stype(data, stype)
    if out is not None:
        return result.copyto(out)
    return result


ND_FUNCTIONS: dict[str, Callable[..., Any]] = {"cast_storage": cast_storage}
