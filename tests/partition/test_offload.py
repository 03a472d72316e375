"""Cost-aware partitioning (acc_host/offload.py): a plugin reports its
copy and launch costs (configure query=cost_model); a candidate subgraph
whose copies and launch would cost more than it gains stays on the CPU,
and the partition says why. Measured on mlu_sim with its cost model."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import acc_host as mx
from acc_host.graph import Graph
from acc_host.partition.offload import OffloadCosts, costs_of, judge, node_ops


def _islands(channels: int, size: int) -> Any:
    """LeakyReLU (which mlu_sim does not run) around two islands the MLU
    does run: a relu, and a 3x3 convolution + relu."""
    x = mx.sym.LeakyReLU(mx.sym.Variable("data"), slope=0.1, name="leaky0")
    x = mx.sym.Activation(x, act_type="relu", name="tiny_relu")
    x = mx.sym.LeakyReLU(x, slope=0.1, name="leaky1")
    x = mx.sym.Convolution(x, num_filter=channels, kernel=(3, 3), pad=(1, 1), name="conv")
    x = mx.sym.Activation(x, act_type="relu", name="conv_relu")
    return mx.sym.LeakyReLU(x, slope=0.1, name="leaky2")


def _run(symbol: Any, shape: tuple, ctx: mx.Context) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(0)
    exe = symbol.simple_bind(ctx, data=shape)
    for array in exe.arg_dict.values():
        array[:] = rng.standard_normal(array.shape).astype(np.float32) * 0.2
    return exe, exe.forward()[0].asnumpy()


def test_mlu_reports_its_costs() -> None:
    costs = costs_of(mx.get_library("mlu"), 0)
    params = mx.mlu(0).configure(query="params")
    assert costs is not None
    assert costs.bandwidth == float(params["host_bandwidth"])
    assert costs.launch_latency == float(params["launch_latency_ns"]) * 1e-9
    assert costs.device_ops_per_s == float(params["peak_ops_fp32"])
    assert costs_of(mx.get_library("cpu_ref"), 0) is None  # host memory: nothing to weigh


def test_a_tiny_island_stays_on_the_cpu_and_the_summary_says_why() -> None:
    symbol, shape = _islands(channels=64, size=32), (1, 64, 32, 32)
    exe, result = _run(symbol, shape, mx.mlu(0))
    placement = exe.placement()
    assert placement["tiny_relu"] == "cpu(0)"  # 65k elements: two copies cost more
    assert placement["conv"] == placement["conv_relu"] == "mlu(0)"  # 75 Mops: worth it
    (kept,) = exe.partition.kept_on_cpu
    summary = exe.partition.summary()
    assert "kept on cpu(0), not offloaded to mlu(0): [tiny_relu]" in summary
    assert "estimated copies and launch" in kept.reason and "> gain" in kept.reason
    _, reference = _run(symbol, shape, mx.cpu())
    np.testing.assert_allclose(result, reference, rtol=1e-4, atol=1e-5)


def test_everything_is_offered_when_the_costs_are_off(offload_everything: None) -> None:
    exe, _ = _run(_islands(channels=64, size=32), (1, 64, 32, 32), mx.mlu(0))
    assert exe.placement()["tiny_relu"] == "mlu(0)" and exe.partition.kept_on_cpu == ()


def test_the_plugins_figures_decide() -> None:
    """With free copies and launches the relu island pays too; with a slow
    link even the convolution stays on the host."""
    symbol, shape = _islands(channels=64, size=32), (1, 64, 32, 32)
    ctx = mx.mlu(2)
    defaults = ctx.configure(query="params")
    try:
        ctx.configure(host_latency_ns=0, launch_latency_ns=0, host_bandwidth=1e15)
        exe, _ = _run(symbol, shape, ctx)
        assert exe.placement()["tiny_relu"] == "mlu(2)"
        ctx.configure(host_bandwidth=1e6)
        exe, _ = _run(symbol, shape, ctx)
        assert set(exe.placement().values()) == {"cpu(0)"}
        assert len(exe.partition.kept_on_cpu) == 2
    finally:
        ctx.configure(**{key: defaults[key] for key in
                         ("host_latency_ns", "launch_latency_ns", "host_bandwidth")})


def test_operation_counts() -> None:
    symbol = mx.sym.FullyConnected(
        mx.sym.Convolution(mx.sym.Variable("data"), num_filter=8, kernel=(3, 3), num_group=2,
                           name="conv"), num_hidden=10, name="fc")
    graph: Graph = symbol.graph
    shapes = graph.infer_shapes({"data": (2, 4, 6, 6)})
    ops = {graph.nodes[k].name: node_ops(graph, k, shapes)
           for k in range(len(graph.nodes)) if not graph.nodes[k].is_variable}
    # conv: 2 x (2*8*4*4 outputs) x (2 channels per group x 3 x 3)
    assert ops["conv"] == 2 * (2 * 8 * 4 * 4) * (2 * 3 * 3)
    assert ops["fc"] == 2 * (2 * 10) * (8 * 4 * 4)  # flattened input


def test_min_subgraph_ops_and_bad_answers() -> None:
    symbol = mx.sym.relu(mx.sym.relu(mx.sym.Variable("data"), name="a"), name="b")
    graph: Graph = symbol.graph
    shapes = graph.infer_shapes({"data": (4,)})
    dtypes = graph.infer_dtypes({})
    nodes = [k for k, node in enumerate(graph.nodes) if not node.is_variable]
    free = OffloadCosts(1e30, 0.0, 0.0, 1e30, 3, 1.0)
    kept = judge(graph, nodes, 0, free, shapes, dtypes, frozenset(), set())
    assert kept is not None and "fewer than the plugin's min_subgraph_ops 3" in kept.reason
    bad = SimpleNamespace(name="fake", configure=lambda dev, keys: {"host_device_bandwidth": "0"})
    with pytest.raises(mx.PluginContractError, match="cost_model"):
        costs_of(bad, 0)
