"""MXNet's storage operators, as graph operators on dense values.

``cast_storage`` changes only an array's storage type, so on dense values
(the executor's and the CPU path's) it is the identity; ``_sparse_retain``
(``mx.nd.sparse.retain``) keeps the rows of a row_sparse array named by
``indices`` and zeroes the others. Their sparse implementations, and the
storage types they give, are in :mod:`acc_host.ndarray.sparse_ops` and
:mod:`acc_host.graph.storage`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeError
from .params import Attrs, Param, choice
from .registry import OpDef, Shape, register

__all__: list[str] = []


def _cast_shape(attrs: Attrs, shapes: list[Shape | None]
                ) -> tuple[Sequence[Shape | None], Sequence[Shape]]:
    if shapes[0] is None:
        return shapes, [None]  # type: ignore[list-item]
    return shapes, [shapes[0]]


def _cast(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.array(inputs[0], copy=True)]


register(OpDef(name="cast_storage", compute=_cast, infer_shape=_cast_shape,
               params=(Param("stype", choice("default", "csr", "row_sparse")),),
               doc="The input in storage type stype (dense values: the identity)."))


def _retain_shape(attrs: Attrs, shapes: list[Shape | None]
                  ) -> tuple[Sequence[Shape | None], Sequence[Shape]]:
    data, indices = shapes
    if indices is not None and len(indices) != 1:
        raise ShapeError(f"_sparse_retain: indices must be 1-D, got shape {indices}")
    if data is None:
        return shapes, [None]  # type: ignore[list-item]
    if not data:
        raise ShapeError("_sparse_retain: data needs at least one dimension")
    return shapes, [data]


def _retain_type(attrs: Attrs, dtypes: list[np.dtype | None]
                 ) -> tuple[list[np.dtype | None], list[np.dtype]]:
    data = dtypes[0] if dtypes[0] is not None else np.dtype(np.float32)
    return [data, dtypes[1] if dtypes[1] is not None else np.dtype(np.int64)], [data]


def _retain(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    data, indices = inputs
    rows = np.asarray(indices).astype(np.int64)
    if np.any((rows < 0) | (rows >= data.shape[0])):
        raise ShapeError(f"_sparse_retain: indices out of range for {data.shape[0]} rows")
    result = np.zeros_like(data)
    result[rows] = data[rows]
    return [result]


register(OpDef(name="_sparse_retain", compute=_retain, infer_shape=_retain_shape,
               infer_type=_retain_type, arguments=("data", "indices"),
               doc="The rows of data named by indices; the other rows zero."))
