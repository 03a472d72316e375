"""Marshalling between numpy arrays and ``MXTensor`` descriptors.

A :class:`TensorArray` is a C array of descriptors built once for a fixed
list of shapes and dtypes; afterwards only the data pointers change, which is
what a bound executor or model needs per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, TensorError
from . import header
from .header import ffi
from .sparse import STYPE_NAMES, SparseDescriptor, sparse_parts

__all__ = ["TensorSpec", "dtype_code", "numpy_dtype", "TensorArray", "CStrings", "contiguous",
           "host_pointer"]

_NUMPY_BY_ENUM = {
    "kFloat32": np.float32, "kFloat64": np.float64, "kFloat16": np.float16,
    "kUint8": np.uint8, "kInt32": np.int32, "kInt8": np.int8, "kInt64": np.int64,
}
_CODE_BY_NUMPY: dict[np.dtype, int] = {
    np.dtype(numpy_type): header.DTYPE_VALUES[enum] for enum, numpy_type in _NUMPY_BY_ENUM.items()
}
_NUMPY_BY_CODE: dict[int, np.dtype] = {code: dtype for dtype, code in _CODE_BY_NUMPY.items()}


def dtype_code(dtype: Any) -> int:
    """The TensorDType value of a numpy dtype (or anything np.dtype accepts)."""
    resolved = np.dtype(dtype)
    try:
        return _CODE_BY_NUMPY[resolved]
    except KeyError:
        supported = ", ".join(str(d) for d in _CODE_BY_NUMPY)
        raise TensorError(f"dtype {resolved} has no TensorDType (supported: {supported})") from None


def numpy_dtype(code: int) -> np.dtype:
    """The numpy dtype of a TensorDType value."""
    try:
        return _NUMPY_BY_CODE[code]
    except KeyError:
        raise TensorError(f"{code} is not a TensorDType value") from None


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a tensor, without its data; stype is its storage
    kind (an MXTensor.isSparse value: 0 dense, 1 CSR, 2 row-sparse), whose
    shape and dtype are those of the dense array it stands for."""

    shape: tuple[int, ...]
    dtype: np.dtype
    stype: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(extent) for extent in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if len(self.shape) > header.MAX_NDIM:
            raise TensorError(f"shape {self.shape} has more than {header.MAX_NDIM} dimensions")
        if any(extent < 0 for extent in self.shape):
            raise TensorError(f"shape {self.shape} has a negative extent")
        dtype_code(self.dtype)
        if self.stype not in (header.STORAGE_DENSE, header.STORAGE_CSR,
                              header.STORAGE_ROW_SPARSE):
            raise TensorError(f"storage kind {self.stype} is not an MXTensor.isSparse value")
        if self.stype == header.STORAGE_CSR and len(self.shape) != 2:
            raise TensorError(f"a CSR tensor has 2 dimensions, got shape {self.shape}")
        if self.stype == header.STORAGE_ROW_SPARSE and not self.shape:
            raise TensorError("a row-sparse tensor has at least one dimension")

    @classmethod
    def of(cls, array: np.ndarray) -> TensorSpec:
        return cls(array.shape, array.dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # Python ints: no overflow


def contiguous(array: np.ndarray) -> np.ndarray:
    """array itself when C-contiguous and aligned to its element size (what
    the header promises of host pointers), else such a copy of the same
    shape (np.ascontiguousarray alone would turn a 0-d array into 1-d, and
    keep an unaligned one as it is)."""
    if array.flags.c_contiguous and array.flags.aligned:
        return array
    return np.array(array, order="C", copy=True).reshape(array.shape)


def host_pointer(array: np.ndarray, *, writable: bool = False) -> Any:
    """A pointer to the array's memory (a ``char[]`` cdata, accepted wherever
    a ``void *`` is), which must be C-contiguous. The returned cdata keeps the
    array alive: it is ffi.from_buffer's own object. (A ``void *`` cast of it
    would not: the cast drops the buffer, so a temporary array, such as the
    C-contiguous copy ``copy_from_host`` makes of a strided view, would be
    freed, and its memory reused, before the plugin reads it.)"""
    if not isinstance(array, np.ndarray):
        raise TensorError(f"expected a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise TensorError("array is not C-contiguous; pass a C-ordered copy (array.copy())")
    if writable and not array.flags.writeable:
        raise TensorError("output array is read-only")
    if writable and not array.flags.aligned:  # mxnet_acc.h: host pointers are aligned
        raise TensorError("output array is not aligned to its element size; pass an aligned "
                          "array (numpy.empty makes one)")
    return ffi.from_buffer(array, require_writable=writable)


class TensorArray:
    """``MXTensor[n]`` for fixed specs; set data pointers with :meth:`set_data`.

    The descriptors, their shape arrays and the objects keeping the data
    alive belong to this object, which must outlive every call it is passed
    to.
    """

    def __init__(self, specs: Sequence[TensorSpec], dev_id: int = header.HOST_DEVICE,
                 names: Sequence[str] | None = None) -> None:
        self.specs = tuple(specs)
        self.names = tuple(names) if names is not None else tuple(map(str, range(len(specs))))
        if len(self.names) != len(self.specs):
            raise InvalidArgumentError(f"{len(self.names)} names for {len(self.specs)} tensors")
        self._tensors = ffi.new("MXTensor[]", max(len(self.specs), 1))
        self._keep: list[Any] = [None] * len(self.specs)
        self._shapes = []
        for index, spec in enumerate(self.specs):
            shape = ffi.new("uint64_t[]", spec.shape or (0,))
            self._shapes.append(shape)
            tensor = self._tensors[index]
            tensor.data = ffi.NULL
            tensor.shape = shape
            tensor.shape_len = len(spec.shape)
            tensor.dtype = dtype_code(spec.dtype)
            tensor.isSparse = spec.stype
            tensor.layout = ffi.NULL
            # A sparse tensor is always host memory (mxnet_acc.h section 12).
            tensor.dev_id = header.HOST_DEVICE if spec.stype else dev_id

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def pointer(self) -> Any:
        """``MXTensor *`` to pass to the plugin (NULL when empty)."""
        return self._tensors if self.specs else ffi.NULL

    def slots(self) -> list[tuple[str, Any, TensorSpec]]:
        """(name, descriptor, spec) of every tensor: the descriptor is the
        ``MXTensor`` cdata inside this array, for callers that refresh data
        pointers themselves on a hot path (they must keep the memory alive
        for each call, and keep this array alive)."""
        return [(name, self._tensors[index], spec)
                for index, (name, spec) in enumerate(zip(self.names, self.specs))]

    def set_data(self, index: int, pointer: Any, dev_id: int, keep_alive: Any = None) -> None:
        """Points descriptor index at pointer (device memory of dev_id, or host
        memory with dev_id = HOST_DEVICE); keep_alive is held until replaced."""
        tensor = self._tensors[index]
        tensor.data = pointer
        tensor.dev_id = dev_id
        self._keep[index] = keep_alive

    def set_host_array(self, index: int, array: np.ndarray, *, writable: bool = False) -> None:
        """Points descriptor index at a numpy array matching its spec."""
        spec = self.specs[index]
        if array.shape != spec.shape or array.dtype != spec.dtype:
            raise TensorError(
                f"tensor {index}: got shape {array.shape} {array.dtype}, expected "
                f"{spec.shape} {spec.dtype}")
        pointer = host_pointer(array, writable=writable)
        self.set_data(index, pointer, header.HOST_DEVICE, pointer)

    def set_sparse(self, index: int, value: Any) -> None:
        """Points sparse descriptor index at a sparse array (CsrParts,
        RowSparseParts, or an array with MXNet's sparse attributes) of its
        spec's storage kind, shape and dtype, checked (mxnet_acc.h section
        12): data points to a SparseTensor or RowSparseTensor in host
        memory, kept alive until replaced."""
        spec, name = self.specs[index], self.names[index]
        parts = sparse_parts(value, name)
        if parts is None or STYPE_NAMES[spec.stype] != parts.stype:
            given = "a dense array" if parts is None else parts.stype
            raise TensorError(f"{name}: the graph expects {STYPE_NAMES[spec.stype]} storage, "
                              f"got {given}")
        if parts.shape != spec.shape or parts.data.dtype != spec.dtype:
            raise TensorError(f"{name}: got {parts.stype} {parts.shape} {parts.data.dtype}, "
                              f"expected {spec.shape} {spec.dtype}")
        descriptor = SparseDescriptor(parts)
        self.set_data(index, descriptor.pointer, header.HOST_DEVICE, descriptor)

    def clear(self) -> None:
        """Forgets every data pointer (and the objects kept alive for them)."""
        for index in range(len(self.specs)):
            self.set_data(index, ffi.NULL, self._tensors[index].dev_id)


class CStrings:
    """A ``const char *[]`` of UTF-8 strings that keeps its buffers alive."""

    def __init__(self, strings: Sequence[str]) -> None:
        for text in strings:
            if not isinstance(text, str) or "\x00" in text:
                raise InvalidArgumentError(f"{text!r} is not a string without NUL characters")
        self._buffers = [ffi.new("char[]", text.encode("utf-8")) for text in strings]
        self._array = ffi.new("const char *[]", self._buffers or [ffi.NULL])
        self.count = len(self._buffers)

    @property
    def pointer(self) -> Any:
        return self._array if self.count else ffi.NULL
