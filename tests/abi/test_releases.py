"""Releases run by the garbage collector never wait for another thread's
call on the device (acc_host.abi.releases): unloadModel, mx_free and executor
releases of collected objects run at once when the device's lock is free,
else on the library's helper thread; close() and free() still wait."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import memory, releases
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.library import AccLibrary
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.tensor import TensorSpec

SPEC = TensorSpec((4,), np.float32)


def _model(library: AccLibrary) -> LoadedModel:
    sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    graph = annotate_symbol(sym, {"data": SPEC.shape}, weights={},
                            dtypes={"data": np.float32})
    return LoadedModel(library, graph, {})


class _Busy:
    """Holds device 0's lock on another thread (a long plugin call there)
    until released."""

    def __init__(self, library: AccLibrary) -> None:
        self._held, self._done = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(library,))
        self._thread.start()
        assert self._held.wait(10)

    def _hold(self, library: AccLibrary) -> None:
        with library.device_lock(0):
            self._held.set()
            self._done.wait(30)

    def release(self) -> None:
        self._done.set()
        self._thread.join(10)


@pytest.fixture
def unloads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The model ids unloaded, in order (the real unload runs too), from
    after the objects earlier tests left for the collector are gone."""
    library = mx.get_library("cpu_ref")
    gc.collect()
    assert library.releases.flush(10)
    seen: list[str] = []
    real = AccLibrary.unload_model

    def recording(self: AccLibrary, model_id: str, dev_id: int) -> None:
        real(self, model_id, dev_id)
        seen.append(model_id)

    monkeypatch.setattr(AccLibrary, "unload_model", recording)
    yield seen
    assert library.releases.flush(10)


class _Cycle:
    """Keeps its payload in a reference cycle: only the cyclic collector
    frees it, as in the flaky case this fixes."""

    def __init__(self, payload: object) -> None:
        self.payload = payload
        self.me = self


def test_a_collected_model_does_not_wait_for_a_busy_device(unloads: list[str]) -> None:
    library = mx.get_library("cpu_ref")
    model = _model(library)
    model_id = model.model_id
    _Cycle(model)
    del model
    busy = _Busy(library)
    try:
        start = time.monotonic()
        gc.collect()
        assert time.monotonic() - start < 1.0  # did not wait for the busy device
        assert model_id not in unloads and library.releases.pending() == 1
    finally:
        busy.release()
    assert library.releases.flush(10)
    assert unloads == [model_id] and library.releases.pending() == 0


def test_a_collected_model_on_an_idle_device_is_unloaded_at_once(unloads: list[str]) -> None:
    library = mx.get_library("cpu_ref")
    model = _model(library)
    model_id = model.model_id
    del model
    gc.collect()
    assert unloads == [model_id] and library.releases.pending() == 0


def test_close_and_free_wait_for_the_device(unloads: list[str]) -> None:
    library = mx.get_library("cpu_ref")
    model = _model(library)
    buffer = DeviceBuffer(library, 0, SPEC)
    executor = OperatorExecutor(library, "relu", [SPEC], [SPEC])
    busy = _Busy(library)
    threading.Timer(0.3, busy.release).start()
    start = time.monotonic()
    model.close()
    assert time.monotonic() - start >= 0.25 and unloads == [model.model_id]
    buffer.free()
    executor.close()
    assert buffer.closed and library.releases.pending() == 0
    model.close()  # idempotent
    buffer.free()
    executor.close()


@pytest.mark.parametrize("pool", [False, True])
def test_collected_buffers_and_executors_are_released_later(
        monkeypatch: pytest.MonkeyPatch, unloads: list[str], pool: bool) -> None:
    """A collected buffer is queued for mx_free like an executor's release,
    or, small enough for the pool, pooled at once (no device lock needed)."""
    if not pool:
        monkeypatch.setattr(memory, "POOL_MAX_BYTES", 0)
    library = mx.get_library("cpu_ref")
    memory.release_pooled(library)
    buffer = DeviceBuffer(library, 0, SPEC)
    executor = OperatorExecutor(library, "relu", [SPEC], [SPEC])
    _Cycle((buffer, executor))
    del buffer, executor
    busy = _Busy(library)
    try:
        gc.collect()
        assert library.releases.pending() == (1 if pool else 2)
        assert memory.pooled(library, 0) == (1 if pool else 0)
    finally:
        busy.release()
    assert library.releases.flush(10) and library.releases.pending() == 0
    assert memory.release_pooled(library) == (1 if pool else 0)
    # The device works as before.
    model = _model(library)
    np.testing.assert_array_equal(
        model.infer({"data": np.array([-1, 2, -3, 4], np.float32)})["relu_output"],
        [0, 2, 0, 4])
    model.close()


def test_the_helper_thread_ends_when_idle_and_starts_again(
        monkeypatch: pytest.MonkeyPatch, unloads: list[str]) -> None:
    monkeypatch.setattr(releases, "_IDLE_SECONDS", 0.05)
    library = mx.get_library("cpu_ref")
    for _ in range(2):
        model = _model(library)
        _Cycle(model)
        del model
        busy = _Busy(library)
        try:
            gc.collect()
        finally:
            busy.release()
        assert library.releases.flush(10)
        deadline = time.monotonic() + 5
        while library.releases._thread is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert library.releases._thread is None
    assert len(unloads) == 2
