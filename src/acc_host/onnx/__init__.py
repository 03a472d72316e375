"""ONNX models on acc-host: ``mx.onnx.import_model``, ``mx.onnx.export_model``
and an ONNX backend.

Importing this package is cheap. Reading, importing and running a model
need no ``onnx`` pip package (acc_host.onnx.reader reads the files); the
exporter imports it when called (it is a test extra, not a dependency),
and a missing ``onnx`` is reported as an
:class:`acc_host.errors.AccHostError`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["import_model", "export_model", "get_model_metadata", "supported_operators",
           "exported_operators", "backend"]

# The functions below import their modules when called: importing acc_host
# (which imports this package) loads neither them nor the onnx package.


def import_model(model: Any, input_shapes: dict[str, Sequence[int]] | None = None
                 ) -> tuple[Any, dict, dict]:
    """(sym, arg_params, aux_params) from an ONNX model (a path, a binary
    file object, the file's bytes, or a ModelProto). Initializers and
    Constant nodes become parameters, the graph inputs that are not
    initializers become data variables.

    Symbolic dimensions (ONNX ``dim_param``, unknown dims) stay symbolic: the
    symbol binds at any extent there, and the shape computations on them
    are worked out at bind time (docs/dynamic_shapes.md). input_shapes
    (name -> shape, optional) replaces the extents the model declares fixed
    (another batch for a model exported at batch 2) and gives shapes to
    inputs the model declares none for; a dimension the model declares
    symbolic, or given as 0, -1 or None, stays unknown."""
    from .importer import import_model as _import_model

    return _import_model(model, input_shapes)


def export_model(sym: Any, params: Any, in_shapes: Any = None, in_types: Any = np.float32,
                 onnx_file_path: str | os.PathLike[str] | None = None, verbose: bool = False,
                 dynamic: bool = False, dynamic_input_shapes: Sequence[Any] | None = None,
                 run_shape_inference: bool = False, input_type: Any = None,
                 input_shape: Any = None, large_model: bool = False,
                 opset_version: int | None = None) -> Any:
    """Writes an MXNet symbol and its parameters as an ONNX model, with MXNet
    1.9's ``mx.onnx.export_model`` signature.

    sym: a Symbol or a path to a ``-symbol.json`` file. params: a path to a
    ``.params`` file, a dict of name -> NDArray (or numpy array) holding the
    arguments and the auxiliary states (MXNet's ``arg:``/``aux:`` prefixes are
    accepted), or ``[arg_params, aux_params]``. in_shapes (alias input_shape):
    one shape per data input, the arguments not in params in
    ``list_arguments()`` order (a label read only by SoftmaxOutput is not one).
    in_types (alias input_type): one dtype for all, or one per data input.
    opset_version: default :data:`acc_host.onnx.exporter.DEFAULT_OPSET` (17),
    from 13 up to the installed onnx's newest.

    Returns the ``onnx.ModelProto`` when onnx_file_path is None; otherwise
    saves it there (tensors in ``<file>.data`` with large_model) and returns
    the path, as MXNet does. run_shape_inference runs onnx's shape inference
    on the result. The model has static shapes: dynamic=True is refused.
    Every operator that cannot be written is listed in one
    :class:`acc_host.errors.UnsupportedOnnxExportError`."""
    from .exporter import export_model as _export_model

    return _export_model(sym, params, in_shapes, in_types, onnx_file_path, verbose, dynamic,
                         dynamic_input_shapes, run_shape_inference, input_type, input_shape,
                         large_model, opset_version)


def exported_operators() -> list[str]:
    """Every MXNet operator name (aliases included) export_model can write."""
    from .export_ops import exported_operators as _exported

    return _exported()


def get_model_metadata(model: Any) -> dict[str, list[tuple[str, tuple | None]]]:
    """{"input_tensor_data": [(name, shape)], "output_tensor_data": [...]}
    as MXNet's ``onnx.get_model_metadata`` (shape None: not declared)."""
    from .importer import get_model_metadata as _metadata

    return _metadata(model)


def supported_operators() -> dict[str, tuple[int, int]]:
    """ONNX op_type (default domain) -> (lowest, highest) opset translated."""
    from .translators import supported_operators as _supported

    return _supported()


def __getattr__(name: str) -> Any:
    if name == "backend":
        # Not "from . import backend": its fromlist check asks this module
        # for the attribute first, which comes back here.
        return importlib.import_module(f"{__name__}.backend")
    raise AttributeError(f"module 'acc_host.onnx' has no attribute {name!r}")
