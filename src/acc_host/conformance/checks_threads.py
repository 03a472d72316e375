"""Repeated and concurrent calls.

The ABI has no way for a plugin to declare thread safety: the header fixes
one threading contract for every plugin. The host calls initialize() alone;
afterwards calls naming different devices may run concurrently, and calls
for one device are serialized by the host. So the kit checks exactly that
contract: several models on every tested device, each driven by its own
thread, with acc_host's per-device locks serializing the calls for one
device (as the host always does) while devices run in parallel. A plugin
with one device is still run from several threads on separate models, one
at a time per device. Ids: threads.repeated, threads.concurrent.

threads.concurrent makes the devices' calls overlap: every round starts
all threads at a barrier, each call writes into outputs allocated
beforehand (so the host's own work between two calls is a few
microseconds), and the rounds go on for at least _MIN_SECONDS. A plugin
that shares a scratch buffer between devices for 20 microseconds per call
then sees another device's data in it (10 runs of 10 with
tests/plugins/conformance_acc.c; 8 free-running rounds with new outputs
per call catch it in 2 runs of 10), and mostly for 2 microseconds, where
the machine has two cores free for the two devices' threads (on a loaded
machine their calls mostly run one after the other; the test plugin
therefore also holds its buffer until another device's call has written
it, see docs/conformance.md).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from ..abi.library import AccLibrary
from ..abi.loaded_model import CHECK_OUTPUTS_VARIABLE, LoadedModel
from . import cases
from .checks_symbolic import first_runnable, on_device
from .report import CheckFailed
from .session import Session

__all__ = ["checks"]

_REPEATS = 12
_MODELS_PER_DEVICE = 2
_ROUNDS = 8  # at least, each started at a barrier
_MIN_SECONDS = 0.3  # rounds go on until this much time has passed
_MAX_ROUNDS = 5000


def _equal(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(np.asarray(a[name]), np.asarray(b[name]), equal_nan=True) for name in a)


def check_repeated(session: Session) -> str:
    """The same model called again and again gives bitwise the same outputs,
    also when calls on other data come in between (no hidden state)."""
    library = session.require_library()
    dev = session.require_devices()[0]
    instance = first_runnable(session)
    other = cases.new_values(instance, seed=5)[0]
    with LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev) as model:
        first = model.infer(instance.data)
        reference_other = model.infer(other)
        for index in range(_REPEATS):
            again = model.infer(instance.data)
            if not _equal(first, again):
                raise CheckFailed(f"call {index + 2} on the same data differs from the first")
            if not _equal(reference_other, model.infer(other)):
                raise CheckFailed(f"call {index + 2} on other data differs from the first")
    return (f"{instance.case.label()} {instance.dtype}: {2 * _REPEATS + 2} calls, identical "
            "outputs")


@contextlib.contextmanager
def _outputs_unchecked() -> Iterator[None]:
    """Models loaded inside skip the checked-outputs mode the isolated kit
    turns on (its fill, scan and copy per call would spread the threads'
    calls apart; overruns are the numerics checks' business)."""
    previous = os.environ.get(CHECK_OUTPUTS_VARIABLE)
    os.environ[CHECK_OUTPUTS_VARIABLE] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CHECK_OUTPUTS_VARIABLE, None)
        else:
            os.environ[CHECK_OUTPUTS_VARIABLE] = previous


def _plain_model(library: AccLibrary, graph: Mapping[str, object],
                 weights: Mapping[str, np.ndarray], dev: int) -> LoadedModel:
    with _outputs_unchecked():
        return LoadedModel(library, graph, weights, dev)


def check_concurrent(session: Session) -> str:
    """Models on every device, each driven by its own thread at the same
    time, compute what they compute alone."""
    library = session.require_library()
    devices = session.require_devices()
    instance = first_runnable(session)
    models, inputs, expected = [], [], []
    try:
        for dev in devices:
            graph = on_device(instance.graph, dev)
            for index in range(_MODELS_PER_DEVICE):
                model = _plain_model(library, graph, instance.weights, dev)
                data = cases.new_values(instance, seed=100 + 10 * dev + index)[0]
                models.append(model)
                inputs.append(data)
                expected.append(model.infer(data))  # alone, before any concurrency
        errors: list[str] = []
        barrier = threading.Barrier(len(models))
        stop = threading.Event()
        rounds = [0] * len(models)
        end = time.monotonic() + _MIN_SECONDS

        def drive(position: int) -> None:
            model, data, want = models[position], inputs[position], expected[position]
            outputs = {name: np.empty_like(np.asarray(value)) for name, value in want.items()}
            try:
                for round_index in range(_MAX_ROUNDS):
                    # Every thread decides to stop from the same flag, set by
                    # thread 0 between barriers: no thread waits alone.
                    barrier.wait(timeout=60)
                    if stop.is_set():
                        return
                    model.infer(data, outputs)
                    rounds[position] += 1
                    if not _equal(outputs, want):
                        errors.append(f"model {position} (device {model.dev_id}) round "
                                      f"{round_index}: outputs differ from the model run alone")
                    barrier.wait(timeout=60)
                    if position == 0 and (errors or (round_index + 1 >= _ROUNDS
                                                      and time.monotonic() >= end)):
                        stop.set()
            except threading.BrokenBarrierError:
                return
            except Exception as error:  # noqa: BLE001
                errors.append(f"model {position}: {type(error).__name__}: {error}")
                barrier.abort()

        threads = [threading.Thread(target=drive, args=(position,), daemon=True,
                                    name=f"acc-conformance-{position}")
                   for position in range(len(models))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        if any(thread.is_alive() for thread in threads):
            raise CheckFailed("threads did not finish within 300 s (a deadlock?)")
        if errors:
            raise CheckFailed(f"{len(models)} threads on {len(devices)} device(s), calls "
                              "overlapping across devices: " + "; ".join(errors[:3])
                              + " (state shared between devices, such as a scratch buffer?)")
    finally:
        for model in models:
            model.close()
    return (f"{len(models)} threads on {len(devices)} device(s) ({_MODELS_PER_DEVICE} models "
            f"each, calls per device serialized by the host), {min(rounds)} rounds started "
            "together, same outputs")


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    yield "threads.repeated", lambda: check_repeated(session)
    yield "threads.concurrent", lambda: check_concurrent(session)
