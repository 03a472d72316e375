"""An executor's outputs: NDArrays whose ``asnumpy()`` reads a bound
output buffer with one copyFromAcc.

Once an executor runs its plan as one bound step (:mod:`.direct_run`), each
output in the plugin's memory keeps a reader: the checks that the read may
skip the general path (not inside an engine operation, no trace, the array
still holding the buffer it was bound with, nothing pending or failed on
its var), then LoadedModel's copy into a new host array
(``BoundInference.reader``, which refuses a freed buffer under the device
lock). NDArray.asnumpy takes a dozen attribute reads, two lock blocks and
three calls around the same copy (1.7 us against 0.85 for the reader on
the one-operator graph). Anything else, views included, takes NDArray's
own path.
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


def output_reader(array: NDArray, copy: Callable[[], np.ndarray | None]) -> Reader:
    """array's reader (see the module): copy, the bound buffer's copy out
    (which refuses a freed buffer under the device lock), when array
    still holds that buffer in device memory only, with nothing pending or
    failed on its var, outside any engine operation and trace; else None.

    It does not take the executor's lock, as NDArray's read does: the
    buffer is written whole under the device lock (infer() or one copy),
    which the copy out takes too, so the read sees one whole forward's
    output, the one before or the one after a forward that another thread
    runs meanwhile (a forward pending or running under ThreadedEngine is
    seen on the var, and the read then waits for it on NDArray's path).
    The lock cost 0.17 us of the read's 1.0."""
    storage = array._storage
    buffer = storage.device
    if storage.guard is None:  # not an executor's array: NDArray's path
        return _no_read
    local, tracing = operation_state(), trace_recorder.current

    def read() -> np.ndarray | None:
        if getattr(local, "depth", 0) or tracing() is not None:
            return None
        var = storage.var
        if (storage.device is buffer and storage.host is None and not var._writing
                and not var._pending and var.exception is None):
            return copy()
        return None

    return read


def _no_read() -> None:
    return None
