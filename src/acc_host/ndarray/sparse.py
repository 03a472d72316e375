"""Sparse NDArrays (``mx.nd.sparse``): CSR and row-sparse storage.

MXNet 1.x has two sparse storage types besides the dense ("default") one:

``csr`` (:class:`CSRNDArray`, 2-D only)
    ``data`` (nnz values), ``indices`` (nnz column indices, strictly
    increasing within a row) and ``indptr`` (rows + 1 offsets, starting at 0,
    non-decreasing, ending at nnz): row ``i`` holds ``data[indptr[i]:
    indptr[i+1]]`` at columns ``indices[indptr[i]:indptr[i+1]]``.
``row_sparse`` (:class:`RowSparseNDArray`, any rank >= 1)
    ``indices`` (strictly increasing row numbers) and ``data`` of shape
    ``(len(indices),) + shape[1:]``: the rows that are stored; every other
    row is zero.

The components live in host memory as numpy arrays (indices and indptr are
int64, as in MXNet) on every context; the context is the array's label, as
for a dense array. A sparse array is an :class:`~acc_host.ndarray.NDArray`:
an operator without a sparse implementation reads it as its dense value
(MXNet's storage fallback) and gives dense results; the operators with
MXNet's sparse rules are in :mod:`acc_host.ndarray.sparse_ops`. Components
are validated when an array is made: a wrong shape, an index out of range or
out of order, or an ``indptr`` that decreases is a
:class:`~acc_host.errors.TensorError` naming the component and position.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .. import limits
from ..abi.tensor import TensorSpec
from ..context import Context, cpu, current_context
from ..errors import InvalidArgumentError, MissingDependencyError, TensorError
from . import NDArray, _Storage
from .params_sparse import SparseRecord

__all__ = [
    "INDEX_DTYPE", "BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray",
    "csr_matrix", "row_sparse_array", "zeros", "empty", "array", "to_stype", "to_record",
    "from_record", "make_csr", "make_row_sparse", "check_csr", "check_row_sparse",
    "is_scipy_sparse",
]

#: The dtype of indices and indptr (MXNet's int64).
INDEX_DTYPE = np.dtype(np.int64)
_DEFAULT_DTYPE = np.dtype(np.float32)


class BaseSparseNDArray(NDArray):
    """A sparse array: a value array and its index arrays in host memory.

    Sparse arrays are not written in place by operators (``out=`` and item
    assignment take a whole new value); each keeps its own version, bumped
    by every such write."""

    __slots__ = ("_shape", "_values", "_aux", "_sparse_version")

    _STYPE = "undefined"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise InvalidArgumentError(f"{type(self).__name__} is made by mx.nd.sparse.csr_matrix, "
                                   "row_sparse_array, zeros or tostype, not called directly")

    def _init_sparse(self, shape: tuple[int, ...], values: np.ndarray,
                     aux: tuple[np.ndarray, ...], ctx: Context | None) -> None:
        self._ctx = ctx if ctx is not None else cpu()
        self._shape = shape
        self._values = values
        self._aux = aux
        self._sparse_version = 0
        self._view = None
        self._storage = _Storage(None)
        self._storage.spec = (shape, values.dtype)

    # ---- what the dense machinery reads ----------------------------------------------

    def _read(self) -> np.ndarray:
        """The dense value (the storage fallback of dense operators)."""
        return self._dense()

    def _spec_hint(self) -> tuple[tuple[int, ...], np.dtype]:
        return self._shape, self._values.dtype

    @property
    def _device_storage(self) -> Any:
        return None

    def _write_now(self, values: np.ndarray) -> None:
        self._replace_with(np.asarray(values))

    def _write(self, values: np.ndarray) -> None:
        self._replace_with(np.asarray(values))

    def _assign(self, source: NDArray) -> None:
        self._replace_with(source)

    def _replace_with(self, source: Any) -> None:
        """Takes over the value of source (any storage, same shape), in this
        array's storage type and dtype."""
        shape = tuple(source.shape)
        if shape != self._shape:
            raise TensorError(f"cannot write an array of shape {shape} into a {self.stype} "
                              f"array of shape {self._shape}")
        converted = to_stype(source, self.stype, dtype=self.dtype)
        assert isinstance(converted, BaseSparseNDArray)
        self._values, self._aux = converted._values, converted._aux
        self._sparse_version += 1

    # ---- properties ------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._values.dtype

    @property
    def stype(self) -> str:
        return self._STYPE

    @property
    def version(self) -> int:
        return self._sparse_version

    @property
    def data(self) -> NDArray:
        """The stored values (sharing memory with the array)."""
        return NDArray(self._values, self._ctx)

    @property
    def indices(self) -> NDArray:
        """The stored indices, int64 (sharing memory with the array)."""
        return NDArray(self._aux[-1], self._ctx)

    @property
    def nnz(self) -> int:
        """How many values are stored (rows, for row_sparse)."""
        return int(self._aux[-1].shape[0])

    @property
    def aux_arrays(self) -> tuple[np.ndarray, ...]:
        """The index arrays in MXNet's aux order (csr: indptr, indices;
        row_sparse: indices), as host arrays."""
        return self._aux

    @property
    def values(self) -> np.ndarray:
        """The stored values as a host array (``data`` without the copy
        into an NDArray)."""
        return self._values

    # ---- conversion ------------------------------------------------------------------

    def _dense(self) -> np.ndarray:
        raise NotImplementedError

    def asnumpy(self) -> np.ndarray:
        """The dense value, a new host array."""
        return self._dense()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        dense = self._dense()
        return dense if dtype is None else dense.astype(dtype)

    def wait_to_read(self) -> None:
        """Sparse arrays are computed when they are made: nothing to wait for."""

    def tostype(self, stype: str) -> NDArray:
        """This array in storage type stype ('default', 'csr', 'row_sparse')."""
        return to_stype(self, stype)

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        dtype = np.dtype(dtype)
        if not copy and dtype == self.dtype:
            return self
        return self._with_values(self._values.astype(dtype))

    def copy(self) -> NDArray:
        return self._with_values(self._values.copy(), copy_aux=True)

    def copyto(self, other: NDArray | Context) -> NDArray:
        """A copy on a context, or the value written into other (converted
        to other's storage type and dtype, as MXNet does)."""
        if isinstance(other, Context):
            result = self._with_values(self._values.copy(), copy_aux=True)
            result._ctx = other
            return result
        if not isinstance(other, NDArray):
            raise InvalidArgumentError(f"copyto: expected an NDArray or a Context, got "
                                       f"{type(other).__name__}")
        if other is self:
            return self
        if isinstance(other, BaseSparseNDArray):
            other._replace_with(self)
        else:
            if other.shape != self._shape:
                raise TensorError(f"copyto: shape {self._shape} into an array of shape "
                                  f"{other.shape}")
            other._write(self._dense().astype(other.dtype, copy=False))
        return other

    def as_in_context(self, context: Context) -> NDArray:
        return self if context == self._ctx else self.copyto(context)

    def _with_values(self, values: np.ndarray, copy_aux: bool = False) -> BaseSparseNDArray:
        aux = tuple(array.copy() for array in self._aux) if copy_aux else self._aux
        result = type(self).__new__(type(self))
        result._init_sparse(self._shape, values, aux, self._ctx)
        return result

    def _binary(self, other: Any, op: str, scalar_op: str) -> NDArray:
        from .sparse_ops import binary_operator  # (sparse_ops imports this module)

        return binary_operator(self, other, op, scalar_op)

    def reshape(self, *shape: Any, **kwargs: Any) -> NDArray:
        raise InvalidArgumentError(f"reshape: not supported for {self.stype} arrays "
                                   "(convert with tostype('default') first)")

    def __setitem__(self, key: Any, value: Any) -> None:
        """Only ``x[:] = value`` (the whole array) is supported, as in MXNet."""
        if not (isinstance(key, slice) and key == slice(None)):
            raise InvalidArgumentError(f"{self.stype} arrays support assignment to x[:] only, "
                                       f"not x[{key!r}]")
        if isinstance(value, numbers.Number):
            if value == 0:
                self._replace_with(zeros(self.stype, self._shape, dtype=self.dtype))
                return
            raise InvalidArgumentError(f"{self.stype} x[:] = {value!r}: only 0 keeps the "
                                       "storage sparse; assign an array instead")
        if isinstance(value, NDArray):
            self._replace_with(value)
            return
        self._replace_with(np.asarray(value, dtype=self.dtype))

    def __repr__(self) -> str:
        shape = "x".join(map(str, self._shape))
        return f"\n<{type(self).__name__} {shape} @{self._ctx}>"

    def __reduce__(self) -> Any:
        return (_rebuild, (self.stype, self._shape, self._values, self._aux))


def _rebuild(stype: str, shape: tuple[int, ...], values: np.ndarray,
             aux: tuple[np.ndarray, ...]) -> BaseSparseNDArray:
    cls: type[BaseSparseNDArray] = CSRNDArray if stype == "csr" else RowSparseNDArray
    result = cls.__new__(cls)
    result._init_sparse(shape, values, aux, None)
    return result


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row storage."""

    __slots__ = ()
    _STYPE = "csr"

    @property
    def indptr(self) -> NDArray:
        """Row offsets into data and indices, int64 (rows + 1 entries)."""
        return NDArray(self._aux[0], self._ctx)

    def _dense(self) -> np.ndarray:
        indptr, indices = self._aux
        dense = np.zeros(self._shape, dtype=self._values.dtype)
        rows = np.repeat(np.arange(self._shape[0], dtype=np.int64), np.diff(indptr))
        dense[rows, indices] = self._values
        return dense

    def asscipy(self) -> Any:
        """A ``scipy.sparse.csr_matrix`` with copies of the components (needs
        scipy: ``pip install "acc-host[scipy]"``)."""
        sparse = _scipy_sparse("asscipy")
        indptr, indices = self._aux
        return sparse.csr_matrix((self._values.copy(), indices.copy(), indptr.copy()),
                                 shape=self._shape)

    def __getitem__(self, key: Any) -> NDArray:
        """Rows: ``x[i]`` (one row, as a 1-row CSR array) and ``x[a:b]``
        (step 1), as in MXNet."""
        from .sparse_ops import slice_csr

        rows = self._shape[0]
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            index = int(key)
            begin = index + rows if index < 0 else index
            if not 0 <= begin < rows:
                raise InvalidArgumentError(f"index {index} is out of range for a CSR array "
                                           f"of {rows} rows")
            return slice_csr(self, (begin,), (begin + 1,))
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise InvalidArgumentError("CSR arrays support slicing with step 1 only, "
                                           f"not {key.step}")
            begin, end, _ = key.indices(rows)
            return slice_csr(self, (begin,), (max(begin, end),))
        raise InvalidArgumentError(f"CSR arrays support row indexing (x[i], x[a:b]) only, "
                                   f"not x[{key!r}]")


class RowSparseNDArray(BaseSparseNDArray):
    """An array of which only some rows (first-axis slices) are stored."""

    __slots__ = ()
    _STYPE = "row_sparse"

    def _dense(self) -> np.ndarray:
        dense = np.zeros(self._shape, dtype=self._values.dtype)
        dense[self._aux[0]] = self._values
        return dense

    def __getitem__(self, key: Any) -> NDArray:
        if isinstance(key, slice) and key == slice(None):
            return self
        raise InvalidArgumentError(f"row_sparse arrays support x[:] only, not x[{key!r}] "
                                   "(use retain to select rows)")


# ---- validation --------------------------------------------------------------------------


def _check_storage(stype: str) -> str:
    if stype not in ("default", "csr", "row_sparse"):
        raise InvalidArgumentError(f"unknown storage type {stype!r} (expected 'default', "
                                   "'csr' or 'row_sparse')")
    return stype


def _shape_of(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    try:
        result = tuple(int(extent) for extent in shape)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what}: shape {shape!r} is not a tuple of integers") \
            from None
    if any(extent < 0 for extent in result):
        raise InvalidArgumentError(f"{what}: negative extent in shape {result}")
    return result


def _index_array(source: Any, what: str) -> np.ndarray:
    values = _host(source)
    if values.ndim != 1:
        raise TensorError(f"{what} must be 1-D, got shape {values.shape}")
    if values.size and values.dtype.kind not in "iub":
        if values.dtype.kind == "f" and np.all(np.equal(np.mod(values, 1), 0)):
            return values.astype(INDEX_DTYPE)
        raise TensorError(f"{what} must hold integers, got dtype {values.dtype}")
    return np.ascontiguousarray(values, dtype=INDEX_DTYPE)


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_csr(shape: tuple[int, ...], values: np.ndarray, indptr: np.ndarray,
              indices: np.ndarray) -> None:
    """Raises TensorError unless the components describe a valid CSR array
    of shape (MXNet's check_format with full_check)."""
    if len(shape) != 2:
        raise TensorError(f"csr arrays are 2-D, got shape {shape}")
    rows, cols = shape
    if values.ndim != 1:
        raise TensorError(f"csr data must be 1-D, got shape {values.shape}")
    if indptr.shape[0] != rows + 1:
        raise TensorError(f"csr indptr has {indptr.shape[0]} entries, a {rows}-row array "
                          f"needs {rows + 1}")
    if indptr[0] != 0:
        raise TensorError(f"csr indptr must start at 0, starts at {int(indptr[0])}")
    steps = np.diff(indptr)
    if np.any(steps < 0):
        at = _first_bad(steps < 0)
        raise TensorError(f"csr indptr must be non-decreasing: indptr[{at}] = "
                          f"{int(indptr[at])} > indptr[{at + 1}] = {int(indptr[at + 1])}")
    nnz = int(indptr[-1])
    if indices.shape[0] != nnz or values.shape[0] != nnz:
        raise TensorError(f"csr indptr ends at {nnz}, but there are {indices.shape[0]} indices "
                          f"and {values.shape[0]} values")
    bad = (indices < 0) | (indices >= cols)
    if np.any(bad):
        at = _first_bad(bad)
        raise TensorError(f"csr indices[{at}] = {int(indices[at])} is out of range for "
                          f"{cols} columns")
    if nnz > 1:
        row_start = np.zeros(nnz, dtype=bool)
        row_start[indptr[1:-1][indptr[1:-1] < nnz]] = True
        unordered = (np.diff(indices) <= 0) & ~row_start[1:]
        if np.any(unordered):
            at = _first_bad(unordered)
            raise TensorError(f"csr indices must be strictly increasing within a row: "
                              f"indices[{at}] = {int(indices[at])}, indices[{at + 1}] = "
                              f"{int(indices[at + 1])}")


def check_row_sparse(shape: tuple[int, ...], values: np.ndarray, indices: np.ndarray) -> None:
    """Raises TensorError unless the components describe a valid row_sparse
    array of shape."""
    if not shape:
        raise TensorError("row_sparse arrays have at least one dimension")
    expected = (indices.shape[0], *shape[1:])
    if values.shape != expected:
        raise TensorError(f"row_sparse data has shape {values.shape}, {indices.shape[0]} rows "
                          f"of an array of shape {shape} need {expected}")
    bad = (indices < 0) | (indices >= shape[0])
    if np.any(bad):
        at = _first_bad(bad)
        raise TensorError(f"row_sparse indices[{at}] = {int(indices[at])} is out of range "
                          f"for {shape[0]} rows")
    unordered = np.diff(indices) <= 0
    if np.any(unordered):
        at = _first_bad(unordered)
        raise TensorError(f"row_sparse indices must be strictly increasing: indices[{at}] = "
                          f"{int(indices[at])}, indices[{at + 1}] = {int(indices[at + 1])}")


# ---- construction ------------------------------------------------------------------------


def _host(source: Any) -> np.ndarray:
    if isinstance(source, NDArray):
        return source.asnumpy()
    return np.asarray(source)


def _value_dtype(source: Any, dtype: Any) -> np.dtype:
    """MXNet's default: the source's dtype for arrays, float32 otherwise."""
    if dtype is not None:
        return np.dtype(dtype)
    if isinstance(source, (NDArray, np.ndarray)) or is_scipy_sparse(source):
        return np.dtype(source.dtype)
    return _DEFAULT_DTYPE


def _values_array(source: Any, dtype: np.dtype) -> np.ndarray:
    values = np.array(_host(source), dtype=dtype, copy=True, order="C")
    TensorSpec.of(values)  # refuses dtypes no plugin can hold
    return values


def make_csr(shape: tuple[int, ...], values: np.ndarray, indptr: np.ndarray,
             indices: np.ndarray, ctx: Context | None = None,
             check: bool = True) -> CSRNDArray:
    """A CSRNDArray taking over the given host components (validated unless
    check is False: for components an operator made)."""
    if check:
        check_csr(shape, values, indptr, indices)
    result = CSRNDArray.__new__(CSRNDArray)
    result._init_sparse(shape, values, (indptr, indices), ctx)
    return result


def make_row_sparse(shape: tuple[int, ...], values: np.ndarray, indices: np.ndarray,
                    ctx: Context | None = None, check: bool = True) -> RowSparseNDArray:
    """A RowSparseNDArray taking over the given host components."""
    if check:
        check_row_sparse(shape, values, indices)
    result = RowSparseNDArray.__new__(RowSparseNDArray)
    result._init_sparse(shape, values, (indices,), ctx)
    return result


def is_scipy_sparse(source: Any) -> bool:
    """Whether source is a scipy.sparse matrix (without importing scipy)."""
    module = type(source).__module__
    return module.startswith("scipy.sparse") and hasattr(source, "tocsr")


def _scipy_sparse(what: str) -> Any:
    try:
        import scipy.sparse as sparse  # (optional: only when asked for)
    except ImportError:
        raise MissingDependencyError(f"{what} needs scipy, which is not installed: "
                                     'pip install "acc-host[scipy]"') from None
    return sparse


def csr_matrix(arg1: Any, shape: Any = None, ctx: Context | None = None,
               dtype: Any = None) -> CSRNDArray:
    """A CSRNDArray, as MXNet's ``mx.nd.sparse.csr_matrix``, from

    - ``(data, indices, indptr)``: the CSR components;
    - ``(data, (row, col))``: coordinates (duplicates are summed);
    - ``(M, N)``: a shape, giving an all-zero array;
    - a dense numpy array or NDArray (zeros are dropped), a CSRNDArray, or a
      ``scipy.sparse`` matrix.

    shape is inferred from the indices when not given."""
    ctx = ctx if ctx is not None else current_context()
    given = None if shape is None else _shape_of(shape, "csr_matrix")
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices_source, indptr_source = arg1
        values = _values_array(data, _value_dtype(data, dtype))
        indices = _index_array(indices_source, "csr indices")
        indptr = _index_array(indptr_source, "csr indptr")
        if given is None:
            if indptr.shape[0] == 0:
                raise TensorError("csr indptr is empty: it needs rows + 1 entries")
            cols = int(indices.max()) + 1 if indices.size else 0
            given = (indptr.shape[0] - 1, cols)
        return make_csr(given, values.reshape(-1) if values.ndim == 0 else values,
                        indptr, indices, ctx)
    if isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple):
        data, coordinates = arg1
        if len(coordinates) != 2:
            raise InvalidArgumentError("csr_matrix((data, (row, col))): expected two "
                                       f"coordinate arrays, got {len(coordinates)}")
        return _csr_from_coo(data, coordinates, given, ctx, dtype)
    if isinstance(arg1, tuple) and all(isinstance(extent, numbers.Integral) for extent in arg1):
        if given is not None and given != _shape_of(arg1, "csr_matrix"):
            raise InvalidArgumentError(f"csr_matrix: shape {arg1} and shape={given} differ")
        return zeros("csr", arg1, ctx=ctx, dtype=dtype)  # type: ignore[return-value]
    if is_scipy_sparse(arg1):
        source = arg1.tocsr()
        source.sort_indices()
        source.sum_duplicates()
        values = _values_array(source.data, _value_dtype(arg1, dtype))
        result = make_csr(tuple(source.shape), values, np.array(source.indptr, dtype=INDEX_DTYPE),
                          np.array(source.indices, dtype=INDEX_DTYPE), ctx)
        _check_given(result, given, "csr_matrix")
        return result
    if isinstance(arg1, (NDArray, np.ndarray, list)):
        converted = to_stype(arg1, "csr", dtype=_value_dtype(arg1, dtype))
        assert isinstance(converted, CSRNDArray)
        converted._ctx = ctx
        _check_given(converted, given, "csr_matrix")
        return converted
    raise InvalidArgumentError(f"csr_matrix: cannot make a CSR array from "
                               f"{type(arg1).__name__}")


def _check_given(result: NDArray, given: tuple[int, ...] | None, what: str) -> None:
    if given is not None and result.shape != given:
        raise TensorError(f"{what}: the source has shape {result.shape}, shape={given} given")


def _csr_from_coo(data: Any, coordinates: tuple[Any, Any], shape: tuple[int, ...] | None,
                  ctx: Context, dtype: Any) -> CSRNDArray:
    values = _values_array(data, _value_dtype(data, dtype))
    row = _index_array(coordinates[0], "coo row")
    col = _index_array(coordinates[1], "coo col")
    if not values.shape[0] == row.shape[0] == col.shape[0] or values.ndim != 1:
        raise TensorError(f"coo data, row and col must be 1-D of one length, got "
                          f"{values.shape}, {row.shape} and {col.shape}")
    if shape is None:
        shape = (int(row.max()) + 1 if row.size else 0, int(col.max()) + 1 if col.size else 0)
    if len(shape) != 2:
        raise TensorError(f"csr arrays are 2-D, got shape {shape}")
    for name, index, extent in (("row", row, shape[0]), ("col", col, shape[1])):
        bad = (index < 0) | (index >= extent)
        if np.any(bad):
            at = _first_bad(bad)
            raise TensorError(f"coo {name}[{at}] = {int(index[at])} is out of range for "
                              f"extent {extent}")
    order = np.lexsort((col, row))
    row, col, values = row[order], col[order], values[order]
    if row.size:
        first = np.ones(row.shape[0], dtype=bool)
        first[1:] = (row[1:] != row[:-1]) | (col[1:] != col[:-1])
        starts = np.flatnonzero(first)
        values = np.add.reduceat(values, starts).astype(values.dtype, copy=False)
        row, col = row[starts], col[starts]
    indptr = np.zeros(shape[0] + 1, dtype=INDEX_DTYPE)
    np.cumsum(np.bincount(row, minlength=shape[0]), out=indptr[1:])
    return make_csr(shape, values, indptr, col, ctx)


def row_sparse_array(arg1: Any, shape: Any = None, ctx: Context | None = None,
                     dtype: Any = None) -> RowSparseNDArray:
    """A RowSparseNDArray, as MXNet's ``mx.nd.sparse.row_sparse_array``,
    from ``(data, indices)`` (the stored rows and their row numbers), a
    shape (all zeros), a dense numpy array or NDArray (all-zero rows are
    dropped) or another RowSparseNDArray."""
    ctx = ctx if ctx is not None else current_context()
    given = None if shape is None else _shape_of(shape, "row_sparse_array")
    if isinstance(arg1, tuple) and len(arg1) == 2 and not all(
            isinstance(extent, numbers.Integral) for extent in arg1):
        data, indices_source = arg1
        values = _values_array(data, _value_dtype(data, dtype))
        indices = _index_array(indices_source, "row_sparse indices")
        if given is None:
            if values.ndim == 0:
                raise TensorError("row_sparse data must have at least one dimension")
            rows = int(indices.max()) + 1 if indices.size else 0
            given = (rows, *values.shape[1:])
        return make_row_sparse(given, values, indices, ctx)
    if isinstance(arg1, tuple):
        if given is not None and given != _shape_of(arg1, "row_sparse_array"):
            raise InvalidArgumentError(f"row_sparse_array: shape {arg1} and shape={given} "
                                       "differ")
        return zeros("row_sparse", arg1, ctx=ctx, dtype=dtype)  # type: ignore[return-value]
    if isinstance(arg1, (NDArray, np.ndarray, list)):
        result = to_stype(arg1, "row_sparse", dtype=_value_dtype(arg1, dtype))
        assert isinstance(result, RowSparseNDArray)
        result._ctx = ctx
        _check_given(result, given, "row_sparse_array")
        return result
    raise InvalidArgumentError(f"row_sparse_array: cannot make a row_sparse array from "
                               f"{type(arg1).__name__}")


def zeros(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None,
          **kwargs: Any) -> NDArray:
    """An all-zero array of storage type stype (nothing stored)."""
    _check_storage(stype)
    dims = _shape_of(shape, "zeros")
    value_dtype = np.dtype(dtype) if dtype is not None else _DEFAULT_DTYPE
    ctx = ctx if ctx is not None else current_context()
    if stype == "default":
        limits.check_array(dims, value_dtype, "an array")
        return NDArray(np.zeros(dims, dtype=value_dtype), ctx)
    if stype == "csr":
        if len(dims) != 2:
            raise TensorError(f"csr arrays are 2-D, got shape {dims}")
        return make_csr(dims, np.zeros(0, value_dtype), np.zeros(dims[0] + 1, INDEX_DTYPE),
                        np.zeros(0, INDEX_DTYPE), ctx)
    if not dims:
        raise TensorError("row_sparse arrays have at least one dimension")
    return make_row_sparse(dims, np.zeros((0, *dims[1:]), value_dtype),
                           np.zeros(0, INDEX_DTYPE), ctx)


def empty(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """As :func:`zeros` (a sparse array with nothing stored is all zeros)."""
    return zeros(stype, shape, ctx=ctx, dtype=dtype)


def array(source_array: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A sparse array from a sparse source (CSRNDArray, RowSparseNDArray or
    a scipy.sparse matrix, which gives CSR), as MXNet's ``mx.nd.sparse.array``."""
    if isinstance(source_array, CSRNDArray) or is_scipy_sparse(source_array):
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    if isinstance(source_array, RowSparseNDArray):
        return row_sparse_array(source_array, ctx=ctx, dtype=dtype)
    raise InvalidArgumentError(f"sparse.array: expected a sparse array or a scipy.sparse "
                               f"matrix, got {type(source_array).__name__}")


# ---- storage conversion ------------------------------------------------------------------


def to_stype(source: Any, stype: str, dtype: Any = None) -> NDArray:
    """source (a dense or sparse NDArray, or anything numpy reads) in storage
    type stype, as MXNet's cast_storage: zeros (and all-zero rows, for
    row_sparse) are not stored. Returns source itself when nothing changes."""
    _check_storage(stype)
    ctx = source.context if isinstance(source, NDArray) else current_context()
    if isinstance(source, BaseSparseNDArray):
        if source.stype == stype and (dtype is None or np.dtype(dtype) == source.dtype):
            return source
        if source.stype == stype:
            return source.astype(dtype)
    dense = _host(source)
    if dtype is not None:
        dense = dense.astype(dtype, copy=False)
    elif not isinstance(source, (NDArray, np.ndarray)):
        dense = dense.astype(_DEFAULT_DTYPE, copy=False)
    if stype == "default":
        if isinstance(source, NDArray) and not isinstance(source, BaseSparseNDArray) \
                and dense.dtype == source.dtype:
            return source
        return NDArray(np.array(dense, copy=True, order="C"), ctx)
    if stype == "csr":
        if dense.ndim != 2:
            raise TensorError(f"cast_storage: csr arrays are 2-D, got shape {dense.shape}")
        mask = dense != 0
        indptr = np.zeros(dense.shape[0] + 1, dtype=INDEX_DTYPE)
        np.cumsum(mask.sum(axis=1), out=indptr[1:])
        indices = np.nonzero(mask)[1].astype(INDEX_DTYPE)
        return make_csr(tuple(dense.shape), np.ascontiguousarray(dense[mask]), indptr,
                        indices, ctx, check=False)
    if dense.ndim == 0:
        raise TensorError("cast_storage: row_sparse arrays have at least one dimension")
    kept = np.flatnonzero(dense.reshape(dense.shape[0], -1).any(axis=1)) if dense.shape[0] \
        else np.zeros(0, INDEX_DTYPE)
    return make_row_sparse(tuple(dense.shape), np.ascontiguousarray(dense[kept]),
                           kept.astype(INDEX_DTYPE), ctx, check=False)


def to_record(array: NDArray) -> SparseRecord:
    """A sparse array as params_file writes it."""
    if not isinstance(array, BaseSparseNDArray):
        raise InvalidArgumentError(f"expected a sparse array, got {array.stype} storage")
    return SparseRecord(array.stype, array.shape, array.values, array.aux_arrays)


def from_record(record: SparseRecord, ctx: Context | None = None) -> BaseSparseNDArray:
    """The sparse array of a record params_file read (components checked
    there; copied here, so the array owns them)."""
    values = np.array(record.values, copy=True)
    aux = tuple(np.array(array, dtype=INDEX_DTYPE, copy=True) for array in record.aux)
    if record.stype == "csr":
        return make_csr(record.shape, values, aux[0], aux[1], ctx, check=False)
    return make_row_sparse(record.shape, values, aux[0], ctx, check=False)


def __getattr__(name: str) -> Any:
    """mx.nd.sparse.<name>: the sparse functions (dot, add, retain, ...), then
    mx.nd's operators, which take sparse inputs."""
    from . import sparse_ops

    if name in sparse_ops.SPARSE_FUNCTIONS:
        return sparse_ops.SPARSE_FUNCTIONS[name]
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .. import ndarray

    return getattr(ndarray, name)
