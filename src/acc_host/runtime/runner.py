"""The runner: an executor's plan run forward.

One path runs every forward (``Runner.run``): the inputs written into the
arguments, then the plan's steps pushed to the engine (see docs/engine.md),
a CPU step to the CPU workers, a subgraph to its device's worker, each
reading the vars of its inputs (and weights) and writing the vars of its
outputs, so independent branches, and executors on different devices, run
at the same time. A subgraph step whose model is loaded and whose inputs
and outputs are the executor's own device buffers runs as one bound
infer() (acc_host.runtime.bound_step). A synchronous forward of a plan that
is one such subgraph (``Plan.single_subgraph``) runs as one engine
operation granted at once (acc_host.runtime.direct_run) when nothing is
pending on its vars; else it takes the step loop and reads the outputs.
A forward that first compiles a subgraph waits for itself, so compile
errors and fallback warnings reach the caller of that forward.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import engine
from ..abi.tensor import contiguous
from ..context import Context, cpu
from ..errors import GraphError, OperatorError, PluginUnsupportedError, ShapeError, TensorError
from ..graph import Graph
from ..graph.control_flow import ControlFlowOp, dynamic_entries
from ..ndarray import NDArray
from ..ops.params import Attrs
from ..ops.registry import OpDef
from ..trace import recorder as trace_recorder
from .bound_step import BoundStep
from .direct_run import DirectRun, FastForward, FastPredict
from .plan import Plan
from .sparse_cpu import dense_value, is_sparse, sparse_kernel
from .subgraph import SubgraphOperator, Value, to_host

__all__ = ["Runner", "Step"]


@dataclass(frozen=True)
class Step:
    """A step of the plan with what runs it: its CPU operator (``op``,
    ``attrs``), or (with ``subgraph``) its accelerator subgraph's operator."""

    node: int
    op: OpDef | None
    attrs: Attrs | None
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]  # entries read for the last time by this step
    subgraph: SubgraphOperator | None = None


def _input_values(name: str, value: Any, target: NDArray) -> np.ndarray:
    """value (for the argument target) as a host array of target's shape
    and dtype, converted on the caller's thread: a value that cannot be
    converted raises here and leaves the argument as it was."""
    try:
        # An NDArray's elements without a copy (its pending writes waited
        # for): the argument's write copies them.
        source = np.asarray(value)
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
    C-contiguous host array of them (_input_values, the common cases
    first: a numpy array as bound, a whole NDArray in host memory that no
    executor guards, with nothing pending on it, whose elements are read
    without a copy: the argument's write copies them)."""
    if type(value) is NDArray and value._view is None:
        storage = value._storage
        var = storage.var
        host = storage.host
        if (host is not None and storage.guard is None and not var._writing
                and not var._pending and var.exception is None):
            value = host
    if _as_bound(value, spec):
        return value  # type: ignore[no-any-return]
    return contiguous(_input_values(name, value, target))


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
    if is_sparse(array):  # as it is: a subgraph may take it sparse (ABI 1.2)
        return array
    storage = array._storage
    if array._view is None and storage.host is None and storage.device is not None:
        return storage.device
    return array._read()


def _put_stored(values: dict[int, Value], arrays: Sequence[tuple[int, NDArray]]) -> None:
    """Inside a step: the values of bound arrays, by entry, into values."""
    for entry, array in arrays:
        values[entry] = _stored(array)


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


def _write_sized(output: NDArray, value: np.ndarray) -> None:
    """Inside a step: an output whose length a loop decided (ONNX Loop's
    scan outputs) takes value, in new host memory when its length differs
    from the one inferred at bind."""
    storage = output._storage
    current = (storage.host.shape if storage.host is not None
               else storage.device.spec.shape if storage.device is not None else None)
    if output._view is None and current != value.shape:
        storage.host = np.array(value, dtype=value.dtype, copy=True)
        storage.device = None
        return
    output._write_now(value)


def _step_context(step: Step) -> Context:
    """Where a step runs: its subgraph's device, or the CPU."""
    if step.subgraph is None:
        return cpu()
    return Context(step.subgraph.library.name, step.subgraph.dev_id)


def _node_entries(graph: Graph, k: int) -> tuple[int, ...]:
    start = graph.entry_start[k]
    return tuple(range(start, start + graph.num_visible(k)))


class Runner:
    """Runs a plan's steps (``steps``, in the plan's order) for its
    executor (``owner``, handed to a differential check; held weakly): the arguments and
    auxiliary states bound (``arg_dict``, ``aux_dict``) and the executor
    outputs (``outputs``, the plan's heads in order). Everything a forward
    pushes is worked out here once. The caller serializes run() calls."""

    def __init__(self, owner: Any, graph: Graph, plan: Plan, steps: Sequence[Step],
                 arg_dict: Mapping[str, NDArray], aux_dict: Mapping[str, NDArray],
                 outputs: Sequence[NDArray]) -> None:
        # Weakly: the executor owns its runner, and is freed (its buffers and
        # models with it) as soon as it is dropped, not at a later collection.
        self._owner = weakref.ref(owner)
        self.plan = plan
        self.steps = list(steps)
        self.arg_dict = arg_dict
        self.outputs = list(outputs)
        # forward()'s direct path as one call while it applies (see
        # direct_run(); None otherwise: the executor then calls run()).
        self.fast: FastForward | None = None
        self.fast_predict: FastPredict | None = None  # predict()'s, likewise
        self.exact_predict: FastPredict | None = None  # predict()'s of values as bound
        self._differential: Any = None  # acc_host.differential's checker during check()
        self._graph = graph
        self._variables = plan.variables
        self._readers = plan.readers
        self._entry_vars = {entry: engine.Var() for step in self.steps for entry in step.outputs}
        # Vars no one but this executor's steps uses (see drop_stale_failures).
        self._internal_vars = tuple(self._entry_vars.values())
        # What every forward pushes, worked out once: each step's context and
        # output vars; each output is copied out (or written in place) by the
        # step that computes it (no extra operation, no hand-off to another
        # worker); an output that is an argument by an operation of its own.
        self.subgraphs = [step.subgraph for step in self.steps if step.subgraph is not None]
        self._contexts = [_step_context(step) for step in self.steps]
        self._output_vars = [tuple(self._entry_vars[entry] for entry in step.outputs)
                             for step in self.steps]
        self._copies: dict[int | None, list[tuple[NDArray, int]]] = {}
        for output, entry in zip(self.outputs, plan.heads):
            self._copies.setdefault(plan.producer.get(entry), []).append((output, entry))
        self._argument_outputs = tuple(self._copies.get(None, ()))  # outputs that are arguments
        self._compiled = False  # see _push_steps
        # The arrays bound, as in MXNet: writing into arg_dict's arrays
        # changes the next forward; putting another array in the dict does
        # not rebind. So each step's dependencies are worked out once.
        self._bound = {**arg_dict, **aux_dict}
        self._pushes = [self._step_push(index, step) for index, step in enumerate(self.steps)]
        # Per subgraph step (by node), once its model is loaded: a BoundStep,
        # or None where the step cannot run on fixed buffers.
        self.bound_steps: dict[int, BoundStep | None] = {}
        self._direct: DirectRun | None = None  # see direct_run()
        # The control-flow bodies' executors on the accelerator (set by the
        # executor; acc_host.runtime.control_flow), and the entries whose
        # length a loop decides at run time (their outputs are replaced).
        self.bodies: Any = None
        self._dynamic = dynamic_entries(graph)

    @property
    def differential(self) -> Any:
        """acc_host.differential's checker during check(), else None."""
        return self._differential

    @differential.setter
    def differential(self, checker: Any) -> None:
        self._differential = checker
        # a checked forward takes the general path (see direct_run)
        self.fast = self.fast_predict = self.exact_predict = None

    def _step_push(self, index: int, step: Step) -> _Push:
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

    def run(self, inputs: Mapping[str, Any], synchronous: bool) -> Any:
        """The one forward: the plan run on inputs, asynchronously (the
        outputs, their values pending in the engine) or synchronously (the
        outputs' values as new host arrays). How it runs is the plan's
        property: a single-subgraph plan whose step runs on fixed buffers
        runs a synchronous forward as one bound call, granted by the engine
        at once (acc_host.runtime.direct_run), whenever nothing is pending
        on its vars and its buffers and weights are current; every other
        forward pushes the plan's steps (each subgraph step itself one
        bound call when it runs on fixed buffers)."""
        direct = self._direct
        if (direct is None or self.differential is not None  # the common case first
                or self.bound_steps.get(self.steps[0].node) is not direct.step):
            direct = self.direct_run()
        if direct is not None and inputs.keys() <= direct.inputs.keys():
            # The inputs as they are when every one is already as bound
            # (no new mapping per inference), else each converted.
            specs, values = direct.specs, inputs
            for name, value in inputs.items():
                spec = specs[name]
                if not (type(value) is np.ndarray and value.shape == spec[0]
                        and value.dtype == spec[1] and value.flags.c_contiguous):
                    values = {key: _direct_value(key, item, specs[key], direct.inputs[key])
                              for key, item in inputs.items()}
                    break
            if synchronous:
                results = direct.run(values)
                if results is not None:
                    return results
            else:
                outcome = direct.forward(values)
                if outcome is True:
                    return self.outputs
                if outcome is not False:
                    self.fail_forward(outcome)
                    return self.outputs
        outputs = self._push_steps(inputs)
        if not synchronous:
            return outputs
        try:
            return [output.asnumpy() for output in outputs]
        except Exception:
            # Raised to the caller here: not left on the executor's own
            # vars for a later, unrelated mx.nd.waitall().
            self.drop_stale_failures()
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
                self.drop_stale_failures()
                break
        run = _Forward(self._readers)
        current = engine.get()
        compiling = False
        if not self._compiled:  # until every subgraph was loaded (or declined), for good
            compiling = any(operator.loads == 0 and not operator.declined
                            for operator in self.subgraphs)
            self._compiled = not compiling
        for step, push in zip(self.steps, self._pushes):
            current.push_sync_normalized(self._step_function(step, push, run),
                                         push.context, push.reads, push.writes)
        for output, entry in self._argument_outputs:
            current.push_sync(self._output_function(output, entry, run), cpu(),
                              [self._var(entry)], [output._var])
        if compiling:
            for output in self.outputs:
                output.wait_to_read()
        return self.outputs

    def fail_forward(self, failure: BaseException) -> None:
        """Reports the failure of a forward's direct run as a failed step
        of the general path does: an operation that fails with it, writing
        the executor's own vars and the outputs' (ThreadedEngine keeps it
        there for their waits; NaiveEngine raises it here). The direct
        path is made anew at the next forward that takes it (its callables
        resolved again)."""
        def fail(_run_ctx: engine.RunContext) -> None:
            raise failure

        self._direct = self.fast = self.fast_predict = self.exact_predict = None

        current = engine.get()
        current.push_sync_normalized(fail, self._contexts[0], (), tuple(dict.fromkeys(
            (*self._internal_vars, *(output._var for output in self.outputs)))))

    def direct_run(self) -> DirectRun | None:
        """The one-call run of a single-subgraph plan, once its step has
        run on fixed buffers (None before, for other plans, and during a
        differential check)."""
        direct = self._direct
        if (direct is not None and self.differential is None  # the common case, unless
                and self.bound_steps.get(self.steps[0].node) is direct.step):  # bound again
            return direct
        if not self.plan.single_subgraph or self.differential is not None:
            return None
        step, push = self.steps[0], self._pushes[0]
        bound = self.bound_steps.get(step.node)
        if bound is None or step.subgraph is None:
            return None
        inputs = {self._variables[entry]: array for entry, array in push.fetch}
        self._direct = DirectRun(step.subgraph, bound, push.context, inputs, self.outputs,
                                 push.reads, push.writes, _direct_value,
                                 self.fail_forward)
        self.fast, self.fast_predict = self._direct.fast, self._direct.fast_predict
        self.exact_predict = self._direct.exact_predict
        return self._direct

    def drop_stale_failures(self) -> None:
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

    def _step_function(self, step: Step, push: _Push, run: _Forward) -> engine.base.SyncFn:
        def run_step(_run_ctx: engine.RunContext) -> None:
            values = run.values
            operator = step.subgraph
            if operator is not None and not operator.declined:
                bound = self.bound_steps.get(step.node)
                if bound is not None and self.differential is None and bound.ready(operator):
                    bound.infer.run()  # ready() checked its buffers
                    run.done_with(push.done)
                    return
                # The differential check reads every input, weights included.
                _put_stored(values, push.fetch if self.differential is None
                            else push.variables)
                written = _targets(operator, push.outputs)
                values.update(self._run_subgraph(
                    operator, push, values,
                    {entry: target for entry, (_, target) in written.items()}))
                if operator.loads and (step.node not in self.bound_steps if bound is None
                                       else bound.infer.model is not operator.model):
                    # First loaded, or loaded again (close() or a reload):
                    # bound to the model now loaded.
                    self.bound_steps[step.node] = self._bind_step(step, push, written)
                    # bound again: direct_run() makes the path anew
                    self.fast = self.fast_predict = self.exact_predict = None
            else:
                _put_stored(values, push.variables)
                written = {}
                self.run_on_cpu(operator.spec.nodes if operator is not None else (step.node,),
                                 values)
            for output, entry in push.outputs:
                target = written.get(entry)
                if entry in self._dynamic:
                    _write_sized(output, np.asarray(dense_value(to_host(values[entry]))))
                elif target is None or target[0] is not output or values[entry] is not target[1]:
                    output._write_now(np.asarray(dense_value(to_host(values[entry]))))
                # else the subgraph wrote this output in place
            run.done_with(push.done)

        return run_step

    def _bind_step(self, step: Step, push: _Push,
                   written: Mapping[int, tuple[NDArray, Value]]) -> BoundStep | None:
        """The subgraph step on fixed buffers, where it can run so (see
        BoundStep): a device-memory plugin, every data input a bound
        argument and every output an executor output (one each) in its
        device's buffers, nothing else reading the outputs, no differential
        check."""
        operator = step.subgraph
        assert operator is not None
        if operator.declined or not operator.device_memory or self.differential is not None:
            return None
        inputs = dict(push.fetch)
        if len(inputs) != len(operator._data_entries):
            return None
        arrays = [*inputs.values(), *(output for output, _ in written.values())]
        if any(array._view is not None or array._storage.host is not None
               or not operator.on_device(array._storage.device) for array in arrays):
            return None
        if (set(written) != set(step.outputs) or len(push.outputs) != len(written)
                or any(entry in other.inputs for other in self.steps if other is not step
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
            output._write_now(np.asarray(dense_value(to_host(value))))

        return copy_out

    def run_on_cpu(self, nodes: Sequence[int], values: dict[int, Value]) -> None:
        graph = self._graph
        tracer = trace_recorder.current()
        for k in nodes:
            op, attrs = graph.ops[k], graph.attrs[k]
            assert op is not None and attrs is not None
            start = tracer.now() if tracer is not None else 0
            try:
                arrays = [to_host(values[entry]) for entry in graph.input_entries(k)]
                sparse = None
                if any(is_sparse(array) for array in arrays):  # a sparse argument (ABI 1.2)
                    sparse = sparse_kernel(graph.nodes[k].op, graph.nodes[k].attrs, arrays)
                    arrays = [dense_value(array) for array in arrays] if sparse is None else arrays
                if sparse is not None:
                    results = sparse
                elif self.bodies is not None and isinstance(op, ControlFlowOp):
                    results = op.execute(attrs, arrays, self.bodies.runner(k, op))
                else:
                    results = op.compute(attrs, arrays)
            except OperatorError as error:  # the values a forward met: name the node
                if type(error) not in (OperatorError, ShapeError):
                    raise
                raise type(error)(f"node {graph.nodes[k].name!r} ({graph.nodes[k].op}): "
                                  f"{error}") from None
            values.update(zip(_node_entries(self._graph, k), results))
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
            if self.differential is not None:
                self.differential.after_subgraph(self._owner(), operator, values, self._bound,
                                                 produced)
            return produced
        except PluginUnsupportedError as error:
            if operator.loads:
                raise
            operator.decline(str(error))
            _put_stored(values, push.variables)
            self.run_on_cpu(operator.spec.nodes, values)
            return {}

    def close(self) -> None:
        """Unloads the subgraphs now, after pending forwards. A failure of a
        forward stays on the outputs for their waits; the copies on the
        executor's own vars, which nothing else can wait for, are dropped (a
        later mx.nd.waitall() would raise them otherwise)."""
        self.fast = self.fast_predict = self.exact_predict = None
        engine.drain()
        if any(var.exception is not None for var in self._internal_vars):
            self.drop_stale_failures()
        for operator in self.subgraphs:
            operator.close()
        if self.bodies is not None:
            self.bodies.close()
