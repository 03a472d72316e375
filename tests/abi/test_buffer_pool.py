"""Freed small device buffers pooled per device (acc_host.abi.memory): a
collected buffer's allocation serves the next buffer of its size; the pool
is bounded; mx.nd.waitall(), configure() and dispatch.clear_cache give it
back to the plugin; free(), checked mode and large buffers never pool."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import memory
from acc_host.abi.guards import CHECK_OUTPUTS_VARIABLE
from acc_host.abi.header import ffi
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import TensorError
from acc_host.ndarray import dispatch

SPEC = TensorSpec((3, 7), np.dtype(np.float32))


def _allocations(ctx: mx.Context) -> int:
    return int(ctx.configure(query="memory")["allocations"])  # releases the pool first


def _address(buffer: DeviceBuffer) -> int:
    return int(ffi.cast("uintptr_t", buffer.pointer))


@pytest.fixture
def ctx() -> mx.Context:
    context = mx.cpu_ref(0)
    mx.nd.waitall()
    memory.release_pooled()
    return context


def test_a_collected_buffer_serves_the_next_of_its_size(ctx: mx.Context) -> None:
    library = ctx.library
    buffer = DeviceBuffer(library, 0, SPEC)
    address = _address(buffer)
    del buffer
    gc.collect()
    assert memory.pooled(library, 0) == 1
    other = DeviceBuffer(library, 0, TensorSpec((7, 3), np.dtype(np.float32)))  # same bytes
    assert _address(other) == address and memory.pooled(library, 0) == 0
    values = np.arange(21, dtype=np.float32).reshape(7, 3)
    other.copy_from_host(values)
    np.testing.assert_array_equal(other.to_host(), values)
    smaller = DeviceBuffer(library, 0, TensorSpec((2,), np.dtype(np.float32)))
    assert _address(smaller) != address  # only an allocation of exactly its size
    other.free()
    smaller.free()


def test_free_gives_the_allocation_back_and_a_freed_buffer_is_refused(
        ctx: mx.Context) -> None:
    before = _allocations(ctx)
    buffer = DeviceBuffer(ctx.library, 0, SPEC)
    assert _allocations(ctx) == before + 1
    buffer.free()
    assert memory.pooled(ctx.library, 0) == 0 and _allocations(ctx) == before
    with pytest.raises(TensorError, match="freed"):
        buffer.to_host()
    buffer.free()  # idempotent


def test_waitall_and_configure_give_the_pool_back(ctx: mx.Context) -> None:
    before = _allocations(ctx)
    a = mx.nd.ones((4, 4), ctx=ctx)
    for _ in range(5):
        (a + a).wait_to_read()
    gc.collect()
    assert memory.pooled(ctx.library, 0) >= 1
    mx.nd.waitall()
    assert memory.pooled(ctx.library, 0) == 0
    (a * 2).wait_to_read()
    gc.collect()
    assert memory.pooled(ctx.library, 0) >= 1
    assert _allocations(ctx) == before + 1  # a only: the query released the pool
    del a
    gc.collect()
    dispatch.clear_cache(ctx)
    assert memory.pooled(ctx.library, 0) == 0 and _allocations(ctx) == before


def test_the_pool_is_bounded(ctx: mx.Context) -> None:
    spec = TensorSpec((memory.POOL_MAX_BYTES // 4,), np.dtype(np.float32))
    count = memory.POOL_DEVICE_BYTES // memory.POOL_MAX_BYTES + 4
    buffers = [DeviceBuffer(ctx.library, 0, spec) for _ in range(count)]
    before = _allocations(ctx)
    del buffers
    gc.collect()
    pooled = memory.pooled(ctx.library, 0)
    assert pooled * memory.POOL_MAX_BYTES == memory.POOL_DEVICE_BYTES
    assert memory.release_pooled(ctx.library, 0) == pooled
    assert _allocations(ctx) == before - count


def test_large_buffers_are_never_pooled(ctx: mx.Context) -> None:
    buffer = DeviceBuffer(ctx.library, 0, TensorSpec((memory.POOL_MAX_BYTES // 4 + 1,),
                                                     np.dtype(np.float32)))
    del buffer
    gc.collect()
    assert memory.pooled(ctx.library, 0) == 0


def test_checked_buffers_are_never_pooled(ctx: mx.Context,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHECK_OUTPUTS_VARIABLE, "1")
    buffer = DeviceBuffer(ctx.library, 0, SPEC)
    assert buffer.guarded
    del buffer
    gc.collect()
    assert memory.pooled(ctx.library, 0) == 0
    monkeypatch.setenv(CHECK_OUTPUTS_VARIABLE, "0")
    assert not DeviceBuffer(ctx.library, 0, SPEC).guarded


def test_a_trace_starts_with_an_empty_pool_and_pools_nothing(
        ctx: mx.Context, tmp_path: Path) -> None:
    """Every device pointer a trace's calls pass was allocated in it (its
    replay maps them): a pooled allocation from before would not be."""
    from acc_host import trace

    buffer = DeviceBuffer(ctx.library, 0, SPEC)
    del buffer
    gc.collect()
    assert memory.pooled(ctx.library, 0) == 1
    trace.start(tmp_path / "pool.trace")
    try:
        assert memory.pooled(ctx.library, 0) == 0
        a = mx.nd.ones((3, 7), ctx=ctx)
        (a + a).wait_to_read()
        del a
        gc.collect()
        assert memory.pooled(ctx.library, 0) == 0
    finally:
        trace.stop()
    assert trace.replay(tmp_path / "pool.trace").matched
