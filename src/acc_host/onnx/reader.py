"""Reading an ONNX model: a path, a file object, bytes or a ModelProto to an
:class:`acc_host.onnx.proto.ModelProto`, without the ``onnx`` package.

A file is memory-mapped (read into one buffer when small); initializers'
raw_data are views of it. As with any mapped file, a model file must not be
truncated in place while a model read from it is in use.
Tensors stored in external files (``data_location`` EXTERNAL, onnx's
``save(..., save_as_external_data=True)``) are read from the files their
``location`` names, relative to the model's folder, as ``onnx.load`` does:
only for a model read from a path or a named file, and only files inside
that folder. An ``onnx.ModelProto`` the caller built (onnx is imported
then) is serialized once and read the same way: one reader for every
source.
"""

from __future__ import annotations

import mmap
import os
import sys
from typing import Any

from ..errors import InvalidArgumentError, ModelFileError, model_file_os_error
from .proto import ModelProto, ProtoError, TensorProto, parse_model

#: Files of at least this many bytes are memory-mapped (see _file_bytes):
#: reading ResNet-50's 102 MB took 0.12-0.17 s of a 2 s first inference,
#: mapping it nothing, and importing from the mapping as fast.
MMAP_BYTES = 1 << 20


def read_model(model: Any) -> ModelProto:
    """model (a path, a binary file object, bytes, or a ModelProto, ours or
    onnx's) as a ModelProto. A file that cannot be read is a ModelFileError
    (ModelFileNotFoundError for a missing one); one that is not a valid
    ModelProto is a ModelFileError naming the source, the field and the
    byte offset."""
    if isinstance(model, ModelProto):
        return model
    base_dir: str | None = None
    if isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        if isinstance(source, bytes):
            source = os.fsdecode(source)
        try:
            data: Any = _file_bytes(source)
        except OSError as error:
            raise model_file_os_error(source, error) from None
        base_dir = os.path.dirname(os.path.abspath(source))
    elif isinstance(model, (bytes, bytearray, memoryview)):
        data = model
        source = f"<{memoryview(model).nbytes} bytes>"
    elif _is_onnx_model(model):
        try:
            data = model.SerializeToString()
        except Exception as error:  # protobuf's EncodeError, ValueError above 2 GiB
            raise ModelFileError(f"onnx.ModelProto: cannot be serialized: {error}") from None
        source = "onnx.ModelProto"
    elif callable(getattr(model, "read", None)):
        name = getattr(model, "name", None)
        source = name if isinstance(name, str) else f"<{type(model).__name__}>"
        try:
            data = model.read()
        except OSError as error:
            raise model_file_os_error(source, error) from None
        if not isinstance(data, (bytes, bytearray)):
            raise InvalidArgumentError(f"import_model: {source} is not opened in binary mode")
        if isinstance(name, str) and os.path.isfile(name):
            base_dir = os.path.dirname(os.path.abspath(name))
    else:
        raise InvalidArgumentError(f"import_model: expected a path, bytes or an "
                                   f"onnx.ModelProto, got {type(model).__name__}")
    try:
        parsed, external = parse_model(data)
    except ProtoError as error:
        raise ProtoError(f"{source}: not a valid ONNX model (protobuf ModelProto): "
                         f"{error}") from None
    if external and base_dir is not None:
        _read_external(external, base_dir, source)
    return parsed


def _file_bytes(path: str) -> Any:
    """A file's bytes: memory-mapped (read-only) from MMAP_BYTES up, so that
    initializers are views of the page cache, not of a copy; read into
    memory below that, or where the file cannot be mapped."""
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size >= MMAP_BYTES:
            try:
                return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                pass  # not mappable (a special file): read
        return file.read()


def _is_onnx_model(model: Any) -> bool:
    """Whether model is an onnx.ModelProto (onnx is imported by then)."""
    onnx = sys.modules.get("onnx")
    return onnx is not None and isinstance(model, onnx.ModelProto)


def _read_external(tensors: list[TensorProto], base_dir: str, source: str) -> None:
    """Reads each tensor's data from its external file into raw_data (the
    tensor then reads as stored in the model, as after onnx.load)."""
    root = os.path.realpath(base_dir)
    for tensor in tensors:
        info = {entry.key: entry.value for entry in tensor.external_data}
        where = (f"{source}: ONNX tensor {tensor.name!r} (TensorProto at byte "
                 f"{tensor.offset}): external data")
        location = info.get("location", "")
        if not location:
            raise ModelFileError(f"{where}: no location")
        path = os.path.realpath(os.path.join(root, location))
        if os.path.isabs(location) or os.path.commonpath([root, path]) != root:
            raise ModelFileError(f"{where}: location {location!r} is outside the model's "
                                 f"folder {root}")
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else -1
        except ValueError:
            raise ModelFileError(f"{where}: offset {info.get('offset')!r} or length "
                                 f"{info.get('length')!r} is not an integer") from None
        if offset < 0 or length < -1:
            raise ModelFileError(f"{where}: negative offset {offset} or length {length}")
        try:
            with open(path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                if offset > size or (length >= 0 and offset + length > size):
                    raise ModelFileError(f"{where}: bytes {offset} to "
                                         f"{offset + max(length, 0)} of {location!r} asked "
                                         f"for; the file holds {size}")
                file.seek(offset)
                data = file.read(length)
        except OSError as error:
            raise model_file_os_error(path, error) from None
        tensor.raw_data = memoryview(data)
        tensor.data_location = 0
        tensor.external_data = ()
