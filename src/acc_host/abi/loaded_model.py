"""Symbolic execution: a graph compiled by a plugin's loadModel() and run
with infer().

A :class:`LoadedModel` owns one model id on one device: it builds the input
and output descriptor arrays once, changes only their data pointers per
inference, and calls unloadModel() when closed or garbage-collected.

Checked outputs (``MXNET_ACC_CHECK_OUTPUTS=1``, read when a model is
loaded): the ABI has no way for infer() to say which outputs it wrote, and
a plugin that returns MX_ACC_OK without writing them would leave whatever
the buffers held (the previous results, or uninitialized memory). In this
mode every output is filled with a canary before each infer() and checked
after it: a floating-point element still holding the canary (a NaN with a
payload no arithmetic produces) or an integer output whose every byte still
holds it is a :class:`~acc_host.errors.PluginContractError` naming the
output. Each host output is also given to the plugin inside a scratch
buffer with guard bytes before and after it, and each device output (a
``DeviceBuffer``, allocated with a guard after it in this mode) has its
guard read back, after the call: a plugin that wrote outside an output is
a PluginContractError naming it (:mod:`.guards`). It costs a fill, a scan
and a copy of every output per inference, so it is off by default
(docs/robustness.md has the measured cost).
"""

from __future__ import annotations

import itertools
import json
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from ..errors import InvalidArgumentError, PluginContractError, TensorError
from .annotate import GraphSignature, signature
from .guards import (
    CHECK_OUTPUTS_VARIABLE,
    GUARD_BYTES,
    check_outputs_enabled,
    overwritten,
    scratch,
)
from .header import HOST_DEVICE, ffi
from .library import AccLibrary, marked_call
from .memory import DeviceBuffer
from .releases import release_now
from .sparse import (
    STYPE_NAMES,
    SparseArray,
    SparseDescriptor,
    SparseParts,
    accepts_sparse,
    sparse_parts,
)
from .tensor import CStrings, TensorArray, TensorSpec, contiguous, host_pointer

_from_buffer = ffi.from_buffer

__all__ = ["LoadedModel", "BoundInference", "ArrayLike", "CHECK_OUTPUTS_VARIABLE",
           "check_outputs_enabled", "describe_graph"]

# Per itemsize: the unsigned type viewing an element, and the canary. The
# floating-point ones are signalling NaNs with an unusual payload (float16
# 0x7DA5, float32 0x7FA5A5A5, float64 0x7FF4A5A5A5A5A5A5); integer outputs
# get 0xA5 bytes and count as unwritten only when every byte still holds it.
_CANARY_FLOAT = {2: (np.uint16, 0x7DA5), 4: (np.uint32, 0x7FA5A5A5),
                 8: (np.uint64, 0x7FF4A5A5A5A5A5A5)}
_CANARY_BYTE = 0xA5


def _fill_canary(values: np.ndarray) -> None:
    if values.dtype.kind == "f" and values.dtype.itemsize in _CANARY_FLOAT:
        unsigned, pattern = _CANARY_FLOAT[values.dtype.itemsize]
        values.view(unsigned)[...] = pattern
    else:
        values.view(np.uint8)[...] = _CANARY_BYTE


def _unwritten(values: np.ndarray) -> int:
    """How many elements of values still hold the canary (for integer
    dtypes: all of them when every byte does, else 0)."""
    if values.dtype.kind == "f" and values.dtype.itemsize in _CANARY_FLOAT:
        unsigned, pattern = _CANARY_FLOAT[values.dtype.itemsize]
        return int(np.count_nonzero(values.view(unsigned) == pattern))
    untouched = values.size > 0 and bool(np.all(values.view(np.uint8) == _CANARY_BYTE))
    return values.size if untouched else 0

# Sparse values (ABI 1.2) are host arrays read through abi.sparse.sparse_parts.
ArrayLike: TypeAlias = np.ndarray | DeviceBuffer | SparseParts | SparseArray
_model_ids = itertools.count()
# Node names an error lists before "and N more".
_NAMES_SHOWN = 8


def describe_graph(graph: Mapping[str, Any], label: str | None = None) -> str:
    """What a model runs, for its errors and crash reports: label (such as
    "subgraph 2 on cpu_ref(0)"), the operator count, the first and last
    operators, and the node names (the executor's: a subgraph keeps them)."""
    ops = [node for node in graph.get("nodes", ()) if node.get("op") != "null"]
    if not ops:
        return label or "no operators"
    first, last = ops[0], ops[-1]
    span = (f"{first['name']} ({first['op']})" if len(ops) == 1 else
            f"from {first['name']} ({first['op']}) to {last['name']} ({last['op']})")
    names = [str(node["name"]) for node in ops]
    shown = ", ".join(names[:_NAMES_SHOWN])
    if len(names) > _NAMES_SHOWN:
        shown += f" and {len(names) - _NAMES_SHOWN} more"
    count = f"{len(ops)} operator{'s' if len(ops) != 1 else ''}"
    prefix = f"{label}: " if label else ""
    return f"{prefix}{count} {span}; nodes {shown}"


def _unload(library: AccLibrary, model_id: str, dev_id: int, wait: bool = False,
            retained: dict[str, ArrayLike] | None = None) -> None:
    """unloadModel, keeping the retained weights alive until it has run
    (retainsWeights: the plugin may read them until unloadModel returns)."""
    def unload() -> None:
        library.unload_model(model_id, dev_id)
        if retained is not None:
            retained.clear()

    library.release(dev_id, unload, wait)


def _check_sparse_allowed(library: AccLibrary, graph: GraphSignature, model_id: str) -> None:
    """A refusal before any call: a plugin that does not take sparse
    tensors (built for an ABI before 1.2, or without supportsSparse()) is
    never given one (the partitioner densifies its inputs instead)."""
    sparse = [name for name, spec in (*graph.data.items(), *graph.weights.items()) if spec.stype]
    if sparse and not accepts_sparse(library):
        version = getattr(library, "api_version", 0)
        raise TensorError(
            f"model {model_id}: inputs {sparse} are sparse, but {library.name} (ABI "
            f"{version // 100}.{version % 100}) does not take sparse tensors (ABI 1.2 "
            "supportsSparse()); densify them (tostype('default')) first")


def _sparse_value(value: Any, spec: TensorSpec, name: str) -> SparseParts:
    parts = sparse_parts(value, name)
    if parts is None or STYPE_NAMES[spec.stype] != parts.stype:
        given = "a dense array" if parts is None else parts.stype
        raise TensorError(f"{name}: the graph expects {STYPE_NAMES[spec.stype]} storage, got "
                          f"{given}")
    if parts.shape != spec.shape or parts.data.dtype != spec.dtype:
        raise TensorError(f"{name}: got {parts.stype} {parts.shape} {parts.data.dtype}, the "
                          f"graph expects {spec.shape} {spec.dtype}")
    return parts


class LoadedModel:
    """loadModel() of an annotated graph (see :mod:`acc_host.abi.annotate`) with
    its weights on device dev_id."""

    def __init__(self, library: AccLibrary, graph: Mapping[str, Any],
                 weights: Mapping[str, ArrayLike], dev_id: int = 0,
                 model_id: str | None = None, label: str | None = None) -> None:
        """label names the model in errors (with its operators, see
        :func:`describe_graph`), e.g. "subgraph 2 on cpu_ref(0)"."""
        library.check_device(dev_id)
        self.library = library
        self.dev_id = dev_id
        self.model_id = model_id or self.new_id()
        self.context = f"{self.model_id}: {describe_graph(graph, label)}"
        self.signature: GraphSignature = signature(graph)
        _check_sparse_allowed(library, self.signature, self.model_id)
        missing = sorted(set(self.signature.weights) - set(weights))
        extra = sorted(set(weights) - set(self.signature.weights))
        if missing or extra:
            raise InvalidArgumentError(
                f"model {self.model_id}: weights missing {missing}, not in the graph {extra}")
        names = [*self.signature.weights, *self.signature.data]
        tensors = TensorArray([*self.signature.weights.values(), *self.signature.data.values()])
        # With a plugin that retains weights (retainsWeights), the host arrays
        # the descriptors point at are kept until unloadModel has returned.
        self._retained: dict[str, ArrayLike] | None = {} if library.retains_weights else None
        for index, name in enumerate(self.signature.weights):
            self._point(tensors, index, name, self._retain(name, weights[name]), writable=False)
        c_names = CStrings(names)  # must outlive the call
        # loadModel and infer are called behind their marked frame (see
        # marked_call), bound once here, so not through AccLibrary.call.
        load = library.entry("loadModel")
        if not library.isolated:
            load = marked_call(library, "loadModel", self.context, load)
        with library.device_lock(dev_id):
            library.check(library.name, "loadModel", load(
                ffi.new("char[]", self.model_id.encode("utf-8")),
                ffi.new("char[]", json.dumps(graph).encode("utf-8")),
                c_names.pointer, tensors.pointer, len(names), dev_id), self.context)
        self._adopt()

    @staticmethod
    def new_id() -> str:
        """A model id no other model of this process uses."""
        return f"acc_host.{os.getpid()}.model{next(_model_ids)}"

    @classmethod
    def adopt(cls, library: AccLibrary, graph: Mapping[str, Any], model_id: str,
              dev_id: int = 0, label: str | None = None) -> LoadedModel:
        """A LoadedModel for a model the plugin already holds under model_id
        (imported from a compiled file); unloaded like any other."""
        model = cls.__new__(cls)
        model.library, model.dev_id, model.model_id = library, dev_id, model_id
        model.context = f"{model_id}: {describe_graph(graph, label)}"
        model._retained = {} if library.retains_weights else None
        model.signature = signature(graph)
        model._adopt()
        return model

    def _adopt(self) -> None:
        """Takes ownership of the loaded model and prepares the per-inference
        descriptor arrays."""
        library, dev_id = self.library, self.dev_id
        self._finalizer = weakref.finalize(self, _unload, library, self.model_id, dev_id,
                                           retained=self._retained)
        self._finalizer.atexit = False
        self._model_id_text = ffi.new("char[]", self.model_id.encode("utf-8"))
        self._in_names = CStrings(list(self.signature.data))
        self._inputs = TensorArray(list(self.signature.data.values()),
                                   names=list(self.signature.data))
        self._out_names = CStrings(list(self.signature.outputs))
        self._outputs = TensorArray(list(self.signature.outputs.values()),
                                    names=list(self.signature.outputs))
        self._in_slots = self._inputs.slots()
        self._out_slots = self._outputs.slots()
        self._lock = library.device_lock(dev_id)
        infer = library.entry("infer")
        self._infer = infer if library.isolated else marked_call(
            library, "infer", self.context, infer)
        # infer()'s arguments but the data pointers, which the descriptors hold.
        self._call: tuple[Any, ...] | None = (
            self._model_id_text, self._in_names.pointer, self._out_names.pointer,
            self._inputs.pointer, self._outputs.pointer, len(self._inputs), len(self._outputs))
        if check_outputs_enabled():
            # The checking infer() replaces the plain one for this model only
            # (a class, not a bound method stored on self: no reference cycle
            # delays the unload), so models loaded without it pay nothing.
            self.__class__ = _CheckedModel

    def _retain(self, name: str, value: ArrayLike) -> ArrayLike:
        """value as the plugin will see it (a C-contiguous, aligned host
        array, or a DeviceBuffer), recorded among the retained weights when
        the plugin retains them (a DeviceBuffer kept there is not freed)."""
        if self._retained is None or not isinstance(value, (np.ndarray, DeviceBuffer)):
            return value  # sparse weights are borrowed, never retained (section 12)
        if isinstance(value, np.ndarray):
            value = contiguous(value)
        self._retained[name] = value
        return value

    @property
    def retained_bytes(self) -> int:
        """Bytes of host weights the plugin references instead of copying
        (retainsWeights); 0 for a plugin that copies them."""
        return sum(value.nbytes if isinstance(value, np.ndarray) else value.spec.nbytes
                   for value in (self._retained or {}).values()
                   if isinstance(value, (np.ndarray, DeviceBuffer)))

    def _check_buffer(self, value: DeviceBuffer, spec: TensorSpec, name: str) -> None:
        """A TensorError unless value is a live buffer of this model's device
        with the spec the model expects at name."""
        if value.library is not self.library or value.dev_id != self.dev_id or value.closed:
            raise TensorError(f"{name}: {value!r} is not usable on "
                              f"{self.library.name}({self.dev_id})")
        if value.spec != spec:
            raise TensorError(f"{name}: {value!r} does not match {spec.shape} {spec.dtype}")

    def _point(self, array: TensorArray, index: int, name: str, value: ArrayLike,
               writable: bool) -> None:
        spec = array.specs[index]
        if spec.stype:
            array.set_sparse(index, value)
            return
        if isinstance(value, DeviceBuffer):
            self._check_buffer(value, spec, name)
            array.set_data(index, value.pointer, self.dev_id, value)
            return
        if not isinstance(value, np.ndarray):
            raise TensorError(f"{name}: expected a numpy array or DeviceBuffer, got "
                              f"{type(value).__name__}")
        if value.shape != spec.shape or value.dtype != spec.dtype:
            raise TensorError(f"{name}: got {value.shape} {value.dtype}, the graph expects "
                              f"{spec.shape} {spec.dtype}")
        array.set_host_array(index, value if writable else contiguous(value), writable=writable)

    def infer(self, inputs: Mapping[str, ArrayLike], outputs: Mapping[str, ArrayLike] | None = None,
              weights: Mapping[str, ArrayLike] | None = None) -> dict[str, ArrayLike]:
        """Runs the model. inputs must name every data input; outputs, when
        given, are filled in place (otherwise new numpy arrays are returned);
        weights, when given, replace the plugin's copies from now on.

        This is the per-forward path, so it does only what each call needs:
        the descriptors were built once; a C-contiguous numpy array of the
        expected shape and dtype (or a DeviceBuffer of this device) is
        pointed at in place, never copied; anything else goes through the
        checked path, which copies a strided array and names what is wrong."""
        if self._call is None:
            raise InvalidArgumentError(f"model {self.model_id} was unloaded")
        if len(inputs) != len(self._in_slots):
            self._mismatch("inputs", inputs, self.signature.data)
        if outputs is None:
            results: dict[str, ArrayLike] = {
                name: np.empty(spec.shape, spec.dtype)
                for name, spec in self.signature.outputs.items()}
        else:
            if len(outputs) != len(self._out_slots):
                self._mismatch("outputs", outputs, self.signature.outputs)
            results = dict(outputs)
            inputs = self._unaliased(inputs, results)
        keep: list[Any] = []  # the buffers the descriptors point into, alive for the call
        ndarray, from_buffer = np.ndarray, _from_buffer
        library, dev_id = self.library, self.dev_id
        # Retained weights that new ones replace stay alive until infer returns.
        replaced = dict(self._retained) if weights and self._retained else None
        with self._lock:
            call, in_slots = self._call, self._in_slots
            if weights:
                in_names, in_array = self._with_weights(weights)
                call = (call[0], in_names.pointer, call[2], in_array.pointer, call[4],
                        len(in_array), call[6])
                in_slots = in_array.slots()[:len(in_slots)]
            try:
                for slots, values, writable in ((in_slots, inputs, False),
                                                (self._out_slots, results, True)):
                    for name, tensor, spec in slots:
                        value: Any = values[name]  # checked by type just below
                        # The common case inline: an array to point at as it is.
                        if (type(value) is ndarray and not spec.stype
                                and value.shape == spec.shape
                                and value.dtype == spec.dtype and value.flags.c_contiguous
                                and value.flags.aligned
                                and (not writable or value.flags.writeable)):
                            buffer = from_buffer(value, require_writable=writable)
                            tensor.data = buffer
                            if tensor.dev_id != HOST_DEVICE:
                                tensor.dev_id = HOST_DEVICE
                            keep.append(buffer)
                        elif (type(value) is DeviceBuffer and value.library is library
                              and value.dev_id == dev_id and value.spec == spec
                              and not value.closed):
                            tensor.data = value.pointer
                            if tensor.dev_id != dev_id:
                                tensor.dev_id = dev_id
                            keep.append(value)
                        else:
                            keep.append(self._bind(tensor, spec, name, value, writable))
            except KeyError:
                self._mismatch("inputs", inputs, self.signature.data)
                self._mismatch("outputs", results, self.signature.outputs)
                raise
            status = self._infer(*call)
        if status:
            if replaced:
                self._keep_replaced(replaced)
            self.library.check(self.library.name, "infer", status, self.context)
        return results

    def _keep_replaced(self, replaced: Mapping[str, ArrayLike]) -> None:
        """After a failed infer() that was given weights: the plugin may still
        reference the buffers they were to replace, so they too are kept
        until unloadModel."""
        assert self._retained is not None
        for name, value in replaced.items():
            if self._retained.get(name) is not value:
                self._retained[f"{name} (replaced {len(self._retained)})"] = value

    def _unaliased(self, inputs: Mapping[str, ArrayLike],
                   outputs: Mapping[str, ArrayLike]) -> Mapping[str, ArrayLike]:
        """inputs, with a private copy of each host input that overlaps an
        output: the header promises that infer()'s outputs alias no input
        and no other output. Outputs that overlap each other, or a device
        buffer given as both input and output, are an InvalidArgumentError."""
        host = [(name, value) for name, value in outputs.items() if type(value) is np.ndarray]
        device = [id(value) for value in outputs.values() if isinstance(value, DeviceBuffer)]
        overlapping = [f"{a} and {b}" for i, (a, x) in enumerate(host) for b, y in host[i + 1:]
                       if np.may_share_memory(x, y)]
        if overlapping or len(set(device)) != len(device):
            raise InvalidArgumentError(
                f"model {self.model_id}: outputs {', '.join(overlapping) or 'given twice'} share "
                "memory; infer() fills each output in memory of its own")
        fixed: dict[str, ArrayLike] | None = None
        for name, value in inputs.items():
            if isinstance(value, DeviceBuffer) and id(value) in device:
                raise InvalidArgumentError(
                    f"model {self.model_id}: input {name!r} is also an output's buffer; infer() "
                    "outputs never alias inputs")
            if isinstance(value, np.ndarray) and any(np.may_share_memory(value, out)
                                                     for _, out in host):
                fixed = dict(inputs) if fixed is None else fixed
                fixed[name] = value.copy()
        return inputs if fixed is None else fixed

    def bind(self, inputs: Mapping[str, DeviceBuffer],
             outputs: Mapping[str, DeviceBuffer]) -> BoundInference:
        """infer() on fixed buffers of this device (every data input and
        every output): their descriptors are built once, so each call is
        the plugin call alone. For callers that run a model many times on
        the same buffers, such as an executor's step."""
        return BoundInference(self, inputs, outputs)

    def _bind(self, tensor: Any, spec: TensorSpec, name: str, value: ArrayLike,
              writable: bool) -> Any:
        """Points one descriptor at value; returns what keeps the memory alive."""
        if spec.stype:
            descriptor = SparseDescriptor(_sparse_value(value, spec, name))
            tensor.data = descriptor.pointer
            tensor.dev_id = HOST_DEVICE
            return descriptor
        if (isinstance(value, np.ndarray) and type(value) is np.ndarray
                and value.shape == spec.shape and value.dtype == spec.dtype
                and value.flags.c_contiguous and value.flags.aligned
                and (not writable or value.flags.writeable)):
            buffer = _from_buffer(value, require_writable=writable)
            tensor.data = buffer
            if tensor.dev_id != HOST_DEVICE:
                tensor.dev_id = HOST_DEVICE
            return buffer
        if isinstance(value, DeviceBuffer):
            self._check_buffer(value, spec, name)
            tensor.data = value.pointer
            tensor.dev_id = self.dev_id
            return value
        if not isinstance(value, np.ndarray):
            raise TensorError(f"{name}: expected a numpy array or DeviceBuffer, got "
                              f"{type(value).__name__}")
        if value.shape != spec.shape or value.dtype != spec.dtype:
            raise TensorError(f"{name}: got {value.shape} {value.dtype}, the graph expects "
                              f"{spec.shape} {spec.dtype}")
        if writable:
            buffer = host_pointer(value, writable=True)  # names a strided or read-only output
        else:
            buffer = host_pointer(contiguous(value))
        tensor.data = buffer
        tensor.dev_id = HOST_DEVICE
        return buffer

    def _mismatch(self, what: str, given: Mapping[str, Any],
                  expected: Mapping[str, Any]) -> None:
        if set(given) != set(expected):
            raise InvalidArgumentError(
                f"model {self.model_id}: {what} {sorted(given)} do not match the "
                f"{'data inputs' if what == 'inputs' else 'outputs'} {sorted(expected)}")

    def _with_weights(self, weights: Mapping[str, ArrayLike]) -> tuple[CStrings, TensorArray]:
        unknown = sorted(set(weights) - set(self.signature.weights))
        if unknown:
            raise InvalidArgumentError(f"model {self.model_id}: {unknown} are not weights")
        names = [*self.signature.data, *weights]
        array = TensorArray([*self.signature.data.values(),
                             *(self.signature.weights[name] for name in weights)],
                            names=names)
        for offset, (name, value) in enumerate(weights.items()):
            # Retained from this call on (the earlier buffer is released with
            # the dict entry it replaces, once infer has returned).
            self._point(array, len(self.signature.data) + offset, name,
                        self._retain(name, value), writable=False)
        return CStrings(names), array

    def close(self) -> None:
        """unloadModel() now (idempotent)."""
        self._call = None
        release_now(self._finalizer)

    def __enter__(self) -> LoadedModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BoundInference:
    """A LoadedModel's infer() on fixed device buffers (LoadedModel.bind).

    Its descriptor arrays are its own, built when it is made: calling it
    changes nothing a plain infer() uses, so a model may have several. The
    buffers stay alive as long as this object; a buffer freed meanwhile
    (DeviceBuffer.free) is refused before the plugin could see its pointer.
    Under MXNET_ACC_CHECK_OUTPUTS it runs the checked infer()."""

    __slots__ = ("model", "inputs", "outputs", "_buffers", "_in", "_out", "_names", "_call")

    def __init__(self, model: LoadedModel, inputs: Mapping[str, DeviceBuffer],
                 outputs: Mapping[str, DeviceBuffer]) -> None:
        self.model = model
        model._mismatch("inputs", inputs, model.signature.data)
        model._mismatch("outputs", outputs, model.signature.outputs)
        self.inputs = {name: inputs[name] for name in model.signature.data}
        self.outputs = {name: outputs[name] for name in model.signature.outputs}
        self._buffers = (*self.inputs.values(), *self.outputs.values())
        self._in = TensorArray(list(model.signature.data.values()),
                               names=list(model.signature.data))
        self._out = TensorArray(list(model.signature.outputs.values()),
                                names=list(model.signature.outputs))
        for array, values in ((self._in, self.inputs), (self._out, self.outputs)):
            for index, (name, value) in enumerate(values.items()):
                if type(value) is not DeviceBuffer:
                    raise TensorError(f"{name}: expected a DeviceBuffer, got "
                                      f"{type(value).__name__}")
                model._point(array, index, name, value, writable=False)
        # The model's names stay alive with the model, which this object holds.
        self._call = None if model._call is None else (
            model._call[0], model._call[1], model._call[2], self._in.pointer, self._out.pointer,
            len(self._in), len(self._out))

    def __call__(self) -> None:
        """The call, after checking that the model is loaded and every
        buffer bound is allocated."""
        model = self.model
        if self._call is None or model._call is None:
            raise InvalidArgumentError(f"model {model.model_id} was unloaded")
        for buffer in self._buffers:
            if buffer._freed:
                raise TensorError(f"model {model.model_id}: {buffer!r} bound to it was freed")
        self.run()

    def run(self) -> None:
        """The call under the model's device lock, for a caller that has
        checked that every buffer bound is allocated (an executor's bound
        step checks it with its own buffers)."""
        with self.model._lock:
            self.run_locked()

    def run_locked(self) -> None:
        """The call, for a caller that holds the model's device lock and has
        checked that every buffer bound is allocated (``run`` takes the
        lock). Under MXNET_ACC_CHECK_OUTPUTS it runs the checked infer()."""
        model, call = self.model, self._call
        if call is None or model._call is None:
            raise InvalidArgumentError(f"model {model.model_id} was unloaded")
        if type(model) is not LoadedModel:  # checked outputs: the checking infer()
            model.infer(self.inputs, self.outputs)
            return
        status = model._infer(*call)
        if status:
            model.library.check(model.library.name, "infer", status, model.context)

    def direct(self, inputs: Mapping[str, DeviceBuffer], read: Sequence[DeviceBuffer] = ()
               ) -> Callable[[Mapping[str, np.ndarray]], list[np.ndarray]] | None:
        """One inference's whole plugin work as one call: copyToAcc of host
        arrays into the given device buffers (the bound data inputs, by the
        caller's names), this infer(), then copyFromAcc of each buffer of
        read (the outputs, for a synchronous inference) into a new host
        array, returned in order, all under the device lock. The
        callables, the descriptors and the call's arguments are resolved
        here once; a call only points each host descriptor at its array.
        The values are C-contiguous host arrays of the buffers' shapes and
        dtypes, for a subset of the names. None where this does not apply:
        checked outputs (the guarded copies and the checking infer() run
        instead), a model already unloaded, a library being traced. The
        caller checks per call that no trace is active and that every
        buffer is allocated (an executor's bound step does); an unload is
        refused here as run_locked refuses it."""
        model = self.model
        library = model.library
        if (type(model) is not LoadedModel or self._call is None or library.traced
                or any(buffer.guarded for buffer in (*inputs.values(), *read, *self._buffers))):
            return None
        lib = library.lib
        copy_to, copy_from = lib.copyToAcc, lib.copyFromAcc
        infer, call = model._infer, self._call
        lock, name, context, check = model._lock, library.name, model.context, library.check
        acquire, release = lock.acquire, lock.release  # cheaper than `with` per call
        # ffi.from_buffer(array): the pre-parsed FFI's own method (a 'char[]'
        # over the array's memory, alive until the copy returns).
        from_buffer, null = ffi.from_buffer, ffi.NULL
        hosts = [TensorArray([buffer.spec]) for buffer in inputs.values()]
        pairs = {}
        for (key, buffer), host in zip(inputs.items(), hosts):
            (_, slot, _), = host.slots()
            # (the buffer and the host descriptor array: alive with the call)
            pairs[key] = (buffer._descriptor.pointer, slot, ffi.addressof(slot), (buffer, host))
        reads: list[tuple[Any, ...]] = []
        for buffer in read:
            host = TensorArray([buffer.spec])
            (_, slot, spec), = host.slots()
            reads.append((buffer._descriptor.pointer, slot, ffi.addressof(slot), spec.shape,
                          spec.dtype, (buffer, host)))
        empty = np.empty
        # One input (the common case): its copy without the loop.
        one: tuple[str, tuple[Any, ...]] = next(iter(pairs.items())) if len(pairs) == 1 \
            else ("", (None, None, None, None))
        only, (one_device, one_slot, one_address, _) = one

        def run(values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            results = []
            acquire()
            try:
                if len(values) == 1 and only in values:
                    pointer = from_buffer(values[only])  # alive until the copy returns
                    one_slot.data = pointer
                    status = copy_to(one_device, one_address)
                    one_slot.data = null
                    if status:
                        check(name, "copyToAcc", status)
                else:
                    for key, value in values.items():
                        device, slot, address, _ = pairs[key]
                        pointer = from_buffer(value)
                        slot.data = pointer
                        status = copy_to(device, address)
                        slot.data = null
                        if status:
                            check(name, "copyToAcc", status)
                if model._call is None:
                    raise InvalidArgumentError(f"model {model.model_id} was unloaded")
                status = infer(*call)
                if status:
                    check(name, "infer", status, context)
                for device, slot, address, shape, dtype, _ in reads:
                    array = empty(shape, dtype)
                    pointer = from_buffer(array)
                    slot.data = pointer
                    status = copy_from(address, device)
                    slot.data = null
                    if status:
                        check(name, "copyFromAcc", status)
                    results.append(array)
            finally:
                release()
            return results

        return run

    def reader(self, buffer: DeviceBuffer) -> Callable[[], np.ndarray | None] | None:
        """copyFromAcc of buffer (one of this model's bound outputs) into a
        new host array, as one call with its descriptors and callables
        resolved here, under the device lock: what reading an executor
        output costs once it is known to be current (the caller checks per
        call that no trace is active and that nothing is pending on it).
        The call returns None, copying nothing, when the buffer was freed:
        checked under the device lock, which ``free()`` waits for before
        mx_free, so a buffer freed by another thread is never read. None
        where it does not apply: a buffer with guards (checked mode: the
        guarded copy runs instead), a library being traced."""
        library = buffer.library
        if buffer.guarded or library.traced or buffer.library is not self.model.library:
            return None
        copy_from, name, check = library.lib.copyFromAcc, library.name, library.check
        lock = library.device_lock(buffer.dev_id)
        acquire, release = lock.acquire, lock.release
        host = TensorArray([buffer.spec])
        (_, slot, spec), = host.slots()
        device, address, shape, dtype = buffer._descriptor.pointer, ffi.addressof(slot), \
            spec.shape, spec.dtype
        from_buffer, null, empty = ffi.from_buffer, ffi.NULL, np.empty
        alive = (buffer, host)  # the descriptors' memory, alive with the reader

        def read(_alive: object = alive) -> np.ndarray | None:
            array = empty(shape, dtype)
            acquire()
            try:
                if buffer._freed:
                    return None
                pointer = from_buffer(array)  # alive until the copy returns
                slot.data = pointer
                status = copy_from(address, device)
                slot.data = null
            finally:
                release()
            if status:
                check(name, "copyFromAcc", status)
            return array

        return read


class _CheckedModel(LoadedModel):
    """A LoadedModel loaded under MXNET_ACC_CHECK_OUTPUTS."""

    def infer(self, inputs: Mapping[str, ArrayLike],
              outputs: Mapping[str, ArrayLike] | None = None,
              weights: Mapping[str, ArrayLike] | None = None) -> dict[str, ArrayLike]:
        """infer() with every output filled with the canary before the call
        and checked after it (MXNET_ACC_CHECK_OUTPUTS)."""
        if outputs is None:
            outputs = {name: np.empty(spec.shape, spec.dtype)
                       for name, spec in self.signature.outputs.items()}
        given = dict(outputs)
        guarded: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # name -> (scratch, inner)
        for name, value in outputs.items():
            if isinstance(value, DeviceBuffer):
                value.fill(_fill_canary)
            elif isinstance(value, np.ndarray) and value.flags.writeable:
                around = scratch(value.nbytes)
                inner = around[GUARD_BYTES:GUARD_BYTES + value.nbytes].view(
                    value.dtype).reshape(value.shape)
                _fill_canary(inner)
                guarded[name] = (around, inner)
                given[name] = inner
        results = super().infer(inputs, given, weights)
        call = f"infer ({self.context})"
        for name, (around, inner) in guarded.items():
            for side, guard in (("before the start", around[:GUARD_BYTES]),
                                ("past the end", around[GUARD_BYTES + inner.nbytes:])):
                changed = overwritten(guard)
                if changed:
                    raise PluginContractError(
                        f"{self.library.name}: {call} wrote {side} of output {name!r}: "
                        f"{changed} of the {GUARD_BYTES} guard bytes {CHECK_OUTPUTS_VARIABLE} "
                        "put there were overwritten (a buffer overrun)")
        # Device outputs: the guard after each, read back with its elements.
        device_values = {name: value.checked_host(call, f"output {name!r}")
                         for name, value in results.items() if isinstance(value, DeviceBuffer)}
        for name, (_, inner) in guarded.items():
            outputs[name][...] = inner  # type: ignore[index]
            results[name] = outputs[name]
        for name, value in results.items():
            host = device_values.get(name, value)
            if not isinstance(host, np.ndarray):
                continue
            missing = _unwritten(host)
            if missing:
                raise PluginContractError(
                    f"{self.library.name}: infer ({self.context}) returned MX_ACC_OK but left "
                    f"{missing} of the {host.size} elements of output {name!r} unwritten (they "
                    f"still hold the canary {CHECK_OUTPUTS_VARIABLE} wrote before the call)")
        return results
