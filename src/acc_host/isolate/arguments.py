"""Turning the cffi arguments of one ABI call into plain data for the
plugin process, and its answers back.

Strings and string arrays are sent by value. An ``MXTensor`` is sent as
``[data, shape, shape_len, dtype, isSparse, layout, dev_id]`` where data is None (a
NULL pointer, or a descriptor whose data the plugin must not read), an int
(accelerator memory: the child's own address, passed back as it is) or
``(segment id, offset)`` (host memory the child maps). Host memory inside a
shared array's segment is sent as it is; any other host memory is copied
into the channel's staging segment before the call and, for the tensors the
plugin writes, copied back after it (:class:`CallMemory`).
"""

from __future__ import annotations

from typing import Any

from ..abi import header
from ..abi.header import ffi
from ..abi.tensor import numpy_dtype
from ..errors import TensorError
from . import shared

__all__ = ["CallMemory", "text", "texts", "address", "readable"]

Encoded = list[Any]


_UINTPTR = ffi.typeof("uintptr_t")
_CHAR_P = ffi.typeof("char *")
_NULL = ffi.NULL


def address(pointer: Any) -> int:
    """The address a cdata pointer holds (0 for NULL)."""
    return int(ffi.cast(_UINTPTR, pointer))


def text(value: Any) -> bytes | None:
    """A ``char *`` argument's bytes (None for NULL)."""
    if isinstance(value, bytes):
        return value
    if value is None or value == ffi.NULL:
        return None
    return ffi.string(value)


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
    if array is None or array == ffi.NULL:
        return None
    return [None if array[index] == ffi.NULL else ffi.string(array[index])
            for index in range(readable(array, count))]


class _Staged:
    __slots__ = ("encoded", "address", "nbytes", "copy_in", "write", "offset")

    def __init__(self, encoded: Encoded, address: int, nbytes: int, copy_in: bool,
                 write: bool) -> None:
        self.encoded, self.address, self.nbytes = encoded, address, nbytes
        self.copy_in, self.write = copy_in, write
        self.offset = 0


class CallMemory:
    """The host memory one call passes to the plugin process."""

    def __init__(self) -> None:
        self.staged: list[_Staged] = []
        self.segments: dict[int, Any] = {}  # shared segments referred to, by id
        self.staging_bytes = 0

    def tensors(self, pointer: Any, count: int, *, data: bool = True, write: bool = False,
                copy_in: bool = True) -> list[Encoded] | None:
        """The descriptors pointer[0 .. count-1] (None for NULL). data=False:
        the plugin must not read the data, which is not sent; write: the
        plugin writes the host memory, which is copied back after a call
        that succeeded; copy_in=False: the plugin writes every byte, so the
        host's are not copied in first."""
        if pointer is None or pointer == ffi.NULL:
            return None
        return [self._tensor(pointer[index], data, write, copy_in)
                for index in range(readable(pointer, count))]

    def _tensor(self, tensor: Any, data: bool, write: bool, copy_in: bool) -> Encoded:
        shape_len, extents, layout_text = tensor.shape_len, tensor.shape, tensor.layout
        shape = None if extents == _NULL else list(extents[0:min(shape_len, header.MAX_NDIM)])
        layout = None if layout_text == _NULL else ffi.string(layout_text)
        dtype, sparse, dev_id = tensor.dtype, tensor.isSparse, tensor.dev_id
        encoded: Encoded = [None, shape, shape_len, dtype, sparse, layout, dev_id]
        where = int(ffi.cast(_UINTPTR, tensor.data))
        if not data or where == 0:
            return encoded
        if dev_id != header.HOST_DEVICE:
            encoded[0] = where
            return encoded
        if sparse:
            raise TensorError("isolated mode passes dense host tensors only (isSparse is set)")
        nbytes = numpy_dtype(dtype).itemsize
        for extent in shape or ():
            nbytes *= extent
        segment = shared.find(where, nbytes)
        if segment is not None:
            encoded[0] = (segment.id, where - segment.address)
            self.segments[segment.id] = segment
        else:
            self.staged.append(_Staged(encoded, where, nbytes, copy_in, write))
            self.staging_bytes += shared.round_up(nbytes, shared.ALIGNMENT)
        return encoded

    def place(self, staging: shared.Segment) -> int:
        """Copies the staged host memory into staging and points the
        descriptors at it; returns the bytes copied."""
        offset = copied = 0
        for item in self.staged:
            item.offset = offset
            item.encoded[0] = (staging.id, offset)
            if item.nbytes and item.copy_in:
                ffi.memmove(staging.pointer(offset), ffi.cast(_CHAR_P, item.address),
                            item.nbytes)
                copied += item.nbytes
            offset += shared.round_up(item.nbytes, shared.ALIGNMENT)
        return copied

    def copy_back(self, staging: shared.Segment, answer: Any) -> int:
        """Copies what the plugin wrote into staging back into host memory,
        if the call succeeded (answer: ``(status, message)``); returns the
        bytes copied."""
        copied = 0
        if answer[0] != header.OK:
            return copied
        for item in self.staged:
            if item.write and item.nbytes:
                ffi.memmove(ffi.cast(_CHAR_P, item.address), staging.pointer(item.offset),
                            item.nbytes)
                copied += item.nbytes
        return copied
