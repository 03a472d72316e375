"""Loaded models shared by the executors of one plan cache.

The executors a PlanCache keeps (acc_host.runtime.plan_cache: an executor
and its reshapes, the ONNX backend's executors per input shape) are planned
per shape, but a subgraph whose inputs do not depend on the changed
dimensions (a classifier head after global pooling, a branch fed by another
input) is the same model at every shape. :class:`SharedModels` lets their
subgraph operators (acc_host.runtime.subgraph) use one loaded model: the
key is the plugin and device, the annotated subgraph JSON (which holds
every input's, output's and weight's shape and dtype) and the identity of
each weight's storage (the same NDArray, so the same bytes at the same
version). A model is loaded by the first operator that needs it and
unloaded when the last one using it closes; operators collected without
closing drop their reference with them (the registry holds its entries
weakly), and the LoadedModel unloads itself when collected.

Concurrency: every infer() of a loaded model runs under its device's lock
(LoadedModel.infer, BoundInference.run), the plugin's buffers of a model are
therefore used by one call at a time whichever executor makes it, and each
operator keeps its own staging and output buffers. Weights: each entry
records the weight versions the plugin's copy holds; an operator that
starts using a loaded model starts from them, so a weight written since is
passed to infer() at its next forward (as after its own load)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from ..abi.loaded_model import LoadedModel

__all__ = ["SharedModel", "SharedModels", "SharedModelsStats"]


@dataclass(eq=False)
class SharedModel:
    """One loaded model and the operators using it (refs)."""

    key: Hashable
    model: LoadedModel
    versions: list[int]
    anchors: tuple[Any, ...]  # the weights' storage vars the key names by id
    refs: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class SharedModelsStats:
    """loads: models loaded through the registry; reuses: times an operator
    took a model already loaded; unloads: models unloaded when their last
    operator closed; live: models held now."""

    loads: int
    reuses: int
    unloads: int
    live: int


class SharedModels:
    """Loaded models by key, reference-counted (see the module's text)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: weakref.WeakValueDictionary[Hashable, SharedModel] = (
            weakref.WeakValueDictionary())
        self.loads = self.reuses = self.unloads = 0

    def acquire(self, key: Hashable, anchors: tuple[Any, ...], versions: list[int],
                load: Callable[[], LoadedModel]) -> tuple[SharedModel, bool]:
        """The entry for key, with one more reference, and whether it was
        loaded now (by load(), with the weights at versions). Loading holds
        the registry's lock: two operators needing the same model at once
        load it once."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.refs > 0:
                entry.refs += 1
                self.reuses += 1
                return entry, False
            entry = SharedModel(key, load(), list(versions), anchors)
            self._entries[key] = entry
            self.loads += 1
            return entry, True

    def adopt(self, key: Hashable, anchors: tuple[Any, ...], versions: list[int],
              model: LoadedModel) -> SharedModel | None:
        """Registers a model an operator loaded before it joined the
        registry (the first executor of a reshape family); None when
        another model is already held under key (the operator keeps its
        own)."""
        with self._lock:
            if self._entries.get(key) is not None:
                return None
            entry = SharedModel(key, model, list(versions), anchors)
            self._entries[key] = entry
            return entry

    def release(self, entry: SharedModel) -> None:
        """Drops one reference; unloads the model with the last one."""
        with self._lock:
            entry.refs -= 1
            last = entry.refs == 0
            if last:
                if self._entries.get(entry.key) is entry:
                    del self._entries[entry.key]
                self.unloads += 1
        if last:
            entry.model.close()

    def stats(self) -> SharedModelsStats:
        with self._lock:
            return SharedModelsStats(self.loads, self.reuses, self.unloads, len(self._entries))
