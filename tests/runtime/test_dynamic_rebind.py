"""Re-planning for new input shapes: the graph's shape arithmetic worked out
at bind (acc_host.graph.dynamic), the static graph it gives, the bounded
plan cache (acc_host.runtime.plan_cache), Executor.reshape with MXNet 1.x's
semantics, planning again when a value the arithmetic read changes, and the
host run of data-dependent shapes (acc_host.runtime.eager). Oracles: numpy
(the same computation written out) and the static graph's own results."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.graph.dynamic import SHAPE_OPS, specialise
from acc_host.runtime.plan_cache import DEFAULT_SIZE, PlanCache


def flatten_by_shape() -> mx.sym.Symbol:
    """y = Reshape(x, [Shape(x)[0], -1]) via the dynamic operators, then a
    FullyConnected of 4 (the shape arithmetic in front of an accelerator op)."""
    x = mx.sym.Variable("x", shape=(0, 3, 0))
    index = mx.sym.Variable("index", shape=(1,), dtype=np.int64)
    rest = mx.sym.Variable("rest", shape=(1,), dtype=np.int64)
    shape = mx.sym._onnx_shape(x)
    batch = mx.sym._onnx_gather(shape, index, axis=0)
    target = mx.sym._onnx_concat(batch, rest, axis=0, num_args=2)
    flat = mx.sym._dyn_reshape(x, target, dynamic="shape")
    return mx.sym.FullyConnected(flat, num_hidden=4, name="fc")


def bind(symbol, ctx, x, weight, bias):
    args = {"x": mx.nd.array(x), "index": mx.nd.array(np.array([0]), dtype=np.int64),
            "rest": mx.nd.array(np.array([-1]), dtype=np.int64),
            "fc_weight": mx.nd.array(weight), "fc_bias": mx.nd.array(bias)}
    return symbol.bind(ctx, args, data_names=["x"])


def expected(x, weight, bias):
    return x.reshape(x.shape[0], -1) @ weight.T + bias


@pytest.mark.parametrize("ctx", ["cpu", "cpu_ref"])
def test_shape_arithmetic_becomes_a_static_graph_per_shape(ctx):
    context = mx.cpu() if ctx == "cpu" else mx.cpu_ref(0)
    rng = np.random.default_rng(0)
    symbol = flatten_by_shape()
    executor = None
    for shape in ((2, 3, 5), (4, 3, 5), (1, 3, 7)):
        x = rng.standard_normal(shape).astype(np.float32)
        weight = rng.standard_normal((4, 3 * shape[2])).astype(np.float32)
        bias = rng.standard_normal(4).astype(np.float32)
        executor = bind(symbol, context, x, weight, bias)
        ops = [node.op for node in executor._graph.nodes if not node.is_variable]
        assert ops == ["Reshape", "FullyConnected"]  # no shape arithmetic left
        assert not set(ops) & SHAPE_OPS
        np.testing.assert_allclose(executor.predict(x=x)[0], expected(x, weight, bias),
                                   rtol=1e-5, atol=1e-5)
        if ctx == "cpu_ref":
            assert executor.plan.single_subgraph
    # the symbol itself keeps the arithmetic: symbolic, bound per shape
    assert "_dyn_reshape" in symbol.tojson()


def test_specialise_turns_known_values_into_constants():
    symbol = flatten_by_shape()
    graph = symbol.graph
    shapes, values = graph.infer_shapes_values(
        {"x": (2, 3, 5), "index": (1,), "rest": (1,), "fc_weight": (4, 15), "fc_bias": (4,)},
        {"index": np.array([0]), "rest": np.array([-1])}.get)
    heads, constants, unresolved = specialise(graph, symbol._outputs, shapes, values)
    assert unresolved == [] and constants == {}
    reshape = heads[0][0].inputs[0][0]
    assert reshape.op == "Reshape" and reshape.attrs["shape"] == "(2, -1)"
    # without the index's value the Reshape cannot be resolved: unknown downstream
    shapes = graph.infer_shapes({"x": (2, 3, 5)})
    fc = graph.index[id(heads[0][0])] if id(heads[0][0]) in graph.index else None
    assert fc is None or shapes[graph.entry_start[fc]] is None


def test_plan_cache_is_bounded_lru_with_stats():
    made = []
    cache = PlanCache(lambda key: made.append(key) or f"plan{key}", size=2)
    assert cache.get(1) == "plan1" and cache.get(2) == "plan2" and cache.get(1) == "plan1"
    cache.get(3)  # evicts 2, the least recently used
    assert cache.get(1) == "plan1"
    cache.get(2)
    assert made == [1, 2, 3, 2]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.evictions, stats.size) == (2, 4, 2, 2)
    assert stats.keys == (1, 2)
    assert DEFAULT_SIZE == 8
    with pytest.raises(mx.InvalidArgumentError, match="size"):
        PlanCache(lambda key: key, size=0)


def conv_net() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    return mx.sym.Activation(conv, act_type="relu")


def test_executor_reshape_follows_mxnet_and_reuses_plans():
    symbol = conv_net()
    executor = symbol.simple_bind(mx.cpu_ref(0), data=(2, 3, 8, 8))
    rng = np.random.default_rng(1)
    executor.arg_dict["conv_weight"][:] = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    with pytest.raises(mx.ShapeError, match="allow_up_sizing"):
        executor.reshape(data=(4, 3, 8, 8))
    smaller = executor.reshape(data=(1, 3, 8, 8))
    assert smaller.arg_dict["conv_weight"] is executor.arg_dict["conv_weight"]  # shared
    bigger = executor.reshape(allow_up_sizing=True, data=(2, 3, 16, 16))
    assert executor.reshape(data=(1, 3, 8, 8)) is smaller  # planned before
    assert smaller.reshape(allow_up_sizing=True, data=(2, 3, 16, 16)) is bigger
    assert executor.reshape(data=(2, 3, 8, 8)) is executor
    stats = executor.plan_cache_stats()
    assert (stats.misses, stats.hits) == (2, 2)
    reference = symbol.bind(mx.cpu(), {name: mx.nd.array(array.asnumpy())
                                       for name, array in bigger.arg_dict.items()})
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(bigger.predict(data=x)[0], reference.predict(data=x)[0],
                               rtol=1e-4, atol=1e-5)
    # a weight whose shape would change is refused without partial_shaping
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    dense = fc.simple_bind(mx.cpu(), data=(2, 5))
    with pytest.raises(mx.ShapeError, match="partial_shaping"):
        dense.reshape(data=(2, 4))
    assert dense.reshape(partial_shaping=True, data=(2, 4)).arg_dict["fc_weight"].shape == (3, 4)


def test_module_reshape_reuses_the_plan_of_a_shape_seen_before():
    module = mx.mod.Module(conv_net(), data_names=["data"], label_names=None,
                           context=mx.cpu_ref(0))
    module.bind(data_shapes=[("data", (2, 3, 8, 8))], for_training=False)
    module.init_params()
    first = module.executor
    module.reshape(data_shapes=[("data", (1, 3, 8, 8))])
    second = module.executor
    module.reshape(data_shapes=[("data", (2, 3, 8, 8))])
    assert module.executor is first
    module.reshape(data_shapes=[("data", (1, 3, 8, 8))])
    assert module.executor is second


def test_a_written_value_plans_again():
    symbol = flatten_by_shape()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    weight = rng.standard_normal((4, 12)).astype(np.float32)
    executor = bind(symbol, mx.cpu(), x, weight, np.zeros(4, np.float32))
    np.testing.assert_allclose(executor.predict(x=x)[0], expected(x, weight, 0), rtol=1e-5)
    # index 1 of the shape (3) is now the first extent: (3, 8) no longer fits fc
    executor.arg_dict["index"][:] = np.array([1])
    with pytest.raises(mx.ShapeError):
        executor.predict(x=x)


def test_data_dependent_shape_runs_on_the_host_node_by_node():
    x = mx.sym.Variable("x")
    target = mx.sym.Variable("target", dtype=np.int64)
    y = mx.sym._dyn_reshape(x, target, dynamic="shape")
    args = {"x": mx.nd.array(np.arange(12, dtype=np.float32)),
            "target": mx.nd.array(np.array([3, 4]), dtype=np.int64)}
    with pytest.warns(UserWarning, match="not offloaded.*data-dependent shapes.*_dyn_reshape"):
        executor = y.bind(mx.cpu_ref(0), args, data_names=["x", "target"])
    assert executor.data_dependent and executor.partition is None
    data = np.arange(12, dtype=np.float32)
    for shape in ((3, 4), (2, 6), (12, 1)):
        (out,) = executor.predict(x=data, target=np.array(shape))
        np.testing.assert_array_equal(out, data.reshape(shape))
    executor.forward(x=data, target=np.array([6, 2]))
    assert executor.outputs[0].shape == (6, 2)
