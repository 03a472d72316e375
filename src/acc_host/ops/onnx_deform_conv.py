"""Host operator for ONNX DeformConv (2-D): a grouped convolution whose
kernel taps sample the input at offsets learned per output position
(bilinear, zero outside the image), optionally scaled by a mask. Host
only. Computed per kernel tap for all output positions at once: sample,
weight by the mask, then one grouped contraction with the weights."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, parse_bool, parse_int, parse_tuple
from .registry import OpDef, ShapeUnknownError, register

_DEFORM_CONV = "_onnx_deform_conv"


def _arguments(attrs: Attrs) -> list[str]:
    return (["data", "weight", "offset"] + (["bias"] if attrs.has_bias else [])
            + (["mask"] if attrs.has_mask else []))


def _geometry(attrs: Attrs, shapes: dict[str, tuple]) -> tuple[tuple, tuple, tuple, tuple,
                                                                  tuple[int, ...]]:
    """(strides, dilations, pads, kernel, output shape), checked."""
    x, w, offset = shapes["data"], shapes["weight"], shapes["offset"]
    if len(x) != 4 or len(w) != 4 or len(offset) != 4:
        raise ShapeError(f"{_DEFORM_CONV}: X, W and offset must be 4-D (2-D convolution), got "
                         f"{x}, {w} and {offset}")
    kernel = tuple(attrs.kernel_shape) or tuple(w[2:])
    strides = tuple(attrs.strides) or (1, 1)
    dilations = tuple(attrs.dilations) or (1, 1)
    pads = tuple(attrs.pads) or (0, 0, 0, 0)
    if (len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 4
            or any(v is None or v < 1 for v in kernel + strides + dilations)
            or any(p is None or p < 0 for p in pads) or kernel != tuple(w[2:])):
        raise OperatorError(f"{_DEFORM_CONV}: kernel_shape {kernel}, strides {strides}, "
                            f"dilations {dilations} and pads {pads} do not fit W {w}")
    group, offset_group = attrs.group, attrs.offset_group
    if group < 1 or offset_group < 1 or x[1] != w[1] * group or w[0] % group \
            or x[1] % offset_group:
        raise ShapeError(f"{_DEFORM_CONV}: X {x} and W {w} do not fit group {group} and "
                         f"offset_group {offset_group}")
    out = []
    for axis in range(2):
        span = dilations[axis] * (kernel[axis] - 1) + 1
        out.append((x[2 + axis] + pads[axis] + pads[axis + 2] - span) // strides[axis] + 1)
    taps = kernel[0] * kernel[1]
    if tuple(offset) != (x[0], offset_group * taps * 2, out[0], out[1]):
        raise ShapeError(f"{_DEFORM_CONV}: offset has shape {offset}, expected "
                         f"{(x[0], offset_group * taps * 2, out[0], out[1])}")
    if "mask" in shapes and tuple(shapes["mask"]) != (x[0], offset_group * taps, *out):
        raise ShapeError(f"{_DEFORM_CONV}: mask has shape {shapes['mask']}, expected "
                         f"{(x[0], offset_group * taps, *out)}")
    if "bias" in shapes and tuple(shapes["bias"]) != (w[0],):
        raise ShapeError(f"{_DEFORM_CONV}: bias has shape {shapes['bias']}, expected "
                         f"({w[0]},)")
    return strides, dilations, pads, kernel, (x[0], w[0], out[0], out[1])


def _bilinear(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """image (N, G, Cg, H, W) sampled at (y, x) of shape (N, G, oh, ow),
    zero outside: (N, G, Cg, oh, ow)."""
    height, width = image.shape[-2:]
    y0, x0 = np.floor(y), np.floor(x)
    out = np.zeros(image.shape[:3] + y.shape[2:], dtype=np.float64)
    n_index = np.arange(image.shape[0])[:, None, None, None]
    g_index = np.arange(image.shape[1])[None, :, None, None]
    for dy in (0, 1):
        for dx in (0, 1):
            yy, xx = y0 + dy, x0 + dx
            weight = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
            inside = (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
            yi = np.clip(yy, 0, height - 1).astype(np.int64)
            xi = np.clip(xx, 0, width - 1).astype(np.int64)
            values = image[n_index, g_index, :, yi, xi]  # (N, G, oh, ow, Cg)
            out += np.moveaxis(values, -1, 2) * np.where(inside, weight, 0)[:, :, None]
    return out


def _deform_conv(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    named = dict(zip(_arguments(attrs), inputs))
    x, w, offset = named["data"], named["weight"], named["offset"]
    for name, array in named.items():
        if array.dtype.kind != "f":
            raise DTypeError(f"{_DEFORM_CONV}: {name} must be a float tensor, got "
                             f"{array.dtype.name}")
    strides, dilations, pads, kernel, out_shape = _geometry(
        attrs, {name: tuple(a.shape) for name, a in named.items()})
    n, oc, oh, ow = out_shape
    og, group = attrs.offset_group, attrs.group
    taps = kernel[0] * kernel[1]
    image = x.astype(np.float64).reshape(n, og, x.shape[1] // og, *x.shape[2:])
    offsets = offset.astype(np.float64).reshape(n, og, kernel[0], kernel[1], 2, oh, ow)
    mask = named["mask"].astype(np.float64).reshape(n, og, kernel[0], kernel[1], oh, ow) \
        if "mask" in named else None
    rows = (np.arange(oh) * strides[0] - pads[0])[:, None]
    cols = (np.arange(ow) * strides[1] - pads[1])[None, :]
    columns = np.empty((n, x.shape[1], taps, oh, ow), dtype=np.float64)
    for a in range(kernel[0]):
        for b in range(kernel[1]):
            y = rows + a * dilations[0] + offsets[:, :, a, b, 0]
            xs = cols + b * dilations[1] + offsets[:, :, a, b, 1]
            sampled = _bilinear(image, y, xs)  # (N, og, C/og, oh, ow)
            if mask is not None:
                sampled = sampled * mask[:, :, a, b][:, :, None]
            columns[:, :, a * kernel[1] + b] = sampled.reshape(n, x.shape[1], oh, ow)
    cg = x.shape[1] // group
    grouped = columns.reshape(n, group, cg, taps, oh, ow)
    weights = w.astype(np.float64).reshape(group, oc // group, cg, taps)
    out = np.einsum("goct,ngcthw->ngohw", weights, grouped).reshape(n, oc, oh, ow)
    if "bias" in named:
        out = out + named["bias"].astype(np.float64)[None, :, None, None]
    return [out.astype(x.dtype)]


def _shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if any(shape is None for shape in shapes):
        raise ShapeUnknownError(f"{_DEFORM_CONV}: an input shape is unknown")
    named = {name: tuple(shape) for name, shape in zip(_arguments(attrs), shapes)}
    return list(shapes), [_geometry(attrs, named)[4]]


register(OpDef(
    name=_DEFORM_CONV, compute=_deform_conv, infer_shape=_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("kernel_shape", parse_tuple, ()), Param("strides", parse_tuple, ()),
            Param("dilations", parse_tuple, ()), Param("pads", parse_tuple, ()),
            Param("group", parse_int, 1), Param("offset_group", parse_int, 1),
            Param("has_bias", parse_bool, False), Param("has_mask", parse_bool, False)),
    arguments=_arguments,
    doc="ONNX DeformConv (2-D): a grouped convolution whose taps sample X bilinearly at "
        "per-position offsets (zero outside), scaled by the optional mask. Host only."))
