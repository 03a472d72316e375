"""Sparse arrays in MXNet NDArray-list files (``.params``).

MXNet 1.x writes a CSR or row_sparse array as a version 2 array record (see
:mod:`acc_host.ndarray.params_file`) whose storage type is 2 (csr) or 1
(row_sparse); its "aux" arrays are the index arrays. Every integer is
little-endian, shapes are int32 ndim then ndim x int64:

    ====================  =====================================================
    uint32                version magic (``0xF993FAC9``)
    int32                 storage type: 1 row_sparse, 2 csr
    shape                 storage shape: the shape of the stored values,
                          ``(nnz,)`` for csr, ``(rows stored,) + shape[1:]``
                          for row_sparse
    shape                 the array's shape
    int32, int32          context: device type, device id
    int32                 element type flag of the values
    per aux array:        csr: indptr then indices; row_sparse: indices
      int32                 its type flag (6, int64, as MXNet writes)
      shape                 its shape
    bytes                 the values, prod(storage shape) x itemsize
    per aux array:        its elements, in the order above
    ====================  =====================================================

The record takes the array's place in the list; names and the list header
are as for dense arrays. A file may mix dense and sparse arrays.

Reading checks every field against the bytes left before allocating, and
the components against each other (:func:`acc_host.ndarray.sparse.check_csr`
without the order of columns within a row, which MXNet itself does not keep
after ``csr + csr``). MXNet may store more CSR values than ``indptr[-1]``
(an operator's over-allocation); those trailing values are dropped. Writing
gives MXNet 1.9.1's bytes (tests/nd/test_sparse_params.py compares with
files MXNet wrote).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelFileError

__all__ = ["SparseRecord", "STORAGE_CODES", "AUX_COUNT", "read_record", "encode_record"]

#: Storage type codes of the sparse records.
STORAGE_CODES = {"row_sparse": 1, "csr": 2}
_STYPE_BY_CODE = {code: name for name, code in STORAGE_CODES.items()}
#: How many aux (index) arrays each storage type has.
AUX_COUNT = {"row_sparse": 1, "csr": 2}
_AUX_NAMES = {"row_sparse": ("indices",), "csr": ("indptr", "indices")}
_INDEX_KINDS = "iu"


@dataclass(frozen=True)
class SparseRecord:
    """One sparse array of a file: storage type, shape, the stored values
    and the aux arrays in MXNet's order (csr: indptr, indices; row_sparse:
    indices)."""

    stype: str
    shape: tuple[int, ...]
    values: np.ndarray
    aux: tuple[np.ndarray, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)


# ---- reading ----------------------------------------------------------------------------


def read_record(reader: Any, label: str, code: int, version: int, start: int,
                read_shape: Any, read_dtype: Any, read_elements: Any) -> SparseRecord:
    """The rest of a sparse record whose storage type code has been read.
    reader, read_shape, read_dtype and read_elements are params_file's
    cursor and field readers (passed in: this module does not import it)."""
    stype = _STYPE_BY_CODE[code]
    storage_shape = read_shape(reader, f"{label}: storage shape", version)
    shape = read_shape(reader, f"{label}: shape", version)
    reader.unpack("<ii", f"{label}: context")
    dtype = read_dtype(reader, label)
    aux_specs = []
    for name in _AUX_NAMES[stype]:
        aux_dtype = read_dtype(reader, f"{label}: {name}")
        if aux_dtype.kind not in _INDEX_KINDS:
            raise reader.error(f"{label}: {name} has element type {aux_dtype}, not an integer "
                               "type")
        aux_specs.append((name, read_shape(reader, f"{label}: {name} shape", version),
                          aux_dtype))
    values = read_elements(reader, f"{label}: values", storage_shape, dtype)
    aux = tuple(read_elements(reader, f"{label}: {name}", aux_shape, aux_dtype)
                .astype(np.int64, copy=False) for name, aux_shape, aux_dtype in aux_specs)
    try:
        return _checked(stype, shape, values, aux)
    except ValueError as error:
        raise reader.error(f"{label}: {stype} array: {error}", start) from None


def _checked(stype: str, shape: tuple[int, ...], values: np.ndarray,
             aux: tuple[np.ndarray, ...]) -> SparseRecord:
    """The record, after the checks MXNet's format implies (ValueError)."""
    if any(array.ndim != 1 for array in aux):
        raise ValueError("index arrays must be 1-D")
    if stype == "csr":
        indptr, indices = aux
        if len(shape) != 2:
            raise ValueError(f"shape {shape} is not 2-D")
        if values.ndim != 1:
            raise ValueError(f"values of shape {values.shape} are not 1-D")
        if indptr.shape[0] != shape[0] + 1:
            raise ValueError(f"indptr has {indptr.shape[0]} entries for {shape[0]} rows")
        if indptr.shape[0] and (indptr[0] != 0 or np.any(np.diff(indptr) < 0)):
            raise ValueError("indptr does not start at 0 and never decrease")
        nnz = int(indptr[-1]) if indptr.shape[0] else 0
        if nnz > min(indices.shape[0], values.shape[0]):
            raise ValueError(f"indptr ends at {nnz}, beyond the {indices.shape[0]} indices and "
                             f"{values.shape[0]} values stored")
        indices, values = indices[:nnz], values[:nnz]
        if np.any((indices < 0) | (indices >= shape[1])):
            raise ValueError(f"an index is out of range for {shape[1]} columns")
        return SparseRecord(stype, shape, values, (indptr, indices))
    (indices,) = aux
    if not shape:
        raise ValueError("a row_sparse array needs at least one dimension")
    if values.shape != (indices.shape[0], *shape[1:]):
        raise ValueError(f"values of shape {values.shape} for {indices.shape[0]} rows of "
                         f"shape {shape}")
    if np.any((indices < 0) | (indices >= shape[0])) or np.any(np.diff(indices) <= 0):
        raise ValueError(f"row indices are not strictly increasing in [0, {shape[0]})")
    return SparseRecord(stype, shape, values, aux)


# ---- writing ----------------------------------------------------------------------------


def _shape_bytes(shape: tuple[int, ...]) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def encode_record(record: SparseRecord, magic: int, flag_of: Any,
                  cpu_device_type: int) -> Iterator[bytes | memoryview]:
    """The bytes of one sparse record as MXNet writes it. flag_of maps a
    numpy dtype to MXNet's type flag (params_file's)."""
    if record.stype not in STORAGE_CODES:
        raise ModelFileError(f"cannot save storage type {record.stype!r}")
    values = np.ascontiguousarray(record.values, dtype=record.values.dtype.newbyteorder("<"))
    aux = [np.ascontiguousarray(array, dtype="<i8") for array in record.aux]
    header = [struct.pack("<Ii", magic, STORAGE_CODES[record.stype]),
              _shape_bytes(tuple(values.shape)), _shape_bytes(record.shape),
              struct.pack("<iii", cpu_device_type, 0, flag_of(values.dtype))]
    for array in aux:
        header.append(struct.pack("<i", flag_of(array.dtype)))
        header.append(_shape_bytes(tuple(array.shape)))
    yield b"".join(header)
    yield values.reshape(-1).view(np.uint8).data
    for array in aux:
        yield array.view(np.uint8).data
