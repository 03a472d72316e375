"""Operators on sparse NDArrays with MXNet 1.9's storage-type rules.

:func:`invoke_sparse` is where ``mx.nd.<op>`` (and NDArray's operators)
go when an input is sparse. An operator with a sparse implementation here
computes its result in the storage type MXNet 1.9.1 gives (its
FInferStorageType and FComputeEx; the cases are checked against MXNet's own
results in tests/models/sparse); any other returns None and the dense path
reads the sparse inputs as dense values (MXNet's storage fallback), giving
dense outputs. The rules:

- unary operators with f(0) = 0 (relu, abs, sign, square, sqrt, sin, tanh,
  ...; ``clip`` when its range holds 0; ``_mul_scalar``, ``_div_scalar``)
  keep the storage type and the stored positions, applied to the values;
- ``elemwise_add``/``sub``/``mul``: csr with csr gives csr (the union of
  the positions, results that are 0 not stored); row_sparse with
  row_sparse gives row_sparse (the union of the rows, all kept);
  ``elemwise_mul`` of dense and csr (or row_sparse) keeps the sparse
  operand's positions; add and sub with a dense operand give dense;
- ``broadcast_mul``/``broadcast_div`` of csr by dense give csr;
- ``dot``: csr x dense gives dense, csr.T x dense row_sparse (the rows are
  the columns csr stores), dense x csr gives csr, csr x row_sparse dense;
  ``forward_stype`` names the result's storage type;
- ``slice`` of csr gives csr; :func:`retain` of row_sparse gives
  row_sparse holding exactly the rows asked for; ``zeros_like`` keeps the
  storage type with nothing stored; ``Concat`` of csr arrays along dim 0
  gives csr; ``add_n`` of row_sparse arrays gives row_sparse (the union of
  the rows);
- ``cast_storage``/``tostype`` convert, dropping zeros.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ContextError, InvalidArgumentError, OperatorError, TensorError
from ..graph.storage import ZERO_PRESERVING
from ..ops import registry
from . import NDArray
from .sparse import (
    INDEX_DTYPE,
    BaseSparseNDArray,
    CSRNDArray,
    RowSparseNDArray,
    make_csr,
    make_row_sparse,
    to_stype,
    zeros,
)

__all__ = ["invoke_sparse", "cast_storage", "slice_csr", "retain", "add", "subtract",
           "multiply", "divide", "binary_operator", "SPARSE_FUNCTIONS"]

_ELEMWISE = {"elemwise_add", "elemwise_sub", "elemwise_mul"}
_BROADCAST_AS_ELEMWISE = {"broadcast_add": "elemwise_add", "broadcast_sub": "elemwise_sub",
                          "broadcast_mul": "elemwise_mul", "broadcast_div": "elemwise_div"}


def invoke_sparse(op_name: str, inputs: Sequence[NDArray], attrs: Mapping[str, Any],
                  out: Any = None) -> list[NDArray] | None:
    """The outputs of op_name on inputs of which one is sparse, or None
    when op_name has no sparse implementation for these storage types
    (the caller then runs it on dense values)."""
    op = registry.find(op_name)
    if op is None:
        return None
    contexts = {array.context for array in inputs}
    if len(contexts) > 1:
        raise ContextError(f"{op_name}: inputs are on different contexts: "
                           f"{', '.join(sorted(map(str, contexts)))}")
    parsed = op.parse(attrs)
    result = _sparse_result(op, parsed, list(inputs))
    if result is None:
        return None
    if out is not None:
        targets = [out] if isinstance(out, NDArray) else list(out)
        if len(targets) != 1:
            raise OperatorError(f"{op_name}: 1 output, {len(targets)} out arrays")
        return [result.copyto(targets[0])]
    return [result]


def _sparse_result(op: registry.OpDef, attrs: Any, inputs: list[NDArray]) -> NDArray | None:
    name = op.name
    stypes = [array.stype for array in inputs]
    if name == "Concat" and set(stypes) == {"csr"} and attrs.dim == 0:
        return _concat_rows(inputs)  # type: ignore[arg-type]
    if name == "add_n" and set(stypes) == {"row_sparse"}:
        return _sum_row_sparse(op, attrs, inputs)  # type: ignore[arg-type]
    if len(inputs) == 1 and isinstance(inputs[0], BaseSparseNDArray):
        if name == "zeros_like":
            return zeros(inputs[0].stype, inputs[0].shape, ctx=inputs[0].context,
                         dtype=inputs[0].dtype)
        if name in ZERO_PRESERVING or (name == "clip" and _clip_keeps_zero(attrs)):
            return _map_values(op, attrs, inputs[0])
        if name == "slice" and isinstance(inputs[0], CSRNDArray):
            if attrs.step and any(step not in (None, 1) for step in attrs.step):
                return None
            return slice_csr(inputs[0], attrs.begin, attrs.end)
        return None
    if len(inputs) != 2:
        return None
    lhs, rhs = inputs
    if name == "dot":
        return _dot(op, attrs, lhs, rhs)
    if name in ("broadcast_mul", "broadcast_div") and isinstance(lhs, CSRNDArray) \
            and stypes[1] == "default":
        return _broadcast_csr(op, attrs, lhs, rhs)
    if name in _ELEMWISE:
        _check_same_shape(name, lhs, rhs)
        if stypes == ["csr", "csr"]:
            return _csr_csr(op, attrs, lhs, rhs)  # type: ignore[arg-type]
        if stypes == ["row_sparse", "row_sparse"]:
            return _rsp_rsp(op, attrs, lhs, rhs)  # type: ignore[arg-type]
        if name == "elemwise_mul" and "default" in stypes:
            return _mul_with_dense(op, attrs, lhs, rhs)
    return None


def _concat_rows(inputs: list[CSRNDArray]) -> NDArray:
    """CSR arrays stacked along the rows (Concat with dim 0)."""
    cols = inputs[0].shape[1]
    if any(array.shape[1] != cols for array in inputs):
        raise TensorError(f"concat: csr arrays of {[array.shape for array in inputs]} do not "
                          "share their number of columns")
    dtype = np.result_type(*[array.dtype for array in inputs])
    offsets = np.cumsum([0] + [array.nnz for array in inputs])
    indptr = np.concatenate([np.zeros(1, INDEX_DTYPE)] + [
        array.aux_arrays[0][1:] + offset for array, offset in zip(inputs, offsets)])
    return make_csr((sum(array.shape[0] for array in inputs), cols),
                    np.concatenate([array.values.astype(dtype) for array in inputs]),
                    indptr.astype(INDEX_DTYPE),
                    np.concatenate([array.aux_arrays[1] for array in inputs]),
                    inputs[0].context, check=False)


def _sum_row_sparse(op: registry.OpDef, attrs: Any, inputs: list[RowSparseNDArray]
                    ) -> NDArray:
    """add_n of row_sparse arrays: row_sparse over the union of their rows."""
    shape = inputs[0].shape
    if any(array.shape != shape for array in inputs):
        raise TensorError(f"add_n: shapes {[array.shape for array in inputs]} differ")
    union = np.unique(np.concatenate([array.aux_arrays[0] for array in inputs]))
    dtype = np.result_type(*[array.dtype for array in inputs])
    spread = [_aligned(array.aux_arrays[0], union, array.values.astype(dtype))
              for array in inputs]
    return make_row_sparse(shape, _run(op, attrs, spread), union.astype(INDEX_DTYPE),
                           inputs[0].context, check=False)


def _check_same_shape(name: str, lhs: NDArray, rhs: NDArray) -> None:
    if lhs.shape != rhs.shape:
        raise TensorError(f"{name}: operands of shapes {lhs.shape} and {rhs.shape} differ")


def _clip_keeps_zero(attrs: Any) -> bool:
    if attrs.a_min <= 0 <= attrs.a_max:
        return True
    raise OperatorError(f"clip: a sparse input needs a range that holds 0 (MXNet has no "
                        f"sparse clip to [{attrs.a_min}, {attrs.a_max}]); convert it with "
                        "tostype('default') first")


def _run(op: registry.OpDef, attrs: Any, arrays: list[np.ndarray]) -> np.ndarray:
    return np.asarray(op.run(attrs, arrays)[0])


def _map_values(op: registry.OpDef, attrs: Any, array: BaseSparseNDArray) -> NDArray:
    values = _run(op, attrs, [array.values]) if array.values.size else \
        array.values.astype(_run(op, attrs, [np.zeros(1, array.dtype)]).dtype)
    return _like(array, values)


def _like(array: BaseSparseNDArray, values: np.ndarray) -> BaseSparseNDArray:
    """array's positions with other values."""
    aux = array.aux_arrays
    if isinstance(array, CSRNDArray):
        return make_csr(array.shape, values, aux[0], aux[1], array.context, check=False)
    return make_row_sparse(array.shape, values, aux[0], array.context, check=False)


def _entry_rows(array: CSRNDArray) -> np.ndarray:
    """The row of every stored value."""
    indptr = array.aux_arrays[0]
    return np.repeat(np.arange(array.shape[0], dtype=INDEX_DTYPE), np.diff(indptr))


def _csr_from_keys(shape: tuple[int, ...], keys: np.ndarray, values: np.ndarray,
                   ctx: Any) -> CSRNDArray:
    """A CSR array from sorted linear positions (row * cols + col)."""
    cols = shape[1]
    rows = keys // cols if cols else keys
    indptr = np.zeros(shape[0] + 1, dtype=INDEX_DTYPE)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return make_csr(shape, np.ascontiguousarray(values), indptr,
                    (keys - rows * cols).astype(INDEX_DTYPE), ctx, check=False)


def _aligned(keys: np.ndarray, union: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values (at keys) spread over union (which holds keys), zero elsewhere."""
    spread = np.zeros((union.shape[0], *values.shape[1:]), dtype=values.dtype)
    spread[np.searchsorted(union, keys)] = values
    return spread


def _csr_csr(op: registry.OpDef, attrs: Any, lhs: CSRNDArray, rhs: CSRNDArray) -> NDArray:
    cols = lhs.shape[1]
    lkeys = _entry_rows(lhs) * cols + lhs.aux_arrays[1]
    rkeys = _entry_rows(rhs) * cols + rhs.aux_arrays[1]
    union = np.union1d(lkeys, rkeys)
    dtype = np.result_type(lhs.dtype, rhs.dtype)
    values = _run(op, attrs, [_aligned(lkeys, union, lhs.values.astype(dtype)),
                              _aligned(rkeys, union, rhs.values.astype(dtype))])
    kept = values != 0
    return _csr_from_keys(lhs.shape, union[kept], values[kept], lhs.context)


def _rsp_rsp(op: registry.OpDef, attrs: Any, lhs: RowSparseNDArray,
             rhs: RowSparseNDArray) -> NDArray:
    lrows, rrows = lhs.aux_arrays[0], rhs.aux_arrays[0]
    union = np.union1d(lrows, rrows).astype(INDEX_DTYPE)
    dtype = np.result_type(lhs.dtype, rhs.dtype)
    values = _run(op, attrs, [_aligned(lrows, union, lhs.values.astype(dtype)),
                              _aligned(rrows, union, rhs.values.astype(dtype))])
    return make_row_sparse(lhs.shape, values, union, lhs.context, check=False)


def _mul_with_dense(op: registry.OpDef, attrs: Any, lhs: NDArray, rhs: NDArray
                    ) -> NDArray | None:
    sparse, dense, sparse_first = (lhs, rhs, True) if isinstance(lhs, BaseSparseNDArray) \
        else (rhs, lhs, False)
    if not isinstance(sparse, BaseSparseNDArray):
        return None
    full = dense.asnumpy().astype(sparse.dtype, copy=False)
    if isinstance(sparse, CSRNDArray):
        picked = full[_entry_rows(sparse), sparse.aux_arrays[1]]
    else:
        picked = full[sparse.aux_arrays[0]]
    pair = [sparse.values, picked] if sparse_first else [picked, sparse.values]
    return _like(sparse, _run(op, attrs, pair))


def _broadcast_csr(op: registry.OpDef, attrs: Any, lhs: CSRNDArray, rhs: NDArray) -> NDArray:
    dense = rhs.asnumpy()
    if dense.ndim != 2 or any(extent not in (1, full) for extent, full in
                              zip(dense.shape, lhs.shape)):
        raise TensorError(f"{op.name}: a csr array of shape {lhs.shape} cannot be broadcast "
                          f"with shape {dense.shape}")
    rows = _entry_rows(lhs) if dense.shape[0] != 1 else np.zeros(lhs.nnz, INDEX_DTYPE)
    cols = lhs.aux_arrays[1] if dense.shape[1] != 1 else np.zeros(lhs.nnz, INDEX_DTYPE)
    picked = dense[rows, cols].astype(lhs.dtype, copy=False)
    return _like(lhs, _run(op, attrs, [lhs.values, picked]))


def _retain_rows(data: RowSparseNDArray, indices: NDArray) -> NDArray:
    wanted = np.unique(indices.asnumpy().astype(INDEX_DTYPE).reshape(-1))
    if wanted.size and (wanted[0] < 0 or wanted[-1] >= data.shape[0]):
        raise TensorError(f"retain: indices out of range: they must be in "
                          f"[0, {data.shape[0]}), got {int(wanted[0])}..{int(wanted[-1])}")
    rows = data.aux_arrays[0]
    values = np.zeros((wanted.shape[0], *data.shape[1:]), dtype=data.dtype)
    where = np.searchsorted(rows, wanted)
    found = (where < rows.shape[0]) & (rows[np.minimum(where, max(rows.shape[0] - 1, 0))]
                                      == wanted) if rows.size else np.zeros(0, bool)
    if rows.size:
        values[found] = data.values[where[found]]
    return make_row_sparse(data.shape, values, wanted, data.context, check=False)


# ---- dot ------------------------------------------------------------------------------------


def _csr_times_dense(lhs: CSRNDArray, rhs: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """lhs @ rhs: one vector-matrix product per stored row, of its values and
    the rows of rhs its columns pick. (A loop over the rows, because numpy
    has no segmented matmul: np.add.reduceat over the products took 103 ms
    where this takes 11, at 1 % density in benchmarks/host_sparse.py.)"""
    indptr, indices = lhs.aux_arrays
    values = lhs.values.astype(dtype, copy=False)
    out = np.zeros((lhs.shape[0], rhs.shape[1]), dtype=dtype)
    for row in np.flatnonzero(np.diff(indptr)):
        start, stop = indptr[row], indptr[row + 1]
        out[row] = values[start:stop] @ rhs[indices[start:stop]]
    return out


def _csr_t_times_dense(lhs: CSRNDArray, rhs: np.ndarray, dtype: np.dtype) -> NDArray:
    """lhs.T @ rhs as row_sparse: its rows are the columns lhs stores. Row
    i of lhs adds values x rhs[i] to the rows of its columns (distinct
    within a row, so one fancy-indexed add per row)."""
    indptr, indices = lhs.aux_arrays
    values = lhs.values.astype(dtype, copy=False)
    kept = np.unique(indices)
    position = np.searchsorted(kept, indices)
    out = np.zeros((kept.shape[0], rhs.shape[1]), dtype=dtype)
    for row in np.flatnonzero(np.diff(indptr)):
        start, stop = indptr[row], indptr[row + 1]
        out[position[start:stop]] += values[start:stop, None] * rhs[row]
    return make_row_sparse((lhs.shape[1], rhs.shape[1]), out, kept.astype(INDEX_DTYPE),
                           lhs.context, check=False)


def _dot(op: registry.OpDef, attrs: Any, lhs: NDArray, rhs: NDArray) -> NDArray | None:
    ta, tb = attrs.transpose_a, attrs.transpose_b
    lhs_shape = lhs.shape[::-1] if ta else lhs.shape
    rhs_shape = rhs.shape[::-1] if tb else rhs.shape
    if len(lhs.shape) != 2 or len(rhs.shape) != 2 or lhs_shape[1] != rhs_shape[0]:
        raise TensorError(f"dot: shape mismatch {lhs.shape} x {rhs.shape} (transpose_a={ta}, "
                          f"transpose_b={tb})")
    dtype = np.result_type(lhs.dtype, rhs.dtype)
    wanted = attrs.forward_stype
    result: NDArray | None = None
    if isinstance(lhs, CSRNDArray) and not isinstance(rhs, CSRNDArray):
        dense = rhs.asnumpy().astype(dtype, copy=False)
        dense = dense.T if tb else dense
        if ta:
            result = _csr_t_times_dense(lhs, dense, dtype)
        else:
            result = NDArray(_csr_times_dense(lhs, dense, dtype), lhs.context)
    elif isinstance(rhs, CSRNDArray) and lhs.stype == "default" and not ta:
        product = _run(op, attrs, [lhs.asnumpy(), rhs.asnumpy()])
        result = to_stype(NDArray(product, lhs.context), "csr")
    if result is None:
        return None
    return result if wanted is None else to_stype(result, wanted)


# ---- functions of mx.nd.sparse ---------------------------------------------------------------


def binary_operator(lhs: NDArray, other: Any, op: str, scalar_op: str,
                    elemwise: bool | None = None) -> NDArray:
    """A sparse array's arithmetic operator, as MXNet's Python has it:
    ``+``, ``-`` and ``*`` (and mx.nd.sparse.add, subtract, multiply, divide)
    use the elemwise operator for operands of one shape and the broadcast
    one otherwise; ``/`` and the reflected operators use the broadcast one.
    elemwise: whether op is one of the former (default: add, sub, mul)."""
    from . import invoke  # (the package's operator call)

    if elemwise is None:
        elemwise = op in ("broadcast_add", "broadcast_sub", "broadcast_mul")
    if isinstance(other, NDArray):
        if elemwise and other.shape == lhs.shape:
            op = _BROADCAST_AS_ELEMWISE[op]
        return invoke(op, [lhs, other], {})[0]
    if isinstance(other, (numbers.Real, np.number)):
        return invoke(scalar_op, [lhs], {"scalar": float(other)})[0]
    if isinstance(other, np.ndarray):
        return binary_operator(lhs, NDArray(other.astype(lhs.dtype), lhs.context), op,
                               scalar_op, elemwise)
    raise InvalidArgumentError(f"{op}: cannot combine a {lhs.stype} array with "
                               f"{type(other).__name__}")


def add(lhs: NDArray, rhs: Any) -> NDArray:
    """lhs + rhs with MXNet's storage rules (csr + csr is csr, ...)."""
    return binary_operator(lhs, rhs, "broadcast_add", "_plus_scalar")


def subtract(lhs: NDArray, rhs: Any) -> NDArray:
    return binary_operator(lhs, rhs, "broadcast_sub", "_minus_scalar")


def multiply(lhs: NDArray, rhs: Any) -> NDArray:
    return binary_operator(lhs, rhs, "broadcast_mul", "_mul_scalar")


def divide(lhs: NDArray, rhs: Any) -> NDArray:
    return binary_operator(lhs, rhs, "broadcast_div", "_div_scalar", elemwise=True)


def retain(data: NDArray, indices: Any) -> NDArray:
    """The rows of a row_sparse array named by indices (MXNet's
    ``sparse.retain``)."""
    if not isinstance(data, RowSparseNDArray):
        raise InvalidArgumentError(f"retain: data must be row_sparse, got {data.stype}")
    if not isinstance(indices, NDArray):
        indices = NDArray(np.asarray(indices, dtype=np.int64), data.context)
    return _retain_rows(data, indices)


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


def cast_storage(data: NDArray, stype: str, out: Any = None) -> NDArray:
    """data in storage type stype (MXNet's cast_storage)."""
    if not isinstance(data, NDArray):
        raise InvalidArgumentError(f"cast_storage: data must be an NDArray, got "
                                   f"{type(data).__name__}")
    result = to_stype(data, stype)
    if out is not None:
        return result.copyto(out)
    return result


#: The functions of mx.nd.sparse besides the constructors; any other name
#: there is mx.nd's operator of that name.
SPARSE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "cast_storage": cast_storage, "retain": retain, "add": add, "subtract": subtract,
    "multiply": multiply, "divide": divide,
}
