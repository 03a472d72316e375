"""The accelerator libraries loaded in this process, by name.

``load_acc(path)`` loads (or finds already loaded) a library and returns its
device-0 context; the library's name then works as ``mx.<name>(i)`` and, as
the most recently loaded library, as ``mx.acc(i)``. One file is loaded once,
whatever path reaches it; two different files cannot claim one name.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ..abi.library import AccLibrary
from ..context import BUILTIN_DEVICE_TYPES, Context, install_registry
from ..errors import (
    AccNameConflictError,
    ContextError,
    InvalidAccNameError,
    LibraryError,
    LibraryNotFoundError,
    UnknownAcceleratorError,
)
from ..isolate import IsolatedLibrary, isolate_by_default
from ..trace import recorder

__all__ = ["load_acc", "acc", "get_library", "libraries", "type_id"]

# Names that would shadow the built-in contexts or acc_host's own attributes.
_RESERVED = {"acc", "context", *BUILTIN_DEVICE_TYPES}


@dataclass
class _State:
    by_name: dict[str, AccLibrary]
    by_file: dict[tuple[int, int], AccLibrary]
    type_ids: dict[str, int]
    default: str | None = None
    exit_hook: bool = False


_state = _State({}, {}, {})
_lock = threading.RLock()


def _file_key(path: str) -> tuple[int, int]:
    try:
        status = os.stat(path)
    except OSError:
        raise LibraryNotFoundError(f"accelerator library not found: {path}", path) from None
    return status.st_dev, status.st_ino


# Context types, and acc_host's own public names and submodules (which the
# package reserves when it is imported): an accelerator called like one of
# them could not be reached as mx.<name>.
_reserved: set[str] = set(_RESERVED)


def reserve_names(names: Iterable[str]) -> None:
    """Refuses accelerators called like one of names from now on."""
    _reserved.update(names)


def _reserved_names() -> frozenset[str]:
    return frozenset(_reserved)


def _check_free_name(library: AccLibrary, replaced: AccLibrary | None = None) -> None:
    name = library.name
    if name in _reserved_names():
        raise InvalidAccNameError(
            f"{library.path}: accelerator name {name!r} is reserved by acc_host; load it with "
            "load_acc(path, acc_name=...) to choose another", library.path)
    other = _state.by_name.get(name)
    if other is not None and other is not replaced:
        raise AccNameConflictError(
            f"{library.path}: accelerator name {name!r} is already used by {other.path}; load "
            "one of them with load_acc(path, acc_name=...) to choose another name", library.path)


def _release_all_devices() -> None:
    for library in list(_state.by_name.values()):
        if library.supports_imperative:
            for dev_id in library.used_devices():
                library.release_all(dev_id)


def register(path: str | os.PathLike[str], acc_name: str | None = None,
             isolate: bool | None = None) -> AccLibrary:
    """Loads the library at path unless that file is loaded already (an
    isolated library whose process died is loaded anew, replacing it).
    isolate: run the plugin in a child process (None: as MXNET_ACC_ISOLATE
    says; a file already loaded the other way is an error)."""
    with _lock:
        key = _file_key(os.fspath(path))
        loaded = _state.by_file.get(key)
        if loaded is not None and loaded.alive:
            if acc_name is not None and acc_name != loaded.name:
                raise AccNameConflictError(
                    f"{loaded.path} is already loaded as {loaded.name!r}; it cannot also be "
                    f"{acc_name!r}", loaded.path)
            if isolate is not None and isolate != loaded.isolated:
                mode = "in a child process" if loaded.isolated else "in this process"
                raise LibraryError(
                    f"{loaded.path} is already loaded {mode} (as {loaded.name!r}); a file is "
                    "loaded once, so it cannot also be loaded with "
                    f"isolate={isolate}", loaded.path)
            return loaded
        isolated = isolate_by_default() if isolate is None else isolate
        if loaded is not None and acc_name is None:
            acc_name = loaded.name  # a reload keeps the name the dead library had
        tracer = recorder.current()
        library = IsolatedLibrary(path, acc_name, tracer=tracer) if isolated \
            else AccLibrary(path, acc_name, tracer)
        try:
            _check_free_name(library, loaded)
        except BaseException:
            if isinstance(library, IsolatedLibrary):
                library.close()
            raise
        if loaded is not None:  # a dead isolated library: forgotten, its contexts fail
            del _state.by_name[loaded.name]
        _state.by_file[key] = library
        _state.by_name[library.name] = library
        _state.type_ids.setdefault(library.name, 64 + len(_state.type_ids))
        if not _state.exit_hook:
            atexit.register(_release_all_devices)
            _state.exit_hook = True
        return library


def load_acc(path: str | os.PathLike[str], acc_name: str | None = None, *,
             isolate: bool | None = None) -> Context:
    """Loads an accelerator library and returns the context of its device 0.

    acc_name overrides the name the library gives itself (getAccName). The
    library becomes the default for :func:`acc`. isolate=True runs the
    plugin in a child process, where a crash or a hang becomes an exception
    here (docs/isolation.md); None follows MXNET_ACC_ISOLATE. Loading an
    isolated library whose process died starts a new one.
    """
    library = register(path, acc_name, isolate)
    with _lock:
        _state.default = library.name
    return Context(library.name, 0)


def get_library(name: str) -> AccLibrary:
    """The loaded library called name."""
    with _lock:
        library = _state.by_name.get(name)
    if library is None:
        raise UnknownAcceleratorError(unknown_accelerator_text(name))
    return library


def unknown_accelerator_text(name: str) -> str:
    """"no accelerator called 'foo' is loaded (loaded: cpu_ref, mlu)"."""
    with _lock:
        known = ", ".join(sorted(_state.by_name)) or "none"
    return f"no accelerator called {name!r} is loaded (loaded: {known})"


def libraries() -> list[AccLibrary]:
    """Every loaded library, in load order."""
    with _lock:
        return list(_state.by_name.values())


def type_id(name: str) -> int:
    return _state.type_ids[name]


def _hand_tracer(tracer: recorder.Tracer | None) -> None:
    """Routes every loaded library's calls through tracer (None: untraced)."""
    for library in libraries():
        library.set_tracer(tracer)


recorder.on_change(_hand_tracer)
install_registry(get_library, type_id, lambda: [library.name for library in libraries()])


def acc(device_id: int = 0) -> Context:
    """Context of device device_id of the default accelerator: the library
    most recently returned by load_acc(), or the only one loaded."""
    with _lock:
        name = _state.default
        if name is None and len(_state.by_name) == 1:
            name = next(iter(_state.by_name))
    if name is None:
        known = ", ".join(sorted(_state.by_name)) or "none"
        raise ContextError(
            "mx.acc() needs a default accelerator: call mx.load_acc(path) first, or use "
            f"mx.<name>(i) for one of the loaded accelerators ({known})")
    return Context(name, device_id)
