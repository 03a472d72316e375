"""Executors: a symbol bound to arrays and run forward.

Binding infers every shape and dtype once, partitions the graph when the
context is an accelerator (asking its supportedOps(), see
acc_host.partition.segment), and plans the forward (acc_host.runtime.plan, a
pure function of the graph and the partition): a flat list of steps, CPU
operators and subgraph operators (acc_host.runtime.subgraph). Running the
plan keeps an intermediate result only until its last reader has run, so
memory is reused as soon as lifetimes allow; ``memory_report()`` gives the
planned peak next to what keeping every intermediate would cost.

``forward()`` and ``predict()`` run the plan through its runner
(acc_host.runtime.runner), one path for both: the steps pushed to the
engine, or, for a synchronous forward of a plan that is one subgraph on
fixed buffers, one bound call. The outputs are read like any NDArray
(``asnumpy()`` waits).
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import limits
from ..abi.annotate import annotate_graph, annotate_symbol
from ..abi.sparse import accepts_sparse
from ..abi.tensor import TensorSpec, dtype_code
from ..context import Context, cpu
from ..errors import (
    GraphError,
    PluginContractError,
    ShapeError,
    TensorError,
)
from ..graph import Graph
from ..graph.control_flow import ControlFlowOp, dynamic_entries
from ..graph.dynamic import MAX_VALUE_ELEMENTS, is_dynamic, specialise
from ..graph.symbol_json import write_graph
from ..ndarray import NDArray, zeros
from ..partition.offload import costs_of
from ..partition.segment import Partition, offerable_region, partition_graph, region_graph
from ..partition.storage import StorageVerdict, judge_storage, sparse_readers, variable_stypes
from ..phases import phase
from .bound_step import BoundStep
from .control_flow import BodyExecutors
from .direct_run import DirectRun
from .eager import EagerRunner, static_part
from .executor_methods import ExecutorMethods
from .executor_output import ExecutorOutput
from .plan import Plan, PlanStep, make_plan
from .plan_cache import DEFAULT_SIZE, PlanCache, PlanCacheStats
from .runner import Runner, Step
from .shared_models import SharedModels
from .subgraph import SubgraphOperator, Value

__all__ = ["Executor"]


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


def _has_dtype_code(dtype: Any) -> bool:
    """Whether the ABI has a TensorDType for dtype."""
    if dtype is None:
        return False
    try:
        dtype_code(dtype)
    except TensorError:
        return False
    return True


class Executor(ExecutorMethods):
    """A bound symbol. Use :meth:`forward`, then read :attr:`outputs`."""

    def __init__(self, symbol: Any, ctx: Context, arg_dict: dict[str, NDArray],
                 aux_dict: dict[str, NDArray], grad_req: str = "null",
                 data_names: Sequence[str] | None = None,
                 group2ctx: Mapping[str, Context] | None = None) -> None:
        """data_names: the arguments that change on every forward (images,
        tokens, labels); all other arguments and every auxiliary state are
        weights. Default: "data" if the symbol has it. group2ctx: MXNet's
        model parallelism: the operators whose "__ctx_group__" attribute
        (see mx.AttrScope) names a group run on that group's context
        (devices of ctx's accelerator, or the CPU); the others on ctx."""
        self._symbol = symbol
        self._ctx = ctx
        self._plans: PlanCache | None = None  # shared with reshapes (see reshape)
        # The arguments whose values the shape arithmetic read, with their
        # versions then: a forward after one is written plans again.
        self._value_versions: dict[str, tuple[NDArray, int]] = {}
        self._group2ctx = dict(group2ctx or {})
        self._node_ctx = _node_contexts(symbol.graph, ctx, self._group2ctx)
        self._grad_req = grad_req
        graph: Graph = symbol.graph
        self._graph = graph
        self.arg_dict = arg_dict
        self.aux_dict = aux_dict
        arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
        self.arg_arrays = [arg_dict[name] for name in arg_names]
        self.aux_arrays = [aux_dict[name] for name in aux_names]
        self.data_names = [name for name in (data_names if data_names is not None else ["data"])
                           if name in arg_dict]
        heads = list(symbol._outputs)
        # The arrays the plan reads: the bound ones, and for a graph that
        # computes shapes, the constants its shape arithmetic came to.
        bound = {**arg_dict, **aux_dict}
        self.unresolved: list[str] = []
        if is_dynamic(graph):
            with phase("shape_inference"):
                graph, heads, bound = self._specialise(graph, heads, bound, ctx)
            self._graph = graph
            self._node_ctx = _node_contexts(graph, ctx, self._group2ctx)
        self._bound = bound
        with phase("shape_inference"):
            shapes = graph.infer_shapes({name: array.shape for name, array in bound.items()})
            dtypes = graph.infer_dtypes({name: array.dtype for name, array in bound.items()})
        missing = [graph.nodes[k].name for k in range(len(graph.nodes))
                   if any(shapes[e] is None for e in range(graph.entry_start[k],
                                                          graph.entry_start[k]
                                                          + graph.num_visible(k)))]
        # A graph whose shapes depend on data (self.unresolved) runs on the
        # host, node by node (acc_host.runtime.eager); offload refuses it.
        self.data_dependent = bool(missing and self.unresolved)
        if missing and not self.data_dependent:
            raise ShapeError(f"cannot infer the shapes of {', '.join(missing)}")
        self._shapes, self._dtypes = shapes, dtypes
        self._heads = [graph.entry(node, output) for node, output in heads]
        accelerated = [context for context in self._node_ctx.values() if context.is_accelerator]
        # Why nothing was offered to the accelerator, when that is so.
        self.offload_refused: str | None = None
        # The executor of the part before the data-dependent nodes, offloaded
        # (acc_host.runtime.eager.static_part), when there is one.
        self.static_part: Executor | None = None
        static_nodes: set[int] = set()
        static_entries: list[int] = []
        if accelerated and self.data_dependent:
            static_nodes, static_entries = static_part(graph, shapes, self.unresolved)
            visible = {graph.entry_start[k] + output for k in static_nodes
                       for output in range(graph.num_visible(k))}
            if not static_entries or not set(static_entries) <= visible:
                static_nodes, static_entries = set(), []  # nothing, or a hidden output read
            names = ", ".join(f"{name} ({_op_of(graph, name)})" for name in self.unresolved)
            after = sum(1 for k, node in enumerate(graph.nodes)
                        if not node.is_variable and k not in static_nodes
                        and node.name not in self.unresolved)
            where = (f"they and the {after} operators that depend on their shapes run on the "
                     f"host CPU path; the {len(static_nodes)} operators before them are "
                     "offered to the accelerator (executor.static_part)"
                     if static_nodes else "the graph runs on the host CPU path")
            self.offload_refused = (
                f"data-dependent shapes: {names} give outputs whose shapes are known only "
                f"once the data is, and an accelerator compiles fixed shapes; {where}")
            warnings.warn(f"{symbol.name or 'the symbol'}: the data-dependent part is not "
                          f"offloaded to {accelerated[0]}: {self.offload_refused}",
                          stacklevel=3)
            if static_nodes:
                self.static_part = self._bind_static_part(symbol, graph, bound, static_entries)
            accelerated = []
        with phase("partition"):
            self.partition: Partition | None = self._partition() if accelerated else None
        self.plan: Plan = make_plan(graph, self.partition, self._heads)
        steps = [self._step(step) for step in self.plan.steps]
        report = self.memory_report()
        _check_planned(f"binding {symbol.name or 'the symbol'}", report["bound"],
                       report["outputs"], report["transient"], report["planned_peak"])
        self.outputs: list[NDArray] = [
            ExecutorOutput.of(zeros((0,), cpu(), dtypes[entry]) if shapes[entry] is None
                              else zeros(shapes[entry], ctx, dtypes[entry]))
            for entry in self._heads]
        self.output_dict = dict(zip(symbol.list_outputs(), self.outputs))
        extra = {name: array for name, array in bound.items()
                 if name not in arg_dict and name not in aux_dict}
        self._runner: Runner | EagerRunner
        if self.data_dependent:
            self._runner = EagerRunner(graph, self._heads, bound, self.outputs,
                                       self.static_part, frozenset(static_nodes),
                                       static_entries)
        else:
            self._runner = Runner(self, graph, self.plan, steps, arg_dict,
                                  {**aux_dict, **extra}, self.outputs)
            if self.partition is not None and any(isinstance(op, ControlFlowOp)
                                                  for op in graph.ops):
                # each control-flow body partitioned and bound too
                self._runner.bodies = BodyExecutors(ctx, Executor)
                self._runner.bodies.prepare(graph, shapes, dtypes, frozenset(
                    set(self._bound) - set(self.data_names)), self._bound)
        # The runner's steps, and its bound steps by node (see runner.Runner).
        self._steps = self._runner.steps
        self._bound_steps = self._runner.bound_steps
        self._subgraphs = self._runner.subgraphs
        # Serializes forward() calls (see forward); public, so that a thread
        # can pair its forward with the reading of its outputs.
        self.lock = threading.RLock()
        # Writes into the bound arrays from other threads hold the lock while
        # they are pushed (NDArray._write, _push_write), reads of them and of
        # the outputs while they copy (NDArray._reading): a forward sees one
        # whole version of each argument and weight, a read one whole
        # forward's output (the first executor an array is bound to guards it).
        for array in (*arg_dict.values(), *aux_dict.values(), *self.outputs):
            if array._storage.guard is None:
                array._storage.guard = self.lock

    # ---- binding -----------------------------------------------------------------------

    def _bind_static_part(self, symbol: Any, graph: Graph, bound: Mapping[str, NDArray],
                          entries: Sequence[int]) -> Executor:
        """An executor, on this executor's contexts, of the graph's entries
        (the static part's outputs), reading the same arrays."""
        where = {graph.entry_start[k] + output: (node, output)
                 for k, node in enumerate(graph.nodes) for output in range(graph.num_visible(k))}
        part = type(symbol)([where[entry] for entry in entries])
        args = {name: bound[name] for name in part.list_arguments()}
        aux = {name: bound[name] for name in part.list_auxiliary_states()}
        return Executor(part, self._ctx, args, aux, self._grad_req,
                        [name for name in self.data_names if name in args], self._group2ctx)

    def _specialise(self, graph: Graph, heads: list[tuple[Any, int]], bound: dict[str, NDArray],
                    ctx: Context) -> tuple[Graph, list[tuple[Any, int]], dict[str, NDArray]]:
        """The static graph of a graph that computes shapes, for the bound
        arrays' shapes (acc_host.graph.dynamic): its shape arithmetic worked
        out on the host, each dynamic operator replaced by its static one,
        the values other operators read bound as constants (in bound's
        copy). Nodes whose values depend on data stay (self.unresolved)."""
        def value_of(name: str) -> np.ndarray | None:
            array = bound.get(name)
            if array is None or name in self.data_names or \
                    int(np.prod(array.shape)) > MAX_VALUE_ELEMENTS:
                return None
            self._value_versions[name] = (array, array.version)
            return array.asnumpy()

        shapes, values = graph.infer_shapes_values(
            {name: array.shape for name, array in bound.items()}, value_of)
        new_heads, constants, unresolved = specialise(graph, heads, shapes, values)
        self.unresolved = unresolved
        bound = dict(bound)
        for name, value in constants.items():
            home = ctx if ctx.is_accelerator and _has_dtype_code(value.dtype) else cpu()
            array = zeros(value.shape, home if ctx.is_accelerator else ctx, value.dtype)
            array[...] = value
            bound[name] = array
        new_graph = Graph(new_heads)
        names = {node.name for node in new_graph.nodes if node.is_variable}
        return new_graph, new_heads, {name: array for name, array in bound.items()
                                      if name in names}

    @classmethod
    def simple_bind(cls, symbol: Any, ctx: Context, shapes: Mapping[str, Any],
                    type_dict: Mapping[str, Any], grad_req: str = "null",
                    group2ctx: Mapping[str, Context] | None = None) -> Executor:
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
        declared = list(zip(arg_names + aux_names, arg_shapes + aux_shapes,
                            arg_types + aux_types))
        if declared:
            sizes = [limits.array_bytes(shape, dtype) for _, shape, dtype in declared]
            name, shape, _ = declared[sizes.index(max(sizes))]
            limits.check_bytes(sum(sizes), f"simple_bind: the arguments and auxiliary states "
                               f"(the largest, {name!r}, of shape {tuple(shape)})")
            # Before allocating them: the bind and a forward as a whole.
            graph = symbol.graph
            entry_shapes = graph.infer_shapes({name: shape for name, shape, _ in declared})
            entry_dtypes = graph.infer_dtypes({name: dtype for name, _, dtype in declared})
            heads = [graph.entry(node, output) for node, output in symbol._outputs]
            _check_planned("simple_bind", sum(sizes),
                           *_graph_bytes(graph, entry_shapes, entry_dtypes, heads), 0)
        # Zeros whose device buffers the first whole write makes (weights
        # copied in next would otherwise overwrite zeros copied in first).
        arg_dict = {name: NDArray._deferred_zeros(ctx, tuple(shape), dtype)
                    for name, shape, dtype in zip(arg_names, arg_shapes, arg_types)}
        aux_dict = {name: NDArray._deferred_zeros(ctx, tuple(shape), dtype)
                    for name, shape, dtype in zip(aux_names, aux_shapes, aux_types)}
        return cls(symbol, ctx, arg_dict, aux_dict, grad_req, data_names=list(shapes),
                   group2ctx=group2ctx)

    @classmethod
    def bind(cls, symbol: Any, ctx: Context, args: Mapping[str, Any] | Sequence[Any],
             aux_states: Mapping[str, Any] | Sequence[Any] | None,
             grad_req: str = "null", data_names: Sequence[str] | None = None,
             group2ctx: Mapping[str, Context] | None = None) -> Executor:
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
        return cls(symbol, ctx, arg_dict, aux_dict, grad_req, data_names, group2ctx)

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **shapes: Any) -> Executor:
        """An executor for new input shapes (another batch size, image size or
        sequence length), with MXNet 1.x's semantics: the arrays whose shapes
        stay the same are shared; an argument whose shape changes without
        being given needs partial_shaping=True; an array that grows needs
        allow_up_sizing=True (binding big and reshaping down is cheaper).
        The executors of an executor and its reshapes form a family sharing
        one PlanCache (runtime.plan_cache, DEFAULT_SIZE shapes, LRU): a shape
        the family has seen lately returns its executor, already planned
        and with its subgraphs loaded, instead of planning again."""
        arg_shapes, _, aux_shapes = self._symbol.infer_shape_partial(**shapes)
        arg_names = self._symbol.list_arguments()
        aux_names = self._symbol.list_auxiliary_states()

        def plan(current: dict[str, NDArray], names: list[str],
                 new_shapes: list[Any]) -> dict[str, tuple[int, ...]]:
            result = {}
            for name, shape in zip(names, new_shapes):
                array = current[name]
                if shape is None or tuple(shape) == array.shape:
                    result[name] = array.shape
                    continue
                if name not in shapes and not partial_shaping:
                    raise ShapeError(f"reshape: {name!r} would change from {array.shape} to "
                                     f"{tuple(shape)}; pass partial_shaping=True to allow it")
                if limits.array_bytes(shape, array.dtype) > \
                        limits.array_bytes(array.shape, array.dtype) and not allow_up_sizing:
                    raise ShapeError(f"reshape: {name!r} would grow from {array.shape} to "
                                     f"{tuple(shape)}; pass allow_up_sizing=True to allow it "
                                     "(binding the largest shape first and reshaping down "
                                     "is cheaper)")
                result[name] = tuple(int(d) for d in shape)
            return result

        new_args = plan(self.arg_dict, arg_names, arg_shapes)
        new_aux = plan(self.aux_dict, aux_names, aux_shapes)
        key = (tuple(new_args.items()), tuple(new_aux.items()))
        family = self._family()

        def make(_: Any) -> Executor:
            def arrays(current: dict[str, NDArray],
                       wanted: dict[str, tuple[int, ...]]) -> dict[str, NDArray]:
                return {name: current[name] if current[name].shape == shape
                        else zeros(shape, self._ctx, current[name].dtype)
                        for name, shape in wanted.items()}

            executor = Executor(self._symbol, self._ctx, arrays(self.arg_dict, new_args),
                                arrays(self.aux_dict, new_aux), self._grad_req,
                                self.data_names, self._group2ctx)
            executor._plans = family
            bodies = getattr(self._runner, "bodies", None)
            runner = executor._runner
            if bodies is not None and isinstance(runner, Runner) and \
                    executor._graph is self._graph:
                # one family, one set of control-flow bodies: a body whose
                # shapes the new shapes keep is not compiled again
                runner.bodies = bodies.adopt(runner.bodies)
            return executor

        return self if key == self._shape_key() else family.get(key, key, make)

    def _shape_key(self) -> tuple:
        return (tuple((name, self.arg_dict[name].shape)
                      for name in self._symbol.list_arguments()),
                tuple((name, self.aux_dict[name].shape)
                      for name in self._symbol.list_auxiliary_states()))

    def _family(self) -> PlanCache:
        """The PlanCache this executor and its reshapes share (made on first
        use, holding this executor under its own shapes)."""
        if self._plans is None:
            self._plans = PlanCache(self._reshape_miss, DEFAULT_SIZE, close_evicted=False)
            self._plans.put(self._shape_key(), self)
        return self._plans

    def _reshape_miss(self, key: Any) -> Executor:
        raise AssertionError("reshape passes its own maker")  # pragma: no cover

    def plan_cache_stats(self) -> PlanCacheStats:
        """What the family's PlanCache did (see reshape): hits, misses
        (plans made), evictions, the shapes held."""
        return self._family().stats()

    # ---- planning -----------------------------------------------------------------------

    def _partition(self) -> Partition:
        """Asks the accelerator which nodes it runs on each device the
        operators are placed on, and splits the graph."""
        graph = self._graph
        contexts = [context for context in self._node_ctx.values() if context.is_accelerator]
        library = contexts[0].library
        devices = sorted({context.device_id for context in contexts})
        weights = frozenset(set(self._bound) - set(self.data_names))
        declined: dict[int, dict[int, str]] = {}
        storage: dict[int, StorageVerdict] = {}
        supported = {dev_id: self._supported_ops(library, dev_id, weights, declined, storage)
                     for dev_id in devices}
        dynamic = dynamic_entries(graph)
        if dynamic:  # shapes a loop decides at run time stay on the host
            supported = {dev_id: [k for k in ids if not any(
                entry in dynamic for entry in (*graph.input_entries(k), *graph.output_entries(k)))]
                for dev_id, ids in supported.items()}
        placement = {k: context.device_id if context.is_accelerator else None
                     for k, context in self._node_ctx.items()}
        costs = {dev_id: costs_of(library, dev_id) for dev_id in devices}
        return partition_graph(graph, library.name, lambda dev_id: supported[dev_id], devices,
                               self._shapes, self._dtypes, weights, placement, costs.get,
                               declined, storage, variable_stypes(graph, self._bound))

    def _supported_ops(self, library: Any, dev_id: int, weights: frozenset[str],
                       declined: dict[int, dict[int, str]],
                       storage: dict[int, StorageVerdict] | None = None) -> list[int]:
        """supportedOps() of the graph annotated for device dev_id (weights:
        the arguments and auxiliary states that are not data): the operator
        nodes the plugin runs there. The plugin's reasons for the nodes it
        declined go to declined[dev_id]."""
        graph = self._graph
        shapes = {name: array.shape for name, array in self._bound.items()}
        dtypes = {name: array.dtype for name, array in self._bound.items()}
        data = {name: TensorSpec(self.arg_dict[name].shape, self.arg_dict[name].dtype)
                for name in self.data_names if _has_dtype_code(self.arg_dict[name].dtype)}
        region = offerable_region(graph, self._dtypes, _has_dtype_code)
        operators = sum(1 for node in graph.nodes if not node.is_variable)
        variables_ok = all(_has_dtype_code(self._dtypes[graph.entry_start[k]])
                           for k, node in enumerate(graph.nodes) if node.is_variable)
        if len(region) == operators and variables_ok:
            if graph is self._symbol.graph:
                annotated = annotate_symbol(self._symbol, shapes, weights, dtypes, dev_id)
            else:  # the static graph of a graph that computes shapes
                text = write_graph(graph.nodes, [(node, output, 0)
                                                 for node, output in graph.heads],
                                   {}, [graph.num_total(k) for k in range(len(graph.nodes))])
                annotated = annotate_graph(graph, text, shapes, weights, dtypes, dev_id)
            ids, reasons = library.supported_ops_reasons(json.dumps(annotated), data,
                                                         len(graph.nodes), dev_id)
            declined[dev_id] = reasons
            listed = [k for k in ids if graph.nodes[k].is_variable]
            if storage is not None and graph is self._symbol.graph:
                ids = self._sparse_verdicts(library, dev_id, weights, ids, data, storage)
        elif region:
            # Some values have dtypes the ABI cannot describe: offer the
            # plugin only the region around them.
            annotated, to_graph = region_graph(graph, region, self._shapes, self._dtypes,
                                               weights, dev_id)
            names = {node["name"] for node in annotated["nodes"] if node["op"] == "null"}
            local, reasons = library.supported_ops_reasons(
                json.dumps(annotated), {k: v for k, v in data.items() if k in names},
                len(annotated["nodes"]), dev_id)
            declined[dev_id] = {to_graph[k]: text for k, text in reasons.items()
                                if k in to_graph}
            listed = [k for k in local if k not in to_graph]
            ids = [to_graph[k] for k in local if k in to_graph]
        else:
            ids, listed = [], []
        if listed:
            raise PluginContractError(
                f"{library.name}: supportedOps() listed variable nodes {listed}; only "
                "operator nodes may be listed")
        return list(ids)

    def _sparse_verdicts(self, library: Any, dev_id: int, weights: frozenset[str],
                         dense_ids: list[int], data: dict[str, TensorSpec],
                         storage: dict[int, StorageVerdict]) -> list[int]:
        """With sparse variables bound (ABI 1.2): asks a plugin that takes
        sparse tensors again, on the graph annotated with the storage types,
        records each sparse reader's verdict in storage (kept sparse,
        densified, or on the CPU: acc_host.partition.storage) and returns
        the nodes offloaded."""
        graph = self._graph
        stypes = variable_stypes(graph, self._bound)
        readers = sparse_readers(graph, stypes)
        if not readers:
            return dense_ids
        sparse_ids: list[int] | None = None
        sparse_reasons: dict[int, str] = {}
        if accepts_sparse(library):
            shapes = {name: array.shape for name, array in self._bound.items()}
            dtypes = {name: array.dtype for name, array in self._bound.items()}
            annotated = annotate_symbol(self._symbol, shapes, weights, dtypes, dev_id, stypes)
            specs = {name: TensorSpec(spec.shape, spec.dtype, stypes.get(name, 0))
                     for name, spec in data.items()}
            sparse_ids, sparse_reasons = library.supported_ops_reasons(
                json.dumps(annotated), specs, len(graph.nodes), dev_id)
        verdicts = judge_storage(readers, sparse_ids, dense_ids, sparse_reasons, library.name)
        storage.update(verdicts)
        return sorted({*(k for k in dense_ids if k not in readers),
                       *(k for k, verdict in verdicts.items() if verdict.verdict != "cpu")})

    def _step(self, step: PlanStep) -> Step:
        """A step of the plan with what runs it: the CPU operator, or the
        subgraph operator of its spec on its device (loaded at its first
        forward)."""
        graph, spec = self._graph, step.subgraph
        if spec is None:
            return Step(step.node, graph.ops[step.node], graph.attrs[step.node], step.inputs,
                         step.outputs, step.release)
        device = self._device_context(spec.device_class)
        return Step(step.node, None, None, step.inputs, step.outputs, step.release,
                     SubgraphOperator(device.library, spec, device.device_id))

    def _device_context(self, device_class: int) -> Context:
        assert self.partition is not None
        library = next(c for c in self._node_ctx.values() if c.is_accelerator).library
        return Context(library.name, self.partition.devices[device_class - 1])

    def _entry_bytes(self, entry: int) -> int:
        return limits.array_bytes(self._shapes[entry] or (), self._dtypes[entry])

    def memory_report(self) -> dict[str, int]:
        """Bytes the executor plans for: ``planned_peak`` (intermediate
        results alive at once under the plan at most), ``unplanned`` (all of
        them kept), ``bound`` (arguments and auxiliary states), ``outputs``,
        ``transient`` (the largest operator's inputs and outputs, which a
        forward may copy) and ``planned_total`` (the sum of bound, outputs,
        planned_peak and transient: what the memory limit is checked
        against)."""
        bound = sum(limits.array_bytes(*array._spec_hint()) for array in
                    {id(array): array for array in (*self.arg_dict.values(),
                                                     *self.aux_dict.values())}.values())
        outputs, transient = _graph_bytes(self._graph, self._shapes, self._dtypes, self._heads)
        peak, total = self.plan.memory(self._entry_bytes)
        return {"planned_peak": peak, "unplanned": total, "bound": bound, "outputs": outputs,
                "transient": transient, "planned_total": bound + outputs + transient + peak}

    # ---- running -------------------------------------------------------------------------

    def forward(self, is_train: bool = False, **kwargs: Any) -> list[NDArray]:
        """Runs the graph (inference semantics whatever is_train says);
        keyword arguments are copied into the argument arrays first. Threads
        may share an executor: their forward() calls are serialized by
        ``self.lock``, each running whole on the inputs given to it (its
        argument writes and pushes are not interleaved with another's, and
        under NaiveEngine its whole run); the outputs then hold the latest
        forward's result. A thread that must read the outputs of its own
        forward holds ``self.lock`` over the forward and the reading."""
        lock = self.lock
        lock.acquire()  # (not `with`: a tenth of a microsecond less per call)
        try:
            fast = self._runner.fast
            if fast is not None and not self._value_versions:
                # The direct path (runtime.direct_run), checked and run in one call.
                done = fast(kwargs)
                if done is not None:
                    return done
            if self._value_versions:
                self._replan_if_stale()
            outputs = self._runner.run(kwargs, False)
            if self.data_dependent:
                self.output_dict = dict(zip(self._symbol.list_outputs(), self.outputs))
            return outputs
        finally:
            lock.release()

    def predict(self, **inputs: Any) -> list[np.ndarray]:
        """forward(**inputs), then every output as a new numpy array: a
        synchronous inference, with forward()'s effects (the arguments hold
        the inputs, the outputs the results). A failure is raised here and
        not left on the executor's arrays."""
        return self._predict(inputs)

    def _predict(self, inputs: dict[str, Any]) -> list[np.ndarray]:
        """predict(**inputs) for a dict of them (the caller's: it is not
        changed)."""
        lock = self.lock
        lock.acquire()
        try:
            fast = self._runner.fast_predict
            if fast is not None and not self._value_versions:
                # The direct path (runtime.direct_run), checked and run in one call.
                done = fast(inputs)
                if done is not None:
                    return done  # type: ignore[no-any-return]
            if self._value_versions:
                self._replan_if_stale()
            return self._runner.run(inputs, True)  # type: ignore[no-any-return]
        finally:
            lock.release()

    def _predict_exact(self, inputs: dict[str, Any]) -> list[np.ndarray] | None:
        """_predict(inputs) on the direct path when inputs holds exactly
        the data inputs, each a C-contiguous numpy array of its bound shape
        and dtype; None (nothing done) otherwise or when the path does not
        apply now: the caller then binds or converts as it does (the ONNX
        backend's run)."""
        lock = self.lock
        lock.acquire()
        try:
            fast = self._runner.exact_predict
            if fast is None or self._value_versions:
                return None
            return fast(inputs)  # type: ignore[no-any-return]
        finally:
            lock.release()

    def _replan_if_stale(self) -> None:
        """Plans again when an argument the shape arithmetic read has been
        written since (weights copied in after simple_bind): the executor
        takes the new plan's state, its arrays stay the same."""
        if not self._value_versions or not any(
                array.version != version for array, version in self._value_versions.values()):
            return
        fresh = Executor(self._symbol, self._ctx, self.arg_dict, self.aux_dict, self._grad_req,
                         self.data_names, self._group2ctx)
        self._runner.close()
        plans, lock = self._plans, self.lock
        self.__dict__.update(fresh.__dict__)
        self._plans, self.lock = plans, lock
        if plans is not None:
            self.share_models(plans.models)
        for array in self.outputs:
            array._storage.guard = lock

    # What acc_host.differential's check() reaches: its checker, on for one
    # forward, and the CPU path it compares a subgraph with.

    @property
    def _differential(self) -> Any:
        return self._runner.differential

    @_differential.setter
    def _differential(self, checker: Any) -> None:
        self._runner.differential = checker

    def _run_on_cpu(self, nodes: Sequence[int], values: dict[int, Value]) -> None:
        self._runner.run_on_cpu(nodes, values)

    def _direct_run(self) -> DirectRun | None:
        return self._runner.direct_run()

    def close(self) -> None:
        """Unloads the accelerator subgraphs now, after pending forwards
        (they are also unloaded when the executor is garbage-collected).
        A failure of a forward stays on the outputs for their waits; the
        copies on the executor's own vars, which nothing else can wait for,
        are dropped (a later mx.nd.waitall() would raise them otherwise)."""
        self._runner.close()

    def share_models(self, models: SharedModels) -> None:
        """Lets this executor's subgraphs use the models loaded by the other
        executors of a plan cache (runtime.shared_models): a subgraph whose
        graph, shapes, dtypes and weight arrays are the same at two shapes
        is loaded once. The PlanCache calls it for the executors it holds."""
        for operator in self._subgraphs:
            operator.share(models)

    @property
    def subgraphs(self) -> list[SubgraphOperator]:
        """The accelerator subgraphs of the plan, in plan order: what the
        device did with each, for tools, tests and benchmarks that observe
        it (``model`` once compiled, ``loads``, ``weight_refreshes``,
        ``declined``, ``library`` and ``dev_id``). Empty on the CPU path."""
        return list(self._subgraphs)

    def bound_step(self, subgraph: SubgraphOperator) -> BoundStep | None:
        """The step of one of :attr:`subgraphs` bound to fixed device buffers
        (a forward runs it as one bound ``infer``), or None while it runs
        unbound: before its model is loaded, or where its inputs and outputs
        cannot be fixed buffers (runtime.runner.Runner says when)."""
        (node,) = [step.node for step in self._steps if step.subgraph is subgraph]
        return self._bound_steps.get(node)

    def placement(self) -> dict[str, str]:
        """Where each operator node runs: "cpu(0)" or "<accelerator>(<dev>)"."""
        where = {self._graph.nodes[k].name: "cpu(0)" for k, node in
                 enumerate(self._graph.nodes) if not node.is_variable}
        for step in self._steps:
            operator = step.subgraph
            if operator is not None and not operator.declined:
                for k in operator.spec.nodes:
                    where[self._graph.nodes[k].name] = str(Context(operator.library.name,
                                                                   operator.dev_id))
        return where

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} @{self._ctx}>"


def _op_of(graph: Graph, name: str) -> str:
    return next((node.op for node in graph.nodes if node.name == name), "?")


def _graph_bytes(graph: Graph, shapes: Sequence[Any], dtypes: Sequence[Any],
                 heads: Sequence[int]) -> tuple[int, int]:
    """(bytes of the outputs, the most bytes one operator's inputs and
    outputs take together) for entries of the given shapes and dtypes."""
    def size(entry: int) -> int:
        shape = shapes[entry]
        return 0 if shape is None else limits.array_bytes(shape, dtypes[entry])

    transient = 0
    for k, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        start = graph.entry_start[k]
        transient = max(transient, sum(map(size, graph.input_entries(k)))
                        + sum(map(size, range(start, start + graph.num_visible(k)))))
    return sum(map(size, dict.fromkeys(heads))), transient


def _check_planned(what: str, bound: int, outputs: int, transient: int, peak: int) -> None:
    """Refuses a bind whose planned total exceeds the memory limit, naming
    its parts (AllocationTooLargeError, before anything is allocated for
    them)."""
    limits.check_bytes(
        bound + outputs + transient + peak,
        f"{what}: the planned memory of the bind and a forward ({bound} bytes of arguments "
        f"and auxiliary states, {outputs} of outputs, {peak} of intermediate results at the "
        f"plan's peak, {transient} for the largest operator's inputs and outputs)")


def _node_contexts(graph: Graph, ctx: Context, group2ctx: Mapping[str, Context]
                   ) -> dict[int, Context]:
    """The context of every operator node: its "__ctx_group__"'s in
    group2ctx, else ctx. Every accelerator among them must be one library
    (an executor drives one plugin)."""
    for group, context in group2ctx.items():
        if not isinstance(context, Context):
            raise GraphError(f"group2ctx[{group!r}] must be a Context, got "
                             f"{type(context).__name__}")
    contexts = {k: group2ctx.get(node.attrs.get("__ctx_group__", ""), ctx)
                for k, node in enumerate(graph.nodes) if not node.is_variable}
    libraries = {context.library.name for context in contexts.values() if context.is_accelerator}
    if len(libraries) > 1:
        raise GraphError(f"one executor drives one accelerator; its operators are placed on "
                         f"{', '.join(sorted(libraries))}")
    return contexts
