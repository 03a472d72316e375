"""Imperative mode on accelerator contexts: mx.nd.<Op> on arrays of cpu_ref
runs through accGetExecutor with cached executors, falls back to the CPU for
operators cpu_ref lacks, and a symbolic-only plugin runs one-operator models
compiled once per signature."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import operator_versions
from acc_host.ndarray import dispatch
from acc_host.plugins import registry

RTOL, ATOL = 1e-5, 1e-6
rng = np.random.default_rng(7)


def _normal(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# (operator, input arrays, attributes): every operator cpu_ref implements.
CASES: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("Convolution", [_normal(2, 3, 9, 9), _normal(4, 3, 3, 3), _normal(4)],
     {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1)}),
    ("FullyConnected", [_normal(4, 10), _normal(5, 10), _normal(5)], {"num_hidden": 5}),
    ("Activation", [_normal(2, 3, 4)], {"act_type": "relu"}),
    ("Activation", [_normal(2, 3, 4)], {"act_type": "tanh"}),
    ("Pooling", [_normal(2, 3, 8, 8)], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"}),
    ("Pooling", [_normal(2, 3, 8, 8)], {"kernel": (3, 3), "pool_type": "avg"}),
    ("BatchNorm", [_normal(2, 3, 4, 4), _normal(3), _normal(3), _normal(3),
                   np.abs(_normal(3)) + 0.5], {"fix_gamma": False, "eps": 1e-3}),
    ("elemwise_add", [_normal(3, 4), _normal(3, 4)], {}),
    ("softmax", [_normal(3, 5)], {"axis": -1}),
    ("Flatten", [_normal(2, 3, 4)], {}),
]


@pytest.fixture
def ctx() -> Iterator[mx.Context]:
    """cpu_ref(0) with an empty dispatch cache."""
    context = mx.cpu_ref(0)
    dispatch.clear_cache(context)
    yield context
    dispatch.clear_cache(context)


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in before}


def _run(op: str, arrays: list[np.ndarray], attrs: dict[str, Any],
         context: mx.Context) -> mx.nd.NDArray:
    return getattr(mx.nd, op)(*[mx.nd.array(a, ctx=context) for a in arrays], **attrs)


def _in_device_memory(array: mx.nd.NDArray, context: mx.Context) -> bool:
    buffer = array._device_storage
    return (buffer is not None and buffer.library is context.library
            and buffer.dev_id == context.device_id)


def _cpu_ref_ops(context: mx.Context) -> set[str]:
    return {entry.split(":")[0] for entry in context.configure(query="ops")["ops"].split(",")}


# ---- imperative plugin (cpu_ref) -----------------------------------------------------------


@pytest.mark.parametrize("op, arrays, attrs", CASES,
                         ids=[f"{op}-{index}" for index, (op, _, _) in enumerate(CASES)])
def test_operator_on_cpu_ref_matches_cpu_and_reuses_its_executor(
        ctx: mx.Context, op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> None:
    expected = _run(op, arrays, attrs, mx.cpu()).asnumpy()
    start = dispatch.stats(ctx)
    result = _run(op, arrays, attrs, ctx)
    first = dispatch.stats(ctx)
    assert result.context == ctx and _in_device_memory(result, ctx)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    np.testing.assert_allclose(result.asnumpy(), expected, rtol=RTOL, atol=ATOL)
    assert _delta(start, first) == {"accelerator_calls": 1, "fallbacks": 0, "cache_hits": 0,
                                    "cache_misses": 1, "compiles": 1, "declined": 0,
                                    "evictions": 0, "cached": 1}
    again = _run(op, arrays, attrs, ctx)
    second = dispatch.stats(ctx)
    np.testing.assert_array_equal(again.asnumpy(), result.asnumpy())
    assert _delta(first, second) == {"accelerator_calls": 1, "fallbacks": 0, "cache_hits": 1,
                                     "cache_misses": 0, "compiles": 0, "declined": 0,
                                     "evictions": 0, "cached": 0}


def test_operator_with_several_outputs(ctx: mx.Context) -> None:
    if "split" not in _cpu_ref_ops(ctx):
        pytest.skip("cpu_ref has no split")
    x = _normal(2, 4, 6)
    start = dispatch.stats(ctx)
    parts = mx.nd.split(mx.nd.array(x, ctx=ctx), num_outputs=3, axis=-1)
    assert _delta(start, dispatch.stats(ctx))["accelerator_calls"] == 1
    for part, expected in zip(parts, np.split(x, 3, axis=-1)):
        assert _in_device_memory(part, ctx)
        np.testing.assert_array_equal(part.asnumpy(), expected)


def test_new_shapes_or_attributes_build_new_executors(ctx: mx.Context) -> None:
    x = _normal(2, 6)
    start = dispatch.stats(ctx)
    mx.nd.softmax(mx.nd.array(x, ctx=ctx))
    mx.nd.softmax(mx.nd.array(x, ctx=ctx), axis=0)
    mx.nd.softmax(mx.nd.array(x[:1], ctx=ctx))
    mx.nd.softmax(mx.nd.array(x, ctx=ctx))
    delta = _delta(start, dispatch.stats(ctx))
    assert delta["compiles"] == 3 and delta["cache_hits"] == 1 and delta["cached"] == 3


def _wide(*shape: int) -> np.ndarray:
    return _normal(*shape).astype(np.float64)


# cpu_ref runs every registry operator, but computes in float32 and float16
# only: float64 arithmetic is declined and falls back to the CPU.
@pytest.mark.parametrize("op, arrays, attrs", [
    ("argmax", [_wide(3, 4)], {"axis": 1}),
    ("prod", [_wide(3, 4)], {"axis": 1}),
    ("arcsinh", [_wide(3, 4)], {}),
    ("softmax", [_wide(2, 5)], {}),
    ("elemwise_add", [_wide(2, 3), _wide(2, 3)], {}),
])
def test_operation_cpu_ref_declines_falls_back_and_is_not_asked_again(
        ctx: mx.Context, op: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> None:
    expected = _run(op, arrays, attrs, mx.cpu()).asnumpy()
    start = dispatch.stats(ctx)
    result = _run(op, arrays, attrs, ctx)
    first = dispatch.stats(ctx)
    assert result.context == ctx and _in_device_memory(result, ctx)
    np.testing.assert_allclose(result.asnumpy(), expected, rtol=RTOL, atol=ATOL)
    assert _delta(start, first)["fallbacks"] == 1 and _delta(start, first)["declined"] == 1
    assert _delta(start, first)["accelerator_calls"] == 0
    _run(op, arrays, attrs, ctx)
    second = dispatch.stats(ctx)
    assert _delta(first, second)["fallbacks"] == 1 and _delta(first, second)["cache_hits"] == 1
    assert _delta(first, second)["declined"] == 0


def test_operator_version_cpu_ref_does_not_implement_falls_back(
        ctx: mx.Context, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bumped operator version makes the plugin decline (mxnet_acc.h,
    section 1); the CPU runs the operator instead."""
    monkeypatch.setitem(operator_versions.OP_VERSIONS, "softmax", 2)
    x = _normal(2, 5)
    start = dispatch.stats(ctx)
    result = mx.nd.softmax(mx.nd.array(x, ctx=ctx))
    assert result.context == ctx and _in_device_memory(result, ctx)
    np.testing.assert_allclose(result.asnumpy(), mx.nd.softmax(mx.nd.array(x)).asnumpy(),
                               rtol=RTOL, atol=ATOL)
    delta = _delta(start, dispatch.stats(ctx))
    assert delta["declined"] == 1 and delta["fallbacks"] == 1 and delta["compiles"] == 0
    monkeypatch.undo()
    mx.nd.softmax(mx.nd.array(x, ctx=ctx))  # version 1 again: a new signature, compiled
    assert _delta(start, dispatch.stats(ctx))["compiles"] == 1


def test_arithmetic_on_accelerator_arrays(ctx: mx.Context) -> None:
    x, y = _normal(2, 3), _normal(2, 3)
    a, b = mx.nd.array(x, ctx=ctx), mx.nd.array(y, ctx=ctx)
    for result, expected in [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a / 2, x / 2),
                             (-a, -x), (2 * a + 1, 2 * x + 1), (a ** 2, x ** 2),
                             (a > b, (x > y).astype(np.float32)),
                             (a % 2, np.mod(x, 2))]:
        assert result.context == ctx and _in_device_memory(result, ctx)
        np.testing.assert_allclose(result.asnumpy(), expected, rtol=RTOL, atol=ATOL)
    a += b
    np.testing.assert_allclose(a.asnumpy(), x + y, rtol=RTOL)
    assert _in_device_memory(a, ctx)
    chained = mx.nd.Activation(mx.nd.elemwise_add(a, b), act_type="relu") + b
    np.testing.assert_allclose(chained.asnumpy(), np.maximum(x + 2 * y, 0) + y, rtol=RTOL,
                               atol=ATOL)


def test_out_argument_on_accelerator(ctx: mx.Context) -> None:
    x = _normal(3, 4)
    a = mx.nd.array(x, ctx=ctx)
    target = mx.nd.zeros((3, 4), ctx=ctx)
    version = target.version
    returned = mx.nd.Activation(a, act_type="relu", out=target)
    assert returned is target and target.version > version
    np.testing.assert_array_equal(target.asnumpy(), np.maximum(x, 0))
    mx.nd.Activation(a, act_type="relu", out=a)  # in place
    np.testing.assert_array_equal(a.asnumpy(), np.maximum(x, 0))
    with pytest.raises(mx.TensorError):
        mx.nd.Activation(a, act_type="relu", out=mx.nd.zeros((2, 2), ctx=ctx))


def test_inputs_in_host_memory_are_copied_in(ctx: mx.Context) -> None:
    """An array on the context whose storage is host memory (never made by
    the public constructors, but allowed) is staged into a device buffer."""
    from acc_host.ndarray import NDArray, _Storage

    x = _normal(2, 5)
    host = NDArray.__new__(NDArray)
    host._ctx, host._storage, host._view = ctx, _Storage(x.copy()), None
    result = mx.nd.softmax(host)
    assert _in_device_memory(result, ctx)
    np.testing.assert_allclose(result.asnumpy(), mx.nd.softmax(mx.nd.array(x)).asnumpy(),
                               rtol=RTOL, atol=ATOL)
    assert dispatch.stats(ctx)["accelerator_calls"] >= 1


def test_copyto_and_as_in_context_round_trip(ctx: mx.Context) -> None:
    x = _normal(3, 2)
    on_cpu = mx.nd.array(x)
    on_acc = on_cpu.as_in_context(ctx)
    assert on_acc.context == ctx and _in_device_memory(on_acc, ctx)
    assert on_acc.as_in_context(ctx) is on_acc
    back = on_acc.copyto(mx.cpu())
    assert back.context == mx.cpu() and back._device_storage is None
    np.testing.assert_array_equal(back.asnumpy(), x)
    target = mx.nd.zeros((3, 2), ctx=ctx)
    assert on_cpu.copyto(target) is target
    np.testing.assert_array_equal(target.asnumpy(), x)
    host_target = mx.nd.zeros((3, 2))
    target.copyto(host_target)
    np.testing.assert_array_equal(host_target.asnumpy(), x)
    copied = on_acc.copyto(ctx)
    assert copied._device_storage is not on_acc._device_storage
    np.testing.assert_array_equal(copied.asnumpy(), x)


def test_adopt_checks_the_buffer_belongs_to_the_context(ctx: mx.Context) -> None:
    from acc_host.abi.memory import DeviceBuffer
    from acc_host.abi.tensor import TensorSpec
    from acc_host.ndarray import NDArray

    buffer = DeviceBuffer(ctx.library, 0, TensorSpec((2,), np.dtype(np.float32)))
    buffer.copy_from_host(np.array([1, 2], dtype=np.float32))
    adopted = NDArray._adopt(buffer, ctx)
    assert adopted._device_storage is buffer
    np.testing.assert_array_equal(adopted.asnumpy(), [1, 2])
    with pytest.raises(mx.ContextError):
        NDArray._adopt(buffer, mx.cpu())


def test_lru_eviction_releases_executors(ctx: mx.Context,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "CACHE_CAPACITY", 2)
    state = dispatch._state(ctx.library, ctx.device_id)
    start = dispatch.stats(ctx)
    mx.nd.softmax(mx.nd.array(_normal(1, 3), ctx=ctx))
    mx.nd.waitall()  # the operator is pushed; its cache entry exists once it ran
    oldest = next(iter(state.entries.values()))
    assert isinstance(oldest, dispatch._ExecutorEntry)
    for columns in (4, 5):
        mx.nd.softmax(mx.nd.array(_normal(1, columns), ctx=ctx))
    delta = _delta(start, dispatch.stats(ctx))
    assert dispatch.stats(ctx)["cached"] == 2 and delta["evictions"] == 1
    assert not oldest.executor._finalizer.alive
    mx.nd.softmax(mx.nd.array(_normal(1, 3), ctx=ctx))  # compiled again
    assert _delta(start, dispatch.stats(ctx))["compiles"] == 4


def test_threads_share_the_cache(ctx: mx.Context, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "CACHE_CAPACITY", 3)  # evictions while others run
    x = _normal(4, 6)
    expected = {columns: np.maximum(x[:, :columns], 0) for columns in range(1, 7)}
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for step in range(30):
                columns = (seed + step) % 6 + 1
                a = mx.nd.array(x[:, :columns], ctx=ctx)
                result = mx.nd.Activation(a, act_type="relu")
                np.testing.assert_array_equal(result.asnumpy(), expected[columns])
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert dispatch.stats(ctx)["cached"] <= 3


def test_stats_need_an_accelerator_context() -> None:
    with pytest.raises(mx.ContextError):
        dispatch.stats(mx.cpu())


def test_documented_cache_capacity() -> None:
    assert dispatch.CACHE_CAPACITY == 256


# ---- symbolic-only plugin -------------------------------------------------------------------


@pytest.fixture(scope="module")
def symrelu(build_test_plugin: Callable[..., Path]) -> mx.Context:
    library = registry.register(build_test_plugin("symbolic_relu.c", "symrelu"))
    assert not library.supports_imperative
    return mx.Context(library.name, 0)


def _plugin_stats(context: mx.Context) -> dict[str, int]:
    return {key: int(value) for key, value in context.configure(query="stats").items()}


def test_symbolic_plugin_compiles_a_signature_once(symrelu: mx.Context) -> None:
    dispatch.clear_cache(symrelu)
    before = _plugin_stats(symrelu)
    x = _normal(3, 4)
    a = mx.nd.array(x, ctx=symrelu)
    results = [mx.nd.Activation(a, act_type="relu") for _ in range(3)]
    for result in results:
        assert result.context == symrelu and result._device_storage is None
        np.testing.assert_array_equal(result.asnumpy(), np.maximum(x, 0))
    after = _plugin_stats(symrelu)
    assert after["loads"] - before["loads"] == 1
    assert after["infers"] - before["infers"] == 3
    assert after["supported_ops"] - before["supported_ops"] == 1
    stats = dispatch.stats(symrelu)
    assert stats["compiles"] >= 1 and stats["accelerator_calls"] >= 3
    mx.nd.Activation(mx.nd.array(_normal(5), ctx=symrelu), act_type="relu")  # new shape
    assert _plugin_stats(symrelu)["loads"] - before["loads"] == 2
    dispatch.clear_cache(symrelu)
    final = _plugin_stats(symrelu)
    assert final["models"] == 0 and final["unloads"] - before["unloads"] == 2


def test_symbolic_models_are_unloaded_when_evicted(symrelu: mx.Context,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dispatch.clear_cache(symrelu)
    monkeypatch.setattr(dispatch, "CACHE_CAPACITY", 1)
    before = _plugin_stats(symrelu)
    for size in (2, 3, 2):
        mx.nd.Activation(mx.nd.array(_normal(size), ctx=symrelu), act_type="relu")
    after = _plugin_stats(symrelu)
    assert after["loads"] - before["loads"] == 3 and after["unloads"] - before["unloads"] == 2
    assert after["models"] == 1 and dispatch.stats(symrelu)["cached"] == 1
    dispatch.clear_cache(symrelu)
    assert _plugin_stats(symrelu)["models"] == 0


def test_symbolic_plugin_declines_other_operators(symrelu: mx.Context) -> None:
    dispatch.clear_cache(symrelu)
    before = _plugin_stats(symrelu)
    start = dispatch.stats(symrelu)
    x = _normal(2, 3)
    a = mx.nd.array(x, ctx=symrelu)
    for _ in range(2):
        tanh = mx.nd.Activation(a, act_type="tanh")  # supportedOps leaves it out
        assert tanh.context == symrelu
        np.testing.assert_allclose(tanh.asnumpy(), np.tanh(x), rtol=RTOL, atol=ATOL)
    as_double = mx.nd.Activation(mx.nd.array(x, ctx=symrelu, dtype="float64"), act_type="relu")
    np.testing.assert_array_equal(as_double.asnumpy(), np.maximum(x, 0).astype(np.float64))
    total = a + a  # broadcast_add: declined too
    np.testing.assert_allclose(total.asnumpy(), 2 * x, rtol=RTOL)
    after = _plugin_stats(symrelu)
    assert after["loads"] == before["loads"]
    assert after["supported_ops"] - before["supported_ops"] == 3  # tanh asked once
    delta = _delta(start, dispatch.stats(symrelu))
    assert delta["fallbacks"] == 4 and delta["declined"] == 3 and delta["cache_hits"] == 1
    assert delta["accelerator_calls"] == 0
    dispatch.clear_cache(symrelu)


def test_symbolic_plugin_refusing_load_falls_back(
        build_test_plugin: Callable[..., Path]) -> None:
    library = registry.register(build_test_plugin("symbolic_relu.c", "symrelu_refuse",
                                                  SYMRELU_REFUSE_LOAD=True),
                                acc_name="symrelu_refuse")
    context = mx.Context(library.name, 0)
    dispatch.clear_cache(context)
    before, start = _plugin_stats(context), dispatch.stats(context)
    x = _normal(4)
    a = mx.nd.array(x, ctx=context)
    for _ in range(2):  # supportedOps accepts relu, loadModel refuses it
        result = mx.nd.Activation(a, act_type="relu")
        assert result.context == context
        np.testing.assert_array_equal(result.asnumpy(), np.maximum(x, 0))
    delta = _delta(start, dispatch.stats(context))
    assert delta["declined"] == 1 and delta["fallbacks"] == 2 and delta["compiles"] == 0
    assert _plugin_stats(context)["supported_ops"] - before["supported_ops"] == 1
    assert _plugin_stats(context)["loads"] == 0


# ---- shutdown ---------------------------------------------------------------------------------


@pytest.mark.parametrize("early_finalizer", [False, True])
def test_exit_with_live_buffers_executors_and_models(symrelu: mx.Context,
                                                     early_finalizer: bool) -> None:
    """Arrays, cached executors and loaded models alive at exit: the exit
    hook's mx_releaseAll and interpreter teardown neither crash nor complain,
    whichever of acc_host's and weakref's exit hooks runs first."""
    prelude = textwrap.dedent("""
        import weakref
        class Early:
            pass
        early = Early()
        weakref.finalize(early, lambda: None)
    """) if early_finalizer else ""
    script = prelude + textwrap.dedent("""
        import sys
        import numpy as np
        import acc_host as mx
        from acc_host.plugins import registry

        ctx = mx.cpu_ref(0)
        data = mx.nd.array(np.random.rand(2, 3, 8, 8).astype(np.float32), ctx=ctx)
        weight = mx.nd.array(np.random.rand(4, 3, 3, 3).astype(np.float32), ctx=ctx)
        conv = mx.nd.Convolution(data, weight, no_bias=True, kernel=(3, 3), num_filter=4)
        pooled = mx.nd.Pooling(conv, kernel=(2, 2), pool_type="max")
        total = mx.nd.sum(pooled) + 1
        sym = mx.Context(registry.register(sys.argv[1]).name, 0)
        relu = mx.nd.Activation(mx.nd.array([-1.0, 2.0], ctx=sym), act_type="relu")
        assert relu.asnumpy().tolist() == [0.0, 2.0]
        keep = [data, weight, conv, pooled, total, relu]
        print("done")
    """)
    path = symrelu.library.path
    result = subprocess.run([sys.executable, "-c", script, path], capture_output=True,
                            text=True, timeout=120, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    assert result.stderr == ""


# ---- host descriptors keep their arrays alive (the grouped-query-attention bug) ----------


def test_host_descriptor_keeps_its_array_alive() -> None:
    """A descriptor set from a numpy array holds that array until replaced.
    It used to hold only a ``void *`` cast of ffi.from_buffer's object, which
    drops the buffer: a temporary array (the C-contiguous copy that
    copy_from_host makes of a strided view) was freed before the plugin read
    it, and copyToAcc copied whatever reused that memory. Expanded
    grouped-query-attention graphs on cpu_ref stage a broadcast (strided)
    Expand output this way, which made 15 ONNX cases vary between runs."""
    import gc
    import weakref

    from acc_host.abi.tensor import TensorArray, TensorSpec

    array = np.arange(12, dtype=np.float32)
    alive = weakref.ref(array)
    descriptors = TensorArray([TensorSpec.of(array)])
    descriptors.set_host_array(0, array)
    del array
    gc.collect()
    assert alive() is not None
    descriptors.clear()
    gc.collect()
    assert alive() is None


def test_copy_from_host_of_strided_views_under_allocation_churn() -> None:
    """copyToAcc of non-contiguous views (staged through a temporary copy)
    delivers exactly their values, while the process allocates and frees
    arrays of the same size in between."""
    from acc_host.abi.memory import DeviceBuffer
    from acc_host.abi.tensor import TensorSpec

    library = mx.get_library("cpu_ref")
    rng = np.random.default_rng(0)
    buffer = DeviceBuffer(library, 0, TensorSpec((2, 3, 3, 6, 8), np.float32))
    try:
        for _ in range(50):
            base = rng.standard_normal((2, 3, 1, 6, 8)).astype(np.float32)
            view = np.broadcast_to(base, (2, 3, 3, 6, 8))  # strided: stride 0 on axis 2
            churn = [np.full((2, 3, 3, 6, 8), 7.0, np.float32) for _ in range(4)]
            buffer.copy_from_host(view)
            del churn
            np.testing.assert_array_equal(buffer.to_host(), view)
    finally:
        buffer.free()
