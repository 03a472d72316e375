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

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import engine
from ..abi.memory import HostCopies
from ..trace import recorder as trace_recorder
from .bound_step import BoundStep
from .executor_output import ExecutorOutput

if TYPE_CHECKING:
    from ..context import Context
    from ..ndarray import NDArray
    from .subgraph import SubgraphOperator

__all__ = ["DirectRun", "FastForward", "FastPredict"]

# forward()'s direct path as one call: the inputs given to forward() (a
# dict of them) -> the executor outputs, or None when the path does not
# apply now (nothing was done: the caller runs the general path).
FastForward = Callable[[dict[str, Any]], "list[NDArray] | None"]
# predict()'s: the inputs -> the outputs' values as new host arrays, or
# None (as FastForward); a failure is raised.
FastPredict = Callable[[dict[str, Any]], "list[np.ndarray] | None"]
# A value not already as bound, as a C-contiguous host array of the bound
# (shape, dtype): (name, value, (shape, dtype), the argument) -> array.
Convert = Callable[[str, Any, "tuple[tuple[int, ...], np.dtype[Any]]", "NDArray"], np.ndarray]


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of shape (numpy's)."""
    strides = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


class DirectRun:
    """The direct path of one executor (built once its subgraph step runs
    on fixed buffers). ``inputs``: the data arguments by name;
    ``outputs``: the executor outputs, in order."""

    __slots__ = ("operator", "step", "inputs", "specs", "fast", "fast_predict", "exact_predict",
                 "_copies", "_watched", "_writes", "_ctx", "_lock", "_values", "_results",
                 "_failure")

    def __init__(self, operator: SubgraphOperator, step: BoundStep, ctx: Context,
                 inputs: Mapping[str, NDArray], outputs: Sequence[NDArray],
                 reads: Sequence[engine.Var], writes: Sequence[engine.Var],
                 convert: Convert | None = None,
                 fail: Callable[[BaseException], None] | None = None) -> None:
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
        # forward()'s and predict()'s whole direct path as one call each
        # (see _fast_forward).
        self.fast: FastForward | None = None
        self.fast_predict: FastPredict | None = None
        # fast_predict for values exactly as bound only (None otherwise,
        # nothing converted): for callers that bind anew for other shapes
        # (the ONNX backend).
        self.exact_predict: FastPredict | None = None
        if convert is not None and fail is not None:
            listed = outputs if isinstance(outputs, list) else list(outputs)
            for output in listed:  # their asnumpy()'s one copy (executor_output)
                buffer = output._storage.device
                if type(output) is ExecutorOutput and buffer is not None:
                    copy = step.infer.reader(buffer)
                    if copy is not None:
                        output.read_directly(buffer, copy)
            self.fast = self._fast_forward(listed, convert, fail)
            self.fast_predict = self._fast_forward(listed, convert, fail, read=True)
            self.exact_predict = self._fast_forward(listed, convert, fail, read=True, exact=True)

    def _fast_forward(self, outputs: list[NDArray], convert: Convert,
                      fail: Callable[[BaseException], None], read: bool = False,
                      exact: bool = False) -> Callable[[dict[str, Any]], Any] | None:
        """forward() (or with read, predict()) on this path as one closure,
        everything it reads resolved here: the inputs checked against the
        bound specs (a value not already a C-contiguous array of them
        converted by convert), the engine's grant (run_now_watching), then
        under it the checks that the step may run (operator not declined,
        its model the one bound, every buffer the one bound and allocated,
        no weight written since the model saw it) and the plugin's work
        (LoadedModel's direct call: copyToAcc of each input, infer(), with
        read copyFromAcc of each output into a new array). Returns outputs
        (with read, the new arrays), or None when the path does not apply
        now (nothing was done). A failure of the run goes to fail (reported
        as a forward's, on the outputs: see forward) and outputs are
        returned; with read it is raised to the caller (see run). With
        exact, values not exactly numpy arrays as bound (every input, each
        C-contiguous, of its shape and dtype) are not converted: the path
        does not apply (None). None where the direct call does not apply
        (checked outputs)."""
        step, operator = self.step, self.operator
        call = step.infer.direct({name: array._storage.device
                                  for name, array in self.inputs.items()},
                                 [output._storage.device for output in outputs] if read else ())
        if call is None:
            return None
        bound_model = step.infer.model
        weights_current = operator.weights_current
        bound = step._bound  # (storage, buffer) per array: step.current() inlined
        specs, targets = self.specs, self.inputs
        names = specs.keys()
        # One input (the common case): a value of exactly its shape, dtype
        # and C-order strides (equal strides: C-contiguous) is taken as it is.
        only, (shape, dtype) = next(iter(specs.items())) if len(specs) == 1 else ("", ((), None))
        if dtype is not None:
            # numpy's own instance of the dtype (a spec's may be an equal
            # copy, which the identity check below would always refuse)
            dtype = np.dtype(dtype.str)
        strides = _c_strides(shape, dtype.itemsize) if dtype is not None else ()
        ndarray = np.ndarray
        watched, writes, ctx = self._watched, self._writes, self._ctx
        get_engine, tracing = engine.get, trace_recorder.current
        # The values of the inference running and its outcome: None (did not
        # run), the results or the failure (the caller serializes calls: the
        # executor's lock).
        state: list[Any] = [None, None]

        # One input and one output (the common case): their checks unrolled.
        pair = len(bound) == 2
        both: tuple[Any, ...] = tuple(bound) if pair else ((None, None), (None, None))
        (first, first_buffer), (second, second_buffer) = both

        def operation(_run_ctx: engine.RunContext) -> None:
            if operator.declined or operator._model is not bound_model:  # (model's property)
                return
            if pair:
                if (first.device is not first_buffer or first.host is not None
                        or first_buffer._freed or second.device is not second_buffer
                        or second.host is not None or second_buffer._freed):
                    return
            else:
                for storage, buffer in bound:
                    if (storage.device is not buffer or storage.host is not None
                            or buffer._freed):
                        return
            watch = operator._watch  # replaced when the model is loaded again
            if watch is not None and watch.written and not weights_current():
                return
            try:
                state[1] = call(state[0])
            except BaseException as error:  # reported by the caller, as a forward's
                state[1] = error

        def forward(values: dict[str, Any]) -> Any:
            if values:
                if len(values) == 1 and only in values:
                    value = values[only]
                    if not (type(value) is ndarray and value.dtype is dtype
                            and value.shape == shape and value.strides == strides):
                        if exact:
                            return None
                        values = {only: convert(only, value, specs[only], targets[only])}
                elif not values.keys() <= names:
                    return None  # the general path names the stranger
                else:
                    if exact and len(values) != len(specs):
                        return None
                    for name, value in values.items():
                        spec = specs[name]
                        if not (type(value) is ndarray and value.shape == spec[0]
                                and value.dtype == spec[1] and value.flags.c_contiguous):
                            if exact:
                                return None
                            values = {key: convert(key, item, specs[key], targets[key])
                                      for key, item in values.items()}
                            break
            elif exact and specs:
                return None
            if tracing() is not None:
                return None
            state[0] = values
            try:
                granted = get_engine().run_now_watching(operation, ctx, watched, writes)
                outcome = state[1]
            finally:
                state[0] = state[1] = None
            if not granted:
                return None
            if type(outcome) is list:
                return outcome if read else outputs
            if outcome is None:
                return None
            if read:
                raise outcome
            fail(outcome)
            return outputs

        return forward

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
