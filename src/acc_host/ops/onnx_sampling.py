"""Host operators for ONNX's spatial sampling: GridSample (2-D and 3-D,
nearest/linear/cubic, zeros/border/reflection padding), AffineGrid and
RoiAlign (average or max pooling of bilinear samples per region).

Host only (no plugin's supportedOps names them). GridSample is computed
for all output positions at once: each sampling tap's per-axis indices are
mapped by the padding mode, gathered and weighted, the N-D interpolation
being the product of per-axis weights (separable, as the specification's
nested 1-D interpolation is).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, OperatorError, ShapeError
from .params import Attrs, Param, choice, parse_bool, parse_float, parse_int, parse_tuple
from .registry import OpDef, ShapeUnknownError, register

_GRID_SAMPLE = "_onnx_grid_sample"
_CUBIC_A = -0.75  # the Keys cubic convolution coefficient ONNX specifies


def _reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """x reflected at low and high until it lies within them."""
    span = high - low
    if span <= 0:
        return np.full_like(x, low)
    below, above = x < low, x > high
    distance = np.where(below, low - x, np.where(above, x - high, 0))
    turns = np.floor(distance / span)
    rest = distance - turns * span
    even = turns % 2 == 0
    from_low = np.where(even, low + rest, high - rest)
    from_high = np.where(even, high - rest, low + rest)
    return np.where(below, from_low, np.where(above, from_high, x))


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys cubic weights of the taps at -1, 0, 1, 2 for a fraction t."""
    a = _CUBIC_A

    def near(d: np.ndarray) -> np.ndarray:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _grid_sample(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, grid = inputs
    if x.dtype.kind != "f" or grid.dtype.kind != "f":
        raise DTypeError(f"{_GRID_SAMPLE}: X and grid must be float tensors, got "
                         f"{x.dtype.name} and {grid.dtype.name}")
    _grid_sample_shapes(x.shape, grid.shape)
    dims = x.shape[2:]
    nd = len(dims)
    batch = x.shape[0]
    out_spatial = grid.shape[1:-1]
    # grid's last axis lists (x, y[, z]): the innermost axis first.
    coords = []
    for axis in range(nd):
        g = grid[..., nd - 1 - axis].astype(np.float64)
        length = dims[axis]
        if attrs.align_corners:
            c = (g + 1) / 2 * (length - 1)
            low, high = 0.0, length - 1.0
        else:
            c = ((g + 1) * length - 1) / 2
            low, high = -0.5, length - 0.5
        if attrs.mode == "nearest":
            c = np.rint(c)
        if attrs.padding_mode == "border" and attrs.mode != "cubic":
            # Cubic taps are clamped one by one (index() below) instead: the
            # coordinate keeps its fraction, as onnxruntime and PyTorch
            # compute it (the onnx reference clamps the coordinate first).
            c = np.where((c < low) | (c > high), np.clip(c, 0, length - 1), c)
        elif attrs.padding_mode == "reflection":
            c = _reflect(c, low, high)
        coords.append((c, low, high))

    def index(i: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-axis integer index i mapped by the padding mode, and whether
        the tap lies inside (zeros padding reads 0 outside)."""
        length = dims[axis]
        _, low, high = coords[axis]
        if attrs.padding_mode == "zeros":
            inside = (i >= 0) & (i < length)
            return np.clip(i, 0, length - 1), inside
        if attrs.padding_mode == "reflection":
            i = np.trunc(_reflect(i.astype(np.float64), low, high)).astype(np.int64)
        return np.clip(i, 0, length - 1), np.ones(i.shape, dtype=bool)

    if attrs.mode == "nearest":
        taps = [[(c.astype(np.int64), np.ones_like(c))] for c, _, _ in coords]
    elif attrs.mode == "linear":
        taps = []
        for c, _, _ in coords:
            base = np.floor(c)
            t = c - base
            base = base.astype(np.int64)
            taps.append([(base, 1 - t), (base + 1, t)])
    else:
        taps = []
        for c, _, _ in coords:
            base = np.floor(c)
            weights = _cubic_weights(c - base)
            base = base.astype(np.int64)
            taps.append([(base + k - 1, w) for k, w in enumerate(weights)])
    channels_last = np.moveaxis(x, 1, -1)  # (N, *dims, C)
    batch_index = np.arange(batch).reshape((batch,) + (1,) * len(out_spatial))
    out = np.zeros((batch, *out_spatial, x.shape[1]), dtype=np.float64)
    for combo in np.ndindex(*[len(axis_taps) for axis_taps in taps]):
        indices, weight, inside = [], np.ones((), dtype=np.float64), np.ones((), dtype=bool)
        for axis, choice_index in enumerate(combo):
            raw, w = taps[axis][choice_index]
            mapped, ok = index(raw, axis)
            indices.append(mapped)
            weight = weight * w
            inside = inside & ok
        values = channels_last[tuple([batch_index, *indices])]
        out += values * np.where(inside, weight, 0)[..., None]
    return [np.ascontiguousarray(np.moveaxis(out, -1, 1).astype(x.dtype))]


def _grid_sample_shapes(x: Any, grid: Any) -> tuple[int, ...]:
    x, grid = tuple(x), tuple(grid)
    if len(x) not in (4, 5):
        raise ShapeError(f"{_GRID_SAMPLE}: X must be 4-D or 5-D (N, C, spatial...), got "
                         f"shape {x}")
    nd = len(x) - 2
    if len(grid) != nd + 2 or grid[0] != x[0] or grid[-1] != nd:
        raise ShapeError(f"{_GRID_SAMPLE}: grid must have shape ({x[0]}, out..., {nd}) for X "
                         f"of shape {x}, got {grid}")
    if any(d == 0 for d in x[2:]) and any(d for d in grid[1:-1]):
        raise ShapeError(f"{_GRID_SAMPLE}: cannot sample X of shape {x} with empty spatial "
                         "axes")
    return (x[0], x[1], *grid[1:-1])


def _grid_sample_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None or shapes[1] is None:
        raise ShapeUnknownError(f"{_GRID_SAMPLE}: the input shapes are unknown")
    return list(shapes), [_grid_sample_shapes(shapes[0], shapes[1])]


register(OpDef(
    name=_GRID_SAMPLE, compute=_grid_sample, infer_shape=_grid_sample_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("mode", choice("nearest", "linear", "cubic"), "linear"),
            Param("padding_mode", choice("zeros", "border", "reflection"), "zeros"),
            Param("align_corners", parse_bool, False)),
    arguments=("data", "grid"),
    doc="ONNX GridSample: samples X (N, C, H, W) or (N, C, D, H, W) at the normalized "
        "coordinates of grid (N, out..., 2 or 3), nearest/linear/cubic, with zeros, border or "
        "reflection padding. Host only."))


# ---- AffineGrid ----------------------------------------------------------------------------

_AFFINE_GRID = "_onnx_affine_grid"


def _base_axis(length: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.linspace(-1.0, 1.0, length) if length > 1 else np.zeros(length)
    return (2 * np.arange(length) + 1) / length - 1


def _affine_size(attrs: Attrs, theta_shape: Any) -> tuple[int, ...]:
    size = tuple(attrs.size)
    if len(size) not in (4, 5) or any(d is None or d < 0 for d in size):
        raise OperatorError(f"{_AFFINE_GRID}: size must be (N, C, H, W) or (N, C, D, H, W), "
                            f"got {size}")
    nd = len(size) - 2
    if tuple(theta_shape) != (size[0], nd, nd + 1):
        raise ShapeError(f"{_AFFINE_GRID}: theta must have shape ({size[0]}, {nd}, {nd + 1}) "
                         f"for size {size}, got {tuple(theta_shape)}")
    return size


def _affine_grid(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    theta = inputs[0]
    if theta.dtype.kind != "f":
        raise DTypeError(f"{_AFFINE_GRID}: theta must be a float tensor, got "
                         f"{theta.dtype.name}")
    size = _affine_size(attrs, theta.shape)
    spatial = size[2:]
    # Base coordinates (x, y[, z], 1): the innermost axis first.
    axes = [_base_axis(n, attrs.align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([*reversed(mesh), np.ones(spatial)], axis=-1)  # (*spatial, nd + 1)
    grid = np.einsum("...k,njk->n...j", base, theta.astype(np.float64))
    return [np.ascontiguousarray(grid.astype(theta.dtype))]


def _affine_grid_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if shapes[0] is None:
        raise ShapeUnknownError(f"{_AFFINE_GRID}: the shape of theta is unknown")
    size = _affine_size(attrs, shapes[0])
    return list(shapes), [(size[0], *size[2:], len(size) - 2)]


register(OpDef(
    name=_AFFINE_GRID, compute=_affine_grid, infer_shape=_affine_grid_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("size", parse_tuple), Param("align_corners", parse_bool, False)),
    arguments=("theta",),
    doc="ONNX AffineGrid: the sampling grid (N, H, W, 2) or (N, D, H, W, 3) of the affine "
        "maps theta over the normalized output coordinates of size. Host only."))


# ---- RoiAlign ------------------------------------------------------------------------------

_ROI_ALIGN = "_onnx_roi_align"


def _roi_axis(start: float, size: float, bins: int, grid: int, limit: int,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (bin, sample) along one axis: low and high indices, the weight of
    the high one, and whether the sample lies within [-1, limit]."""
    bin_size = size / bins
    pos = (start + np.arange(bins)[:, None] * bin_size
           + (np.arange(grid)[None, :] + 0.5) * bin_size / grid)
    valid = (pos >= -1.0) & (pos <= limit)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= limit - 1
    low = np.where(at_end, limit - 1, low)
    high = np.where(at_end, limit - 1, low + 1)
    frac = np.where(at_end, 0.0, pos - low)
    return low, high, frac, valid


def _roi_align(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, rois, batch_indices = inputs
    if x.dtype.kind != "f" or rois.dtype.kind != "f":
        raise DTypeError(f"{_ROI_ALIGN}: X and rois must be float tensors, got "
                         f"{x.dtype.name} and {rois.dtype.name}")
    if batch_indices.dtype.kind not in "iu":
        raise DTypeError(f"{_ROI_ALIGN}: batch_indices must be integers, got "
                         f"{batch_indices.dtype.name}")
    _roi_shapes(attrs, x.shape, rois.shape, batch_indices.shape)
    if batch_indices.size and (batch_indices.min() < 0 or batch_indices.max() >= x.shape[0]):
        raise ShapeError(f"{_ROI_ALIGN}: batch_indices outside the {x.shape[0]} images")
    height, width = x.shape[2:]
    out_h, out_w = attrs.output_height, attrs.output_width
    out = np.zeros((rois.shape[0], x.shape[1], out_h, out_w), dtype=np.float64)
    offset = 0.5 if attrs.half_pixel else 0.0
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = (float(v) * attrs.spatial_scale - offset for v in rois[r])
        roi_w, roi_h = x2 - x1, y2 - y1
        if not attrs.half_pixel:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        grid_h = attrs.sampling_ratio or int(np.ceil(roi_h / out_h))
        grid_w = attrs.sampling_ratio or int(np.ceil(roi_w / out_w))
        if grid_h <= 0 or grid_w <= 0:
            continue
        y_low, y_high, ly, y_ok = _roi_axis(y1, roi_h, out_h, grid_h, height)
        x_low, x_high, lx, x_ok = _roi_axis(x1, roi_w, out_w, grid_w, width)
        image = x[int(batch_indices[r])].astype(np.float64)  # (C, H, W)
        # Axes (C, out_h, grid_h, out_w, grid_w).
        yl, yh = y_low[:, :, None, None], y_high[:, :, None, None]
        xl, xh = x_low[None, None], x_high[None, None]
        wy, wx = ly[:, :, None, None], lx[None, None]
        ok = (y_ok[:, :, None, None] & x_ok[None, None])
        corners = [(image[:, yl, xl], (1 - wy) * (1 - wx)), (image[:, yl, xh], (1 - wy) * wx),
                   (image[:, yh, xl], wy * (1 - wx)), (image[:, yh, xh], wy * wx)]
        weighted = [values * np.where(ok, weight, 0.0) for values, weight in corners]
        if attrs.mode == "avg":
            out[r] = sum(weighted).sum(axis=(2, 4)) / max(grid_h * grid_w, 1)
        else:  # the largest weighted corner of any sample
            out[r] = np.max(np.maximum.reduce(weighted), axis=(2, 4))
    return [out.astype(x.dtype)]


def _roi_shapes(attrs: Attrs, x: Any, rois: Any, indices: Any) -> tuple[int, ...]:
    x, rois, indices = tuple(x), tuple(rois), tuple(indices)
    if len(x) != 4 or len(rois) != 2 or rois[1] != 4 or indices != (rois[0],):
        raise ShapeError(f"{_ROI_ALIGN}: X must be (N, C, H, W), rois (R, 4) and "
                         f"batch_indices (R,), got {x}, {rois} and {indices}")
    if attrs.output_height < 1 or attrs.output_width < 1 or attrs.sampling_ratio < 0:
        raise OperatorError(f"{_ROI_ALIGN}: output_height {attrs.output_height}, output_width "
                            f"{attrs.output_width} and sampling_ratio {attrs.sampling_ratio} "
                            "must be positive (sampling_ratio 0: adaptive)")
    if x[2] < 1 or x[3] < 1:
        raise ShapeError(f"{_ROI_ALIGN}: X has an empty image, shape {x}")
    return (rois[0], x[1], attrs.output_height, attrs.output_width)


def _roi_align_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    if any(shape is None for shape in shapes):
        raise ShapeUnknownError(f"{_ROI_ALIGN}: an input shape is unknown")
    return list(shapes), [_roi_shapes(attrs, *shapes)]


register(OpDef(
    name=_ROI_ALIGN, compute=_roi_align, infer_shape=_roi_align_shape,
    infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(dtypes[0] or np.float32)]),
    params=(Param("mode", choice("avg", "max"), "avg"), Param("output_height", parse_int, 1),
            Param("output_width", parse_int, 1), Param("sampling_ratio", parse_int, 0),
            Param("spatial_scale", parse_float, 1.0), Param("half_pixel", parse_bool, True)),
    arguments=("data", "rois", "batch_indices"),
    doc="ONNX RoiAlign: each region of interest pooled (average, or maximum of the "
        "weighted corners) over bilinear samples into output_height x output_width bins. "
        "Host only."))
