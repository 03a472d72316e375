"""A subgraph step bound to fixed device buffers: the executor's fast path
(:mod:`.executor` makes one once a step's model is loaded and its buffers
qualify; :mod:`.direct_run` runs a whole-graph one as one engine operation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..abi.loaded_model import BoundInference

if TYPE_CHECKING:
    from ..ndarray import NDArray
    from .subgraph import SubgraphOperator

__all__ = ["BoundStep"]


class BoundStep:
    """A subgraph step run on fixed buffers: its data inputs are bound
    arguments and its outputs executor outputs, all in the memory of the
    subgraph's device, and no other step reads what it computes. So the
    plugin's infer() is the whole step (descriptors built once). It runs
    only while every array still holds the buffer it was bound with."""

    __slots__ = ("infer", "_bound")

    def __init__(self, infer: BoundInference, arrays: Sequence[NDArray]) -> None:
        self.infer = infer
        # (storage, the device buffer it held when bound) per array
        self._bound = tuple((array._storage, array._storage.device) for array in arrays)

    def current(self) -> bool:
        """Whether every array still holds, in device memory only, the
        buffer it was bound with, and that buffer is allocated (the
        bound infer's buffers are these)."""
        for storage, buffer in self._bound:
            if storage.device is not buffer or storage.host is not None or buffer._freed:
                return False
        return True

    def ready(self, operator: SubgraphOperator) -> bool:
        """Whether the step may run now as one bound call of operator, its
        subgraph: operator not declined, its model the one bound, every
        buffer current (see current) and the weights as the model saw them."""
        return (not operator.declined and self.infer.model is operator.model
                and self.current() and operator.weights_current())
