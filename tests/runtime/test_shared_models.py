"""Loaded models shared across the executors of one plan cache
(acc_host.runtime.shared_models): a subgraph that is the same at two input
shapes is loaded once (observed as the plugin's loadModel calls in a call
trace), unloaded when its last executor closes, and safe to run from two
executors at once. Oracle: numpy (the same network written out)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host import trace

pytestmark = pytest.mark.usefixtures("offload_everything")


def conv_pool_head() -> mx.sym.Symbol:
    """A 1x1 convolution on cpu_ref, global average pooling on the host
    (ctx_group "host"), a FullyConnected head on cpu_ref: the head's
    subgraph sees (N, 4) whatever the image's height and width."""
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, num_filter=4, kernel=(1, 1), name="conv")
    x = mx.sym.Activation(x, act_type="relu", name="relu")
    with mx.AttrScope(ctx_group="host"):
        x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool")
    x = mx.sym.Flatten(x, name="flat")
    return mx.sym.FullyConnected(x, num_hidden=5, name="fc")


def weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"conv_weight": rng.standard_normal((4, 3, 1, 1)).astype(np.float32),
            "conv_bias": rng.standard_normal(4).astype(np.float32),
            "fc_weight": rng.standard_normal((5, 4)).astype(np.float32),
            "fc_bias": rng.standard_normal(5).astype(np.float32)}


def expected(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    conv = np.einsum("nchw,oc->nohw", x, w["conv_weight"][:, :, 0, 0])
    conv = np.maximum(conv + w["conv_bias"][None, :, None, None], 0)
    return conv.mean(axis=(2, 3)) @ w["fc_weight"].T + w["fc_bias"]


def bind(shape: tuple[int, ...], w: dict[str, np.ndarray]) -> mx.executor.Executor:
    args = {"data": mx.nd.zeros(shape, mx.cpu_ref(0)),
            **{name: mx.nd.array(value, mx.cpu_ref(0)) for name, value in w.items()}}
    return conv_pool_head().bind(mx.cpu_ref(0), args, data_names=["data"],
                                 group2ctx={"host": mx.cpu()})


def calls(path: Path, fn: str) -> int:
    return sum(1 for record in trace.read_trace(path).calls() if record["fn"] == fn)


SHAPES = [(1, 3, 8, 8), (1, 3, 12, 10), (1, 3, 5, 7)]


def test_a_shape_independent_subgraph_loads_once_across_reshapes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    w = weights(rng)
    path = tmp_path / "run.trace"
    trace.start(path)
    try:
        first = bind(SHAPES[0], w)
        assert len(first.subgraphs) == 2
        executors = []
        for shape in [*SHAPES, SHAPES[0], SHAPES[1]]:
            executor = first.reshape(allow_up_sizing=True, data=shape)
            executors.append(executor)
            x = rng.standard_normal(shape).astype(np.float32)
            got = executor.forward(data=x)[0].asnumpy()
            np.testing.assert_allclose(got, expected(x, w), rtol=1e-5, atol=1e-5)
        heads = {id(executor.subgraphs[1].model) for executor in executors}
        assert len(heads) == 1  # one loaded head at every shape
        convs = {id(executor.subgraphs[0].model) for executor in executors}
        assert len(convs) == len(SHAPES)
        stats = first._family().models.stats()
        assert (stats.loads, stats.reuses) == (len(SHAPES) + 1, len(SHAPES) - 1)
        for executor in {id(e): e for e in executors}.values():
            if executor is not first:
                executor.close()
        mx.nd.waitall()
    finally:
        trace.stop()
    # three convolutions (one per shape) and one head
    assert calls(path, "loadModel") == len(SHAPES) + 1
    # the closed executors unloaded their convolutions, not the head the first one uses
    assert calls(path, "unloadModel") == len(SHAPES) - 1
    assert first.subgraphs[1].model is not None
    x = rng.standard_normal(SHAPES[0]).astype(np.float32)
    np.testing.assert_allclose(first.forward(data=x)[0].asnumpy(), expected(x, w),
                               rtol=1e-5, atol=1e-5)
    first.close()
    assert first._family().models.stats().live == 0


def test_the_last_executor_using_a_shared_model_unloads_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    w = weights(rng)
    first = bind(SHAPES[0], w)
    second = first.reshape(allow_up_sizing=True, data=SHAPES[1])
    for executor, shape in ((first, SHAPES[0]), (second, SHAPES[1])):
        executor.forward(data=rng.standard_normal(shape).astype(np.float32))
    head = first.subgraphs[1].model
    assert head is second.subgraphs[1].model and head is not None
    path = tmp_path / "close.trace"
    trace.start(path)
    try:
        first.close()
        mx.nd.waitall()
        assert calls(path, "unloadModel") == 1  # first's convolution only
        assert second.subgraphs[1].model is head
        second.close()
        mx.nd.waitall()
    finally:
        trace.stop()
    assert calls(path, "unloadModel") == 3
    assert head._call is None


def test_a_written_weight_reaches_an_executor_that_joins_later() -> None:
    rng = np.random.default_rng(2)
    w = weights(rng)
    first = bind(SHAPES[0], w)
    x0 = rng.standard_normal(SHAPES[0]).astype(np.float32)
    first.forward(data=x0)
    w["fc_weight"] = rng.standard_normal((5, 4)).astype(np.float32)
    first.arg_dict["fc_weight"][:] = w["fc_weight"]  # shared with the reshape below
    second = first.reshape(allow_up_sizing=True, data=SHAPES[1])
    x1 = rng.standard_normal(SHAPES[1]).astype(np.float32)
    np.testing.assert_allclose(second.forward(data=x1)[0].asnumpy(), expected(x1, w),
                               rtol=1e-5, atol=1e-5)
    assert second.subgraphs[1].model is first.subgraphs[1].model
    np.testing.assert_allclose(first.forward(data=x0)[0].asnumpy(), expected(x0, w),
                               rtol=1e-5, atol=1e-5)


def test_two_executors_sharing_a_model_run_from_two_threads() -> None:
    """Every infer() of a model holds its device's lock: forwards of two
    executors that share the head, in two threads, stay correct."""
    rng = np.random.default_rng(3)
    w = weights(rng)
    first = bind(SHAPES[0], w)
    second = first.reshape(allow_up_sizing=True, data=SHAPES[1])
    inputs = {id(first): rng.standard_normal(SHAPES[0]).astype(np.float32),
              id(second): rng.standard_normal(SHAPES[1]).astype(np.float32)}
    failures: list[str] = []

    def run(executor: mx.executor.Executor) -> None:
        x = inputs[id(executor)]
        want = expected(x, w)
        for _ in range(30):
            with executor.lock:
                got = executor.forward(data=x)[0].asnumpy()
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                failures.append(f"{x.shape}: {got} != {want}")
                return

    threads = [threading.Thread(target=run, args=(e,)) for e in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert first.subgraphs[1].model is second.subgraphs[1].model
