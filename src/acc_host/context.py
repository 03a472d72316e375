"""Device contexts, as in MXNet: ``mx.cpu()``, ``mx.acc(i)``, ``mx.<name>(i)``.

A context names a device type and a device id. Contexts compare and hash by
(type, id), print as ``cpu(0)``, and can be used in a ``with`` block to make
them the default context of the thread.

The libraries behind accelerator contexts belong to the registry of loaded
libraries (:mod:`acc_host.plugins.registry`), a layer above this module: the
registry installs its lookups here (:func:`install_registry`), and a context
asks them for its library when it is made.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import engine
from .errors import ContextError

__all__ = ["Context", "cpu", "current_context", "gpu", "install_registry", "num_gpus"]

# MXNet's numeric device types for its built-in contexts; accelerators are
# numbered from 64 in load order, so every context type has a distinct id.
BUILTIN_DEVICE_TYPES = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}
_default = threading.local()



def _no_registry(name: str) -> Any:
    raise ContextError(f"no accelerator called {name!r} is loaded (no registry is installed)")


# The registry's lookups (install_registry): the loaded library called name,
# the numeric device type of its contexts, and the names of the loaded ones.
_get_library: Callable[[str], Any] = _no_registry
_type_id: Callable[[str], int] = _no_registry
_loaded_names: Callable[[], list[str]] = list


def install_registry(get_library: Callable[[str], Any], type_id: Callable[[str], int],
                     loaded_names: Callable[[], list[str]] = list) -> None:
    """Makes accelerator contexts find their libraries with get_library(name)
    (which raises ContextError for a name that is not loaded) and their
    numeric device types with type_id(name); loaded_names() lists the
    accelerators loaded (for messages)."""
    global _get_library, _type_id, _loaded_names
    _get_library, _type_id, _loaded_names = get_library, type_id, loaded_names


class Context:
    """A device: ``Context("cpu", 0)`` or ``Context("cpu_ref", 1)``."""

    def __init__(self, device_type: str | Context, device_id: int = 0) -> None:
        if isinstance(device_type, Context):
            device_id = device_type.device_id
            device_type = device_type.device_type
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise ContextError(f"device id must be a non-negative int, got {device_id!r}")
        if device_type == "cpu":
            self._library = None
        else:
            self._library = _get_library(device_type)
            self._library.check_device(device_id)
        self.device_type: str = device_type
        self.device_id: int = device_id

    @property
    def device_typeid(self) -> int:
        if self._library is None:
            return BUILTIN_DEVICE_TYPES[self.device_type]
        return _type_id(self.device_type)

    @property
    def library(self) -> Any:
        """The AccLibrary behind an accelerator context; None for the CPU."""
        return self._library

    @property
    def is_accelerator(self) -> bool:
        return self._library is not None

    def configure(self, **settings: Any) -> dict[str, str]:
        """Passes settings (values converted with str) to the accelerator's
        configure() for this device and returns its answer, after every
        operation pushed to the engine so far has finished (settings and
        queries apply to the work before them)."""
        if self._library is None:
            raise ContextError(f"{self} is not an accelerator context; configure() needs one")
        engine.drain()
        return self._library.configure(self.device_id, settings)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __repr__ = __str__

    def __enter__(self) -> Context:
        stack = getattr(_default, "stack", None)
        if stack is None:
            stack = _default.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _default.stack.pop()


def cpu(device_id: int = 0) -> Context:
    """The CPU context (device_id is accepted for MXNet compatibility)."""
    return Context("cpu", device_id)


def current_context() -> Context:
    """The innermost context of an active ``with ctx:`` block, else cpu(0)."""
    stack = getattr(_default, "stack", None)
    return stack[-1] if stack else cpu()


def num_gpus() -> int:
    """0: acc-host drives no CUDA devices (accelerators are plugins, see
    mx.libraries())."""
    return 0


def gpu(device_id: int = 0) -> Context:
    """Refused with a ContextError naming the accelerators that are loaded:
    acc-host has no GPU context; an accelerator plugin's contexts
    (``mx.<name>(i)``) take its place."""
    loaded = ", ".join(f"mx.{name}({device_id})" for name in _loaded_names()) or "none"
    raise ContextError(f"mx.gpu({device_id}): acc-host drives no GPUs (num_gpus() is 0); "
                       f"use an accelerator context instead: {loaded}")
