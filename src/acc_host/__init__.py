"""acc-host: bring your own accelerator to an MXNet-style inference stack.

Use as ``import acc_host as mx``::

    ctx = mx.load_acc("/path/libmyacc.so")   # context of device 0
    mx.acc(1), mx.myacc(0)                   # other contexts of that library
    mx.test_utils.list_acc(mx.acc())         # [0, ..., getNumAcc() - 1]
    ctx.configure(num_threads=2)             # vendor-specific settings

Importing the package loads the bundled plugins, every library in the
directory named by ``MXNET_ACC_LIBRARIES`` and the libraries installed
packages register in the ``acc_host.plugins`` entry-point group (see
:mod:`acc_host.plugins.discovery` and :mod:`acc_host.plugins.entry_points`).
"""

from __future__ import annotations

import os as _os
import pkgutil as _pkgutil
from collections.abc import Callable

# acc_host.onnx is light: it imports the onnx pip package only when a function needs it
from . import (
    contrib,
    engine,
    errors,
    gluon,
    image,
    initializer,
    io,
    metric,
    model,
    onnx,
    random,
    recordio,
    runtime,
    test_utils,
    visualization,
)
from . import initializer as init
from . import module as mod
from . import ndarray as nd
from . import symbol as sym
from . import symbol_contrib as _symbol_contrib
from . import visualization as viz
from .abi.header import API_VERSION
from .context import Context, cpu, current_context, gpu
from .errors import *  # noqa: F403  (the hierarchy is part of the public API)
from .graph import attribute as attribute  # MXNet's mx.attribute (AttrScope)
from .graph.attribute import AttrScope
from .nd_extras import install as _install_nd_extras
from .plugins import registry as _registry
from .plugins.discovery import AccLibraryWarning
from .plugins.discovery import discover as _discover
from .plugins.registry import acc, get_library, libraries, load_acc
from .runtime import executor as executor  # MXNet's mx.executor (Executor)
from .runtime.subgraph import AccFallbackWarning

__version__ = "0.1.0"

__all__ = [
    "API_VERSION",
    "AttrScope",
    "Context",
    "AccFallbackWarning",
    "AccLibraryWarning",
    "acc",
    "cpu",
    "current_context",
    "engine",
    "errors",
    "init",
    "initializer",
    "io",
    "mod",
    "model",
    "nd",
    "onnx",
    "sym",
    "get_library",
    "libraries",
    "load_acc",
    "metric",
    "gluon",
    "random",
    "recordio",
    "image",
    "contrib",
    "runtime",
    "viz",
    "visualization",
    "gpu",
    "test_utils",
    *errors.__all__,
]


def __getattr__(name: str) -> Callable[[int], Context]:
    """``mx.<name>(i)`` for every loaded accelerator library. Any other
    name is an UnknownAcceleratorError (an AttributeError) saying which
    accelerators are loaded; dunder names get a plain AttributeError, as
    for any module (``hasattr(mx, "__wrapped__")`` is False)."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'acc_host' has no attribute {name!r}")
    if name in _registry._state.by_name:
        def make_context(device_id: int = 0) -> Context:
            return Context(name, device_id)

        make_context.__name__ = name
        make_context.__doc__ = f"Context of device device_id of accelerator {name!r}."
        return make_context
    error = errors.UnknownAcceleratorError(f"module 'acc_host' has no attribute {name!r}: "
                                           f"{_registry.unknown_accelerator_text(name)}")
    error.name = name  # AttributeError's attribute, as getattr() sets it
    raise error


def __dir__() -> list[str]:
    return sorted({*globals(), *_registry._state.by_name})


# Accelerators cannot take the names of acc_host's attributes and submodules.
_submodules = [info.name for info in _pkgutil.iter_modules(__path__)]  # noqa: F405 (the package's)
_registry.reserve_names([*__all__, *_submodules])

if _os.environ.get("MXNET_ACC_TRACE"):  # before discovery, so its calls are recorded
    from . import trace as _trace

    _trace.start_from_environment()
_discover()
_install_nd_extras(nd)  # mx.nd.random, mx.nd.random_normal, mx.nd.one_hot, ...
setattr(sym, "contrib", _symbol_contrib)  # noqa: B010  (mx.sym.contrib.foreach, ...)
