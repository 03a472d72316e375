"""``mx.contrib.onnx``, MXNet 1.x's ONNX entry points, over acc_host.onnx
(docs/onnx.md): import_model, export_model, get_model_metadata, and
import_to_gluon (a SymbolBlock of the imported graph)."""

from __future__ import annotations

from typing import Any

from .. import symbol
from ..gluon import SymbolBlock
from ..onnx import export_model, get_model_metadata, import_model

__all__ = ["import_model", "export_model", "get_model_metadata", "import_to_gluon"]


def import_to_gluon(model_file: Any, ctx: Any = None) -> Any:
    """A gluon SymbolBlock running the ONNX model (parameters on ctx)."""
    sym, arg_params, aux_params = import_model(model_file)
    params = {**arg_params, **aux_params}
    inputs = [name for name in sym.list_inputs() if name not in params]
    block = SymbolBlock(sym, [symbol.Variable(name) for name in inputs])
    for name, param in block.collect_params().items():
        if name in params:
            param._load(params[name], ctx, cast_dtype=False)
    return block
