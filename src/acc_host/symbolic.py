"""Symbolic execution: a graph compiled by a plugin's loadModel() and run
with infer().

A :class:`LoadedModel` owns one model id on one device: it builds the input
and output descriptor arrays once, changes only their data pointers per
inference, and calls unloadModel() when closed or garbage-collected.
"""

from __future__ import annotations

import itertools
import json
import os
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._abi import ffi
from .annotate import GraphSignature, signature
from .errors import InvalidArgumentError, TensorError
from .library import AccLibrary
from .memory import DeviceBuffer
from .tensor import CStrings, TensorArray, contiguous

__all__ = ["LoadedModel", "ArrayLike"]

ArrayLike = np.ndarray | DeviceBuffer
_model_ids = itertools.count()


def _unload(library: AccLibrary, model_id: str, dev_id: int) -> None:
    library.unload_model(model_id, dev_id)


class LoadedModel:
    """loadModel() of an annotated graph (see :mod:`acc_host.annotate`) with
    its weights on device dev_id."""

    def __init__(self, library: AccLibrary, graph: Mapping[str, Any],
                 weights: Mapping[str, ArrayLike], dev_id: int = 0,
                 model_id: str | None = None) -> None:
        library.check_device(dev_id)
        self.library = library
        self.dev_id = dev_id
        self.model_id = model_id or self.new_id()
        self.signature: GraphSignature = signature(graph)
        missing = sorted(set(self.signature.weights) - set(weights))
        extra = sorted(set(weights) - set(self.signature.weights))
        if missing or extra:
            raise InvalidArgumentError(
                f"model {self.model_id}: weights missing {missing}, not in the graph {extra}")
        names = [*self.signature.weights, *self.signature.data]
        tensors = TensorArray([*self.signature.weights.values(), *self.signature.data.values()])
        for index, name in enumerate(self.signature.weights):
            self._point(tensors, index, name, weights[name], writable=False)
        c_names = CStrings(names)  # must outlive the call
        with library.device_lock(dev_id):
            library.check(library.name, "loadModel", library.lib.loadModel(
                ffi.new("char[]", self.model_id.encode("utf-8")),
                ffi.new("char[]", json.dumps(graph).encode("utf-8")),
                c_names.pointer, tensors.pointer, len(names), dev_id), self.model_id)
        self._adopt()

    @staticmethod
    def new_id() -> str:
        """A model id no other model of this process uses."""
        return f"acc_host.{os.getpid()}.model{next(_model_ids)}"

    @classmethod
    def adopt(cls, library: AccLibrary, graph: Mapping[str, Any], model_id: str,
              dev_id: int = 0) -> LoadedModel:
        """A LoadedModel for a model the plugin already holds under model_id
        (imported from a compiled file); unloaded like any other."""
        model = cls.__new__(cls)
        model.library, model.dev_id, model.model_id = library, dev_id, model_id
        model.signature = signature(graph)
        model._adopt()
        return model

    def _adopt(self) -> None:
        """Takes ownership of the loaded model and prepares the per-inference
        descriptor arrays."""
        library, dev_id = self.library, self.dev_id
        self._finalizer = weakref.finalize(self, _unload, library, self.model_id, dev_id)
        self._finalizer.atexit = False
        self._model_id_text = ffi.new("char[]", self.model_id.encode("utf-8"))
        self._in_names = CStrings(list(self.signature.data))
        self._inputs = TensorArray(list(self.signature.data.values()))
        self._out_names = CStrings(list(self.signature.outputs))
        self._outputs = TensorArray(list(self.signature.outputs.values()))

    def _point(self, array: TensorArray, index: int, name: str, value: ArrayLike,
               writable: bool) -> None:
        spec = array.specs[index]
        if isinstance(value, DeviceBuffer):
            if value.library is not self.library or value.dev_id != self.dev_id or value.closed:
                raise TensorError(f"{name}: {value!r} is not usable on "
                                  f"{self.library.name}({self.dev_id})")
            if value.spec != spec:
                raise TensorError(f"{name}: {value!r} does not match {spec.shape} {spec.dtype}")
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
        weights, when given, replace the plugin's copies from now on."""
        if not self._finalizer.alive:
            raise InvalidArgumentError(f"model {self.model_id} was unloaded")
        if set(inputs) != set(self.signature.data):
            raise InvalidArgumentError(
                f"model {self.model_id}: inputs {sorted(inputs)} do not match the data inputs "
                f"{sorted(self.signature.data)}")
        results: dict[str, ArrayLike] = dict(outputs) if outputs is not None else {
            name: np.empty(spec.shape, spec.dtype) for name, spec in self.signature.outputs.items()}
        if set(results) != set(self.signature.outputs):
            raise InvalidArgumentError(
                f"model {self.model_id}: outputs {sorted(results)} do not match "
                f"{sorted(self.signature.outputs)}")
        in_names, in_array = self._in_names, self._inputs
        if weights:
            in_names, in_array = self._with_weights(weights)
        for index, name in enumerate(self.signature.data):
            self._point(in_array, index, name, inputs[name], writable=False)
        for index, name in enumerate(self.signature.outputs):
            self._point(self._outputs, index, name, results[name], writable=True)
        try:
            with self.library.device_lock(self.dev_id):
                status = self.library.lib.infer(
                    self._model_id_text, in_names.pointer,
                    self._out_names.pointer, in_array.pointer, self._outputs.pointer,
                    len(in_array), len(self._outputs))
            self.library.check(self.library.name, "infer", status, self.model_id)
        finally:
            in_array.clear()
            self._outputs.clear()
        return results

    def _with_weights(self, weights: Mapping[str, ArrayLike]) -> tuple[CStrings, TensorArray]:
        unknown = sorted(set(weights) - set(self.signature.weights))
        if unknown:
            raise InvalidArgumentError(f"model {self.model_id}: {unknown} are not weights")
        names = [*self.signature.data, *weights]
        array = TensorArray([*self.signature.data.values(),
                             *(self.signature.weights[name] for name in weights)])
        for offset, (name, value) in enumerate(weights.items()):
            self._point(array, len(self.signature.data) + offset, name, value, writable=False)
        return CStrings(names), array

    def close(self) -> None:
        """unloadModel() now (idempotent)."""
        self._finalizer()

    def __enter__(self) -> LoadedModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
