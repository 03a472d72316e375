"""Sparse tensors across the ABI (mxnet_acc.h section 12, ABI 1.2).

A CSR matrix or a row-sparse array reaches a plugin as an ``MXTensor``
whose ``isSparse`` names the storage kind, whose shape and dtype are the
dense array's, and whose data points to a ``SparseTensor`` (CSR) or a
``RowSparseTensor``. Everything is host memory owned by the host and
borrowed by the plugin for the call: :class:`SparseDescriptor` builds the
struct and keeps every array it points to alive.

The host side accepts any object with MXNet's sparse attributes
(``stype`` "csr" with ``data``/``indices``/``indptr``, or "row_sparse" with
``data``/``indices``; each a numpy array or anything with ``asnumpy()``)
and checks every index and length before a plugin sees them, so that a
malformed array is a :class:`~acc_host.errors.TensorError` here, never a
plugin's out-of-bounds read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import TensorError
from . import header
from .header import ffi

__all__ = ["SparseArray", "STYPE_NAMES", "STYPE_CODES", "CsrParts", "RowSparseParts", "SparseParts",
           "sparse_parts", "stype_code", "SparseDescriptor", "accepts_sparse"]

STYPE_NAMES = {header.STORAGE_DENSE: "default", header.STORAGE_CSR: "csr",
               header.STORAGE_ROW_SPARSE: "row_sparse"}
STYPE_CODES = {name: code for code, name in STYPE_NAMES.items()}
_INDEX = np.dtype(np.uint64)


class SparseArray(Protocol):
    """What the host passes for a sparse input: an array with a storage
    type (an NDArray whose ``stype`` is "csr" or "row_sparse", with MXNet's
    ``data``/``indices``/``indptr``); read through :func:`sparse_parts`."""

    @property
    def stype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


def stype_code(stype: str | int) -> int:
    """The isSparse value of a storage type name ("default", "csr",
    "row_sparse") or of a value already."""
    if isinstance(stype, int) and not isinstance(stype, bool) and stype in STYPE_NAMES:
        return stype
    if isinstance(stype, str) and stype in STYPE_CODES:
        return STYPE_CODES[stype]
    raise TensorError(f"storage type {stype!r} is not one of {sorted(STYPE_CODES)}")


def accepts_sparse(library: Any) -> bool:
    """Whether a library may be given sparse tensors and storage
    annotations: built for ABI 1.2 or later and its supportsSparse()
    answered 1 (mxnet_acc.h section 12)."""
    return bool(getattr(library, "supports_sparse", False))


def _host(value: Any, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)):
        return np.asarray(value)
    asnumpy = getattr(value, "asnumpy", None)
    if callable(asnumpy):
        result = asnumpy()
        if isinstance(result, np.ndarray):
            return result
    raise TensorError(f"{what}: expected a numpy array, a list or an NDArray, got "
                      f"{type(value).__name__}")


def _indices(values: np.ndarray, what: str) -> np.ndarray:
    """values as a compact uint64 vector, refusing negative or fractional
    entries rather than wrapping them."""
    if values.ndim != 1:
        raise TensorError(f"{what} must be 1-D, got shape {values.shape}")
    if values.dtype.kind not in "iu":
        raise TensorError(f"{what} must hold integers, got {values.dtype}")
    if values.dtype.kind == "i" and values.size and int(values.min()) < 0:
        raise TensorError(f"{what} holds a negative index {int(values.min())}")
    return np.ascontiguousarray(values, dtype=_INDEX)


@dataclass(frozen=True)
class CsrParts:
    """A checked CSR matrix: data[indptr[r]:indptr[r+1]] are row r's values
    at columns indices[indptr[r]:indptr[r+1]]."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    stype = "csr"

    @property
    def dtype(self) -> np.dtype:
        """The element type (the values')."""
        return self.data.dtype

    @classmethod
    def checked(cls, data: Any, indices: Any, indptr: Any, shape: Any,
                what: str = "csr") -> CsrParts:
        values = np.ascontiguousarray(_host(data, f"{what}.data"))
        shape = tuple(int(extent) for extent in shape)
        if len(shape) != 2 or min(shape) < 0:
            raise TensorError(f"{what}: a CSR matrix has 2 non-negative extents, got {shape}")
        if values.ndim != 1:
            raise TensorError(f"{what}.data must be 1-D, got shape {values.shape}")
        columns = _indices(_host(indices, f"{what}.indices"), f"{what}.indices")
        offsets = _indices(_host(indptr, f"{what}.indptr"), f"{what}.indptr")
        rows, cols = shape
        if offsets.size != rows + 1:
            raise TensorError(f"{what}.indptr has {offsets.size} entries; {rows} rows need "
                              f"{rows + 1}")
        if columns.size != values.size:
            raise TensorError(f"{what}: {columns.size} column indices for {values.size} values")
        if offsets[0] != 0 or offsets[-1] != values.size:
            raise TensorError(f"{what}.indptr must run from 0 to {values.size} (the number of "
                              f"values), runs from {int(offsets[0])} to {int(offsets[-1])}")
        steps = np.diff(offsets.astype(np.int64))
        if steps.size and int(steps.min()) < 0:
            row = int(np.argmax(steps < 0))
            raise TensorError(f"{what}.indptr decreases at row {row} ({int(offsets[row])} > "
                              f"{int(offsets[row + 1])})")
        if columns.size and int(columns.max()) >= cols:
            at = int(np.argmax(columns >= cols))
            raise TensorError(f"{what}.indices[{at}] is {int(columns[at])}, not below the "
                              f"{cols} columns")
        return cls(values, columns, offsets, (rows, cols))

    def dense(self) -> np.ndarray:
        """The dense matrix (numpy only)."""
        out = np.zeros(self.shape, self.data.dtype)
        counts = (self.indptr[1:] - self.indptr[:-1]).astype(np.int64)
        rows = np.repeat(np.arange(self.shape[0]), counts)
        np.add.at(out, (rows, self.indices.astype(np.int64)), self.data)
        return out


@dataclass(frozen=True)
class RowSparseParts:
    """A checked row-sparse array: data[j] is dense row row_ids[j]; the
    other rows are zero."""

    data: np.ndarray
    row_ids: np.ndarray
    shape: tuple[int, ...]

    stype = "row_sparse"

    @property
    def dtype(self) -> np.dtype:
        """The element type (the values')."""
        return self.data.dtype

    @classmethod
    def checked(cls, data: Any, row_ids: Any, shape: Any,
                what: str = "row_sparse") -> RowSparseParts:
        values = np.ascontiguousarray(_host(data, f"{what}.data"))
        shape = tuple(int(extent) for extent in shape)
        if not shape or min(shape) < 0:
            raise TensorError(f"{what}: a row-sparse array has at least one extent, got {shape}")
        ids = _indices(_host(row_ids, f"{what}.indices"), f"{what}.indices")
        if values.shape != (ids.size, *shape[1:]):
            raise TensorError(f"{what}.data has shape {values.shape}; {ids.size} stored rows of "
                              f"{shape} need {(ids.size, *shape[1:])}")
        if ids.size and int(ids.max()) >= shape[0]:
            raise TensorError(f"{what}: row id {int(ids.max())} is not below the {shape[0]} rows")
        if ids.size > 1 and bool(np.any(ids[1:] <= ids[:-1])):
            at = int(np.argmax(ids[1:] <= ids[:-1])) + 1
            raise TensorError(f"{what}: row ids must be strictly increasing; row id {at} is "
                              f"{int(ids[at])} after {int(ids[at - 1])}")
        return cls(values, ids, shape)

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape, self.data.dtype)
        out[self.row_ids.astype(np.int64)] = self.data
        return out


SparseParts = CsrParts | RowSparseParts


def sparse_parts(value: Any, what: str = "tensor") -> SparseParts | None:
    """The checked parts of a sparse array (CsrParts, RowSparseParts, or an
    object with MXNet's sparse attributes); None for anything dense."""
    if isinstance(value, (CsrParts, RowSparseParts)):
        return value
    stype = getattr(value, "stype", None)
    # A host sparse NDArray gives its host arrays themselves (``values`` and
    # ``aux_arrays``, in MXNet's aux order: csr indptr then indices,
    # row_sparse indices); other objects give MXNet's attributes.
    aux = getattr(value, "aux_arrays", None)
    values = getattr(value, "values", None)
    if stype == "csr":
        if isinstance(values, np.ndarray) and isinstance(aux, tuple) and len(aux) == 2:
            return CsrParts.checked(values, aux[1], aux[0], value.shape, what)
        return CsrParts.checked(value.data, value.indices, value.indptr, value.shape, what)
    if stype == "row_sparse":
        if isinstance(values, np.ndarray) and isinstance(aux, tuple) and len(aux) == 1:
            return RowSparseParts.checked(values, aux[0], value.shape, what)
        return RowSparseParts.checked(value.data, value.indices, value.shape, what)
    return None


class SparseDescriptor:
    """The SparseTensor or RowSparseTensor of one sparse array, pointing into
    its (checked, compact) arrays, which this object keeps alive: it must
    outlive every call it is passed to."""

    def __init__(self, parts: SparseParts) -> None:
        self.parts = parts
        keep: list[Any] = []

        def pointer(array: np.ndarray) -> Any:
            if array.size == 0:
                return ffi.NULL
            buffer = ffi.from_buffer(array)
            keep.append(buffer)
            return buffer

        if isinstance(parts, CsrParts):
            self.code = header.STORAGE_CSR
            struct = ffi.new("SparseTensor *")
            struct.data = pointer(parts.data)
            struct.indices = ffi.cast("uint64_t *", pointer(parts.indices))
            struct.indptr = ffi.cast("uint64_t *", pointer(parts.indptr))
            struct.num_nonzero = parts.data.size
            struct.num_rows = parts.shape[0]
        else:
            self.code = header.STORAGE_ROW_SPARSE
            struct = ffi.new("RowSparseTensor *")
            struct.data = pointer(parts.data)
            struct.row_ids = ffi.cast("uint64_t *", pointer(parts.row_ids))
            struct.num_rows_stored = parts.row_ids.size
        self.struct = struct
        self._keep = keep

    @property
    def pointer(self) -> Any:
        """The struct's address, as MXTensor.data."""
        return ffi.cast("void *", self.struct)
