"""Symbols: MXNet's symbolic graphs (``mx.sym``).

A :class:`Symbol` is a list of outputs of graph nodes. Symbols are composed
with ``mx.sym.Variable``, one constructor per registered operator
(``mx.sym.Convolution(data=x, num_filter=64, kernel=(3, 3), name="conv0")``),
``mx.sym.Group`` and arithmetic, or loaded from MXNet's JSON. They list
their arguments, auxiliary states and outputs by MXNet's naming rules, infer
shapes and dtypes, and bind into executors.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .abi.tensor import dtype_code
from .context import current_context
from .errors import GraphError, ModelFileNotFoundError, OperatorError
from .graph import Graph, Shape
from .graph.attribute import current_attrs
from .graph.storage import storage_type_code
from .graph.symbol_json import MXNET_VERSION, Node, graph_document, parse_graph, write_graph
from .ndarray.methods import FLUENT_OPERATORS, split_arguments
from .ops import registry
from .ops.params import format_value
from .runtime.executor import Executor

__all__ = ["Symbol", "Variable", "var", "Group", "load", "load_json", "fromjson"]


class _NameManager(threading.local):
    """MXNet's automatic names: the operator name in lower case plus a
    counter per name ("convolution0", "convolution1")."""

    def __init__(self) -> None:
        self.counters: dict[str, itertools.count[int]] = {}

    def get(self, hint: str) -> str:
        counter = self.counters.setdefault(hint, itertools.count())
        return f"{hint}{next(counter)}"


_names = _NameManager()


# ---- MXNet's fluent methods (x.sum(...), x.reshape(...)), mixed into Symbol ----


def _fluent(op_name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        name, attr = kwargs.pop("name", None), kwargs.pop("attr", None)
        inputs, attrs = split_arguments(op_name, Symbol, self, args, kwargs)
        return _create(op_name, inputs, attrs, name, attr)

    method.__name__ = op_name
    method.__doc__ = f"``mx.sym.{op_name}(self, ...)``"
    return method


def _registered(op_name: str) -> bool:
    return registry.find(op_name) is not None


class SymbolMethods:
    """The fluent methods (mixed into Symbol)."""

    __slots__ = ()

    def reshape(self: Any, *shape: Any, **kwargs: Any) -> Any:
        """``mx.sym.Reshape(self, shape=...)``."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if shape:
            kwargs["shape"] = tuple(shape)
        name, attr = kwargs.pop("name", None), kwargs.pop("attr", None)
        return _create("Reshape", [self], kwargs, name, attr)

    def astype(self: Any, dtype: Any, **kwargs: Any) -> Any:
        """``mx.sym.Cast(self, dtype=...)``."""
        return _create("Cast", [self], {"dtype": np.dtype(dtype).name}, **kwargs)

    def eval(self, ctx: Any = None, **kwargs: Any) -> list[Any]:
        """Binds the symbol to ctx (default: the current context) with the
        given arrays for every argument, runs one forward and returns its
        outputs, as MXNet's Symbol.eval."""
        executor = self.bind(ctx or current_context(), kwargs)  # type: ignore[attr-defined]
        return list(executor.forward())


for _method, _op in FLUENT_OPERATORS.items():
    # the host operators (one_hot, sort, ...) are not in the registry, so not in graphs
    if not hasattr(SymbolMethods, _method) and _registered(_op):
        setattr(SymbolMethods, _method, _fluent(_op))


class Symbol(SymbolMethods):
    """Outputs of a graph, each (node, visible output index)."""

    def __init__(self, outputs: Sequence[tuple[Node, int]],
                 graph_attrs: Mapping[str, Any] | None = None) -> None:
        self._outputs = list(outputs)
        self._graph_attrs = dict(graph_attrs or {"mxnet_version": MXNET_VERSION})
        self._graph: Graph | None = None

    # ---- structure ---------------------------------------------------------------

    @property
    def graph(self) -> Graph:
        """The indexed graph (built on first use; validates operators)."""
        if self._graph is None:
            self._graph = Graph(self._outputs)
        return self._graph

    @property
    def name(self) -> str | None:
        """The node name of a single-output symbol, else None."""
        return self._outputs[0][0].name if len(self._outputs) == 1 else None

    def _output_name(self, node: Node, output: int) -> str:
        graph = self.graph
        op, attrs = graph.ops[graph.index[id(node)]], graph.attrs[graph.index[id(node)]]
        if op is None or attrs is None:
            return node.name
        return f"{node.name}_{op.output_names(attrs)[output]}"

    def list_outputs(self) -> list[str]:
        return [self._output_name(node, output) for node, output in self._outputs]

    def list_arguments(self) -> list[str]:
        arguments, _ = self.graph.variables()
        return [self.graph.nodes[k].name for k in arguments]

    def list_auxiliary_states(self) -> list[str]:
        _, aux = self.graph.variables()
        return [self.graph.nodes[k].name for k in aux]

    def list_inputs(self) -> list[str]:
        return [node.name for node in self.graph.nodes if node.is_variable]

    def get_internals(self) -> Symbol:
        """Every visible output of every node, in topological order."""
        graph = self.graph
        return Symbol([(node, output) for k, node in enumerate(graph.nodes)
                       for output in range(graph.num_visible(k))], self._graph_attrs)

    def get_children(self) -> Symbol | None:
        inputs = [(producer, output) for node, _ in self._outputs
                  for producer, output, _ in node.inputs]
        return Symbol(inputs, self._graph_attrs) if inputs else None

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self) -> Iterator[Symbol]:
        return (self[k] for k in range(len(self)))

    def __getitem__(self, key: int | str) -> Symbol:
        if isinstance(key, str):
            names = self.list_outputs()
            if key not in names:
                raise GraphError(f"no output named {key!r}; outputs: {', '.join(names)}")
            if names.count(key) > 1:
                raise GraphError(f"several outputs are named {key!r}")
            key = names.index(key)
        if not -len(self) <= key < len(self):
            raise IndexError(f"output {key} of a symbol with {len(self)} outputs")
        return Symbol([self._outputs[key]], self._graph_attrs)

    def attr(self, key: str) -> str | None:
        """Attribute key of a single-output symbol's node."""
        if len(self._outputs) != 1:
            raise GraphError("attr() needs a symbol with one output")
        return self._outputs[0][0].attrs.get(key)

    def list_attr(self) -> dict[str, str]:
        if len(self._outputs) != 1:
            raise GraphError("list_attr() needs a symbol with one output")
        return dict(self._outputs[0][0].attrs)

    def attr_dict(self) -> dict[str, dict[str, str]]:
        return {node.name: dict(node.attrs) for node in self.graph.nodes if node.attrs}

    # ---- inference --------------------------------------------------------------------

    def _given(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if args:
            names = self.list_arguments()
            if len(args) > len(names):
                raise GraphError(f"{len(args)} positional values for {len(names)} arguments")
            given = {name: value for name, value in zip(names, args) if value is not None}
        else:
            given = {}
        given.update({key: value for key, value in kwargs.items() if value is not None})
        return given

    def infer_shape_partial(self, *args: Any, **kwargs: Any) -> tuple[list, list, list]:
        """(argument shapes, output shapes, auxiliary shapes), with None
        where a shape cannot be inferred."""
        graph = self.graph
        shapes = graph.infer_shapes(self._given(args, kwargs))
        arguments, aux = graph.variables()
        return ([shapes[graph.entry_start[k]] for k in arguments],
                [shapes[graph.entry(node, output)] for node, output in self._outputs],
                [shapes[graph.entry_start[k]] for k in aux])

    def infer_shape(self, *args: Any, **kwargs: Any) -> tuple[list | None, list | None,
                                                               list | None]:
        """As MXNet: the three lists when every shape is known, else
        (None, None, None). Inconsistent shapes raise ShapeError."""
        result = self.infer_shape_partial(*args, **kwargs)
        if any(shape is None for group in result for shape in group):
            return None, None, None
        return result

    def infer_type(self, *args: Any, **kwargs: Any) -> tuple[list | None, list | None,
                                                              list | None]:
        """(argument dtypes, output dtypes, auxiliary dtypes) as numpy
        dtypes; (None, None, None) when some cannot be inferred."""
        graph = self.graph
        dtypes = graph.infer_dtypes(self._given(args, kwargs))
        arguments, aux = graph.variables()
        result = ([dtypes[graph.entry_start[k]] for k in arguments],
                  [dtypes[graph.entry(node, output)] for node, output in self._outputs],
                  [dtypes[graph.entry_start[k]] for k in aux])
        if any(dtype is None for group in result for dtype in group):
            return None, None, None
        return result

    # ---- serialization -------------------------------------------------------------------

    def tojson(self) -> str:
        """MXNet's symbol JSON, byte for byte as MXNet writes it."""
        graph = self.graph
        return write_graph(graph.nodes, [(node, output, 0) for node, output in self._outputs],
                           self._graph_attrs, [graph.num_total(k) for k in range(len(graph.nodes))])

    def json_document(self) -> dict[str, Any]:
        """``json.loads(self.tojson())``, built without the text: a new
        dict the caller may change (the annotation for a plugin)."""
        graph = self.graph
        return graph_document(graph.nodes, [(node, output, 0) for node, output in self._outputs],
                              self._graph_attrs,
                              [graph.num_total(k) for k in range(len(graph.nodes))])

    def save(self, fname: str | Path) -> None:
        Path(fname).write_text(self.tojson(), encoding="utf-8")

    # ---- binding ---------------------------------------------------------------------------

    def simple_bind(self, ctx: Any, grad_req: str = "null", type_dict: Mapping | None = None,
                    group2ctx: Mapping[str, Any] | None = None, **shapes: Shape) -> Any:
        """An executor with new zero-filled arrays for every argument and
        auxiliary state, shaped by inference from the given shapes.
        group2ctx places the operators of each "__ctx_group__" (set with
        mx.AttrScope(ctx_group=...)) on a context of its own."""
        return Executor.simple_bind(self, ctx, shapes, type_dict or {}, grad_req, group2ctx)

    def bind(self, ctx: Any, args: Mapping[str, Any] | Sequence[Any],
             args_grad: Any = None, grad_req: str = "null",
             aux_states: Mapping[str, Any] | Sequence[Any] | None = None,
             data_names: Sequence[str] | None = None,
             group2ctx: Mapping[str, Any] | None = None) -> Any:
        """An executor over the given arrays (by name, or in list_arguments /
        list_auxiliary_states order). data_names: the arguments that are
        data rather than weights (default: "data")."""
        return Executor.bind(self, ctx, args, aux_states, grad_req, data_names, group2ctx)

    # ---- arithmetic --------------------------------------------------------------------------

    def _binary(self, other: Any, op: str, scalar_op: str) -> Symbol:
        if isinstance(other, Symbol):
            return _create(op, [self, other], {})
        return _create(scalar_op, [self], {"scalar": other})

    def __add__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_add", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_sub", "_minus_scalar")

    def __rsub__(self, other: Any) -> Symbol:
        return _create("_rminus_scalar", [self], {"scalar": other})

    def __mul__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Symbol:
        return self._binary(other, "elemwise_div", "_div_scalar")

    def __rtruediv__(self, other: Any) -> Symbol:
        return _create("_rdiv_scalar", [self], {"scalar": other})

    def __neg__(self) -> Symbol:
        return _create("_mul_scalar", [self], {"scalar": -1.0})

    def __repr__(self) -> str:
        if len(self._outputs) == 1:
            return f"<Symbol {self.name}>"
        return f"<Symbol group [{', '.join(self.list_outputs())}]>"


# ---- construction ----------------------------------------------------------------------


def Variable(name: str, attr: Mapping[str, str] | None = None, shape: Shape | None = None,
             lr_mult: float | None = None, wd_mult: float | None = None,
             dtype: Any = None, init: Any = None, stype: str | None = None,
             **kwargs: Any) -> Symbol:
    """A graph input, with MXNet's variable attributes."""
    if not isinstance(name, str) or not name:
        raise GraphError(f"a variable needs a non-empty string name, got {name!r}")
    attrs = {key: str(value) for key, value in current_attrs(attr).items()}
    if shape is not None:
        attrs["__shape__"] = format_value(tuple(shape))
    if dtype is not None:
        attrs["__dtype__"] = str(dtype_code(dtype))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(float(lr_mult))
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(float(wd_mult))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else str(init)
    if stype is not None:
        attrs["__storage_type__"] = str(storage_type_code(stype))
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise GraphError(f"Variable: unknown argument {key!r}")
        attrs[key] = str(value)
    return Symbol([(Node("null", name, attrs), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol with the outputs of all of symbols, in order."""
    outputs = [output for symbol in symbols for output in symbol._outputs]
    if not outputs:
        raise GraphError("Group needs at least one symbol")
    return Symbol(outputs)


_AUTO_NAME_HINT = re.compile(r"[^a-z0-9_]")


def _create(op_name: str, positional: Sequence[Symbol], kwargs: Mapping[str, Any],
            name: str | None = None, attr: Mapping[str, str] | None = None) -> Symbol:
    """A node of op_name: symbols among the arguments become its inputs,
    everything else its attributes; missing inputs become new variables named
    "<name>_<input>" as in MXNet."""
    op = registry.get(op_name)
    symbols = {key: value for key, value in kwargs.items() if isinstance(value, Symbol)}
    attr_values = {key: value for key, value in kwargs.items()
                   if not isinstance(value, Symbol) and value is not None}
    if "num_args" in op._params_by_name and "num_args" not in attr_values and positional:
        attr_values["num_args"] = len(positional)
    attrs = op.parse(attr_values)
    input_names = op.input_names(attrs)
    unknown = sorted(set(symbols) - set(input_names))
    if unknown:
        raise OperatorError(f"{op_name}: {', '.join(unknown)} are not inputs "
                            f"({', '.join(input_names)})")
    if len(positional) > len(input_names):
        raise OperatorError(f"{op_name}: {len(positional)} inputs given, it takes "
                            f"{len(input_names)}")
    node_name = name or _names.get(_AUTO_NAME_HINT.sub("", op_name.lower()))
    inputs = []
    for position, input_name in enumerate(input_names):
        if position < len(positional):
            symbol = positional[position]
        elif input_name in symbols:
            symbol = symbols[input_name]
        else:
            symbol = Variable(f"{node_name}_{input_name}")
        if len(symbol._outputs) != 1:
            raise OperatorError(f"{op_name}: input {input_name!r} is a group of "
                                f"{len(symbol._outputs)} outputs")
        producer, output = symbol._outputs[0]
        inputs.append((producer, output, 0))
    node_attrs = dict(attrs.raw)
    node_attrs.update({key: str(value) for key, value in current_attrs(attr).items()})
    node = Node(op.name, node_name, node_attrs, inputs)
    visible = len(op.output_names(attrs))
    return Symbol([(node, output) for output in range(visible)])


def _constructor(op_name: str) -> Callable[..., Symbol]:
    def construct(*args: Symbol, name: str | None = None, attr: Mapping[str, str] | None = None,
                  **kwargs: Any) -> Symbol:
        for position, value in enumerate(args):
            if not isinstance(value, Symbol):
                raise OperatorError(f"{op_name}: positional argument {position} is not a Symbol")
        return _create(op_name, args, kwargs, name, attr)

    construct.__name__ = op_name
    construct.__doc__ = registry.get(op_name).doc
    return construct


def __getattr__(name: str) -> Callable[..., Symbol]:
    """mx.sym.<Op>(...) for every registered operator."""
    if registry.find(name) is not None:
        return _constructor(name)
    raise AttributeError(f"module 'acc_host.symbol' has no attribute {name!r}")


# ---- loading -------------------------------------------------------------------------------


def load_json(json_str: str) -> Symbol:
    """A symbol from MXNet's JSON text. Unknown operators and bad attributes
    are reported here, naming the node."""
    nodes, heads, graph_attrs = parse_graph(json_str)
    symbol = Symbol([(node, output) for node, output, _ in heads], graph_attrs)
    symbol.graph  # noqa: B018  (validates operators and attributes now)
    return symbol


fromjson = load_json


def load(fname: str | Path) -> Symbol:
    """A symbol from an MXNet "-symbol.json" file."""
    try:
        text = Path(fname).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileNotFoundError(f"symbol file {fname} not found", str(fname)) from None
    except OSError as error:
        raise GraphError(f"cannot read symbol file {fname}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise GraphError(f"symbol file {fname} is not UTF-8 text: {error.reason} at byte "
                         f"offset {error.start}") from None
    try:
        return load_json(text)
    except GraphError as error:
        raise GraphError(f"{fname}: {error}") from None
