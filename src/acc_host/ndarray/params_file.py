"""Read and write MXNet 1.x NDArray-list files (``.params``) as numpy arrays.

These are the files ``mx.nd.save`` and ``mx.model.save_checkpoint`` write.
Every integer is little-endian; there is no padding and no alignment.

File
    ====================  =====================================================
    uint64                list magic, always ``0x112``
    uint64                reserved; MXNet writes 0 and never looks at it
    uint64                number of arrays, N
    N x array             see below
    uint64                number of names: 0, or exactly N
    names                 each: uint64 byte length, then that many bytes (UTF-8)
    ====================  =====================================================

    Checkpoints name their arrays ``arg:<name>`` and ``aux:<name>``. The file
    ends after the last name: this reader treats any byte past it as an error
    (MXNet itself would silently ignore it), because a well-formed file never
    has any and a trailing tail usually means two files run together or a
    damaged length field.

Array, versions 2 and 3 (the first uint32 is ``0xF993FAC9`` or ``0xF993FACA``)
    ====================  =====================================================
    uint32                version magic
    int32                 storage type: 0 dense, 1 row_sparse, 2 csr
    shape                 (sparse only: the storage shape comes first)
    shape                 the array's shape: int32 ndim, then ndim x int64
    int32, int32          context it was saved from: device type, device id
    int32                 element type flag (``DTYPE_BY_FLAG``)
    bytes                 the elements, C order, prod(shape) x itemsize
    ====================  =====================================================

    Version 2 is what MXNet 1.x writes by default. There, ndim 0 stands for an
    uninitialised ("none") array and nothing follows the shape, so version 2
    cannot hold a 0-d array. Version 3 is written under NumPy shape semantics
    (``npx.set_np()``): ndim 0 is a real 0-d array and ndim -1 (or a dim of -1)
    marks the none array. MXNet loads version 3 arrays only with NumPy
    semantics on, and version 2 arrays under NumPy semantics only when those
    were switched on globally.

Array, version 1 (first uint32 ``0xF993FAC8``)
    uint32 magic, int32 ndim, ndim x int64 dims, context, type flag, elements.
    No storage type field; ndim 0 is the none array.

Array, before version 1 (no magic)
    The first uint32 is itself ndim, followed by ndim x uint32 dims, then the
    context, type flag and elements as above; ndim 0 is the none array.

What this module does
    * :func:`load` / :func:`loads` read dense arrays of every layout above,
      and CSR and row_sparse arrays as :class:`SparseRecord` (their layout:
      :mod:`acc_host.ndarray.params_sparse`). None arrays and bfloat16 (flag 12, which numpy lacks)
      are refused with a :class:`~acc_host.errors.ModelFileError` that says
      they are unsupported. The saved context is read and discarded, as MXNet
      does when it has no such device; bool elements are normalised to 0/1.
    * :func:`save` / :func:`dumps` write what MXNet 1.9 writes: version 2
      arrays, storage type 0, context cpu(0) (device type 1, id 0), reserved
      word 0. An array with no dimensions cannot be written as version 2, so
      when one is present every array is written as version 3 instead (as
      MXNet does under NumPy semantics); ``version=`` forces either.
    * Every count, ndim, dim and length is checked against the bytes that are
      left *before* anything is allocated, so a damaged or hostile file raises
      :class:`~acc_host.errors.ModelFileError` (naming the file, or
      ``<bytes>``, the byte offset and the problem) rather than crashing,
      hanging or allocating memory the file could not back.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, ModelFileError, TensorError, model_file_os_error
from . import params_sparse
from .params_sparse import SparseRecord

__all__ = [
    "LIST_MAGIC", "V1_MAGIC", "V2_MAGIC", "V3_MAGIC", "MAX_NDIM", "DTYPE_BY_FLAG",
    "load", "loads", "save", "dumps", "MAP_BYTES",
]

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

#: The most dimensions this reader accepts (numpy 1.x's own limit).
MAX_NDIM = 32

#: mshadow type flag -> little-endian numpy dtype, for the flags numpy can hold.
DTYPE_BY_FLAG: dict[int, np.dtype] = {
    flag: np.dtype(code) for flag, code in {
        0: "<f4", 1: "<f8", 2: "<f2", 3: "u1", 4: "<i4", 5: "i1", 6: "<i8", 7: "?",
        8: "<i2", 9: "<u2", 10: "<u4", 11: "<u8",
    }.items()
}
_FLAG_BY_KIND: dict[tuple[str, int], int] = {
    (dtype.kind, dtype.itemsize): flag for flag, dtype in DTYPE_BY_FLAG.items()
}
_KNOWN_UNSUPPORTED_FLAGS = {12: "bfloat16"}
_STORAGE_NAMES = {-1: "undefined", 0: "dense", 1: "row_sparse", 2: "csr"}
_CPU_DEVICE_TYPE = 1
# The smallest encoding of one array (a bare pre-version-1 ndim) and of one
# name (its length field): used to bound counts before looping over them.
_MIN_ARRAY_BYTES = 4
_MIN_NAME_BYTES = 8
_INT64_SIGN = 1 << 63
_MAX_NUMPY_BYTES = int(np.iinfo(np.intp).max)


# ---- reading ----------------------------------------------------------------------


class _Reader:
    """A cursor over the file's bytes that reports problems as ModelFileError."""

    __slots__ = ("view", "pos", "source", "owned")

    def __init__(self, data: memoryview, source: str, owned: bool = False) -> None:
        self.view = data
        self.pos = 0
        self.source = source
        # whether the bytes are this reader's own (a file read into a
        # buffer nobody else holds): arrays may then be views of them
        self.owned = owned

    @property
    def remaining(self) -> int:
        return len(self.view) - self.pos

    def error(self, what: str, offset: int | None = None) -> ModelFileError:
        where = self.pos if offset is None else offset
        return ModelFileError(f"{self.source}: byte offset {where}: {what}")

    def take(self, size: int, what: str) -> memoryview:
        """The next ``size`` bytes; ModelFileError when fewer remain."""
        if size > self.remaining:
            raise self.error(f"truncated: {what} needs {size} bytes, "
                             f"only {self.remaining} remain")
        chunk = self.view[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def u32(self, what: str) -> int:
        return self.unpack("<I", what)[0]

    def i32(self, what: str) -> int:
        return self.unpack("<i", what)[0]

    def u64(self, what: str) -> int:
        return self.unpack("<Q", what)[0]


def load(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview,
         ) -> tuple[list[np.ndarray | SparseRecord], list[str]]:
    """Read an NDArray-list file: ``(arrays, names)``; names is empty when the
    file stores none. Bytes-like arguments are parsed directly (see
    :func:`loads`); anything else is a path. A path that cannot be read is a
    ModelFileError too (ModelFileNotFoundError, also a FileNotFoundError,
    for a missing file); anything but a path or bytes an
    InvalidArgumentError."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return loads(path_or_bytes)
    if not isinstance(path_or_bytes, (str, os.PathLike)):
        raise InvalidArgumentError(f"load: expected a path (str or os.PathLike) or bytes, got "
                                   f"{type(path_or_bytes).__name__}")
    path = os.fspath(path_or_bytes)
    try:
        data = _read_file(path)
    except OSError as error:
        raise model_file_os_error(str(path), error) from None
    return _parse(memoryview(data), str(path), owned=True)


# Files from this many bytes on are memory-mapped rather than read.
MAP_BYTES = 1 << 20


def _read_file(path: str) -> bytearray | mmap.mmap:
    """The file's bytes in one writable buffer: the dense arrays of a file
    are views of it (see _read_elements), not copies.

    A file of MAP_BYTES or more is memory-mapped copy-on-write
    (``ACCESS_COPY``, a private mapping): nothing is read or copied until an
    array's elements are first used, a write through an array changes that
    array's pages only (copies of them, never the file, never another
    array), and the mapping lives as long as the last array of it. A
    ResNet-50 checkpoint's 102 MB then cost no allocation and no copy at
    load (reading them into a fresh buffer took 0.15-0.2 s on the 2-core
    machine). :func:`save` replaces a file rather than rewriting it, so that
    saving to the path an array was loaded from leaves its mapping intact;
    a file truncated in place by another program while its arrays are in
    use would fault when they are read (as with any memory-mapped file)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size >= MAP_BYTES:
            try:
                return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):  # a file that cannot be mapped is read
                pass
        data = bytearray(size)
        view = memoryview(data)
        filled = 0
        while filled < size:
            count = handle.readinto(view[filled:])
            if not count:  # the file shrank while it was read
                break
            filled += count
        rest = handle.read()  # (or grew)
    view.release()
    if filled < size:
        del data[filled:]
    data += rest
    return data


def loads(data: bytes | bytearray | memoryview
          ) -> tuple[list[np.ndarray | SparseRecord], list[str]]:
    """Parse the bytes of an NDArray-list file; errors name the source ``<bytes>``."""
    view = memoryview(data)
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return _parse(view, "<bytes>")


class DuplicateNameWarning(UserWarning):
    """An NDArray file names two arrays alike: as in MXNet, a dict of its
    arrays keeps the last one (acc_host never writes such a file)."""


def _warn_duplicates(names: list[str], source: str) -> None:
    seen: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        seen.setdefault(name, []).append(index)
    for name, indices in seen.items():
        if len(indices) > 1:
            warnings.warn(f"{source}: the name {name!r} is given to arrays "
                          f"{', '.join(map(str, indices))}; as in MXNet, loading it as a dict "
                          f"keeps array {indices[-1]} and drops the others",
                          DuplicateNameWarning, stacklevel=4)


def _parse(view: memoryview, source: str, owned: bool = False
           ) -> tuple[list[np.ndarray | SparseRecord], list[str]]:
    reader = _Reader(view, source, owned)
    _read_list_header(reader)
    count = _read_count(reader, "array count", _MIN_ARRAY_BYTES)
    arrays = [_read_array(reader, index, count) for index in range(count)]
    names = _read_names(reader, count)
    if reader.remaining:
        raise reader.error(f"{reader.remaining} unexpected bytes after the last "
                           f"{'name' if names else 'array'} (the file should end here)")
    _warn_duplicates(names, source)
    return arrays, names


def _read_list_header(reader: _Reader) -> None:
    start = reader.pos
    magic = reader.u64("the list magic")
    if magic != LIST_MAGIC:
        raise reader.error(f"not an MXNet NDArray-list file: magic {magic:#x}, "
                           f"expected {LIST_MAGIC:#x}", start)
    reader.u64("the reserved header word")


def _read_count(reader: _Reader, what: str, min_item_bytes: int) -> int:
    """A uint64 count, refused unless ``count * min_item_bytes`` could fit."""
    start = reader.pos
    count = reader.u64(what)
    if count >= _INT64_SIGN:
        raise reader.error(f"negative {what} {count - (1 << 64)}", start)
    if count * min_item_bytes > reader.remaining:
        raise reader.error(f"{what} {count} is more than the remaining "
                           f"{reader.remaining} bytes can hold", start)
    return count


def _read_array(reader: _Reader, index: int, count: int) -> np.ndarray | SparseRecord:
    start = reader.pos
    label = f"array {index} (of {count})"
    magic = reader.u32(f"{label}: magic")
    if magic in (V2_MAGIC, V3_MAGIC):
        version = 2 if magic == V2_MAGIC else 3
        stype = _read_storage_type(reader, label)
        if stype:
            return params_sparse.read_record(reader, label, stype, version, start, _read_shape,
                                             _read_dtype, _read_elements)
        shape = _read_shape(reader, label, version)
    elif magic == V1_MAGIC:
        shape = _read_shape(reader, label, 1)
    elif magic <= MAX_NDIM:
        shape = _read_legacy_shape(reader, label, magic)
    else:
        raise reader.error(f"{label}: unknown array magic {magic:#010x} (expected "
                           f"{V2_MAGIC:#x}, {V3_MAGIC:#x}, {V1_MAGIC:#x} or a legacy "
                           f"ndim <= {MAX_NDIM})", start)
    reader.unpack("<ii", f"{label}: context")
    dtype = _read_dtype(reader, label)
    return _read_elements(reader, label, shape, dtype)


def _read_storage_type(reader: _Reader, label: str) -> int:
    """0 (dense), 1 (row_sparse) or 2 (csr)."""
    start = reader.pos
    stype = reader.i32(f"{label}: storage type")
    if stype in (0, 1, 2):
        return stype
    if stype in _STORAGE_NAMES:
        raise reader.error(f"{label}: {_STORAGE_NAMES[stype]} storage is not supported", start)
    raise reader.error(f"{label}: unknown storage type {stype}", start)


def _read_shape(reader: _Reader, label: str, version: int) -> tuple[int, ...]:
    """int32 ndim then int64 dims (versions 1 to 3)."""
    start = reader.pos
    ndim = reader.i32(f"{label}: ndim")
    none_array = ndim == -1 if version == 3 else ndim == 0
    if none_array:
        raise reader.error(f"{label}: an uninitialised (none) array (ndim {ndim} in a "
                           f"version {version} array) is not supported", start)
    if ndim < 0:
        raise reader.error(f"{label}: negative ndim {ndim}", start)
    if ndim > MAX_NDIM:
        raise reader.error(f"{label}: ndim {ndim} exceeds the limit of {MAX_NDIM}", start)
    dims_at = reader.pos
    dims = np.frombuffer(reader.take(8 * ndim, f"{label}: {ndim} dims"), dtype="<i8")
    shape = tuple(int(dim) for dim in dims)
    if any(dim < 0 for dim in shape):
        what = "an unknown (-1)" if version == 3 and -1 in shape else "a negative"
        raise reader.error(f"{label}: shape {shape} has {what} dimension", dims_at)
    return shape


def _read_legacy_shape(reader: _Reader, label: str, ndim: int) -> tuple[int, ...]:
    """Before version 1: the magic word was ndim, dims are uint32."""
    if ndim == 0:
        raise reader.error(f"{label}: an uninitialised (none) array (legacy ndim 0) "
                           f"is not supported", reader.pos - 4)
    dims = np.frombuffer(reader.take(4 * ndim, f"{label}: {ndim} legacy dims"), dtype="<u4")
    return tuple(int(dim) for dim in dims)


def _read_dtype(reader: _Reader, label: str) -> np.dtype:
    start = reader.pos
    flag = reader.i32(f"{label}: type flag")
    if flag in DTYPE_BY_FLAG:
        return DTYPE_BY_FLAG[flag]
    if flag in _KNOWN_UNSUPPORTED_FLAGS:
        raise reader.error(f"{label}: element type {_KNOWN_UNSUPPORTED_FLAGS[flag]} "
                           f"(flag {flag}) is not supported", start)
    raise reader.error(f"{label}: unknown element type flag {flag}", start)


def _read_elements(reader: _Reader, label: str, shape: tuple[int, ...],
                   dtype: np.dtype) -> np.ndarray:
    """The raw elements, checked against the remaining bytes before any copy;
    the result is an aligned, writable, native-order array of its own: a
    view of the file's buffer when the reader owns it and the elements are
    aligned and native (float32 elements always are: every header field and
    element run before them is a multiple of 4 bytes), else a copy. Views
    of one file's buffer never overlap, so writing one array changes no
    other; together they keep the buffer alive."""
    nbytes = dtype.itemsize
    for dim in shape:
        nbytes *= dim
    if nbytes > reader.remaining:
        raise reader.error(f"truncated: {label} of shape {shape} and dtype {dtype} "
                           f"needs {nbytes} bytes, only {reader.remaining} remain")
    _check_numpy_extent(reader, label, shape, dtype)
    raw = np.frombuffer(reader.take(nbytes, label), dtype=dtype)
    if dtype.kind == "b":
        # A byte other than 0 or 1 would be an invalid numpy bool.
        return (raw.view(np.uint8) != 0).reshape(shape)
    if reader.owned and dtype.isnative and raw.flags.aligned and raw.flags.writeable:
        return raw.reshape(shape)
    return raw.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def _check_numpy_extent(reader: _Reader, label: str, shape: tuple[int, ...],
                        dtype: np.dtype) -> None:
    """numpy refuses a shape whose non-zero dims overflow its index type even
    when another dim is 0 and the array holds nothing; refuse it first."""
    extent = dtype.itemsize
    for dim in shape:
        extent *= dim or 1
    if extent > _MAX_NUMPY_BYTES:
        raise reader.error(f"{label}: shape {shape} holds no elements but is too "
                           f"large for numpy")


def _read_names(reader: _Reader, array_count: int) -> list[str]:
    start = reader.pos
    count = _read_count(reader, "name count", _MIN_NAME_BYTES)
    if count not in (0, array_count):
        raise reader.error(f"the file has {array_count} arrays but {count} names", start)
    return [_read_name(reader, index, count) for index in range(count)]


def _read_name(reader: _Reader, index: int, count: int) -> str:
    label = f"name {index} (of {count})"
    start = reader.pos
    length = reader.u64(f"{label}: length")
    if length > reader.remaining:
        raise reader.error(f"{label}: length {length} runs past the end of the file "
                           f"({reader.remaining} bytes remain)", start)
    raw = reader.take(length, label)
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise reader.error(f"{label}: not valid UTF-8 ({exc.reason} at byte "
                           f"{exc.start} of the name)", start + 8) from None


# ---- writing ----------------------------------------------------------------------


def save(path: str | os.PathLike[str], arrays: Sequence[Any],
         names: Sequence[str] | None = None, *, version: int | None = None) -> None:
    """Write ``arrays`` (and ``names``, when given) to ``path`` as MXNet 1.9
    does; see :func:`dumps` for the arguments."""
    chunks = list(_encode(arrays, names, version))
    _write_replacing(os.fspath(path), chunks)


def _write_replacing(path: str, chunks: Sequence[bytes | memoryview]) -> None:
    """Writes chunks to path. A file already there is replaced, not
    rewritten: the chunks go to a new file beside it (through a symlink,
    beside its target), which then takes its place (os.replace) with its
    permission bits, so arrays loaded from the old file (memory-mapped, see
    _read_file) keep reading it, even while they are written to the new one.
    Where no new file can be made there, the file is rewritten in place."""
    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        mode = None
    temporary = None
    if mode is not None:
        try:
            handle, temporary = tempfile.mkstemp(prefix=".params-",
                                                 dir=os.path.dirname(target))
            os.close(handle)
        except OSError:
            temporary = None
    try:
        with open(temporary or path, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
        if temporary is not None and mode is not None:
            os.chmod(temporary, mode)
            os.replace(temporary, target)
            temporary = None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def dumps(arrays: Sequence[Any], names: Sequence[str] | None = None, *,
          version: int | None = None) -> bytes:
    """The bytes of an NDArray-list file holding ``arrays``.

    ``names`` is None or empty for an unnamed list, else one string per array.
    ``version`` picks the array layout: 2 (MXNet's default; cannot hold 0-d
    arrays) or 3 (NumPy shape semantics); None means 2 unless some array is
    0-d. Raises TensorError for a dtype MXNet has no flag for and
    InvalidArgumentError for mismatched names or an impossible version.
    """
    return b"".join(_encode(arrays, names, version))


def _encode(arrays: Sequence[Any], names: Sequence[str] | None,
            version: int | None) -> Iterator[bytes | memoryview]:
    prepared = [_prepare(array, index) for index, array in enumerate(arrays)]
    encoded_names = _encode_names(names, len(prepared))
    magic = _array_magic(prepared, version)
    yield struct.pack("<QQQ", LIST_MAGIC, 0, len(prepared))
    for array, flag in prepared:
        if isinstance(array, SparseRecord):
            yield from params_sparse.encode_record(array, magic, _flag_of, _CPU_DEVICE_TYPE)
            continue
        yield _array_header(magic, array.shape, flag)
        yield array.reshape(-1).view(np.uint8).data
    yield struct.pack("<Q", len(encoded_names))
    for name in encoded_names:
        yield struct.pack("<Q", len(name))
        yield name


def _flag_of(dtype: np.dtype) -> int:
    return _FLAG_BY_KIND[(dtype.kind, dtype.itemsize)]


def _prepare(array: Any, index: int) -> tuple[Any, int]:
    """The array as C-contiguous little-endian data, with its type flag
    (a SparseRecord as it is, with the flag of its values)."""
    if isinstance(array, SparseRecord):
        return array, _prepare(array.values[:0], index)[1]
    value = np.asarray(array)
    flag = _FLAG_BY_KIND.get((value.dtype.kind, value.dtype.itemsize))
    if flag is None:
        supported = ", ".join(sorted({str(dtype) for dtype in DTYPE_BY_FLAG.values()}))
        raise TensorError(f"array {index}: dtype {value.dtype} cannot be saved "
                          f"(supported: {supported})")
    little = np.asarray(value, dtype=DTYPE_BY_FLAG[flag], order="C")  # keeps 0-d arrays 0-d
    return little, flag


def _encode_names(names: Sequence[str] | None, array_count: int) -> list[bytes]:
    if not names:
        return []
    if isinstance(names, str):
        raise InvalidArgumentError("names must be a sequence of strings, not one string")
    if len(names) != array_count:
        raise InvalidArgumentError(f"{len(names)} names for {array_count} arrays")
    encoded = []
    first: dict[str, int] = {}
    for index, name in enumerate(names):
        if not isinstance(name, str):
            raise InvalidArgumentError(f"name {index} is {type(name).__name__}, not str")
        if name in first:
            raise InvalidArgumentError(f"names {first[name]} and {index} are both {name!r}: a "
                                       "file's names must be unique (a reader keeps only one)")
        first[name] = index
        encoded.append(name.encode("utf-8"))
    return encoded


def _array_magic(prepared: list[tuple[Any, int]], version: int | None) -> int:
    has_scalar = any(array.ndim == 0 for array, _ in prepared)
    if version is None:
        version = 3 if has_scalar else 2
    if version not in (2, 3):
        raise InvalidArgumentError(f"version must be 2 or 3, not {version!r}")
    if version == 2 and has_scalar:
        raise InvalidArgumentError("a 0-d array cannot be saved as version 2 "
                                   "(ndim 0 means 'none' there); use version 3")
    if any(array.ndim > MAX_NDIM for array, _ in prepared):
        raise InvalidArgumentError(f"arrays may have at most {MAX_NDIM} dimensions")
    return V2_MAGIC if version == 2 else V3_MAGIC


def _array_header(magic: int, shape: tuple[int, ...], flag: int) -> bytes:
    """Magic, dense storage, shape, context cpu(0) and type flag of one array."""
    ndim = len(shape)
    return struct.pack(f"<Iii{ndim}qiii", magic, 0, ndim, *shape, _CPU_DEVICE_TYPE, 0, flag)
