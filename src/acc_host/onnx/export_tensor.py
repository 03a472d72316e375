"""Exporters of the tensor operators (acc_host/ops/tensor.py) to ONNX.

Arithmetic keeps MXNet's conventions: comparisons and logical operators give
0/1 in the operands' dtype, a scalar attribute is first converted to the
data's dtype, mod takes the divisor's sign (and x mod 0 is 0), round goes
half away from zero. Shape operators are written with the static shapes the
exporter inferred, so MXNet's special reshape codes become plain shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ops import tensor
from ..ops.registry import normalize_axis
from .export_builder import ExportUnsupported, GraphBuilder, OpNode
from .export_ops import exports

INT64_MIN = int(np.iinfo(np.int64).min)

# kernel(g, a, b, dtype, out): a OP b written into out
Kernel = Callable[[GraphBuilder, str, str, np.dtype, str], None]


def _is_int(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind in "iub"


# ---- binary kernels ---------------------------------------------------------------------


def _plain(op_type: str) -> Kernel:
    def kernel(g: GraphBuilder, a: str, b: str, dtype: np.dtype, out: str) -> None:
        g.add(op_type, [a, b], [out])
    return kernel


def _flags(op_type: str, negate: bool = False) -> Kernel:
    """A predicate as 0/1 of the operands' dtype."""
    def kernel(g: GraphBuilder, a: str, b: str, dtype: np.dtype, out: str) -> None:
        flags = g.add1(op_type, [a, b])
        g.cast(g.add1("Not", [flags]) if negate else flags, dtype, out)
    return kernel


def _logical(op_type: str) -> Kernel:
    def kernel(g: GraphBuilder, a: str, b: str, dtype: np.dtype, out: str) -> None:
        g.cast(g.add1(op_type, [g.to_bool(a), g.to_bool(b)]), dtype, out)
    return kernel


def _mod(g: GraphBuilder, a: str, b: str, dtype: np.dtype, out: str) -> None:
    """MXNet's mod: the remainder takes the divisor's sign; x mod 0 is 0."""
    zero = g.scalar(0, dtype)
    by_zero = g.add1("Equal", [b, zero])
    if _is_int(dtype):
        safe = g.add1("Where", [by_zero, g.scalar(1, dtype), b])
        remainder = g.add1("Mod", [a, safe], fmod=0)
    else:
        rem = g.add1("Mod", [a, b], fmod=1)
        signs_differ = g.add1("Xor", [g.add1("Less", [rem, zero]), g.add1("Less", [b, zero])])
        fix = g.add1("And", [g.add1("Not", [g.add1("Equal", [rem, zero])]), signs_differ])
        remainder = g.add1("Where", [fix, g.add1("Add", [rem, b]), rem])
    g.add("Where", [by_zero, zero, remainder], [out])


def _hypot(g: GraphBuilder, a: str, b: str, dtype: np.dtype, out: str) -> None:
    squares = g.add1("Add", [g.add1("Mul", [a, a]), g.add1("Mul", [b, b])])
    g.add("Sqrt", [squares], [out])


KERNELS: dict[str, Kernel] = {
    "add": _plain("Add"), "sub": _plain("Sub"), "mul": _plain("Mul"), "div": _plain("Div"),
    "power": _plain("Pow"), "maximum": _plain("Max"), "minimum": _plain("Min"),
    "mod": _mod, "hypot": _hypot,
    "equal": _flags("Equal"), "not_equal": _flags("Equal", negate=True),
    "greater": _flags("Greater"), "greater_equal": _flags("GreaterOrEqual"),
    "lesser": _flags("Less"), "lesser_equal": _flags("LessOrEqual"),
    "logical_and": _logical("And"), "logical_or": _logical("Or"),
    "logical_xor": _logical("Xor"),
}


def _binary_exporter(kernel: Kernel) -> Callable[[GraphBuilder, OpNode], None]:
    def export(g: GraphBuilder, n: OpNode) -> None:
        kernel(g, n.inputs[0], n.inputs[1], n.dtype, n.out)
    return export


def _scalar_exporter(kernel: Kernel, reverse: bool) -> Callable[[GraphBuilder, OpNode], None]:
    def export(g: GraphBuilder, n: OpNode) -> None:
        scalar = g.scalar(n.attrs.scalar, n.dtype)
        a, b = (scalar, n.inputs[0]) if reverse else (n.inputs[0], scalar)
        kernel(g, a, b, n.dtype, n.out)
    return export


for _binary in (*tensor._ELEMWISE_BINARY, *tensor._BROADCAST_BINARY):
    exports(_binary[0])(_binary_exporter(KERNELS[_binary[1]]))
for _scalar_op in tensor._SCALAR_OPS:
    exports(_scalar_op[0])(_scalar_exporter(KERNELS[_scalar_op[1]], _scalar_op[2]))


# ---- unary math ---------------------------------------------------------------------------

Unary = Callable[[GraphBuilder, str, np.dtype, str], None]


def _op(op_type: str) -> Unary:
    def unary(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
        g.add(op_type, [x], [out])
    return unary


def _float_only(op_type: str) -> Unary:
    """Rounding functions: the identity on integers."""
    def unary(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
        g.add("Identity" if _is_int(dtype) else op_type, [x], [out])
    return unary


def _trunc_value(g: GraphBuilder, x: str) -> str:
    return g.add1("Mul", [g.add1("Sign", [x]), g.add1("Floor", [g.add1("Abs", [x])])])


def _trunc(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.identity(x if _is_int(dtype) else _trunc_value(g, x), out)


def _round(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    """Halves away from zero, as C's round()."""
    if _is_int(dtype):
        g.identity(x, out)
        return
    truncated = _trunc_value(g, x)
    away = g.add1("GreaterOrEqual", [g.add1("Abs", [g.add1("Sub", [x, truncated])]),
                                     g.scalar(0.5, dtype)])
    g.add("Where", [away, g.add1("Add", [truncated, g.add1("Sign", [x])]), truncated], [out])


def _times(factor: float) -> Unary:
    def unary(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
        g.add("Mul", [x, g.scalar(factor, dtype)], [out])
    return unary


def _log_base(base: float) -> Unary:
    def unary(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
        g.add("Div", [g.add1("Log", [x]), g.scalar(math.log(base), dtype)], [out])
    return unary


def _cbrt_value(g: GraphBuilder, x: str, dtype: np.dtype) -> str:
    magnitude = g.add1("Pow", [g.add1("Abs", [x]), g.scalar(1.0 / 3.0, dtype)])
    return g.add1("Mul", [g.add1("Sign", [x]), magnitude])


def _cbrt(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.identity(_cbrt_value(g, x, dtype), out)


def _rcbrt(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.add("Reciprocal", [_cbrt_value(g, x, dtype)], [out])


def _square(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.add("Mul", [x, x], [out])


def _rsqrt(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.add("Reciprocal", [g.add1("Sqrt", [x])], [out])


def _expm1(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.add("Sub", [g.add1("Exp", [x]), g.scalar(1.0, dtype)], [out])


def _log1p(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.add("Log", [g.add1("Add", [x, g.scalar(1.0, dtype)])], [out])


def _logical_not(g: GraphBuilder, x: str, dtype: np.dtype, out: str) -> None:
    g.cast(g.add1("Not", [g.to_bool(x)]), dtype, out)


UNARY: dict[str, Unary] = {
    "abs": _op("Abs"), "sign": _op("Sign"), "negative": _op("Neg"), "square": _square,
    "relu": _op("Relu"), "floor": _float_only("Floor"), "ceil": _float_only("Ceil"),
    "round": _round, "rint": _float_only("Round"), "fix": _trunc, "trunc": _trunc,
    "logical_not": _logical_not, "reciprocal": _op("Reciprocal"), "sqrt": _op("Sqrt"),
    "rsqrt": _rsqrt, "cbrt": _cbrt, "rcbrt": _rcbrt, "exp": _op("Exp"), "expm1": _expm1,
    "log": _op("Log"), "log1p": _log1p, "log2": _log_base(2.0), "log10": _log_base(10.0),
    "sin": _op("Sin"), "cos": _op("Cos"), "tan": _op("Tan"), "arcsin": _op("Asin"),
    "arccos": _op("Acos"), "arctan": _op("Atan"), "sinh": _op("Sinh"), "cosh": _op("Cosh"),
    "tanh": _op("Tanh"), "arcsinh": _op("Asinh"), "arccosh": _op("Acosh"),
    "arctanh": _op("Atanh"), "degrees": _times(180.0 / math.pi),
    "radians": _times(math.pi / 180.0), "sigmoid": _op("Sigmoid"), "erf": _op("Erf"),
}


def _unary_exporter(unary: Unary) -> Callable[[GraphBuilder, OpNode], None]:
    def export(g: GraphBuilder, n: OpNode) -> None:
        unary(g, n.inputs[0], n.dtype, n.out)
    return export


for _name, _unary in UNARY.items():
    exports(_name)(_unary_exporter(_unary))


# ---- copies, casts, constants -----------------------------------------------------------


@exports("_copy", "BlockGrad")
def copy(g: GraphBuilder, n: OpNode) -> None:
    g.identity(n.inputs[0], n.out)


def _filled(g: GraphBuilder, n: OpNode, value: float) -> None:
    fill = g.onnx.numpy_helper.from_array(np.array([value], dtype=n.dtype))
    g.add("ConstantOfShape", [g.int64s(n.output_shapes[0])], [n.out], value=fill)


@exports("zeros_like")
def zeros_like(g: GraphBuilder, n: OpNode) -> None:
    _filled(g, n, 0)


@exports("ones_like")
def ones_like(g: GraphBuilder, n: OpNode) -> None:
    _filled(g, n, 1)


@exports("Cast")
def cast(g: GraphBuilder, n: OpNode) -> None:
    g.cast(n.inputs[0], n.output_dtypes[0], n.out)


@exports("clip")
def clip(g: GraphBuilder, n: OpNode) -> None:
    """Bounds held as float32 (MXNet's ClipParam), then converted to the dtype."""
    low = g.scalar(np.float32(n.attrs.a_min), n.dtype)
    high = g.scalar(np.float32(n.attrs.a_max), n.dtype)
    g.add("Clip", [n.inputs[0], low, high], [n.out])


@exports("add_n")
def add_n(g: GraphBuilder, n: OpNode) -> None:
    g.add("Sum", n.inputs, [n.out])


# ---- shapes ------------------------------------------------------------------------------------


@exports("Reshape")
def reshape(g: GraphBuilder, n: OpNode) -> None:
    """MXNet's codes (0, -1, -2, -3, -4, reverse) resolved to the inferred shape."""
    g.reshape(n.inputs[0], n.output_shapes[0], n.out)


@exports("squeeze")
def squeeze(g: GraphBuilder, n: OpNode) -> None:
    g.reshape(n.inputs[0], n.output_shapes[0], n.out)


@exports("expand_dims")
def expand_dims(g: GraphBuilder, n: OpNode) -> None:
    g.unsqueeze(n.inputs[0], [n.attrs.axis % (len(n.shape) + 1)], n.out)


@exports("transpose")
def transpose(g: GraphBuilder, n: OpNode) -> None:
    perm = tensor._transpose_axes(n.op, n.attrs, len(n.shape))
    g.transpose(n.inputs[0], perm, n.out)


@exports("Concat")
def concat(g: GraphBuilder, n: OpNode) -> None:
    g.add("Concat", n.inputs, [n.out], axis=normalize_axis(n.op, n.attrs.dim, len(n.shape)))


@exports("stack")
def stack(g: GraphBuilder, n: OpNode) -> None:
    axis = normalize_axis(n.op, n.attrs.axis, len(n.shape) + 1)
    g.add("Concat", [g.unsqueeze(x, [axis]) for x in n.inputs], [n.out], axis=axis)


@exports("SliceChannel")
def slice_channel(g: GraphBuilder, n: OpNode) -> None:
    axis = normalize_axis(n.op, n.attrs.axis, len(n.shape))
    parts = n.attrs.num_outputs
    split = g.int64s([n.shape[axis] // parts] * parts, "split")
    if not n.attrs.squeeze_axis:
        g.add("Split", [n.inputs[0], split], n.outputs, axis=axis)
        return
    pieces = g.add("Split", [n.inputs[0], split], parts, axis=axis)
    for piece, out, shape in zip(pieces, n.outputs, n.output_shapes):
        g.reshape(piece, shape, out)


def _slice(g: GraphBuilder, x: str, ranges: list[tuple[int, int, int]],
           axes: list[int], out: str) -> None:
    """Slice with (start, stop, step) per axis; a stop of -1 with a negative
    step means "through index 0", which ONNX spells INT64_MIN."""
    starts = [start for start, _, _ in ranges]
    ends = [INT64_MIN if stop < 0 else stop for _, stop, _ in ranges]
    steps = [step for _, _, step in ranges]
    g.add("Slice", [x, g.int64s(starts, "starts"), g.int64s(ends, "ends"),
                    g.int64s(axes, "axes"), g.int64s(steps, "steps")], [out])


@exports("slice")
def slice_(g: GraphBuilder, n: OpNode) -> None:
    ranges = tensor._slice_ranges(n.op, n.attrs, n.shape)
    _slice(g, n.inputs[0], ranges, list(range(len(ranges))), n.out)


@exports("slice_axis")
def slice_axis(g: GraphBuilder, n: OpNode) -> None:
    axis, begin, end = tensor._slice_axis_range(n.op, n.attrs, n.shape)
    _slice(g, n.inputs[0], [(begin, end, 1)], [axis], n.out)


@exports("slice_like")
def slice_like(g: GraphBuilder, n: OpNode) -> None:
    out = n.output_shapes[0]
    _slice(g, n.inputs[0], [(0, extent, 1) for extent in out], list(range(len(out))), n.out)


@exports("broadcast_to", "broadcast_axis", "broadcast_like")
def broadcast_to(g: GraphBuilder, n: OpNode) -> None:
    g.add("Expand", [n.inputs[0], g.int64s(n.output_shapes[0])], [n.out])


@exports("tile")
def tile(g: GraphBuilder, n: OpNode) -> None:
    reps, shape = tuple(n.attrs.reps), n.shape
    if not reps:
        g.identity(n.inputs[0], n.out)
        return
    ndim = max(len(shape), len(reps))
    padded = (1,) * (ndim - len(shape)) + shape
    x = g.to_shape(n.inputs[0], shape, padded)
    g.add("Tile", [x, g.int64s((1,) * (ndim - len(reps)) + reps, "repeats")], [n.out])


@exports("repeat")
def repeat(g: GraphBuilder, n: OpNode) -> None:
    out = n.output_shapes[0]
    if n.attrs.repeats == 0:
        _filled(g, n, 0)
        return
    x, shape = n.inputs[0], n.shape
    if n.attrs.axis is None:
        shape = (math.prod(shape),)
        x = g.to_shape(x, n.shape, shape)
        axis = 0
    else:
        axis = normalize_axis(n.op, n.attrs.axis, len(shape))
    spread = shape[:axis + 1] + (n.attrs.repeats,) + shape[axis + 1:]
    expanded = g.add1("Expand", [g.unsqueeze(x, [axis + 1]), g.int64s(spread)])
    g.reshape(expanded, out, n.out)


# ---- products ----------------------------------------------------------------------------------


@exports("dot")
def dot(g: GraphBuilder, n: OpNode) -> None:
    """MXNet's dot as acc-host computes it: both operands folded to
    matrices (transposed ones folded the other way), one MatMul, the result
    unfolded."""
    (lhs, rhs), (ls, rs) = n.inputs, n.input_shapes
    if n.attrs.transpose_a:
        left = g.transpose(g.to_shape(lhs, ls, (ls[0], math.prod(ls[1:]))), [1, 0])
    else:
        left = g.to_shape(lhs, ls, (math.prod(ls[:-1]), ls[-1]))
    if n.attrs.transpose_b:
        right = g.transpose(g.to_shape(rhs, rs, (math.prod(rs[:-1]), rs[-1])), [1, 0])
    else:
        right = g.to_shape(rhs, rs, (rs[0], math.prod(rs[1:])))
    product = g.add1("MatMul", [left, right])
    g.reshape(product, n.output_shapes[0], n.out)


@exports("batch_dot")
def batch_dot(g: GraphBuilder, n: OpNode) -> None:
    ndim = len(n.shape)
    swap = list(range(ndim - 2)) + [ndim - 1, ndim - 2]
    lhs, rhs = n.inputs
    if n.attrs.transpose_a:
        lhs = g.transpose(lhs, swap)
    if n.attrs.transpose_b:
        rhs = g.transpose(rhs, swap)
    g.add("MatMul", [lhs, rhs], [n.out])


# ---- indexing ----------------------------------------------------------------------------------


@exports("take")
def take(g: GraphBuilder, n: OpNode) -> None:
    data, indices = n.inputs
    index_dtype = n.input_dtypes[1]
    axis = normalize_axis(n.op, n.attrs.axis, len(n.shape))
    size = n.shape[axis]
    if n.attrs.mode == "clip":
        if _is_int(index_dtype):
            positions = g.add1("Clip", [g.cast(indices, np.int64), g.scalar(0, np.int64),
                                        g.scalar(size - 1, np.int64)])
        else:
            clipped = g.add1("Clip", [indices, g.scalar(0, index_dtype),
                                      g.scalar(size - 1, index_dtype)])
            positions = g.cast(clipped, np.int64)
    elif n.attrs.mode == "wrap":
        positions = g.add1("Mod", [g.cast(indices, np.int64), g.scalar(size, np.int64)])
    else:
        positions = g.cast(indices, np.int64)
    g.add("Gather", [data, positions], [n.out], axis=axis)


@exports("where")
def where(g: GraphBuilder, n: OpNode) -> None:
    condition, x, y = n.inputs
    mask = g.to_bool(condition)
    shape = n.input_shapes[1]
    if n.input_shapes[0] != shape:  # a vector condition picks whole rows
        mask = g.reshape(mask, (-1,) + (1,) * (len(shape) - 1))
    g.add("Where", [mask, x, y], [n.out])


# ---- reductions ----------------------------------------------------------------------------------

_REDUCE_OPS = {"sum": "ReduceSum", "mean": "ReduceMean", "prod": "ReduceProd",
               "max": "ReduceMax", "min": "ReduceMin", "nansum": "ReduceSum",
               "nanprod": "ReduceProd"}


@exports(*_REDUCE_OPS)
def reduce(g: GraphBuilder, n: OpNode) -> None:
    axes, out = tensor._reduce_layout(n.op, n.attrs, n.shape)
    x = n.inputs[0]
    if not axes:
        g.to_shape(x, n.shape, out, n.out)
        return
    if _is_int(n.dtype) and n.op == "mean":
        raise ExportUnsupported("the integer mean truncates toward zero; ONNX ReduceMean "
                                "does not say how it rounds")
    if n.op in ("nansum", "nanprod") and not _is_int(n.dtype):
        neutral = g.scalar(0 if n.op == "nansum" else 1, n.dtype)
        x = g.add1("Where", [g.add1("IsNaN", [x]), neutral, x])
    reduced = g.reduce(_REDUCE_OPS[n.op], x, list(axes), True)
    kept = tuple(1 if k in axes else extent for k, extent in enumerate(n.shape))
    g.to_shape(reduced, kept, out, n.out)


def _search(g: GraphBuilder, n: OpNode, op_type: str) -> None:
    x, shape = n.inputs[0], n.shape
    if n.attrs.axis is None:
        x, axis = g.to_shape(x, shape, (math.prod(shape),)), 0
        kept: tuple[int, ...] = (1,)
    else:
        axis = normalize_axis(n.op, n.attrs.axis, len(shape))
        kept = shape[:axis] + (1,) + shape[axis + 1:]
    found = g.cast(g.add1(op_type, [x], axis=axis, keepdims=1), n.dtype)
    g.to_shape(found, kept, n.output_shapes[0], n.out)


@exports("argmax")
def argmax(g: GraphBuilder, n: OpNode) -> None:
    _search(g, n, "ArgMax")


@exports("argmin")
def argmin(g: GraphBuilder, n: OpNode) -> None:
    _search(g, n, "ArgMin")


@exports("topk")
def topk(g: GraphBuilder, n: OpNode) -> None:
    attrs, x, shape = n.attrs, n.inputs[0], n.shape
    if attrs.ret_typ == "mask":
        raise ExportUnsupported("topk with ret_typ='mask'")
    if attrs.axis is None:
        x, axis = g.to_shape(x, shape, (math.prod(shape),)), 0
    else:
        axis = normalize_axis(n.op, attrs.axis, len(shape))
    k = n.output_shapes[0][axis] if attrs.axis is not None else n.output_shapes[0][0]
    values, indices = g.add("TopK", [x, g.int64s([k], "k")], 2, axis=axis,
                            largest=0 if attrs.is_ascend else 1, sorted=1)
    if attrs.ret_typ == "value":
        g.identity(values, n.out)
    elif attrs.ret_typ == "indices":
        g.cast(indices, attrs.dtype, n.out)
    else:
        g.identity(values, n.outputs[0])
        g.cast(indices, attrs.dtype, n.outputs[1])
