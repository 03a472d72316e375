"""Device memory (mxnet_acc.h section 5), for libraries whose
supportsImperative() is 1: round trips per dtype and device, zero-sized
allocations, refused mismatched copies, and alloc/free/releaseAll balance.

Ids: memory.roundtrip.<dtype> (one per TensorDType), memory.zero_size,
memory.copy_mismatch, memory.balance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..abi import cdata, header
from ..abi.memory import DeviceBuffer
from ..abi.tensor import TensorArray, TensorSpec
from .report import CheckFailed
from .session import ERR_INVALID_ARG, ERR_NOT_FOUND, Session

__all__ = ["checks", "DTYPES"]

DTYPES = ("float32", "float64", "float16", "uint8", "int32", "int8", "int64")
# Shapes of every round trip: a block, an odd 1-D length, a scalar, an empty tensor.
_SHAPES: tuple[tuple[int, ...], ...] = ((2, 3, 5), (257,), (), (0, 4))
_ALLOC_SIZES = (0, 1, 7, 64, 4096, 65539, 3, 1 << 20)


def _pattern(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Random bytes reinterpreted as dtype (every bit pattern, NaNs included)."""
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = rng.integers(0, 256, size, dtype=np.uint8)
    return np.frombuffer(raw.tobytes(), dtype=dtype).reshape(shape).copy()


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def check_roundtrip(session: Session, dtype_name: str) -> str:
    """copyToAcc then copyFromAcc gives back every byte, on every device,
    with several buffers alive at once (no aliasing)."""
    library = session.require_imperative()
    dtype = np.dtype(dtype_name)
    rng = np.random.default_rng(sum(map(ord, dtype_name)))
    for dev in session.require_devices():
        buffers: list[tuple[DeviceBuffer, np.ndarray]] = []
        try:
            for shape in _SHAPES:
                for _ in range(2):
                    value = _pattern(rng, shape, dtype)
                    buffer = DeviceBuffer(library, dev, TensorSpec(shape, dtype))
                    buffer.copy_from_host(value)
                    buffers.append((buffer, value))
            for buffer, value in buffers:
                out = np.frombuffer(b"\x5a" * value.nbytes, dtype=dtype).reshape(
                    value.shape).copy()
                buffer.to_host(out)
                if not _same_bytes(out, value):
                    wrong = sum(a != b for a, b in zip(out.tobytes(), value.tobytes()))
                    raise CheckFailed(f"device {dev}: {value.shape} {dtype_name}: {wrong} of "
                                      f"{value.nbytes} bytes differ after copyToAcc/copyFromAcc")
        finally:
            for buffer, _ in buffers:
                buffer.free()
    shapes = ", ".join(str(shape) for shape in _SHAPES)
    return f"devices {session.devices}: shapes {shapes}, two buffers each"


def _alloc(session: Session, dev: int, size: int) -> Any:
    pointer = cdata.new("void **")
    status = session.require_library().unchecked("mx_alloc", dev, size, pointer)
    session.expect_status(f"mx_alloc({dev}, {size})", status, header.OK)
    if pointer[0] == cdata.NULL:
        raise CheckFailed(f"mx_alloc({dev}, {size}) returned MX_ACC_OK and a NULL pointer")
    return pointer[0]


def check_zero_size(session: Session) -> str:
    """mx_alloc(dev, 0) gives valid, unique pointers; mx_free(NULL) is a no-op."""
    library = session.require_imperative()
    for dev in session.require_devices():
        first, second = _alloc(session, dev, 0), _alloc(session, dev, 0)
        if first == second:
            raise CheckFailed(f"device {dev}: two mx_alloc(0) calls returned the same pointer")
        for pointer in (first, second):
            session.expect_status(f"mx_free({dev}, <size 0 pointer>)",
                                  library.unchecked("mx_free", dev, pointer), header.OK)
        session.expect_status(f"mx_free({dev}, NULL)",
                              library.unchecked("mx_free", dev, cdata.NULL), header.OK)
    return "two unique pointers per device; mx_free(NULL) is MX_ACC_OK"


def _descriptor(spec: TensorSpec, dev: int, pointer: Any, keep: Any = None) -> TensorArray:
    array = TensorArray([spec], dev)
    array.set_data(0, pointer, dev, keep)
    return array


def check_copy_mismatch(session: Session) -> str:
    """Copies between tensors of different element counts or dtypes fail
    with MX_ACC_ERR_INVALID_ARG and write nothing."""
    library = session.require_imperative()
    dev = session.require_devices()[0]
    device = DeviceBuffer(library, dev, TensorSpec((4, 4), np.dtype(np.float32)))
    try:
        device.copy_from_host(np.arange(16, dtype=np.float32).reshape(4, 4))
        # Read back through copyFromAcc itself (memory.roundtrip.* check that
        # it is faithful): a refused copy must not change what it reads.
        before = device.to_host()
        cases = (("element count", TensorSpec((3, 4), np.dtype(np.float32))),
                 ("dtype", TensorSpec((4, 4), np.dtype(np.int32))))
        for what, host_spec in cases:
            host = np.full(host_spec.shape, 7, host_spec.dtype)
            host_side = _descriptor(host_spec, header.HOST_DEVICE,
                                    cdata.from_buffer(host, require_writable=True), host)
            device_side = _descriptor(device.spec, dev, device.pointer)
            session.expect_status(f"copyToAcc with a different {what}",
                                  library.unchecked("copyToAcc",
                                                    device_side.pointer, host_side.pointer),
                                  ERR_INVALID_ARG)
            session.expect_status(f"copyFromAcc with a different {what}",
                                  library.unchecked("copyFromAcc",
                                                    host_side.pointer, device_side.pointer),
                                  ERR_INVALID_ARG)
            if not np.all(host == 7):
                raise CheckFailed(f"copyFromAcc with a different {what} failed but wrote the "
                                  "host buffer")
        if device.to_host().tobytes() != before.tobytes():
            raise CheckFailed("a refused copyToAcc changed the device buffer")
    finally:
        device.free()
    return "element-count and dtype mismatches refused both ways, nothing written"


def _memory_counters(session: Session, dev: int) -> dict[str, int] | None:
    """configure(query=memory) when the plugin answers it (optional key)."""
    library = session.require_library()
    try:
        answer = library.configure(dev, {"query": "memory"})
        return {key: int(value) for key, value in answer.items()
                if key in ("allocations", "bytes_in_use")}
    except Exception:  # noqa: BLE001  (not answered: behaviour alone is checked)
        return None


def check_balance(session: Session) -> str:
    """Every allocation can be freed exactly once; a second free, or a free
    after mx_releaseAll, is MX_ACC_ERR_NOT_FOUND; mx_releaseAll frees all
    that is left; where the plugin answers query=memory its counters return
    to where they started."""
    library = session.require_imperative()
    notes = []
    for dev in session.require_devices():
        with library.device_lock(dev):
            before = _memory_counters(session, dev)
            pointers = [_alloc(session, dev, size) for size in _ALLOC_SIZES]
            if len({cdata.address(p) for p in pointers}) != len(pointers):
                raise CheckFailed(f"device {dev}: mx_alloc returned the same pointer twice")
            during = _memory_counters(session, dev)
            if before is not None and during is not None and "allocations" in before:
                grown = during.get("allocations", 0) - before["allocations"]
                if grown != len(pointers):
                    raise CheckFailed(f"device {dev}: query=memory counts {grown} new "
                                      f"allocations after {len(pointers)} mx_alloc calls")
            half = len(pointers) // 2
            for pointer in pointers[:half]:
                session.expect_status(f"mx_free({dev}, ptr)",
                                      library.unchecked("mx_free", dev, pointer), header.OK)
            session.expect_status(f"a second mx_free({dev}, ptr) of freed memory",
                                  library.unchecked("mx_free", dev, pointers[0]), ERR_NOT_FOUND)
            if len(session.devices) > 1:
                other = next(d for d in session.devices if d != dev)
                session.expect_status(f"mx_free({other}, ptr) of memory of device {dev}",
                                      library.unchecked("mx_free",
                                                        other, pointers[-1]), ERR_NOT_FOUND)
            session.expect_status(f"mx_releaseAll({dev})", library.unchecked("mx_releaseAll",
                                                                             dev), header.OK)
            session.expect_status(f"mx_free({dev}, ptr) after mx_releaseAll",
                                  library.unchecked("mx_free", dev, pointers[-1]), ERR_NOT_FOUND)
            after = _memory_counters(session, dev)
            if after is not None and "allocations" in after and after["allocations"] != 0:
                raise CheckFailed(f"device {dev}: query=memory reports {after['allocations']} "
                                  "allocations after mx_releaseAll")
            if after is not None and after.get("bytes_in_use", 0) != 0:
                raise CheckFailed(f"device {dev}: query=memory reports {after['bytes_in_use']} "
                                  "bytes in use after mx_releaseAll")
            # Usable again afterwards.
            pointer = _alloc(session, dev, 128)
            session.expect_status(f"mx_free({dev}, ptr)",
                                  library.unchecked("mx_free", dev, pointer), header.OK)
        notes.append(str(dev))
    counted = "; query=memory counters agree" if _memory_counters(
        session, session.devices[0]) is not None else "; no query=memory (counters not checked)"
    return (f"devices {', '.join(notes)}: {len(_ALLOC_SIZES)} allocations, double free and free "
            f"after releaseAll refused{counted}")


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    for dtype in DTYPES:
        yield f"memory.roundtrip.{dtype}", functools.partial(check_roundtrip, session, dtype)
    yield "memory.zero_size", lambda: check_zero_size(session)
    yield "memory.copy_mismatch", lambda: check_copy_mismatch(session)
    yield "memory.balance", lambda: check_balance(session)

