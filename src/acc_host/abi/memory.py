"""Accelerator memory: buffers from a plugin's mx_alloc().

A :class:`DeviceBuffer` holds one allocation on one device and frees it with
mx_free() when freed or garbage-collected (its ``__del__``: a finalizer
object per buffer cost more than the imperative operator that made it).
At interpreter exit the registry calls mx_releaseAll() for every device
instead, so buffers still alive then are not freed one by one.

Freed small buffers are pooled: a collected buffer of at most
:data:`POOL_MAX_BYTES` goes to its device's pool (at most
:data:`POOL_DEVICE_BYTES` per device) instead of mx_free(), and the next
buffer of exactly that size on the device takes it instead of calling
mx_alloc() (an imperative operator's result on cpu_ref: mx_alloc, the
finalizer and mx_free were a third of the call). The pointer handed to the
plugin is still exactly one mx_alloc() returned, for as many bytes.
:func:`release_pooled` gives the pooled allocations back with mx_free():
``mx.nd.waitall()``, ``dispatch.clear_cache``, ``configure()`` (so that a
memory query or a new memory size sees only live buffers), the start of
a trace (set_tracer: its replay maps only pointers allocated in it) and
mx_releaseAll() (which frees them itself) call it. Explicit ``free()``,
checked mode and traced libraries never pool.

In checked mode (``MXNET_ACC_CHECK_OUTPUTS=1`` when the buffer is made) a
buffer is allocated with guard bytes after it, read back after every
copyToAcc() into it and by :meth:`DeviceBuffer.checked_host` (after an
infer() or a forward that wrote it), and copyFromAcc() fills a host
scratch with guards on both sides (:mod:`.guards`).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import LibraryError, PluginContractError, TensorError
from .guards import (
    CHECK_OUTPUTS_VARIABLE,
    GUARD_BYTES,
    GUARD_PATTERN,
    check_outputs_enabled,
    overwritten,
    scratch,
)
from .header import HOST_DEVICE, ffi
from .library import AccLibrary
from .tensor import TensorArray, TensorSpec, contiguous, host_pointer

__all__ = ["DeviceBuffer", "HostCopies", "POOL_MAX_BYTES", "POOL_DEVICE_BYTES",
           "release_pooled", "pooled", "device_pool", "checked_mode"]


def _free(library: AccLibrary, dev_id: int, pointer: Any, wait: bool = False) -> None:
    # A failure here has no caller to report to; the plugin's own
    # bookkeeping (mx_releaseAll at exit) still reclaims the memory.
    library.release(dev_id, lambda: library.unchecked("mx_free", dev_id, pointer), wait)


class _Exit:
    """Set once the interpreter exits: buffers collected after that are
    left to the registry's mx_releaseAll (the plugin may be gone)."""

    exiting = False


def _exiting() -> None:
    _Exit.exiting = True


atexit.register(_exiting)
# free() is check-and-set across threads: two free()s never both mx_free.
_free_lock = threading.Lock()

#: Collected buffers of at most this many bytes are pooled for reuse.
POOL_MAX_BYTES = 1 << 16
#: The most bytes one device's pool holds; a buffer beyond is freed.
POOL_DEVICE_BYTES = 1 << 20


class _Pool:
    """One device's pooled allocations: pointers by allocation size. Taken
    and given under ``lock`` without waiting (a collector running __del__
    on a thread that holds it frees the buffer instead of pooling it)."""

    __slots__ = ("lock", "stacks", "nbytes")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stacks: dict[int, list[Any]] = {}
        self.nbytes = 0

    def take(self, size: int) -> Any:
        """A pooled pointer of size bytes, or None."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            stack = self.stacks.get(size)
            if not stack:
                return None
            self.nbytes -= size
            return stack.pop()
        finally:
            self.lock.release()

    def give(self, size: int, pointer: Any) -> bool:
        """Pools pointer (size bytes); False when the pool is full or busy."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            if self.nbytes + size > POOL_DEVICE_BYTES:
                return False
            stack = self.stacks.get(size)
            if stack is None:
                stack = self.stacks[size] = []
            stack.append(pointer)
            self.nbytes += size
            return True
        finally:
            self.lock.release()

    def drain(self) -> list[Any]:
        """Every pooled pointer, the pool left empty."""
        with self.lock:
            pointers = [pointer for stack in self.stacks.values() for pointer in stack]
            self.stacks.clear()
            self.nbytes = 0
        return pointers


_pools: dict[tuple[AccLibrary, int], _Pool] = {}


def device_pool(library: AccLibrary, dev_id: int) -> _Pool:
    """The pool of library's device dev_id (made at its first use; the same
    object for the process's life: release_pooled empties it)."""
    return _pool(library, dev_id)


def _pool(library: AccLibrary, dev_id: int) -> _Pool:
    pool = _pools.get((library, dev_id))
    if pool is None:
        pool = _pools.setdefault((library, dev_id), _Pool())
    return pool


def release_pooled(library: AccLibrary | None = None, dev_id: int | None = None,
                   free: bool = True) -> int:
    """mx_free of the pooled allocations of library's device dev_id (every
    device of library when None; every library when library is None),
    waiting for each device's lock; with free False they are only
    forgotten (mx_releaseAll frees them). Returns how many there were."""
    count = 0
    for (owner, device), pool in list(_pools.items()):
        if (library is not None and owner is not library) or (
                dev_id is not None and device != dev_id):
            continue
        pointers = pool.drain()
        count += len(pointers)
        if free:
            for pointer in pointers:
                _free(owner, device, pointer, wait=True)
    return count


def pooled(library: AccLibrary, dev_id: int) -> int:
    """How many freed allocations library's device dev_id holds pooled."""
    pool = _pools.get((library, dev_id))
    return 0 if pool is None else sum(len(stack) for stack in pool.stacks.values())


_ENVIRON_DATA: Any = getattr(os.environ, "_data", None)
_CHECK_KEY: Any = None
if _ENVIRON_DATA is not None:
    _CHECK_KEY = os.environ.encodekey(CHECK_OUTPUTS_VARIABLE)  # type: ignore[attr-defined]


def checked_mode() -> bool:
    """Whether a buffer made now would be guarded (checked mode)."""
    return _checked_mode()


def _checked_mode() -> bool:
    """check_outputs_enabled(), read without os.environ's Mapping layers
    when the platform's environ keeps them in a plain dict (os.environ
    writes go through to it, so a change is seen at the next buffer)."""
    if _ENVIRON_DATA is None:
        return check_outputs_enabled()
    value = _ENVIRON_DATA.get(_CHECK_KEY)
    return value is not None and check_outputs_enabled()


class DeviceBuffer:
    """An array-sized allocation on device dev_id of library."""

    __slots__ = ("library", "dev_id", "spec", "guarded", "pointer", "_pool", "_size", "_freed",
                 "_descriptor_array", "_host_array", "_readout", "_whole", "_whole_host",
                 "__weakref__")

    def __init__(self, library: AccLibrary, dev_id: int, spec: TensorSpec) -> None:
        if not library.supports_imperative:
            raise LibraryError(
                f"{library.name}: the library manages no device memory (supportsImperative() "
                "is 0)", library.path)
        self.library = library
        self.dev_id = dev_id
        self.spec = spec
        # Checked mode: the allocation is 2 * GUARD_BYTES longer: the guard
        # after the buffer's bytes, then slack, so that a copy of the bytes
        # and the guard (_whole, see _copy_whole) that overruns them stays
        # inside the allocation too.
        self.guarded = guarded = _checked_mode()
        size = spec.nbytes + (2 * GUARD_BYTES if guarded else 0)
        self._pool = pool = _pool(library, dev_id) if (
            size <= POOL_MAX_BYTES and not guarded and not library.traced) else None
        self._size = size
        pointer = None if pool is None else pool.take(size)
        if pointer is None:
            address = ffi.new("void **")
            with library.device_lock(dev_id):  # library.call, the message only for a failure
                status = library.lib.mx_alloc(dev_id, size, address)
                if status:
                    library.check(library.name, "mx_alloc", status,
                                  f"{size} bytes on device {dev_id}")
            pointer = address[0]
        self.pointer = pointer
        # The descriptors of copies, made at the first copy (see _descriptor):
        # an imperative operator's output may never be copied.
        self._descriptor_array: TensorArray | None = None
        self._host_array: TensorArray | None = None
        self._readout: tuple[Any, Any, Any, Any] | None = None  # see to_host
        # Set by free(), or by __del__ (which runs once nobody holds the
        # buffer): a plain attribute, read per call by the bound steps.
        self._freed = False
        if self.guarded:
            whole = TensorSpec((spec.nbytes + GUARD_BYTES,), np.dtype(np.uint8))
            self._whole = TensorArray([whole], dev_id)
            self._whole.set_data(0, self.pointer, dev_id)
            self._whole_host = TensorArray([whole], HOST_DEVICE)
            initial = self._whole_array()
            initial[:spec.nbytes] = 0
            initial[spec.nbytes:] = GUARD_PATTERN
            with library.device_lock(dev_id):
                self._copy_whole("copyToAcc", initial)

    @classmethod
    def pooled_or_new(cls, library: AccLibrary, dev_id: int, spec: TensorSpec, size: int,
                      pool: Any) -> DeviceBuffer:
        """DeviceBuffer(library, dev_id, spec) for a caller that worked out
        once what the constructor works out per buffer: size is
        spec.nbytes (at most POOL_MAX_BYTES), pool is
        :func:`device_pool` (library, dev_id), library has imperative mode
        and is not traced, and checked mode is off (the caller reads
        :func:`checked_mode` per call). A pooled allocation is taken
        without the constructor's steps; otherwise the constructor runs."""
        # pool.take(size), without its frame
        lock = pool.lock
        if not lock.acquire(blocking=False):
            return cls(library, dev_id, spec)
        stack = pool.stacks.get(size)
        if not stack:
            lock.release()
            return cls(library, dev_id, spec)
        pool.nbytes -= size
        pointer = stack.pop()
        lock.release()
        buffer = cls.__new__(cls)
        buffer.library = library
        buffer.dev_id = dev_id
        buffer.spec = spec
        buffer.guarded = False
        buffer._pool = pool
        buffer._size = size
        buffer.pointer = pointer
        buffer._descriptor_array = None
        buffer._host_array = None
        buffer._readout = None
        buffer._freed = False
        return buffer

    @property
    def _descriptor(self) -> TensorArray:
        """The buffer's own descriptor (for copies), made once."""
        descriptor = self._descriptor_array
        if descriptor is None:
            descriptor = TensorArray([self.spec], self.dev_id)
            descriptor.set_data(0, self.pointer, self.dev_id)
            self._descriptor_array = descriptor
        return descriptor

    @property
    def _host(self) -> TensorArray:
        """The host-side descriptor every copy of this buffer reuses (pointed
        at the copy's array under the device lock), made once."""
        host = self._host_array
        if host is None:
            host = self._host_array = TensorArray([self.spec], HOST_DEVICE)
        return host

    @property
    def closed(self) -> bool:
        return self._freed

    def _check_open(self) -> None:
        if self.closed:
            raise TensorError("the device buffer was freed")

    def _host_descriptor(self, array: np.ndarray, writable: bool) -> TensorArray:
        if array.shape != self.spec.shape or array.dtype != self.spec.dtype:
            raise TensorError(
                f"host array {array.shape} {array.dtype} does not match the device buffer "
                f"{self.spec.shape} {self.spec.dtype}")
        pointer = host_pointer(array, writable=writable)  # checks the layout
        self._host.set_data(0, pointer, HOST_DEVICE, pointer)
        return self._host

    def _whole_array(self) -> np.ndarray:
        """A host array for _copy_whole: the buffer's bytes and the guard,
        a view of GUARD_BYTES more (slack for a copy that overruns it)."""
        size = self.spec.nbytes + GUARD_BYTES
        return np.empty(size + GUARD_BYTES, np.uint8)[:size]

    def _copy_whole(self, call: str, array: np.ndarray) -> None:
        """copyToAcc or copyFromAcc of the buffer's bytes and the guard after
        them from or into array (from _whole_array); the caller holds the
        device lock."""
        pointer = host_pointer(array, writable=call == "copyFromAcc")
        self._whole_host.set_data(0, pointer, HOST_DEVICE, pointer)
        first, second = (self._whole, self._whole_host) if call == "copyToAcc" else (
            self._whole_host, self._whole)
        self.library.call(None, call, first.pointer, second.pointer)

    def checked_host(self, call: str, what: str) -> np.ndarray:
        """Checked mode: the buffer's elements as a new host array, after
        checking the guard after them, which call (e.g. "infer (<model>)")
        may have overwritten; a PluginContractError naming what (e.g.
        "output 'y'") if it did, the guard then written again (so that
        the buffer can be used on). Without checked mode: to_host()."""
        if not self.guarded:
            return self.to_host()
        self._check_open()
        nbytes = self.spec.nbytes
        whole = self._whole_array()
        with self.library.device_lock(self.dev_id):
            self._copy_whole("copyFromAcc", whole)
            changed = overwritten(whole[nbytes:])
            if changed:
                whole[nbytes:] = GUARD_PATTERN
                self._copy_whole("copyToAcc", whole)
        if changed:
            raise PluginContractError(
                f"{self.library.name}: {call} wrote past the end of {what}: {changed} of the "
                f"{GUARD_BYTES} guard bytes {CHECK_OUTPUTS_VARIABLE} put after its device "
                "buffer were overwritten (a buffer overrun), or copyFromAcc, which read them "
                "back, did not return the device's bytes")
        return whole[:nbytes].view(self.spec.dtype).reshape(self.spec.shape)

    def fill(self, write: Callable[[np.ndarray], None]) -> None:
        """Sets the buffer's elements to what write(values) writes into a
        host array of its shape and dtype. In checked mode the array is
        copied in with the guard after it, in one copyToAcc over the whole
        allocation (so the guard is written again, not checked: checked
        infer() fills its outputs with the canary this way)."""
        nbytes = self.spec.nbytes
        whole = self._whole_array() if self.guarded else np.empty(nbytes, np.uint8)
        write(whole[:nbytes].view(self.spec.dtype).reshape(self.spec.shape))
        if not self.guarded:
            self.copy_from_host(whole.view(self.spec.dtype).reshape(self.spec.shape))
            return
        self._check_open()
        whole[nbytes:] = GUARD_PATTERN
        with self.library.device_lock(self.dev_id):
            self._copy_whole("copyToAcc", whole)

    def copy_from_host(self, array: np.ndarray) -> None:
        """copyToAcc: host array -> this buffer (in checked mode, then the
        guard after it is checked)."""
        self._check_open()
        values = contiguous(np.asarray(array))
        library = self.library
        # The host descriptor is shared by every copy of this buffer: it is
        # pointed at this call's array under the device lock, or two threads
        # copying at once would each copy the other's array.
        with library.device_lock(self.dev_id):  # the plugin's error message too
            source = self._host_descriptor(values, writable=False)
            library.call(None, "copyToAcc", self._descriptor.pointer, source.pointer)
            if self.guarded:
                self.checked_host("copyToAcc", repr(self))

    def to_host(self, out: np.ndarray | None = None) -> np.ndarray:
        """copyFromAcc: this buffer -> a new (or the given) host array (in
        checked mode, through a host scratch with guards on both sides)."""
        if self._freed:
            self._check_open()
        spec = self.spec
        library = self.library
        if out is None and not self.guarded:
            # The common case: a new array, whose layout needs no check.
            result = np.empty(spec.shape, spec.dtype)
            pointer = ffi.from_buffer(result, require_writable=True)
            readout = self._readout
            if readout is None:  # the device lock and both descriptors, once
                (_, slot, _), = self._host.slots()
                readout = self._readout = (library.device_lock(self.dev_id), slot,
                                           self._host.pointer, self._descriptor.pointer)
            lock, slot, host_pointer, device_pointer = readout
            with lock:  # the shared host descriptor (copy_from_host) too
                slot.data = pointer  # `pointer` keeps result's memory for the call
                status = library.lib.copyFromAcc(host_pointer, device_pointer)
                slot.data = ffi.NULL
                if status:
                    library.check(library.name, "copyFromAcc", status)
            return result
        result = np.empty(spec.shape, spec.dtype) if out is None else out
        nbytes = spec.nbytes
        around = scratch(nbytes) if self.guarded else None
        if around is not None and (result.shape != self.spec.shape
                                   or result.dtype != self.spec.dtype):
            raise TensorError(f"host array {result.shape} {result.dtype} does not match the "
                              f"device buffer {self.spec.shape} {self.spec.dtype}")
        with library.device_lock(self.dev_id):  # the shared descriptor too (copy_from_host)
            target = self._host_descriptor(result if around is None else around[
                GUARD_BYTES:GUARD_BYTES + nbytes].view(result.dtype).reshape(result.shape),
                writable=True)
            library.call(None, "copyFromAcc", target.pointer, self._descriptor.pointer)
        if around is not None:
            for side, guard in (("before the start", around[:GUARD_BYTES]),
                                ("past the end", around[GUARD_BYTES + nbytes:])):
                changed = overwritten(guard)
                if changed:
                    raise PluginContractError(
                        f"{library.name}: copyFromAcc of {self!r} wrote {side} of the host "
                        f"array it was given: {changed} of the {GUARD_BYTES} guard bytes "
                        f"{CHECK_OUTPUTS_VARIABLE} put there were overwritten (a buffer overrun)")
            result[...] = around[GUARD_BYTES:GUARD_BYTES + nbytes].view(
                result.dtype).reshape(result.shape)
        return result

    def free(self) -> None:
        """mx_free now, waiting for the device (idempotent)."""
        with _free_lock:
            if getattr(self, "_freed", True):  # freed, or never allocated
                return
            self._freed = True
        _free(self.library, self.dev_id, self.pointer, wait=True)

    def __del__(self) -> None:
        """mx_free once nobody holds the buffer: at once when the device's
        lock is free, else by the library's release thread (never waiting
        for another thread's call, acc_host.abi.releases). Nothing at exit
        (mx_releaseAll) or for a buffer whose allocation failed."""
        if getattr(self, "_freed", True) or _Exit.exiting:
            return
        self._freed = True
        pool = self._pool
        if pool is not None and not self.library.traced:
            # pool.give(size, pointer), without its frame
            lock = pool.lock
            if lock.acquire(blocking=False):
                size = self._size
                if pool.nbytes + size <= POOL_DEVICE_BYTES:
                    stack = pool.stacks.get(size)
                    if stack is None:
                        stack = pool.stacks[size] = []
                    stack.append(self.pointer)
                    pool.nbytes += size
                    lock.release()
                    return
                lock.release()
        try:
            _free(self.library, self.dev_id, self.pointer)
        except Exception:  # noqa: BLE001  (no caller; mx_releaseAll reclaims it)
            pass

    def __repr__(self) -> str:
        state = "freed" if self.closed else f"device {self.dev_id}"
        return f"DeviceBuffer({self.library.name}, {self.spec.shape}, {self.spec.dtype}, {state})"


class HostCopies:
    """Copies between host arrays and fixed device buffers of one device,
    around a call: the direct path's per-run work (acc_host.runtime.
    direct_run). Each buffer's host descriptor is built here, once; a run
    only points it at an array for the copy and back at NULL."""

    __slots__ = ("library", "_inputs", "_outputs", "_descriptors", "_checked")

    def __init__(self, library: AccLibrary, inputs: Mapping[str, DeviceBuffer],
                 outputs: Sequence[DeviceBuffer]) -> None:
        self.library = library
        self._descriptors: list[TensorArray] = []  # keeps the host descriptors alive
        self._inputs = {name: self._pair(buffer) for name, buffer in inputs.items()}
        self._outputs = tuple(self._pair(buffer) for buffer in outputs)
        # Checked mode: the buffers' own copies, which check their guards.
        self._checked = (dict(inputs), tuple(outputs)) if any(
            buffer.guarded for buffer in (*inputs.values(), *outputs)) else None

    def _pair(self, buffer: DeviceBuffer) -> tuple[Any, Any, Any, TensorSpec]:
        """(device descriptor, host descriptor, a pointer to it, spec)."""
        host = TensorArray([buffer.spec])
        self._descriptors.append(host)
        (_, slot, spec), = host.slots()
        return buffer._descriptor.pointer, slot, ffi.addressof(slot), spec

    @property
    def specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
        """Each input's (shape, dtype), as its buffer holds it."""
        return {name: (pair[3].shape, pair[3].dtype) for name, pair in self._inputs.items()}

    def write_locked(self, values: Mapping[str, np.ndarray]) -> None:
        """copyToAcc of values (C-contiguous host arrays of the inputs'
        shapes and dtypes, for a subset of the inputs) into the input
        buffers; the caller holds the device's lock."""
        if self._checked is not None:
            inputs, _ = self._checked
            for name, value in values.items():
                inputs[name].copy_from_host(value)
            return
        library = self.library
        lib = library.lib
        from_buffer, null = ffi.from_buffer, ffi.NULL
        for name, value in values.items():
            device, host, address, _ = self._inputs[name]
            pointer = from_buffer(value)
            host.data = pointer
            status = lib.copyToAcc(device, address)
            host.data = null
            if status:
                library.check(library.name, "copyToAcc", status)

    def run_locked(self, values: Mapping[str, np.ndarray],
                   between: Callable[[], None]) -> list[np.ndarray]:
        """copyToAcc of values (C-contiguous host arrays of the inputs'
        shapes and dtypes, for a subset of the inputs), between(), then
        copyFromAcc of every output into a new host array, returned. The
        caller holds the device's lock. A pointer from ffi.from_buffer is
        kept in a local until its call returns."""
        if self._checked is not None:
            inputs, outputs = self._checked
            for name, value in values.items():
                inputs[name].copy_from_host(value)
            between()
            return [buffer.to_host() for buffer in outputs]
        library = self.library
        lib = library.lib
        from_buffer, null = ffi.from_buffer, ffi.NULL
        results = []
        for name, value in values.items():
            device, host, address, _ = self._inputs[name]
            pointer = from_buffer(value)
            host.data = pointer
            status = lib.copyToAcc(device, address)
            host.data = null
            if status:
                library.check(library.name, "copyToAcc", status)
        between()
        for device, host, address, spec in self._outputs:
            array = np.empty(spec.shape, spec.dtype)
            pointer = from_buffer(array, require_writable=True)
            host.data = pointer
            status = lib.copyFromAcc(address, device)
            host.data = null
            if status:
                library.check(library.name, "copyFromAcc", status)
            results.append(array)
        return results
