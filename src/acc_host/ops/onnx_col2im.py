"""Host operator for ONNX Col2Im: the sum of sliding-window columns
(N, C * prod(block), L) back into an image (N, C, *image_shape), the
inverse layout of im2col, with strides, dilations and pads. Host only."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..errors import OperatorError, ShapeError
from .params import Attrs, Param, parse_tuple
from .registry import OpDef, ShapeUnknownError, register

_COL2IM = "_onnx_col2im"


def _geometry(attrs: Attrs, shape: tuple[int, ...]) -> tuple[list[int], tuple[int, ...]]:
    """Sliding positions per spatial axis and the output shape; typed
    errors naming what does not fit."""
    image, block = tuple(attrs.image_shape), tuple(attrs.block_shape)
    nd = len(image)
    if nd < 1 or len(block) != nd or any(d is None or d < 1 for d in image + block):
        raise OperatorError(f"{_COL2IM}: image_shape {image} and block_shape {block} must "
                            "be positive and of the same length")
    strides = tuple(attrs.strides) or (1,) * nd
    dilations = tuple(attrs.dilations) or (1,) * nd
    pads = tuple(attrs.pads) or (0,) * (2 * nd)
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd \
            or any(s is None or s < 1 for s in strides + dilations) \
            or any(p is None or p < 0 for p in pads):
        raise OperatorError(f"{_COL2IM}: strides {strides}, dilations {dilations} and pads "
                            f"{pads} do not fit {nd} spatial axes")
    if len(shape) != 3:
        raise ShapeError(f"{_COL2IM}: the input must be (N, C * prod(block), L), got {shape}")
    per_channel = int(np.prod(block))
    if shape[1] % per_channel:
        raise ShapeError(f"{_COL2IM}: input axis 1 ({shape[1]}) is not a multiple of the "
                         f"block's {per_channel} values")
    positions = []
    for axis in range(nd):
        span = dilations[axis] * (block[axis] - 1) + 1
        room = image[axis] + pads[axis] + pads[axis + nd] - span
        positions.append(room // strides[axis] + 1 if room >= 0 else 0)
    if int(np.prod(positions)) != shape[2]:
        raise ShapeError(f"{_COL2IM}: input axis 2 has {shape[2]} blocks, the image takes "
                         f"{int(np.prod(positions))} ({' x '.join(map(str, positions))})")
    return positions, (shape[0], shape[1] // per_channel, *image)


def _col2im(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    positions, out_shape = _geometry(attrs, x.shape)
    image, block = tuple(attrs.image_shape), tuple(attrs.block_shape)
    nd = len(image)
    strides = tuple(attrs.strides) or (1,) * nd
    dilations = tuple(attrs.dilations) or (1,) * nd
    pads = tuple(attrs.pads) or (0,) * (2 * nd)
    columns = x.reshape(out_shape[0], out_shape[1], *block, *positions)
    out = np.zeros(out_shape, dtype=x.dtype)
    for offset in itertools.product(*(range(b) for b in block)):
        # Output index along each axis of every sliding position for this tap.
        where = [np.arange(positions[a]) * strides[a] - pads[a] + offset[a] * dilations[a]
                 for a in range(nd)]
        keep = [(w >= 0) & (w < image[a]) for a, w in enumerate(where)]
        everything: list[Any] = [slice(None), slice(None)]
        values = columns[tuple(everything + list(offset))]
        values = values[tuple(everything + list(np.ix_(*keep)))]
        target = np.ix_(*[w[k] for w, k in zip(where, keep)])
        out[tuple(everything + list(target))] += values
    return [out]


def _col2im_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_COL2IM}: the input shape is unknown")
    return list(shapes), [_geometry(attrs, tuple(shapes[0]))[1]]


register(OpDef(
    name=_COL2IM, compute=_col2im, infer_shape=_col2im_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("image_shape", parse_tuple), Param("block_shape", parse_tuple),
            Param("strides", parse_tuple, ()), Param("dilations", parse_tuple, ()),
            Param("pads", parse_tuple, ())),
    doc="ONNX Col2Im: sums the sliding blocks of (N, C * prod(block_shape), L) into "
        "(N, C, *image_shape). Host only."))
