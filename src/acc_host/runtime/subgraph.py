"""The subgraph operator: one accelerator subgraph inside a bound executor.

It compiles its subgraph with loadModel() at its first forward (compilation
needs the weights, as the CNML design says), then calls infer() on every
forward, and unloadModel() when closed or collected. Its descriptor arrays
are built once (in LoadedModel); per forward only data pointers change.

Weights are checked on every forward: each one is an NDArray whose version
counts its writes, and a weight written since the model was loaded is
passed to infer() again, which replaces the plugin's copy.

Data crossing the boundary: when the plugin manages its own memory
(supportsImperative() is 1), inputs coming from the CPU are copied in with
copyToAcc into staging buffers and outputs stay in device buffers until a
CPU operator needs them (copyFromAcc); otherwise descriptors point at host
memory and nothing is copied.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from collections.abc import Mapping
from typing import Any, TypeAlias

import numpy as np

from ..abi.library import AccLibrary
from ..abi.loaded_model import BoundInference, LoadedModel
from ..abi.memory import DeviceBuffer
from ..abi.sparse import SparseArray
from ..abi.tensor import TensorSpec
from ..engine.base import in_operation
from ..engine.var import WriteWatch
from ..errors import AccHostError, InvalidArgumentError
from ..ndarray import NDArray
from ..partition.segment import SubgraphSpec
from .model_cache import ModelCache, cache_from_environment, supports_cache
from .shared_models import SharedModel, SharedModels
from .sparse_cpu import dense_value, is_sparse

__all__ = ["SubgraphOperator", "Value", "to_host", "AccFallbackWarning"]


class AccFallbackWarning(UserWarning):
    """Work meant for an accelerator runs on the CPU instead."""

# A value between steps: a host array, a device buffer, or a sparse NDArray
# (a bound CSR or row-sparse argument, passed as it is: ABI 1.2).
Value: TypeAlias = np.ndarray | DeviceBuffer | SparseArray


def to_host(value: Value) -> Any:
    """A host array for value (copyFromAcc for a device buffer); a sparse
    NDArray as it is (sparse_cpu.dense_value gives its dense value)."""
    return value.to_host() if isinstance(value, DeviceBuffer) else value


class SubgraphOperator:
    """Runs one SubgraphSpec on device dev_id of library."""

    def __init__(self, library: AccLibrary, spec: SubgraphSpec, dev_id: int,
                 shared: SharedModels | None = None) -> None:
        self.library = library
        self.spec = spec
        self.dev_id = dev_id
        self.device_memory = library.supports_imperative
        self._model: LoadedModel | None = None
        self._versions: list[int] = []
        self._weight_vars: tuple[Any, ...] = ()  # the weights' engine vars, once loaded
        self._watch: WriteWatch | None = None  # on those vars, when there are any
        self._data_entries = [(name, entry) for name, entry in spec.inputs.items()
                              if name not in spec.weights]
        self._weight_names = tuple(spec.weights)
        # The inputs the subgraph takes sparse (ABI 1.2; the partition decided).
        self._sparse_names = frozenset(spec.sparse_inputs)
        self._output_items = tuple(spec.outputs.items())
        self._staging: dict[str, DeviceBuffer] = {}
        self._outputs: dict[str, DeviceBuffer] = {}
        self.loads = 0
        self.load_seconds = 0.0
        self.load_source = ""  # "compiled", "cache" or "shared" (another executor's model)
        self._shared = shared  # the plan cache's loaded models (acc_host.runtime.shared_models)
        self._entry: SharedModel | None = None
        self._graph_json: str | None = None
        self.weight_refreshes = 0
        self.declined: str | None = None  # the plugin's reason, once it refused to compile

    @property
    def label(self) -> str:
        """The subgraph's name in errors: "subgraph 2 on cpu_ref(0)"."""
        return f"subgraph {self.spec.index} on {self.library.name}({self.dev_id})"

    # ---- values -------------------------------------------------------------------

    def on_device(self, value: Any) -> bool:
        """Whether value is a buffer on this subgraph's device."""
        return (isinstance(value, DeviceBuffer) and value.library is self.library
                and value.dev_id == self.dev_id)

    def _stage(self, name: str, value: Value) -> Value:
        """value as the plugin should receive it: as it is when already on
        this device; in a staging buffer (copyToAcc) when the plugin keeps
        its own memory; else in host memory."""
        if self.on_device(value):
            return value
        if is_sparse(value):
            if name in self._sparse_names:  # passed sparse (ABI 1.2), host memory
                return value
            value = dense_value(value)  # densified at the boundary
        host = to_host(value)
        if not self.device_memory:
            return host
        buffer = self._staging.get(name)
        if buffer is None:
            buffer = self._staging[name] = DeviceBuffer(self.library, self.dev_id,
                                                        TensorSpec.of(host))
        buffer.copy_from_host(host)
        return buffer

    def _weight_value(self, array: NDArray, name: str | None = None) -> Value:
        """A weight as the plugin receives it: a sparse one (ABI 1.2) as it
        is when the subgraph takes input name sparse, else its dense value."""
        if is_sparse(array):
            return array if name in self._sparse_names else dense_value(array)
        storage = array._storage
        if array._view is None and storage.host is None and self.on_device(storage.device):
            return storage.device
        return array._read()

    # ---- running ----------------------------------------------------------------------

    def _graph_text(self) -> str:
        if self._graph_json is None:
            self._graph_json = json.dumps(self.spec.graph, sort_keys=True)
        return self._graph_json

    def _share_key(self, weight_vars: tuple[Any, ...]) -> tuple[Any, ...]:
        """What makes two subgraphs one model: the plugin and device, the
        annotated graph (shapes and dtypes included) and the weights'
        storage, by identity."""
        return (id(self.library), self.dev_id, self._graph_text(),
                tuple(id(var) for var in weight_vars))

    def share(self, shared: SharedModels) -> None:
        """Joins a plan cache's loaded models: a model this operator loads
        from now on is shared, and one it already holds is offered."""
        if self._shared is not None or self.declined:
            return
        self._shared = shared
        if self._model is not None:
            self._entry = shared.adopt(self._share_key(self._weight_vars), self._weight_vars,
                                       self._versions, self._model)

    def _compile(self, weights: Mapping[str, NDArray]) -> LoadedModel:
        values = {name: self._weight_value(weights[name], name) for name in self.spec.weights}
        cache = cache_from_environment()
        if cache is not None and supports_cache(self.library):
            return self._load_through_cache(cache, values, weights)
        self.load_source = "compiled"
        return LoadedModel(self.library, self.spec.graph, values, self.dev_id, label=self.label)

    def _load(self, weights: Mapping[str, NDArray]) -> None:
        start = time.perf_counter()
        self._weight_vars = tuple(weights[name]._storage.var for name in self._weight_names)
        self._versions = [weights[name].version for name in self._weight_names]
        if self._shared is not None:
            entry, loaded = self._shared.acquire(
                self._share_key(self._weight_vars), self._weight_vars, self._versions,
                lambda: self._compile(weights))
            self._entry, self._model = entry, entry.model
            if not loaded:
                self.load_source = "shared"
                with entry.lock:
                    self._versions = list(entry.versions)
        else:
            self._model = self._compile(weights)
        self.load_seconds = time.perf_counter() - start
        self._watch = WriteWatch(self._weight_vars) if self._weight_vars else None
        if self._watch is not None and self.load_source == "shared":
            self._watch.written = True  # compare with the versions the model holds
        self.loads += 1
        if self.device_memory:
            self._outputs = {name: DeviceBuffer(self.library, self.dev_id, spec)
                             for name, spec in self._model.signature.outputs.items()}

    def _load_through_cache(self, cache: ModelCache, values: Mapping[str, Value],
                            weights: Mapping[str, NDArray]) -> LoadedModel:
        """Imports the compiled model when the cache holds a valid one;
        otherwise compiles it and exports it for next time. The weights'
        digests are remembered per NDArray and version: device values are
        copied to the host only to be hashed. A subgraph whose start through
        the cache cost more than its compile is compiled without it
        (:mod:`.cache_costs`)."""
        graph_json = self._graph_text()
        costs = cache.costs(self.library, graph_json, self.dev_id)
        if not costs.cache_pays():
            start = time.perf_counter()
            model = LoadedModel(self.library, self.spec.graph, values, self.dev_id,
                                label=self.label)
            costs.record(compile_s=time.perf_counter() - start)
            self.load_source = "compiled"
            return model
        start = time.perf_counter()
        entry = cache.entry(self.library, graph_json,
                            {name: functools.partial(to_host, value)
                             for name, value in values.items()},
                            self.dev_id, arrays={name: weights[name] for name in values})
        if cache.valid(entry):
            model_id = LoadedModel.new_id()
            try:
                self.library.configure(self.dev_id, {"import_model": model_id,
                                                     "path": str(entry.model_path)})
            except AccHostError:
                cache.discard(entry)  # the plugin refused it: rebuild, never trust it
            else:
                self.load_source = "cache"
                adopted = LoadedModel.adopt(self.library, self.spec.graph, model_id, self.dev_id,
                                            label=self.label)
                costs.record(cache_s=time.perf_counter() - start)
                return adopted
        start = time.perf_counter()
        model = LoadedModel(self.library, self.spec.graph, values, self.dev_id, label=self.label)
        costs.record(compile_s=time.perf_counter() - start)
        self.load_source = "compiled"
        try:
            scratch = cache.scratch_path()
        except OSError:  # the cache is an optimisation: a full disk costs the export only
            return model
        try:
            self.library.configure(self.dev_id, {"export_model": model.model_id,
                                                 "path": str(scratch)})
            cache.store(entry, scratch, self.library.name)
        except (AccHostError, OSError):
            scratch.unlink(missing_ok=True)
        return model

    def _changed_weights(self, weights: Mapping[str, NDArray]) -> dict[str, Value] | None:
        """The weights written since the model last saw them, or None. Inside
        a pushed operation (a forward step) every write to them is done, so
        their vars' versions are read directly."""
        names = self._weight_names
        if in_operation():
            if self.weights_current():
                return None
            versions = [weights[name]._storage.var.version for name in names]
        else:
            versions = [weights[name].version for name in names]
        if versions == self._versions:
            return None
        changed = {name: self._weight_value(weights[name], name)
                   for name, old, new in zip(names, self._versions, versions) if old != new}
        self._versions = versions
        self.weight_refreshes += 1
        if self._entry is not None:
            with self._entry.lock:
                self._entry.versions = list(versions)
        return changed

    @property
    def model(self) -> LoadedModel | None:
        """The loaded model (None before the first forward and after close)."""
        return self._model

    def weights_current(self) -> bool:
        """Inside a pushed operation that reads the weights: whether the
        loaded model holds their latest values (no write since it saw them).
        O(1) while no weight was written since the last check (WriteWatch)."""
        watch = self._watch
        if watch is None or not watch.written:
            return True
        watch.written = False  # before the comparison: see WriteWatch
        if [var.version for var in self._weight_vars] == self._versions:
            return True
        watch.written = True
        return False

    def bind_buffers(self, inputs: Mapping[int, DeviceBuffer],
                     outputs: Mapping[int, DeviceBuffer]) -> BoundInference:
        """The loaded model's infer() on fixed buffers of this device, given
        by entry: every data input and every output of the subgraph."""
        if self._model is None:
            raise InvalidArgumentError(f"subgraph {self.spec.index} is not loaded")
        return self._model.bind({name: inputs[entry] for name, entry in self._data_entries},
                                {name: outputs[entry] for name, entry in self._output_items})

    def forward(self, entries: Mapping[int, Value], weights: Mapping[str, NDArray],
                targets: Mapping[int, Value] | None = None) -> dict[int, Value]:
        """Runs the subgraph on the values of its input entries; returns the
        values of its output entries. targets: output entries to write in
        place (a buffer on this device when the plugin has its own memory, a
        host array otherwise, of the output's shape and dtype)."""
        model = self._model
        changed: dict[str, Value] | None = None
        if model is None:
            self._load(weights)
            model = self._model
            assert model is not None
            if self._entry is not None and self.load_source == "shared":
                changed = self._changed_weights(weights)  # written since the owner saw them
        elif self._weight_names:
            changed = self._changed_weights(weights)
        library, dev_id = self.library, self.dev_id
        inputs = {}
        for name, entry in self._data_entries:
            value = entries[entry]
            # Already on this device (the common case inside an executor): as it is.
            inputs[name] = (value if type(value) is DeviceBuffer and value.library is library
                            and value.dev_id == dev_id else self._stage(name, value))
        outputs: dict[str, Value] | None
        if targets:
            outputs = {}
            for name, entry in self._output_items:
                target = targets.get(entry)
                if target is not None:
                    outputs[name] = target
                elif self.device_memory:
                    outputs[name] = self._outputs[name]
                else:
                    spec = model.signature.outputs[name]
                    outputs[name] = np.empty(spec.shape, spec.dtype)
        else:
            outputs = dict(self._outputs) if self.device_memory else None
        results = model.infer(inputs, outputs, weights=changed)
        return {entry: results[name] for name, entry in self._output_items}

    def decline(self, reason: str) -> None:
        """Marks the subgraph as refused by the plugin: it runs on the CPU."""
        warnings.warn(f"{self.library.name}: subgraph {self.spec.index} runs on the CPU: "
                      f"{reason}", AccFallbackWarning, stacklevel=3)
        self.declined = reason
        self.close()

    def close(self) -> None:
        if self._entry is not None:
            entry, self._entry, self._model = self._entry, None, None
            assert self._shared is not None
            self._shared.release(entry)
        elif self._model is not None:
            self._model.close()
            self._model = None
        for buffer in [*self._staging.values(), *self._outputs.values()]:
            buffer.free()
        self._staging.clear()
        self._outputs.clear()
