"""Imperative operators on accelerator contexts: where they run, and running
them there.

:func:`run_on_context` is what ``mx.nd.<Op>(...)`` does (through
``ndarray.invoke``) for arrays on an accelerator context. It works on
:class:`Operand` inputs (an array's shape and dtype, and its device buffer
or host values when the call needs them) and returns device buffers or host
arrays, which ``ndarray`` turns into NDArrays:

* A plugin with imperative mode (supportsImperative() == 1) runs the operator
  through an :class:`~acc_host.abi.operator_executor.OperatorExecutor` made by accGetExecutor().
  Inputs are the arrays' device buffers (arrays in host memory are copied in
  for the call); outputs are new device buffers, adopted by the returned
  NDArrays without a copy.
* A symbolic-only plugin runs a one-operator graph
  (:func:`acc_host.graph.one_op.one_op_graph`): variables ``arg0`` ..
  ``arg<N-1>`` feeding the operator node, compiled with loadModel() and run
  with infer() on host arrays. Every variable is marked "data", weights
  included: the values change from call to call while the compiled model is
  reused, so a plugin must never fold them in at compile time.
* When the plugin declines (PluginUnsupportedError from accGetExecutor() or
  loadModel(), or supportedOps() leaving the operator out), or a shape or
  dtype cannot be described to it, :func:`run_on_context` returns None and
  the caller runs the operator on the CPU.

Executors, models and refusals are cached per device, keyed by the operator,
its attribute strings (``__op_version__`` included) and the input shapes and
dtypes, so a repeated call neither recompiles nor asks again. Each device's
cache holds at most :data:`CACHE_CAPACITY` signatures; the least recently
used one is dropped beyond that, releasing its executor or unloading its
model. :func:`clear_cache` drops them all. Calls for one device run under
that device's lock, so an entry is never released while it runs.

:func:`stats` reports per context: calls that ran on the accelerator,
fallbacks to the CPU, cache hits and misses, compiles (executors created and
models loaded), refusals, evictions, and the number of cached signatures.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import engine
from ..abi.library import AccLibrary
from ..abi.loaded_model import LoadedModel
from ..abi.memory import DeviceBuffer, release_pooled
from ..abi.operator_executor import OperatorExecutor
from ..abi.operator_versions import OP_VERSION_ATTR, OP_VERSIONS, op_version
from ..abi.tensor import TensorSpec
from ..context import Context
from ..errors import ContextError, OperatorError, PluginUnsupportedError, TensorError
from ..graph.one_op import one_op_graph
from ..ops.params import Attrs
from ..ops.registry import OpDef

__all__ = ["Operand", "Prepared", "Result", "prepare", "run_prepared", "run_prepared_buffers",
           "run_on_context", "stats",
           "clear_cache", "CACHE_CAPACITY"]

_VERSIONS = OP_VERSIONS  # op_version(name) is _VERSIONS.get(name, 1)

# Signatures cached per device (executors, models and refusals alike).
CACHE_CAPACITY = 256

STAT_KEYS = ("accelerator_calls", "fallbacks", "cache_hits", "cache_misses", "compiles",
             "declined", "evictions")

# (operator, sorted attribute strings, (shape, dtype) of each input): plain
# tuples, which hash in C on every lookup.
Signature = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[tuple[int, ...], np.dtype], ...]]
# An output: a new device buffer of the context's device (imperative mode) or
# a host array (a one-operator model).
Result = DeviceBuffer | np.ndarray


class Operand:
    """An operator input: its shape and dtype, and, read only when the call
    needs them, the device buffer holding it (None when it lives in host
    memory) and its values as a host array. (A plain class with slots: one
    is made per input of every call.)"""

    __slots__ = ("shape", "dtype", "device_buffer", "host_values")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype,
                 device_buffer: Callable[[], DeviceBuffer | None],
                 host_values: Callable[[], np.ndarray]) -> None:
        self.shape = shape
        self.dtype = dtype
        self.device_buffer = device_buffer
        self.host_values = host_values


# ---- cache entries ------------------------------------------------------------------------


class _Declined:
    """The plugin refused this signature; the CPU runs it."""

    def close(self) -> None:
        """Nothing to release."""


_DECLINED = _Declined()


@dataclass(frozen=True)
class _ExecutorEntry:
    """An executor and the output specs it was built for."""

    executor: OperatorExecutor
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def run(self, inputs: Sequence[Operand]) -> list[Result]:
        library, dev_id = self.executor.library, self.executor.dev_id
        staged: list[DeviceBuffer] = []
        outputs: list[DeviceBuffer] = []
        try:
            buffers = [_input_buffer(array, library, dev_id, staged) for array in inputs]
            outputs = [DeviceBuffer(library, dev_id, spec) for spec in self.outputs]
            if len(buffers) == len(self.inputs) and all(
                    buffer.spec is spec or (buffer.spec.shape == spec.shape
                                            and buffer.spec.dtype == spec.dtype)
                    for buffer, spec in zip(buffers, self.inputs)):
                self.executor.forward_fitting(buffers, outputs)
            else:
                self.executor.forward(buffers, outputs)  # which names what does not fit
        except BaseException:
            for buffer in outputs:
                buffer.free()
            raise
        finally:
            for buffer in staged:
                buffer.free()
        return list(outputs)

    def close(self) -> None:
        self.executor.close()


@dataclass(frozen=True)
class _ModelEntry:
    """A loaded one-operator model; ``inputs`` names its variables in input
    order."""

    model: LoadedModel
    inputs: tuple[str, ...]

    def run(self, inputs: Sequence[Operand]) -> list[Result]:
        values = {name: operand.host_values() for name, operand in zip(self.inputs, inputs)}
        results = self.model.infer(values)
        return [np.asarray(results[name]) for name in self.model.signature.outputs]

    def close(self) -> None:
        self.model.close()


_Entry = _ExecutorEntry | _ModelEntry | _Declined


def _input_buffer(operand: Operand, library: AccLibrary, dev_id: int,
                  staged: list[DeviceBuffer]) -> DeviceBuffer:
    """The device buffer holding operand on (library, dev_id), or a new one
    with a copy of it (appended to staged, for the caller to free)."""
    buffer = operand.device_buffer()
    if buffer is not None and buffer.library is library and buffer.dev_id == dev_id:
        return buffer
    values = operand.host_values()
    copy = DeviceBuffer(library, dev_id, TensorSpec.of(values))
    staged.append(copy)
    copy.copy_from_host(values)
    return copy


# ---- per-device state --------------------------------------------------------------------


class _DeviceState:
    """The LRU cache and the counters of one device."""

    def __init__(self) -> None:
        self.entries: OrderedDict[Signature, _Entry] = OrderedDict()
        self.counters: Counter[str] = Counter()

    def lookup(self, key: Signature) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is None:
            self.counters["cache_misses"] += 1
            return None
        self.counters["cache_hits"] += 1
        self.entries.move_to_end(key)
        return entry

    def store(self, key: Signature, entry: _Entry) -> None:
        self.entries[key] = entry
        while len(self.entries) > CACHE_CAPACITY:
            _, evicted = self.entries.popitem(last=False)
            self.counters["evictions"] += 1
            evicted.close()

    def clear(self) -> None:
        while self.entries:
            _, entry = self.entries.popitem(last=False)
            entry.close()


_states: dict[tuple[AccLibrary, int], _DeviceState] = {}
_states_lock = threading.Lock()


def _library(ctx: Context) -> AccLibrary:
    library = ctx.library
    if library is None:
        raise ContextError(f"{ctx} is not an accelerator context")
    return library


def _state(library: AccLibrary, dev_id: int) -> _DeviceState:
    with _states_lock:
        return _states.setdefault((library, dev_id), _DeviceState())


# ---- signatures ------------------------------------------------------------------------


def plugin_attrs(op: OpDef, attrs: Attrs) -> dict[str, str]:
    """The attribute strings a plugin receives: those given, and the
    operator's version."""
    return {**attrs.raw, OP_VERSION_ATTR: str(op_version(op.name))}


def _output_specs(op: OpDef, attrs: Attrs,
                  inputs: Sequence[TensorSpec]) -> tuple[TensorSpec, ...]:
    """The visible outputs by the registry's shape and dtype inference."""
    _, shapes = op.infer_shape(attrs, [spec.shape for spec in inputs])
    _, dtypes = op.infer_type(attrs, [spec.dtype for spec in inputs])
    if len(shapes) != len(dtypes):
        raise OperatorError(f"{op.name}: {len(shapes)} output shapes but {len(dtypes)} dtypes")
    return tuple(TensorSpec(shape, dtype) for shape, dtype in zip(shapes, dtypes))


def _check_arity(op: OpDef, attrs: Attrs, inputs: Sequence[object]) -> None:
    names = op.input_names(attrs)
    if len(inputs) != len(names):
        raise OperatorError(f"{op.name}: {len(inputs)} inputs given, {len(names)} expected "
                            f"({', '.join(names)})")


# ---- building ------------------------------------------------------------------------------


def _build_executor(library: AccLibrary, dev_id: int, op: OpDef, attrs: dict[str, str],
                    inputs: tuple[TensorSpec, ...],
                    outputs: tuple[TensorSpec, ...]) -> _ExecutorEntry | _Declined:
    try:
        executor = OperatorExecutor(library, op.name, inputs, outputs, attrs, dev_id)
    except PluginUnsupportedError:
        return _DECLINED
    return _ExecutorEntry(executor, inputs, outputs)


def _build_model(library: AccLibrary, dev_id: int, op: OpDef, attrs: dict[str, str],
                 inputs: tuple[TensorSpec, ...]) -> _ModelEntry | _Declined:
    graph = one_op_graph(op.name, {key: value for key, value in attrs.items()
                                   if key != OP_VERSION_ATTR}, inputs, dev_id)
    nodes = graph["nodes"]
    op_node = next(index for index, node in enumerate(nodes) if node["op"] != "null")
    data = {f"arg{index}": spec for index, spec in enumerate(inputs)}
    if op_node not in library.supported_ops(json.dumps(graph), data, len(nodes), dev_id):
        return _DECLINED
    try:
        model = LoadedModel(library, graph, {}, dev_id)
    except PluginUnsupportedError:
        return _DECLINED
    return _ModelEntry(model, tuple(data))


def _build(library: AccLibrary, dev_id: int, op: OpDef, attrs: dict[str, str],
           inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> _Entry:
    if library.supports_imperative:
        return _build_executor(library, dev_id, op, attrs, inputs, outputs)
    return _build_model(library, dev_id, op, attrs, inputs)


# ---- running ---------------------------------------------------------------------------------


class Prepared:
    """What a call of one signature on one device works out before it runs,
    made once by :func:`prepare` and run any number of times by
    :func:`run_prepared`: the device's state and lock, and the cache key
    with the specs and attribute strings a build needs (``key`` is None
    when a dtype has no TensorDType: the CPU runs every such call)."""

    __slots__ = ("op", "attrs", "library", "dev_id", "state", "lock", "key", "strings",
                 "in_specs", "out_specs", "version")

    def __init__(self, op: OpDef, attrs: Attrs, in_specs: tuple[TensorSpec, ...] | None,
                 out_specs: tuple[TensorSpec, ...] | None, ctx: Context) -> None:
        self.op = op
        self.attrs = attrs
        self.library = _library(ctx)
        self.dev_id = ctx.device_id
        self.state = _state(self.library, self.dev_id)
        self.lock = self.library.device_lock(self.dev_id)
        self.in_specs, self.out_specs = in_specs, out_specs
        self.strings: dict[str, str] = {}
        self.key: Signature | None = None
        self.version = op_version(op.name)
        self._sign()

    def _sign(self) -> None:
        """The attribute strings and the key, for the operator's version
        now (a version changed since, in OP_VERSIONS, is a new signature)."""
        self.version = op_version(self.op.name)
        if self.in_specs is not None and self.out_specs is not None:
            self.strings = plugin_attrs(self.op, self.attrs)
            self.key = (self.op.name, tuple(sorted(self.strings.items())),
                        tuple((spec.shape, spec.dtype) for spec in self.in_specs))


def prepare(op: OpDef, attrs: Attrs, inputs: Sequence[tuple[tuple[int, ...], np.dtype]],
            ctx: Context) -> Prepared:
    """The signature of op on inputs ((shape, dtype) each, as many as op
    takes: an OperatorError otherwise) on ctx's accelerator, for
    :func:`run_prepared`."""
    _check_arity(op, attrs, inputs)
    try:
        in_specs = tuple(TensorSpec(shape, dtype) for shape, dtype in inputs)
        out_specs = _output_specs(op, attrs, in_specs)
    except TensorError:
        return Prepared(op, attrs, None, None, ctx)
    return Prepared(op, attrs, in_specs, out_specs, ctx)


def run_prepared(prepared: Prepared, inputs: Sequence[Operand]) -> list[Result] | None:
    """Runs a prepared call on inputs (of the specs it was prepared for)
    and returns its visible outputs (new device buffers of its device, or
    host arrays), or None when the plugin does not run it (the caller then
    runs it on the CPU). Counted, cached and built as :func:`run_on_context`
    describes."""
    state = prepared.state
    with prepared.lock:
        if op_version(prepared.op.name) != prepared.version:
            prepared._sign()
        key = prepared.key
        entry: _Entry = _DECLINED
        if key is not None:
            found = state.lookup(key)
            if found is None:
                assert prepared.in_specs is not None and prepared.out_specs is not None
                found = _build(prepared.library, prepared.dev_id, prepared.op,
                               prepared.strings, prepared.in_specs, prepared.out_specs)
                state.counters["declined" if found is _DECLINED else "compiles"] += 1
                state.store(key, found)
            entry = found
        if entry is _DECLINED or isinstance(entry, _Declined):
            state.counters["fallbacks"] += 1
            return None
        results = entry.run(inputs)
        state.counters["accelerator_calls"] += 1
        return results


def run_prepared_buffers(prepared: Prepared, buffers: Sequence[DeviceBuffer | None],
                         inputs: Callable[[], Sequence[Operand]]) -> list[Result] | None:
    """:func:`run_prepared` for a planned call whose inputs are given as
    their device buffers (None for an input that has none: in host memory,
    or a view): when the cached entry is an executor and every buffer is
    one of its device's with the spec it was made for, the executor runs
    on them and new output buffers at once; otherwise inputs() makes the
    operands and :func:`run_prepared` runs them (staging, refusals, a
    symbolic-only plugin's model)."""
    state = prepared.state
    with prepared.lock:
        key = prepared.key
        entry = None if key is None else state.entries.get(key)
        if type(entry) is _ExecutorEntry and _VERSIONS.get(prepared.op.name, 1) == \
                prepared.version:
            outputs = entry.executor.forward_new_locked(buffers)
            if outputs is not None:
                counters = state.counters
                counters["cache_hits"] += 1
                state.entries.move_to_end(key)  # type: ignore[arg-type]
                counters["accelerator_calls"] += 1
                return outputs  # type: ignore[return-value]
        return run_prepared(prepared, inputs())


def run_on_context(op: OpDef, attrs: Attrs, inputs: Sequence[Operand],
                   ctx: Context) -> list[Result] | None:
    """Runs op on the accelerator of ctx and returns its visible outputs
    (new device buffers of ctx's device, or host arrays), or None when the
    plugin does not run it (the caller then runs it on the CPU)."""
    prepared = prepare(op, attrs, [(operand.shape, operand.dtype) for operand in inputs], ctx)
    return run_prepared(prepared, inputs)


# ---- inspection ----------------------------------------------------------------------------


def stats(ctx: Context) -> dict[str, int]:
    """Counters of ctx's device (see the module documentation), and
    "cached": the number of signatures in its cache, once every pushed
    operation has finished."""
    engine.drain()
    library = _library(ctx)
    state = _state(library, ctx.device_id)
    with library.device_lock(ctx.device_id):
        answer = {key: state.counters[key] for key in STAT_KEYS}
        answer["cached"] = len(state.entries)
    return answer


def clear_cache(ctx: Context) -> None:
    """Releases every cached executor and model of ctx's device and forgets
    its refusals (the counters are kept), and gives its pooled freed
    buffers back (acc_host.abi.memory)."""
    engine.drain()
    library = _library(ctx)
    state = _state(library, ctx.device_id)
    with library.device_lock(ctx.device_id):
        state.clear()
    release_pooled(library, ctx.device_id)
