"""``mx.contrib``: MXNet's contrib namespaces that acc-host provides
(``mx.contrib.onnx``)."""

from . import onnx

__all__ = ["onnx"]
