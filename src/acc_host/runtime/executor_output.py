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
own path. Operators are planned on these arrays as on NDArrays
(``ndarray.plan_as_ndarray``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.base import operation_state
from ..ndarray import NDArray, plan_as_ndarray
from ..trace import recorder as trace_recorder

__all__ = ["ExecutorOutput"]

# An output's direct read: (the buffer it was bound with, that buffer's
# copy out into a new host array, None when the buffer was freed).
DirectRead = tuple[Any, Callable[[], "np.ndarray | None"]]
_LOCAL = operation_state()  # the thread-local record in_operation reads
_tracing = trace_recorder.current


class ExecutorOutput(NDArray):
    """An NDArray that is an executor's output (see the module)."""

    __slots__ = ("_direct",)
    _direct: DirectRead | None

    @classmethod
    def of(cls, array: NDArray) -> ExecutorOutput:
        """The output array sharing array's storage (array was just made:
        nothing else holds it)."""
        result = cls.__new__(cls)
        result._ctx = array._ctx
        result._storage = array._storage
        result._view = array._view
        result._direct = None
        return result

    def read_directly(self, buffer: Any, copy: Callable[[], np.ndarray | None]) -> None:
        """From now on asnumpy() copies buffer out with copy (the bound
        buffer's one-call copyFromAcc) whenever the array still holds
        buffer in device memory only, with nothing pending or failed on
        its var, outside any engine operation and trace."""
        self._direct = (buffer, copy)

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the elements (see NDArray.asnumpy and the
        module).

        The direct read does not take the executor's lock, as NDArray's
        read does: the buffer is written whole under the device lock
        (infer() or one copy), which the copy out takes too, so the read
        sees one whole forward's output, the one before or the one after a
        forward that another thread runs meanwhile (a forward pending or
        running under ThreadedEngine is seen on the var, and the read then
        waits for it on NDArray's path). The lock cost 0.17 us of the
        read's 1.0."""
        try:
            direct = self._direct
        except AttributeError:  # a view, made by NDArray's own constructors
            direct = None
        if (direct is not None and self._view is None and not _LOCAL.depth
                and _tracing() is None):
            storage = self._storage
            var = storage.var
            if (storage.device is direct[0] and storage.host is None and not var._writing
                    and not var._pending and var.exception is None):
                values = direct[1]()
                if values is not None:
                    return values
        return NDArray.asnumpy(self)


# Operators on an executor's outputs are planned as on any NDArray (the
# unplanned call cost 67 us against 17 for `output * 1` on cpu_ref).
plan_as_ndarray(ExecutorOutput)
