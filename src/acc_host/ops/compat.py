"""Operators of MXNet 1.9's legacy namespace that NDArray's fluent methods
need and the registry lacks: one_hot, sort, argsort, pick, reverse (flip),
norm, swapaxes, reshape_like, shape_array and size_array.

They are defined like registered operators (OpDef: attributes, shape and
type inference, a numpy compute) but kept out of the registry, which lists
what graphs may contain and every bundled plugin implements (see
tests/plugins/cpu_ref/test_cpu_ref_ops.py): they run on the host only, for mx.nd and the
NDArray methods (acc_host.ndarray_methods places the result on the input's
context). HOST_OPS maps each name (aliases included) to its OpDef.

Semantics follow MXNet 1.9 (CPU): one_hot writes off_value for indices
outside [0, depth); sort and argsort are stable; pick clips (mode "clip") or
wraps (mode "wrap") out-of-range indices; norm's ord is 1 or 2 and, without
axis, reduces everything to shape (1,).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .params import (
    Attrs,
    Param,
    choice,
    optional,
    parse_bool,
    parse_dtype,
    parse_float,
    parse_int,
    parse_tuple,
)
from .registry import OpDef, Shape, normalize_axis, require_known

Arrays = list[np.ndarray]
Shapes = list[Shape | None]
DTypes = list[np.dtype | None]
FLOAT32 = np.dtype(np.float32)
HOST_OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Adds op to HOST_OPS (not to the operator registry)."""
    for name in (op.name, *op.aliases):
        HOST_OPS[name] = op
    return op


def _fail(op: str, message: str) -> ShapeError:
    return ShapeError(f"{op}: {message}")


def _dtype_or(dtype: np.dtype | None, default: np.dtype = FLOAT32) -> np.dtype:
    return np.dtype(dtype) if dtype is not None else default


# ---- one_hot -----------------------------------------------------------------------------


def _one_hot_infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
    shape = require_known("one_hot", shapes, 0, "indices")
    if attrs.depth < 1:
        raise _fail("one_hot", f"depth must be positive, got {attrs.depth}")
    return [shape], [(*shape, attrs.depth)]


def _one_hot(attrs: Attrs, inputs: Arrays) -> Arrays:
    indices = inputs[0].astype(np.int64)
    out = np.full((*indices.shape, attrs.depth), attrs.off_value, dtype=attrs.dtype)
    inside = (indices >= 0) & (indices < attrs.depth)
    rows = np.nonzero(inside)
    out[tuple(rows) + (indices[rows],)] = attrs.on_value
    return [out]


register(OpDef(
    name="one_hot",
    arguments=("indices",),
    params=(Param("depth", parse_int), Param("on_value", parse_float, 1.0),
            Param("off_value", parse_float, 0.0), Param("dtype", parse_dtype, "float32")),
    compute=_one_hot,
    infer_shape=_one_hot_infer,
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0])], [np.dtype(attrs.dtype)]),
    doc="A new last axis of length depth: on_value at each index, off_value elsewhere "
        "(and for indices outside [0, depth)).",
))


# ---- sort, argsort -----------------------------------------------------------------------


def _sorted_positions(op: str, x: np.ndarray, attrs: Attrs) -> tuple[np.ndarray, int | None]:
    if attrs.axis is None:
        work, axis = x.reshape(-1), 0
    else:
        axis = normalize_axis(op, attrs.axis, x.ndim)
        work = x
    # descending: ascending order of the negated values, ties keeping the lower index first
    keys = work if attrs.is_ascend else -work.astype(np.float64)
    order = np.argsort(keys, axis=axis, kind="stable")
    return order, (None if attrs.axis is None else axis)


def _sort_infer(op: str):  # type: ignore[no-untyped-def]
    def infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
        shape = require_known(op, shapes, 0, "data")
        if attrs.axis is None:
            return [shape], [(int(np.prod(shape, dtype=np.int64)),)]
        normalize_axis(op, attrs.axis, len(shape))
        return [shape], [shape]
    return infer


def _sort(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    order, axis = _sorted_positions("sort", x, attrs)
    work = x.reshape(-1) if axis is None else x
    return [np.ascontiguousarray(np.take_along_axis(work, order, axis=axis or 0))]


def _argsort(attrs: Attrs, inputs: Arrays) -> Arrays:
    order, _ = _sorted_positions("argsort", inputs[0], attrs)
    return [np.ascontiguousarray(order.astype(attrs.dtype))]


_SORT_PARAMS = (Param("axis", optional(parse_int), -1), Param("is_ascend", parse_bool, True))

register(OpDef(
    name="sort", params=_SORT_PARAMS, compute=_sort, infer_shape=_sort_infer("sort"),
    doc="The values sorted along axis (the flattened input when axis is None)."))
register(OpDef(
    name="argsort", params=(*_SORT_PARAMS, Param("dtype", parse_dtype, "float32")),
    compute=_argsort, infer_shape=_sort_infer("argsort"),
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0])], [np.dtype(attrs.dtype)]),
    doc="The positions that sort the values along axis, as values of dtype."))


# ---- pick ---------------------------------------------------------------------------------


def _pick_layout(attrs: Attrs, shape: Shape) -> tuple[int, Shape]:
    axis = normalize_axis("pick", -1 if attrs.axis is None else attrs.axis, len(shape))
    if attrs.keepdims:
        return axis, shape[:axis] + (1,) + shape[axis + 1:]
    return axis, shape[:axis] + shape[axis + 1:]


def _pick_infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
    shape = require_known("pick", shapes, 0, "data")
    _, out = _pick_layout(attrs, shape)
    index = shapes[1] if len(shapes) > 1 and shapes[1] is not None else out
    if int(np.prod(index, dtype=np.int64)) != int(np.prod(out, dtype=np.int64)):
        raise _fail("pick", f"index shape {index} does not fit data {shape} along the axis")
    return [shape, index], [out]


def _pick(attrs: Attrs, inputs: Arrays) -> Arrays:
    data, index = inputs
    axis, out = _pick_layout(attrs, data.shape)
    length = data.shape[axis]
    positions = index.astype(np.int64).reshape(data.shape[:axis] + (1,) + data.shape[axis + 1:])
    positions = np.mod(positions, length) if attrs.mode == "wrap" else np.clip(positions, 0,
                                                                               length - 1)
    return [np.ascontiguousarray(np.take_along_axis(data, positions, axis=axis).reshape(out))]


register(OpDef(
    name="pick",
    arguments=("data", "index"),
    params=(Param("axis", optional(parse_int), -1), Param("keepdims", parse_bool, False),
            Param("mode", choice("clip", "wrap"), "clip")),
    compute=_pick,
    infer_shape=_pick_infer,
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0]), _dtype_or(dtypes[1],
                                                                       _dtype_or(dtypes[0]))],
                                      [_dtype_or(dtypes[0])]),
    doc="The element at index along axis for every other position.",
))


# ---- reverse (flip), swapaxes ---------------------------------------------------------------


def _same(op: str):  # type: ignore[no-untyped-def]
    def infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
        shape = require_known(op, shapes, 0, "data")
        if op == "reverse":
            for axis in attrs.axis:
                normalize_axis(op, axis, len(shape))
        return [shape], [shape]
    return infer


def _reverse(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    axes = tuple(normalize_axis("reverse", axis, x.ndim) for axis in attrs.axis)
    return [np.ascontiguousarray(np.flip(x, axis=axes))]


register(OpDef(name="reverse", aliases=("flip",), params=(Param("axis", parse_tuple),),
               compute=_reverse, infer_shape=_same("reverse"),
               doc="The elements in reverse order along each axis given."))


def _swap_layout(attrs: Attrs, shape: Shape) -> tuple[int, int, Shape]:
    first = normalize_axis("swapaxes", attrs.dim1, len(shape))
    second = normalize_axis("swapaxes", attrs.dim2, len(shape))
    out = list(shape)
    out[first], out[second] = out[second], out[first]
    return first, second, tuple(out)


def _swapaxes_infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
    shape = require_known("swapaxes", shapes, 0, "data")
    return [shape], [_swap_layout(attrs, shape)[2]]


def _swapaxes(attrs: Attrs, inputs: Arrays) -> Arrays:
    first, second, _ = _swap_layout(attrs, inputs[0].shape)
    return [np.ascontiguousarray(np.swapaxes(inputs[0], first, second))]


register(OpDef(name="swapaxes", aliases=("SwapAxis",),
               params=(Param("dim1", parse_int, 0), Param("dim2", parse_int, 0)),
               compute=_swapaxes, infer_shape=_swapaxes_infer,
               doc="The input with axes dim1 and dim2 exchanged."))


# ---- norm ---------------------------------------------------------------------------------


def _norm_layout(attrs: Attrs, shape: Shape) -> tuple[tuple[int, ...] | None, Shape]:
    if attrs.ord not in (1, 2):
        raise _fail("norm", f"ord must be 1 or 2, got {attrs.ord}")
    if attrs.axis is None:
        return None, ((1,) * len(shape) if attrs.keepdims else (1,))
    axes = tuple(sorted({normalize_axis("norm", axis, len(shape)) for axis in attrs.axis}))
    if attrs.keepdims:
        return axes, tuple(1 if k in axes else n for k, n in enumerate(shape))
    kept = tuple(n for k, n in enumerate(shape) if k not in axes)
    return axes, kept or (1,)


def _norm_infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
    shape = require_known("norm", shapes, 0, "data")
    return [shape], [_norm_layout(attrs, shape)[1]]


def _norm(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    axes, out = _norm_layout(attrs, x.shape)
    wide = np.abs(x.astype(np.float64))
    value = wide.sum(axis=axes) if attrs.ord == 1 else np.sqrt((wide * wide).sum(axis=axes))
    return [np.asarray(value).astype(x.dtype).reshape(out)]


register(OpDef(name="norm",
               params=(Param("ord", parse_int, 2), Param("axis", optional(parse_tuple), None),
                       Param("out_dtype", optional(parse_dtype), None),
                       Param("keepdims", parse_bool, False)),
               compute=_norm, infer_shape=_norm_infer,
               doc="The L1 or L2 norm over axis (every element when axis is None)."))


# ---- reshape_like, shape_array, size_array -------------------------------------------------


def _reshape_like_shape(attrs: Attrs, lhs: Shape, rhs: Shape) -> Shape:
    def span(begin: int | None, end: int | None, ndim: int) -> tuple[int, int]:
        start = 0 if begin is None else (begin + ndim if begin < 0 else begin)
        stop = ndim if end is None else (end + ndim if end < 0 else end)
        if not 0 <= start <= stop <= ndim:
            raise _fail("reshape_like", f"range [{begin}, {end}) is invalid for {ndim} axes")
        return start, stop

    lb, le = span(attrs.lhs_begin, attrs.lhs_end, len(lhs))
    rb, re_ = span(attrs.rhs_begin, attrs.rhs_end, len(rhs))
    out = lhs[:lb] + rhs[rb:re_] + lhs[le:]
    if int(np.prod(out, dtype=np.int64)) != int(np.prod(lhs, dtype=np.int64)):
        raise _fail("reshape_like", f"cannot reshape {lhs} to {out}: sizes differ")
    return out


def _reshape_like_infer(attrs: Attrs, shapes: Shapes) -> tuple[list[Shape], list[Shape]]:
    lhs = require_known("reshape_like", shapes, 0, "lhs")
    rhs = require_known("reshape_like", shapes, 1, "rhs")
    return [lhs, rhs], [_reshape_like_shape(attrs, lhs, rhs)]


register(OpDef(
    name="reshape_like", arguments=("lhs", "rhs"),
    params=tuple(Param(name, optional(parse_int), None)
                 for name in ("lhs_begin", "lhs_end", "rhs_begin", "rhs_end")),
    compute=lambda attrs, inputs: [inputs[0].reshape(
        _reshape_like_shape(attrs, inputs[0].shape, inputs[1].shape)).copy()],
    infer_shape=_reshape_like_infer,
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0]), _dtype_or(dtypes[1])],
                                      [_dtype_or(dtypes[0])]),
    doc="lhs with the shape of rhs (or its axes lhs_begin:lhs_end replaced by rhs's "
        "rhs_begin:rhs_end)."))

INT64 = np.dtype(np.int64)
register(OpDef(
    name="shape_array",
    compute=lambda attrs, inputs: [np.array(inputs[0].shape, dtype=np.int64)],
    infer_shape=lambda attrs, shapes: ([require_known("shape_array", shapes, 0, "data")],
                                       [(len(require_known("shape_array", shapes, 0,
                                                           "data")),)]),
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0])], [INT64]),
    doc="The shape of the input as an int64 array."))
register(OpDef(
    name="size_array",
    compute=lambda attrs, inputs: [np.array([inputs[0].size], dtype=np.int64)],
    infer_shape=lambda attrs, shapes: ([require_known("size_array", shapes, 0, "data")], [(1,)]),
    infer_type=lambda attrs, dtypes: ([_dtype_or(dtypes[0])], [INT64]),
    doc="The number of elements of the input, as an int64 array of shape (1,)."))
