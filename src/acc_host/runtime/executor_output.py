"""An executor's outputs: NDArrays whose ``asnumpy()`` reads a bound
output buffer with one copyFromAcc.

Once an executor runs its plan as one bound step (:mod:`.direct_run`), each
output in the plugin's memory keeps a reader: the checks that the read may
skip the general path (not inside an engine operation, no trace, the array
still holding the buffer it was bound with, allocated, nothing pending or
failed on its var), then LoadedModel's copy into a new host array
(``BoundInference.reader``), all under the executor's lock like any read of
its outputs. NDArray.asnumpy takes a dozen attribute reads, two lock
blocks and three calls around the same copy (1.7 us against 0.9 for the
reader on the one-operator graph). Anything else, views included, takes
NDArray's own path.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..engine.base import operation_state
from ..ndarray import NDArray
from ..trace import recorder as trace_recorder

__all__ = ["ExecutorOutput", "output_reader"]

# A reader: a new host array of the output's elements, or None when the
# direct read does not apply now (nothing was done).
Reader = Callable[[], "np.ndarray | None"]


class ExecutorOutput(NDArray):
    """An NDArray that is an executor's output (see the module)."""

    __slots__ = ("_reader",)
    _reader: Reader | None

    @classmethod
    def of(cls, array: NDArray) -> ExecutorOutput:
        """The output array sharing array's storage (array was just made:
        nothing else holds it)."""
        result = cls.__new__(cls)
        result._ctx = array._ctx
        result._storage = array._storage
        result._view = array._view
        result._reader = None
        return result

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the elements (see NDArray.asnumpy)."""
        if self._view is None:
            try:
                reader = self._reader
            except AttributeError:  # made by NDArray's own constructors
                reader = None
            if reader is not None:
                values = reader()
                if values is not None:
                    return values
        return NDArray.asnumpy(self)


def output_reader(array: NDArray, copy: Callable[[], np.ndarray]) -> Reader:
    """array's reader (see the module): copy, the bound buffer's copy out,
    when array still holds that buffer in device memory only, allocated,
    with nothing pending or failed on its var, outside any engine
    operation and trace; else None."""
    storage = array._storage
    buffer, guard = storage.device, storage.guard
    if guard is None:  # not an executor's array: NDArray's path
        return _no_read
    acquire, release = guard.acquire, guard.release
    local, tracing = operation_state(), trace_recorder.current

    def read() -> np.ndarray | None:
        if getattr(local, "depth", 0) or tracing() is not None or storage.guard is not guard:
            return None
        acquire()
        try:
            var = storage.var
            if (storage.device is buffer and storage.host is None and not buffer._freed
                    and not var._writing and not var._pending and var.exception is None):
                return copy()
            return None
        finally:
            release()

    return read


def _no_read() -> None:
    return None
