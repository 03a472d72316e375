"""The lazy import of the ``onnx`` pip package."""

from __future__ import annotations

from typing import Any

from ..errors import AccHostError


class OnnxMissingError(AccHostError, ImportError):
    """The ``onnx`` package is not installed."""


def require_onnx() -> Any:
    try:
        import onnx  # the optional onnx package, loaded when a function needs it
        import onnx.numpy_helper  # noqa: F401
    except ImportError as error:
        raise OnnxMissingError(
            "acc_host.onnx needs the 'onnx' package (pip install 'onnx>=1.16', or "
            f"pip install 'acc-host[test]'): {error}") from None
    return onnx
