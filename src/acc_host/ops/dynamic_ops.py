"""Dynamic-shape operators: ONNX operators whose output shape depends on
the values of some inputs (Reshape's shape, Expand's shape, Tile's repeats,
Slice's starts/ends/axes/steps, Resize's roi/scales/sizes, ConstantOfShape,
Range), and NonZero, whose output shape depends on its data.

Each ``_dyn_*`` operator takes its data inputs first, then one input per
quantity named in its ``dynamic`` attribute (the quantities the ONNX graph
computes); the other quantities are attributes (constants known at import).
``OpDef.resolve`` turns the quantities' values (and the data inputs'
shapes) into the static operator and attributes that compute the same thing
(``_onnx_reshape``, ``Reshape``, ``_onnx_slice``, ``_onnx_resize``, ...) or,
for ConstantOfShape and Range, the result itself. At bind time graph
inference works the quantities out from the actual input shapes
(:mod:`acc_host.graph.dynamic`) and the executor binds the static operators
in their place; run directly (the host path of a model whose quantities
depend on data), ``compute`` resolves them from the values it receives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import limits
from ..errors import OperatorError, ShapeError
from .params import (
    Attrs,
    Param,
    optional,
    parse_bool,
    parse_float,
    parse_float_tuple,
    parse_str,
    parse_tuple,
)
from .registry import OpDef, ShapeUnknownError, get, register

__all__ = ["resolve_static", "DYNAMIC_PREFIX"]

DYNAMIC_PREFIX = "_dyn_"

Resolver = Callable[[Attrs, list[tuple[int, ...]], dict[str, Any]], Any]


def _names(text: str) -> tuple[str, ...]:
    return tuple(name for name in parse_str(text).replace(" ", "").split(",") if name)


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def _floats(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1))


def resolve_static(op: OpDef, attrs: Attrs, shapes: Sequence[tuple[int, ...]],
                   values: Sequence[np.ndarray]) -> Any:
    """op.resolve for the data inputs' shapes and the dynamic quantities'
    values: (static operator name, attributes) or a numpy array."""
    assert op.resolve is not None
    return op.resolve(attrs, list(shapes), list(values))


def _dynamic(name: str, data: Sequence[str], quantities: Sequence[tuple[str, Callable]],
             resolver: Resolver, params: Sequence[Param] = (), dtype: Callable | None = None,
             doc: str = "") -> None:
    """Registers a dynamic operator: data inputs, then the quantities listed
    in its "dynamic" attribute; resolver(attrs, data shapes, quantities by
    name) gives (static operator name, attributes) or the result array."""
    num_data = len(data)

    def arguments(attrs: Attrs) -> list[str]:
        return list(data) + list(attrs.dynamic)

    def resolve(attrs: Attrs, shapes: list, values: list) -> Any:
        given = {q: attrs[q] for q, _ in quantities}
        for quantity, value in zip(attrs.dynamic, values):
            given[quantity] = np.asarray(value)
        return resolver(attrs, shapes, given)

    def compute(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
        result = resolve(attrs, [x.shape for x in inputs[:num_data]], inputs[num_data:])
        if isinstance(result, np.ndarray):
            return [result.copy()]
        static = get(result[0])
        return static.run(static.parse(result[1]), inputs[:num_data])

    def infer_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
        if attrs.dynamic:
            raise ShapeUnknownError(f"{name}: the output shape needs the values of "
                                    f"{', '.join(attrs.dynamic)} (worked out at bind time)")
        for position, shape in enumerate(shapes[:num_data]):
            if shape is None:
                raise ShapeUnknownError(f"{name}: the shape of input {position} is unknown")
        return static_shapes(attrs, shapes, [])

    def static_shapes(attrs: Attrs, shapes: list, values: list) -> tuple[list, list]:
        result = resolve(attrs, shapes[:num_data], values)
        if isinstance(result, np.ndarray):
            return list(shapes), [tuple(result.shape)]
        static = get(result[0])
        _, outputs = static.infer_shape(static.parse(result[1]), list(shapes[:num_data]))
        return list(shapes), list(outputs)

    def infer_type(attrs: Attrs, dtypes: list) -> tuple[list, list]:
        if dtype is not None:
            return list(dtypes), [np.dtype(dtype(attrs, dtypes))]
        if dtypes[0] is None:
            raise ShapeUnknownError(f"{name}: the dtype of input 0 is unknown")
        return list(dtypes), [dtypes[0]]

    all_params = (Param("dynamic", _names, ()),
                  *(Param(q, optional(parser), None) for q, parser in quantities), *params)
    register(OpDef(name=name, compute=compute, infer_shape=infer_shape, params=all_params,
                   arguments=arguments, infer_type=infer_type, doc=doc,
                   value_inputs=tuple(range(num_data, num_data + len(quantities))),
                   resolve=resolve))


def _require(name: str, given: dict[str, Any], *quantities: str) -> None:
    for quantity in quantities:
        if given.get(quantity) is None:
            raise OperatorError(f"{name}: {quantity!r} is neither an input nor an attribute")


# ---- Reshape, Expand, Tile, Slice ----------------------------------------------------------

def _reshape(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_reshape", given, "shape")
    shape = _ints(given["shape"])
    if not attrs.allowzero and shape and all(d >= -1 for d in shape):
        return "Reshape", {"shape": shape}
    return "_onnx_reshape", {"shape": shape, "allowzero": attrs.allowzero}


_dynamic("_dyn_reshape", ("data",), (("shape", parse_tuple),), _reshape,
         (Param("allowzero", parse_bool, False),),
         doc="ONNX Reshape by a shape computed in the graph.")


def _expand(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_expand", given, "shape")
    return "_onnx_expand", {"shape": _ints(given["shape"])}


_dynamic("_dyn_expand", ("data",), (("shape", parse_tuple),), _expand,
         doc="ONNX Expand to a shape computed in the graph.")


def _tile(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_tile", given, "repeats")
    return "_onnx_tile", {"reps": _ints(given["repeats"])}


_dynamic("_dyn_tile", ("data",), (("repeats", parse_tuple),), _tile,
         doc="ONNX Tile by repeats computed in the graph.")


def _slice(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_slice", given, "starts", "ends")
    starts, ends = _ints(given["starts"]), _ints(given["ends"])
    axes = () if given.get("axes") is None else _ints(given["axes"])
    steps = () if given.get("steps") is None else _ints(given["steps"])
    if _whole(shapes[0], starts, ends, axes, steps):
        # x[:, :, :h, :w] of an x of height h and width w (PyTorch's crop
        # to a computed size): a copy, not a strided gather
        return "_copy", {}
    return "_onnx_slice", {"starts": starts, "ends": ends, "axes": axes, "steps": steps}


def _whole(shape: Sequence[int] | None, starts: Sequence[int], ends: Sequence[int],
           axes: Sequence[int], steps: Sequence[int]) -> bool:
    """Whether an ONNX Slice of an input of shape keeps all of it."""
    if shape is None:
        return False
    axes = axes or tuple(range(len(starts)))
    steps = steps or (1,) * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if not -len(shape) <= axis < len(shape):
            return False
        extent = shape[axis % len(shape)]
        if step != 1 or start not in (0, -extent) and not (start < -extent) or end < extent:
            return False
    return True


_dynamic("_dyn_slice", ("data",), (("starts", parse_tuple), ("ends", parse_tuple),
                                   ("axes", parse_tuple), ("steps", parse_tuple)), _slice,
         doc="ONNX Slice by starts/ends/axes/steps computed in the graph.")


def _pad(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_pad", given, "pads")
    value = given.get("constant_value")
    value = 0.0 if value is None or not np.asarray(value).size else \
        float(np.asarray(value).reshape(-1)[0])
    return "_onnx_pad", {
        "pads": _ints(given["pads"]), "mode": attrs.mode, "value": value,
        "axes": () if given.get("axes") is None else _ints(given["axes"])}


_dynamic("_dyn_pad", ("data",), (("pads", parse_tuple), ("constant_value", parse_float),
                                 ("axes", parse_tuple)), _pad,
         (Param("mode", parse_str, "constant"),),
         doc="ONNX Pad by pads (or a constant value) computed in the graph.")


# ---- Resize --------------------------------------------------------------------------------

def resize_attrs(shape: Sequence[int], roi: Any, scales: Any, sizes: Any,
                 axes: Sequence[int] | None, policy: str) -> dict[str, Any]:
    """_onnx_resize's per-axis sizes, scales and roi for an input of shape
    (ONNX Resize's rules: sizes win over scales, keep_aspect_ratio_policy,
    roi on the given axes)."""
    ndim = len(shape)
    axes = [a % ndim for a in (axes if axes else range(ndim))]
    full_scales, full_sizes = [1.0] * ndim, list(shape)
    if sizes is not None and np.asarray(sizes).size:
        sizes = _ints(sizes)
        if len(sizes) != len(axes):
            raise ShapeError(f"Resize: {len(sizes)} sizes for {len(axes)} axes")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(size / shape[axis] for axis, size in zip(axes, sizes))
            sizes = tuple(int(np.round(scale * shape[axis])) for axis in axes)
            for axis, size in zip(axes, sizes):
                full_sizes[axis], full_scales[axis] = size, scale
        else:
            for axis, size in zip(axes, sizes):
                full_sizes[axis] = size
                full_scales[axis] = size / shape[axis] if shape[axis] else 1.0
    elif scales is not None and np.asarray(scales).size:
        values = _floats(scales)
        if len(values) != len(axes):
            raise ShapeError(f"Resize: {len(values)} scales for {len(axes)} axes")
        for axis, scale in zip(axes, values):
            full_scales[axis] = scale
            full_sizes[axis] = int(np.floor(shape[axis] * scale))
    else:
        raise OperatorError("Resize needs scales or sizes")
    full_roi: tuple[float, ...] = ()
    if roi is not None and np.asarray(roi).size:
        values = _floats(roi)
        begin, end = [0.0] * ndim, [1.0] * ndim
        for i, axis in enumerate(axes):
            begin[axis], end[axis] = values[i], values[i + len(axes)]
        full_roi = tuple(begin + end)
    return {"sizes": tuple(full_sizes), "scales": tuple(full_scales), "roi": full_roi}


def nearest_upsampling(shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float],
                       mode: str, transform: str, nearest_mode: str) -> int | None:
    """The integer factor s when an ONNX Resize is MXNet's UpSampling
    (nearest, scale s, which accelerators run as a copy per pixel): a 4-D
    NCHW input, scales (1, 1, s, s), the asymmetric transformation (x_in =
    x_out / s) with floor rounding, or with round_prefer_floor for s = 2
    (x_in's fraction is 0 or 1/2). None otherwise."""
    if mode != "nearest" or len(shape) != 4 or transform != "asymmetric":
        return None
    factor = scales[2]
    if tuple(scales[:2]) != (1.0, 1.0) or scales[3] != factor or factor != int(factor) \
            or factor < 2:
        return None
    factor = int(factor)
    if nearest_mode != "floor" and not (nearest_mode == "round_prefer_floor" and factor == 2):
        return None
    if tuple(sizes) != (shape[0], shape[1], shape[2] * factor, shape[3] * factor):
        return None
    return factor


def _half_linear(shape: Sequence[int], sizes: Sequence[int], scales: Sequence[float],
                 mode: str, transform: str) -> bool:
    """Whether an ONNX Resize is a 2x2 average pooling of stride 2: linear,
    half_pixel (or pytorch_half_pixel to more than one pixel), scales (1, 1,
    1/2, 1/2) on a 4-D input. Its sample coordinates are then 2 o + 1/2,
    half way between input pixels 2 o and 2 o + 1 on both axes."""
    if mode != "linear" or len(shape) != 4 or tuple(scales) != (1.0, 1.0, 0.5, 0.5):
        return False
    if transform not in ("half_pixel", "pytorch_half_pixel"):
        return False
    if tuple(sizes) != (shape[0], shape[1], shape[2] // 2, shape[3] // 2):
        return False
    return transform == "half_pixel" or min(sizes[2:]) > 1


def _resize(attrs: Attrs, shapes: list, given: dict) -> Any:
    result = resize_attrs(shapes[0], given.get("roi"), given.get("scales"), given.get("sizes"),
                          attrs.axes, attrs.keep_aspect_ratio_policy)
    factor = nearest_upsampling(shapes[0], result["sizes"], result["scales"], attrs.mode,
                                attrs.transform, attrs.nearest_mode)
    if factor is not None:
        return "UpSampling", {"scale": factor, "sample_type": "nearest", "num_args": 1}
    if _half_linear(shapes[0], result["sizes"], result["scales"], attrs.mode, attrs.transform):
        return "Pooling", {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg",
                           "pooling_convention": "valid"}
    result.update(mode=attrs.mode, coordinate_transformation_mode=attrs.transform,
                  nearest_mode=attrs.nearest_mode, cubic_coeff_a=attrs.cubic_coeff_a,
                  exclude_outside=attrs.exclude_outside,
                  extrapolation_value=attrs.extrapolation_value)
    return "_onnx_resize", result


_dynamic("_dyn_resize", ("data",), (("roi", parse_float_tuple), ("scales", parse_float_tuple),
                                    ("sizes", parse_tuple)), _resize,
         (Param("axes", parse_tuple, ()), Param("keep_aspect_ratio_policy", parse_str, "stretch"),
          Param("mode", parse_str, "nearest"), Param("transform", parse_str, "half_pixel"),
          Param("nearest_mode", parse_str, "round_prefer_floor"),
          Param("cubic_coeff_a", parse_float, -0.75), Param("exclude_outside", parse_bool, False),
          Param("extrapolation_value", parse_float, 0.0)),
         doc="ONNX Resize of an input whose shape, or whose scales or sizes, are known only "
             "at bind time.")


# ---- ConstantOfShape, Range ------------------------------------------------------------------

def _constant_of_shape(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_constant_of_shape", given, "shape")
    shape = _ints(given["shape"])
    if any(extent < 0 for extent in shape):
        raise ShapeError(f"ConstantOfShape: negative extent in {shape}")
    limits.check_array(shape, np.dtype(attrs.dtype), "ConstantOfShape")
    return np.full(shape, attrs.value, dtype=attrs.dtype)


_dynamic("_dyn_constant_of_shape", (), (("shape", parse_tuple),), _constant_of_shape,
         (Param("value", parse_float, 0.0), Param("dtype", parse_str, "float32")),
         dtype=lambda attrs, dtypes: attrs.dtype,
         doc="ONNX ConstantOfShape of a shape computed in the graph.")


def _scalar(given: dict, name: str) -> Any:
    value = np.asarray(given[name])
    if value.size != 1:
        raise ShapeError(f"Range: {name!r} must be a scalar, got shape {value.shape}")
    return value.reshape(-1)[0]


def _range(attrs: Attrs, shapes: list, given: dict) -> Any:
    _require("_dyn_range", given, "start", "limit", "delta")
    start, limit, delta = (_scalar(given, n) for n in ("start", "limit", "delta"))
    dtype = np.dtype(attrs.dtype)
    if not np.all(np.isfinite([start, limit, delta])) or delta == 0:
        raise ShapeError(f"Range({start}, {limit}, {delta}) has no finite length")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    limits.check_array((count,), dtype, "Range")
    return (np.asarray(start, dtype) + np.arange(count, dtype=dtype) *
            np.asarray(delta, dtype)).astype(dtype)


_dynamic("_dyn_range", (), (("start", parse_float), ("limit", parse_float),
                            ("delta", parse_float)), _range,
         (Param("dtype", parse_str, "int64"),), dtype=lambda attrs, dtypes: attrs.dtype,
         doc="ONNX Range with bounds computed in the graph.")


# ---- NonZero: a shape that depends on data -----------------------------------------------------

def _nonzero(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    return [np.array(np.nonzero(x.reshape(x.shape or (1,))), dtype=np.int64)
            .reshape(max(x.ndim, 1), -1)]


def _nonzero_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    raise ShapeUnknownError("_onnx_nonzero: the output shape depends on the input's values")


register(OpDef(name="_onnx_nonzero", compute=_nonzero, infer_shape=_nonzero_shape,
               infer_type=lambda attrs, dtypes: (list(dtypes), [np.dtype(np.int64)]),
               data_dependent=True,
               doc="ONNX NonZero: the indices of the non-zero elements, (rank, count); its "
                   "output shape depends on the data, so it runs on the host path only."))

