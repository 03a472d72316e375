"""Host operators for ONNX BitCast (reinterpreting bits as another dtype of
the same width) and Unique (data-dependent output: host path only)."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, OperatorError
from .params import Attrs, Param, choice, optional, parse_bool, parse_int
from .registry import OpDef, ShapeUnknownError, normalize_axis, register

_BITCAST = "_onnx_bitcast"
_UNIQUE = "_onnx_unique"
_DTYPES = ("float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8",
           "int16", "int32", "int64", "bool")


def _bitcast_check(attrs: Attrs, dtype: np.dtype) -> np.dtype:
    target = np.dtype(attrs.dtype)
    if np.dtype(dtype).itemsize != target.itemsize:
        raise DTypeError(f"{_BITCAST}: {np.dtype(dtype).name} ({np.dtype(dtype).itemsize * 8} "
                         f"bits) cannot be reinterpreted as {target.name} "
                         f"({target.itemsize * 8} bits)")
    return target


def _bitcast(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    target = _bitcast_check(attrs, x.dtype)
    # A copy is contiguous at every rank (ascontiguousarray would make a
    # 0-d input 1-d), so it can be viewed as the target dtype.
    if target == np.bool_:  # only 0 and 1 are booleans: any other byte reads as True
        return [x.copy().view(np.uint8) != 0]
    return [x.copy().view(target)]


def _bitcast_type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
    if dtypes[0] is None:
        raise ShapeUnknownError(f"{_BITCAST}: the input's dtype is unknown")
    return list(dtypes), [_bitcast_check(attrs, dtypes[0])]


def _bitcast_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_BITCAST}: the input's shape is unknown")
    return list(shapes), [tuple(shapes[0])]


register(OpDef(
    name=_BITCAST, compute=_bitcast,
    infer_shape=_bitcast_shape,
    infer_type=_bitcast_type, params=(Param("dtype", choice(*_DTYPES)),),
    doc="ONNX BitCast: the input's bytes read as dtype, which has the same width."))


def _unique(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if attrs.axis is None:
        flat = x.reshape(-1)
        values, first, inverse, counts = np.unique(flat, return_index=True,
                                                   return_inverse=True, return_counts=True)
        axis = 0
        source = flat
    else:
        if x.ndim == 0:
            raise OperatorError(f"{_UNIQUE}: axis {attrs.axis} given for a 0-d input")
        axis = normalize_axis(_UNIQUE, attrs.axis, x.ndim)
        values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                                   return_counts=True, axis=axis)
        source = x
    inverse = np.asarray(inverse).reshape(-1)
    if not attrs.sorted:  # in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
        values = np.take(source, first, axis=axis)
    return [np.ascontiguousarray(values), first.astype(np.int64), inverse.astype(np.int64),
            counts.astype(np.int64)]


def _unique_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    raise ShapeUnknownError(f"{_UNIQUE}: the output shape depends on the input's values")


register(OpDef(
    name=_UNIQUE, compute=_unique, infer_shape=_unique_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]
                                      + [np.dtype(np.int64)] * 3),
    params=(Param("axis", optional(parse_int), None), Param("sorted", parse_bool, True)),
    outputs=("output", "indices", "inverse_indices", "counts"), data_dependent=True,
    doc="ONNX Unique: the distinct values (of the flattened input, or the distinct slices "
        "along axis), sorted or in order of first occurrence, with their first indices, the "
        "inverse indices and the counts. Its output shape depends on data: host path only."))
