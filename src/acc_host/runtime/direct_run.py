"""Executor.predict's direct path: a whole-graph subgraph run as one
engine operation.

An executor whose plan is a single subgraph step on fixed device buffers
(see :mod:`.bound_step`: every data input a bound argument, every output
an executor output, all in the device's memory) does three things per
synchronous inference: copy the inputs into the argument buffers
(copyToAcc), call infer() on the bound buffers, copy the outputs into new
host arrays (copyFromAcc). The general path does the same through three
engine operations, the executor's per-forward bookkeeping and NDArray's
reading path, which costs tens of microseconds of Python per forward: as
much as the whole compute of a small CNN. Here the three run as one
operation granted by the engine at once (``run_now``), with descriptors
built once and only data pointers refreshed.

The result is the general path's, with the same side effects: the
arguments hold the inputs and the executor outputs hold the results
afterwards, and every var written gets its version bumped. The path
declines (returns None, and the caller runs the general path) whenever it
does not apply at that moment: something pending on a var, a buffer
replaced or freed, weights written since the model saw them, a
differential check or a trace running.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import engine
from ..abi.header import ffi
from ..abi.tensor import TensorArray, TensorSpec
from ..trace import recorder as trace_recorder
from .bound_step import BoundStep

if TYPE_CHECKING:
    from ..context import Context
    from ..ndarray import NDArray
    from .subgraph import SubgraphOperator

__all__ = ["DirectRun"]


class DirectRun:
    """The direct path of one executor (built once its subgraph step runs
    on fixed buffers). ``inputs``: the data arguments by name;
    ``outputs``: the executor outputs, in order."""

    __slots__ = ("operator", "step", "inputs", "specs", "_inputs", "_outputs", "_watched",
                 "_writes", "_ctx", "_library", "_lock", "_descriptors", "_values",
                 "_results", "_failure")

    def __init__(self, operator: SubgraphOperator, step: BoundStep, ctx: Context,
                 inputs: Mapping[str, NDArray], outputs: Sequence[NDArray],
                 reads: Sequence[engine.Var], writes: Sequence[engine.Var]) -> None:
        self.operator = operator
        self.step = step
        self.inputs = dict(inputs)
        # Per input and output: its device buffer's descriptor and a host
        # descriptor for the copy, built here (kept alive by this object);
        # a call only points the host descriptor at data.
        self._descriptors: list[TensorArray] = []
        self._inputs = {name: self._copy_pair(array) for name, array in inputs.items()}
        # Each input's (shape, dtype), as its buffer holds it.
        self.specs = {name: (pair[3].shape, pair[3].dtype) for name, pair in self._inputs.items()}
        self._outputs = tuple(self._copy_pair(output) for output in outputs)
        self._watched, self._writes = engine.base.normalize_vars(
            reads, [*writes, *(array._var for array in inputs.values())])
        self._ctx = ctx
        self._library = operator.library
        self._lock = operator.library.device_lock(operator.dev_id)
        # One run's values and outcome, while run() is on (see run).
        self._values: Mapping[str, np.ndarray] | None = None
        self._results: list[np.ndarray] | None = None
        self._failure: BaseException | None = None

    def _copy_pair(self, array: NDArray) -> tuple[Any, Any, Any, TensorSpec]:
        """(device descriptor, host descriptor, a pointer to it, spec) for
        copies of array's buffer."""
        buffer = array._storage.device
        host = TensorArray([buffer.spec])
        self._descriptors.append(host)
        (_, slot, spec), = host.slots()
        return buffer._descriptor.pointer, slot, ffi.addressof(slot), spec

    def run(self, values: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
        """Writes values (C-contiguous host arrays of the arguments' shapes
        and dtypes, for a subset of ``inputs``) into the arguments, runs the
        model and returns its outputs as new host arrays; None when the
        path does not apply now (nothing was done). A failure is raised
        here, to the caller: it is not left on the arrays for a later wait.
        The caller serializes calls (the executor's lock)."""
        if trace_recorder.current() is not None:
            return None
        self._values = values
        self._results = self._failure = None
        try:
            if not engine.get().run_now_watching(self._operation, self._ctx, self._watched,
                                                 self._writes):
                return None
            if self._failure is not None:
                raise self._failure
            return self._results
        finally:
            self._values = self._results = self._failure = None

    def _operation(self, _run_ctx: engine.RunContext) -> None:
        """The engine operation: the work, when the bound step may run now
        (its model, buffers and weights current)."""
        values = self._values
        operator, step = self.operator, self.step
        if (values is None or operator.declined or step.infer.model is not operator.model
                or not step.current() or not operator.weights_current()):
            return
        try:
            self._results = self._work(values)
        except BaseException as error:  # raised by run(), to its caller
            self._failure = error

    def _work(self, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The copies and infer(); values are C-contiguous host arrays of
        the inputs' shapes and dtypes. A pointer from ffi.from_buffer is
        kept in a local until its call returns."""
        library = self._library
        lib = library.lib
        results = []
        with self._lock:
            for name, value in values.items():
                device, host, address, _ = self._inputs[name]
                pointer = ffi.from_buffer(value)
                host.data = pointer
                status = lib.copyToAcc(device, address)
                host.data = ffi.NULL
                if status:
                    library.check(library.name, "copyToAcc", status)
            self.step.infer.run_locked()  # _operation checked the buffers
            for device, host, address, spec in self._outputs:
                array = np.empty(spec.shape, spec.dtype)
                pointer = ffi.from_buffer(array, require_writable=True)
                host.data = pointer
                status = lib.copyFromAcc(address, device)
                host.data = ffi.NULL
                if status:
                    library.check(library.name, "copyFromAcc", status)
                results.append(array)
        return results
