"""Tensor operators: arithmetic, comparison, shape manipulation, indexing,
reductions and element-wise math, with MXNet 1.9 semantics.

Conventions followed throughout (MXNet 1.x, "legacy" non-numpy mode):

* There are no 0-d arrays: a reduction over every axis gives shape (1,).
* Comparisons and logical operators return 0/1 in the input dtype.
* Binary operators want one dtype for both operands; a scalar attribute is
  first converted to the input dtype (so 2.7 becomes 2 for int32 data).
* Floating-point results are computed in float64 and rounded to the input
  dtype once; integer arithmetic is exact (C semantics where they differ from
  numpy's: division truncates toward zero).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from ..errors import OperatorError, ShapeError
from .params import (
    Attrs,
    Param,
    choice,
    optional,
    parse_bool,
    parse_count,
    parse_dtype,
    parse_float,
    parse_int,
    parse_tuple,
)
from .registry import (
    OpDef,
    Shape,
    normalize_axis,
    register,
    require_known,
    same_dtype,
    same_shape,
    take,
)

Arrays = list[np.ndarray]
Shapes = list[Shape | None]
DTypes = list[np.dtype | None]
ShapeResult = tuple[list[Shape], list[Shape]]
TypeResult = tuple[list[np.dtype], list[np.dtype]]
ShapeFn = Callable[[Attrs, Shapes], ShapeResult]
TypeFn = Callable[[Attrs, DTypes], TypeResult]
ComputeFn = Callable[[Attrs, Arrays], Arrays]
# A compute with its attributes and input shapes fixed (planned_kernel):
# kernel(values) -> outputs; an element-wise one also takes out= (a
# C-contiguous host array of the output's shape and dtype) and writes it.
PlannedKernel = Callable[..., Arrays]
# rule(op, attrs, input shape) -> output shape, for one-input operators
ShapeRule = Callable[[str, Attrs, Shape], Shape]
Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]

FLOAT32 = np.dtype(np.float32)


# ---- shared helpers ------------------------------------------------------------------


def _fail(op: str, message: str) -> NoReturn:
    raise ShapeError(f"{op}: {message}")


def _known(op: str, shapes: Shapes, names: Sequence[str]) -> list[Shape]:
    return [require_known(op, shapes, k, name) for k, name in enumerate(names)]


def _size(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iub"


def _check_axis(op: str, axis: int, ndim: int) -> int:
    """MXNet's CheckAxis: axis in [-ndim, ndim), or 0 / -1 for a 0-d shape."""
    return normalize_axis(op, axis, max(ndim, 1))


def _int_tuple(text: str) -> tuple[int, ...]:
    """A tuple of integers without None entries."""
    values = parse_tuple(text)
    if None in values:
        raise ValueError(f"None is not allowed here, got {text!r}")
    return values


def _arg_names(attrs: Attrs) -> list[str]:
    return [f"arg{k}" for k in range(attrs.num_args)]


def _output_names(count: int) -> list[str]:
    return [f"output{k}" for k in range(count)]


def _uniform_dtype(op: str) -> TypeFn:
    """Every input and the output share one dtype (ElemwiseType): unknown
    inputs take it, differing known inputs are an error."""
    def infer(attrs: Attrs, dtypes: DTypes) -> TypeResult:
        known = sorted({np.dtype(dtype) for dtype in dtypes if dtype is not None}, key=str)
        if len(known) > 1:
            raise ShapeError(f"{op}: input dtypes differ: {', '.join(map(str, known))}")
        dtype = known[0] if known else FLOAT32
        return [dtype] * len(dtypes), [dtype]
    return infer


def _first_input_dtype(attrs: Attrs, dtypes: DTypes) -> TypeResult:
    """The output has the first input's dtype; the other inputs are free
    (indices, shape donors) and default to it when unknown."""
    first = np.dtype(dtypes[0]) if dtypes[0] is not None else FLOAT32
    rest = [np.dtype(dtype) if dtype is not None else first for dtype in dtypes[1:]]
    return [first, *rest], [first]


def _one_input(op: str, rule: ShapeRule) -> ShapeFn:
    """Shape inference for a one-input operator from its shape rule."""
    def infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
        shape = require_known(op, shapes, 0, "data")
        return [shape], [rule(op, attrs, shape)]
    return infer


def _float_math(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """fn evaluated in float64 and rounded once to x's dtype."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


def _register_simple(name: str, rule: ShapeRule, compute: ComputeFn,
                     params: tuple[Param, ...] = (), aliases: tuple[str, ...] = (),
                     inplace: tuple[tuple[int, int], ...] = (), doc: str = "") -> None:
    """A one-input ("data"), one-output operator that keeps the dtype."""
    register(OpDef(name=name, params=params, compute=compute, infer_shape=_one_input(name, rule),
                   inplace=inplace, aliases=aliases, doc=doc))


# ---- binary kernels (operands of one dtype, result in that dtype) ----------------------


def _true_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if not _is_int(a.dtype):
        return _float_math(lambda x: x / b.astype(np.float64), a)
    with np.errstate(all="ignore"):
        quotient = np.floor_divide(a, b)
        # C integer division truncates toward zero; floor_divide rounds down.
        inexact = (a - quotient * b != 0) & ((a < 0) != (b < 0))
        return (quotient + inexact).astype(a.dtype)


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MXNet's mod: computed in double, takes the divisor's sign, x mod 0 = 0."""
    with np.errstate(all="ignore"):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        rem = np.fmod(a64, b64)
        rem = np.where((rem != 0) & ((rem < 0) != (b64 < 0)), rem + b64, rem)
        return np.where(b64 == 0, 0.0, rem).astype(a.dtype)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _float_math(lambda x: np.power(x, b.astype(np.float64)), a)


def _hypot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _float_math(lambda x: np.hypot(x, b.astype(np.float64)), a)


def _as_flags(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    """A predicate kernel whose 0/1 result has the operands' dtype."""
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(fn(a, b)).astype(a.dtype)
    return kernel


def _native(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Kernel:
    """fn computed in the operands' own dtype (exact for + - * on integers)."""
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(a.dtype)
    return kernel


# ---- planned element-wise kernels (planned_kernel) -----------------------------------

# The native kernels that a plan calls as the ufunc itself: the same ufunc
# on the same operands, so the same bits, without the per-call conversions.
_NATIVE_UFUNCS: dict[str, np.ufunc] = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
# compute -> its planner, filled as the operators are registered below.
_ELEMENTWISE_PLANNERS: dict[Any, Callable[[Attrs, Sequence[tuple[Shape, np.dtype]]],
                                          PlannedKernel | None]] = {}


def _warns(dtype: np.dtype) -> bool:
    """Whether a ufunc on dtype can raise floating-point warnings (which
    the kernels silence, as MXNet never warns): not for integers or bool."""
    return dtype.kind not in "iub"


def _elementwise_kernel(ufunc: np.ufunc, dtype: np.dtype, scalar: Any = None,
                        reverse: bool = False, quiet: bool | None = None) -> PlannedKernel:
    """ufunc on one array (and scalar, on the left when reverse) or on two
    arrays of dtype and one shape, into a new array or into out (quiet:
    whether warnings are silenced, by default when dtype can raise any)."""
    if quiet is None:
        quiet = _warns(dtype)

    def kernel(values: Arrays, out: np.ndarray | None = None) -> Arrays:
        if scalar is None:
            first, second = values
        elif reverse:
            first, second = scalar, values[0]
        else:
            first, second = values[0], scalar
        if quiet:
            with np.errstate(all="ignore"):
                result = ufunc(first, second) if out is None else ufunc(first, second, out=out)
        else:
            result = ufunc(first, second) if out is None else ufunc(first, second, out=out)
        if out is None and not result.flags.c_contiguous:
            result = np.ascontiguousarray(result)
        return [result]
    kernel.writes_out = True  # type: ignore[attr-defined]
    return kernel


def writes_out(kernel: PlannedKernel) -> bool:
    """Whether a planned kernel takes out= (element-wise kernels do)."""
    return getattr(kernel, "writes_out", False)


def _plan_native_binary(kernel_name: str) -> Callable[..., PlannedKernel | None]:
    """A planner of a binary operator's compute for two arrays of one shape
    and dtype (broadcasting calls keep the compute)."""
    ufunc = _NATIVE_UFUNCS[kernel_name]

    def planner(attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]) -> PlannedKernel | None:
        (lhs, left), (rhs, right) = inputs
        if lhs != rhs or not lhs or np.dtype(left) != np.dtype(right):
            return None
        return _elementwise_kernel(ufunc, np.dtype(left))
    return planner


def _plan_native_scalar(kernel_name: str, reverse: bool) -> Callable[..., PlannedKernel | None]:
    """A planner of an operator with a scalar attribute: the scalar is
    converted to the data's dtype once (DType(scalar), as _scalar_compute
    converts it per call)."""
    ufunc = _NATIVE_UFUNCS[kernel_name]

    def planner(attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]) -> PlannedKernel | None:
        (shape, dtype), = inputs
        if not shape:
            return None  # a 0-d result: the compute's own conversion
        dtype = np.dtype(dtype)
        with np.errstate(all="ignore"):
            scalar = np.asarray(attrs.scalar, dtype=np.float64).astype(dtype)
        return _elementwise_kernel(ufunc, dtype, scalar, reverse)
    return planner


# Floats whose np.maximum(-0.0, 0) is +0, as in float64 (float16's is -0).
_RELU_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _plan_relu(attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]) -> PlannedKernel | None:
    """relu as np.maximum with zero in the data's own dtype: exact, so the
    same values as the compute's float64 round trip (NaN kept, -0 to 0)."""
    (shape, dtype), = inputs
    dtype = np.dtype(dtype)
    if not shape or (dtype.kind not in "iu" and dtype not in _RELU_FLOATS):
        return None
    # np.maximum raises no floating-point warning (NaN propagates quietly).
    return _elementwise_kernel(np.maximum, dtype, np.zeros((), dtype), quiet=False)


# MXNet's maximum is a > b ? a : b (so a NaN in lhs yields rhs), minimum a < b ? a : b.
_KERNELS: dict[str, Kernel] = {
    "add": _native(np.add),
    "sub": _native(np.subtract),
    "mul": _native(np.multiply),
    "div": _true_divide,
    "mod": _mod,
    "power": _power,
    "maximum": _native(lambda a, b: np.where(a > b, a, b)),
    "minimum": _native(lambda a, b: np.where(a < b, a, b)),
    "hypot": _hypot,
    "equal": _as_flags(np.equal),
    "not_equal": _as_flags(np.not_equal),
    "greater": _as_flags(np.greater),
    "greater_equal": _as_flags(np.greater_equal),
    "lesser": _as_flags(np.less),
    "lesser_equal": _as_flags(np.less_equal),
    "logical_and": _as_flags(lambda a, b: (a != 0) & (b != 0)),
    "logical_or": _as_flags(lambda a, b: (a != 0) | (b != 0)),
    "logical_xor": _as_flags(lambda a, b: (a != 0) ^ (b != 0)),
}


def _binary_compute(kernel: Kernel) -> ComputeFn:
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        lhs, rhs = inputs
        result = kernel(lhs, rhs.astype(lhs.dtype, copy=False))
        # (not np.ascontiguousarray, which makes a 0-d result 1-d)
        return [result if result.flags.c_contiguous else np.ascontiguousarray(result)]
    return compute


# ---- element-wise binary operators (operands of one shape) ----------------------------

# name, kernel, aliases
_ELEMWISE_BINARY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("elemwise_add", "add", ("_add", "_plus", "_Plus")),
    ("elemwise_sub", "sub", ("_sub", "_minus", "_Minus")),
    ("elemwise_mul", "mul", ("_mul", "_Mul")),
    ("elemwise_div", "div", ("_div", "_Div")),
    ("_mod", "mod", ("_Mod",)),
    ("_power", "power", ("_Power",)),
    ("_maximum", "maximum", ("_Maximum",)),
    ("_minimum", "minimum", ("_Minimum",)),
    ("_hypot", "hypot", ("_Hypot",)),
    ("_equal", "equal", ("_Equal",)),
    ("_not_equal", "not_equal", ("_Not_Equal",)),
    ("_greater", "greater", ("_Greater",)),
    ("_greater_equal", "greater_equal", ("_Greater_Equal",)),
    ("_lesser", "lesser", ("_Lesser",)),
    ("_lesser_equal", "lesser_equal", ("_Lesser_Equal",)),
    ("_logical_and", "logical_and", ("_Logical_And",)),
    ("_logical_or", "logical_or", ("_Logical_Or",)),
    ("_logical_xor", "logical_xor", ("_Logical_Xor",)),
)

for _name, _kernel, _aliases in _ELEMWISE_BINARY:
    _compute = _binary_compute(_KERNELS[_kernel])
    if _kernel in _NATIVE_UFUNCS:
        _ELEMENTWISE_PLANNERS[_compute] = _plan_native_binary(_kernel)
    register(OpDef(
        name=_name,
        arguments=("lhs", "rhs"),
        compute=_compute,
        infer_shape=same_shape(_name),
        infer_type=_uniform_dtype(_name),
        inplace=((0, 0), (1, 0)),
        aliases=_aliases,
        doc=f"Element-wise {_kernel} of two arrays of one shape.",
    ))


# ---- broadcasting binary operators ------------------------------------------------------


def _broadcast_shapes(op: str, lhs: Shape, rhs: Shape) -> Shape:
    """numpy broadcasting (shorter shapes padded with leading 1s)."""
    ndim = max(len(lhs), len(rhs))
    left = (1,) * (ndim - len(lhs)) + lhs
    right = (1,) * (ndim - len(rhs)) + rhs
    out = []
    for a, b in zip(left, right):
        if a != b and a != 1 and b != 1:
            _fail(op, f"operands could not be broadcast together with shapes {lhs} {rhs}")
        out.append(b if a == 1 else a)
    return tuple(out)


def _broadcast_infer(op: str) -> ShapeFn:
    def infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
        lhs, rhs = _known(op, shapes, ("lhs", "rhs"))
        return [lhs, rhs], [_broadcast_shapes(op, lhs, rhs)]
    return infer


# name, kernel, aliases
_BROADCAST_BINARY: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("broadcast_add", "add", ("broadcast_plus",)),
    ("broadcast_sub", "sub", ("broadcast_minus",)),
    ("broadcast_mul", "mul", ()),
    ("broadcast_div", "div", ()),
    ("broadcast_mod", "mod", ()),
    ("broadcast_power", "power", ()),
    ("broadcast_maximum", "maximum", ()),
    ("broadcast_minimum", "minimum", ()),
    ("broadcast_hypot", "hypot", ()),
    ("broadcast_equal", "equal", ()),
    ("broadcast_not_equal", "not_equal", ()),
    ("broadcast_greater", "greater", ()),
    ("broadcast_greater_equal", "greater_equal", ()),
    ("broadcast_lesser", "lesser", ()),
    ("broadcast_lesser_equal", "lesser_equal", ()),
    ("broadcast_logical_and", "logical_and", ()),
    ("broadcast_logical_or", "logical_or", ()),
    ("broadcast_logical_xor", "logical_xor", ()),
)

for _name, _kernel, _aliases in _BROADCAST_BINARY:
    _compute = _binary_compute(_KERNELS[_kernel])
    if _kernel in _NATIVE_UFUNCS:
        _ELEMENTWISE_PLANNERS[_compute] = _plan_native_binary(_kernel)
    register(OpDef(
        name=_name,
        arguments=("lhs", "rhs"),
        compute=_compute,
        infer_shape=_broadcast_infer(_name),
        infer_type=_uniform_dtype(_name),
        aliases=_aliases,
        doc=f"Element-wise {_kernel} with numpy broadcasting.",
    ))


# ---- operators with a scalar attribute --------------------------------------------------

_SCALAR_PARAMS = (
    Param("scalar", parse_float, 1.0, "the scalar operand"),
    Param("is_int", parse_bool, True, "whether the scalar was an integer (MXNet 1.9)"),
)


def _scalar_compute(kernel: Kernel, reverse: bool) -> ComputeFn:
    """data OP scalar (or scalar OP data when reverse), the scalar first
    converted to the data's dtype as MXNet does (DType(scalar))."""
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        x = inputs[0]
        with np.errstate(all="ignore"):
            scalar = np.asarray(attrs.scalar, dtype=np.float64).astype(x.dtype)
        result = kernel(scalar, x) if reverse else kernel(x, scalar)
        return [np.ascontiguousarray(result)]
    return compute


# name, kernel, reversed operands, legacy alias
_SCALAR_OPS: tuple[tuple[str, str, bool, str], ...] = (
    ("_plus_scalar", "add", False, "_PlusScalar"),
    ("_minus_scalar", "sub", False, "_MinusScalar"),
    ("_rminus_scalar", "sub", True, "_RMinusScalar"),
    ("_mul_scalar", "mul", False, "_MulScalar"),
    ("_div_scalar", "div", False, "_DivScalar"),
    ("_rdiv_scalar", "div", True, "_RDivScalar"),
    ("_mod_scalar", "mod", False, "_ModScalar"),
    ("_rmod_scalar", "mod", True, "_RModScalar"),
    ("_power_scalar", "power", False, "_PowerScalar"),
    ("_rpower_scalar", "power", True, "_RPowerScalar"),
    ("_maximum_scalar", "maximum", False, "_MaximumScalar"),
    ("_minimum_scalar", "minimum", False, "_MinimumScalar"),
    ("_hypot_scalar", "hypot", False, "_HypotScalar"),
    ("_equal_scalar", "equal", False, "_EqualScalar"),
    ("_not_equal_scalar", "not_equal", False, "_NotEqualScalar"),
    ("_greater_scalar", "greater", False, "_GreaterScalar"),
    ("_greater_equal_scalar", "greater_equal", False, "_GreaterEqualScalar"),
    ("_lesser_scalar", "lesser", False, "_LesserScalar"),
    ("_lesser_equal_scalar", "lesser_equal", False, "_LesserEqualScalar"),
    ("_logical_and_scalar", "logical_and", False, "_LogicalAndScalar"),
    ("_logical_or_scalar", "logical_or", False, "_LogicalOrScalar"),
    ("_logical_xor_scalar", "logical_xor", False, "_LogicalXorScalar"),
)

for _name, _kernel, _reverse, _alias in _SCALAR_OPS:
    _compute = _scalar_compute(_KERNELS[_kernel], _reverse)
    if _kernel in _NATIVE_UFUNCS:
        _ELEMENTWISE_PLANNERS[_compute] = _plan_native_scalar(_kernel, _reverse)
    register(OpDef(
        name=_name,
        params=_SCALAR_PARAMS,
        compute=_compute,
        infer_shape=same_shape(_name),
        inplace=((0, 0),),
        aliases=(_alias,),
        doc=f"Element-wise {_kernel} with a scalar{' (scalar on the left)' if _reverse else ''}.",
    ))


# ---- unary math ---------------------------------------------------------------------------


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """C's round(): halves go away from zero (numpy's round goes to even)."""
    truncated = np.trunc(x)
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.sign(x), truncated)


_erf = np.vectorize(math.erf, otypes=[np.float64])

# name -> (function, exact on integers: computed in the integer dtype itself)
_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]] = {
    "abs": (np.abs, True),
    "sign": (np.sign, True),
    "negative": (np.negative, True),
    "square": (np.square, True),
    "relu": (lambda x: np.maximum(x, 0), True),
    "floor": (np.floor, True),
    "ceil": (np.ceil, True),
    "round": (_round_half_away, True),
    "rint": (np.rint, True),
    "fix": (np.fix, True),
    "trunc": (np.trunc, True),
    "logical_not": (lambda x: x == 0, True),
    "reciprocal": (lambda x: 1.0 / x, False),
    "sqrt": (np.sqrt, False),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), False),
    "cbrt": (np.cbrt, False),
    "rcbrt": (lambda x: 1.0 / np.cbrt(x), False),
    "exp": (np.exp, False),
    "expm1": (np.expm1, False),
    "log": (np.log, False),
    "log1p": (np.log1p, False),
    "log2": (np.log2, False),
    "log10": (np.log10, False),
    "sin": (np.sin, False),
    "cos": (np.cos, False),
    "tan": (np.tan, False),
    "arcsin": (np.arcsin, False),
    "arccos": (np.arccos, False),
    "arctan": (np.arctan, False),
    "sinh": (np.sinh, False),
    "cosh": (np.cosh, False),
    "tanh": (np.tanh, False),
    "arcsinh": (np.arcsinh, False),
    "arccosh": (np.arccosh, False),
    "arctanh": (np.arctanh, False),
    "degrees": (np.degrees, False),
    "radians": (np.radians, False),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), False),
    "erf": (_erf, False),
}


def _unary_compute(fn: Callable[[np.ndarray], np.ndarray], int_exact: bool) -> ComputeFn:
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        x = inputs[0]
        if int_exact and _is_int(x.dtype):
            with np.errstate(all="ignore"):
                return [np.asarray(fn(x)).astype(x.dtype)]
        return [_float_math(fn, x)]
    return compute


for _name, (_fn, _int_exact) in _UNARY.items():
    _compute = _unary_compute(_fn, _int_exact)
    if _name == "relu":
        _ELEMENTWISE_PLANNERS[_compute] = _plan_relu
    register(OpDef(
        name=_name,
        compute=_compute,
        infer_shape=same_shape(_name),
        inplace=((0, 0),),
        doc=f"Element-wise {_name}.",
    ))


# ---- copies and casts ----------------------------------------------------------------


def _copy(attrs: Attrs, inputs: Arrays) -> Arrays:
    return [inputs[0].copy()]


def _keep_shape(op: str, attrs: Attrs, shape: Shape) -> Shape:
    return shape


_register_simple("_copy", _keep_shape, _copy, aliases=("identity",), inplace=((0, 0),),
                 doc="A copy of the input.")
_register_simple("BlockGrad", _keep_shape, _copy, aliases=("stop_gradient",),
                 inplace=((0, 0),), doc="The input (gradients stop here).")
_register_simple("zeros_like", _keep_shape, lambda attrs, inputs: [np.zeros_like(inputs[0])],
                 doc="Zeros of the input's shape.")
_register_simple("ones_like", _keep_shape, lambda attrs, inputs: [np.ones_like(inputs[0])],
                 doc="Ones of the input's shape.")


def _cast_type(attrs: Attrs, dtypes: DTypes) -> TypeResult:
    given = np.dtype(dtypes[0]) if dtypes[0] is not None else FLOAT32
    return [given], [np.dtype(attrs.dtype)]


def _cast(attrs: Attrs, inputs: Arrays) -> Arrays:
    with np.errstate(all="ignore"):
        return [inputs[0].astype(attrs.dtype)]


register(OpDef(
    name="Cast",
    params=(Param("dtype", parse_dtype, doc="the output dtype"),),
    compute=_cast,
    infer_shape=same_shape("Cast"),
    infer_type=_cast_type,
    aliases=("cast",),
    doc="The input converted to dtype (C conversion: floats truncate toward zero).",
))


def _clip(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    # ClipParam holds float32 bounds, converted to the data's dtype.
    with np.errstate(all="ignore"):
        low = np.asarray(np.float32(attrs.a_min)).astype(x.dtype)
        high = np.asarray(np.float32(attrs.a_max)).astype(x.dtype)
    # x > a_max ? a_max : (x < a_min ? a_min : x), the order MXNet tests in.
    return [np.where(x > high, high, np.where(x < low, low, x)).astype(x.dtype)]


_register_simple("clip", _keep_shape, _clip,
                 params=(Param("a_min", parse_float), Param("a_max", parse_float)),
                 doc="Values limited to [a_min, a_max].")


# ---- add_n -------------------------------------------------------------------------------


def _add_n(attrs: Attrs, inputs: Arrays) -> Arrays:
    total = inputs[0].copy()
    with np.errstate(all="ignore"):
        for x in inputs[1:]:
            total += x
    return [total]


register(OpDef(
    name="add_n",
    params=(Param("num_args", parse_count),),
    arguments=_arg_names,
    compute=_add_n,
    infer_shape=same_shape("add_n"),
    infer_type=_uniform_dtype("add_n"),
    inplace=((0, 0),),
    aliases=("ElementWiseSum",),
    doc="The sum of num_args arrays of one shape.",
))


# ---- Reshape -------------------------------------------------------------------------------


def _reshape_special(op: str, codes: Sequence[int], shape: Shape, reverse: bool) -> Shape:
    """MXNet's reshape codes: 0 copy a dimension, -1 infer one, -2 copy the
    rest, -3 merge two, -4 split one into the two values that follow."""
    source = list(reversed(shape)) if reverse else list(shape)
    spec = list(reversed(codes)) if reverse else list(codes)
    out: list[int] = []
    src = 0
    infer_at: int | None = None
    i = 0

    def take(count: int, code: int) -> list[int]:
        nonlocal src
        if src + count > len(source):
            _fail(op, f"shape code {code} in {tuple(codes)} has no input dimension left "
                      f"(input shape {shape})")
        src += count
        return source[src - count:src]

    while i < len(spec):
        code = spec[i]
        if code == 0:
            out.extend(take(1, code))
        elif code == -1:
            if infer_at is not None:
                _fail(op, f"more than one -1 in shape {tuple(codes)}")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif code == -2:
            out.extend(source[src:])
            src = len(source)
        elif code == -3:
            first, second = take(2, code)
            out.append(first * second)
        elif code == -4:
            if i + 2 >= len(spec):
                _fail(op, f"-4 in shape {tuple(codes)} needs two values after it")
            (whole,) = take(1, code)
            out.extend(_split_dim(op, whole, spec[i + 1], spec[i + 2], codes))
            i += 2
        elif code > 0:
            out.append(code)
            src += 1
        else:
            _fail(op, f"invalid value {code} in shape {tuple(codes)}")
        i += 1
    if infer_at is not None:
        rest = _size(out)
        if rest == 0:
            _fail(op, f"cannot infer the -1 of shape {tuple(codes)} for input shape {shape}")
        out[infer_at] = _size(shape) // rest
    return tuple(reversed(out)) if reverse else tuple(out)


def _split_dim(op: str, whole: int, first: int, second: int, codes: Sequence[int]) -> list[int]:
    if first == -1 and second == -1:
        _fail(op, f"the two values after -4 in shape {tuple(codes)} cannot both be -1")
    if first == -1 and second > 0:
        first = whole // second
    if second == -1 and first > 0:
        second = whole // first
    if first <= 0 or second <= 0 or first * second != whole:
        _fail(op, f"-4 split ({first}, {second}) in shape {tuple(codes)} does not divide "
                  f"dimension {whole}")
    return [first, second]


def _reshape_legacy(op: str, attrs: Attrs, shape: Shape) -> Shape:
    """The deprecated target_shape: 0 marks the one inferred dimension;
    keep_highest keeps the input's first dimension."""
    out = list(attrs.target_shape)
    start = 1 if attrs.keep_highest else 0
    if attrs.keep_highest:
        out[0] = shape[0]
    zeros = [k for k in range(start, len(out)) if out[k] == 0]
    if len(zeros) == 1:
        out[zeros[0]] = 1
        out[zeros[0]] = _size(shape) // max(_size(out), 1)
    return tuple(out)


def _reshape_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    if attrs.shape:
        out = _reshape_special(op, attrs.shape, shape, attrs.reverse)
    elif attrs.target_shape:
        out = _reshape_legacy(op, attrs, shape)
    else:
        _fail(op, "the target shape is empty (give shape)")
    if _size(out) != _size(shape):
        _fail(op, f"cannot reshape {shape} ({_size(shape)} elements) to {out} "
                  f"({_size(out)} elements) with shape={attrs.shape}")
    return out


def _reshape(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    return [x.reshape(_reshape_rule("Reshape", attrs, x.shape)).copy()]


_register_simple(
    "Reshape", _reshape_rule, _reshape,
    params=(Param("shape", _int_tuple, ()), Param("reverse", parse_bool, False),
            Param("target_shape", _int_tuple, ()), Param("keep_highest", parse_bool, False)),
    aliases=("reshape",), inplace=((0, 0),),
    doc="The input in a new shape; shape may use the codes 0, -1, -2, -3, -4.")


# ---- transpose, expand_dims, squeeze --------------------------------------------------------


def _transpose_axes(op: str, attrs: Attrs, ndim: int) -> tuple[int, ...]:
    if ndim > 6:
        _fail(op, f"at most 6 dimensions are supported, got {ndim}")
    if not attrs.axes:
        return tuple(reversed(range(ndim)))
    if sorted(attrs.axes) != list(range(ndim)):
        _fail(op, f"axes {attrs.axes} is not a permutation of the {ndim} input axes")
    return tuple(attrs.axes)


def _transpose_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    return tuple(shape[axis] for axis in _transpose_axes(op, attrs, len(shape)))


def _transpose(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    return [np.ascontiguousarray(x.transpose(_transpose_axes("transpose", attrs, x.ndim)))]


_register_simple("transpose", _transpose_rule, _transpose, params=(Param("axes", _int_tuple, ()),),
                 doc="Axes permuted (reversed by default).")


def _expand_dims_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    ndim = len(shape)
    if not -ndim - 1 <= attrs.axis <= ndim:
        _fail(op, f"axis {attrs.axis} is out of range [{-ndim - 1}, {ndim}] for shape {shape}")
    axis = attrs.axis % (ndim + 1)
    return shape[:axis] + (1,) + shape[axis:]


_register_simple("expand_dims", _expand_dims_rule,
                 lambda attrs, inputs: [inputs[0].reshape(
                     _expand_dims_rule("expand_dims", attrs, inputs[0].shape)).copy()],
                 params=(Param("axis", parse_int),), inplace=((0, 0),),
                 doc="A new axis of size 1 inserted at axis.")


def _squeeze_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    ndim = len(shape)
    if attrs.axis is None:
        drop = {k for k, extent in enumerate(shape) if extent == 1}
    else:
        drop = set()
        for axis in attrs.axis:
            k = normalize_axis(op, axis, ndim)
            if shape[k] != 1:
                _fail(op, f"cannot squeeze axis {axis} of shape {shape}: its size is not 1")
            if k in drop:
                _fail(op, f"axis {k} appears twice in {attrs.axis}")
            drop.add(k)
    out = tuple(extent for k, extent in enumerate(shape) if k not in drop)
    return out or (1,)


_register_simple("squeeze", _squeeze_rule,
                 lambda attrs, inputs: [inputs[0].reshape(
                     _squeeze_rule("squeeze", attrs, inputs[0].shape)).copy()],
                 params=(Param("axis", optional(_int_tuple), None),), inplace=((0, 0),),
                 doc="Axes of size 1 removed (all of them, or those in axis); never 0-d.")


# ---- Concat, stack, SliceChannel -----------------------------------------------------------


def _concat_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "Concat"
    known = _known(op, shapes, _arg_names(attrs))
    first = known[0]
    if not first:
        _fail(op, f"cannot concatenate 0-d inputs (shapes {', '.join(map(str, known))})")
    axis = _check_axis(op, attrs.dim, len(first))
    for shape in known[1:]:
        if len(shape) != len(first) or any(a != b for k, (a, b) in enumerate(zip(shape, first))
                                           if k != axis):
            _fail(op, f"shapes {', '.join(map(str, known))} differ outside dimension {axis}")
    total = sum(shape[axis] for shape in known)
    return known, [first[:axis] + (total,) + first[axis + 1:]]


def _concat(attrs: Attrs, inputs: Arrays) -> Arrays:
    return [np.concatenate(inputs, axis=_check_axis("Concat", attrs.dim, inputs[0].ndim))]


register(OpDef(
    name="Concat",
    params=(Param("num_args", parse_count), Param("dim", parse_int, 1)),
    arguments=_arg_names,
    compute=_concat,
    infer_shape=_concat_infer,
    infer_type=_uniform_dtype("Concat"),
    aliases=("concat",),
    doc="num_args arrays joined along dimension dim.",
))


def _stack_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "stack"
    _, (shape,) = same_shape(op)(attrs, shapes)
    axis = _check_axis(op, attrs.axis, len(shape) + 1)
    return [shape] * len(shapes), [shape[:axis] + (attrs.num_args,) + shape[axis:]]


def _stack(attrs: Attrs, inputs: Arrays) -> Arrays:
    return [np.stack(inputs, axis=_check_axis("stack", attrs.axis, inputs[0].ndim + 1))]


register(OpDef(
    name="stack",
    params=(Param("axis", parse_int, 0), Param("num_args", parse_count)),
    arguments=_arg_names,
    compute=_stack,
    infer_shape=_stack_infer,
    infer_type=_uniform_dtype("stack"),
    doc="num_args arrays of one shape joined along a new axis.",
))


def _split_layout(op: str, attrs: Attrs, shape: Shape) -> tuple[int, Shape]:
    """(axis, shape of every output) of SliceChannel."""
    axis = normalize_axis(op, attrs.axis, len(shape))
    parts = attrs.num_outputs
    if shape[axis] % parts:
        _fail(op, f"dimension {axis} of shape {shape} cannot be split into {parts} equal parts")
    if attrs.squeeze_axis and shape[axis] != parts:
        _fail(op, f"squeeze_axis needs dimension {axis} of shape {shape} to equal "
                  f"num_outputs={parts}")
    if attrs.squeeze_axis:
        return axis, (shape[:axis] + shape[axis + 1:]) or (1,)
    return axis, shape[:axis] + (shape[axis] // parts,) + shape[axis + 1:]


def _split_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    shape = require_known("SliceChannel", shapes, 0, "data")
    _, part = _split_layout("SliceChannel", attrs, shape)
    return [shape], [part] * attrs.num_outputs


def _split_type(attrs: Attrs, dtypes: DTypes) -> TypeResult:
    ins, outs = same_dtype(attrs, dtypes)
    return ins, outs * attrs.num_outputs


def _split(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    axis, part = _split_layout("SliceChannel", attrs, x.shape)
    return [piece.reshape(part).copy() for piece in np.split(x, attrs.num_outputs, axis=axis)]


register(OpDef(
    name="SliceChannel",
    params=(Param("num_outputs", parse_count), Param("axis", parse_int, 1),
            Param("squeeze_axis", parse_bool, False)),
    outputs=lambda attrs: _output_names(attrs.num_outputs),
    compute=_split,
    infer_shape=_split_infer,
    infer_type=_split_type,
    aliases=("split",),
    doc="The input split into num_outputs equal parts along axis.",
))


# ---- slicing ----------------------------------------------------------------------------------


def _slice_ranges(op: str, attrs: Attrs, shape: Shape) -> list[tuple[int, int, int]]:
    """(begin, end, step) per sliced axis after MXNet's legacy checks; an end
    of -1 with a negative step means "through index 0"."""
    begin, end, step = attrs.begin, attrs.end, attrs.step
    if len(begin) != len(end):
        _fail(op, f"begin {begin} and end {end} differ in length")
    if len(begin) > len(shape):
        _fail(op, f"begin {begin} has more entries than shape {shape} has dimensions")
    if step and len(step) != len(begin):
        _fail(op, f"step {step} and begin {begin} differ in length")
    ranges = []
    for k, length in enumerate(shape[:len(begin)]):
        s = step[k] if step and step[k] is not None else 1
        if s == 0:
            raise OperatorError(f"{op}: step[{k}] cannot be 0")
        ranges.append(_slice_range(op, k, length, begin[k], end[k], s))
    return ranges


def _slice_range(op: str, k: int, length: int, b: int | None, e: int | None,
                 s: int) -> tuple[int, int, int]:
    if length == 0:
        return 0, 0, s
    start = b if b is not None else (length - 1 if s < 0 else 0)
    stop = e if e is not None else (-1 if s < 0 else length)
    if start < 0:
        start += length
    if not 0 <= start < length:
        _fail(op, f"begin[{k}]={b} is out of range for dimension {k} of size {length}")
    if e is not None and stop < 0:
        stop += length
        if stop < 0:
            _fail(op, f"end[{k}]={e} is out of range for dimension {k} of size {length}")
    if stop > length:
        _fail(op, f"end[{k}]={e} is out of range for dimension {k} of size {length}")
    if start == stop:
        _fail(op, f"begin[{k}] = end[{k}] = {stop} gives an empty slice, which is not supported")
    if (s > 0 and start > stop) or (s < 0 and start < stop):
        _fail(op, f"begin[{k}]={start}, end[{k}]={stop} and step[{k}]={s} select nothing")
    return start, stop, s


def _slice_extent(start: int, stop: int, step: int) -> int:
    if start == stop:
        return 0
    return (stop - start - 1) // step + 1 if step > 0 else (start - stop - 1) // -step + 1


def _slice_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    extents = tuple(_slice_extent(*r) for r in _slice_ranges(op, attrs, shape))
    return extents + shape[len(extents):]


def _slice(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    index = tuple(slice(b, e if e >= 0 else None, s)
                  for b, e, s in _slice_ranges("slice", attrs, x.shape))
    return [x[index].copy()]


_register_simple(
    "slice", _slice_rule, _slice,
    params=(Param("begin", parse_tuple), Param("end", parse_tuple), Param("step", parse_tuple, ())),
    aliases=("crop",),
    doc="A region between begin and end (None entries: the whole axis) with step.")


def _slice_axis_range(op: str, attrs: Attrs, shape: Shape) -> tuple[int, int, int]:
    axis = normalize_axis(op, attrs.axis, len(shape))
    size = shape[axis]
    if size == 0:
        return axis, 0, 0
    begin = attrs.begin + size if attrs.begin < 0 else attrs.begin
    if attrs.end is None:
        end = size
    else:
        end = attrs.end + size if attrs.end < 0 else attrs.end
    if end > size or begin < 0 or not begin < end:
        _fail(op, f"begin={attrs.begin}, end={attrs.end} is not a non-empty range of "
                  f"dimension {axis} of shape {shape}")
    return axis, begin, end


def _slice_axis_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    axis, begin, end = _slice_axis_range(op, attrs, shape)
    return shape[:axis] + (end - begin,) + shape[axis + 1:]


def _slice_axis(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    axis, begin, end = _slice_axis_range("slice_axis", attrs, x.shape)
    index = (slice(None),) * axis + (slice(begin, end),)
    return [x[index].copy()]


_register_simple(
    "slice_axis", _slice_axis_rule, _slice_axis,
    params=(Param("axis", parse_int), Param("begin", parse_int), Param("end", optional(parse_int))),
    doc="Indices begin to end (None: to the end) along one axis.")


def _slice_like_shape(op: str, attrs: Attrs, data: Shape, like: Shape) -> Shape:
    if not attrs.axes:
        if len(data) != len(like):
            _fail(op, f"without axes the shapes {data} and {like} need the same dimensions")
        axes = list(range(len(data)))
    else:
        axes = [normalize_axis(op, axis, len(data)) for axis in attrs.axes]
    out = list(data)
    for axis in axes:
        if axis >= len(like):
            _fail(op, f"axis {axis} is out of range for shape_like {like}")
        if like[axis] > data[axis]:
            _fail(op, f"dimension {axis} of shape_like {like} exceeds data {data}")
        out[axis] = like[axis]
    return tuple(out)


def _slice_like_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    data, like = _known("slice_like", shapes, ("data", "shape_like"))
    return [data, like], [_slice_like_shape("slice_like", attrs, data, like)]


def _slice_like(attrs: Attrs, inputs: Arrays) -> Arrays:
    x, like = inputs
    out = _slice_like_shape("slice_like", attrs, x.shape, like.shape)
    return [x[tuple(slice(0, extent) for extent in out)].copy()]


register(OpDef(
    name="slice_like",
    params=(Param("axes", _int_tuple, ()),),
    arguments=("data", "shape_like"),
    compute=_slice_like,
    infer_shape=_slice_like_infer,
    infer_type=_first_input_dtype,
    doc="data cut to shape_like's extents (on axes, or on all axes).",
))


# ---- broadcast_to, broadcast_axis, broadcast_like, tile, repeat ------------------------------


def _broadcast_to_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    target = attrs.shape
    if len(target) != len(shape):
        _fail(op, f"cannot broadcast {shape} to {target}: the dimensions differ")
    out = tuple(extent if want == 0 else want for extent, want in zip(shape, target))
    for extent, want in zip(shape, out):
        if extent not in (1, want):
            _fail(op, f"cannot broadcast {shape} to {target}")
    return out


def _broadcast_axis_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    if len(attrs.axis) != len(attrs.size):
        _fail(op, f"axis {attrs.axis} and size {attrs.size} differ in length")
    out = list(shape)
    for axis, size in zip(attrs.axis, attrs.size):
        k = normalize_axis(op, axis, len(shape))
        if shape[k] != 1:
            _fail(op, f"axis {axis} of shape {shape} has size {shape[k]}, not 1")
        out[k] = size
    return tuple(out)


def _broadcast_with(rule: ShapeRule, op: str) -> ComputeFn:
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        x = inputs[0]
        return [np.broadcast_to(x, rule(op, attrs, x.shape)).copy()]
    return compute


_register_simple("broadcast_to", _broadcast_to_rule,
                 _broadcast_with(_broadcast_to_rule, "broadcast_to"),
                 params=(Param("shape", _int_tuple, ()),),
                 doc="The input broadcast to shape (0 keeps a dimension).")
_register_simple("broadcast_axis", _broadcast_axis_rule,
                 _broadcast_with(_broadcast_axis_rule, "broadcast_axis"),
                 params=(Param("axis", _int_tuple, ()), Param("size", _int_tuple, ())),
                 aliases=("broadcast_axes",),
                 doc="Size-1 axes broadcast to the given sizes.")


def _broadcast_like_shape(op: str, attrs: Attrs, lhs: Shape, rhs: Shape) -> Shape:
    if attrs.lhs_axes is None or attrs.rhs_axes is None:
        if len(lhs) != len(rhs):
            _fail(op, f"cannot broadcast {lhs} to {rhs}: the dimensions differ")
        for a, b in zip(lhs, rhs):
            if a not in (1, b):
                _fail(op, f"cannot broadcast {lhs} to {rhs}")
        return rhs
    if len(attrs.lhs_axes) != len(attrs.rhs_axes) or not attrs.lhs_axes:
        _fail(op, f"lhs_axes {attrs.lhs_axes} and rhs_axes {attrs.rhs_axes} must be non-empty "
                  "and of one length")
    out = list(lhs)
    for src, dst in zip(attrs.lhs_axes, attrs.rhs_axes):
        k = normalize_axis(op, src, len(lhs))
        if lhs[k] != 1:
            _fail(op, f"axis {src} of lhs {lhs} has size {lhs[k]}, not 1")
        out[k] = rhs[normalize_axis(op, dst, len(rhs))]
    return tuple(out)


def _broadcast_like_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    lhs, rhs = _known("broadcast_like", shapes, ("lhs", "rhs"))
    return [lhs, rhs], [_broadcast_like_shape("broadcast_like", attrs, lhs, rhs)]


def _broadcast_like(attrs: Attrs, inputs: Arrays) -> Arrays:
    lhs, rhs = inputs
    return [np.broadcast_to(lhs, _broadcast_like_shape("broadcast_like", attrs, lhs.shape,
                                                       rhs.shape)).copy()]


register(OpDef(
    name="broadcast_like",
    params=(Param("lhs_axes", optional(_int_tuple), None),
            Param("rhs_axes", optional(_int_tuple), None)),
    arguments=("lhs", "rhs"),
    compute=_broadcast_like,
    infer_shape=_broadcast_like_infer,
    infer_type=_first_input_dtype,
    doc="lhs broadcast to rhs's shape (or to rhs's extents on the given axes).",
))


def _tile_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    reps = attrs.reps
    if not reps:
        return shape
    if any(rep < 1 for rep in reps):
        raise OperatorError(f"{op}: every entry of reps {reps} must be positive")
    ndim = max(len(shape), len(reps))
    padded_shape = (1,) * (ndim - len(shape)) + shape
    padded_reps = (1,) * (ndim - len(reps)) + tuple(reps)
    return tuple(extent * rep for extent, rep in zip(padded_shape, padded_reps))


def _tile(attrs: Attrs, inputs: Arrays) -> Arrays:
    _tile_rule("tile", attrs, inputs[0].shape)
    return [np.tile(inputs[0], attrs.reps) if attrs.reps else inputs[0].copy()]


_register_simple("tile", _tile_rule, _tile, params=(Param("reps", _int_tuple),),
                 doc="The whole array repeated reps times per axis.")


def _repeat_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    """MXNet's rule: the flattened input repeated without axis, and a (0,)
    array for repeats=0 whatever the axis."""
    if attrs.repeats < 0:
        raise OperatorError(f"{op}: repeats cannot be negative, got {attrs.repeats}")
    if attrs.axis is None:
        return (_size(shape) * attrs.repeats,)
    axis = normalize_axis(op, attrs.axis, len(shape))
    if attrs.repeats == 0:
        return (0,)
    return shape[:axis] + (shape[axis] * attrs.repeats,) + shape[axis + 1:]


def _repeat(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    shape = _repeat_rule("repeat", attrs, x.shape)
    if attrs.repeats == 0:
        return [np.zeros(shape, dtype=x.dtype)]
    return [np.repeat(x, attrs.repeats, axis=attrs.axis).reshape(shape)]


_register_simple("repeat", _repeat_rule, _repeat,
                 params=(Param("repeats", parse_int), Param("axis", optional(parse_int), None)),
                 doc="Each element repeated (along axis, or of the flattened input).")


# ---- dot, batch_dot -----------------------------------------------------------------------

_DOT_PARAMS = (
    Param("transpose_a", parse_bool, False),
    Param("transpose_b", parse_bool, False),
    Param("forward_stype", optional(choice("default", "csr", "row_sparse")), None),
)


def _dot_shape(op: str, attrs: Attrs, lhs: Shape, rhs: Shape) -> Shape:
    ta, tb = attrs.transpose_a, attrs.transpose_b
    if len(lhs) == 1 and len(rhs) == 1:
        if ta or tb:
            _fail(op, "cannot transpose vectors")
        if lhs[0] != rhs[0]:
            _fail(op, f"shape mismatch {lhs} X {rhs}")
        return (1,)
    if not lhs or not rhs:
        _fail(op, f"shape mismatch {lhs} X {rhs}")
    inner_l = lhs[0] if ta else lhs[-1]
    inner_r = rhs[-1] if tb else rhs[0]
    if inner_l != inner_r:
        _fail(op, f"shape mismatch {lhs} X {rhs} (transpose_a={ta}, transpose_b={tb})")
    outer_l = (lhs[1:] if ta else lhs[:-1]) if len(lhs) > 1 else ()
    outer_r = (rhs[:-1] if tb else rhs[1:]) if len(rhs) > 1 else ()
    return outer_l + outer_r


def _dot_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    lhs, rhs = _known("dot", shapes, ("lhs", "rhs"))
    return [lhs, rhs], [_dot_shape("dot", attrs, lhs, rhs)]


def _accumulator(dtype: np.dtype) -> type:
    return np.int64 if _is_int(dtype) else np.float64


def _dot(attrs: Attrs, inputs: Arrays) -> Arrays:
    lhs, rhs = inputs
    out = _dot_shape("dot", attrs, lhs.shape, rhs.shape)
    acc = _accumulator(lhs.dtype)
    # Explicit extents, not -1: numpy cannot infer -1 for an empty array.
    left = (lhs.reshape(lhs.shape[0], math.prod(lhs.shape[1:])).T if attrs.transpose_a
            else lhs.reshape(math.prod(lhs.shape[:-1]), lhs.shape[-1]))
    right = (rhs.reshape(math.prod(rhs.shape[:-1]), rhs.shape[-1]).T if attrs.transpose_b
             else rhs.reshape(rhs.shape[0], math.prod(rhs.shape[1:])))
    product: np.ndarray = left.astype(acc) @ right.astype(acc)
    return [product.reshape(out).astype(lhs.dtype)]


def _plan_dot(attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]) -> PlannedKernel | None:
    """_dot for two matrices, neither transposed, of one dtype: the same
    products (in the accumulator type), the shapes checked once."""
    (lhs, left_dtype), (rhs, right_dtype) = inputs
    if (len(lhs) != 2 or len(rhs) != 2 or attrs.transpose_a or attrs.transpose_b
            or left_dtype != right_dtype):
        return None
    _dot_shape("dot", attrs, lhs, rhs)  # raises for shapes that do not fit
    acc, dtype = _accumulator(left_dtype), left_dtype

    def kernel(values: Arrays) -> Arrays:
        left, right = values
        return [np.matmul(left.astype(acc), right.astype(acc)).astype(dtype)]
    return kernel


register(OpDef(
    name="dot",
    params=_DOT_PARAMS,
    arguments=("lhs", "rhs"),
    compute=_dot,
    infer_shape=_dot_infer,
    infer_type=_uniform_dtype("dot"),
    doc="Matrix product contracting lhs's last (first if transposed) and rhs's first "
        "(last if transposed) dimension.",
))


def _batch_dot_shape(op: str, attrs: Attrs, lhs: Shape, rhs: Shape) -> Shape:
    if len(lhs) < 3 or len(lhs) != len(rhs):
        _fail(op, f"operands need one number (>= 3) of dimensions, got {lhs} X {rhs}")
    if lhs[:-2] != rhs[:-2]:
        _fail(op, f"batch dimensions differ: {lhs} X {rhs}")
    rows, inner_l = (lhs[-1], lhs[-2]) if attrs.transpose_a else (lhs[-2], lhs[-1])
    inner_r, cols = (rhs[-1], rhs[-2]) if attrs.transpose_b else (rhs[-2], rhs[-1])
    if inner_l != inner_r:
        _fail(op, f"shape mismatch {lhs} X {rhs} (transpose_a={attrs.transpose_a}, "
                  f"transpose_b={attrs.transpose_b})")
    return lhs[:-2] + (rows, cols)


def _batch_dot_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    lhs, rhs = _known("batch_dot", shapes, ("lhs", "rhs"))
    return [lhs, rhs], [_batch_dot_shape("batch_dot", attrs, lhs, rhs)]


def _batch_dot(attrs: Attrs, inputs: Arrays) -> Arrays:
    lhs, rhs = inputs
    _batch_dot_shape("batch_dot", attrs, lhs.shape, rhs.shape)
    acc = _accumulator(lhs.dtype)
    left = np.swapaxes(lhs, -1, -2) if attrs.transpose_a else lhs
    right = np.swapaxes(rhs, -1, -2) if attrs.transpose_b else rhs
    return [np.matmul(left.astype(acc), right.astype(acc)).astype(lhs.dtype)]


register(OpDef(
    name="batch_dot",
    params=_DOT_PARAMS,
    arguments=("lhs", "rhs"),
    compute=_batch_dot,
    infer_shape=_batch_dot_infer,
    infer_type=_uniform_dtype("batch_dot"),
    doc="Matrix products of the last two dimensions, batched over the leading ones.",
))


# ---- take, where ---------------------------------------------------------------------------


def _take_shape(op: str, attrs: Attrs, data: Shape, indices: Shape) -> Shape:
    axis = normalize_axis(op, attrs.axis, len(data))
    if data[axis] == 0 and 0 not in indices:
        _fail(op, f"cannot take indices of shape {indices} from axis {axis} of data {data}, "
                  "which has size 0")
    return data[:axis] + indices + data[axis + 1:]


def _take_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    data, indices = _known("take", shapes, ("a", "indices"))
    return [data, indices], [_take_shape("take", attrs, data, indices)]


def _take_positions(attrs: Attrs, indices: np.ndarray, size: int) -> np.ndarray:
    """Indices truncated toward zero (C conversion), then clipped, wrapped,
    or checked ("raise", which accepts [-size, size))."""
    with np.errstate(all="ignore"):
        positions = indices.astype(np.int64)
    if size == 0:
        if positions.size:
            raise ShapeError("take: cannot take from an axis of size 0")
        return positions
    if attrs.mode == "clip":
        return np.clip(positions, 0, size - 1)
    if attrs.mode == "wrap":
        return np.mod(positions, size)
    if positions.size and (positions.min() < -size or positions.max() >= size):
        raise OperatorError(f"take: indices out of range [{-size}, {size}) with mode='raise'")
    return np.where(positions < 0, positions + size, positions)


def _take(attrs: Attrs, inputs: Arrays) -> Arrays:
    data, indices = inputs
    axis = normalize_axis("take", attrs.axis, data.ndim)
    positions = _take_positions(attrs, indices, data.shape[axis])
    return [take("take", data, positions, axis)]


register(OpDef(
    name="take",
    params=(Param("axis", parse_int, 0), Param("mode", choice("raise", "wrap", "clip"), "clip")),
    arguments=("a", "indices"),
    compute=_take,
    infer_shape=_take_infer,
    infer_type=_first_input_dtype,
    doc="Slices of a along axis at the given (float or integer) indices.",
))


def _where_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    op = "where"
    condition = require_known(op, shapes, 0, "condition")
    _, (shape,) = same_shape(op)(attrs, shapes[1:])
    if condition != shape and not (len(condition) == 1 and shape and condition[0] == shape[0]):
        _fail(op, f"condition {condition} must have x's shape {shape} or be a vector of "
                  f"length {shape[0] if shape else 0}")
    return [condition, shape, shape], [shape]


def _where_type(attrs: Attrs, dtypes: DTypes) -> TypeResult:
    (x_type, y_type), (out,) = _uniform_dtype("where")(attrs, dtypes[1:])
    condition = np.dtype(dtypes[0]) if dtypes[0] is not None else out
    return [condition, x_type, y_type], [out]


def _where(attrs: Attrs, inputs: Arrays) -> Arrays:
    condition, x, y = inputs
    mask = condition != 0
    if mask.shape != x.shape:
        mask = mask.reshape((-1,) + (1,) * (x.ndim - 1))
    return [np.where(mask, x, y.astype(x.dtype, copy=False))]


register(OpDef(
    name="where",
    arguments=("condition", "x", "y"),
    compute=_where,
    infer_shape=_where_infer,
    infer_type=_where_type,
    doc="x where condition is non-zero, else y; a vector condition selects whole rows.",
))


# ---- reductions ------------------------------------------------------------------------------

_REDUCE_PARAMS = (
    Param("axis", optional(_int_tuple), None),
    Param("keepdims", parse_bool, False),
    Param("exclude", parse_bool, False),
)


def _reduce_layout(op: str, attrs: Attrs, shape: Shape) -> tuple[tuple[int, ...], Shape]:
    """(reduced axes, output shape) after MXNet's ReduceAxesShapeImpl."""
    ndim = len(shape)
    if not attrs.axis:
        return tuple(range(ndim)), (1,) * ndim if attrs.keepdims else (1,)
    listed = sorted(axis + ndim if axis < 0 else axis for axis in attrs.axis)
    if len(set(listed)) != len(listed):
        _fail(op, f"reduction axes {attrs.axis} have duplicates")
    if listed[0] < 0 or listed[-1] >= ndim:
        _fail(op, f"reduction axes {attrs.axis} are out of range for shape {shape}")
    reduced = [k for k in range(ndim) if (k in listed) != attrs.exclude]
    if attrs.keepdims:
        out = tuple(1 if k in reduced else extent for k, extent in enumerate(shape))
    else:
        out = tuple(extent for k, extent in enumerate(shape) if k not in reduced) or (1,)
    return tuple(reduced), out


def _reduce_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    return _reduce_layout(op, attrs, shape)[1]


def _nonempty_reduce_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    if _size(shape) == 0:
        _fail(op, f"cannot reduce the empty shape {shape}")
    return _reduce_rule(op, attrs, shape)


def _mean(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    count = max(_size([x.shape[k] for k in axes]), 1)
    total = np.sum(x.astype(_accumulator(x.dtype)), axis=axes)
    if _is_int(x.dtype):
        # integer mean divides the integer sum, truncating toward zero
        return np.where(total < 0, -(-total // count), total // count)
    return total / count


# name -> (reduction of x over axes, computed in the accumulator type, aliases, rule)
_REDUCTIONS: dict[str, tuple[Callable[[np.ndarray, tuple[int, ...]], np.ndarray],
                             tuple[str, ...], ShapeRule]] = {
    "sum": (lambda x, axes: np.sum(x.astype(_accumulator(x.dtype)), axis=axes),
            ("sum_axis",), _reduce_rule),
    "mean": (_mean, (), _reduce_rule),
    "prod": (lambda x, axes: np.prod(x.astype(_accumulator(x.dtype)), axis=axes),
             (), _reduce_rule),
    "nansum": (lambda x, axes: np.nansum(x.astype(_accumulator(x.dtype)), axis=axes),
               (), _reduce_rule),
    "nanprod": (lambda x, axes: np.nanprod(x.astype(_accumulator(x.dtype)), axis=axes),
                (), _reduce_rule),
    "max": (lambda x, axes: np.max(x, axis=axes), ("max_axis",), _nonempty_reduce_rule),
    "min": (lambda x, axes: np.min(x, axis=axes), ("min_axis",), _nonempty_reduce_rule),
}


def _reduce_compute(name: str, fn: Callable[[np.ndarray, tuple[int, ...]], np.ndarray],
                    rule: ShapeRule) -> ComputeFn:
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        x = inputs[0]
        rule(name, attrs, x.shape)
        axes, out = _reduce_layout(name, attrs, x.shape)
        with np.errstate(all="ignore"):
            return [np.asarray(fn(x, axes)).astype(x.dtype).reshape(out)]
    return compute


def _plan_sum(attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]) -> PlannedKernel | None:
    """sum's compute with the reduced axes and the output shape worked out
    once (np.add.reduce is what np.sum runs, in the accumulator type)."""
    (shape, dtype), = inputs
    axes, out = _reduce_layout("sum", attrs, shape)  # raises for bad axes
    acc = _accumulator(dtype)
    reduce = np.add.reduce

    def kernel(values: Arrays) -> Arrays:
        with np.errstate(all="ignore"):
            return [np.asarray(reduce(values[0].astype(acc), axis=axes)).astype(dtype)
                    .reshape(out)]
    return kernel


_PLANNERS: dict[ComputeFn, Callable[[Attrs, Sequence[tuple[Shape, np.dtype]]],
                                    PlannedKernel | None]] = {_dot: _plan_dot,
                                                              **_ELEMENTWISE_PLANNERS}

for _name, (_reduce, _aliases, _rule) in _REDUCTIONS.items():
    _compute = _reduce_compute(_name, _reduce, _rule)
    if _name == "sum":
        _PLANNERS[_compute] = _plan_sum
    _register_simple(_name, _rule, _compute, params=_REDUCE_PARAMS, aliases=_aliases,
                     doc=f"{_name} over axis (all axes by default; the others with exclude).")


def planned_kernel(op: OpDef, attrs: Attrs, inputs: Sequence[tuple[Shape, np.dtype]]
                   ) -> PlannedKernel | None:
    """op's compute for inputs of these (shape, dtype)s, with its shape
    work done now, for an imperative call plan (acc_host.ndarray.call_plan)
    to call straight: the same results as op.compute(attrs, values), or
    None when op has no such kernel (or its compute was replaced)."""
    planner = _PLANNERS.get(op.compute)
    return None if planner is None else planner(attrs, inputs)


def _search_rule(op: str, attrs: Attrs, shape: Shape) -> Shape:
    """MXNet's ReduceAxisShapeImpl (argmax, argmin)."""
    if attrs.axis is None or len(shape) == 1:
        if attrs.axis is not None:
            _check_axis(op, attrs.axis, 1)
        return (1,) * len(shape) if attrs.keepdims else (1,)
    axis = _check_axis(op, attrs.axis, len(shape))
    if attrs.keepdims:
        return shape[:axis] + (1,) + shape[axis + 1:]
    return shape[:axis] + shape[axis + 1:]


def _search_compute(name: str, fn: Callable[..., np.ndarray]) -> ComputeFn:
    def compute(attrs: Attrs, inputs: Arrays) -> Arrays:
        x = inputs[0]
        out = _search_rule(name, attrs, x.shape)
        if x.size == 0:
            _fail(name, f"cannot search the empty shape {x.shape}")
        flat = x.reshape(-1) if attrs.axis is None else x
        axis = 0 if attrs.axis is None else _check_axis(name, attrs.axis, x.ndim)
        return [np.asarray(fn(flat, axis=axis)).astype(x.dtype).reshape(out)]
    return compute


for _name, _search in (("argmax", np.argmax), ("argmin", np.argmin)):
    _register_simple(_name, _search_rule, _search_compute(_name, _search),
                     params=(Param("axis", optional(parse_int), None),
                             Param("keepdims", parse_bool, False)),
                     doc=f"Index of the first {_name[3:]} along axis (flattened input by "
                         "default), as a value of the input dtype.")


# ---- topk ------------------------------------------------------------------------------------

_TOPK_INDEX_DTYPES = ("uint8", "int32", "int64", "float16", "float32", "float64")
# the largest integer each index dtype represents exactly (MaxIntegerValue)
_INDEX_LIMITS = {"uint8": 255, "int32": 2**31 - 1, "int64": 2**63 - 1, "float16": 2**11,
                 "float32": 2**24, "float64": 2**53}


def _topk_layout(op: str, attrs: Attrs, shape: Shape) -> tuple[int | None, int, Shape]:
    """(axis or None for the flattened input, k, shape of a values/indices output)."""
    if attrs.axis is None:
        length = _size(shape)
        axis = None
    else:
        axis = normalize_axis(op, attrs.axis, len(shape))
        length = shape[axis]
    k = attrs.k if attrs.k >= 1 else length
    if not 1 <= k <= length:
        _fail(op, f"k={attrs.k} is out of range for {length} elements (shape {shape})")
    if attrs.ret_typ in ("indices", "both") and length > _INDEX_LIMITS[attrs.dtype]:
        _fail(op, f"dtype {attrs.dtype} cannot represent the indices of {length} elements")
    if axis is None:
        return axis, k, (k,)
    return axis, k, shape[:axis] + (k,) + shape[axis + 1:]


def _topk_outputs(attrs: Attrs) -> list[str]:
    if attrs.ret_typ == "both":
        return _output_names(2)
    # "value" keeps the indices as a hidden second output
    return _output_names(1) if attrs.ret_typ == "value" else ["output"]


def _topk_total(attrs: Attrs) -> int:
    return 2 if attrs.ret_typ in ("value", "both") else 1


def _topk_infer(attrs: Attrs, shapes: Shapes) -> ShapeResult:
    shape = require_known("topk", shapes, 0, "data")
    _, _, part = _topk_layout("topk", attrs, shape)
    out = {"value": [part], "indices": [part], "mask": [shape], "both": [part, part]}
    return [shape], out[attrs.ret_typ]


def _topk_type(attrs: Attrs, dtypes: DTypes) -> TypeResult:
    data = np.dtype(dtypes[0]) if dtypes[0] is not None else FLOAT32
    index = np.dtype(attrs.dtype)
    out = {"value": [data], "indices": [index], "mask": [data], "both": [data, index]}
    return [data], out[attrs.ret_typ]


def _ranked(x: np.ndarray, ascending: bool) -> np.ndarray:
    """Positions along the last axis in rank order; ties keep the lower
    index first."""
    if ascending:
        return np.argsort(x, axis=-1, kind="stable")
    flipped = np.argsort(np.flip(x, axis=-1), axis=-1, kind="stable")
    return x.shape[-1] - 1 - np.flip(flipped, axis=-1)


def _topk(attrs: Attrs, inputs: Arrays) -> Arrays:
    x = inputs[0]
    axis, k, part = _topk_layout("topk", attrs, x.shape)
    work = x.reshape(1, -1) if axis is None else np.moveaxis(x, axis, -1)
    chosen = _ranked(work, attrs.is_ascend)[..., :k]
    if attrs.ret_typ == "mask":
        mask = np.zeros_like(work)
        np.put_along_axis(mask, chosen, 1, axis=-1)
        return [np.ascontiguousarray(mask.reshape(x.shape) if axis is None
                                     else np.moveaxis(mask, -1, axis))]
    values = np.take_along_axis(work, chosen, axis=-1)
    if axis is not None:
        values, chosen = np.moveaxis(values, -1, axis), np.moveaxis(chosen, -1, axis)
    values = np.ascontiguousarray(values.reshape(part))
    indices = np.ascontiguousarray(chosen.reshape(part).astype(attrs.dtype))
    return {"value": [values], "indices": [indices], "both": [values, indices]}[attrs.ret_typ]


register(OpDef(
    name="topk",
    params=(Param("axis", optional(parse_int), -1), Param("k", parse_int, 1),
            Param("ret_typ", choice("value", "indices", "mask", "both"), "indices"),
            Param("is_ascend", parse_bool, False),
            Param("dtype", choice(*_TOPK_INDEX_DTYPES), "float32")),
    outputs=_topk_outputs,
    num_outputs=_topk_total,
    compute=_topk,
    infer_shape=_topk_infer,
    infer_type=_topk_type,
    doc="The k largest (smallest with is_ascend) elements along axis: values, indices "
        "(in dtype), both, or a 0/1 mask; k < 1 sorts the whole axis.",
))
