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

import time as _time

_import_started = _time.perf_counter()

import importlib as _importlib  # noqa: E402
import os as _os  # noqa: E402
import pkgutil as _pkgutil  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

# What every inference needs is imported here; the rest of MXNet's API
# (Gluon, Module, metrics, images, ONNX, ...) is imported on first use
# (_LAZY, see __getattr__): `import acc_host` does the plugin discovery and
# little else (docs/performance.md, "First inference").
from . import engine, errors, random, runtime  # noqa: E402
from . import ndarray as nd  # noqa: E402
from . import phases as _phases  # noqa: E402
from . import symbol as sym  # noqa: E402
from . import symbol_contrib as _symbol_contrib  # noqa: E402
from .abi.header import API_VERSION  # noqa: E402
from .context import Context, cpu, current_context, gpu  # noqa: E402
from .errors import *  # noqa: E402,F403  (the hierarchy is part of the public API)
from .graph import attribute as attribute  # noqa: E402  (MXNet's mx.attribute, AttrScope)
from .graph.attribute import AttrScope  # noqa: E402
from .nd_extras import install as _install_nd_extras  # noqa: E402
from .plugins import registry as _registry  # noqa: E402
from .plugins.discovery import AccLibraryWarning  # noqa: E402
from .plugins.discovery import discover as _discover  # noqa: E402
from .plugins.registry import acc, get_library, libraries, load_acc  # noqa: E402
from .runtime import executor as executor  # noqa: E402  (MXNet's mx.executor, Executor)
from .runtime.subgraph import AccFallbackWarning  # noqa: E402

if TYPE_CHECKING:  # imported on first use (_LAZY)
    from . import (
        contrib,
        gluon,
        image,
        initializer,
        io,
        metric,
        model,
        onnx,
        recordio,
        test_utils,
        visualization,
    )
    from . import initializer as init
    from . import module as mod
    from . import visualization as viz

#: name -> the module it is (or holds it), imported when first used.
_LAZY: dict[str, str] = {
    "contrib": "contrib", "gluon": "gluon", "image": "image", "io": "io",
    "initializer": "initializer", "init": "initializer", "metric": "metric",
    "model": "model", "module": "module", "mod": "module", "onnx": "onnx",
    "recordio": "recordio", "test_utils": "test_utils", "visualization": "visualization",
    "viz": "visualization",
}

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


def __getattr__(name: str) -> Any:
    """``mx.<name>(i)`` for every loaded accelerator library. Any other
    name is an UnknownAcceleratorError (an AttributeError) saying which
    accelerators are loaded; dunder names get a plain AttributeError, as
    for any module (``hasattr(mx, "__wrapped__")`` is False)."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'acc_host' has no attribute {name!r}")
    if name in _LAZY:
        module = _importlib.import_module(f"{__name__}.{_LAZY[name]}")
        globals()[name] = module
        return module  # type: ignore[return-value]
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
    return sorted({*globals(), *_LAZY, *_registry._state.by_name})


# Accelerators cannot take the names of acc_host's attributes and submodules.
_submodules = [info.name for info in _pkgutil.iter_modules(__path__)]  # noqa: F405 (the package's)
_registry.reserve_names([*__all__, *_submodules])

if _os.environ.get("MXNET_ACC_TRACE"):  # before discovery, so its calls are recorded
    from . import trace as _trace

    _trace.start_from_environment()
_discover()
_install_nd_extras(nd)  # mx.nd.random, mx.nd.random_normal, mx.nd.one_hot, ...
setattr(sym, "contrib", _symbol_contrib)  # noqa: B010  (mx.sym.contrib.foreach, ...)
_phases.import_seconds = _time.perf_counter() - _import_started
