"""An indexed view of a symbol graph, and shape and dtype inference over it.

:class:`Graph` fixes the topological order of a symbol's nodes (MXNet's
depth-first post-order, which is also the order of the nodes in files MXNet
writes), resolves each operator node against the registry once, and numbers
every visible output ("entry") so that executors can keep arrays in flat
lists.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from ..abi.tensor import numpy_dtype
from ..errors import DTypeError, GraphError, ShapeError, TensorError, UnknownOperatorError
from ..ops import registry
from ..ops.control_flow import BODIES
from ..ops.params import Attrs, parse_tuple
from .symbol_json import Node


def bind_bodies(op: Any, attrs: Any, node: Node, graph_type: Any) -> Any:
    from .control_flow import bind_bodies as bind  # it imports this module's Graph users

    return bind(op, attrs, node, graph_type)

__all__ = ["Graph", "topological_order"]

Shape = tuple[int, ...]
T = TypeVar("T")


def topological_order(heads: Sequence[tuple[Node, int]]) -> list[Node]:
    """Nodes reachable from heads, each after its inputs, in depth-first
    post-order visiting inputs in order (NNVM's order)."""
    order: list[Node] = []
    visited: set[int] = set()
    for head, _ in heads:
        if id(head) in visited:
            continue
        visited.add(id(head))
        stack: list[tuple[Node, int]] = [(head, 0)]
        while stack:
            node, next_input = stack[-1]
            if next_input < len(node.inputs):
                stack[-1] = (node, next_input + 1)
                producer = node.inputs[next_input][0]
                if id(producer) not in visited:
                    visited.add(id(producer))
                    stack.append((producer, 0))
            else:
                stack.pop()
                order.append(node)
    return order


class Graph:
    """Nodes in topological order with their operators, attributes and
    entry numbering."""

    def __init__(self, heads: Sequence[tuple[Node, int]]) -> None:
        self.heads = list(heads)
        self.nodes = topological_order(self.heads)
        # The latest inferences of a static graph, by what they read (see
        # _memo_key): a bind infers the same shapes and dtypes three times.
        self._inferred: dict[tuple[Any, ...], list[Any]] = {}
        self.index = {id(node): k for k, node in enumerate(self.nodes)}
        self.ops: list[registry.OpDef | None] = []
        self.attrs: list[Attrs | None] = []
        for node in self.nodes:
            if node.is_variable:
                self.ops.append(None)
                self.attrs.append(None)
                continue
            try:
                op = registry.get(node.op)
            except UnknownOperatorError as error:
                raise UnknownOperatorError(f"node {node.name!r}: {error}") from None
            try:
                attrs = op.parse(node.attrs)
            except Exception as error:
                raise type(error)(f"node {node.name!r}: {error}") from None
            if op.name in BODIES:  # a control-flow node: its operator runs its bodies
                op = bind_bodies(op, attrs, node, Graph)
            expected = len(op.input_names(attrs))
            if len(node.inputs) != expected:
                raise GraphError(
                    f"node {node.name!r} ({node.op}) has {len(node.inputs)} inputs, expected "
                    f"{expected} ({', '.join(op.input_names(attrs))})")
            self.ops.append(op)
            self.attrs.append(attrs)
        self.entry_start: list[int] = []
        total = 0
        for k in range(len(self.nodes)):
            self.entry_start.append(total)
            total += self.num_visible(k)
        self.num_entries = total
        for node in self.nodes:
            for producer, output, _ in node.inputs:
                self.check_output(producer, output, f"input of {node.name!r}")
        for producer, output in self.heads:
            self.check_output(producer, output, "a graph output")
        self._check_variable_names()

    def _resolved(self, k: int) -> tuple[registry.OpDef, Attrs] | None:
        op, attrs = self.ops[k], self.attrs[k]
        return None if op is None or attrs is None else (op, attrs)

    def num_visible(self, k: int) -> int:
        resolved = self._resolved(k)
        return 1 if resolved is None else len(resolved[0].output_names(resolved[1]))

    def num_total(self, k: int) -> int:
        """All outputs of node k, hidden ones included (node_row_ptr)."""
        node, resolved = self.nodes[k], self._resolved(k)
        if node.num_outputs is not None:
            return node.num_outputs
        return 1 if resolved is None else resolved[0].total_outputs(resolved[1])

    def check_output(self, producer: Node, output: int, what: str) -> None:
        visible = self.num_visible(self.index[id(producer)])
        if not 0 <= output < visible:
            raise GraphError(f"{what} uses output {output} of {producer.name!r}, which has "
                             f"{visible}")

    def _check_variable_names(self) -> None:
        seen: dict[str, Node] = {}
        for node in self.nodes:
            if node.is_variable:
                other = seen.setdefault(node.name, node)
                if other is not node:
                    raise GraphError(f"two different variables are named {node.name!r}")

    def entry(self, node: Node, output: int) -> int:
        return self.entry_start[self.index[id(node)]] + output

    def input_entries(self, k: int) -> list[int]:
        return [self.entry(producer, output) for producer, output, _ in self.nodes[k].inputs]

    def output_entries(self, k: int) -> range:
        """The entries of node k's visible outputs."""
        return range(self.entry_start[k], self.entry_start[k] + self.num_visible(k))

    # ---- argument roles ----------------------------------------------------------

    def aux_variables(self) -> set[int]:
        """Indices of the variables used as auxiliary states of an operator."""
        aux: set[int] = set()
        for k, node in enumerate(self.nodes):
            resolved = self._resolved(k)
            if resolved is None:
                continue
            first_aux = len(resolved[0].argument_names(resolved[1]))
            for producer, _, _ in node.inputs[first_aux:]:
                if producer.is_variable:
                    aux.add(self.index[id(producer)])
        return aux

    def variables(self) -> tuple[list[int], list[int]]:
        """(argument variable indices, auxiliary variable indices)."""
        aux = self.aux_variables()
        variables = [k for k, node in enumerate(self.nodes) if node.is_variable]
        return [k for k in variables if k not in aux], [k for k in variables if k in aux]

    # ---- inference -----------------------------------------------------------------

    def infer_shapes(self, given: Mapping[str, Shape],
                     value_of: Callable[[str], Any] | None = None) -> list[Shape | None]:
        """Shape of every entry (None where it cannot be inferred) from the
        shapes given for some variables and the variables' "__shape__"
        hints, whose 0 extents mean unknown. value_of(name): the value of a
        small argument, for graphs that compute shapes (see
        infer_shapes_values)."""
        if value_of is not None:
            return self.infer_shapes_values(given, value_of)[0]
        key = self._memo_key("shape", given, "__shape__")

        def infer() -> list[Any]:
            return self.infer_shapes_values(given, value_of)[0]

        return infer() if key is None else self._memoized(key, infer)

    def _memo_key(self, what: str, given: Mapping[str, Any], hint: str
                  ) -> tuple[Any, ...] | None:
        """What an inference of a static graph reads: the given shapes (or
        dtypes) and the variables' hints (node attributes, which can be
        changed); None where the inference is not memoized (a graph that
        computes shapes, a value that is neither a shape nor a dtype: the
        inference reports it)."""
        from .dynamic import is_dynamic

        if is_dynamic(self):
            return None
        try:
            if what == "shape":
                if not all(isinstance(value, (tuple, list)) and all(
                        isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                        for d in value) for value in given.values()):
                    return None
                items = tuple(sorted((name, tuple(int(d) for d in value))
                                     for name, value in given.items()))
            else:
                items = tuple(sorted((name, np.dtype(value).str)
                                     for name, value in given.items()))
        except (TypeError, ValueError):
            return None
        hints = tuple(node.attrs.get(hint) for node in self.nodes if node.is_variable)
        return (what, items, hints)

    def _memoized(self, key: tuple[Any, ...], infer: Callable[[], list[Any]]) -> list[Any]:
        """A copy of infer()'s list, inferred once per key (the latest 8)."""
        found = self._inferred.get(key)
        if found is None:
            found = infer()
            if len(self._inferred) >= 8:
                del self._inferred[next(iter(self._inferred))]  # the oldest
            self._inferred[key] = found
        return list(found)

    def infer_shapes_values(self, given: Mapping[str, Shape],
                            value_of: Callable[[str], Any] | None = None
                            ) -> tuple[list[Shape | None], dict[int, np.ndarray]]:
        """(infer_shapes' shapes, the values of the shape computations by
        entry): a graph with _onnx_shape/_onnx_size and _dyn_* operators
        works its shape arithmetic out from the shapes (acc_host.graph.
        dynamic); value_of gives the values of the constants it reads."""
        from .dynamic import ValueInference, is_dynamic

        values = ValueInference(self, value_of) if is_dynamic(self) else None
        hints = {k: _shape_hint(node) for k, node in enumerate(self.nodes) if node.is_variable}

        def seed(k: int, node: Node) -> Shape | None:
            if node.name in given:
                shape = _given_shape(node.name, given[node.name])
                _check_hint(node, hints[k], shape)
                return shape
            hint = hints[k]
            return hint if hint is not None and 0 not in hint else None

        def accept(k: int, node: Node, shape: Shape) -> None:
            _check_hint(node, hints[k], shape)

        rule = values.infer if values is not None else (
            lambda k, op, attrs, shapes: op.infer_shape(attrs, shapes))
        shapes = self._infer(given, seed, accept, rule, "shape")
        return shapes, ({} if values is None else values.values)

    def infer_dtypes(self, given: Mapping[str, Any]) -> list[np.dtype | None]:
        """Dtype of every entry from given variable dtypes and "__dtype__"
        hints."""
        def seed(k: int, node: Node) -> np.dtype | None:
            if node.name in given:
                try:
                    return np.dtype(given[node.name])
                except TypeError:
                    raise TensorError(f"the dtype given for {node.name!r}, "
                                      f"{given[node.name]!r}, is not a dtype") from None
            hint = node.attrs.get("__dtype__")
            return numpy_dtype(int(hint)) if hint not in (None, "-1") else None

        def infer() -> list[np.dtype | None]:
            return self._infer(given, seed, lambda k, node, dtype: None,
                               lambda k, op, attrs, values: op.infer_type(attrs, values),
                               "dtype")

        key = self._memo_key("dtype", given, "__dtype__")
        return infer() if key is None else self._memoized(key, infer)

    def _infer(self, given: Mapping[str, Any], seed: Callable[[int, Node], T | None],
               accept: Callable[[int, Node, T], None],
               rule: Callable[[int, registry.OpDef, Attrs, list[T | None]],
                              tuple[Sequence[T | None], Sequence[T]]],
               what: str) -> list[T | None]:
        names = {node.name for node in self.nodes if node.is_variable}
        unknown = sorted(set(given) - names)
        if unknown:
            raise GraphError(self._unknown_inputs_text(unknown))
        values: list[T | None] = [None] * self.num_entries
        for k, node in enumerate(self.nodes):
            if node.is_variable:
                values[self.entry_start[k]] = seed(k, node)
        done = [op is None for op in self.ops]
        progress = True
        while progress:
            progress = False
            for k, node in enumerate(self.nodes):
                if done[k]:
                    continue
                op, attrs = self.ops[k], self.attrs[k]
                assert op is not None and attrs is not None
                entries = self.input_entries(k)
                try:
                    filled, outputs = rule(k, op, attrs, [values[e] for e in entries])
                except registry.ShapeUnknownError:
                    continue
                except ShapeError as error:  # the same kind, naming the node
                    if what == "dtype":
                        self._input_dtype_error(k, values, given)
                    raise type(error)(f"node {node.name!r} ({node.op}): {error}") from None
                for position, (entry, value) in enumerate(zip(entries, filled)):
                    self._merge(values, entry, value, node, position, accept, what)
                for output, value in enumerate(outputs[:self.num_visible(k)]):
                    values[self.entry_start[k] + output] = value
                done[k] = progress = True
        return values

    def data_inputs(self) -> list[str]:
        """The variables that are data, not parameters: neither auxiliary
        states nor inputs a consumer takes as a parameter (PARAMETER_ARGUMENTS:
        weight, bias, gamma, beta, ...), in graph order."""
        arguments, _ = self.variables()
        parameters: set[int] = set()
        for k, node in enumerate(self.nodes):
            resolved = self._resolved(k)
            if resolved is None:
                continue
            names = resolved[0].argument_names(resolved[1])
            for (producer, _, _), name in zip(node.inputs, names):
                if producer.is_variable and name in PARAMETER_ARGUMENTS:
                    parameters.add(self.index[id(producer)])
        return [self.nodes[k].name for k in arguments if k not in parameters]

    def _unknown_inputs_text(self, unknown: Sequence[str]) -> str:
        """"'dat' not among the graph's inputs (data inputs: data; did you
        mean 'data'?)": parameters are left out of the list (a model has
        dozens), named only when one is the close match."""
        data = self.data_inputs()
        others = sorted({node.name for node in self.nodes if node.is_variable} - set(data))
        parts = [f"data inputs: {', '.join(data) or 'none'}"]
        if others:
            parts.append(f"and {len(others)} parameter{'s' if len(others) != 1 else ''}")
        for name in unknown:
            close = difflib.get_close_matches(name, data, n=1) \
                or difflib.get_close_matches(name, others, n=1)
            if close:
                parts.append(f"did you mean {close[0]!r} for {name!r}?")
        return f"{', '.join(map(repr, unknown))} not among the graph's inputs ({'; '.join(parts)})"

    def _input_dtype_error(self, k: int, values: list[Any], given: Mapping[str, Any]) -> None:
        """Raises a DTypeError naming the graph input at the root of node k's
        dtype conflict, when there is one: node k's inputs disagree, the
        dtype most of them share is the expected one, and an input of
        another dtype comes from a variable given that dtype (a float64
        array for a float32 model). Returns when the conflict is elsewhere."""
        node = self.nodes[k]
        entries = self.input_entries(k)
        known = [values[e] for e in entries if values[e] is not None]
        if len(set(known)) < 2:
            return
        expected = max(set(known), key=lambda dtype: (known.count(dtype), -known.index(dtype)))
        for entry, (producer, _, _) in zip(entries, node.inputs):
            odd = values[entry]
            if odd is None or odd == expected:
                continue
            for root in self._variables_with_dtype(producer, odd, values):
                if root.name in given:
                    raise DTypeError(
                        f"input {root.name!r} has dtype {np.dtype(odd).name}, the model takes "
                        f"{np.dtype(expected).name} (node {node.name!r} ({node.op}) gets both); "
                        f"cast the input to {np.dtype(expected).name}")

    def _variables_with_dtype(self, producer: Node, dtype: Any, values: list[Any]) -> list[Node]:
        """The variables upstream of producer (itself included) whose dtype
        is dtype, nearest first."""
        found: list[Node] = []
        queue, seen = [producer], {id(producer)}
        while queue:
            current = queue.pop(0)
            if current.is_variable:
                if values[self.entry_start[self.index[id(current)]]] == dtype:
                    found.append(current)
                continue
            for source, _, _ in current.inputs:
                if id(source) not in seen:
                    seen.add(id(source))
                    queue.append(source)
        return found

    def _merge(self, values: list[Any], entry: int, value: Any, node: Node, position: int,
               accept: Callable[[int, Node, Any], None], what: str) -> None:
        current = values[entry]
        producer, _, _ = node.inputs[position]
        if current is None:
            values[entry] = value
            if producer.is_variable:
                accept(self.index[id(producer)], producer, value)
        elif value is not None and not _same(current, value):
            raise ShapeError(
                f"node {node.name!r} ({node.op}) needs {what} {value} for input {position} "
                f"({producer.name!r}), which has {what} {current}")


#: Operator argument names that take parameters (learned or running
#: statistics), not data: how data_inputs() tells a model's inputs.
PARAMETER_ARGUMENTS = frozenset({"weight", "bias", "gamma", "beta", "moving_mean", "moving_var",
                                 "parameters", "alpha"})


def _same(a: Any, b: Any) -> bool:
    return bool(a == b)


def _given_shape(name: str, value: Any) -> Shape:
    """A shape given for variable name: non-negative integer extents."""
    try:
        extents = tuple(value)
    except TypeError:
        raise ShapeError(f"the shape given for {name!r} is {value!r}, not a tuple of "
                         "integers") from None
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in extents):
        raise ShapeError(f"the shape given for {name!r}, {extents}, has an extent that is not "
                         "an integer")
    if any(d < 0 for d in extents):
        raise ShapeError(f"the shape given for {name!r}, {extents}, has a negative extent")
    return tuple(int(d) for d in extents)


def _shape_hint(node: Node) -> Shape | None:
    text = node.attrs.get("__shape__")
    if text is None:
        return None
    try:
        hint = parse_tuple(text)
    except (ValueError, SyntaxError):
        raise GraphError(f"variable {node.name!r}: bad __shape__ {text!r}") from None
    # 0 is MXNet's unknown extent, -1 numpy-shape mode's; nothing else may
    # be negative, and None is no extent (parse_tuple allows it for slices).
    if any(d is None or d < -1 for d in hint):
        raise GraphError(f"variable {node.name!r}: bad __shape__ {text!r}: extents must be "
                         "integers >= 0 (0 or -1: unknown)")
    if not hint:
        # "()" is MXNet's unknown shape, except on a variable that also
        # declares its dtype: the ONNX importer's 0-d constants (Gather's
        # scalar index of a shape), which binding must know to be scalars
        return () if "__dtype__" in node.attrs and text.strip() == "()" else None
    return tuple(max(int(d), 0) for d in hint)


def _check_hint(node: Node, hint: Shape | None, shape: Shape) -> None:
    """A shape agrees with a hint when every known (non-zero) extent matches."""
    if hint is None:
        return
    if len(hint) != len(shape) or any(h not in (0, s) for h, s in zip(hint, shape)):
        raise ShapeError(f"variable {node.name!r} has shape {shape}, but its __shape__ "
                         f"attribute says {hint}")
