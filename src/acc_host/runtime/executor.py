"""Executors: a symbol bound to arrays and run forward.

Binding infers every shape and dtype once, partitions the graph when the
context is an accelerator (asking its supportedOps(), see
acc_host.partition.segment), and plans the forward (acc_host.runtime.plan, a
pure function of the graph and the partition): a flat list of steps, CPU
operators and subgraph operators (acc_host.runtime.subgraph). Running the
plan keeps an intermediate result only until its last reader has run, so
memory is reused as soon as lifetimes allow; ``memory_report()`` gives the
planned peak next to what keeping every intermediate would cost.

``forward()`` pushes every step to the engine (see docs/engine.md): a CPU
step to the CPU workers, a subgraph to its device's worker, each reading
the vars of its inputs (and weights) and writing the vars of its outputs,
so independent branches, and executors on different devices, run at the
same time. The outputs are read like any NDArray (``asnumpy()`` waits). A
forward that first compiles a subgraph waits for itself, so compile errors
and fallback warnings reach the caller of that forward.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import engine, limits
from ..abi.annotate import annotate_symbol
from ..abi.tensor import TensorSpec, contiguous, dtype_code
from ..context import Context, cpu
from ..errors import (
    GraphError,
    OperatorError,
    PluginContractError,
    PluginUnsupportedError,
    ShapeError,
    TensorError,
)
from ..graph import Graph
from ..ndarray import NDArray, zeros
from ..ops.params import Attrs
from ..ops.registry import OpDef
from ..partition.offload import costs_of
from ..partition.segment import Partition, offerable_region, partition_graph, region_graph
from ..trace import recorder as trace_recorder
from .bound_step import BoundStep
from .direct_run import DirectRun
from .plan import Plan, PlanStep, make_plan
from .subgraph import SubgraphOperator, Value, to_host

__all__ = ["Executor"]


@dataclass(frozen=True)
class _Step:
    """One CPU operator, or (with ``subgraph``) one accelerator subgraph."""

    node: int
    op: OpDef | None
    attrs: Attrs | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]  # entries read for the last time by this step
    subgraph: SubgraphOperator | None = None


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


def _input_values(name: str, value: Any, target: NDArray) -> np.ndarray:
    """value (for the argument target) as a host array of target's shape
    and dtype, converted on the caller's thread: a value that cannot be
    converted raises here and leaves the argument as it was."""
    try:
        source = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
        shape, dtype = target.shape, target.dtype
        if source.shape != shape:
            raise ShapeError(f"forward: {name!r} has shape {source.shape}, the executor was "
                             f"bound with {shape}")
        return source if source.dtype == dtype else source.astype(dtype)
    except (TypeError, ValueError, OverflowError) as error:
        if isinstance(error, ShapeError):
            raise
        raise TensorError(f"forward: {name!r} cannot be converted to the bound dtype "
                          f"{target.dtype}: {error}") from None


def _as_bound(value: Any, spec: tuple[tuple[int, ...], np.dtype]) -> bool:
    """Whether value is already a C-contiguous host array of spec, the
    (shape, dtype) an argument was bound with."""
    return (type(value) is np.ndarray and value.shape == spec[0] and value.dtype == spec[1]
            and value.flags.c_contiguous)


def _direct_value(name: str, value: Any, spec: tuple[tuple[int, ...], np.dtype],
                  target: NDArray) -> np.ndarray:
    """value for the argument target, whose (shape, dtype) is spec, as a
    C-contiguous host array of them (_input_values, the common case first)."""
    if _as_bound(value, spec):
        return value
    return contiguous(_input_values(name, value, target))


def _has_dtype_code(dtype: Any) -> bool:
    """Whether the ABI has a TensorDType for dtype."""
    if dtype is None:
        return False
    try:
        dtype_code(dtype)
    except TensorError:
        return False
    return True


class _Forward:
    """The values of one forward while its steps run: each intermediate is
    dropped when the last step reading it is done (steps may finish in any
    order, so readers are counted rather than planned)."""

    def __init__(self, readers: Mapping[int, int]) -> None:
        self.values: dict[int, Value] = {}
        self._remaining = dict(readers)
        self._lock = threading.Lock()

    def done_with(self, entries: Sequence[int]) -> None:
        with self._lock:
            for entry in entries:
                left = self._remaining[entry] - 1
                self._remaining[entry] = left
                if left <= 0:
                    self.values.pop(entry, None)


@dataclass(frozen=True)
class _Push:
    """What a forward pushes for one step, worked out at bind: its context
    and (normalized) dependencies, the executor outputs it writes, the
    bound arrays it reads (``fetch``: those it needs when it runs on an
    accelerator, the data; ``variables``: all of them, for the CPU), and
    the entries it is done with."""

    context: Context
    reads: tuple[engine.Var, ...]
    writes: tuple[engine.Var, ...]
    outputs: tuple[tuple[NDArray, int], ...]
    fetch: tuple[tuple[int, NDArray], ...]
    variables: tuple[tuple[int, NDArray], ...]
    done: tuple[int, ...]


def _stored(array: NDArray) -> Value:
    """An argument's value where it lives: its device buffer when it is in
    accelerator memory (copied to the host only if a CPU operator reads it),
    else its host array."""
    storage = array._storage
    if array._view is None and storage.host is None:
        return storage.device
    return array._read()


def _put_stored(values: dict[int, Value], arrays: Sequence[tuple[int, NDArray]]) -> None:
    """Inside a step: the values of bound arrays, by entry, into values."""
    for entry, array in arrays:
        values[entry] = _stored(array)


class Executor:
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
        self._differential: Any = None  # acc_host.differential's checker during check()
        self._heads = [graph.entry(node, output) for node, output in symbol._outputs]
        self.data_names = [name for name in (data_names if data_names is not None else ["data"])
                           if name in arg_dict]
        accelerated = [context for context in self._node_ctx.values() if context.is_accelerator]
        self.partition: Partition | None = self._partition() if accelerated else None
        self.plan: Plan = make_plan(graph, self.partition, self._heads)
        self._variables = self.plan.variables
        self._steps = [self._step(step) for step in self.plan.steps]
        self._entry_vars = {entry: engine.Var() for step in self._steps for entry in step.outputs}
        # Vars no one but this executor's steps uses (see _drop_stale_failures).
        self._internal_vars = tuple(self._entry_vars.values())
        self._producer = self.plan.producer
        self._readers = self.plan.readers
        report = self.memory_report()
        _check_planned(f"binding {symbol.name or 'the symbol'}", report["bound"],
                       report["outputs"], report["transient"], report["planned_peak"])
        self.outputs = [zeros(shapes[entry], ctx, dtypes[entry]) for entry in self._heads]
        self.output_dict = dict(zip(symbol.list_outputs(), self.outputs))
        # What every forward pushes, worked out once: each step's context and
        # output vars; each output is copied out (or written in place) by the
        # step that computes it (no extra operation, no hand-off to another
        # worker); an output that is an argument by an operation of its own.
        self._subgraphs = [step.subgraph for step in self._steps if step.subgraph is not None]
        self._contexts = [self._step_context(step) for step in self._steps]
        self._output_vars = [tuple(self._entry_vars[entry] for entry in step.outputs)
                             for step in self._steps]
        self._copies: dict[int | None, list[tuple[NDArray, int]]] = {}
        for output, entry in zip(self.outputs, self._heads):
            self._copies.setdefault(self._producer.get(entry), []).append((output, entry))
        # The arrays bound, as in MXNet: writing into arg_dict's arrays
        # changes the next forward; putting another array in the dict does
        # not rebind. So each step's dependencies are worked out once.
        self._bound = {**arg_dict, **aux_dict}
        self._pushes = [self._step_push(index, step) for index, step in enumerate(self._steps)]
        # Per subgraph step (by node), once its model is loaded: a BoundStep,
        # or None where the step cannot run on fixed buffers.
        self._bound_steps: dict[int, BoundStep | None] = {}
        self._direct: DirectRun | None = None  # see predict()
        # Serializes forward() calls (see forward); public, so that a thread
        # can pair its forward with the reading of its outputs.
        self.lock = threading.RLock()
        # Writes into the bound arrays from other threads hold the lock while
        # they are pushed (NDArray._write, _push_write), reads of them and of
        # the outputs while they copy (NDArray._reading): a forward sees one
        # whole version of each argument and weight, a read one whole
        # forward's output (the first executor an array is bound to guards it).
        for array in (*self._bound.values(), *self.outputs):
            if array._storage.guard is None:
                array._storage.guard = self.lock

    # ---- binding -----------------------------------------------------------------------

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
        arg_dict = {name: zeros(shape, ctx, dtype)
                    for name, shape, dtype in zip(arg_names, arg_shapes, arg_types)}
        aux_dict = {name: zeros(shape, ctx, dtype)
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
                        keep_or_new(self.aux_dict, aux_names, aux_shapes), self._grad_req,
                        self.data_names, self._group2ctx)

    # ---- planning -----------------------------------------------------------------------

    def _partition(self) -> Partition:
        """Asks the accelerator which nodes it runs on each device the
        operators are placed on, and splits the graph."""
        graph = self._graph
        contexts = [context for context in self._node_ctx.values() if context.is_accelerator]
        library = contexts[0].library
        devices = sorted({context.device_id for context in contexts})
        weights = frozenset(set(self.arg_dict) - set(self.data_names)) | frozenset(self.aux_dict)
        supported = {dev_id: self._supported_ops(library, dev_id, weights) for dev_id in devices}
        placement = {k: context.device_id if context.is_accelerator else None
                     for k, context in self._node_ctx.items()}
        costs = {dev_id: costs_of(library, dev_id) for dev_id in devices}
        return partition_graph(graph, library.name, lambda dev_id: supported[dev_id], devices,
                               self._shapes, self._dtypes, weights, placement, costs.get)

    def _supported_ops(self, library: Any, dev_id: int, weights: frozenset[str]) -> list[int]:
        """supportedOps() of the graph annotated for device dev_id (weights:
        the arguments and auxiliary states that are not data): the operator
        nodes the plugin runs there."""
        graph = self._graph
        shapes = {name: array.shape for name, array in {**self.arg_dict, **self.aux_dict}.items()}
        dtypes = {name: array.dtype for name, array in {**self.arg_dict, **self.aux_dict}.items()}
        data = {name: TensorSpec(self.arg_dict[name].shape, self.arg_dict[name].dtype)
                for name in self.data_names if _has_dtype_code(self.arg_dict[name].dtype)}
        region = offerable_region(graph, self._dtypes, _has_dtype_code)
        operators = sum(1 for node in graph.nodes if not node.is_variable)
        variables_ok = all(_has_dtype_code(self._dtypes[graph.entry_start[k]])
                           for k, node in enumerate(graph.nodes) if node.is_variable)
        if len(region) == operators and variables_ok:
            annotated = annotate_symbol(self._symbol, shapes, weights, dtypes, dev_id)
            ids = library.supported_ops(json.dumps(annotated), data, len(graph.nodes), dev_id)
            listed = [k for k in ids if graph.nodes[k].is_variable]
        elif region:
            # Some values have dtypes the ABI cannot describe: offer the
            # plugin only the region around them.
            annotated, to_graph = region_graph(graph, region, self._shapes, self._dtypes,
                                               weights, dev_id)
            names = {node["name"] for node in annotated["nodes"] if node["op"] == "null"}
            local = library.supported_ops(json.dumps(annotated),
                                          {k: v for k, v in data.items() if k in names},
                                          len(annotated["nodes"]), dev_id)
            listed = [k for k in local if k not in to_graph]
            ids = [to_graph[k] for k in local if k in to_graph]
        else:
            ids, listed = [], []
        if listed:
            raise PluginContractError(
                f"{library.name}: supportedOps() listed variable nodes {listed}; only "
                "operator nodes may be listed")
        return list(ids)

    def _step(self, step: PlanStep) -> _Step:
        """A step of the plan with what runs it: the CPU operator, or the
        subgraph operator of its spec on its device (loaded at its first
        forward)."""
        graph, spec = self._graph, step.subgraph
        if spec is None:
            return _Step(step.node, graph.ops[step.node], graph.attrs[step.node], step.inputs,
                         step.outputs, step.release)
        device = self._device_context(spec.device_class)
        return _Step(step.node, None, None, step.inputs, step.outputs, step.release,
                     SubgraphOperator(device.library, spec, device.device_id))

    def _step_push(self, index: int, step: _Step) -> _Push:
        bound = self._bound
        reads = [self._var(entry) for entry in step.inputs]
        if step.subgraph is not None:
            reads += [bound[name]._var for name in step.subgraph.spec.weights]
        outputs = tuple(self._copies.get(index, ()))
        const, mutate = engine.base.normalize_vars(
            reads, [*self._output_vars[index], *(output._var for output, _ in outputs)])
        variables = tuple((entry, bound[self._variables[entry]]) for entry in step.inputs
                          if entry in self._variables)
        if step.subgraph is not None:
            data = {entry for _, entry in step.subgraph._data_entries}
            fetch = tuple(item for item in variables if item[0] in data)
        else:
            fetch = variables
        done = tuple([entry for entry in set(step.inputs) if entry in self._readers]
                     + [entry for entry in step.outputs if self._readers.get(entry) == 0])
        return _Push(self._contexts[index], const, mutate, outputs, fetch, variables, done)

    def _device_context(self, device_class: int) -> Context:
        assert self.partition is not None
        library = next(c for c in self._node_ctx.values() if c.is_accelerator).library
        return Context(library.name, self.partition.devices[device_class - 1])

    def _step_context(self, step: _Step) -> Context:
        """Where a step runs: its subgraph's device, or the CPU."""
        if step.subgraph is None:
            return cpu()
        return Context(step.subgraph.library.name, step.subgraph.dev_id)

    def _node_entries(self, k: int) -> tuple[int, ...]:
        start = self._graph.entry_start[k]
        return tuple(range(start, start + self._graph.num_visible(k)))

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
        with self.lock:
            return self._run(kwargs, synchronous=False)

    def predict(self, **inputs: Any) -> list[np.ndarray]:
        """forward(**inputs), then every output as a new numpy array: a
        synchronous inference, with forward()'s effects (the arguments hold
        the inputs, the outputs the results). A failure is raised here and
        not left on the executor's arrays."""
        return self._predict(inputs)

    def _predict(self, inputs: Mapping[str, Any]) -> list[np.ndarray]:
        """predict(**inputs) for a mapping of them."""
        with self.lock:
            return self._run(inputs, synchronous=True)

    def _run(self, inputs: Mapping[str, Any], synchronous: bool) -> Any:
        """The one forward: the plan run on inputs, asynchronously (the
        outputs, their values pending in the engine) or synchronously (the
        outputs' values as new host arrays). How it runs is the plan's
        property: a single-subgraph plan whose step runs on fixed buffers
        runs a synchronous forward as one bound call, granted by the engine
        at once (acc_host.runtime.direct_run), whenever nothing is pending
        on its vars and its buffers and weights are current; every other
        forward pushes the plan's steps (each subgraph step itself one
        bound call when it runs on fixed buffers)."""
        if synchronous:
            direct = self._direct_run()
            if direct is not None and inputs.keys() <= direct.inputs.keys():
                # The inputs as they are when every one is already as bound
                # (no new mapping per inference), else each converted.
                specs, values = direct.specs, inputs
                for name, value in inputs.items():
                    if not _as_bound(value, specs[name]):
                        values = {key: _direct_value(key, item, specs[key], direct.inputs[key])
                                  for key, item in inputs.items()}
                        break
                results = direct.run(values)
                if results is not None:
                    return results
        outputs = self._push_steps(inputs)
        if not synchronous:
            return outputs
        try:
            return [output.asnumpy() for output in outputs]
        except Exception:
            # Raised to the caller here: not left on the executor's own
            # vars for a later, unrelated mx.nd.waitall().
            self._drop_stale_failures()
            raise

    def _push_steps(self, inputs: Mapping[str, Any]) -> list[NDArray]:
        """The inputs written into the arguments, then every step of the
        plan pushed to the engine; the outputs."""
        for name, value in inputs.items():
            if name not in self.arg_dict:
                raise GraphError(f"forward: {name!r} is not an argument "
                                 f"({', '.join(self.arg_dict)})")
            target = self.arg_dict[name]
            source = _input_values(name, value, target)
            target._write(source)
        for var in self._internal_vars:
            if var.exception is not None:
                self._drop_stale_failures()
                break
        run = _Forward(self._readers)
        current = engine.get()
        compiling = any(operator.loads == 0 and not operator.declined
                        for operator in self._subgraphs)
        for step, push in zip(self._steps, self._pushes):
            current.push_sync_normalized(self._step_function(step, push, run),
                                         push.context, push.reads, push.writes)
        for output, entry in self._copies.get(None, ()):
            current.push_sync(self._output_function(output, entry, run), cpu(),
                              [self._var(entry)], [output._var])
        if compiling:
            for output in self.outputs:
                output.wait_to_read()
        return self.outputs

    def _direct_run(self) -> DirectRun | None:
        """The one-call run of a single-subgraph plan, once its step has
        run on fixed buffers (None before, for other plans, and during a
        differential check)."""
        direct = self._direct
        if (direct is not None and self._differential is None  # the common case, unless
                and self._bound_steps.get(self._steps[0].node) is direct.step):  # bound again
            return direct
        if not self.plan.single_subgraph or self._differential is not None:
            return None
        step, push = self._steps[0], self._pushes[0]
        bound = self._bound_steps.get(step.node)
        if bound is None or step.subgraph is None:
            return None
        inputs = {self._variables[entry]: array for entry, array in push.fetch}
        self._direct = DirectRun(step.subgraph, bound, push.context, inputs, self.outputs,
                                 push.reads, push.writes)
        return self._direct

    def _drop_stale_failures(self) -> None:
        """Forgets the failure a failed forward left on the executor's own
        vars. ThreadedEngine stores a failure on every var the failed step
        (and each step after it) writes, and skips any later operation that
        touches such a var, so without this every later forward would fail
        the same way. Nothing is lost: the failure reached the outputs
        (every step leads to one), which keep it until a wait reports it."""
        current = engine.get()
        for var in self._internal_vars:
            if var.exception is not None:
                try:
                    current.wait_for_var(var)  # after the failed forward; clears the failure
                except Exception:  # the failure the outputs report
                    pass

    def _var(self, entry: int) -> engine.Var:
        name = self._variables.get(entry)
        return self._bound[name]._var if name is not None else self._entry_vars[entry]

    def _step_function(self, step: _Step, push: _Push, run: _Forward) -> engine.base.SyncFn:
        def run_step(_run_ctx: engine.RunContext) -> None:
            values = run.values
            operator = step.subgraph
            if operator is not None and not operator.declined:
                bound = self._bound_steps.get(step.node)
                if bound is not None and self._differential is None and bound.ready(operator):
                    bound.infer.run()  # ready() checked its buffers
                    run.done_with(push.done)
                    return
                # The differential check reads every input, weights included.
                _put_stored(values, push.fetch if self._differential is None
                            else push.variables)
                written = _targets(operator, push.outputs)
                values.update(self._run_subgraph(
                    operator, push, values,
                    {entry: target for entry, (_, target) in written.items()}))
                if operator.loads and (step.node not in self._bound_steps if bound is None
                                       else bound.infer.model is not operator.model):
                    # First loaded, or loaded again (close() or a reload):
                    # bound to the model now loaded.
                    self._bound_steps[step.node] = self._bind_step(step, push, written)
            else:
                _put_stored(values, push.variables)
                written = {}
                self._run_on_cpu(operator.spec.nodes if operator is not None else (step.node,),
                                 values)
            for output, entry in push.outputs:
                target = written.get(entry)
                if target is None or target[0] is not output or values[entry] is not target[1]:
                    output._write_now(np.asarray(to_host(values[entry])))
                # else the subgraph wrote this output in place
            run.done_with(push.done)

        return run_step

    def _bind_step(self, step: _Step, push: _Push,
                   written: Mapping[int, tuple[NDArray, Value]]) -> BoundStep | None:
        """The subgraph step on fixed buffers, where it can run so (see
        BoundStep): a device-memory plugin, every data input a bound
        argument and every output an executor output (one each) in its
        device's buffers, nothing else reading the outputs, no differential
        check."""
        operator = step.subgraph
        assert operator is not None
        if operator.declined or not operator.device_memory or self._differential is not None:
            return None
        inputs = dict(push.fetch)
        if len(inputs) != len(operator._data_entries):
            return None
        arrays = [*inputs.values(), *(output for output, _ in written.values())]
        if any(array._view is not None or array._storage.host is not None
               or not operator.on_device(array._storage.device) for array in arrays):
            return None
        if (set(written) != set(step.outputs) or len(push.outputs) != len(written)
                or any(entry in other.inputs for other in self._steps if other is not step
                       for entry in step.outputs)):
            return None
        infer = operator.bind_buffers(
            {entry: array._storage.device for entry, array in inputs.items()},
            {entry: output._storage.device for entry, (output, _) in written.items()})
        return BoundStep(infer, arrays)

    def _output_function(self, output: NDArray, entry: int,
                         run: _Forward) -> engine.base.SyncFn:
        name = self._variables.get(entry)

        def copy_out(_run_ctx: engine.RunContext) -> None:
            value = _stored(self._bound[name]) if name is not None else run.values[entry]
            output._write_now(np.asarray(to_host(value)))

        return copy_out

    def _run_on_cpu(self, nodes: Sequence[int], values: dict[int, Value]) -> None:
        graph = self._graph
        tracer = trace_recorder.current()
        for k in nodes:
            op, attrs = graph.ops[k], graph.attrs[k]
            assert op is not None and attrs is not None
            start = tracer.now() if tracer is not None else 0
            try:
                results = op.compute(attrs, [to_host(values[entry])
                                             for entry in graph.input_entries(k)])
            except OperatorError as error:  # the values a forward met: name the node
                if type(error) not in (OperatorError, ShapeError):
                    raise
                raise type(error)(f"node {graph.nodes[k].name!r} ({graph.nodes[k].op}): "
                                  f"{error}") from None
            values.update(zip(self._node_entries(k), results))
            if tracer is not None:
                tracer.span("cpu_op", f"{graph.nodes[k].op} {graph.nodes[k].name}", start,
                            tracer.now())

    def _run_subgraph(self, operator: SubgraphOperator, push: _Push,
                      values: dict[int, Value], targets: Mapping[int, Value]
                      ) -> dict[int, Value]:
        """The subgraph on the accelerator (writing the outputs in targets in
        place); if the plugin declines to compile it after all
        (MX_ACC_ERR_UNSUPPORTED from loadModel), its operators run on the CPU
        from then on, as the ABI promises."""
        try:
            produced = operator.forward(values, self._bound, targets)
            if self._differential is not None:
                self._differential.after_subgraph(self, operator, values, self._bound, produced)
            return produced
        except PluginUnsupportedError as error:
            if operator.loads:
                raise
            operator.decline(str(error))
            _put_stored(values, push.variables)
            self._run_on_cpu(operator.spec.nodes, values)
            return {}

    def close(self) -> None:
        """Unloads the accelerator subgraphs now, after pending forwards
        (they are also unloaded when the executor is garbage-collected).
        A failure of a forward stays on the outputs for their waits; the
        copies on the executor's own vars, which nothing else can wait for,
        are dropped (a later mx.nd.waitall() would raise them otherwise)."""
        engine.drain()
        if any(var.exception is not None for var in self._internal_vars):
            self._drop_stale_failures()
        for step in self._steps:
            if step.subgraph is not None:
                step.subgraph.close()

    def placement(self) -> dict[str, str]:
        """Where each operator node runs: "cpu(0)" or "<accelerator>(<dev>)"."""
        where = {self._graph.nodes[k].name: "cpu(0)" for k, node in
                 enumerate(self._graph.nodes) if not node.is_variable}
        for step in self._steps:
            if step.subgraph is not None and not step.subgraph.declined:
                for k in step.subgraph.spec.nodes:
                    where[self._graph.nodes[k].name] = str(self._step_context(step))
        return where

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} @{self._ctx}>"


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


def _targets(operator: SubgraphOperator, outputs: Sequence[tuple[NDArray, int]]
             ) -> dict[int, tuple[NDArray, Value]]:
    """The executor outputs a subgraph can write in place, by entry (one
    output per entry): the output and its device buffer when it lives on the
    subgraph's device, or its host array when the plugin works in host
    memory. The others are copied after the subgraph ran."""
    targets: dict[int, tuple[NDArray, Value]] = {}
    for output, entry in outputs:
        storage = output._storage
        if output._view is not None or entry in targets:
            continue
        if operator.device_memory:
            if storage.host is None and operator.on_device(storage.device):
                targets[entry] = (output, storage.device)
        elif storage.host is not None and storage.host.flags.c_contiguous:
            targets[entry] = (output, storage.host)
    return targets


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
