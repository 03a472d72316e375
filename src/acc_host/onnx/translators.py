"""ONNX operator -> host (MXNet-style) operators.

``TRANSLATORS[(domain, op_type)]`` is ``(since, fn)``: the lowest opset the
translation covers and ``fn(cx, node, attrs, inputs, opset) -> list`` of
Symbols (or numpy arrays for values known at import time), one per ONNX
output. Attributes that later opsets moved into inputs (Reshape's shape,
Slice's starts/ends, Pad's pads, Clip's bounds, Squeeze/Unsqueeze/ReduceX
axes, ...) must be constants (initializers or Constant nodes, or values
folded from them); a non-constant one raises :class:`Unsupported`.

MXNet operators are used where their semantics are ONNX's (Convolution,
Pooling, BatchNorm, FullyConnected, Concat, element-wise functions, ...);
the ``_onnx_*`` operators of :mod:`acc_host.ops.onnx_ops` cover the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import limits
from ..errors import ShapeError
from .proto import np_dtype

MIN_OPSET = 1

#: The newest default-domain opset the translators read: the operator
#: specifications they follow, up to onnx 1.23's opset 28 (a model of a
#: newer opset is refused, its operators may have changed).
MAX_OPSET = 28


def max_opset() -> int:
    """The newest default-domain opset translated (MAX_OPSET)."""
    return MAX_OPSET


class Unsupported(Exception):
    """This node cannot be translated (the reason is the message). dynamic:
    the graph value that would have to be a constant, if that is the reason."""

    def __init__(self, message: str, dynamic: str | None = None) -> None:
        super().__init__(message)
        self.dynamic = dynamic


Translator = Callable[..., list]
TRANSLATORS: dict[tuple[str, str], tuple[int, Translator]] = {}


def translator_for(domain: str, op_type: str, opset: int) -> Translator | None:
    entry = TRANSLATORS.get((domain, op_type))
    if entry is None or opset < entry[0] or opset > max_opset():
        return None
    return entry[1]


def supported_operators() -> dict[str, tuple[int, int]]:
    return {op: (since, max_opset()) for (domain, op), (since, _) in sorted(TRANSLATORS.items())
            if domain == ""}


def onnx_op(*names: str, since: int = 1) -> Callable[[Translator], Translator]:
    def register(fn: Translator) -> Translator:
        for name in names:
            TRANSLATORS[("", name)] = (since, fn)
        return fn
    return register


# ---- helpers --------------------------------------------------------------------------------

def _input(inputs: list[str], index: int) -> str | None:
    return inputs[index] if index < len(inputs) and inputs[index] else None


def _const(cx: Any, node: Any, inputs: list[str], index: int, what: str) -> np.ndarray | None:
    """The constant value of an optional input (None when absent)."""
    name = _input(inputs, index)
    if name is None:
        return None
    value = cx.const(name)
    if value is None:
        raise Unsupported(f"input {what!r} ({name}) must be a constant (initializer or "
                          "Constant node); dynamic values are not supported", dynamic=name)
    return value


def _dynamic(cx: Any, op_name: str, data: list[Any], quantities: dict[str, str | None],
             convert: Callable[[Any], Any] | None = None, **attrs: Any) -> Any:
    """A _dyn_* operator (acc_host.ops.dynamic_ops) on data: each quantity
    (name -> the ONNX input holding it, None when absent) that is a constant
    becomes an attribute (convert(value)), the others inputs whose values
    graph inference works out at bind time from the actual shapes."""
    dynamic, inputs = [], []
    for quantity, name in quantities.items():
        if name is None:
            continue
        value = cx.const(name)
        if value is None:
            dynamic.append(quantity)
            inputs.append(cx.sym(name))
        else:
            attrs[quantity] = convert(value) if convert else _ints(value)
    return cx.op(op_name, *data, *inputs, dynamic=",".join(dynamic), **attrs)


def _all_const(cx: Any, inputs: list[str], *indices: int) -> bool:
    names = [_input(inputs, index) for index in indices]
    return all(name is None or cx.is_const(name) for name in names)


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def _np_dtype(onnx_type: int) -> np.dtype:
    return np_dtype(onnx_type)


_HOST_DTYPES = ("float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8",
                "int16", "int32", "int64", "bool")


def _np_dtype_name(dtype: Any) -> str:
    name = np.dtype(dtype).name
    if name not in _HOST_DTYPES:
        raise Unsupported(f"dtype {name} is not supported")
    return name


def _host_dtype(onnx_type: int) -> str:
    try:
        name = _np_dtype(onnx_type).name
    except (KeyError, TypeError, ValueError):
        name = str(onnx_type)
    if name not in _HOST_DTYPES:
        raise Unsupported(f"dtype {name} is not supported")
    return name


# ---- constants ------------------------------------------------------------------------------

@onnx_op("Constant")
def _constant(cx, node, attrs, inputs, opset):
    if "value" in attrs:
        return [np.asarray(attrs["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return [np.asarray(attrs[key], dtype=dtype)]
    raise Unsupported(f"Constant with attribute(s) {', '.join(attrs)}")


@onnx_op("ConstantOfShape")
def _constant_of_shape(cx, node, attrs, inputs, opset):
    if not _all_const(cx, inputs, 0):
        value = attrs.get("value")
        value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
        return [_dynamic(cx, "_dyn_constant_of_shape", [], {"shape": inputs[0]},
                         value=float(value[0]), dtype=_np_dtype_name(value.dtype))]
    shape = _ints(_const(cx, node, inputs, 0, "input"))
    value = attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if any(extent < 0 for extent in shape):
        raise Unsupported(f"ConstantOfShape of shape {tuple(shape)}: a negative extent")
    what = f"ConstantOfShape {node.name or ''}".rstrip()
    limits.check_array(shape, value.dtype, what)
    cx.plan_constant(limits.array_bytes(shape, value.dtype), what)
    return [np.full(shape, value[0], dtype=value.dtype)]


@onnx_op("Range")
def _range(cx, node, attrs, inputs, opset):
    if not _all_const(cx, inputs, 0, 1, 2):
        dtype = cx.dtype(inputs[0]) or cx.dtype(inputs[1]) or np.dtype(np.int64)
        if np.dtype(dtype).name not in _HOST_DTYPES:
            name = next(name for name in inputs[:3] if not cx.is_const(name))
            raise Unsupported(f"Range of {np.dtype(dtype).name} needs constant bounds",
                              dynamic=name)
        scalar = lambda value: float(np.asarray(value).reshape(-1)[0])  # noqa: E731
        return [_dynamic(cx, "_dyn_range", [], {"start": inputs[0], "limit": inputs[1],
                                                "delta": inputs[2]}, scalar,
                         dtype=_np_dtype_name(dtype))]
    start, limit, delta = (_const(cx, node, inputs, i, n)
                           for i, n in enumerate(("start", "limit", "delta")))
    if not np.all(np.isfinite([start, limit, delta])) or np.all(np.asarray(delta) == 0):
        raise Unsupported(f"Range({start}, {limit}, {delta}) has no finite length")
    count = max(int(np.ceil((limit - start) / delta)), 0)
    what = f"Range {node.name or ''}".rstrip()
    limits.check_array((count,), np.asarray(start).dtype, what)
    cx.plan_constant(limits.array_bytes((count,), np.asarray(start).dtype), what)
    return [(start + np.arange(count) * delta).astype(np.asarray(start).dtype)]


@onnx_op("EyeLike")
def _eye_like(cx, node, attrs, inputs, opset):
    dtype = _host_dtype(attrs["dtype"]) if "dtype" in attrs else None
    return [cx.op("_onnx_eye_like", cx.sym(inputs[0]), k=attrs.get("k", 0), dtype=dtype)]


# ---- element-wise ---------------------------------------------------------------------------

_MX_UNARY = {"Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Floor": "floor", "Ceil": "ceil",
             "Sigmoid": "sigmoid", "Reciprocal": "reciprocal", "Erf": "erf", "Abs": "abs",
             "Neg": "negative", "Acos": "arccos", "Acosh": "arccosh", "Asin": "arcsin",
             "Asinh": "arcsinh", "Atan": "arctan", "Atanh": "arctanh", "Cos": "cos",
             "Cosh": "cosh", "Sin": "sin", "Sinh": "sinh", "Tan": "tan", "Tanh": "tanh"}
_ONNX_UNARY = {"Softsign": "softsign",
               "Softplus": "softplus", "Mish": "mish", "HardSwish": "hard_swish",
               "Sign": "sign", "Round": "round", "Not": "not", "IsNaN": "isnan",
               "BitwiseNot": "bitwise_not"}


def _mx_unary(op_name: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        return [cx.op(op_name, cx.sym(inputs[0]))]
    return translate


for _onnx_name, _mx_name in _MX_UNARY.items():
    onnx_op(_onnx_name)(_mx_unary(_mx_name))


def _onnx_unary(fn: str, **defaults: Any) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        params = {key: attrs.get(key, value) for key, value in defaults.items()}
        return [cx.op("_onnx_unary", cx.sym(inputs[0]), fn=fn, **params)]
    return translate


for _onnx_name, _fn in _ONNX_UNARY.items():
    onnx_op(_onnx_name)(_onnx_unary(_fn))
onnx_op("Selu")(_onnx_unary("selu", alpha=1.67326319217681884765625,
                            gamma=1.05070102214813232421875))
onnx_op("Celu")(_onnx_unary("celu", alpha=1.0))
onnx_op("ThresholdedRelu")(_onnx_unary("thresholded_relu", alpha=1.0))
onnx_op("HardSigmoid")(_onnx_unary("hard_sigmoid", alpha=0.2, beta=0.5))


@onnx_op("Shrink")
def _shrink(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_unary", cx.sym(inputs[0]), fn="shrink", alpha=attrs.get("lambd", 0.5),
                  beta=attrs.get("bias", 0.0))]


@onnx_op("Gelu")
def _gelu(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_unary", cx.sym(inputs[0]), fn="gelu",
                  approximate=attrs.get("approximate", "none"))]


@onnx_op("IsInf")
def _isinf(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_unary", cx.sym(inputs[0]), fn="isinf",
                  detect_positive=bool(attrs.get("detect_positive", 1)),
                  detect_negative=bool(attrs.get("detect_negative", 1)))]


@onnx_op("Relu")
def _relu(cx, node, attrs, inputs, opset):
    return [cx.op("Activation", cx.sym(inputs[0]), act_type="relu")]


@onnx_op("LeakyRelu")
def _leaky_relu(cx, node, attrs, inputs, opset):
    return [cx.op("LeakyReLU", cx.sym(inputs[0]), act_type="leaky",
                  slope=attrs.get("alpha", 0.01))]


@onnx_op("Elu")
def _elu(cx, node, attrs, inputs, opset):
    return [cx.op("LeakyReLU", cx.sym(inputs[0]), act_type="elu", slope=attrs.get("alpha", 1.0))]


@onnx_op("Identity", "Dropout")
def _identity(cx, node, attrs, inputs, opset):
    if node.op_type == "Dropout" and _input(inputs, 2):
        training = cx.const(inputs[2])
        if training is None:
            raise Unsupported("Dropout's training_mode must be a constant", dynamic=inputs[2])
        ratio = cx.const(inputs[1]) if _input(inputs, 1) else np.array(0.5)
        if bool(np.asarray(training).reshape(-1)[0]):
            if ratio is None:
                raise Unsupported("Dropout's ratio in training mode must be a constant",
                                  dynamic=inputs[1])
            if float(np.asarray(ratio).reshape(-1)[0]):
                raise Unsupported("Dropout in training mode (random) is not supported")
    output = cx.op("_copy", cx.sym(inputs[0]))
    if node.op_type == "Dropout" and len(node.output) > 1 and cx.used(node.output[1]):
        # Not random (inference, or a ratio of 0): every element is kept.
        kept = cx.op("_onnx_cast", cx.op("ones_like", cx.sym(inputs[0])), dtype="bool")
        return [output, kept]
    return [output]


_BINARY = {"Div": "div", "Pow": "pow", "Equal": "equal", "Greater": "greater",
           "Less": "less", "GreaterOrEqual": "greater_equal", "LessOrEqual": "less_equal",
           "And": "and", "Or": "or", "Xor": "xor", "BitwiseAnd": "bitwise_and",
           "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor", "PRelu": "prelu",
           "Add": "add", "Sub": "sub", "Mul": "mul"}
# same semantics as MXNet's broadcast operators (numpy broadcasting, the inputs' dtype)
_MX_BINARY = {"add": "broadcast_add", "sub": "broadcast_sub", "mul": "broadcast_mul"}


def _binary(fn: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        rhs = cx.sym(inputs[1])
        if opset < 7 and attrs.get("broadcast", 0) and "axis" in attrs:
            lshape, rshape = cx.shape(inputs[0]), cx.shape(inputs[1])
            if lshape is None or rshape is None:
                raise Unsupported("legacy broadcast with an axis attribute (opset < 7) "
                                  "needs both input shapes at import time")
            axis = attrs["axis"] % len(lshape)
            trailing = len(lshape) - axis - len(rshape)
            rhs = cx.op("_onnx_reshape", rhs, shape=tuple(rshape) + (1,) * trailing)
        if fn == "add" and opset >= 7:
            fused = _add_to_linear(cx, inputs)
            if fused is not None:
                return [fused]
            if not cx.is_const(inputs[0]) and not cx.is_const(inputs[1]):
                lshape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
                if lshape is not None and lshape == (cx.shape(inputs[1])
                                                     or cx.infer_shape(inputs[1])):
                    # same shapes (a residual connection): the element-wise form,
                    # which more accelerators know than the broadcasting one
                    return [cx.op("elemwise_add", cx.sym(inputs[0]), rhs)]
        if fn == "mul" and opset >= 7:
            gelu = _gelu_input(cx, inputs)
            if gelu is not None:
                return [cx.op("LeakyReLU", cx.sym(gelu), act_type="gelu")]
        if opset >= 7 and fn in _SCALAR_OPS:
            scalar = _with_scalar(cx, fn, inputs)
            if scalar is not None:
                return [scalar]
        if fn in _MX_BINARY:
            return [cx.op(_MX_BINARY[fn], cx.sym(inputs[0]), rhs)]
        if fn == "div" and _is_float(cx, inputs):
            # numpy's true division, as ONNX's for floats (integers truncate,
            # which broadcast_div does not)
            return [cx.op("broadcast_div", cx.sym(inputs[0]), rhs)]
        return [cx.op("_onnx_binary", cx.sym(inputs[0]), rhs, fn=fn)]
    return translate


# fn -> (operator with the scalar on the right, operator with it on the left)
_SCALAR_OPS = {"add": ("_plus_scalar", "_plus_scalar"), "sub": ("_minus_scalar", "_rminus_scalar"),
               "mul": ("_mul_scalar", "_mul_scalar"), "div": ("_div_scalar", "_rdiv_scalar")}


def _with_scalar(cx, fn: str, inputs: list[str]) -> Any:
    """A float32 operation with a one-element float32 constant operand that
    does not raise the other operand's rank: the scalar operator (one pass,
    no broadcasting), the scalar as its attribute (a float32 value is exact
    as a Python float); None otherwise."""
    for position in (1, 0):
        const = cx.const(inputs[position])
        other = inputs[1 - position]
        if (const is None or const.size != 1 or const.dtype != np.float32
                or cx.is_const(other) or cx.dtype(other) not in (None, np.float32)):
            continue
        if const.ndim > 0:
            shape = cx.partial_shape(other)
            if shape is None or len(shape) < const.ndim:
                continue
        value = float(const.reshape(-1)[0])
        return cx.op(_SCALAR_OPS[fn][0 if position == 1 else 1], cx.sym(other), scalar=value)
    return None


def _is_float(cx, inputs: list[str]) -> bool:
    """Whether an operand is known to be floating point (ONNX's binary
    operators take operands of one type)."""
    return any((dtype := cx.dtype(name)) is not None and np.dtype(dtype).kind == "f"
               for name in inputs[:2])


def _scalar_const(cx, name: str) -> float | None:
    """The value of a one-element floating-point constant, or None."""
    value = cx.const(name)
    if value is None or value.size != 1 or value.dtype.kind != "f":
        return None
    return float(np.asarray(value).reshape(-1)[0])


def _only(cx, name: str, op_type: str) -> Any:
    """The node of type op_type computing name when nothing else reads name
    (so that a pattern can replace it), or None."""
    node = cx.producers.get(name)
    if node is None or node.op_type != op_type or node.domain not in ("", "ai.onnx"):
        return None
    return node if cx.readers.get(name, 0) == 1 else None


def _close(value: float | None, expected: float) -> bool:
    return value is not None and abs(value - expected) <= 1e-6 * abs(expected)


def _gelu_input(cx, inputs: list[str]) -> str | None:
    """x when Mul(inputs) is the erf form of GELU that PyTorch exports,
    0.5 x (1 + erf(x / sqrt 2)): Mul(Mul(x, A), 0.5) or Mul(Mul(x, 0.5), A)
    with A = Add(Erf(Div(x, sqrt 2) or Mul(x, 1 / sqrt 2)), 1), any operand
    order, the intermediate values read by nothing else. The whole chain is
    then LeakyReLU(act_type="gelu"), whose kernels compute the same
    function in one pass."""
    def erf_plus_one(name: str) -> str | None:
        add = _only(cx, name, "Add")
        if add is None or len(add.input) != 2:
            return None
        for erf_name, one in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
            erf = _only(cx, erf_name, "Erf")
            if erf is None or not _close(_scalar_const(cx, one), 1.0):
                continue
            scaled = cx.producers.get(erf.input[0])
            if scaled is None or cx.readers.get(erf.input[0], 0) != 1 or len(scaled.input) != 2:
                continue
            x, factor = scaled.input
            if scaled.op_type == "Div" and _close(_scalar_const(cx, factor), 2 ** 0.5):
                return x
            if scaled.op_type == "Mul":
                for x, factor in ((scaled.input[0], scaled.input[1]),
                                  (scaled.input[1], scaled.input[0])):
                    if _close(_scalar_const(cx, factor), 0.5 ** 0.5):
                        return x
        return None

    if len(inputs) != 2 or any(cx.is_const(name) and cx.const(name).size != 1
                               for name in inputs):
        return None
    for inner_name, outer in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
        inner = _only(cx, inner_name, "Mul")
        if inner is None or len(inner.input) != 2:
            continue
        a, b = inner.input
        if _close(_scalar_const(cx, outer), 0.5):
            # Mul(Mul(x, A), 0.5)
            for x, other in ((a, b), (b, a)):
                if erf_plus_one(other) == x and not cx.is_const(x):
                    return x
        else:
            # Mul(Mul(x, 0.5), A)
            for x, half in ((a, b), (b, a)):
                if (_close(_scalar_const(cx, half), 0.5) and not cx.is_const(x)
                        and erf_plus_one(outer) == x):
                    return x
    return None


def _add_to_linear(cx, inputs: list[str]) -> Any:
    """MatMul(x, W) + b, with W translated to FullyConnected(no_bias) and b a
    constant vector of its width: one FullyConnected with b as its bias."""
    for data, other in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
        linear = cx.linear.get(data)
        bias = cx.const(other)
        if (linear is not None and bias is not None and bias.ndim == 1
                and bias.shape[0] == linear[2] and bias.dtype == cx.consts[linear[1]].dtype):
            return cx.op("FullyConnected", linear[0], cx.sym(linear[1]), cx.sym(other),
                         num_hidden=linear[2], no_bias=False, flatten=False)
    return None


for _onnx_name, _fn in _BINARY.items():
    onnx_op(_onnx_name)(_binary(_fn))


@onnx_op("PRelu")
def _prelu(cx, node, attrs, inputs, opset):
    slope = cx.const(inputs[1])
    xshape = cx.shape(inputs[0])
    if (slope is not None and slope.ndim == 1 and slope.size > 1 and xshape is not None
            and len(xshape) > 2 and xshape[1] == slope.size and xshape[-1] != slope.size):
        # a per-channel slope of the pre-opset-7 form: broadcast along axis 1
        slope_sym = cx.op("_onnx_reshape", cx.sym(inputs[1]),
                          shape=(slope.size,) + (1,) * (len(xshape) - 2))
    else:
        slope_sym = cx.sym(inputs[1])
    return [cx.op("_onnx_binary", cx.sym(inputs[0]), slope_sym, fn="prelu")]


@onnx_op("Mod")
def _mod(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_binary", cx.sym(inputs[0]), cx.sym(inputs[1]), fn="mod",
                  fmod=bool(attrs.get("fmod", 0)))]


@onnx_op("BitShift")
def _bitshift(cx, node, attrs, inputs, opset):
    fn = "bitshift_left" if attrs["direction"] == "LEFT" else "bitshift_right"
    return [cx.op("_onnx_binary", cx.sym(inputs[0]), cx.sym(inputs[1]), fn=fn)]


@onnx_op("Sum", "Max", "Min", "Mean")
def _nary(cx, node, attrs, inputs, opset):
    syms = [cx.sym(name) for name in inputs if name]
    return [cx.op("_onnx_nary", *syms, fn=node.op_type.lower(), num_args=len(syms))]


@onnx_op("Where")
def _where(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_where", *(cx.sym(name) for name in inputs))]


@onnx_op("Clip")
def _clip(cx, node, attrs, inputs, opset):
    if opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low = _const(cx, node, inputs, 1, "min")
        high = _const(cx, node, inputs, 2, "max")
        low = None if low is None else float(np.asarray(low).reshape(-1)[0])
        high = None if high is None else float(np.asarray(high).reshape(-1)[0])
    if _mx_clip_bounds(low, high):
        # MXNet's clip (float32 bounds, x > a_max ? a_max : x < a_min ? a_min : x) is
        # ONNX's when both bounds are there, in order and exact in float32: ReLU6 and
        # the like then reach accelerators, which know "clip"
        return [cx.op("clip", cx.sym(inputs[0]), a_min=low, a_max=high)]
    return [cx.op("_onnx_clip", cx.sym(inputs[0]), a_min=low, a_max=high)]


def _mx_clip_bounds(low: float | None, high: float | None) -> bool:
    return (low is not None and high is not None and low <= high
            and all(np.isfinite(v) and float(np.float32(v)) == v for v in (low, high)))


@onnx_op("Cast")
def _cast(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_cast", cx.sym(inputs[0]), dtype=_host_dtype(attrs["to"]))]


@onnx_op("CastLike")
def _cast_like(cx, node, attrs, inputs, opset):
    target = cx.dtype(inputs[1])
    if (target is not None and target.name.startswith("float8")
            and attrs.get("saturate", 1)):
        raise Unsupported(f"saturating cast to {target.name} is not implemented")
    return [cx.op("_onnx_cast_like", cx.sym(inputs[0]), cx.sym(inputs[1]))]


# ---- neural network -------------------------------------------------------------------------

def _weight_shape(cx, name: str, what: str) -> tuple:
    shape = cx.shape(name)
    if shape is None:
        raise Unsupported(f"the shape of {what} ({name}) must be known at import time")
    return shape


def _spatial_pads(cx, node, attrs, nspatial: int, kernel, strides, dilations, data: str):
    """(symmetric pads or None, explicit (begin, end) pads) from pads/auto_pad."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        shape = cx.shape(data)
        if shape is None:
            raise Unsupported(f"auto_pad={auto_pad} needs the input shape at import time")
        begins, ends = [], []
        for i in range(nspatial):
            size = shape[2 + i]
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            small = total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else total - small)
            ends.append(total - small if auto_pad == "SAME_UPPER" else small)
        pads = begins + ends
    elif auto_pad == "VALID":
        pads = [0] * (2 * nspatial)
    else:
        pads = list(attrs.get("pads", [0] * (2 * nspatial)))
    begins, ends = pads[:nspatial], pads[nspatial:]
    if begins == ends:
        return tuple(begins), None
    return None, (begins, ends)


def _explicit_pad(cx, data_sym, begins, ends, value: float):
    pads = (0, 0) + tuple(begins) + (0, 0) + tuple(ends)
    return cx.op("_onnx_pad", data_sym, pads=pads, mode="constant", value=value)


@onnx_op("Conv")
def _conv(cx, node, attrs, inputs, opset):
    wshape = _weight_shape(cx, inputs[1], "W")
    nspatial = len(wshape) - 2
    kernel = tuple(attrs.get("kernel_shape", wshape[2:]))
    strides = tuple(attrs.get("strides", (1,) * nspatial))
    dilations = tuple(attrs.get("dilations", (1,) * nspatial))
    sym_pads, explicit = _spatial_pads(cx, node, attrs, nspatial, kernel, strides, dilations,
                                       inputs[0])
    data = cx.sym(inputs[0])
    if explicit is not None:
        data = _explicit_pad(cx, data, *explicit, 0.0)
        sym_pads = (0,) * nspatial
    args = [data, cx.sym(inputs[1])]
    bias = _input(inputs, 2)
    if bias:
        args.append(cx.sym(bias))
    return [cx.op("Convolution", *args, kernel=kernel, stride=strides, dilate=dilations,
                  pad=sym_pads, num_filter=wshape[0], num_group=attrs.get("group", 1),
                  no_bias=not bias)]


@onnx_op("ConvTranspose")
def _conv_transpose(cx, node, attrs, inputs, opset):
    wshape = _weight_shape(cx, inputs[1], "W")
    nspatial = len(wshape) - 2
    if "output_shape" in attrs or attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported("ConvTranspose with output_shape or auto_pad SAME_*")
    kernel = tuple(attrs.get("kernel_shape", wshape[2:]))
    pads = list(attrs.get("pads", [0] * (2 * nspatial)))
    if pads[:nspatial] != pads[nspatial:]:
        raise Unsupported("ConvTranspose with asymmetric pads")
    group = attrs.get("group", 1)
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])]
    bias = _input(inputs, 2)
    if bias:
        args.append(cx.sym(bias))
    return [cx.op("Deconvolution", *args, kernel=kernel,
                  stride=tuple(attrs.get("strides", (1,) * nspatial)),
                  dilate=tuple(attrs.get("dilations", (1,) * nspatial)),
                  pad=tuple(pads[:nspatial]),
                  adj=tuple(attrs.get("output_padding", (0,) * nspatial)),
                  num_filter=wshape[1] * group, num_group=group, no_bias=not bias)]


def _pool(kind: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        if len(node.output) > 1 and cx.used(node.output[1]):
            raise Unsupported("MaxPool's Indices output is not supported")
        kernel = tuple(attrs["kernel_shape"])
        nspatial = len(kernel)
        strides = tuple(attrs.get("strides", (1,) * nspatial))
        dilations = tuple(attrs.get("dilations", (1,) * nspatial))
        if attrs.get("storage_order", 0):
            raise Unsupported("MaxPool storage_order=1")
        sym_pads, explicit = _spatial_pads(cx, node, attrs, nspatial, kernel, strides,
                                           dilations, inputs[0])
        data = cx.sym(inputs[0])
        include_pad = bool(attrs.get("count_include_pad", 0))
        if kind == "lp" or any(d != 1 for d in dilations) or attrs.get("ceil_mode", 0):
            # MXNet's Pooling has no dilations nor Lp, and its "full" convention keeps
            # a last window that starts in the padding
            begins, ends = explicit if explicit is not None else (sym_pads, sym_pads)
            return [cx.op("_onnx_pool", data, kernel=kernel, pool_type=kind, stride=strides,
                          dilate=dilations, pads=tuple(begins) + tuple(ends),
                          ceil_mode=bool(attrs.get("ceil_mode", 0)),
                          count_include_pad=include_pad, p=attrs.get("p", 2))]
        convention = "full" if attrs.get("ceil_mode", 0) else "valid"
        if explicit is not None and kind == "avg" and not include_pad:
            # average over the real elements only: sum-pool of the padded data over
            # sum-pool of the padded ones
            if convention == "full":
                raise Unsupported("AveragePool with asymmetric pads, count_include_pad=0 "
                                  "and ceil_mode=1")
            ones = cx.op("ones_like", data)
            pooled = [cx.op("Pooling", _explicit_pad(cx, value, *explicit, 0.0),
                            kernel=kernel, stride=strides, pad=(0,) * nspatial,
                            pool_type="avg", pooling_convention="valid",
                            count_include_pad=True) for value in (data, ones)]
            return [cx.op("elemwise_div", *pooled)]
        if explicit is not None:
            data = _explicit_pad(cx, data, *explicit, -np.inf if kind == "max" else 0.0)
            sym_pads = (0,) * nspatial
        extra = {"count_include_pad": include_pad} if kind == "avg" else {}
        return [cx.op("Pooling", data, kernel=kernel, stride=strides, pad=sym_pads,
                      pool_type=kind, pooling_convention=convention, **extra)]
    return translate


onnx_op("MaxPool")(_pool("max"))
onnx_op("AveragePool")(_pool("avg"))
onnx_op("LpPool")(_pool("lp"))


def _window(kind: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        size = int(np.asarray(_const(cx, node, inputs, 0, "size")).reshape(-1)[0])
        periodic = attrs.get("periodic", 1)
        n = np.arange(size, dtype=np.float64)
        denominator = size if periodic else size - 1
        a = 2 * np.pi * n / max(denominator, 1)
        if kind == "hann":
            values = 0.5 - 0.5 * np.cos(a)
        elif kind == "hamming":
            values = 25 / 46 - (1 - 25 / 46) * np.cos(a)
        else:
            values = 0.42 - 0.5 * np.cos(a) + 0.08 * np.cos(2 * a)
        dtype = _np_dtype(attrs.get("output_datatype", 1))
        return [values.astype(dtype)]
    return translate


onnx_op("HannWindow")(_window("hann"))
onnx_op("HammingWindow")(_window("hamming"))
onnx_op("BlackmanWindow")(_window("blackman"))


@onnx_op("GroupNormalization")
def _group_norm(cx, node, attrs, inputs, opset):
    if opset < 21:
        raise Unsupported("GroupNormalization before opset 21 (per-group scale)")
    return [cx.op("_onnx_group_norm", *(cx.sym(n) for n in inputs[:3]),
                  num_groups=attrs["num_groups"], eps=attrs.get("epsilon", 1e-5))]


@onnx_op("Det")
def _det(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_det", cx.sym(inputs[0]))]


@onnx_op("ReverseSequence")
def _reverse_sequence(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_reverse_sequence", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  batch_axis=attrs.get("batch_axis", 1), time_axis=attrs.get("time_axis", 0))]


@onnx_op("Compress")
def _compress(cx, node, attrs, inputs, opset):
    condition = _const(cx, node, inputs, 1, "condition")
    indices = np.nonzero(np.asarray(condition).astype(bool))[0].astype(np.int64)
    data = cx.sym(inputs[0])
    if "axis" not in attrs:
        data = cx.op("_onnx_reshape", data, shape=(-1,))
    name = cx.name("compress_indices")
    cx.consts[name] = indices
    return [cx.op("_onnx_gather", data, cx.sym(name), axis=attrs.get("axis", 0))]


@onnx_op("CenterCropPad")
def _center_crop_pad(cx, node, attrs, inputs, opset):
    shape = _ints(_const(cx, node, inputs, 1, "shape"))
    xshape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
    if xshape is None:
        raise Unsupported("CenterCropPad needs the input shape at import time")
    axes = attrs.get("axes", list(range(len(xshape))))
    axes = [a % len(xshape) for a in axes]
    data = cx.sym(inputs[0])
    starts, ends, pad_begin, pad_end = [], [], [0] * len(xshape), [0] * len(xshape)
    crop_axes = []
    for axis, target in zip(axes, shape):
        size = xshape[axis]
        if size > target:
            start = (size - target) // 2
            starts.append(start)
            ends.append(start + target)
            crop_axes.append(axis)
        elif size < target:
            total = target - size
            pad_begin[axis] = total // 2
            pad_end[axis] = total - total // 2
    if crop_axes:
        data = cx.op("_onnx_slice", data, starts=tuple(starts), ends=tuple(ends),
                     axes=tuple(crop_axes), steps=())
    if any(pad_begin) or any(pad_end):
        data = cx.op("_onnx_pad", data, pads=tuple(pad_begin) + tuple(pad_end))
    return [cx.op("_copy", data)]


@onnx_op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(cx, node, attrs, inputs, opset):
    kind = "avg" if node.op_type == "GlobalAveragePool" else "max"
    shape = cx.shape(inputs[0])
    nspatial = len(shape) - 2 if shape else 2
    return [cx.op("Pooling", cx.sym(inputs[0]), kernel=(1,) * nspatial, global_pool=True,
                  pool_type=kind)]


@onnx_op("BatchNormalization")
def _batch_norm(cx, node, attrs, inputs, opset):
    if any(cx.used(name) for name in node.output[1:]) or attrs.get("training_mode", 0):
        raise Unsupported("BatchNormalization in training mode")
    return [cx.op("BatchNorm", *(cx.sym(name) for name in inputs[:5]),
                  eps=attrs.get("epsilon", 1e-5), momentum=attrs.get("momentum", 0.9),
                  fix_gamma=False, use_global_stats=True)]


@onnx_op("InstanceNormalization")
def _instance_norm(cx, node, attrs, inputs, opset):
    return [cx.op("InstanceNorm", *(cx.sym(name) for name in inputs[:3]),
                  eps=attrs.get("epsilon", 1e-5))]


@onnx_op("LayerNormalization", "RMSNormalization")
def _layer_norm(cx, node, attrs, inputs, opset):
    if node.op_type == "LayerNormalization":
        last = _last_axis_layer_norm(cx, node, attrs, inputs)
        if last is not None:
            return [last]
    args = [cx.sym(name) for name in inputs if name]
    result = cx.op("_onnx_norm", *args, axis=attrs.get("axis", -1),
                   eps=attrs.get("epsilon", 1e-5), has_bias=len(args) > 2,
                   rms=node.op_type == "RMSNormalization")
    return [result[0], result[1], result[2]]


def _last_axis_layer_norm(cx, node, attrs, inputs: list[str]) -> Any:
    """LayerNormalization over the last axis alone, with a scale (and bias)
    of that axis's width and its mean and inverse deviation unused: MXNet's
    LayerNorm (which accelerators know), a zero beta standing in for an
    absent bias; None otherwise."""
    if any(cx.used(name) for name in node.output[1:]):
        return None
    shape = cx.partial_shape(inputs[0])
    if not shape or attrs.get("axis", -1) % len(shape) != len(shape) - 1 or shape[-1] < 0:
        return None
    width = shape[-1]
    scale = inputs[1]
    bias = _input(inputs, 2)
    dtype = cx.dtype(scale)
    if (dtype is None or np.dtype(dtype) != np.float32 or cx.shape(scale) != (width,)
            or (bias and (cx.shape(bias) != (width,) or cx.dtype(bias) != np.float32))):
        return None
    if not bias:
        bias = f"{scale}_zero_bias"
        cx.consts.setdefault(bias, np.zeros(width, np.float32))
    return cx.op("LayerNorm", cx.sym(inputs[0]), cx.sym(scale), cx.sym(bias), axis=-1,
                 eps=attrs.get("epsilon", 1e-5))


@onnx_op("Swish")
def _swish(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_unary", cx.sym(inputs[0]), fn="swish", alpha=attrs.get("alpha", 1.0))]


@onnx_op("Einsum")
def _einsum(cx, node, attrs, inputs, opset):
    syms = [cx.sym(name) for name in inputs if name]
    return [cx.op("_onnx_einsum", *syms, equation=attrs["equation"].replace(" ", ""),
                  num_args=len(syms))]


@onnx_op("LpNormalization")
def _lp_norm(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_lp_norm", cx.sym(inputs[0]), axis=attrs.get("axis", -1),
                  p=attrs.get("p", 2))]


@onnx_op("OneHot")
def _one_hot(cx, node, attrs, inputs, opset):
    depth = int(np.asarray(_const(cx, node, inputs, 1, "depth")).reshape(-1)[0])
    return [cx.op("_onnx_one_hot", cx.sym(inputs[0]), cx.sym(inputs[2]), depth=depth,
                  axis=attrs.get("axis", -1))]


def _loss(op_name: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        args = [cx.sym(name) for name in inputs if name]
        extra = {}
        if "ignore_index" in attrs:
            extra["ignore_index"] = attrs["ignore_index"]
        result = cx.op(op_name, *args, reduction=attrs.get("reduction", "mean"),
                       has_weight=len(args) > 2, **extra)
        return [result[i] for i in range(len(node.output))]
    return translate


onnx_op("NegativeLogLikelihoodLoss")(_loss("_onnx_nll_loss"))
onnx_op("SoftmaxCrossEntropyLoss")(_loss("_onnx_softmax_cross_entropy"))


@onnx_op("MeanVarianceNormalization")
def _mvn(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_mvn", cx.sym(inputs[0]), axes=tuple(attrs.get("axes", (0, 2, 3))))]


@onnx_op("LRN")
def _lrn(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_lrn", cx.sym(inputs[0]), size=attrs["size"],
                  alpha=attrs.get("alpha", 1e-4), beta=attrs.get("beta", 0.75),
                  bias=attrs.get("bias", 1.0))]


@onnx_op("Gemm")
def _gemm(cx, node, attrs, inputs, opset):
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    trans_a, trans_b = attrs.get("transA", 0), attrs.get("transB", 0)
    c = _input(inputs, 2)
    bshape = cx.shape(inputs[1])
    cshape = cx.shape(c) if c else None
    if (alpha == 1.0 and beta == 1.0 and not trans_a and trans_b and bshape is not None
            and (c is None or (cshape is not None and len(cshape) == 1
                               and cshape[0] == bshape[0]))):
        args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + ([cx.sym(c)] if c else [])
        return [cx.op("FullyConnected", *args, num_hidden=bshape[0], no_bias=c is None,
                      flatten=False)]
    args = [cx.sym(inputs[0]), cx.sym(inputs[1])] + ([cx.sym(c)] if c else [])
    return [cx.op("_onnx_gemm", *args, alpha=alpha, beta=beta, trans_a=bool(trans_a),
                  trans_b=bool(trans_b), has_c=c is not None)]


@onnx_op("MatMul")
def _matmul(cx, node, attrs, inputs, opset):
    weight = cx.const(inputs[1])
    if (weight is not None and weight.ndim == 2 and weight.dtype.kind == "f"
            and not cx.is_const(inputs[0])):
        shape = cx.partial_shape(inputs[0])
        if shape is not None and len(shape) >= 2:
            # x (..., K) @ W (K, N) with a constant W (a Linear layer of a PyTorch
            # export) is FullyConnected(flatten=False) with W transposed, which
            # accelerators know
            name = f"{inputs[1]}_transposed"
            if name not in cx.consts:
                cx.consts[name] = np.ascontiguousarray(weight.T)
            data = cx.sym(inputs[0])
            cx.linear[node.output[0]] = (data, name, weight.shape[1])
            return [cx.op("FullyConnected", data, cx.sym(name),
                          num_hidden=weight.shape[1], no_bias=True, flatten=False)]
    return [cx.op("_onnx_matmul", cx.sym(inputs[0]), cx.sym(inputs[1]))]


def _softmax(fn: str) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        legacy = opset < 13
        axis = attrs.get("axis", 1 if legacy else -1)
        shape = cx.shape(inputs[0])
        if fn != "hardmax" and (not legacy or (shape is not None
                                               and axis % len(shape) == len(shape) - 1)):
            return [cx.op(fn, cx.sym(inputs[0]), axis=axis)]
        return [cx.op("_onnx_softmax", cx.sym(inputs[0]), fn=fn, axis=axis, legacy=legacy)]
    return translate


onnx_op("Softmax")(_softmax("softmax"))
onnx_op("LogSoftmax")(_softmax("log_softmax"))
onnx_op("Hardmax")(_softmax("hardmax"))


@onnx_op("Upsample")
def _upsample(cx, node, attrs, inputs, opset):
    if attrs.get("mode", "nearest") != "nearest":
        raise Unsupported(f"Upsample mode {attrs.get('mode')!r}")
    scales = attrs.get("scales") if opset < 9 else _const(cx, node, inputs, 1, "scales")
    return [cx.op("_onnx_upsample_nearest", cx.sym(inputs[0]),
                  scales=tuple(float(s) for s in np.asarray(scales).reshape(-1)))]


@onnx_op("Resize", since=10)
def _resize(cx, node, attrs, inputs, opset):
    if attrs.get("antialias", 0):
        raise Unsupported("Resize with antialias=1")
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    shape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
    names = {"scales": _input(inputs, 1)} if opset < 11 else {
        "roi": _input(inputs, 1), "scales": _input(inputs, 2), "sizes": _input(inputs, 3)}
    if shape is None or not all(name is None or cx.is_const(name) for name in names.values()):
        # the input's shape, or the scales or sizes, are known at bind time
        names = {key: name for key, name in names.items()
                 if name is not None and (not cx.is_const(name) or cx.const(name).size)}
        floats = lambda value: tuple(float(v) for v in  # noqa: E731
                                     np.asarray(value, np.float64).reshape(-1))
        convert = {"roi": floats, "scales": floats, "sizes": _ints}
        dynamic, data_inputs, extra = [], [], {}
        for key, name in names.items():
            if cx.is_const(name):
                extra[key] = convert[key](cx.const(name))
            else:
                dynamic.append(key)
                data_inputs.append(cx.sym(name))
        return [cx.op("_dyn_resize", cx.sym(inputs[0]), *data_inputs, dynamic=",".join(dynamic),
                      axes=tuple(attrs.get("axes", ())), keep_aspect_ratio_policy=policy,
                      mode=attrs.get("mode", "nearest"),
                      transform=attrs.get("coordinate_transformation_mode",
                                          "asymmetric" if opset < 11 else "half_pixel"),
                      nearest_mode=attrs.get("nearest_mode",
                                             "floor" if opset < 11 else "round_prefer_floor"),
                      cubic_coeff_a=attrs.get("cubic_coeff_a", -0.75),
                      exclude_outside=bool(attrs.get("exclude_outside", 0)),
                      extrapolation_value=attrs.get("extrapolation_value", 0.0), **extra)]
    ndim = len(shape)
    if opset < 11:
        roi, scales, sizes = None, _const(cx, node, inputs, 1, "scales"), None
    else:
        roi = _const(cx, node, inputs, 1, "roi")
        scales = _const(cx, node, inputs, 2, "scales")
        sizes = _const(cx, node, inputs, 3, "sizes")
    axes = [a % ndim for a in attrs.get("axes", range(ndim))]
    full_scales, full_sizes = [1.0] * ndim, list(shape)
    if sizes is not None and np.asarray(sizes).size:
        sizes = _ints(sizes)
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            scale = pick(size / shape[axis] for axis, size in zip(axes, sizes))
            sizes = [int(np.round(scale * shape[axis])) for axis in axes]
            for axis, size in zip(axes, sizes):
                full_sizes[axis] = size
                full_scales[axis] = scale
        else:
            for axis, size in zip(axes, sizes):
                full_sizes[axis] = size
                full_scales[axis] = size / shape[axis]
    elif scales is not None and np.asarray(scales).size:
        for axis, scale in zip(axes, np.asarray(scales, dtype=np.float64).reshape(-1)):
            full_scales[axis] = float(scale)
            full_sizes[axis] = int(np.floor(shape[axis] * scale))
    else:
        raise Unsupported("Resize needs scales or sizes")
    full_roi = ()
    if roi is not None and np.asarray(roi).size:
        values = np.asarray(roi, dtype=np.float64).reshape(-1)
        begin, end = [0.0] * ndim, [1.0] * ndim
        count = len(axes)
        for i, axis in enumerate(axes):
            begin[axis], end[axis] = float(values[i]), float(values[i + count])
        full_roi = tuple(begin + end)
    mode = attrs.get("mode", "nearest")
    transform = attrs.get("coordinate_transformation_mode",
                          "asymmetric" if opset < 11 else "half_pixel")
    return [cx.op("_onnx_resize", cx.sym(inputs[0]), sizes=tuple(full_sizes),
                  scales=tuple(full_scales), mode=mode,
                  coordinate_transformation_mode=transform,
                  nearest_mode=attrs.get("nearest_mode",
                                         "floor" if opset < 11 else "round_prefer_floor"),
                  cubic_coeff_a=attrs.get("cubic_coeff_a", -0.75),
                  exclude_outside=bool(attrs.get("exclude_outside", 0)),
                  extrapolation_value=attrs.get("extrapolation_value", 0.0), roi=full_roi)]


# ---- shapes ---------------------------------------------------------------------------------

@onnx_op("Shape")
def _shape(cx, node, attrs, inputs, opset):
    start, end = attrs.get("start", 0), attrs.get("end")
    shape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
    if shape is not None:
        return [np.array(shape, dtype=np.int64)[start:end]]
    return [cx.op("_onnx_shape", cx.sym(inputs[0]), start=start, end=end)]


@onnx_op("Size")
def _size(cx, node, attrs, inputs, opset):
    shape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
    if shape is not None:
        return [np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)]
    return [cx.op("_onnx_size", cx.sym(inputs[0]))]


@onnx_op("NonZero", since=9)
def _nonzero(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_nonzero", cx.sym(inputs[0]))]


@onnx_op("Flatten")
def _flatten(cx, node, attrs, inputs, opset):
    shape = cx.shape(inputs[0]) or cx.infer_shape(inputs[0])
    if attrs.get("axis", 1) == 1 and shape is not None and len(shape) >= 2:
        return [cx.op("Flatten", cx.sym(inputs[0]))]
    return [cx.op("_onnx_flatten", cx.sym(inputs[0]), axis=attrs.get("axis", 1))]


@onnx_op("Reshape")
def _reshape(cx, node, attrs, inputs, opset):
    if opset >= 5 and not _all_const(cx, inputs, 1):
        return [_dynamic(cx, "_dyn_reshape", [cx.sym(inputs[0])], {"shape": inputs[1]},
                         allowzero=bool(attrs.get("allowzero", 0)))]
    shape = attrs.get("shape") if opset < 5 else _ints(_const(cx, node, inputs, 1, "shape"))
    if not attrs.get("allowzero", 0) and shape and all(d >= -1 for d in shape):
        # ONNX's 0 (copy) and -1 (infer) are MXNet Reshape's codes 0 and -1
        return [cx.op("Reshape", cx.sym(inputs[0]), shape=tuple(shape))]
    return [cx.op("_onnx_reshape", cx.sym(inputs[0]), shape=tuple(shape),
                  allowzero=bool(attrs.get("allowzero", 0)))]


@onnx_op("Expand")
def _expand(cx, node, attrs, inputs, opset):
    if not _all_const(cx, inputs, 1):
        return [_dynamic(cx, "_dyn_expand", [cx.sym(inputs[0])], {"shape": inputs[1]})]
    return [cx.op("_onnx_expand", cx.sym(inputs[0]),
                  shape=_ints(_const(cx, node, inputs, 1, "shape")))]


@onnx_op("Transpose")
def _transpose(cx, node, attrs, inputs, opset):
    if attrs.get("perm"):
        return [cx.op("transpose", cx.sym(inputs[0]), axes=tuple(attrs["perm"]))]
    return [cx.op("_onnx_transpose", cx.sym(inputs[0]), perm=tuple(attrs.get("perm", ())))]


def _axes(cx, node, attrs, inputs, opset, since: int, index: int = 1):
    if opset < since:
        return attrs.get("axes")
    value = _const(cx, node, inputs, index, "axes")
    return None if value is None else _ints(value)


@onnx_op("Squeeze")
def _squeeze(cx, node, attrs, inputs, opset):
    axes = _axes(cx, node, attrs, inputs, opset, 13)
    return [cx.op("_onnx_squeeze", cx.sym(inputs[0]),
                  axes=None if axes is None else tuple(axes))]


@onnx_op("Unsqueeze")
def _unsqueeze(cx, node, attrs, inputs, opset):
    axes = _axes(cx, node, attrs, inputs, opset, 13)
    return [cx.op("_onnx_unsqueeze", cx.sym(inputs[0]), axes=tuple(axes))]


@onnx_op("Concat")
def _concat(cx, node, attrs, inputs, opset):
    names = [name for name in inputs if name]
    syms = [cx.sym(name) for name in names]
    axis = attrs.get("axis", 1)
    # MXNet's Concat (which accelerators know) when every input's shape is
    # known and non-empty; otherwise the host operator, which also takes
    # empty inputs and needs no rank to resolve a negative axis.
    shapes = [cx.shape(name) or cx.infer_shape(name) for name in names]
    if shapes and all(shape and len(shape) == len(shapes[0]) and 0 not in shape
                      for shape in shapes):
        return [cx.op("Concat", *syms, dim=axis % len(shapes[0]), num_args=len(syms))]
    return [cx.op("_onnx_concat", *syms, axis=axis, num_args=len(syms))]


def _check_axis(cx: Any, node: Any, name: str, axis: int, split: tuple[int, ...] = ()) -> None:
    """Refuses, at import, an axis out of range for the input's rank and
    split sizes that do not add up to its extent, where the shape is known
    (shape inference checks them again at bind)."""
    shape = cx.shape(name) or cx.infer_shape(name)
    if shape is None:
        return
    if not -len(shape) <= axis < len(shape):
        raise ShapeError(f"{node.op_type} {node.name or ''}: axis {axis} is out of range for the "
                         f"{len(shape)} dimensions of {name!r} (shape {tuple(shape)})")
    extent = shape[axis % len(shape)]
    if split and (any(size < 0 for size in split) or sum(split) != extent):
        raise ShapeError(f"{node.op_type} {node.name or ''}: split {split} does not add up to "
                         f"the extent {extent} of axis {axis} of {name!r} (shape {tuple(shape)})")


@onnx_op("Split")
def _split(cx, node, attrs, inputs, opset):
    outputs = len(node.output)
    split = attrs.get("split") if opset < 13 else _const(cx, node, inputs, 1, "split")
    split = () if split is None else _ints(split)
    _check_axis(cx, node, inputs[0], attrs.get("axis", 0), split)
    result = cx.op("_onnx_split", cx.sym(inputs[0]), axis=attrs.get("axis", 0), split=split,
                   num_outputs=attrs.get("num_outputs", outputs))
    return [result[i] for i in range(outputs)]


@onnx_op("Slice")
def _slice(cx, node, attrs, inputs, opset):
    if opset < 10:
        starts, ends, axes = attrs["starts"], attrs["ends"], attrs.get("axes", ())
        steps = ()
    elif not _all_const(cx, inputs, 1, 2, 3, 4):
        return [_dynamic(cx, "_dyn_slice", [cx.sym(inputs[0])],
                         {"starts": _input(inputs, 1), "ends": _input(inputs, 2),
                          "axes": _input(inputs, 3), "steps": _input(inputs, 4)})]
    else:
        starts = _ints(_const(cx, node, inputs, 1, "starts"))
        ends = _ints(_const(cx, node, inputs, 2, "ends"))
        axes = _const(cx, node, inputs, 3, "axes")
        steps = _const(cx, node, inputs, 4, "steps")
        axes = () if axes is None else _ints(axes)
        steps = () if steps is None else _ints(steps)
    return [cx.op("_onnx_slice", cx.sym(inputs[0]), starts=tuple(starts), ends=tuple(ends),
                  axes=tuple(axes), steps=tuple(steps))]


@onnx_op("Pad")
def _pad(cx, node, attrs, inputs, opset):
    mode = attrs.get("mode", "constant")
    if opset < 11:
        pads, value, axes = attrs.get("pads", attrs.get("paddings")), attrs.get("value", 0.0), ()
    elif not _all_const(cx, inputs, 1, 2, 3):
        scalar = lambda value: float(np.asarray(value).reshape(-1)[0])  # noqa: E731
        pads = _dynamic(cx, "_dyn_pad", [cx.sym(inputs[0])], {"pads": inputs[1]}, mode=mode)
        dynamic = [key for key, index in (("pads", 1), ("constant_value", 2), ("axes", 3))
                   if _input(inputs, index)]
        syms, extra = [], {}
        for key, index in (("pads", 1), ("constant_value", 2), ("axes", 3)):
            name = _input(inputs, index)
            if name is None:
                continue
            if cx.is_const(name):
                dynamic.remove(key)
                value = cx.const(name)
                if key == "constant_value":
                    if np.asarray(value).size:
                        extra[key] = scalar(value)
                else:
                    extra[key] = _ints(value)
            else:
                syms.append(cx.sym(name))
        return [cx.op("_dyn_pad", cx.sym(inputs[0]), *syms, dynamic=",".join(dynamic), mode=mode,
                      **extra)]
    else:
        pads = _ints(_const(cx, node, inputs, 1, "pads"))
        value = _const(cx, node, inputs, 2, "constant_value")
        value = 0.0 if value is None else float(np.asarray(value).reshape(-1)[0])
        axes = _const(cx, node, inputs, 3, "axes")
        axes = () if axes is None else _ints(axes)
    return [cx.op("_onnx_pad", cx.sym(inputs[0]), pads=tuple(pads), mode=mode, value=value,
                  axes=tuple(axes))]


@onnx_op("Tile")
def _tile(cx, node, attrs, inputs, opset):
    if not _all_const(cx, inputs, 1):
        return [_dynamic(cx, "_dyn_tile", [cx.sym(inputs[0])], {"repeats": inputs[1]})]
    return [cx.op("_onnx_tile", cx.sym(inputs[0]),
                  reps=_ints(_const(cx, node, inputs, 1, "repeats")))]


@onnx_op("Gather")
def _gather(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_gather", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  axis=attrs.get("axis", 0))]


@onnx_op("GatherElements")
def _gather_elements(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_gather_elements", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  axis=attrs.get("axis", 0))]


@onnx_op("GatherND")
def _gather_nd(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_gather_nd", cx.sym(inputs[0]), cx.sym(inputs[1]),
                  batch_dims=attrs.get("batch_dims", 0))]


@onnx_op("ScatterElements", "Scatter")
def _scatter_elements(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_scatter_elements", *(cx.sym(n) for n in inputs[:3]),
                  axis=attrs.get("axis", 0), reduction=attrs.get("reduction", "none"))]


@onnx_op("ScatterND")
def _scatter_nd(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_scatter_nd", *(cx.sym(n) for n in inputs[:3]),
                  reduction=attrs.get("reduction", "none"))]


@onnx_op("DepthToSpace")
def _depth_to_space(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_depth_to_space", cx.sym(inputs[0]), blocksize=attrs["blocksize"],
                  mode=attrs.get("mode", "DCR"))]


@onnx_op("SpaceToDepth")
def _space_to_depth(cx, node, attrs, inputs, opset):
    if attrs.get("mode", "DCR") != "DCR":
        raise Unsupported(f"SpaceToDepth mode {attrs['mode']!r}")
    return [cx.op("_onnx_space_to_depth", cx.sym(inputs[0]), blocksize=attrs["blocksize"])]


@onnx_op("Trilu")
def _trilu(cx, node, attrs, inputs, opset):
    k = _const(cx, node, inputs, 1, "k")
    return [cx.op("_onnx_trilu", cx.sym(inputs[0]), upper=bool(attrs.get("upper", 1)),
                  k=0 if k is None else int(np.asarray(k).reshape(-1)[0]))]


# ---- reductions -----------------------------------------------------------------------------

_REDUCE = {"ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18),
           "ReduceMin": ("min", 18), "ReduceProd": ("prod", 18), "ReduceL1": ("l1", 18),
           "ReduceL2": ("l2", 18), "ReduceLogSum": ("log_sum", 18),
           "ReduceLogSumExp": ("log_sum_exp", 18), "ReduceSumSquare": ("sum_square", 18)}


def _reduce(fn: str, since: int) -> Translator:
    def translate(cx, node, attrs, inputs, opset):
        axes = _axes(cx, node, attrs, inputs, opset, since)
        return [cx.op("_onnx_reduce", cx.sym(inputs[0]), fn=fn,
                      axes=() if axes is None else tuple(axes),
                      keepdims=bool(attrs.get("keepdims", 1)),
                      noop_with_empty_axes=bool(attrs.get("noop_with_empty_axes", 0)))]
    return translate


for _onnx_name, (_fn, _since) in _REDUCE.items():
    onnx_op(_onnx_name)(_reduce(_fn, _since))


@onnx_op("ArgMax", "ArgMin")
def _arg(cx, node, attrs, inputs, opset):
    return [cx.op("_onnx_arg", cx.sym(inputs[0]), fn=node.op_type[3:].lower(),
                  axis=attrs.get("axis", 0), keepdims=bool(attrs.get("keepdims", 1)),
                  select_last_index=bool(attrs.get("select_last_index", 0)))]


@onnx_op("CumSum")
def _cumsum(cx, node, attrs, inputs, opset):
    axis = _const(cx, node, inputs, 1, "axis")
    _check_axis(cx, node, inputs[0], int(np.asarray(axis).reshape(-1)[0]))
    return [cx.op("_onnx_cumsum", cx.sym(inputs[0]), axis=int(np.asarray(axis).reshape(-1)[0]),
                  exclusive=bool(attrs.get("exclusive", 0)),
                  reverse=bool(attrs.get("reverse", 0)))]


@onnx_op("CumProd")
def _cumprod(cx, node, attrs, inputs, opset):
    axis = _const(cx, node, inputs, 1, "axis")
    return [cx.op("_onnx_cumprod", cx.sym(inputs[0]),
                  axis=int(np.asarray(axis).reshape(-1)[0]),
                  exclusive=bool(attrs.get("exclusive", 0)),
                  reverse=bool(attrs.get("reverse", 0)))]


@onnx_op("TopK")
def _topk(cx, node, attrs, inputs, opset):
    k = attrs.get("k") if opset < 10 else int(np.asarray(
        _const(cx, node, inputs, 1, "K")).reshape(-1)[0])
    result = cx.op("_onnx_topk", cx.sym(inputs[0]), k=k, axis=attrs.get("axis", -1),
                   largest=bool(attrs.get("largest", 1)), sorted=bool(attrs.get("sorted", 1)))
    return [result[0], result[1]]


# Translators kept in modules of their own register on import (they import
# this module's helpers, so they come last): RNN, LSTM and GRU; If, Loop and
# Scan (their bodies are graphs); the host-only operator families.
from . import (  # noqa: E402, F401
    translate_control,
    translate_rnn,
    translators_attention,
    translators_extra,
    translators_quant,
    translators_vision,
)
