"""Turning the cffi arguments of one ABI call into plain data for the
plugin process, and its answers back.

Strings and string arrays are sent by value. An ``MXTensor`` is sent as
``[data, shape, shape_len, dtype, isSparse, layout, dev_id]`` where data is None (a
NULL pointer, or a descriptor whose data the plugin must not read), an int
(accelerator memory: the child's own address, passed back as it is) or
``(segment id, offset)`` (host memory the child maps), or, for a sparse
tensor (ABI 1.2: isSparse 1 CSR or 2 row-sparse, always host memory), a
dict ``{"sparse": isSparse, "arrays": [...], "counts": [...]}``: its
arrays (CSR data, indices, indptr; row-sparse data, row ids), each sent as
host memory is, and the struct's counts (num_nonzero and num_rows;
num_rows_stored), from which the child rebuilds the struct. Host memory inside a
shared array's segment is sent as it is; any other host memory is copied
into the channel's staging segment before the call and, for the tensors the
plugin writes, copied back after it (:class:`CallMemory`).

Guards: in the staging segment every tensor is followed by GUARD_BYTES
filled with a pattern, checked after the call; a plugin that wrote past
the end of one tensor (into the next, in a plain layout) is caught there
and the call fails with :class:`GuardError`, naming the tensor, before
anything is copied back.
"""

from __future__ import annotations

from typing import Any

from ..abi import cdata, header
from ..abi.tensor import numpy_dtype
from ..errors import TensorError
from . import shared

__all__ = ["CallMemory", "GuardError", "GUARD_BYTES", "text", "texts", "address", "readable"]

GUARD_BYTES = 64
_GUARD_PATTERN = bytes([0xA5, 0x5A, 0xC3, 0x3C]) * (GUARD_BYTES // 4)

Encoded = list[Any]


_CHAR_P = "char *"
_NULL = cdata.NULL


def address(pointer: Any) -> int:
    """The address a cdata pointer holds (0 for NULL)."""
    return cdata.address(pointer)


def text(value: Any) -> bytes | None:
    """A ``char *`` argument's bytes (None for NULL)."""
    if isinstance(value, bytes):
        return value
    if value is None or value == cdata.NULL:
        return None
    return cdata.string(value)


def readable(array: Any, count: int) -> int:
    """How many of count entries of array can be read: all of them for a
    pointer, at most its length for an array cdata (a caller that passes a
    count larger than its array, to see the plugin refuse it, gets no read
    past the array here)."""
    try:
        return max(min(count, len(array)), 0)
    except TypeError:
        return max(count, 0)


def texts(array: Any, count: int) -> list[bytes | None] | None:
    """The strings of a ``const char *const *`` argument of count entries
    (None for a NULL array, None entries for NULL strings)."""
    if array is None or array == cdata.NULL:
        return None
    return [None if array[index] == cdata.NULL else cdata.string(array[index])
            for index in range(readable(array, count))]


class GuardError(Exception):
    """The plugin wrote past the end of a staged tensor (``label``)."""

    def __init__(self, label: str, written: int) -> None:
        super().__init__(f"wrote past the end of {label}: {written} of the {GUARD_BYTES} guard "
                         "bytes after it were overwritten")
        self.label, self.written = label, written


class _Staged:
    __slots__ = ("encoded", "address", "nbytes", "copy_in", "write", "offset", "label")

    def __init__(self, encoded: Encoded, address: int, nbytes: int, copy_in: bool,
                 write: bool, label: str) -> None:
        self.encoded, self.address, self.nbytes = encoded, address, nbytes
        self.copy_in, self.write, self.label = copy_in, write, label
        self.offset = 0


class CallMemory:
    """The host memory one call passes to the plugin process."""

    def __init__(self) -> None:
        self.staged: list[_Staged] = []
        self.segments: dict[int, Any] = {}  # shared segments referred to, by id
        self.staging_bytes = 0

    def tensors(self, pointer: Any, count: int, *, data: bool = True, write: bool = False,
                copy_in: bool = True, names: list[bytes | None] | None = None
                ) -> list[Encoded] | None:
        """The descriptors pointer[0 .. count-1] (None for NULL). data=False:
        the plugin must not read the data, which is not sent; write: the
        plugin writes the host memory, which is copied back after a call
        that succeeded; copy_in=False: the plugin writes every byte, so the
        host's are not copied in first; names: the tensors' names (for
        messages)."""
        if pointer is None or pointer == cdata.NULL:
            return None
        kind = "output" if write else "input"
        labels = [
            f"{kind} {index}" if not names or index >= len(names) or names[index] is None
            else f"{kind} {names[index].decode('utf-8', 'replace')!r}"  # type: ignore[union-attr]
            for index in range(readable(pointer, count))]
        return [self._tensor(pointer[index], data, write, copy_in, labels[index])
                for index in range(len(labels))]

    def _tensor(self, tensor: Any, data: bool, write: bool, copy_in: bool,
                label: str) -> Encoded:
        shape_len, extents, layout_text = tensor.shape_len, tensor.shape, tensor.layout
        shape = None if extents == _NULL else list(extents[0:min(shape_len, header.MAX_NDIM)])
        layout = None if layout_text == _NULL else cdata.string(layout_text)
        dtype, sparse, dev_id = tensor.dtype, tensor.isSparse, tensor.dev_id
        encoded: Encoded = [None, shape, shape_len, dtype, sparse, layout, dev_id]
        where = cdata.address(tensor.data)
        if not data or where == 0:
            return encoded
        if dev_id != header.HOST_DEVICE:
            encoded[0] = where
            return encoded
        if sparse:
            encoded[0] = self._sparse(tensor, sparse, label)
            return encoded
        nbytes = numpy_dtype(dtype).itemsize
        for extent in shape or ():
            nbytes *= extent
        segment = shared.find(where, nbytes)
        if segment is not None:
            encoded[0] = (segment.id, where - segment.address)
            self.segments[segment.id] = segment
        else:
            self.staged.append(_Staged(encoded, where, nbytes, copy_in, write, label))
            self.staging_bytes += shared.round_up(nbytes + GUARD_BYTES, shared.ALIGNMENT)
        return encoded

    def _sparse(self, tensor: Any, sparse: int, label: str) -> dict[str, Any]:
        """A sparse tensor's struct, its arrays staged (read-only) as host
        memory is; the counts bound the bytes read from each array."""
        dtype_size = numpy_dtype(tensor.dtype).itemsize
        shape = [int(tensor.shape[d]) for d in range(min(tensor.shape_len, header.MAX_NDIM))]
        if sparse == header.STORAGE_CSR:
            csr = cdata.cast("SparseTensor *", tensor.data)
            nnz, rows = int(csr.num_nonzero), int(csr.num_rows)
            pieces = [("data", csr.data, nnz * dtype_size), ("indices", csr.indices, nnz * 8),
                      ("indptr", csr.indptr, (rows + 1) * 8)]
            counts = [nnz, rows]
        elif sparse == header.STORAGE_ROW_SPARSE:
            rsp = cdata.cast("RowSparseTensor *", tensor.data)
            stored = int(rsp.num_rows_stored)
            width = 1
            for extent in shape[1:]:
                width *= extent
            pieces = [("data", rsp.data, stored * width * dtype_size),
                      ("row ids", rsp.row_ids, stored * 8)]
            counts = [stored]
        else:
            raise TensorError(f"{label}: isSparse {sparse} is not a storage kind of ABI 1.2")
        arrays: list[Encoded] = []
        for name, pointer, nbytes in pieces:
            piece: Encoded = [None]
            where = cdata.address(pointer)
            if where:
                self.staged.append(_Staged(piece, where, nbytes, True, False, f"{label} {name}"))
                self.staging_bytes += shared.round_up(nbytes + GUARD_BYTES, shared.ALIGNMENT)
            arrays.append(piece)
        return {"sparse": int(sparse), "arrays": arrays, "counts": counts}

    def place(self, staging: shared.Segment) -> int:
        """Copies the staged host memory into staging, with a guard after
        each tensor, and points the descriptors at it; returns the bytes
        copied."""
        offset = copied = 0
        for item in self.staged:
            item.offset = offset
            item.encoded[0] = (staging.id, offset)
            if item.nbytes and item.copy_in:
                cdata.memmove(staging.pointer(offset), cdata.cast(_CHAR_P, item.address),
                            item.nbytes)
                copied += item.nbytes
            guard = offset + item.nbytes
            staging.map[guard:guard + GUARD_BYTES] = _GUARD_PATTERN
            offset += shared.round_up(item.nbytes + GUARD_BYTES, shared.ALIGNMENT)
        return copied

    def check_guards(self, staging: shared.Segment) -> None:
        """Raises GuardError for the first tensor whose guard the plugin
        overwrote."""
        for item in self.staged:
            guard = item.offset + item.nbytes
            found = staging.map[guard:guard + GUARD_BYTES]
            if found != _GUARD_PATTERN:
                changed = sum(a != b for a, b in zip(found, _GUARD_PATTERN))
                raise GuardError(item.label, changed)

    def copy_back(self, staging: shared.Segment, answer: Any) -> int:
        """Copies what the plugin wrote into staging back into host memory,
        if the call succeeded (answer: ``(status, message)``), after
        checking the guards; returns the bytes copied."""
        copied = 0
        self.check_guards(staging)
        if answer[0] != header.OK:
            return copied
        for item in self.staged:
            if item.write and item.nbytes:
                cdata.memmove(cdata.cast(_CHAR_P, item.address), staging.pointer(item.offset),
                            item.nbytes)
                copied += item.nbytes
        return copied
