"""ONNX models on acc-host: ``mx.onnx.import_model`` and an ONNX backend.

Importing this package is cheap: the ``onnx`` pip package is imported only
when a function here needs it (it is a test extra, not a dependency), and a
missing ``onnx`` is reported as an :class:`acc_host.errors.AccHostError`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["import_model", "get_model_metadata", "supported_operators", "backend"]


def import_model(model: Any) -> tuple[Any, dict, dict]:
    """(sym, arg_params, aux_params) from an ONNX model (a path or a
    ModelProto). Initializers and Constant nodes become parameters, the graph
    inputs that are not initializers become data variables."""
    from .importer import import_model as _import_model

    return _import_model(model)


def get_model_metadata(model: Any) -> dict[str, list[tuple[str, tuple]]]:
    """{"input_tensor_data": [(name, shape)], "output_tensor_data": [...]}
    as MXNet's ``onnx.get_model_metadata``."""
    from .importer import get_model_metadata as _metadata

    return _metadata(model)


def supported_operators() -> dict[str, tuple[int, int]]:
    """ONNX op_type (default domain) -> (lowest, highest) opset translated."""
    from .translators import supported_operators as _supported

    return _supported()


def __getattr__(name: str) -> Any:
    if name == "backend":
        from . import backend

        return backend
    raise AttributeError(f"module 'acc_host.onnx' has no attribute {name!r}")
