"""Serving models over the Open Inference Protocol (KServe v2), HTTP/REST
and gRPC (docs/serving.md): ``acc-host serve`` and this package.

Needs the serve extra (``pip install "acc-host[serve]"``: the KServe SDK,
Ray Serve, prometheus-client); importing acc_host imports none of it, and
this package loads its modules on first use:

* :func:`load_servable` / :class:`Servable` (``servable``): an MXNet
  checkpoint or an ONNX file bound on a device, requests checked and run;
* :class:`AccModel` (``model``): its KServe model; :func:`serve`
  (``server``): KServe's model server for a list of them;
* ``acc_host.serve.ray``: Ray Serve replicas, one per device, with dynamic
  batching, behind the same protocol;
* ``metrics``, ``logs``: Prometheus metrics and JSON logs.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Servable", "TensorInfo", "BadRequestError", "UnknownInputError", "PluginFailure",
           "load_servable", "AccModel", "serve"]

_WHERE = {"Servable": "servable", "TensorInfo": "servable", "BadRequestError": "servable",
          "UnknownInputError": "servable", "PluginFailure": "servable",
          "load_servable": "servable", "AccModel": "model", "serve": "server"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
