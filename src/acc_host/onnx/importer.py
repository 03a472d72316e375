"""ONNX ModelProto -> (mx.sym Symbol, arg_params, aux_params).

The walk: initializers and Constant nodes are compile-time constants; graph
inputs that are not initializers become data variables (with their static
shapes as ``__shape__`` hints); every node is translated by the table in
:mod:`acc_host.onnx.translators`. A node whose inputs are all constants is
evaluated at import time with acc-host's own operators (constant folding),
so shape computations such as ``Shape -> Gather -> Concat -> Reshape`` of a
known shape become Reshape attributes. Every unsupported operator of the
model is reported in one :class:`UnsupportedOnnxOperatorError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from .. import limits
from .. import ndarray as nd
from .. import symbol as sym_mod
from ..abi.tensor import dtype_code
from ..context import cpu
from ..errors import (
    AccHostError,
    GraphError,
    InvalidArgumentError,
    ModelFileError,
    OperatorError,
    ShapeError,
    TensorError,
    UnsupportedOnnxOperatorError,
)
from ..graph.incremental import IncrementalShapes
from . import proto
from .proto import AttributeProto
from .translate_control import implicit_inputs
from .translators import TRANSLATORS, Translator, Unsupported, translator_for

DEFAULT_DOMAINS = ("", "ai.onnx")

#: The extents symbolic input dimensions take in Context.partial_shape's two
#: inferences (two primes no model fixes an extent to).
PROBE_EXTENTS = (61, 67)

#: Integer constants of at most this many elements (and scalars) carry their
#: value in a "__value__" attribute (see constant_variable).
VALUE_HINT_ELEMENTS = 16


@dataclass
class Imported:
    """What the backend needs beyond (sym, arg_params, aux_params)."""

    symbol: Any
    arg_params: dict
    aux_params: dict
    inputs: list[str]                     # data inputs, in graph order
    input_shapes: dict[str, tuple | None] = field(default_factory=dict)
    input_dtypes: dict[str, np.dtype] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    constant_outputs: dict[int, np.ndarray] = field(default_factory=dict)


def _load(model: Any) -> Any:
    """model (a path, a file object, the bytes of a file, or a ModelProto:
    acc_host.onnx.proto's or onnx's) as an acc_host.onnx.proto.ModelProto,
    read by acc_host.onnx.reader without the onnx package. A file that is
    not a valid ModelProto, or cannot be read, is a ModelFileError
    (ModelFileNotFoundError for a missing one)."""
    from .reader import read_model as _read

    return _read(model)


def index_graph(cx: Any, graph: Any, outputs_read: bool) -> None:
    """Fills a translation context (the top graph's or a body's) from an
    ONNX graph: its initializers' values, the names nodes and outputs
    consume, each output's producing node and each name's reader count
    (the graph's outputs counted as readers when outputs_read)."""
    for init in graph.initializer:
        cx.consts[init.name] = tensor_values(init)
    cx.consumed = {name for node in graph.node for name in node.input if name}
    cx.consumed.update(value.name for value in graph.output)
    for node in graph.node:
        cx.producers.update((name, node) for name in node.output if name)
        for name in node.input:
            if name:
                cx.readers[name] = cx.readers.get(name, 0) + 1
    if outputs_read:
        for value in graph.output:
            cx.readers[value.name] = cx.readers.get(value.name, 0) + 1


def tensor_values(tensor: Any, what: str = "initializer") -> np.ndarray:
    """A TensorProto's values; one whose declared dims and data disagree (or
    that cannot be read) is a ModelFileError naming it and its byte offset.
    Values in raw_data are a read-only view of the model's bytes: nothing
    is allocated beyond what the file holds."""
    label = f"ONNX {what} {tensor.name!r}" if tensor.name else f"an ONNX {what}"
    return proto.tensor_array(tensor, label)


def _tensor_type(value_info: Any) -> tuple[tuple | None, np.dtype | None]:
    if not value_info.type.HasField("tensor_type"):
        return None, None
    tensor_type = value_info.type.tensor_type
    dtype = None
    if tensor_type.elem_type:
        try:
            dtype = proto.np_dtype(tensor_type.elem_type)
        except (KeyError, TypeError, ValueError):
            dtype = None
    if not tensor_type.HasField("shape"):
        return None, dtype
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1
                 for d in tensor_type.shape.dim)
    return dims, dtype


def opsets_of(model: Any) -> dict[str, int]:
    opsets = {}
    for imp in model.opset_import:
        domain = "" if imp.domain in DEFAULT_DOMAINS else imp.domain
        opsets[domain] = imp.version
    return opsets


class Context:
    """State of one import, handed to the translators."""

    def __init__(self, opsets: dict[str, int]) -> None:
        self.opsets = opsets
        self.consts: dict[str, np.ndarray] = {}
        self.symbols: dict[str, Any] = {}
        self.shapes: dict[str, tuple] = {}
        self._count = 0
        self.node_name = "node"
        self.consumed: set[str] = set()
        self.dtypes: dict[str, np.dtype] = {}
        # the ONNX node computing each value, and how many node inputs read
        # each value (a graph output counts once): for translators that
        # recognise a pattern of several nodes (the erf form of GELU)
        self.producers: dict[str, Any] = {}
        self.readers: dict[str, int] = {}
        # MatMul outputs translated to FullyConnected(no_bias): value -> (data
        # symbol, transposed weight's name, width), for folding a bias Add into it
        self.linear: dict[str, tuple[Any, str, int]] = {}
        self.folded_bytes = 0  # constants made at import so far (see plan_constant)
        # shapes inferred so far, by probe extent (see _shapes_at)
        self._incremental: dict[int | None, IncrementalShapes] = {}

    def plan_constant(self, nbytes: int, what: str) -> None:
        """Checks, before it is made, a constant of nbytes that import-time
        folding makes: it is held with the constants folded before, and
        copied twice more on its way to a parameter (an NDArray, then the
        parameter's own array), so 3 x nbytes plus what was folded before
        must fit the memory limit (acc_host.limits)."""
        limits.check_bytes(
            self.folded_bytes + 3 * nbytes,
            f"{what}: folding it at import ({nbytes} bytes, held with its two copies on the "
            f"way to a parameter, after {self.folded_bytes} bytes of constants folded before)")

    def used(self, name: str) -> bool:
        """Whether a value is read by a node or is a graph output."""
        return bool(name) and name in self.consumed

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{self.node_name}_{hint}{self._count}"

    def op(self, op_name: str, *inputs: Any, **attrs: Any) -> Any:
        """A node of a host operator."""
        return sym_mod._create(op_name, inputs, attrs, name=self.name(op_name.strip("_")))

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def const(self, name: str) -> np.ndarray | None:
        return self.consts.get(name)

    def sym(self, name: str) -> Any:
        if name in self.symbols:
            return self.symbols[name]
        if name in self.consts:
            self.symbols[name] = constant_variable(name, self.consts[name])
            return self.symbols[name]
        raise Unsupported(f"input {name!r} is produced by no node")

    def dtype(self, name: str) -> np.dtype | None:
        """The dtype of a constant or graph input, when known."""
        if name in self.consts:
            return self.consts[name].dtype
        return self.dtypes.get(name)

    def infer_shape(self, name: str) -> tuple | None:
        """The shape of a computed value from the shapes known so far (the host's
        shape inference over the graph translated so far), or None."""
        symbol = self.symbols.get(name)
        if symbol is None:
            return None
        shape = self._shapes_at(None).shape(*symbol._outputs[0])
        return None if shape is None else tuple(int(d) for d in shape)

    def partial_shape(self, name: str) -> tuple | None:
        """The shape of a value with -1 for the extents that depend on
        symbolic input dimensions, or None when even the rank is unknown:
        for translators that need a rank or a fixed extent (MatMul as
        FullyConnected, LayerNorm over the last axis), never for folding.
        Found by inferring the graph so far at two probe extents for every
        symbolic input dimension: the extents that agree are fixed."""
        static = self.shape(name) or self.infer_shape(name)
        if static is not None:
            return static
        symbol = self.symbols.get(name)
        if symbol is None:
            declared = self.shapes.get(name)
            return None if declared is None else tuple(declared)
        results = [self._probe_shape(symbol, probe) for probe in PROBE_EXTENTS]
        if any(result is None for result in results) or \
                len({len(result) for result in results}) != 1:  # type: ignore[arg-type]
            return None
        return tuple(a if a == b else -1 for a, b in zip(*results))  # type: ignore[misc]

    def _probe_shape(self, symbol: Any, probe: int) -> tuple | None:
        shape = self._shapes_at(probe).shape(*symbol._outputs[0])
        return None if shape is None else tuple(int(d) for d in shape)

    def _shapes_at(self, probe: int | None) -> IncrementalShapes:
        """The shapes of the graph translated so far, with every symbolic
        input extent at probe (None: only the static shapes), each node
        inferred once however often translators ask (graph.incremental)."""
        shapes = self._incremental.get(probe)
        if shapes is None:
            def leaf_shape(name: str) -> tuple | None:
                shape = self.shape(name)
                if shape is None and probe is not None:
                    declared = self.shapes.get(name)
                    if declared is not None:
                        shape = tuple(probe if d < 0 else d for d in declared)
                return shape

            shapes = self._incremental[probe] = IncrementalShapes(leaf_shape, self.consts.get)
        return shapes

    def shape(self, name: str) -> tuple | None:
        """Static shape of a value, when known (constants, annotated values)."""
        if name in self.consts:
            return tuple(self.consts[name].shape)
        shape = self.shapes.get(name)
        if shape is not None and all(d >= 0 for d in shape):
            return shape
        return None


def constant_variable(name: str, value: np.ndarray) -> Any:
    """The variable of a constant (an initializer or a folded value), with its
    shape and dtype as "__shape__"/"__dtype__" hints, so that shape and dtype
    inference (``annotate_symbol``, a loaded model) need only the data
    inputs' shapes: a constant read by an operator that cannot infer it
    backwards (Gather's table, Concat's or Add's other operand) is known."""
    shape = tuple(int(d) for d in value.shape)
    hint = shape if shape and all(d > 0 for d in shape) else None
    try:
        dtype_code(value.dtype)
        dtype: np.dtype | None = value.dtype
    except TensorError:
        dtype = None  # no TensorDType (bool, 16-bit integers): the host path reads it
    if not shape and dtype is not None:
        hint = ()  # a scalar: "()" with a dtype (acc_host.graph's _shape_hint)
    variable = sym_mod.Variable(name, shape=hint, dtype=dtype)
    if dtype is not None and value.size <= VALUE_HINT_ELEMENTS and \
            (value.dtype.kind in "iu" or not shape):
        # A shape-sized constant (Gather's index of a shape, Concat's -1, a
        # scale) carries its value, so that the shape arithmetic reading it
        # is worked out at bind whatever the bound array holds yet
        # (simple_bind allocates zeros; acc_host.graph.dynamic).
        variable._outputs[0][0].attrs["__value__"] = json.dumps(value.tolist())
    return variable


def import_graph(model: Any, shapes: dict[str, tuple] | None = None,
                 frozen: dict[str, np.ndarray] | None = None,
                 input_shapes: Mapping[str, Sequence[Any]] | None = None) -> Imported:
    """The import; shapes overrides the declared shapes of graph inputs
    (pinning every dimension) and frozen turns graph inputs into constants.
    input_shapes (see import_model) gives shapes for inputs without
    pinning the dimensions the model declares symbolic."""
    requested = input_shapes or {}
    model = _load(model)
    graph = model.graph
    opsets = opsets_of(model)
    cx = Context(opsets)

    unsupported: list[tuple[str, str, int, str]] = []
    found: list[Translator | None] = []
    for node in graph.node:
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        opset = opsets.get(domain, 0)
        entry = translator_for(domain, node.op_type, opset)
        found.append(entry)
        if entry is None:
            key = (domain or "ai.onnx", node.op_type, opset)
            if key not in [u[:3] for u in unsupported]:
                unsupported.append((*key, "no translation"))
    if unsupported:
        _raise(unsupported)
    # Every node has a translator now (one per node, in graph order).
    translators = [entry for entry in found if entry is not None]

    index_graph(cx, graph, outputs_read=True)
    for name, value in (frozen or {}).items():
        cx.consts[name] = np.asarray(value)
    for init in graph.sparse_initializer:
        raise UnsupportedOnnxOperatorError(
            f"ONNX import: sparse initializer {init.values.name!r} is not supported")
    inputs: list[str] = []
    shapes_of: dict[str, tuple | None] = {}
    input_dtypes: dict[str, np.dtype] = {}
    dtype_problems: list[tuple[str, str, int, str]] = []
    for value in graph.input:
        if value.name in cx.consts:
            continue
        shape, dtype = _tensor_type(value)
        if shapes and value.name in shapes:
            shape = tuple(shapes[value.name])
        elif value.name in requested:
            shape = _merge_shape(value.name, shape, requested[value.name])
        if dtype is None:
            _raise([("ai.onnx", f"input {value.name} (non-tensor type)", opsets.get("", 0),
                     "only tensor inputs are supported")])
        inputs.append(value.name)
        shapes_of[value.name] = shape
        input_dtypes[value.name] = dtype
        cx.dtypes[value.name] = dtype
        # Symbolic (dim_param) and unknown dimensions stay unknown: 0 in the
        # "__shape__" hint, so the model binds at any extent there.
        hint = tuple(max(d, 0) for d in shape) if shape and any(d > 0 for d in shape) else None
        cx.symbols[value.name] = sym_mod.Variable(value.name, shape=hint)
        if shape is not None:
            cx.shapes[value.name] = shape
    for value in list(graph.value_info) + list(graph.output):
        shape, _ = _tensor_type(value)
        if shape is not None:
            cx.shapes.setdefault(value.name, shape)

    if dtype_problems:
        _raise(dtype_problems)
    problems = []
    dynamic: list[str] = []
    broken: set[str] = set()
    for index, node in enumerate(graph.node):
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        opset = opsets.get(domain, 0)
        if any(name in broken for name in node.input if name) or (
                broken and any(name in broken for name in implicit_inputs(node))):
            broken.update(node.output)  # (a body reading a broken outer value too)
            continue
        cx.node_name = f"{node.name or node.op_type}_{index}".replace(" ", "_")
        fn = translators[index]
        try:
            attrs = {attr.name: attr_value(attr) for attr in node.attribute}
            results = fn(cx, node, attrs, list(node.input), opset)
            _bind_outputs(cx, node, results)
        except Unsupported as error:
            problems.append((domain or "ai.onnx", node.op_type, opset, str(error)))
            if error.dynamic:
                dynamic.append(error.dynamic)
            broken.update(node.output)
        except (AccHostError, RecursionError):
            raise
        except _MALFORMED as error:
            # A malformed node (attributes of the wrong type or out of range,
            # inputs missing, constants the operator cannot take) that the
            # translator or the constant folding did not name itself.
            raise OperatorError(f"ONNX import: node {index} ({node.op_type} {node.name!r}) is "
                                f"malformed: {type(error).__name__}: {error}") from error
        except MemoryError as error:
            # Shapes so large (or so malformed) that inferring or folding the
            # node's value needs more memory than the process may take.
            raise OperatorError(f"ONNX import: node {index} ({node.op_type} {node.name!r}): "
                                f"its shapes need more memory than is available at import "
                                f"time: {error}") from None
    if problems:
        _raise(problems, dynamic)

    outputs = [value.name for value in graph.output]
    heads = []
    constant_outputs = {}
    for position, name in enumerate(outputs):
        if name in cx.consts and name not in cx.symbols:
            constant_outputs[position] = cx.consts[name]
            heads.append(cx.op("_copy", cx.sym(name)))
        elif name in inputs:
            heads.append(cx.op("_copy", cx.sym(name)))
        elif name in cx.symbols or name in cx.consts:
            heads.append(cx.sym(name))
        else:
            raise GraphError(f"ONNX import: graph output {position} ({name!r}) is produced by "
                             "no node, initializer or input")
    symbol = sym_mod.Group(heads)
    arg_names = set(symbol.list_arguments())
    aux_names = set(symbol.list_auxiliary_states())
    arg_params = {name: to_ndarray(value) for name, value in cx.consts.items()
                  if name in arg_names}
    aux_params = {name: to_ndarray(value) for name, value in cx.consts.items()
                  if name in aux_names}
    return Imported(symbol, arg_params, aux_params, inputs, shapes_of, input_dtypes,
                    outputs, constant_outputs)


# What a translator or the constant folding raises for a malformed node
# (numpy raises RuntimeError for more than 32 dimensions).
_MALFORMED = (ArithmeticError, AttributeError, IndexError, KeyError, RuntimeError, TypeError,
              ValueError)


def _bind_outputs(cx: Context, node: Any, results: list) -> None:
    """Records a translator's results: Symbols, or numpy arrays (constants).
    A node whose inputs are all constants is folded."""
    names = [name for name in node.output]
    inputs = [name for name in node.input if name]
    foldable = bool(inputs) and all(cx.is_const(name) for name in inputs)
    for position, name in enumerate(names):
        if not name or position >= len(results):
            continue
        value = results[position]
        if isinstance(value, np.ndarray):
            cx.consts[name] = value
            cx.folded_bytes += value.nbytes
        elif foldable and all(arg in cx.consts for arg in value.list_arguments()):
            # (a control-flow node's bodies may read values that are not
            # among its inputs, and not constant)
            cx.consts[name] = _evaluate(value, cx)
            cx.folded_bytes += cx.consts[name].nbytes
        else:
            cx.symbols[name] = value


def to_ndarray(value: np.ndarray, ctx: Any = None) -> Any:
    """An NDArray (on the CPU) holding value, for every dtype ONNX models use
    (bool and 16-bit integers included, which have no plugin TensorDType)."""
    value = np.asarray(value)
    limits.check_array(value.shape, value.dtype, "a constant")
    # one copy, of its own (a constant may be a read-only view of the
    # model's bytes, see _raw_values): the array takes it over
    return nd.NDArray(np.array(value, order="C", copy=True), ctx or cpu())


def _evaluate(symbol: Any, cx: Context) -> np.ndarray:
    """A symbol over constants, computed on the host CPU path."""
    args = {name: to_ndarray(cx.consts[name]) for name in symbol.list_arguments()}
    aux = {name: to_ndarray(cx.consts[name]) for name in symbol.list_auxiliary_states()}
    executor = symbol.bind(cpu(), args, aux_states=aux, data_names=[])
    try:
        return executor.forward()[0].asnumpy().copy()
    finally:
        executor.close()  # a failure is raised here, not left for a later waitall


def _merge_shape(name: str, declared: tuple | None, given: Any) -> tuple:
    """An input's shape from the shape given for it at import: its extents
    where the model declares a fixed one (or none), unknown (-1) where the
    model declares the dimension symbolic; None, 0 or -1 given: unknown."""
    try:
        extents = [-1 if d is None or int(d) <= 0 else int(d) for d in given]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"import_model: input_shapes[{name!r}] = {given!r} is not a "
                                   "tuple of integers") from None
    if declared is not None and len(declared) != len(extents):
        raise ShapeError(f"import_model: input_shapes[{name!r}] = {tuple(given)} has "
                         f"{len(extents)} dimensions; the model declares {len(declared)} "
                         f"({tuple(declared)})")
    if declared is None:
        return tuple(extents)
    return tuple(-1 if d < 0 else e for d, e in zip(declared, extents))


def attr_value(attr: Any) -> Any:
    """An attribute's value, by its type: numbers and lists of them as
    Python values, strings as text, a tensor as its numpy array, graphs
    and type protos as messages (what onnx.helper.get_attribute_value
    gives, with strings decoded and tensors read)."""
    kind = attr.type
    if kind == AttributeProto.FLOAT:
        return attr.f
    if kind == AttributeProto.INT:
        return attr.i
    if kind == AttributeProto.STRING:
        return _text(attr.s)
    if kind == AttributeProto.TENSOR:
        return tensor_values(attr.t, f"tensor attribute {attr.name!r}")
    if kind == AttributeProto.GRAPH:
        return attr.g
    if kind == AttributeProto.FLOATS:
        return list(attr.floats)
    if kind == AttributeProto.INTS:
        return list(attr.ints)
    if kind == AttributeProto.STRINGS:
        return [_text(value) for value in attr.strings]
    if kind == AttributeProto.TENSORS:
        return list(attr.tensors)
    if kind == AttributeProto.GRAPHS:
        return list(attr.graphs)
    if kind == AttributeProto.SPARSE_TENSOR:
        return attr.sparse_tensor
    if kind == AttributeProto.SPARSE_TENSORS:
        return list(attr.sparse_tensors)
    if kind == AttributeProto.TYPE_PROTO:
        return attr.tp
    if kind == AttributeProto.TYPE_PROTOS:
        return list(attr.type_protos)
    raise ModelFileError(f"ONNX attribute {attr.name!r} (AttributeProto at byte "
                         f"{attr.offset}): type {kind} is not an AttributeType")


def _text(value: Any) -> str:
    return bytes(value).decode("utf-8", "replace")


def _raise(problems: list[tuple[str, str, int, str]],
           dynamic: list[str] | None = None) -> NoReturn:
    lines = [f"  {op} (domain {domain}, opset {opset}): {reason}"
             for domain, op, opset, reason in problems]
    raise UnsupportedOnnxOperatorError(
        f"ONNX import: {len(problems)} unsupported operator(s):\n" + "\n".join(lines),
        problems, dynamic)


def import_model(model: Any, input_shapes: Mapping[str, Sequence[Any]] | None = None
                 ) -> tuple[Any, dict, dict]:
    imported = import_graph(model, input_shapes=input_shapes)
    return imported.symbol, imported.arg_params, imported.aux_params


def read_model(model: Any) -> Any:
    """model (a path, the bytes of a file, or a ModelProto) as a ModelProto;
    a file that cannot be read or parsed is a ModelFileError."""
    return _load(model)


def data_inputs(model: Any) -> dict[str, tuple[tuple | None, np.dtype | None]]:
    """The graph inputs that are not initializers, in graph order, with
    their declared shapes (-1 for a symbolic or unknown extent; None when
    undeclared) and element types: what import_graph's ``inputs``,
    ``input_shapes`` and ``input_dtypes`` will be, read without importing."""
    model = _load(model)
    initializers = {init.name for init in model.graph.initializer}
    return {value.name: _tensor_type(value) for value in model.graph.input
            if value.name not in initializers}


def get_model_metadata(model: Any) -> dict[str, list[tuple[str, tuple | None]]]:
    model = _load(model)
    initializers = {init.name for init in model.graph.initializer}
    return {
        "input_tensor_data": [(v.name, _tensor_type(v)[0]) for v in model.graph.input
                              if v.name not in initializers],
        "output_tensor_data": [(v.name, _tensor_type(v)[0]) for v in model.graph.output],
    }


__all__ = ["import_model", "import_graph", "get_model_metadata", "read_model", "data_inputs",
           "Imported", "TRANSLATORS"]
