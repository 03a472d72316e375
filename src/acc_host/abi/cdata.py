"""C data of the ABI's types, for the host modules that marshal raw calls.

The cffi object (:data:`acc_host.abi.header.ffi`) and the libraries it
opens stay inside :mod:`acc_host.abi`: the host calls a plugin through
:meth:`acc_host.abi.library.AccLibrary.call` (device lock, call, status to
typed error) or, where the raw answer is the point, through
``AccLibrary.unchecked``. A few modules above this layer still build C
arguments and read C results themselves, because that is their whole job:
the trace encoder and replay (:mod:`acc_host.trace`), the isolated plugin's
two sides (:mod:`acc_host.isolate`) and the conformance kit, which calls
entry points with hostile arguments (NULLs, short buffers, freed pointers)
on purpose. This module is what they get: the C data operations they need,
each restricted to the types ``mxnet_acc.h`` declares, and
:class:`RawLibrary`, an opened plugin whose entry points are called by name
with no lock and no status check.

The isolated plugin's child process loads this file by path (as it loads
``header.py``), outside the ``acc_host`` package, to start fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

if __package__:
    from .header import dlopen, ffi
else:  # loaded by path in the isolated plugin's child (acc_host.isolate.child)
    from _acc_host_isolate_abi import (  # type: ignore[import-not-found,no-redef]
        dlopen,
        ffi,
    )

__all__ = ["NULL", "CData", "new", "cast", "address", "string", "read", "from_buffer",
           "memmove", "release", "callback", "gc", "addressof", "is_function", "RawLibrary"]

NULL: Any = ffi.NULL
CData: type = ffi.CData
_UINTPTR = ffi.typeof("uintptr_t")


def new(ctype: str, init: Any = None) -> Any:
    """A new owned C object of ctype (a type of the header: "char[]",
    "MXTensor[]", "int *", ...), freed when the returned object is."""
    return ffi.new(ctype, init)


def cast(ctype: str, value: Any) -> Any:
    """value (an integer address or a pointer) seen as ctype."""
    return ffi.cast(ctype, value)


def address(pointer: Any) -> int:
    """The integer address a pointer holds."""
    return int(ffi.cast(_UINTPTR, pointer))


def string(value: Any, length: int = -1) -> bytes:
    """The bytes of a NUL-terminated char pointer (at most length)."""
    text = ffi.string(value, length) if length >= 0 else ffi.string(value)
    return text  # type: ignore[no-any-return]


def read(pointer: Any, size: int | None = None) -> bytes:
    """A copy of size bytes at pointer (all of an array when size is None)."""
    view = ffi.buffer(pointer) if size is None else ffi.buffer(pointer, size)
    return view[:]  # type: ignore[no-any-return]


def from_buffer(data: Any, require_writable: bool = False) -> Any:
    """A char pointer into data's memory (a numpy array, bytes, an mmap),
    valid while the returned object is alive."""
    return ffi.from_buffer(data, require_writable=require_writable)


def memmove(destination: Any, source: Any, size: int) -> None:
    ffi.memmove(destination, source, size)


def release(value: Any) -> None:
    """Releases what new() or from_buffer() made now, not at collection."""
    ffi.release(value)


def callback(signature: str, function: Callable[..., Any], error: Any = None) -> Any:
    """A C function pointer of signature that calls function (error: what
    it returns when function raises)."""
    return ffi.callback(signature, function, error=error)


def gc(value: Any, destructor: Callable[[Any], Any]) -> Any:
    """value, with destructor called on it when the result is collected."""
    return ffi.gc(value, destructor)


def addressof(value: Any) -> Any:
    """A pointer to a struct (an element of a "MXTensor[]", say)."""
    return ffi.addressof(value)


def is_function(value: Any) -> bool:
    """Whether value is a C function (an exported entry point)."""
    return isinstance(value, ffi.CData) and ffi.typeof(value).kind == "function"


class RawLibrary:
    """A plugin opened with dlopen(RTLD_NOW | RTLD_LOCAL), for callers that
    judge every answer themselves (a trace replay, the conformance kit's
    probes, the isolated plugin's child). No version check, no lock, no
    status check: :class:`acc_host.abi.library.AccLibrary` does those."""

    def __init__(self, path: str) -> None:
        """Raises OSError when the loader refuses path."""
        self._lib = dlopen(path, ffi.RTLD_NOW | ffi.RTLD_LOCAL)

    def has(self, entry: str) -> bool:
        """Whether the library exports entry as a function."""
        try:
            return is_function(getattr(self._lib, entry))
        except (AttributeError, NotImplementedError):
            return False

    def names(self) -> list[str]:
        """Every name the declarations give that the library exports."""
        return sorted(name for name in dir(self._lib) if self.has(name))

    def entry(self, name: str) -> Callable[..., Any]:
        """The entry point itself (raises AttributeError if not exported)."""
        return getattr(self._lib, name)  # type: ignore[no-any-return]

    def unchecked(self, entry: str, *args: Any) -> Any:
        """entry(*args), its answer as the plugin gives it."""
        return getattr(self._lib, entry)(*args)
