"""A graph with a data-dependent shape offloads its static part: the
operators before the data-dependent node, whose shapes are known at bind,
run as an executor of their own on cpu_ref (executor.static_part); the
data-dependent node and what depends on its shape run on the host. Oracle:
numpy (the same computation written out)."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx

pytestmark = pytest.mark.usefixtures("offload_everything")


def fc_then_reshape_by_data() -> mx.sym.Symbol:
    """relu(FullyConnected(x)) reshaped to a target given as data, then
    doubled (the doubling depends on the data-dependent shape)."""
    x = mx.sym.Variable("x")
    target = mx.sym.Variable("target", dtype=np.int64)
    hidden = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=6, name="fc"),
                               act_type="relu", name="relu")
    reshaped = mx.sym._dyn_reshape(hidden, target, dynamic="shape", name="by_data")
    return mx.sym.Group([mx.sym._mul_scalar(reshaped, scalar=2.0, name="double"), hidden])


def test_the_static_part_before_a_data_dependent_node_is_offloaded() -> None:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((6, 5)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    args = {"x": mx.nd.zeros((4, 5)), "target": mx.nd.array(np.array([3, 8]), dtype=np.int64),
            "fc_weight": mx.nd.array(weight), "fc_bias": mx.nd.array(bias)}
    with pytest.warns(UserWarning, match="data-dependent part is not offloaded to cpu_ref"):
        executor = fc_then_reshape_by_data().bind(mx.cpu_ref(0), args,
                                                  data_names=["x", "target"])
    assert executor.data_dependent and executor.partition is None
    refused = executor.offload_refused
    assert "by_data (_dyn_reshape)" in refused and "1 operators that depend" in refused
    static = executor.static_part
    assert static is not None and static.partition is not None
    assert {node.op for node in static._graph.nodes if not node.is_variable} == {
        "FullyConnected", "Activation"}
    for shape in ((3, 8), (12, 2), (24, 1)):
        x = rng.standard_normal((4, 5)).astype(np.float32)
        doubled, hidden = executor.predict(x=x, target=np.array(shape))
        want = np.maximum(x @ weight.T + bias, 0)
        np.testing.assert_allclose(hidden, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(doubled, 2 * want.reshape(shape), rtol=1e-5, atol=1e-5)
    assert [operator.loads for operator in executor.subgraphs] == [1]  # loaded once
    assert executor.subgraphs[0].library.name == "cpu_ref"
    executor.close()
    assert static.subgraphs[0].model is None


def test_a_data_dependent_node_reading_only_inputs_leaves_nothing_to_offload() -> None:
    x = mx.sym.Variable("x")
    target = mx.sym.Variable("target", dtype=np.int64)
    y = mx.sym._dyn_reshape(x, target, dynamic="shape")
    args = {"x": mx.nd.array(np.arange(6, dtype=np.float32)),
            "target": mx.nd.array(np.array([2, 3]), dtype=np.int64)}
    with pytest.warns(UserWarning, match="the graph runs on the host CPU path"):
        executor = y.bind(mx.cpu_ref(0), args, data_names=["x", "target"])
    assert executor.static_part is None and executor.subgraphs == []
