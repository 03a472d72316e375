"""Imperative execution: one operator through a plugin's accGetExecutor().

An :class:`OperatorExecutor` is created once for an operator, its attributes and its
input/output shapes, and then run on fresh device buffers any number of
times; the descriptor arrays are built once and only their data pointers
change per call.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import LibraryError, PluginContractError, TensorError
from .header import ffi
from .library import AccLibrary
from .memory import POOL_MAX_BYTES, DeviceBuffer, checked_mode, device_pool
from .operator_versions import OP_VERSION_ATTR, op_version
from .releases import release_now
from .sparse import accepts_sparse
from .tensor import CStrings, TensorArray, TensorSpec, numpy_dtype

__all__ = ["OperatorExecutor", "run_graph"]


def _release(library: AccLibrary, dev_id: int, handle: Any, wait: bool = False) -> None:
    library.release(dev_id, lambda: handle.release(handle), wait)


class OperatorExecutor:
    """accGetExecutor(op_name, ...) on device dev_id of library."""

    def __init__(self, library: AccLibrary, op_name: str, inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec], attrs: Mapping[str, Any] | None = None,
                 dev_id: int = 0) -> None:
        if not library.supports_imperative:
            raise LibraryError(f"{library.name}: the library has no imperative mode "
                               "(supportsImperative() is 0)", library.path)
        sparse = [index for index, spec in enumerate(inputs) if spec.stype]
        if sparse and not accepts_sparse(library):
            raise TensorError(f"{op_name}: inputs {sparse} are sparse, but {library.name} does "
                              "not take sparse tensors (ABI 1.2 supportsSparse())")
        if any(spec.stype for spec in outputs):
            raise TensorError(f"{op_name}: outputs are dense (mxnet_acc.h section 12)")
        self.library = library
        self.op_name = op_name
        self.dev_id = dev_id
        attributes = {key: str(value) for key, value in (attrs or {}).items()}
        attributes.setdefault(OP_VERSION_ATTR, str(op_version(op_name)))
        self._inputs = TensorArray(inputs, dev_id)
        self._outputs = TensorArray(outputs, dev_id)
        keys, values = CStrings(list(attributes)), CStrings(list(attributes.values()))
        handle = ffi.new("MXAccExecutor **")
        library.call(dev_id, "accGetExecutor", ffi.new("char[]", op_name.encode("utf-8")),
                     self._inputs.pointer, self._outputs.pointer, len(self._inputs),
                     len(self._outputs), keys.pointer, values.pointer, keys.count, dev_id,
                     handle, context=op_name)
        executor = handle[0]
        if executor == ffi.NULL or executor.forward == ffi.NULL or executor.release == ffi.NULL:
            raise PluginContractError(
                f"{library.name}: accGetExecutor({op_name}) succeeded but returned a NULL "
                "executor or function")
        self._handle = executor
        self._lock = library.device_lock(dev_id)
        self._slots: tuple[list[Any], list[Any], Any, Any] | None = None  # forward_fitting
        self._new_call: tuple[Any, ...] | None = None  # forward_new_locked, made at its first call
        self._finalizer = weakref.finalize(self, _release, library, dev_id, executor)
        self._finalizer.atexit = False

    def _bind(self, array: TensorArray, buffers: Sequence[Any], role: str) -> None:
        if len(buffers) != len(array):
            raise TensorError(f"{self.op_name}: {len(buffers)} {role}s given, {len(array)} "
                              "expected")
        for index, (buffer, spec) in enumerate(zip(buffers, array.specs)):
            if spec.stype:  # a sparse input: host memory, checked (section 12)
                array.set_sparse(index, buffer)
                continue
            if not isinstance(buffer, DeviceBuffer) or buffer.library is not self.library \
                    or buffer.dev_id != self.dev_id:
                raise TensorError(f"{self.op_name}: {role} {index} is not a buffer on "
                                  f"{self.library.name}({self.dev_id})")
            if buffer.closed or buffer.spec != spec:
                raise TensorError(f"{self.op_name}: {role} {index} is {buffer!r}, expected "
                                  f"{spec.shape} {spec.dtype}")
            array.set_data(index, buffer.pointer, self.dev_id, buffer)

    def forward(self, inputs: Sequence[Any], outputs: Sequence[DeviceBuffer]) -> None:
        """Runs the operator; blocks until the outputs are written. Inputs are
        DeviceBuffers, except sparse inputs (a spec with stype): a CSR or
        row-sparse array in host memory (acc_host.abi.sparse)."""
        if not self._finalizer.alive:
            raise TensorError(f"{self.op_name}: the executor was released")
        self._bind(self._inputs, inputs, "input")
        self._bind(self._outputs, outputs, "output")
        try:
            with self.library.device_lock(self.dev_id):
                forward = self.library.entry("executor_forward") if self.library.traced \
                    else self._handle.forward
                status = forward(self._handle, self._inputs.pointer, len(self._inputs),
                                 self._outputs.pointer, len(self._outputs))
            self.library.check(self.library.name, "executor forward", status, self.op_name)
        finally:
            self._inputs.clear()
            self._outputs.clear()
        for index, buffer in enumerate(outputs):  # checked mode: the guard after each
            if buffer.guarded:
                buffer.checked_host(f"forward of {self.op_name}", f"output {index}")

    def forward_fitting(self, inputs: Sequence[DeviceBuffer],
                        outputs: Sequence[DeviceBuffer]) -> None:
        """forward() for a caller whose buffers are known to fit: as many as
        the executor takes, each a DeviceBuffer of its library and device
        with the spec it was made for (acc_host.ndarray.dispatch makes them
        so). A buffer freed meanwhile is still refused, and checked mode
        still checks every output's guard."""
        if not self._finalizer.alive:
            raise TensorError(f"{self.op_name}: the executor was released")
        slots = self._slots
        if slots is None:  # the descriptors' MXTensor cdata, in and out, listed once
            slots = self._slots = (
                [self._inputs._tensors[index] for index in range(len(self._inputs))],
                [self._outputs._tensors[index] for index in range(len(self._outputs))],
                self._inputs.pointer, self._outputs.pointer)
        in_slots, out_slots, in_pointer, out_pointer = slots
        guarded = False
        for buffer, slot in zip(inputs, in_slots):
            if buffer._freed:
                raise TensorError(f"{self.op_name}: input {list(inputs).index(buffer)} is "
                                  f"{buffer!r}")
            slot.data = buffer.pointer
        for buffer, slot in zip(outputs, out_slots):
            if buffer._freed:
                raise TensorError(f"{self.op_name}: output {list(outputs).index(buffer)} is "
                                  f"{buffer!r}")
            slot.data = buffer.pointer
            guarded = guarded or buffer.guarded
        library = self.library
        try:
            with self._lock:
                forward = library.entry("executor_forward") if library.traced \
                    else self._handle.forward
                status = forward(self._handle, in_pointer, len(in_slots), out_pointer,
                                 len(out_slots))
            if status:
                library.check(library.name, "executor forward", status, self.op_name)
        finally:
            _clear_slots(in_slots, out_slots)
        if guarded:  # checked mode: the guard after each output
            for index, buffer in enumerate(outputs):
                if buffer.guarded:
                    buffer.checked_host(f"forward of {self.op_name}", f"output {index}")

    def forward_new_locked(self, inputs: Sequence[DeviceBuffer | None]
                           ) -> list[DeviceBuffer] | None:
        """forward() into new output buffers of the specs the executor was
        made for, for a caller holding the device's lock that runs the same
        executor many times (an imperative call's plan): everything but the
        data pointers is resolved at the first call (the descriptors'
        MXTensor cdata, the plugin's forward, each output's size and the
        device's buffer pool), and the outputs are pooled allocations when
        the pool has them. Returns None, running nothing, when the call
        does not fit this path: an input that is None or not a buffer of
        the executor's device with the spec it was made for, a traced
        library, checked mode, or outputs too large to pool; the caller
        then takes forward()'s path. A released executor or a freed input
        is refused (TensorError); a failed forward frees the outputs."""
        made = self._new_call
        if made is None:
            made = self._new_call = self._make_new_call()
        (forward, handle, in_slots, out_slots, in_pointer, out_pointer, in_specs, outputs,
         library, dev_id) = made
        if outputs is None or library.traced or len(inputs) != len(in_slots) or checked_mode():
            return None
        if not self._finalizer.alive:
            raise TensorError(f"{self.op_name}: the executor was released")
        index = 0
        for buffer in inputs:  # one pass: the checks, then the pointer
            spec = in_specs[index]
            if type(buffer) is not DeviceBuffer or buffer.library is not library \
                    or buffer.dev_id != dev_id or (buffer.spec is not spec and (
                        buffer.spec.shape != spec.shape or buffer.spec.dtype != spec.dtype)):
                _clear_slots(in_slots)
                return None
            if buffer._freed:
                _clear_slots(in_slots)
                raise TensorError(f"{self.op_name}: input {index} is {buffer!r}")
            in_slots[index].data = buffer.pointer
            index += 1
        new = DeviceBuffer.pooled_or_new
        results: list[DeviceBuffer] = []
        try:
            if len(outputs) == 1:
                (spec, size, pool), = outputs
                buffer = new(library, dev_id, spec, size, pool)
                results.append(buffer)
                out_slots[0].data = buffer.pointer
            else:
                for index, (spec, size, pool) in enumerate(outputs):
                    buffer = new(library, dev_id, spec, size, pool)
                    results.append(buffer)
                    out_slots[index].data = buffer.pointer
            status = forward(handle, in_pointer, len(in_slots), out_pointer, len(out_slots))
            if status:
                library.check(library.name, "executor forward", status, self.op_name)
        except BaseException:
            for buffer in results:
                buffer.free()
            raise
        finally:
            _clear_slots(in_slots, out_slots)
        return results

    def _make_new_call(self) -> tuple[Any, ...]:
        """What forward_new_locked resolves once (outputs None: some output
        is too large to pool, and that path is never taken)."""
        library = self.library
        specs = self._outputs.specs
        pool = device_pool(library, self.dev_id)
        outputs = None if any(spec.stype or spec.nbytes > POOL_MAX_BYTES for spec in specs) \
            else tuple((spec, spec.nbytes, pool) for spec in specs)
        return (self._handle.forward, self._handle,
                [self._inputs._tensors[index] for index in range(len(self._inputs))],
                [self._outputs._tensors[index] for index in range(len(self._outputs))],
                self._inputs.pointer, self._outputs.pointer, self._inputs.specs, outputs,
                library, self.dev_id)

    def close(self) -> None:
        """Releases the plugin's executor (idempotent)."""
        release_now(self._finalizer)


def run_graph(library: AccLibrary, graph: Mapping[str, Any],
              values: Mapping[str, np.ndarray], dev_id: int = 0) -> list[np.ndarray]:
    """Runs an annotated graph operator by operator through executors, with
    every intermediate result in device memory; returns the heads on the
    host. This is imperative mode as the proposal describes it."""
    nodes = graph["nodes"]
    buffers: list[list[DeviceBuffer]] = []
    for node in nodes:
        specs = [TensorSpec(shape, numpy_dtype(code)) for shape, code in zip(
            json.loads(node["attrs"]["__out_shapes__"]),
            json.loads(node["attrs"]["__out_dtypes__"]))]
        outputs = [DeviceBuffer(library, dev_id, spec) for spec in specs]
        if node["op"] == "null":
            outputs[0].copy_from_host(values[node["name"]])
        else:
            inputs = [buffers[entry[0]][entry[1]] for entry in node["inputs"]]
            attrs = {key: value for key, value in node.get("attrs", {}).items()
                     if not key.startswith("__") or key == OP_VERSION_ATTR}
            executor = OperatorExecutor(library, node["op"], [b.spec for b in inputs],
                                        [b.spec for b in outputs], attrs, dev_id)
            executor.forward(inputs, outputs)
            executor.close()
        buffers.append(outputs)
    results = [buffers[head[0]][head[1]].to_host() for head in graph["heads"]]
    for node_buffers in buffers:
        for buffer in node_buffers:
            buffer.free()
    return results


def _clear_slots(*slot_lists: Any) -> None:
    """Points each descriptor of slot_lists at nothing again (after a call:
    no descriptor keeps a host address past the call that used it)."""
    null = ffi.NULL
    for slots in slot_lists:
        for slot in slots:
            slot.data = null
