"""The operator registry: what every operator is, in one place.

An :class:`OpDef` holds, after MXNet's OperatorProperty: the operator's
attributes with MXNet's defaults, its argument / auxiliary-state / output
names, shape and dtype inference, in-place options, and a numpy
implementation with MXNet 1.x semantics (the host's CPU path and the
definition plugins are tested against). Adding an operator is one
``register(OpDef(...))`` call.

Conventions for the functions an OpDef holds:

* ``infer_shape(attrs, in_shapes)`` receives one entry per input (arguments
  then auxiliary states), each a shape tuple or None when unknown (weights
  before binding). It returns ``(in_shapes, out_shapes)`` with every input
  shape filled in, or raises ShapeError naming the problem.
* ``infer_type(attrs, in_dtypes)`` is the same for numpy dtypes.
* ``compute(attrs, inputs)`` receives numpy arrays in input order and returns
  the list of visible outputs as new arrays.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import (
    AccHostError,
    AllocationTooLargeError,
    OperatorError,
    OperatorInternalError,
    RankError,
    ShapeError,
    UnknownOperatorError,
)
from ..limits import MAX_DIMS
from .params import REQUIRED, Attrs, Param, format_value

__all__ = ["OpDef", "register", "get", "find", "all_ops", "Shape", "same_dtype",
           "same_shape", "require_known", "normalize_axis", "ShapeUnknownError",
           "describe_inputs"]

Shape = tuple[int, ...]
Names = Sequence[str] | Callable[[Attrs], Sequence[str]]
ShapeFn = Callable[[Attrs, list[Shape | None]], tuple[Sequence[Shape | None], Sequence[Shape]]]
TypeFn = Callable[[Attrs, list[np.dtype | None]],
                  tuple[Sequence[np.dtype | None], Sequence[np.dtype]]]
ComputeFn = Callable[[Attrs, list[np.ndarray]], list[np.ndarray]]

# Attributes MXNet operators accept to tune their own implementations; they
# never change a result, so every operator ignores them.
TUNING_ATTRS = frozenset({"workspace", "cudnn_tune", "cudnn_off", "min_calib_range",
                          "max_calib_range", "ctx_group"})


class ShapeUnknownError(ShapeError):
    """Raised by infer_shape when an input it needs is still unknown: graph
    inference retries the operator once more shapes are known, and reports
    the error only if they never are."""


def same_dtype(attrs: Attrs, dtypes: list[np.dtype | None]) -> tuple[list[np.dtype],
                                                                      list[np.dtype]]:
    """Every input and the output share the first known dtype (float32 when
    none is known)."""
    known = next((dtype for dtype in dtypes if dtype is not None), np.dtype(np.float32))
    return [known if dtype is None else dtype for dtype in dtypes], [known]


def require_known(op: str, shapes: Sequence[Shape | None], index: int, name: str) -> Shape:
    """The shape of input index, or a ShapeError saying it is unknown."""
    shape = shapes[index]
    if shape is None:
        raise ShapeUnknownError(f"{op}: the shape of input {name!r} is unknown")
    return shape


def same_shape(op: str) -> ShapeFn:
    """Shape inference for element-wise operators: every input has one shape,
    and so has the output."""
    def infer(attrs: Attrs, shapes: list[Shape | None]) -> tuple[list[Shape | None],
                                                                list[Shape]]:
        known = [shape for shape in shapes if shape is not None]
        if not known:
            raise ShapeUnknownError(f"{op}: no input shape is known")
        if any(shape != known[0] for shape in known):
            raise ShapeError(f"{op}: input shapes differ: {', '.join(map(str, known))}")
        return [known[0]] * len(shapes), [known[0]]
    return infer


def describe_inputs(names: Sequence[str], specs: Sequence[tuple[Any, Any]]) -> str:
    """"data (4,) float32, weight (3, 4) float32": the inputs of a call, for
    messages (names past the operator's own are numbered)."""
    parts = []
    for index, (shape, dtype) in enumerate(specs):
        name = names[index] if index < len(names) else f"input {index}"
        shown_dtype = "?" if dtype is None else np.dtype(dtype).name
        parts.append(f"{name} {'?' if shape is None else tuple(shape)} {shown_dtype}")
    return ", ".join(parts) or "no inputs"


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    """axis in [-ndim, ndim) as a non-negative index, else ShapeError (an
    axis that is not an integer too: a tuple attribute's entries may be None)."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"{op}: axis {axis!r} is not an integer")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim




def take(op: str, data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """np.take(data, indices, axis) for operators, refusing a result of more
    than MAX_DIMS dimensions with a ShapeError: numpy does not check it and
    writes past its shape array (a segmentation fault; found by fuzzing)."""
    ndim = data.ndim + indices.ndim - 1
    if ndim > MAX_DIMS:
        raise RankError(f"{op}: the result would have {ndim} dimensions (data {data.ndim} + "
                         f"indices {indices.ndim} - 1); arrays have at most {MAX_DIMS}")
    return np.take(data, indices, axis=axis)


@dataclass(frozen=True)
class OpDef:
    name: str
    compute: ComputeFn
    infer_shape: ShapeFn
    params: tuple[Param, ...] = ()
    arguments: Names = ("data",)
    aux_states: Names = ()
    outputs: Names = ("output",)
    infer_type: TypeFn = same_dtype
    inplace: tuple[tuple[int, int], ...] = ()
    aliases: tuple[str, ...] = ()
    version: int = 1
    # All outputs, hidden ones included (BatchNorm's saved mean and variance,
    # Dropout's mask): what MXNet's node_row_ptr counts. None: the visible ones.
    num_outputs: int | Callable[[Attrs], int] | None = None
    doc: str = ""
    # Dynamic-shape operators (acc_host.ops.dynamic_ops): the inputs whose
    # values (not only shapes) decide the output shape (from the first of
    # them on), and resolve(attrs, data input shapes, values) -> (static
    # operator name, its attributes) or a numpy array (the whole result).
    # Graph inference works such values out at bind time (acc_host.graph.
    # dynamic) and binds the static operator in the node's place.
    value_inputs: tuple[int, ...] = ()
    resolve: Callable[[Attrs, list[Any], list[np.ndarray]], Any] | None = None
    # The output shape depends on input data (NonZero): known only once run.
    data_dependent: bool = False
    _params_by_name: dict[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_params_by_name", {param.name: param for param in self.params})

    def parse(self, raw: Mapping[str, Any]) -> Attrs:
        """Attributes from MXNet strings (other values are converted with
        format_value first), with defaults for the missing ones. Keys of the
        form "__*__" are annotations and are skipped."""
        strings = {key: value if isinstance(value, str) else format_value(value)
                   for key, value in raw.items() if not (key.startswith("__")
                                                        and key.endswith("__"))}
        values: dict[str, Any] = {}
        for key, text in strings.items():
            param = self._params_by_name.get(key)
            if param is None:
                if key in TUNING_ATTRS:
                    continue
                known = ", ".join(self._params_by_name) or "none"
                raise OperatorError(f"{self.name}: unknown attribute {key!r} (attributes: {known})")
            try:
                values[key] = param.parser(text)
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError) as error:
                raise OperatorError(f"{self.name}: attribute {key}={text!r}: {error}") from None
        for param in self.params:
            if param.name not in values:
                if param.default is REQUIRED:
                    raise OperatorError(f"{self.name}: attribute {param.name!r} is required")
                values[param.name] = param.default
        return Attrs(values, strings)

    def _names(self, names: Names, attrs: Attrs) -> list[str]:
        return list(names(attrs) if callable(names) else names)

    def argument_names(self, attrs: Attrs) -> list[str]:
        return self._names(self.arguments, attrs)

    def aux_names(self, attrs: Attrs) -> list[str]:
        return self._names(self.aux_states, attrs)

    def input_names(self, attrs: Attrs) -> list[str]:
        """Arguments, then auxiliary states: the order of a node's inputs."""
        return self.argument_names(attrs) + self.aux_names(attrs)

    def output_names(self, attrs: Attrs) -> list[str]:
        return self._names(self.outputs, attrs)

    def total_outputs(self, attrs: Attrs) -> int:
        """Outputs including hidden ones (see num_outputs)."""
        if self.num_outputs is None:
            return len(self.output_names(attrs))
        return self.num_outputs(attrs) if callable(self.num_outputs) else self.num_outputs

    def run(self, attrs: Attrs, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """compute() after checking the number of inputs."""
        expected = len(self.input_names(attrs))
        if len(inputs) != expected:
            raise OperatorError(f"{self.name}: {len(inputs)} inputs given, {expected} expected "
                                f"({', '.join(self.input_names(attrs))})")
        try:
            return self.compute(attrs, list(inputs))
        except AccHostError:
            raise
        except Exception as error:  # noqa: BLE001  (the safety net: typed, naming the op)
            raise self.internal_error(error, attrs, inputs) from error

    def internal_error(self, error: Exception, attrs: Attrs,
                       inputs: Sequence[Any]) -> AccHostError:
        """The typed error for an exception that is not an acc_host error,
        raised by this operator's inference or computation on inputs (arrays
        or (shape, dtype) pairs): a RankError for numpy's refusal of too
        many dimensions, an AllocationTooLargeError for a MemoryError, else
        an OperatorInternalError naming the operator and its inputs."""
        specs = [(value.shape, value.dtype) if hasattr(value, "shape") else value
                 for value in inputs]
        try:
            names = self.input_names(attrs)
        except Exception:  # noqa: BLE001  (names are only for the message)
            names = []
        where = f"{self.name} (inputs: {describe_inputs(names, specs)})"
        if isinstance(error, ValueError) and "maximum supported dimension" in str(error):
            return RankError(f"{where}: {error}")
        if isinstance(error, MemoryError):
            return AllocationTooLargeError(f"{where}: out of memory: {error}")
        return OperatorInternalError(f"{where}: {type(error).__name__}: {error}")


_REGISTRY: dict[str, OpDef] = {}


def _rank_checked(name: str, infer_shape: ShapeFn) -> ShapeFn:
    """infer_shape, refusing outputs of more dimensions than numpy arrays
    may have: a graph can declare them, and numpy would refuse them only
    when they are allocated (a ValueError), or not at all (np.take)."""
    def infer(attrs: Attrs, shapes: Any) -> Any:
        filled, outputs = infer_shape(attrs, shapes)
        for position, shape in enumerate(outputs):
            if shape is not None and len(shape) > MAX_DIMS:
                raise RankError(f"{name}: output {position} would have {len(shape)} "
                                 f"dimensions; arrays have at most {MAX_DIMS}")
        return filled, outputs
    return infer


def register(op: OpDef) -> OpDef:
    object.__setattr__(op, "infer_shape", _rank_checked(op.name, op.infer_shape))
    for name in (op.name, *op.aliases):
        if name in _REGISTRY:
            raise ValueError(f"operator {name!r} is registered twice")
        _REGISTRY[name] = op
    return op


_loaded = False


def _load_all() -> None:
    """Registers the built-in operators (their modules register on import);
    after the first time, a flag test (find() is on the imperative hot path)."""
    global _loaded
    if _loaded:
        return
    # Here, not at the top: the operator modules import this one to register.
    from . import (  # noqa: F401
        control_flow,
        dynamic_ops,
        nn,
        onnx_attention,
        onnx_bitcast,
        onnx_col2im,
        onnx_deform_conv,
        onnx_dft,
        onnx_linear_attention,
        onnx_nms,
        onnx_ops,
        onnx_quant,
        onnx_sampling,
        onnx_state,
        rnn,
        rnn_onnx,
        tensor,
    )
    _loaded = True


def find(name: str) -> OpDef | None:
    _load_all()
    return _REGISTRY.get(name)


def get(name: str) -> OpDef:
    op = find(name)
    if op is None:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOperatorError(f"unknown operator {name!r}{hint}")
    return op


def all_ops() -> dict[str, OpDef]:
    """Every registered name (aliases included) -> its OpDef."""
    _load_all()
    return dict(_REGISTRY)
