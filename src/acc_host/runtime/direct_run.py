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
from typing import TYPE_CHECKING

import numpy as np

from .. import engine
from ..abi.memory import HostCopies
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

    __slots__ = ("operator", "step", "inputs", "specs", "_copies", "_watched", "_writes",
                 "_ctx", "_lock", "_values", "_results", "_failure")

    def __init__(self, operator: SubgraphOperator, step: BoundStep, ctx: Context,
                 inputs: Mapping[str, NDArray], outputs: Sequence[NDArray],
                 reads: Sequence[engine.Var], writes: Sequence[engine.Var]) -> None:
        self.operator = operator
        self.step = step
        self.inputs = dict(inputs)
        # The copies to and from the arguments' and outputs' device buffers,
        # their descriptors built here once (acc_host.abi.memory.HostCopies).
        self._copies = HostCopies(
            operator.library, {name: array._storage.device for name, array in inputs.items()},
            [output._storage.device for output in outputs])
        self.specs = self._copies.specs
        self._watched, self._writes = engine.base.normalize_vars(
            reads, [*writes, *(array._var for array in inputs.values())])
        self._ctx = ctx
        self._lock = operator.library.device_lock(operator.dev_id)
        # One run's values and outcome, while run() is on (see run).
        self._values: Mapping[str, np.ndarray] | None = None
        self._results: list[np.ndarray] | None = None
        self._failure: BaseException | None = None

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

    def forward(self, values: Mapping[str, np.ndarray]) -> bool | BaseException:
        """Executor.forward()'s direct path: writes values (as for run) into
        the arguments and runs the model, leaving the results in the
        executor outputs' device buffers. Returns True when it did, False
        when the path does not apply now (nothing was done: the caller runs
        the general path), or the failure of the run, which the caller
        reports as a forward reports one (on the outputs, for their waits;
        it is not run again, on a plugin that may be gone). The caller
        serializes calls (the executor's lock)."""
        if trace_recorder.current() is not None:
            return False
        self._values = values
        self._results = self._failure = None
        try:
            if not engine.get().run_now_watching(self._forward_operation, self._ctx,
                                                 self._watched, self._writes):
                return False
            if self._failure is not None:
                return self._failure
            return self._results is not None
        finally:
            self._values = self._results = self._failure = None

    def _forward_operation(self, _run_ctx: engine.RunContext) -> None:
        """forward()'s engine operation: _operation without reading the
        outputs back (the copies in and infer(), when they may run now)."""
        values = self._values
        operator, step = self.operator, self.step
        if (values is None or operator.declined or step.infer.model is not operator.model
                or not step.current() or not operator.weights_current()):
            return
        try:
            with self._lock:
                if values:
                    self._copies.write_locked(values)
                step.infer.run_locked()
            self._results = []
        except BaseException as error:  # reported by the caller, as a forward's
            self._failure = error

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
        the inputs' shapes and dtypes."""
        with self._lock:  # _operation checked the buffers
            return self._copies.run_locked(values, self.step.infer.run_locked)
