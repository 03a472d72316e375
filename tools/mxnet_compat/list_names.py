"""Lists the public names of MXNet 1.9.1's inference-facing modules.

Runs in a side environment that has MXNet (it never imports acc_host),
made with ``python3 -m venv mxenv && mxenv/bin/pip install "mxnet==1.9.1"
"numpy<1.24"`` (MXNet is an oracle here, never a dependency)::

    mxenv/bin/python tools/mxnet_compat/list_names.py > tools/mxnet_compat/mxnet_names.json

A module's public names are its ``__all__`` when it has one, else every
attribute without a leading underscore, less what it imports for its own use:
modules, functions and classes from outside MXNet (``np``, ``namedtuple``,
``cv2``) and the ctypes helpers of ``mxnet.base`` (``check_call``, ``c_str``).
A few classes an inference program uses are listed with their public members
too (``mx.nd.NDArray.sum``). The output
is JSON: {"mxnet": version, "modules": {"mx.nd": [names]}, "classes":
{"mx.nd.NDArray": [members]}}.
"""

from __future__ import annotations

import inspect
import json
import sys
import types

MODULES = {
    "mx": "mxnet",
    "mx.nd": "mxnet.ndarray",
    "mx.nd.random": "mxnet.ndarray.random",
    "mx.sym": "mxnet.symbol",
    "mx.mod": "mxnet.module",
    "mx.gluon": "mxnet.gluon",
    "mx.gluon.nn": "mxnet.gluon.nn",
    "mx.gluon.rnn": "mxnet.gluon.rnn",
    "mx.gluon.utils": "mxnet.gluon.utils",
    "mx.gluon.model_zoo": "mxnet.gluon.model_zoo",
    "mx.gluon.model_zoo.vision": "mxnet.gluon.model_zoo.vision",
    "mx.io": "mxnet.io",
    "mx.metric": "mxnet.metric",
    "mx.random": "mxnet.random",
    "mx.context": "mxnet.context",
    "mx.test_utils": "mxnet.test_utils",
    "mx.viz": "mxnet.visualization",
    "mx.image": "mxnet.image",
    "mx.recordio": "mxnet.recordio",
    "mx.contrib.onnx": "mxnet.contrib.onnx",
    "mx.runtime": "mxnet.runtime",
}

CLASSES = {
    "mx.nd.NDArray": ("mxnet.ndarray", "NDArray"),
    "mx.sym.Symbol": ("mxnet.symbol", "Symbol"),
    "mx.mod.Module": ("mxnet.module", "Module"),
    "mx.executor.Executor": ("mxnet.executor", "Executor"),
    "mx.context.Context": ("mxnet.context", "Context"),
    "mx.gluon.Block": ("mxnet.gluon", "Block"),
    "mx.gluon.HybridBlock": ("mxnet.gluon", "HybridBlock"),
    "mx.gluon.SymbolBlock": ("mxnet.gluon", "SymbolBlock"),
    "mx.gluon.ParameterDict": ("mxnet.gluon", "ParameterDict"),
    "mx.gluon.Parameter": ("mxnet.gluon", "Parameter"),
    "mx.metric.EvalMetric": ("mxnet.metric", "EvalMetric"),
}


def _is_mxnet_api(value: object) -> bool:
    if isinstance(value, types.ModuleType):
        return value.__name__.startswith("mxnet")
    origin = getattr(value, "__module__", None)
    if not isinstance(origin, str) or not (inspect.isclass(value) or callable(value)):
        return True  # constants and instances are kept
    return origin.startswith("mxnet") and origin != "mxnet.base"


def module_names(module: types.ModuleType) -> list[str]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        names = set(exported)
    else:
        names = set()
        for name, value in vars(module).items():
            if name.startswith("_"):
                continue
            if value is None or not _is_mxnet_api(value):
                continue
            names.add(name)
    return sorted(name for name in names if hasattr(module, name))


def class_members(cls: type) -> list[str]:
    """Public members, and the operators the class itself defines."""
    own = {name for klass in cls.__mro__ if klass is not object for name in vars(klass)}
    return sorted(name for name, _ in inspect.getmembers(cls) if not name.startswith("_")
                  or name in own and name in OPERATORS)


OPERATORS = {"__getitem__", "__setitem__", "__call__", "__eq__", "__ne__", "__lt__", "__le__",
             "__gt__", "__ge__", "__add__", "__sub__", "__mul__", "__truediv__", "__neg__",
             "__abs__", "__len__", "__iter__", "__pow__", "__mod__"}


def main() -> int:
    import importlib

    import mxnet

    modules = {key: module_names(importlib.import_module(path)) for key, path in MODULES.items()}
    classes = {key: class_members(getattr(importlib.import_module(path), name))
               for key, (path, name) in CLASSES.items()}
    json.dump({"mxnet": mxnet.__version__, "modules": modules, "classes": classes},
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
