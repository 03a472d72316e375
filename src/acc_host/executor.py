"""Executors: a symbol bound to arrays, run forward on the CPU path.

Binding infers every shape and dtype once and builds a flat plan: for each
operator node its registry entry, parsed attributes, input entries, and the
entries whose last reader it is. Running the plan keeps an intermediate
result only until its last reader has run, so memory is reused as soon as
lifetimes allow; ``memory_report()`` gives the planned peak next to what
keeping every intermediate would cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .context import Context
from .errors import GraphError, ShapeError
from .graph import Graph
from .ndarray import NDArray, zeros
from .ops.params import Attrs
from .ops.registry import OpDef

__all__ = ["Executor"]


@dataclass(frozen=True)
class _Step:
    node: int
    op: OpDef
    attrs: Attrs
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]  # entries read for the last time by this step


def _by_name(names: list[str], values: Mapping[str, Any] | Sequence[Any] | None,
             what: str) -> dict[str, Any]:
    if values is None:
        return {}
    if isinstance(values, Mapping):
        return dict(values)
    values = list(values)
    if len(values) != len(names):
        raise GraphError(f"{len(values)} {what} given for {len(names)} ({', '.join(names)})")
    return dict(zip(names, values))


class Executor:
    """A bound symbol. Use :meth:`forward`, then read :attr:`outputs`."""

    def __init__(self, symbol: Any, ctx: Context, arg_dict: dict[str, NDArray],
                 aux_dict: dict[str, NDArray], grad_req: str = "null") -> None:
        self._symbol = symbol
        self._ctx = ctx
        self._grad_req = grad_req
        graph: Graph = symbol.graph
        self._graph = graph
        self.arg_dict = arg_dict
        self.aux_dict = aux_dict
        arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
        self.arg_arrays = [arg_dict[name] for name in arg_names]
        self.aux_arrays = [aux_dict[name] for name in aux_names]
        shapes = graph.infer_shapes({name: array.shape for name, array in
                                     {**arg_dict, **aux_dict}.items()})
        dtypes = graph.infer_dtypes({name: array.dtype for name, array in
                                     {**arg_dict, **aux_dict}.items()})
        missing = [graph.nodes[k].name for k in range(len(graph.nodes))
                   if any(shapes[e] is None for e in range(graph.entry_start[k],
                                                          graph.entry_start[k]
                                                          + graph.num_visible(k)))]
        if missing:
            raise ShapeError(f"cannot infer the shapes of {', '.join(missing)}")
        self._shapes, self._dtypes = shapes, dtypes
        self._heads = [graph.entry(node, output) for node, output in symbol._outputs]
        self._variables = {graph.entry_start[k]: graph.nodes[k].name
                           for k, node in enumerate(graph.nodes) if node.is_variable}
        self._steps = self._plan()
        self.outputs = [zeros(shapes[entry], ctx, dtypes[entry]) for entry in self._heads]
        self.output_dict = dict(zip(symbol.list_outputs(), self.outputs))

    # ---- binding -----------------------------------------------------------------------

    @classmethod
    def simple_bind(cls, symbol: Any, ctx: Context, shapes: Mapping[str, Any],
                    type_dict: Mapping[str, Any], grad_req: str = "null") -> Executor:
        arg_shapes, _, aux_shapes = symbol.infer_shape_partial(**shapes)
        arg_types, _, aux_types = symbol.infer_type(**type_dict)
        arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
        unknown = [name for name, shape in zip(arg_names + aux_names, arg_shapes + aux_shapes)
                   if shape is None]
        if unknown:
            raise ShapeError(f"simple_bind: cannot infer the shapes of {', '.join(unknown)}; "
                             "give the shapes of the data inputs")
        arg_types = arg_types or [np.float32] * len(arg_names)
        aux_types = aux_types or [np.float32] * len(aux_names)
        arg_dict = {name: zeros(shape, ctx, dtype)
                    for name, shape, dtype in zip(arg_names, arg_shapes, arg_types)}
        aux_dict = {name: zeros(shape, ctx, dtype)
                    for name, shape, dtype in zip(aux_names, aux_shapes, aux_types)}
        return cls(symbol, ctx, arg_dict, aux_dict, grad_req)

    @classmethod
    def bind(cls, symbol: Any, ctx: Context, args: Mapping[str, Any] | Sequence[Any],
             aux_states: Mapping[str, Any] | Sequence[Any] | None,
             grad_req: str = "null") -> Executor:
        arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
        arg_dict = _by_name(arg_names, args, "arguments")
        aux_dict = _by_name(aux_names, aux_states, "auxiliary states")
        for names, given, what in ((arg_names, arg_dict, "argument"),
                                   (aux_names, aux_dict, "auxiliary state")):
            missing = [name for name in names if name not in given]
            extra = [name for name in given if name not in names]
            if missing or extra:
                raise GraphError(f"bind: {what}s missing: {missing or 'none'}; unknown: "
                                 f"{extra or 'none'}")
            for name, value in given.items():
                if not isinstance(value, NDArray):
                    raise GraphError(f"bind: {what} {name!r} must be an NDArray, got "
                                     f"{type(value).__name__}")
        return cls(symbol, ctx, arg_dict, aux_dict, grad_req)

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **shapes: Any) -> Executor:
        """A new executor for new input shapes (e.g. another batch size),
        sharing the arrays whose shapes stay the same."""
        arg_shapes, _, aux_shapes = self._symbol.infer_shape_partial(**shapes)
        arg_names = self._symbol.list_arguments()
        aux_names = self._symbol.list_auxiliary_states()

        def keep_or_new(current: dict[str, NDArray], names: list[str],
                        new_shapes: list[Any]) -> dict[str, NDArray]:
            result = {}
            for name, shape in zip(names, new_shapes):
                array = current[name]
                if shape is None or tuple(shape) == array.shape:
                    result[name] = array
                elif name in shapes or partial_shaping or allow_up_sizing:
                    result[name] = zeros(shape, self._ctx, array.dtype)
                else:
                    raise ShapeError(f"reshape: {name!r} would change from {array.shape} to "
                                     f"{tuple(shape)}; pass partial_shaping=True to allow it")
            return result

        return Executor(self._symbol, self._ctx, keep_or_new(self.arg_dict, arg_names, arg_shapes),
                        keep_or_new(self.aux_dict, aux_names, aux_shapes), self._grad_req)

    # ---- planning -----------------------------------------------------------------------

    def _plan(self) -> list[_Step]:
        graph = self._graph
        last_reader: dict[int, int] = {}
        steps_nodes = [k for k, node in enumerate(graph.nodes) if not node.is_variable]
        for position, k in enumerate(steps_nodes):
            for entry in graph.input_entries(k):
                last_reader[entry] = position
        keep = set(self._heads) | set(self._variables)
        steps = []
        for position, k in enumerate(steps_nodes):
            op, attrs = graph.ops[k], graph.attrs[k]
            assert op is not None and attrs is not None
            outputs = tuple(range(graph.entry_start[k], graph.entry_start[k]
                                  + graph.num_visible(k)))
            release = tuple(sorted({entry for entry in graph.input_entries(k)
                                    if last_reader[entry] == position and entry not in keep}
                                   | {entry for entry in outputs
                                      if entry not in last_reader and entry not in keep}))
            steps.append(_Step(k, op, attrs, tuple(graph.input_entries(k)), outputs, release))
        return steps

    def _entry_bytes(self, entry: int) -> int:
        shape, dtype = self._shapes[entry] or (), self._dtypes[entry]
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype or np.float32).itemsize

    def memory_report(self) -> dict[str, int]:
        """Bytes of intermediate results: ``planned_peak`` (most alive at
        once under the plan) and ``unplanned`` (all of them kept)."""
        alive = peak = total = 0
        for step in self._steps:
            produced = sum(self._entry_bytes(entry) for entry in step.outputs
                           if entry not in self._heads)
            alive += produced
            total += produced
            peak = max(peak, alive)
            alive -= sum(self._entry_bytes(entry) for entry in step.release)
        return {"planned_peak": peak, "unplanned": total}

    # ---- running -------------------------------------------------------------------------

    def forward(self, is_train: bool = False, **kwargs: Any) -> list[NDArray]:
        """Runs the graph (inference semantics whatever is_train says);
        keyword arguments are copied into the argument arrays first."""
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise GraphError(f"forward: {name!r} is not an argument "
                                 f"({', '.join(self.arg_dict)})")
            target = self.arg_dict[name]
            source = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
            if source.shape != target.shape:
                raise ShapeError(f"forward: {name!r} has shape {source.shape}, the executor "
                                 f"was bound with {target.shape}")
            target._write(source)
        values: dict[int, np.ndarray] = {
            entry: (self.arg_dict[name] if name in self.arg_dict else self.aux_dict[name])._read()
            for entry, name in self._variables.items()}
        for step in self._steps:
            results = step.op.compute(step.attrs, [values[entry] for entry in step.inputs])
            for entry, result in zip(step.outputs, results):
                values[entry] = result
            for entry in step.release:
                del values[entry]
        for output, entry in zip(self.outputs, self._heads):
            output._write(np.asarray(values[entry]))
        return self.outputs

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} @{self._ctx}>"
