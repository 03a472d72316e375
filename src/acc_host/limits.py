"""Refusing allocations the machine cannot hold, before making them.

A model file or a caller may declare shapes of any size: a symbol's
``__shape__`` hint, an ONNX input of 10^12 elements, ``simple_bind`` with a
typo in a batch size. numpy either refuses such an allocation with an
untyped MemoryError, or (when it fits the kernel's overcommit) hands out
memory that the process is killed for once it is touched. Every array the
host makes for a declared shape is therefore checked here first: one array,
or everything a bind allocates at once, must fit in the limit, which is the
machine's physical memory, or ``MXNET_ACC_MAX_ALLOC_BYTES`` when set.
Sizes are computed with Python integers, so no extent can overflow them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from .errors import AllocationTooLargeError, InvalidArgumentError, RankError, ShapeError

__all__ = ["LIMIT_VARIABLE", "MAX_DIMS", "MAX_EMPTY_SPAN", "limit", "array_bytes", "check_bytes",
           "check_array", "check_empty_span"]

LIMIT_VARIABLE = "MXNET_ACC_MAX_ALLOC_BYTES"
#: The most positions the non-zero extents of an empty array may span. The
#: array holds nothing, but numpy walks its outer extents one by one in
#: some operations (take, along an axis after the huge ones): an empty
#: (2, 2**31 - 1, 0) input kept one shape inference busy for minutes.
MAX_EMPTY_SPAN = 1 << 24
#: The most dimensions a numpy array may have (NPY_MAXDIMS).
MAX_DIMS = 64 if np.lib.NumpyVersion(np.__version__) >= "2.0.0" else 32


@functools.cache
def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return 1 << 62  # unknown: numpy's own refusal is the only limit


def limit() -> int:
    """The most bytes one allocation (or one bind) may ask for."""
    text = os.environ.get(LIMIT_VARIABLE)
    if text is None:
        return _physical_memory()
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidArgumentError(f"{LIMIT_VARIABLE}={text!r}: expected a positive number of "
                                   "bytes")
    return value


def array_bytes(shape: Iterable[Any], dtype: Any) -> int:
    """Bytes of an array of shape and dtype (exact, never overflowing)."""
    count = 1
    for extent in shape:
        count *= int(extent)
    return count * np.dtype(dtype if dtype is not None else np.float32).itemsize


def _size_text(nbytes: int) -> str:
    for unit, scale in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30),
                        ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def check_bytes(nbytes: int, what: str) -> None:
    """Raises AllocationTooLargeError when what needs more than the limit."""
    allowed = limit()
    if nbytes > allowed:
        source = (f"{LIMIT_VARIABLE}={allowed}" if os.environ.get(LIMIT_VARIABLE) is not None
                  else f"the machine's {_size_text(allowed)} of memory")
        raise AllocationTooLargeError(
            f"{what} would take {_size_text(nbytes)} ({nbytes} bytes), more than {source}; "
            "refused before allocating (check the declared shapes)", nbytes, allowed)


def check_array(shape: Iterable[Any], dtype: Any, what: str) -> None:
    """check_bytes for one array of shape and dtype, which must also have
    at most MAX_DIMS dimensions (RankError) and, when empty, span at most
    MAX_EMPTY_SPAN positions (check_empty_span)."""
    shape = tuple(shape)
    if len(shape) > MAX_DIMS:
        raise RankError(f"{what}: shape {shape} has {len(shape)} dimensions; arrays have at "
                         f"most {MAX_DIMS}")
    check_bytes(array_bytes(shape, dtype), f"{what} (shape {shape}, "
                f"{np.dtype(dtype if dtype is not None else np.float32)})")
    check_empty_span(shape, what)


def check_empty_span(shape: Iterable[Any], what: str) -> None:
    """Raises ShapeError for an empty shape whose other extents span more
    than MAX_EMPTY_SPAN positions (see there)."""
    extents = [int(extent) for extent in shape]
    if 0 not in extents:
        return
    span = 1
    for extent in extents:
        span *= extent or 1
    if span > MAX_EMPTY_SPAN:
        raise ShapeError(f"{what}: shape {tuple(extents)} is empty, but its other extents span "
                         f"{span} positions, more than the {MAX_EMPTY_SPAN} an empty array may "
                         "(numpy would walk them one by one)")
