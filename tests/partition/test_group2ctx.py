"""MXNet's model parallelism on accelerators: mx.AttrScope(ctx_group=...)
marks operators, group2ctx places each group on a device of the executor's
accelerator (or the CPU); every device's subgraph runs on its own engine
worker, so independent branches on two devices overlap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import acc_host as mx

# Placement checks on small graphs: every supported operator is offered,
# whatever it would cost (cost-aware partitioning is tested in test_offload.py).
pytestmark = pytest.mark.usefixtures("offload_everything")


def _two_branches() -> Any:
    data = mx.sym.Variable("data")
    branches = []
    for group in ("dev1", "dev2"):
        with mx.AttrScope(ctx_group=group):
            x = data
            for k in range(2):
                x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1),
                                       name=f"{group}_conv{k}")
                x = mx.sym.Activation(x, act_type="relu", name=f"{group}_relu{k}")
            branches.append(x)
    return mx.sym.elemwise_add(*branches, name="sum")


def _bind(symbol: Any, ctx: mx.Context, group2ctx: dict | None, weights: dict) -> Any:
    exe = symbol.simple_bind(ctx, data=(1, 4, 12, 12), group2ctx=group2ctx)
    for name, value in weights.items():
        exe.arg_dict[name][:] = value
    return exe


def test_attr_scope_sets_ctx_group_and_nests() -> None:
    with mx.AttrScope(ctx_group="a", other="x"):
        v = mx.sym.Variable("v")
        with mx.AttrScope(ctx_group="b"):
            r = mx.sym.relu(v, name="r")
        s = mx.sym.sigmoid(v, name="s", attr={"__ctx_group__": "explicit"})
    t = mx.sym.tanh(v, name="t")
    assert v.attr("__ctx_group__") == "a" and v.attr("__other__") == "x"
    assert r.attr("__ctx_group__") == "b" and r.attr("__other__") == "x"
    assert s.attr("__ctx_group__") == "explicit"
    assert t.attr("__ctx_group__") is None
    with pytest.raises(mx.GraphError, match="must be a string"):
        mx.AttrScope(ctx_group=1)


@pytest.mark.parametrize("accelerator", ["mlu"])
def test_groups_run_on_their_devices(accelerator: str) -> None:
    library = mx.get_library(accelerator)
    if library.num_devices < 2:
        pytest.skip(f"{accelerator} has one device")
    symbol = _two_branches()
    rng = np.random.default_rng(0)
    arg_shapes, _, _ = symbol.infer_shape(data=(1, 4, 12, 12))
    weights = {name: rng.standard_normal(shape).astype(np.float32) * 0.3
               for name, shape in zip(symbol.list_arguments(), arg_shapes) if name != "data"}
    image = rng.standard_normal((1, 4, 12, 12)).astype(np.float32)
    reference = _bind(symbol, mx.cpu(), None, weights).forward(data=image)[0].asnumpy()
    dev0, dev1 = mx.Context(accelerator, 0), mx.Context(accelerator, 1)
    exe = _bind(symbol, dev0, {"dev1": dev0, "dev2": dev1}, weights)
    np.testing.assert_allclose(exe.forward(data=image)[0].asnumpy(), reference, rtol=1e-4,
                               atol=1e-5)
    placement = exe.placement()
    assert {placement[f"dev1_conv{k}"] for k in range(2)} == {str(dev0)}
    assert {placement[f"dev2_conv{k}"] for k in range(2)} == {str(dev1)}
    assert placement["sum"] == str(dev0)  # ungrouped: the executor's context
    assert len(exe.partition.subgraphs) >= 2
    # a group placed on the CPU stays there
    on_cpu = _bind(symbol, dev0, {"dev2": mx.cpu()}, weights)
    np.testing.assert_allclose(on_cpu.forward(data=image)[0].asnumpy(), reference, rtol=1e-4,
                               atol=1e-5)
    assert {on_cpu.placement()[f"dev2_conv{k}"] for k in range(2)} == {"cpu(0)"}
    for executor in (exe, on_cpu):
        executor.close()


def test_group2ctx_checks_its_contexts() -> None:
    symbol = _two_branches()
    with pytest.raises(mx.GraphError, match="must be a Context"):
        symbol.simple_bind(mx.cpu(), data=(1, 4, 12, 12), group2ctx={"dev1": "mlu(0)"})
    with pytest.raises(mx.GraphError, match="one accelerator"):
        symbol.simple_bind(mx.mlu(0), data=(1, 4, 12, 12),
                           group2ctx={"dev2": mx.cpu_ref(0)})
