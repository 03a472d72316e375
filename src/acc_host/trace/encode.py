"""What is recorded of each ABI function's arguments and results.

``ENCODERS[name] = (before, after)``: ``before(blobs, *args)`` describes the
arguments as the host passes them (tensors the plugin reads from host memory
with their bytes), ``after(blobs, status, *args)`` what the plugin gave back
(names, ids, pointers, host tensors it wrote). Both only read what the ABI
says is valid at that moment and never trust a count the plugin returned
beyond the capacity the host gave it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..abi import cdata, header
from ..abi.tensor import TensorSpec, numpy_dtype
from ..errors import AccHostError
from .format import BlobStore

__all__ = ["ENCODERS", "STATUS_CALLS", "tensor", "pointer"]

Encoder = Callable[..., dict[str, Any]]

# Functions returning a status code (the others return a value).
STATUS_CALLS = frozenset({"initialize", "getAccName", "mx_alloc", "mx_free", "mx_releaseAll",
                          "copyToAcc", "copyFromAcc", "accGetExecutor", "supportedOps",
                          "supportedOpsReasons",
                          "loadModel", "unloadModel", "infer", "configure", "executor_forward"})


def pointer(value: Any) -> int:
    return cdata.address(value)


def _text(value: Any) -> str | None:
    return None if value == cdata.NULL else cdata.string(value).decode("utf-8", "replace")


def _texts(array: Any, count: int) -> list[str | None]:
    return [_text(array[index]) for index in range(max(count, 0))]


def _nbytes(shape: list[int], dtype: int) -> int:
    """The bytes of a tensor as described (0 when the description is not
    one: the call itself will say so)."""
    try:
        return TensorSpec(tuple(shape), numpy_dtype(dtype)).nbytes
    except AccHostError:
        return 0


def tensor(blobs: BlobStore, value: Any, with_data: bool) -> dict[str, Any]:
    """One MXTensor; its bytes when with_data and they are in host memory."""
    ndim = min(int(value.shape_len), header.MAX_NDIM)
    shape = [int(value.shape[index]) for index in range(ndim)] if value.shape != cdata.NULL else []
    record: dict[str, Any] = {"shape": shape, "dtype": int(value.dtype), "dev": int(value.dev_id),
                              "ptr": pointer(value.data), "nbytes": _nbytes(shape, value.dtype)}
    if value.layout != cdata.NULL:
        record["layout"] = _text(value.layout)
    if value.isSparse:
        # The storage kind (MXTensor.isSparse: 1 CSR, 2 row-sparse, ABI 1.2)
        # and its counts, recorded without the arrays.
        record["sparse"] = int(value.isSparse)
        if value.data != cdata.NULL and value.isSparse == header.STORAGE_CSR:
            record["nnz"] = int(cdata.cast("SparseTensor *", value.data).num_nonzero)
        elif value.data != cdata.NULL and value.isSparse == header.STORAGE_ROW_SPARSE:
            record["rows_stored"] = int(cdata.cast("RowSparseTensor *",
                                                   value.data).num_rows_stored)
    elif with_data and value.dev_id == header.HOST_DEVICE and value.data != cdata.NULL:
        record["data"] = blobs.put(cdata.read(value.data, record["nbytes"]))
    return record


def _tensors(blobs: BlobStore, array: Any, count: int, with_data: bool) -> list[dict[str, Any]]:
    return [tensor(blobs, array[index], with_data) for index in range(max(count, 0))]


def _nothing(_blobs: BlobStore, *_args: Any) -> dict[str, Any]:
    return {}


def _initialize(_blobs: BlobStore, version: int) -> dict[str, Any]:
    return {"version": int(version)}


def _name_before(_blobs: BlobStore, _buffer: Any, size: int) -> dict[str, Any]:
    return {"size": int(size)}


def _name_after(_blobs: BlobStore, status: int, buffer: Any, size: int) -> dict[str, Any]:
    raw = cdata.read(buffer, int(size))
    return {"name": raw.split(b"\0", 1)[0].decode("ascii", "replace")} if status == 0 else {}


def _alloc_before(_blobs: BlobStore, dev_id: int, size: int, _out: Any) -> dict[str, Any]:
    return {"dev": int(dev_id), "size": int(size)}


def _alloc_after(_blobs: BlobStore, status: int, _dev: int, _size: int, out: Any
                 ) -> dict[str, Any]:
    return {"ptr": pointer(out[0])} if status == 0 else {}


def _free(_blobs: BlobStore, dev_id: int, ptr: Any) -> dict[str, Any]:
    return {"dev": int(dev_id), "ptr": pointer(ptr)}


def _device(_blobs: BlobStore, dev_id: int) -> dict[str, Any]:
    return {"dev": int(dev_id)}


def _copy_to(blobs: BlobStore, dst: Any, src: Any) -> dict[str, Any]:
    return {"dst": tensor(blobs, dst[0], False), "src": tensor(blobs, src[0], True)}


def _copy_from_before(blobs: BlobStore, dst: Any, src: Any) -> dict[str, Any]:
    return {"dst": tensor(blobs, dst[0], False), "src": tensor(blobs, src[0], False)}


def _copy_from_after(blobs: BlobStore, status: int, dst: Any, _src: Any) -> dict[str, Any]:
    return {"dst": tensor(blobs, dst[0], True)} if status == 0 else {}


def _executor_before(blobs: BlobStore, op_name: Any, inputs: Any, outputs: Any, num_in: int,
                     num_out: int, keys: Any, values: Any, num_attrs: int, dev_id: int,
                     _out: Any) -> dict[str, Any]:
    return {"op": _text(op_name), "inputs": _tensors(blobs, inputs, num_in, False),
            "outputs": _tensors(blobs, outputs, num_out, False),
            "attrs": dict(zip(_texts(keys, num_attrs), _texts(values, num_attrs))),
            "dev": int(dev_id)}


def _executor_after(_blobs: BlobStore, status: int, *args: Any) -> dict[str, Any]:
    return {"executor": pointer(args[-1][0])} if status == 0 else {}


def _forward_before(blobs: BlobStore, handle: Any, inputs: Any, num_in: int, outputs: Any,
                    num_out: int) -> dict[str, Any]:
    return {"executor": pointer(handle), "inputs": _tensors(blobs, inputs, num_in, True),
            "outputs": _tensors(blobs, outputs, num_out, False)}


def _forward_after(blobs: BlobStore, status: int, _handle: Any, _inputs: Any, _num_in: int,
                   outputs: Any, num_out: int) -> dict[str, Any]:
    return {"outputs": _tensors(blobs, outputs, num_out, True)} if status == 0 else {}


def _supported_before(blobs: BlobStore, json: Any, names: Any, data: Any, num_data: int,
                      dev_id: int, _ids: Any, capacity: int, _count: Any) -> dict[str, Any]:
    return {"json": blobs.put(cdata.string(json)), "names": _texts(names, num_data),
            "data": _tensors(blobs, data, num_data, False), "dev": int(dev_id),
            "capacity": int(capacity)}


def _supported_after(_blobs: BlobStore, status: int, *args: Any) -> dict[str, Any]:
    ids, capacity, count = args[5], int(args[6]), args[7]
    found = int(count[0])
    if status != 0:
        return {}
    return {"count": found, "ids": [int(ids[index]) for index in range(min(max(found, 0),
                                                                        capacity))]}


def _reasons_before(blobs: BlobStore, *args: Any) -> dict[str, Any]:
    return {**_supported_before(blobs, *args[:8]), "reason_size": int(args[9])}


def _reasons_after(blobs: BlobStore, status: int, *args: Any) -> dict[str, Any]:
    """The ids, and the reasons the plugin gave for the nodes it declined."""
    out = _supported_after(blobs, status, *args)
    if status != 0:
        return out
    capacity, reasons, size = int(args[6]), args[8], int(args[9])
    raw = cdata.read(reasons, capacity * size) if capacity > 0 and size > 0 else b""
    given = {}
    for node in range(capacity if raw else 0):
        slot = raw[node * size:(node + 1) * size]
        if slot[:1] != b"\0":
            given[str(node)] = slot.split(b"\0", 1)[0].decode("utf-8", "replace")
    return {**out, "reasons": given}


def _load_before(blobs: BlobStore, model_id: Any, json: Any, names: Any, data: Any,
                 num_data: int, dev_id: int) -> dict[str, Any]:
    return {"model_id": _text(model_id), "json": blobs.put(cdata.string(json)),
            "names": _texts(names, num_data), "data": _tensors(blobs, data, num_data, True),
            "dev": int(dev_id)}


def _unload(_blobs: BlobStore, model_id: Any) -> dict[str, Any]:
    return {"model_id": _text(model_id)}


def _infer_before(blobs: BlobStore, model_id: Any, in_names: Any, out_names: Any, inputs: Any,
                  outputs: Any, num_in: int, num_out: int) -> dict[str, Any]:
    return {"model_id": _text(model_id), "in_names": _texts(in_names, num_in),
            "out_names": _texts(out_names, num_out),
            "inputs": _tensors(blobs, inputs, num_in, True),
            "outputs": _tensors(blobs, outputs, num_out, False)}


def _infer_after(blobs: BlobStore, status: int, *args: Any) -> dict[str, Any]:
    outputs, num_out = args[4], int(args[6])
    return {"outputs": _tensors(blobs, outputs, num_out, True)} if status == 0 else {}


def _configure_before(_blobs: BlobStore, keys: Any, values: Any, count: int, dev_id: int,
                      *_out: Any) -> dict[str, Any]:
    return {"settings": dict(zip(_texts(keys, count), _texts(values, count))),
            "dev": int(dev_id)}


def _configure_after(_blobs: BlobStore, status: int, *args: Any) -> dict[str, Any]:
    out_keys, out_values, count = args[4][0], args[5][0], int(args[6][0])
    if status != 0 or count <= 0 or out_keys == cdata.NULL or out_values == cdata.NULL:
        return {"answer": {}} if status == 0 else {}
    return {"answer": dict(zip(_texts(out_keys, count), _texts(out_values, count)))}


ENCODERS: dict[str, tuple[Encoder, Encoder]] = {
    "getAccApiVersion": (_nothing, _nothing),
    "initialize": (_initialize, _nothing),
    "getAccName": (_name_before, _name_after),
    "getNumAcc": (_nothing, _nothing),
    "supportsImperative": (_nothing, _nothing),
    "mx_alloc": (_alloc_before, _alloc_after),
    "mx_free": (_free, _nothing),
    "mx_releaseAll": (_device, _nothing),
    "copyToAcc": (_copy_to, _nothing),
    "copyFromAcc": (_copy_from_before, _copy_from_after),
    "accGetExecutor": (_executor_before, _executor_after),
    "executor_forward": (_forward_before, _forward_after),
    "supportedOps": (_supported_before, _supported_after),
    "supportedOpsReasons": (_reasons_before, _reasons_after),
    "loadModel": (_load_before, _nothing),
    "unloadModel": (_unload, _nothing),
    "infer": (_infer_before, _infer_after),
    "configure": (_configure_before, _configure_after),
}
