"""Shared memory between the host and the processes of isolated libraries.

A :class:`Segment` is an anonymous file (``memfd_create``) mapped in this
process; its descriptor is sent to a plugin process the first time a call
refers to it, and the child maps the same pages. Two kinds exist:

* the staging segment of each channel, into which a call copies the host
  arrays it passes (and from which it copies the outputs back);
* the segments under arrays made by :func:`shared_empty`, which calls pass
  without any copy: a tensor whose bytes lie inside one is sent as
  (segment, offset).
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import os
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

from ..abi import cdata
from ..abi.tensor import TensorSpec

__all__ = ["Segment", "shared_empty", "shared_array", "is_shared", "find", "subscribe"]

ALIGNMENT = 64
_ids = itertools.count(1)


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _new_file(label: str, size: int) -> int:
    """A descriptor of an anonymous file of size bytes."""
    try:
        fd = os.memfd_create(f"acc_host.{label}", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memfd: an unlinked file in tmpfs, if there is one
        directory = "/dev/shm" if os.path.isdir("/dev/shm") else None
        with tempfile.TemporaryFile(dir=directory) as handle:
            fd = os.dup(handle.fileno())
    try:
        os.ftruncate(fd, size)
    except OSError:
        os.close(fd)
        raise
    return fd


def _address(mapped: mmap.mmap) -> int:
    pointer = cdata.from_buffer(mapped)
    address = cdata.address(pointer)
    cdata.release(pointer)  # no buffer export outlives this: the map stays closable
    return address


class Segment:
    """size bytes (rounded up to pages) of shared memory, mapped here."""

    def __init__(self, size: int, label: str = "segment") -> None:
        self.id = next(_ids)
        self.size = round_up(max(size, 1), mmap.PAGESIZE)
        self.fd = _new_file(label, self.size)
        self.map = mmap.mmap(self.fd, self.size)
        self.address = _address(self.map)

    def pointer(self, offset: int = 0) -> Any:
        """``char *`` to offset bytes into the segment."""
        return cdata.cast("char *", self.address + offset)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


class _Entry:
    __slots__ = ("id", "fd", "size", "address")

    def __init__(self, segment: Segment) -> None:
        self.id, self.fd, self.size, self.address = (segment.id, segment.fd, segment.size,
                                                     segment.address)


class _Registry:
    """The segments under live shared arrays, by address; the processes
    that may have mapped one hear when it is gone (so that they unmap it)."""

    def __init__(self) -> None:
        # Re-entrant: the garbage collector may free an array (and so call
        # _remove) in a thread that holds the lock.
        self._lock = threading.RLock()
        self._starts: list[int] = []
        self._entries: list[_Entry] = []
        self._listeners: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, segment: Segment) -> None:
        entry = _Entry(segment)
        with self._lock:
            index = bisect.bisect(self._starts, entry.address)
            self._starts.insert(index, entry.address)
            self._entries.insert(index, entry)
        # The array's memory (the map) outlives the Segment object: the
        # descriptor is closed, and the processes told, when the map goes.
        weakref.finalize(segment.map, self._remove, entry).atexit = False

    def _remove(self, entry: _Entry) -> None:
        with self._lock:
            index = self._entries.index(entry)
            del self._starts[index], self._entries[index]
            listeners = list(self._listeners)
        os.close(entry.fd)
        for listener in listeners:
            listener.segment_gone(entry.id)

    def find(self, address: int, nbytes: int) -> _Entry | None:
        with self._lock:
            index = bisect.bisect(self._starts, address) - 1
            if index < 0:
                return None
            entry = self._entries[index]
        return entry if address + nbytes <= entry.address + entry.size else None

    def subscribe(self, listener: Any) -> None:
        with self._lock:
            self._listeners.add(listener)


_registry = _Registry()
find = _registry.find


def subscribe(listener: Any) -> None:
    """listener.segment_gone(segment_id) is called when the segment of a
    shared array is gone; listener is held weakly."""
    _registry.subscribe(listener)


def shared_empty(shape: int | tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """An uninitialized array in shared memory: isolated libraries read and
    write it in place (no copy into the staging segment)."""
    spec = TensorSpec((shape,) if isinstance(shape, int) else tuple(shape), dtype)
    segment = Segment(spec.nbytes, "array")
    count = spec.nbytes // spec.dtype.itemsize
    array = np.frombuffer(segment.map, spec.dtype, count).reshape(spec.shape)
    _registry.add(segment)
    return array


def shared_array(values: Any, dtype: Any = None) -> np.ndarray:
    """A copy of values in shared memory (see :func:`shared_empty`)."""
    source = np.asarray(values, dtype=dtype)
    array = shared_empty(source.shape, source.dtype)
    array[...] = source
    return array


def is_shared(array: np.ndarray) -> bool:
    """Whether array's bytes lie in one shared segment (passed without copy)."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        return False
    return find(array.__array_interface__["data"][0], array.nbytes) is not None
