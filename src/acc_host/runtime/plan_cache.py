"""A bounded cache of bound plans by input shape (least recently used first out).

A model with symbolic dimensions is planned per input shape: shape
inference (with the shape arithmetic worked out on the host, see
acc_host.graph.dynamic), partitioning, the memory plan, and the plugin's
loadModel of each subgraph at its first forward. :class:`PlanCache` keeps
the executors of the last ``size`` shapes, so that a model that alternates
between a few shapes (batch sizes, image sizes, sequence lengths) re-plans
only on a shape it has not seen lately; the least recently used one is
dropped when a new shape needs its place (closed, its subgraphs unloaded,
where the cache owns its executors: the ONNX backend's).
``DEFAULT_SIZE`` (8) bounds the memory: each cached executor holds its
outputs and its subgraphs' compiled models. ``stats()`` tells what
happened: hits, misses (plans made), evictions, and the shapes held.

The executors of one cache share their loaded models where a subgraph is
the same at two shapes (``models``, acc_host.runtime.shared_models): an
executor the cache makes or is given joins it (its ``share_models``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from .shared_models import SharedModels

__all__ = ["PlanCache", "PlanCacheStats", "DEFAULT_SIZE"]

#: Executors (plans) kept per model by default.
DEFAULT_SIZE = 8


@dataclass(frozen=True)
class PlanCacheStats:
    """hits: lookups answered by a kept plan; misses: plans made; evictions:
    plans dropped for room; size: the bound; keys: the shapes held, least
    recently used first."""

    hits: int
    misses: int
    evictions: int
    size: int
    keys: tuple[Hashable, ...]


class PlanCache:
    """Executors by key (the input names, shapes and dtypes), made by
    make(key) on a miss; at most size of them (LRU)."""

    def __init__(self, make: Callable[[Any], Any], size: int = DEFAULT_SIZE,
                 close_evicted: bool = True) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgumentError(f"PlanCache: size must be an integer >= 1, got {size!r}")
        self._make = make
        self._close_evicted = close_evicted
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        self.models = SharedModels()

    def _join(self, executor: Any) -> None:
        share = getattr(executor, "share_models", None)
        if share is not None:
            share(self.models)

    def get(self, key: Hashable, build: Any = None,
            make: Callable[[Any], Any] | None = None) -> Any:
        """The executor for key, made by make (default: the cache's) of
        build (default: key) on a miss."""
        with self._lock:
            executor = self._items.get(key)
            if executor is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return executor
        executor = (make or self._make)(key if build is None else build)
        self._join(executor)
        with self._lock:
            self.misses += 1
            self._items[key] = executor
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                _, old = self._items.popitem(last=False)
                self.evictions += 1
                close = getattr(old, "close", None)
                if close is not None and self._close_evicted:
                    close()
        return executor

    def put(self, key: Hashable, executor: Any) -> None:
        """Keeps an executor made elsewhere (the first bind) under key."""
        self._join(executor)
        with self._lock:
            self._items[key] = executor
            self._items.move_to_end(key)

    def peek(self, key: Hashable) -> Any:
        with self._lock:
            return self._items.get(key)

    def stats(self) -> PlanCacheStats:
        with self._lock:
            return PlanCacheStats(self.hits, self.misses, self.evictions, self.size,
                                  tuple(self._items))

    def clear(self) -> None:
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for executor in items:
            close = getattr(executor, "close", None)
            if close is not None:
                close()
