"""What a compiled-model file says it was built from: the graph section of
the envelope the SDK's plugins write (plugins/common/binfile.h).

A file in that envelope starts with a 28-byte header (8 bytes of magic, the
format and ABI versions, flags, and the size of the whole file, u64 at
offset 20) and ends with an 8-byte checksum; its body starts with the graph
section: the graph JSON (u64 length, UTF-8) and the values of the graph's
weight variables (u32 count, then per weight: u32 name length, name, u32
TensorDType, u32 ndim, u64 extents, u64 byte length, the little-endian
elements). Integers are little-endian. When bit 0 of the header's flags
(u32 at offset 16) is set, each weight's values start at a multiple of 64
bytes from the file's start, zero bytes before them.

The compiled-model cache reads it to bind an entry to its own contents
(:mod:`.model_cache`): the graph and weights it holds must be those the
entry's key names. :func:`graph_section` checks every length against the
bytes really there and raises ValueError, naming the offset, for anything
else.
"""

from __future__ import annotations

import numpy as np

from ..abi.header import MAX_NDIM
from ..abi.tensor import numpy_dtype
from ..errors import TensorError

__all__ = ["HEADER_BYTES", "graph_section"]

HEADER_BYTES = 28
_FLAGS_OFFSET = 16
_SIZE_OFFSET = 20
_FLAG_ALIGNED = 1
_ALIGN = 64
_CHECKSUM_BYTES = 8


class _Reader:
    """Fields taken one after another from the body, never past the
    checksum."""

    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.offset = HEADER_BYTES
        self.end = len(data) - _CHECKSUM_BYTES

    def take(self, count: int, field: str) -> memoryview:
        if count > self.end - self.offset:
            raise ValueError(f"offset {self.offset}: the {field} ({count} bytes) runs past the "
                             f"{self.end - self.offset} bytes left")
        piece = self.data[self.offset:self.offset + count]
        self.offset += count
        return piece

    def uint(self, width: int, field: str) -> int:
        return int.from_bytes(self.take(width, field), "little")


def graph_section(data: bytes | memoryview) -> tuple[str, dict[str, np.ndarray]]:
    """The graph JSON and the weights (name -> values, read-only views of
    data) of a file in the SDK's envelope; ValueError when data is not one."""
    view = memoryview(data).cast("B")
    if len(view) < HEADER_BYTES + _CHECKSUM_BYTES:
        raise ValueError(f"{len(view)} bytes, fewer than the envelope's header and checksum")
    size = int.from_bytes(view[_SIZE_OFFSET:HEADER_BYTES], "little")
    if size != len(view):
        raise ValueError(f"offset {_SIZE_OFFSET}: the size field says {size} bytes, the file "
                         f"has {len(view)}")
    aligned = bool(int.from_bytes(view[_FLAGS_OFFSET:_SIZE_OFFSET], "little") & _FLAG_ALIGNED)
    reader = _Reader(view)
    raw = reader.take(reader.uint(8, "graph JSON length"), "graph JSON")
    try:
        graph_json = bytes(raw).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"offset {HEADER_BYTES + 8}: the graph JSON is not UTF-8 "
                         f"({error.reason})") from None
    weights: dict[str, np.ndarray] = {}
    for index in range(reader.uint(4, "weight count")):
        at = reader.offset
        name = bytes(reader.take(reader.uint(4, "weight name length"), "weight name"))
        try:
            dtype = numpy_dtype(reader.uint(4, "weight dtype")).newbyteorder("<")
        except TensorError as error:
            raise ValueError(f"offset {at}: weight {index}: {error}") from None
        ndim = reader.uint(4, "weight ndim")
        if ndim > MAX_NDIM:
            raise ValueError(f"offset {at}: weight {index}: {ndim} dimensions, more than "
                             f"{MAX_NDIM}")
        shape = tuple(reader.uint(8, "weight extent") for _ in range(ndim))
        nbytes = reader.uint(8, "weight byte length")
        if nbytes != int(np.prod(shape, dtype=object)) * dtype.itemsize:
            raise ValueError(f"offset {at}: weight {index}: {nbytes} bytes for shape {shape} "
                             f"of {dtype.name}")
        if aligned:
            reader.take(-reader.offset % _ALIGN, "weight padding")
        values = reader.take(nbytes, "weight values")
        weights[name.decode("utf-8", "replace")] = np.frombuffer(values, dtype).reshape(shape)
    return graph_json, weights
