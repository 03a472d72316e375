"""Host operators for ONNX semantics that no MXNet 1.x operator has.

The ONNX importer (:mod:`acc_host.onnx`) maps ONNX operators onto MXNet's
where the semantics agree and onto these ``_onnx_*`` operators where they do
not (numpy-style broadcasting with ONNX dtypes, boolean comparisons, int64
indices, ONNX's Slice/Pad/Gather/Reduce conventions, ...). Each one is an
ordinary registry operator: attributes, shape and dtype inference, and a
numpy implementation (the CPU path).

Shape inference of most of them evaluates the operator on zero-filled inputs
of the known shapes (``_probe_shape``): the operators here are cheap and
their output shapes depend on attributes and input shapes only, never on
input values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import erf
from typing import Any, Literal

import numpy as np

from ..errors import (
    AccHostError,
    AllocationTooLargeError,
    DTypeError,
    OperatorError,
    ShapeError,
)
from ..limits import MAX_DIMS, array_bytes, check_bytes, check_empty_span
from .params import (
    Attrs,
    Param,
    choice,
    optional,
    parse_bool,
    parse_count,
    parse_float,
    parse_float_tuple,
    parse_int,
    parse_positive_int,
    parse_str,
    parse_tuple,
)
from .registry import OpDef, ShapeUnknownError, normalize_axis, register, take

_ONNX_DTYPES = ("float16", "float32", "float64", "uint8", "uint16", "uint32", "uint64", "int8",
                "int16", "int32", "int64", "bool")


def _parse_onnx_dtype(text: str) -> str:
    return choice(*_ONNX_DTYPES)(text)


#: Functions ONNX defines for integer (and, but for the shifts, bool) inputs only.
_BITWISE = frozenset({"bitshift_left", "bitshift_right", "bitwise_and", "bitwise_or",
                      "bitwise_xor", "bitwise_not"})


def _bitwise_dtype(op: str, fn: str, dtypes: list) -> Any:
    """The output dtype (the first input's); a DTypeError for a bitwise
    function of a float input."""
    if fn in _BITWISE:
        allowed = "iu" if fn.startswith("bitshift") else "iub"
        for position, dtype in enumerate(dtypes):
            if dtype is not None and np.dtype(dtype).kind not in allowed:
                raise DTypeError(f"{op}: {fn} takes integer inputs, input {position} is "
                                 f"{np.dtype(dtype).name}")
    return dtypes[0]


def _probe_shape(name: str, compute: Callable, probe: str = "") -> Callable:
    """Shape inference by running compute on zeros of the input shapes; probe
    gives per input 'f' (float32, default), 'i' (int64) or 'b' (bool)."""
    kinds = {"f": np.float32, "i": np.int64, "b": np.bool_}

    def infer(attrs: Attrs, shapes: list) -> tuple[list, list]:
        for position, shape in enumerate(shapes):
            if shape is None:
                raise ShapeUnknownError(f"{name}: the shape of input {position} is unknown")
        dtypes = [kinds[probe[i] if i < len(probe) else "f"] for i in range(len(shapes))]
        # Declared shapes may be anything a model file says: refuse what
        # the machine cannot hold before numpy is asked for it.
        check_bytes(sum(array_bytes(shape, dtype) for shape, dtype in zip(shapes, dtypes)),
                    f"{name}: shape inference on inputs of shapes {list(shapes)}")
        for position, shape in enumerate(shapes):
            check_empty_span(shape, f"{name}: shape inference, input {position}")
        try:
            outputs = _run_on_zeros(compute, attrs, shapes, dtypes)
        except AccHostError:  # already typed and named (a RankError from take, ...)
            raise
        except MemoryError:
            raise AllocationTooLargeError(
                f"{name}: shape inference on inputs of shapes {list(shapes)} ran out of "
                "memory (check the declared shapes)") from None
        # numpy refuses more than 32 (numpy 2: 64) dimensions with a
        # ValueError or, from some functions, a RuntimeError.
        except (ValueError, IndexError, TypeError, RuntimeError) as error:
            raise ShapeError(f"{name}: {error}") from None
        return list(shapes), [tuple(int(d) for d in np.shape(out)) for out in outputs]
    return infer


def _run_on_zeros(compute: Callable, attrs: Attrs, shapes: list, dtypes: list) -> Any:
    """compute's outputs for zero inputs of shapes. Tried first on inputs
    that hold one element each (read-only views with zero strides), so an
    operator that moves or views its input (Unsqueeze, Squeeze, Shape,
    Transpose) costs nothing at a probe extent of a large activation; an
    operator that cannot take such inputs (one writing into them) runs again
    on allocated zeros, as before."""
    with np.errstate(all="ignore"):
        try:
            return compute(attrs, [_zero_view(shape, dtype)
                                   for shape, dtype in zip(shapes, dtypes)])
        except Exception:  # noqa: BLE001  (any failure: the allocated zeros decide)
            pass
        return compute(attrs, [np.zeros(shape, dtype) for shape, dtype in zip(shapes, dtypes)])


def _zero_view(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A read-only array of zeros of shape that holds one element."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def _rule_or_probe(name: str, compute: Callable, rule: Callable, probe: str = "") -> Callable:
    """Shape inference by rule(attrs, known shapes) -> output shapes, for an
    operator that copies or gathers its input (its run on zeros at a probe
    extent allocates and fills the whole output); rule returns None for the
    cases it leaves to the run on zeros (the malformed ones, whose error
    that run words)."""
    probed = _probe_shape(name, compute, probe)

    def infer(attrs: Attrs, shapes: list) -> tuple[list, list]:
        if all(shape is not None for shape in shapes):
            outputs = rule(attrs, [tuple(int(d) for d in shape) for shape in shapes])
            if outputs is not None:
                return list(shapes), outputs
        return probed(attrs, shapes)
    return infer


def _broadcast_shape(name: str) -> Callable:
    """Shape inference of numpy-broadcasting element-wise operators."""
    def infer(attrs: Attrs, shapes: list) -> tuple[list, list]:
        for position, shape in enumerate(shapes):
            if shape is None:
                raise ShapeUnknownError(f"{name}: the shape of input {position} is unknown")
        try:
            out = np.broadcast_shapes(*[tuple(shape) for shape in shapes])
        except ValueError as error:
            raise ShapeError(f"{name}: {error}") from None
        return list(shapes), [tuple(int(d) for d in out)]
    return infer


def _dtype_rule(out: Callable[[Attrs, list], Sequence[np.dtype]],
                needs: Sequence[int] = (0,)) -> Callable:
    """Dtype inference that leaves the inputs as they are and derives the
    outputs from the inputs in needs (unknown ones: retried later)."""
    def infer(attrs: Attrs, dtypes: list) -> tuple[list, list]:
        for index in needs:
            if index < len(dtypes) and dtypes[index] is None:
                raise ShapeUnknownError(f"dtype of input {index} is unknown")
        return list(dtypes), [np.dtype(d) for d in out(attrs, dtypes)]
    return infer


def _first(attrs: Attrs, dtypes: list) -> list:
    return [dtypes[0]]


def _fixed(dtype: Any) -> Callable:
    return lambda attrs, dtypes: [np.dtype(dtype)]


def _def(name: str, compute: Callable, params: Sequence[Param] = (),
         arguments: Any = ("data",), outputs: Any = ("output",), probe: str = "",
         dtype: Callable = _first, needs: Sequence[int] = (0,), doc: str = "",
         infer_shape: Callable | None = None) -> None:
    register(OpDef(name=name, compute=compute, params=tuple(params), arguments=arguments,
                   outputs=outputs,
                   infer_shape=infer_shape or _probe_shape(name, compute, probe),
                   infer_type=_dtype_rule(dtype, needs), doc=doc))


def _variadic(attrs: Attrs) -> list[str]:
    return [f"arg{i}" for i in range(attrs.num_args)]


_NUM_ARGS = Param("num_args", parse_count, 1)

# ---- element-wise ------------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / np.sqrt(2).astype(x.dtype)))


_UNARY: dict[str, Callable[[np.ndarray, Attrs], np.ndarray]] = {
    "softsign": lambda x, a: x / (1 + np.abs(x)),
    "softplus": lambda x, a: np.logaddexp(0, x),
    "selu": lambda x, a: a.gamma * np.where(x > 0, x, a.alpha * (np.exp(x) - 1)),
    "elu": lambda x, a: np.where(x > 0, x, a.alpha * (np.exp(x) - 1)),
    "celu": lambda x, a: np.maximum(0, x) + np.minimum(0, a.alpha * (np.exp(x / a.alpha) - 1)),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, a.alpha * x),
    "thresholded_relu": lambda x, a: np.where(x > a.alpha, x, 0),
    "hard_sigmoid": lambda x, a: np.clip(a.alpha * x + a.beta, 0, 1),
    "hard_swish": lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1),
    "mish": lambda x, a: x * np.tanh(np.logaddexp(0, x)),
    "swish": lambda x, a: x / (1 + np.exp(-a.alpha * x)),
    "gelu": lambda x, a: _gelu(x, a.approximate),
    "shrink": lambda x, a: np.where(x < -a.alpha, x + a.beta,
                                    np.where(x > a.alpha, x - a.beta, 0)),
    "relu": lambda x, a: np.maximum(x, 0),
    "abs": lambda x, a: np.abs(x),
    "neg": lambda x, a: np.negative(x),
    "sign": lambda x, a: np.sign(x),
    "round": lambda x, a: np.round(x),
    "sigmoid": lambda x, a: 1 / (1 + np.exp(-x)),
    "floor": lambda x, a: np.floor(x),
    "ceil": lambda x, a: np.ceil(x),
    "reciprocal": lambda x, a: 1 / x,
    "sqrt": lambda x, a: np.sqrt(x),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "erf": lambda x, a: _erf(x),
    "bitwise_not": lambda x, a: np.bitwise_not(x),
    "identity": lambda x, a: x.copy(),
}
_BOOL_UNARY: dict[str, Callable[[np.ndarray, Attrs], np.ndarray]] = {
    "not": lambda x, a: np.logical_not(x),
    "isnan": lambda x, a: np.isnan(x),
    "isinf": lambda x, a: (np.isinf(x) & ((x > 0) if a.detect_positive else False))
    | (np.isinf(x) & ((x < 0) if a.detect_negative else False)),
}


def _unary(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    with np.errstate(all="ignore"):
        if attrs.fn in _BOOL_UNARY:
            return [np.asarray(_BOOL_UNARY[attrs.fn](x, attrs), dtype=np.bool_)]
        return [np.asarray(_UNARY[attrs.fn](x, attrs)).astype(x.dtype, copy=False)]


_def("_onnx_unary", _unary,
     [Param("fn", choice(*_UNARY, *_BOOL_UNARY)), Param("alpha", parse_float, 1.0),
      Param("beta", parse_float, 0.0), Param("gamma", parse_float, 1.0),
      Param("approximate", parse_str, "none"),
      Param("detect_positive", parse_bool, True), Param("detect_negative", parse_bool, True)],
     dtype=lambda a, d: [np.bool_ if a.fn in _BOOL_UNARY
                         else _bitwise_dtype("_onnx_unary", a.fn, d)],
     infer_shape=_broadcast_shape("_onnx_unary"),
     doc="ONNX element-wise unary functions (activation functions with ONNX's "
         "alpha/beta/gamma, predicates returning bool).")


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(all="ignore"):
            return np.trunc(a.astype(np.float64) / b).astype(a.dtype)
    return a / b


def _fmod(a: np.ndarray, b: np.ndarray, fmod: bool) -> np.ndarray:
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX Pow; for integers exactly (numpy refuses negative integer
    exponents): a ** -n truncates toward zero, so it is 0 unless |a| is 1;
    0 to a negative power is an OperatorError."""
    if np.issubdtype(a.dtype, np.floating):
        return np.power(a, b.astype(a.dtype))
    if not np.issubdtype(b.dtype, np.integer):
        with np.errstate(all="ignore"):
            return np.power(a.astype(np.float64), b).astype(a.dtype)
    negative = b < 0
    if not negative.any():
        return np.power(a, b)
    a_full, b_full = np.broadcast_arrays(a, b)
    if (negative & (a_full == 0)).any():
        raise OperatorError("_onnx_binary: pow: 0 to a negative integer power")
    result = np.power(a_full, np.where(negative, 0, b_full)).astype(a.dtype)
    minus_one = np.where(b_full % 2 == 0, 1, -1).astype(a.dtype)
    reciprocal = np.where(a_full == 1, 1, np.where(a_full == -1, minus_one, 0)).astype(a.dtype)
    return np.where(negative, reciprocal, result)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray, Attrs], np.ndarray]] = {
    "add": lambda a, b, t: a + b,
    "sub": lambda a, b, t: a - b,
    "mul": lambda a, b, t: a * b,
    "div": lambda a, b, t: _int_div(a, b),
    "pow": lambda a, b, t: _pow(a, b),
    "mod": lambda a, b, t: _fmod(a, b, t.fmod),
    "bitshift_left": lambda a, b, t: np.left_shift(a, b),
    "bitshift_right": lambda a, b, t: np.right_shift(a, b),
    "bitwise_and": lambda a, b, t: np.bitwise_and(a, b),
    "bitwise_or": lambda a, b, t: np.bitwise_or(a, b),
    "bitwise_xor": lambda a, b, t: np.bitwise_xor(a, b),
    "prelu": lambda a, b, t: np.where(a < 0, a * b, a),
}
_BOOL_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "equal": np.equal, "greater": np.greater, "less": np.less,
    "greater_equal": np.greater_equal, "less_equal": np.less_equal,
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
}


def _binary(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    a, b = inputs
    with np.errstate(all="ignore"):
        if attrs.fn in _BOOL_BINARY:
            return [np.asarray(_BOOL_BINARY[attrs.fn](a, b), dtype=np.bool_)]
        return [np.asarray(_BINARY[attrs.fn](a, b, attrs)).astype(a.dtype, copy=False)]


_def("_onnx_binary", _binary,
     [Param("fn", choice(*_BINARY, *_BOOL_BINARY)), Param("fmod", parse_bool, False)],
     arguments=("lhs", "rhs"),
     dtype=lambda a, d: [np.bool_ if a.fn in _BOOL_BINARY
                         else _bitwise_dtype("_onnx_binary", a.fn, d)],
     infer_shape=_broadcast_shape("_onnx_binary"),
     doc="ONNX binary element-wise operators with numpy broadcasting; comparisons "
         "and logical operators return bool, integer Div truncates, Pow keeps the "
         "base's dtype.")


def _nary(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    fn = {"sum": np.add, "max": np.maximum, "min": np.minimum, "mean": np.add}[attrs.fn]
    result = inputs[0]
    for value in inputs[1:]:
        result = fn(result, value)
    if attrs.fn == "mean":
        result = result / len(inputs)
    return [np.array(result, dtype=inputs[0].dtype)]


_def("_onnx_nary", _nary, [Param("fn", choice("sum", "max", "min", "mean")), _NUM_ARGS],
     arguments=_variadic, infer_shape=_broadcast_shape("_onnx_nary"),
     doc="ONNX Sum/Max/Min/Mean over any number of "
     "broadcast inputs.")


def _where(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    cond, x, y = inputs
    return [np.where(cond.astype(bool), x, y).astype(x.dtype)]


_def("_onnx_where", _where, arguments=("condition", "x", "y"), probe="bff",
     dtype=lambda a, d: [d[1]], needs=(1,), infer_shape=_broadcast_shape("_onnx_where"),
     doc="numpy-broadcasting Where.")


def _clip(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    out = x
    if attrs.a_min is not None:
        out = np.maximum(out, np.array(attrs.a_min).astype(x.dtype))
    if attrs.a_max is not None:
        out = np.minimum(out, np.array(attrs.a_max).astype(x.dtype))
    return [np.array(out, dtype=x.dtype)]


_def("_onnx_clip", _clip, [Param("a_min", optional(parse_float), None),
                           Param("a_max", optional(parse_float), None)],
     doc="Clip with optional bounds (ONNX Clip), for every dtype.")


def _cast(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [inputs[0].astype(attrs.dtype)]


_def("_onnx_cast", _cast, [Param("dtype", _parse_onnx_dtype)],
     dtype=lambda a, d: [a.dtype], needs=(), doc="Cast to any ONNX numeric dtype.")

# ---- shape manipulation ------------------------------------------------------------------


def _shape(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    shape = np.array(inputs[0].shape, dtype=np.int64)
    end = attrs.end if attrs.end is not None else len(shape)
    return [shape[attrs.start:end].copy()]


_def("_onnx_shape", _shape, [Param("start", parse_int, 0),
                             Param("end", optional(parse_int), None)],
     dtype=_fixed(np.int64), needs=(), doc="The input's shape as int64 (ONNX Shape).")
_def("_onnx_size", lambda a, i: [np.array(i[0].size, dtype=np.int64)],
     dtype=_fixed(np.int64), needs=(), doc="The input's element count as int64 scalar.")


def _flatten(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = attrs.axis % x.ndim if x.ndim else 0
    if attrs.axis == x.ndim:
        axis = x.ndim
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    return [x.reshape(outer, -1) if x.size else x.reshape(outer, int(np.prod(x.shape[axis:])))]


_def("_onnx_flatten", _flatten, [Param("axis", parse_int, 1)],
     doc="ONNX Flatten: 2-D result split at axis.")


def _reshape(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    shape = list(attrs.shape)
    if not attrs.allowzero:
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [x.reshape(shape)]


_def("_onnx_reshape", _reshape, [Param("shape", parse_tuple), Param("allowzero", parse_bool,
                                                                    False)],
     doc="ONNX Reshape (0 copies the input extent unless allowzero, -1 is inferred).")


def _expand(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    shape = np.broadcast_shapes(x.shape, tuple(attrs.shape))
    return [np.array(np.broadcast_to(x, shape))]


_def("_onnx_expand", _expand, [Param("shape", parse_tuple)],
     doc="ONNX Expand (bidirectional broadcast to shape).")


def _unsqueeze(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    ndim = x.ndim + len(attrs.axes)
    axes = sorted(normalize_axis("_onnx_unsqueeze", a, ndim) for a in attrs.axes)
    for axis in axes:
        x = np.expand_dims(x, axis)
    return [x.copy()]


def _unsqueeze_shape(attrs: Attrs, shapes: list) -> list | None:
    shape = shapes[0]
    ndim = len(shape) + len(attrs.axes)
    axes = sorted(normalize_axis("_onnx_unsqueeze", a, ndim) for a in attrs.axes)
    if len(set(axes)) != len(axes):
        return None
    out = list(shape)
    for axis in axes:
        out.insert(axis, 1)
    return [tuple(out)]


_def("_onnx_unsqueeze", _unsqueeze, [Param("axes", parse_tuple)],
     doc="ONNX Unsqueeze (several axes of the output).",
     infer_shape=_rule_or_probe("_onnx_unsqueeze", _unsqueeze, _unsqueeze_shape))


def _squeeze(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if attrs.axes is None:
        return [np.squeeze(x).copy()]
    axes = tuple(normalize_axis("_onnx_squeeze", a, x.ndim) for a in attrs.axes)
    return [np.squeeze(x, axis=axes).copy()]


def _squeeze_shape(attrs: Attrs, shapes: list) -> list | None:
    shape = shapes[0]
    if attrs.axes is None:
        return [tuple(d for d in shape if d != 1)]
    axes = {normalize_axis("_onnx_squeeze", a, len(shape)) for a in attrs.axes}
    if any(shape[axis] != 1 for axis in axes):
        return None
    return [tuple(d for axis, d in enumerate(shape) if axis not in axes)]


_def("_onnx_squeeze", _squeeze, [Param("axes", optional(parse_tuple), None)],
     doc="ONNX Squeeze (all unit axes when axes is None).",
     infer_shape=_rule_or_probe("_onnx_squeeze", _squeeze, _squeeze_shape))


def _transpose(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    return [np.ascontiguousarray(np.transpose(x, attrs.perm or None))]


_def("_onnx_transpose", _transpose, [Param("perm", parse_tuple, ())],
     doc="ONNX Transpose (any rank, default reverses the axes).")


def _slice(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    index = [slice(None)] * x.ndim
    axes = attrs.axes or tuple(range(len(attrs.starts)))
    steps = attrs.steps or (1,) * len(attrs.starts)
    big = 2 ** 62
    for start, end, axis, step in zip(attrs.starts, attrs.ends, axes, steps):
        start = max(min(start, big), -big)
        end = max(min(end, big), -big)
        index[normalize_axis("_onnx_slice", axis, x.ndim)] = slice(start, end, step)
    return [x[tuple(index)].copy()]


_def("_onnx_slice", _slice, [Param("starts", parse_tuple), Param("ends", parse_tuple),
                             Param("axes", parse_tuple, ()), Param("steps", parse_tuple, ())],
     doc="ONNX Slice (negative steps, clamped out-of-range bounds).")


def _split(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_split", attrs.axis, x.ndim)
    points: list[int]
    if attrs.split:
        if any(int(p) < 0 for p in attrs.split) or sum(map(int, attrs.split)) != x.shape[axis]:
            raise ShapeError(f"_onnx_split: split {tuple(attrs.split)} does not add up to the "
                             f"extent {x.shape[axis]} of axis {axis} of shape {x.shape}")
        points = [int(p) for p in np.cumsum(attrs.split)[:-1]]
    else:
        n = attrs.num_outputs
        size = -(-x.shape[axis] // n)
        points = [size * (i + 1) for i in range(n - 1)]
    return [part.copy() for part in np.split(x, points, axis=axis)]


register(OpDef(name="_onnx_split", compute=_split,
               params=(Param("axis", parse_int, 0), Param("split", parse_tuple, ()),
                       Param("num_outputs", parse_count, 1)),
               outputs=lambda a: [f"output{i}" for i in range(len(a.split) or a.num_outputs)],
               infer_shape=_probe_shape("_onnx_split", _split),
               infer_type=lambda a, d: (list(d), [d[0] or np.dtype(np.float32)]
                                        * (len(a.split) or a.num_outputs)),
               doc="ONNX Split (explicit sizes, or num_outputs with a smaller last part)."))


def _concat(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.concatenate(inputs, axis=attrs.axis)]


_def("_onnx_concat", _concat, [Param("axis", parse_int), _NUM_ARGS], arguments=_variadic,
     doc="ONNX Concat (negative axes, empty inputs).")


def _pad(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    n = x.ndim
    pads = list(attrs.pads)
    axes = attrs.axes or tuple(range(n))
    width = [(0, 0)] * n
    for i, axis in enumerate(axes):
        width[axis % n] = (pads[i], pads[i + len(axes)])
    # negative pads crop
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(width))
    x = x[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    if attrs.mode == "constant":
        return [np.pad(x, width, mode="constant",
                       constant_values=np.array(attrs.value).astype(x.dtype))]
    modes: dict[str, Literal["reflect", "edge", "wrap"]] = {
        "reflect": "reflect", "edge": "edge", "wrap": "wrap"}
    return [np.pad(x, width, mode=modes[attrs.mode])]


_def("_onnx_pad", _pad, [Param("pads", parse_tuple), Param("mode", choice("constant",
                                                                         "reflect", "edge",
                                                                         "wrap"), "constant"),
                         Param("value", parse_float, 0.0), Param("axes", parse_tuple, ())],
     doc="ONNX Pad: any axes, constant/reflect/edge/wrap, negative pads crop.")


def _tile(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.tile(inputs[0], attrs.reps)]


_def("_onnx_tile", _tile, [Param("reps", parse_tuple)], doc="ONNX Tile.")


def _indices(op: str, idx: np.ndarray, size: int, what: str) -> np.ndarray:
    """idx as int64 with negative entries counted from the end; an
    OperatorError when one lies outside [-size, size)."""
    with np.errstate(all="ignore"):
        idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise OperatorError(f"{op}: indices from {idx.min()} to {idx.max()} are out of range "
                            f"[{-size}, {size}) for {what}")
    return np.where(idx < 0, idx + size, idx)


def _nd_indices(op: str, idx: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """GatherND/ScatterND index tuples (the last axis of idx) into shape,
    each entry checked against its extent; negative ones count from the end."""
    with np.errstate(all="ignore"):
        idx = idx.astype(np.int64)
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim == 0 or k > len(shape):
        raise ShapeError(f"{op}: indices of shape {idx.shape} index {k} axes of data of shape "
                         f"{shape}")
    columns = [_indices(op, idx[..., j], shape[j], f"axis {j} of data {shape}")
               for j in range(k)]
    return np.stack(columns, axis=-1) if columns else idx


def _gather(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, idx = inputs
    axis = normalize_axis("_onnx_gather", attrs.axis, x.ndim)
    idx = _indices("_onnx_gather", idx, x.shape[axis], f"axis {axis} of data {x.shape}")
    return [take("_onnx_gather", x, idx, axis)]


def _gather_shape(attrs: Attrs, shapes: list) -> list | None:
    data, indices = shapes
    axis = normalize_axis("_onnx_gather", attrs.axis, len(data))
    if data[axis] == 0 or len(data) + len(indices) - 1 > MAX_DIMS:
        return None  # (zero indices out of range, or too many dimensions: the run says)
    return [(*data[:axis], *indices, *data[axis + 1:])]


_def("_onnx_gather", _gather, [Param("axis", parse_int, 0)], arguments=("data", "indices"),
     probe="fi", doc="ONNX Gather (negative indices count from the end).",
     infer_shape=_rule_or_probe("_onnx_gather", _gather, _gather_shape, "fi"))


def _gather_elements(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, idx = inputs
    axis = normalize_axis("_onnx_gather_elements", attrs.axis, x.ndim)
    idx = _indices("_onnx_gather_elements", idx, x.shape[axis],
                   f"axis {axis} of data {x.shape}")
    return [np.take_along_axis(x, idx, axis=axis)]


_def("_onnx_gather_elements", _gather_elements, [Param("axis", parse_int, 0)],
     arguments=("data", "indices"), probe="fi", doc="ONNX GatherElements.")


def _gather_nd(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, idx = inputs
    b = attrs.batch_dims
    if not 0 <= b < min(x.ndim, idx.ndim):
        raise ShapeError(f"_onnx_gather_nd: batch_dims={b} must be in [0, "
                         f"{min(x.ndim, idx.ndim)}) for data {x.shape} and indices {idx.shape}")
    idx = _nd_indices("_onnx_gather_nd", idx, x.shape[b:])
    batch_shape = x.shape[:b]
    k = int(idx.shape[-1])
    if b + k > x.ndim:
        raise OperatorError(f"_onnx_gather_nd: indices of depth {k} after {b} batch dimensions "
                            f"do not fit data of {x.ndim} dimensions")
    out_shape = idx.shape[:-1] + x.shape[b + k:]
    xs = x.reshape((-1,) + x.shape[b:]) if b else x[None]
    ids = idx.reshape((int(np.prod(batch_shape, dtype=np.int64)) if b else 1, -1, k))
    result = [xs[i][tuple(ids[i].T)] for i in range(len(ids))]
    return [np.array(result).reshape(out_shape).astype(x.dtype)]


_def("_onnx_gather_nd", _gather_nd, [Param("batch_dims", parse_int, 0)],
     arguments=("data", "indices"), probe="fi", doc="ONNX GatherND.")


def _scatter_elements(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, idx, upd = inputs
    out = x.copy()
    axis = normalize_axis("_onnx_scatter_elements", attrs.axis, x.ndim)
    idx = _indices("_onnx_scatter_elements", idx, x.shape[axis],
                   f"axis {axis} of data {x.shape}")
    for pos in np.ndindex(*idx.shape):
        position = list(pos)
        position[axis] = idx[pos]
        target = tuple(position)
        value = upd[pos]
        if attrs.reduction == "add":
            out[target] += value
        elif attrs.reduction == "mul":
            out[target] *= value
        elif attrs.reduction == "max":
            out[target] = max(out[target], value)
        elif attrs.reduction == "min":
            out[target] = min(out[target], value)
        else:
            out[target] = value
    return [out]


_def("_onnx_scatter_elements", _scatter_elements,
     [Param("axis", parse_int, 0), Param("reduction", choice("none", "add", "mul", "max",
                                                            "min"), "none")],
     arguments=("data", "indices", "updates"), probe="fif", doc="ONNX ScatterElements.")


def _scatter_nd(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, idx, upd = inputs
    out = x.copy()
    idx = _nd_indices("_onnx_scatter_nd", idx, x.shape)
    for pos in np.ndindex(*idx.shape[:-1]):
        target = tuple(idx[pos])
        if attrs.reduction == "add":
            out[target] += upd[pos]
        elif attrs.reduction == "mul":
            out[target] *= upd[pos]
        elif attrs.reduction == "max":
            out[target] = np.maximum(out[target], upd[pos])
        elif attrs.reduction == "min":
            out[target] = np.minimum(out[target], upd[pos])
        else:
            out[target] = upd[pos]
    return [out]


_def("_onnx_scatter_nd", _scatter_nd,
     [Param("reduction", choice("none", "add", "mul", "max", "min"), "none")],
     arguments=("data", "indices", "updates"), probe="fif", doc="ONNX ScatterND.")


def _depth_to_space(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    n, c, h, w = x.shape
    b = attrs.blocksize
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (b * b), h * b, w * b).copy()]


_def("_onnx_depth_to_space", _depth_to_space,
     [Param("blocksize", parse_positive_int), Param("mode", choice("DCR", "CRD"), "DCR")],
     doc="ONNX DepthToSpace.")


def _space_to_depth(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    n, c, h, w = x.shape
    b = attrs.blocksize
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b).copy()]


_def("_onnx_space_to_depth", _space_to_depth, [Param("blocksize", parse_positive_int)],
     doc="ONNX SpaceToDepth.")


def _trilu(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    return [(np.triu(x, attrs.k) if attrs.upper else np.tril(x, attrs.k)).astype(x.dtype)]


_def("_onnx_trilu", _trilu, [Param("upper", parse_bool, True), Param("k", parse_int, 0)],
     doc="ONNX Trilu.")


def _eye_like(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    dtype = attrs.dtype or x.dtype
    return [np.eye(x.shape[0], x.shape[1], k=attrs.k, dtype=dtype)]


_def("_onnx_eye_like", _eye_like, [Param("k", parse_int, 0),
                                   Param("dtype", optional(_parse_onnx_dtype), None)],
     dtype=lambda a, d: [a.dtype or d[0]], doc="ONNX EyeLike.")

# ---- reductions, index functions ------------------------------------------------------------

_REDUCE = {
    "sum": lambda x, ax, k: np.sum(x, axis=ax, keepdims=k),
    "mean": lambda x, ax, k: np.mean(x, axis=ax, keepdims=k),
    "max": lambda x, ax, k: np.max(x, axis=ax, keepdims=k),
    "min": lambda x, ax, k: np.min(x, axis=ax, keepdims=k),
    "prod": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "l1": lambda x, ax, k: np.sum(np.abs(x), axis=ax, keepdims=k),
    "l2": lambda x, ax, k: np.sqrt(np.sum(np.square(x), axis=ax, keepdims=k)),
    "log_sum": lambda x, ax, k: np.log(np.sum(x, axis=ax, keepdims=k)),
    "log_sum_exp": lambda x, ax, k: np.log(np.sum(np.exp(x), axis=ax, keepdims=k)),
    "sum_square": lambda x, ax, k: np.sum(np.square(x), axis=ax, keepdims=k),
}


def _reduce(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if not attrs.axes and attrs.noop_with_empty_axes:
        return [x.copy()]
    axes = (tuple(normalize_axis("_onnx_reduce", a, x.ndim) for a in attrs.axes)
            if attrs.axes else None)
    if x.size == 0 and attrs.fn in ("max", "min"):
        shape = [1 if axes is None or i in axes else d for i, d in enumerate(x.shape)]
        if not attrs.keepdims:
            shape = [d for i, d in enumerate(x.shape) if not (axes is None or i in axes)]
        fill = -np.inf if attrs.fn == "max" else np.inf
        if x.dtype == np.bool_:
            fill = attrs.fn == "min"
        elif np.issubdtype(x.dtype, np.integer):
            info = np.iinfo(x.dtype)
            fill = info.min if attrs.fn == "max" else info.max
        return [np.full(shape, fill, dtype=x.dtype)]
    with np.errstate(all="ignore"):
        out = _REDUCE[attrs.fn](x, axes, bool(attrs.keepdims))
    return [np.asarray(out).astype(x.dtype)]


_def("_onnx_reduce", _reduce,
     [Param("fn", choice(*_REDUCE)), Param("axes", parse_tuple, ()),
      Param("keepdims", parse_bool, True), Param("noop_with_empty_axes", parse_bool, False)],
     doc="ONNX ReduceX (empty axes: all, or nothing with noop_with_empty_axes).")


def _arg(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_arg", attrs.axis, x.ndim)
    fn = np.argmax if attrs.fn == "max" else np.argmin
    if attrs.select_last_index:
        flipped = np.flip(x, axis)
        out = x.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        out = fn(x, axis=axis)
    if attrs.keepdims:
        out = np.expand_dims(out, axis)
    return [np.asarray(out, dtype=np.int64)]


_def("_onnx_arg", _arg, [Param("fn", choice("max", "min")), Param("axis", parse_int, 0),
                         Param("keepdims", parse_bool, True),
                         Param("select_last_index", parse_bool, False)],
     dtype=_fixed(np.int64), needs=(), doc="ONNX ArgMax/ArgMin with int64 indices.")


def _cumsum(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_cumsum", attrs.axis, x.ndim)
    if attrs.reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs.exclusive:
        out = np.roll(out, 1, axis=axis)
        index: list[slice | int] = [slice(None)] * x.ndim
        index[axis] = 0
        out[tuple(index)] = 0
    if attrs.reverse:
        out = np.flip(out, axis)
    return [out.copy()]


_def("_onnx_cumsum", _cumsum, [Param("axis", parse_int), Param("exclusive", parse_bool, False),
                               Param("reverse", parse_bool, False)], doc="ONNX CumSum.")


def _topk(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_topk", attrs.axis, x.ndim)
    if attrs.largest:
        key = (np.iinfo(x.dtype).max - x) if np.issubdtype(x.dtype, np.unsignedinteger) else -x
    else:
        key = x
    order = np.argsort(key, axis=axis, kind="stable")
    idx = np.take(order, np.arange(attrs.k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


register(OpDef(name="_onnx_topk", compute=_topk,
               params=(Param("k", parse_int), Param("axis", parse_int, -1),
                       Param("largest", parse_bool, True), Param("sorted", parse_bool, True)),
               outputs=("values", "indices"), infer_shape=_probe_shape("_onnx_topk", _topk),
               infer_type=lambda a, d: (list(d), [d[0] or np.dtype(np.float32),
                                                  np.dtype(np.int64)]),
               doc="ONNX TopK (ties broken by the lower index)."))

# ---- neural network -------------------------------------------------------------------------


def _softmax(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    shape = x.shape
    if attrs.legacy:  # opset < 13: coerce to 2-D at axis
        axis = attrs.axis % max(x.ndim, 1)
        x = x.reshape(int(np.prod(shape[:axis], dtype=np.int64)), -1)
        axis = 1
    else:
        axis = attrs.axis
    if attrs.fn == "hardmax":
        out = np.zeros_like(x)
        np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    else:
        shifted = x - np.max(x, axis=axis, keepdims=True)
        if attrs.fn == "log_softmax":
            out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        else:
            e = np.exp(shifted)
            out = e / np.sum(e, axis=axis, keepdims=True)
    return [out.reshape(shape).astype(inputs[0].dtype)]


_def("_onnx_softmax", _softmax,
     [Param("fn", choice("softmax", "log_softmax", "hardmax")), Param("axis", parse_int, -1),
      Param("legacy", parse_bool, False)],
     doc="ONNX Softmax/LogSoftmax/Hardmax; legacy: the opset < 13 2-D coercion.")


def _gemm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    a, b = inputs[0], inputs[1]
    if attrs.trans_a:
        a = a.T
    if attrs.trans_b:
        b = b.T
    out = attrs.alpha * (a @ b)
    if len(inputs) > 2:
        out = out + attrs.beta * inputs[2]
    return [np.asarray(out, dtype=inputs[0].dtype)]


_def("_onnx_gemm", _gemm,
     [Param("alpha", parse_float, 1.0), Param("beta", parse_float, 1.0),
      Param("trans_a", parse_bool, False), Param("trans_b", parse_bool, False),
      Param("has_c", parse_bool, True)],
     arguments=lambda a: ("a", "b", "c") if a.has_c else ("a", "b"), doc="ONNX Gemm.")


def _matmul(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(np.matmul(inputs[0], inputs[1]), dtype=inputs[0].dtype)]


def _matmul_shape(attrs: Attrs, shapes: list) -> tuple[list, list]:
    """numpy matmul's output shape: 1-D operands promoted (and the added
    axis dropped), the batch axes broadcast, the inner extents equal. A
    rule rather than a run on zeros: a transformer's attention products
    at a probe batch are hundreds of MFLOPs each."""
    for position, shape in enumerate(shapes):
        if shape is None:
            raise ShapeUnknownError(f"_onnx_matmul: the shape of input {position} is unknown")
    a, b = (tuple(int(d) for d in shape) for shape in shapes)
    if not a or not b:
        raise ShapeError(f"_onnx_matmul: a 0-d operand (shapes {a} and {b})")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(f"_onnx_matmul: shapes {a} and {b} do not match: inner extents "
                         f"{a2[-1]} and {b2[-2]}")
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError as error:
        raise ShapeError(f"_onnx_matmul: shapes {a} and {b}: {error}") from None
    out = (*batch, *((a2[-2],) if len(a) > 1 else ()), *((b2[-1],) if len(b) > 1 else ()))
    return list(shapes), [tuple(int(d) for d in out)]


_def("_onnx_matmul", _matmul, arguments=("a", "b"), doc="numpy matmul semantics (ONNX "
     "MatMul).", infer_shape=_matmul_shape)


def _lrn(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    c = x.shape[1]
    sq = np.square(x)
    total = np.zeros_like(x)
    lo, hi = (attrs.size - 1) // 2, attrs.size - 1 - (attrs.size - 1) // 2
    for i in range(c):
        start, end = max(0, i - lo), min(c - 1, i + hi) + 1
        total[:, i] = sq[:, start:end].sum(axis=1)
    return [(x / (attrs.bias + attrs.alpha / attrs.size * total) ** attrs.beta).astype(x.dtype)]


_def("_onnx_lrn", _lrn, [Param("size", parse_count), Param("alpha", parse_float, 1e-4),
                         Param("beta", parse_float, 0.75), Param("bias", parse_float, 1.0)],
     doc="ONNX LRN (across channels, window floor((size-1)/2) before and the rest after).")


def _mvn(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axes = tuple(attrs.axes)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return [((x - mean) / (np.sqrt(var) + 1e-9)).astype(x.dtype)]


_def("_onnx_mvn", _mvn, [Param("axes", parse_tuple, (0, 2, 3))],
     doc="ONNX MeanVarianceNormalization.")


def parse_scales(text: str) -> tuple[float, ...]:
    """Resize scales: finite numbers, none negative."""
    scales = tuple(float(value) for value in parse_float_tuple(text))
    if not all(np.isfinite(scale) and scale >= 0 for scale in scales):
        raise ValueError(f"expected finite scales of 0 or more, got {text!r}")
    return scales


def _resize_nearest(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Nearest-neighbour resize with asymmetric coordinates and floor
    (Upsample's semantics)."""
    x = inputs[0]
    if len(attrs.scales) > x.ndim:
        raise ShapeError(f"_onnx_upsample_nearest: {len(attrs.scales)} scales for data of "
                         f"shape {x.shape}")
    sizes = [int(np.floor(n * scale)) for n, scale in zip(x.shape, attrs.scales)]
    out_shape = tuple(sizes) + x.shape[len(sizes):]
    check_bytes(array_bytes(out_shape, x.dtype),
                f"_onnx_upsample_nearest: the result of shape {out_shape}")
    out = x
    for axis, scale in enumerate(attrs.scales):
        n, size = x.shape[axis], sizes[axis]
        idx = np.minimum(np.floor(np.arange(size) / scale).astype(np.int64), n - 1)
        out = np.take(out, idx, axis=axis)
    return [out.copy()]


_def("_onnx_upsample_nearest", _resize_nearest, [Param("scales", parse_scales)],
     doc="ONNX Upsample (nearest, asymmetric coordinates, floor).")


__all__: list[str] = []


# ---- more ONNX operators --------------------------------------------------------------------

_def("_onnx_cast_like", lambda a, i: [i[0].astype(i[1].dtype)], arguments=("data", "like"),
     dtype=lambda a, d: [d[1]], needs=(1,),
     doc="ONNX CastLike: data cast to the dtype of like.")


def _layer_norm3(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_norm", attrs.axis, x.ndim)
    axes = tuple(range(axis, x.ndim))
    xf = x.astype(np.float32) if x.dtype != np.float64 else x
    mean = xf.mean(axis=axes, keepdims=True)
    var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + attrs.eps)
    out = (xf - mean) * inv
    if attrs.rms:
        inv = 1 / np.sqrt((xf ** 2).mean(axis=axes, keepdims=True) + attrs.eps)
        out = xf * inv
    out = out * inputs[1]
    if len(inputs) > 2:
        out = out + inputs[2]
    return [out.astype(x.dtype), mean.astype(xf.dtype), inv.astype(xf.dtype)]


register(OpDef(name="_onnx_norm", compute=_layer_norm3,
               params=(Param("axis", parse_int, -1), Param("eps", parse_float, 1e-5),
                       Param("has_bias", parse_bool, True), Param("rms", parse_bool, False)),
               arguments=lambda a: ("data", "gamma", "beta") if a.has_bias else ("data",
                                                                                 "gamma"),
               outputs=("output", "mean", "inv_std_dev"),
               infer_shape=_probe_shape("_onnx_norm", _layer_norm3),
               infer_type=lambda a, d: (list(d), [d[0] or np.dtype(np.float32),
                                                  np.dtype(np.float64 if d[0] == np.float64
                                                           else np.float32)] * 1
                                        + [np.dtype(np.float64 if d[0] == np.float64
                                                    else np.float32)]),
               doc="ONNX LayerNormalization (with its Mean and InvStdDev outputs) and "
                   "RMSNormalization (rms=True) over axes axis..-1."))


def _cumprod(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    axis = normalize_axis("_onnx_cumprod", attrs.axis, x.ndim)
    if attrs.reverse:
        x = np.flip(x, axis)
    out = np.cumprod(x, axis=axis, dtype=x.dtype)
    if attrs.exclusive:
        out = np.roll(out, 1, axis=axis)
        index: list[slice | int] = [slice(None)] * x.ndim
        index[axis] = 0
        out[tuple(index)] = 1
    if attrs.reverse:
        out = np.flip(out, axis)
    return [out.copy()]


_def("_onnx_cumprod", _cumprod, [Param("axis", parse_int), Param("exclusive", parse_bool,
                                                                  False),
                                 Param("reverse", parse_bool, False)], doc="ONNX CumProd.")


def _einsum(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(np.einsum(attrs.equation, *inputs), dtype=inputs[0].dtype)]


_def("_onnx_einsum", _einsum, [Param("equation", parse_str), _NUM_ARGS], arguments=_variadic,
     doc="ONNX Einsum.")


def _lp_norm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    if attrs.p == 1:
        norm = np.sum(np.abs(x), axis=attrs.axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(np.square(x), axis=attrs.axis, keepdims=True))
    with np.errstate(all="ignore"):
        return [np.where(norm == 0, 0, x / norm).astype(x.dtype)]


_def("_onnx_lp_norm", _lp_norm, [Param("axis", parse_int, -1), Param("p", parse_int, 2)],
     doc="ONNX LpNormalization (p 1 or 2).")


def _one_hot(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    idx, values = inputs
    depth = attrs.depth
    idx = idx.astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = (np.arange(depth) == idx[..., None])
    axis = attrs.axis % (idx.ndim + 1)
    hot = np.moveaxis(hot, -1, axis)
    return [np.where(hot, values[1], values[0]).astype(values.dtype)]


_def("_onnx_one_hot", _one_hot, [Param("depth", parse_int), Param("axis", parse_int, -1)],
     arguments=("indices", "values"), probe="if", dtype=lambda a, d: [d[1]], needs=(1,),
     doc="ONNX OneHot (off/on values from values).")


def _nll(attrs: Attrs, inputs: list[np.ndarray], op: str = "_onnx_nll_loss") -> list[np.ndarray]:
    """ONNX NegativeLogLikelihoodLoss; op names the operator in errors
    (SoftmaxCrossEntropyLoss computes through it)."""
    x, target = inputs[0], inputs[1].astype(np.int64)
    weight = inputs[2] if len(inputs) > 2 else None
    c = x.shape[1]
    safe = np.where(target == attrs.ignore_index, 0, target)
    bad = (safe < 0) | (safe >= c)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise OperatorError(f"{op}: target {int(safe[where])} at position {where} is "
                            f"not a class index below {c} (nor the ignore_index)")
    picked = -np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
    w = np.ones_like(picked) if weight is None else weight[safe].astype(x.dtype)
    w = np.where(target == attrs.ignore_index, 0, w).astype(x.dtype)
    loss = picked * w
    del c
    if attrs.reduction == "none":
        return [loss.astype(x.dtype)]
    if attrs.reduction == "sum":
        return [np.array(loss.sum(), dtype=x.dtype)]
    return [np.array(loss.sum() / w.sum(), dtype=x.dtype)]


_def("_onnx_nll_loss", _nll,
     [Param("reduction", choice("none", "sum", "mean"), "mean"),
      Param("ignore_index", parse_int, -(2 ** 62)), Param("has_weight", parse_bool, False)],
     arguments=lambda a: ("data", "target", "weight") if a.has_weight else ("data", "target"),
     probe="fif", doc="ONNX NegativeLogLikelihoodLoss.")


def _sce(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    shifted = x - x.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = _nll(attrs, [log_prob.astype(x.dtype)] + list(inputs[1:]),
                "_onnx_softmax_cross_entropy")[0]
    return [loss, log_prob.astype(x.dtype)]


register(OpDef(name="_onnx_softmax_cross_entropy", compute=_sce,
               params=(Param("reduction", choice("none", "sum", "mean"), "mean"),
                       Param("ignore_index", parse_int, -(2 ** 62)),
                       Param("has_weight", parse_bool, False)),
               arguments=lambda a: ("data", "target", "weight") if a.has_weight
               else ("data", "target"), outputs=("output", "log_prob"),
               infer_shape=_probe_shape("_onnx_softmax_cross_entropy", _sce, "fif"),
               infer_type=lambda a, d: (list(d), [d[0] or np.dtype(np.float32)] * 2),
               doc="ONNX SoftmaxCrossEntropyLoss (and its log_prob output)."))


def _pool(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """ONNX MaxPool / AveragePool / LpPool: dilations, asymmetric pads,
    ceil_mode (a last window starting in the end padding is dropped)."""
    x = inputs[0]
    n = len(attrs.kernel)
    spatial = x.shape[2:]
    strides = attrs.stride or (1,) * n
    dilations = attrs.dilate or (1,) * n
    pads = attrs.pads or (0,) * (2 * n)
    out_sizes = []
    for i in range(n):
        span = (attrs.kernel[i] - 1) * dilations[i] + 1
        total = spatial[i] + pads[i] + pads[i + n] - span
        size = (-(-total // strides[i]) if attrs.ceil_mode else total // strides[i]) + 1
        if attrs.ceil_mode and (size - 1) * strides[i] >= spatial[i] + pads[i]:
            size -= 1
        out_sizes.append(size)
    fill = -np.inf if attrs.pool_type == "max" else 0.0
    width = [(0, 0), (0, 0)] + [(pads[i], pads[i + n] + attrs.kernel[i] * dilations[i]
                                 + strides[i]) for i in range(n)]
    work = x.astype(np.float64)
    padded = np.pad(work, width, constant_values=fill)
    valid = np.pad(np.ones(spatial), width[2:], constant_values=0.0)
    inside = np.pad(np.ones([spatial[i] + pads[i] + pads[i + n] for i in range(n)]),
                    [(0, attrs.kernel[i] * dilations[i] + strides[i]) for i in range(n)],
                    constant_values=0.0)
    out = np.zeros(x.shape[:2] + tuple(out_sizes))
    for index in np.ndindex(*out_sizes):
        sl = tuple(slice(index[i] * strides[i],
                         index[i] * strides[i] + (attrs.kernel[i] - 1) * dilations[i] + 1,
                         dilations[i]) for i in range(n))
        window = padded[(slice(None), slice(None)) + sl]
        flat = window.reshape(window.shape[:2] + (-1,))
        if attrs.pool_type == "max":
            out[(slice(None), slice(None)) + index] = flat.max(axis=-1)
        elif attrs.pool_type == "lp":
            out[(slice(None), slice(None)) + index] = np.sum(
                np.abs(flat) ** attrs.p, axis=-1) ** (1.0 / attrs.p)
        else:
            count = (inside[sl] if attrs.count_include_pad else valid[sl]).sum()
            out[(slice(None), slice(None)) + index] = flat.sum(axis=-1) / max(count, 1)
    return [out.astype(x.dtype)]


_def("_onnx_pool", _pool,
     [Param("kernel", parse_tuple), Param("pool_type", choice("max", "avg", "lp")),
      Param("stride", parse_tuple, ()), Param("dilate", parse_tuple, ()),
      Param("pads", parse_tuple, ()), Param("ceil_mode", parse_bool, False),
      Param("count_include_pad", parse_bool, False), Param("p", parse_int, 2)],
     doc="ONNX pooling where MXNet's Pooling differs: dilations, LpPool, ceil_mode "
         "dropping a last window that starts in the padding.")


def _group_norm(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, scale, bias = inputs
    n, c = x.shape[:2]
    g = attrs.num_groups
    xf = x.reshape(n, g, -1).astype(np.float64)
    mean = xf.mean(axis=-1, keepdims=True)
    var = xf.var(axis=-1, keepdims=True)
    y = ((xf - mean) / np.sqrt(var + attrs.eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return [(y * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype)]


_def("_onnx_group_norm", _group_norm, [Param("num_groups", parse_int),
                                       Param("eps", parse_float, 1e-5)],
     arguments=("data", "gamma", "beta"), doc="ONNX GroupNormalization (opset 21 form: "
     "per-channel scale and bias).")

def _det(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    # numpy's linalg has no float16 kernels: compute in float32, as ONNX
    # runtimes do, and return the input's dtype.
    wide = x.astype(np.float32) if x.dtype == np.float16 else x
    return [np.asarray(np.linalg.det(wide), dtype=x.dtype)]


_def("_onnx_det", _det,
     doc="ONNX Det (batched determinant).")


def _reverse_sequence(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, lengths = inputs
    out = x.copy()
    for b, length in enumerate(lengths.astype(np.int64)):
        src: list[slice | int] = [slice(None)] * x.ndim
        src[attrs.batch_axis] = b
        src[attrs.time_axis] = slice(0, length)
        dst = list(src)
        dst[attrs.time_axis] = slice(length - 1, None, -1) if length else slice(0, 0)
        out[tuple(src)] = x[tuple(dst)]
    return [out]


_def("_onnx_reverse_sequence", _reverse_sequence,
     [Param("batch_axis", parse_int, 1), Param("time_axis", parse_int, 0)],
     arguments=("data", "lengths"), probe="fi", doc="ONNX ReverseSequence.")


def _resize_coords(out_size: int, in_size: int, scale: float, mode: str,
                   roi: tuple[float, float]) -> np.ndarray:
    x = np.arange(out_size, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_size / (scale * in_size)
        center = in_size / 2
        offset = center * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_size > 1 else np.zeros_like(x)
    if mode == "align_corners":
        length = in_size * scale  # the unrounded resized length, as the ONNX reference
        return x * (in_size - 1) / (length - 1) if length > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if out_size > 1:
            return start * (in_size - 1) + x * (end - start) * (in_size - 1) / (out_size - 1)
        return np.full_like(x, 0.5 * (start + end) * (in_size - 1))
    raise ValueError(f"coordinate_transformation_mode {mode!r}")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    def kernel(d: np.ndarray) -> np.ndarray:
        d = np.abs(d)
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
    return np.stack([kernel(t + 1), kernel(t), kernel(1 - t), kernel(2 - t)], axis=-1)


def _resize_axis(x: np.ndarray, axis: int, out_size: int, scale: float, attrs: Attrs,
                 roi: tuple[float, float]) -> np.ndarray:
    in_size = x.shape[axis]
    coords = _resize_coords(out_size, in_size, scale, attrs.coordinate_transformation_mode,
                            roi)
    outside = (coords < 0) | (coords > in_size - 1)
    moved = np.moveaxis(x, axis, -1).astype(np.float64)
    if attrs.mode == "nearest":
        roundings: dict[str, Callable[[np.ndarray], np.ndarray]] = {
            "round_prefer_floor": lambda c: np.where(c % 1 == 0.5, np.floor(c), np.round(c)),
            "round_prefer_ceil": lambda c: np.where(c % 1 == 0.5, np.ceil(c), np.round(c)),
            "floor": np.floor, "ceil": np.ceil}
        rounding = roundings[attrs.nearest_mode]
        index = np.clip(rounding(coords).astype(np.int64), 0, in_size - 1)
        out = moved[..., index]
    else:
        base = np.floor(coords).astype(np.int64)
        t = coords - base
        if attrs.mode == "linear":
            offsets = np.array([0, 1])
            weights = np.stack([1 - t, t], axis=-1)
        else:
            offsets = np.array([-1, 0, 1, 2])
            weights = _cubic_weights(t, attrs.cubic_coeff_a)
        index = base[:, None] + offsets[None, :]
        if attrs.exclude_outside:
            weights = np.where((index < 0) | (index >= in_size), 0.0, weights)
            weights = weights / weights.sum(axis=-1, keepdims=True)
        index = np.clip(index, 0, in_size - 1)
        out = (moved[..., index] * weights).sum(axis=-1)
    if attrs.coordinate_transformation_mode == "tf_crop_and_resize":
        out = np.where(outside, attrs.extrapolation_value, out)
    return np.moveaxis(out, -1, axis)


def _resize(attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x = inputs[0]
    out = x
    roi = attrs.roi or (0.0,) * x.ndim + (1.0,) * x.ndim
    for axis in range(x.ndim):
        size = attrs.sizes[axis]
        scale = attrs.scales[axis]
        if size == x.shape[axis] and scale == 1.0 and \
                attrs.coordinate_transformation_mode != "tf_crop_and_resize":
            continue
        out = _resize_axis(out, axis, size, scale, attrs, (roi[axis], roi[axis + x.ndim]))
    if np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        out = np.clip(np.round(out), info.min, info.max)
    return [np.asarray(out).astype(x.dtype)]


_def("_onnx_resize", _resize,
     [Param("sizes", parse_tuple), Param("scales", parse_scales),
      Param("mode", choice("nearest", "linear", "cubic"), "nearest"),
      Param("coordinate_transformation_mode", parse_str, "half_pixel"),
      Param("nearest_mode", choice("round_prefer_floor", "round_prefer_ceil", "floor",
                                   "ceil"), "round_prefer_floor"),
      Param("cubic_coeff_a", parse_float, -0.75), Param("exclude_outside", parse_bool, False),
      Param("extrapolation_value", parse_float, 0.0),
      Param("roi", lambda t: tuple(parse_float_tuple(t)), ())],
     doc="ONNX Resize (nearest/linear/cubic, separable over the axes, every coordinate "
         "transformation mode; no antialias). sizes and scales are per axis, resolved at "
         "import time.")
