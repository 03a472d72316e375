"""cpu_ref writes the inputs of a Concat in place into its output (a view:
plugins/cpu_ref/model/memory_plan.c, plan_concat_views) and, when a Concat's output is
itself the input of a later Concat, views of views: every view resolves to
the root entry that owns the memory, at the summed offset (resolve_views).
Each graph here is one shape of that: Concats of Concats on the same axis
and on different axes, one value read by two Concats, a Concat's output
read by a Concat and by another operator, Concats of graph inputs and of
weights. Each runs on cpu_ref in symbolic mode at batch 1 and 8, on 1 and
2 threads, image by image forced on and off (ACC_CPU_REF_IMAGE_SPLIT), and
matches a numpy reference and the host's CPU path. Then an Inception-style
network whose E blocks concatenate the 1x3/3x1 pairs and concatenate that
again with the other branches (the graph of Inception-v3 that cpu_ref got
wrong before views resolved to their roots)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from support.symbol_weights import (
    host_outputs,
    loaded_on_cpu_ref,
    outputs_on_cpu_ref,
    random_weights,
)

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5
CHANNELS, SIDE = 2, 6
PROFILE = re.compile(r"cpu_ref profile: step \d+ (\S+) ")


class SymOps:
    """Builds the graph as mx.sym."""

    def conv(self, x, name: str, filters: int, kernel=(1, 1), pad=(0, 0)):
        return mx.sym.Convolution(x, num_filter=filters, kernel=kernel, pad=pad, name=name)

    def concat(self, *xs, dim: int, name: str):
        return mx.sym.Concat(*xs, dim=dim, name=name)

    def relu(self, x, name: str):
        return mx.sym.Activation(x, act_type="relu", name=name)

    def add(self, a, b, name: str):
        return mx.sym.elemwise_add(a, b, name=name)

    def weight(self, name: str, shape: tuple[int, ...]):
        return mx.sym.Variable(name, shape=shape)


class NumpyOps:
    """Computes the same graph in numpy, from the weights."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights

    def conv(self, x, name: str, filters: int, kernel=(1, 1), pad=(0, 0)):
        w, b = self.weights[f"{name}_weight"], self.weights[f"{name}_bias"]
        padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
        height = padded.shape[2] - kernel[0] + 1
        width = padded.shape[3] - kernel[1] + 1
        out = np.zeros((x.shape[0], filters, height, width))
        for i in range(kernel[0]):
            for j in range(kernel[1]):
                window = padded[:, :, i:i + height, j:j + width]
                out += np.einsum("nchw,oc->nohw", window, w[:, :, i, j])
        return out + b[None, :, None, None]

    def concat(self, *xs, dim: int, name: str):
        return np.concatenate(xs, axis=dim)

    def relu(self, x, name: str):
        return np.maximum(x, 0.0)

    def add(self, a, b, name: str):
        return a + b

    def weight(self, name: str, shape: tuple[int, ...]):
        return self.weights[name].astype(np.float64)


def nested_same_axis(ops, data, batch: int) -> list:
    """Concat(Concat(Concat(a, b), c), d) along the channels, and a Concat
    of two Concats."""
    a = ops.conv(data, "a", 3)
    b = ops.conv(data, "b", 4, (3, 3), (1, 1))
    c = ops.conv(data, "c", 2)
    d = ops.conv(data, "d", 5, (1, 3), (0, 1))
    inner = ops.concat(a, b, dim=1, name="inner")
    middle = ops.concat(c, inner, dim=1, name="middle")
    outer = ops.concat(middle, d, dim=1, name="outer")
    e = ops.concat(ops.conv(data, "e1", 2), ops.conv(data, "e2", 3), dim=1, name="e")
    f = ops.concat(ops.conv(data, "f1", 4), ops.conv(data, "f2", 1), dim=1, name="f")
    pair = ops.concat(e, f, dim=1, name="pair")
    return [ops.relu(outer, "outer_relu"), ops.relu(pair, "pair_relu")]


def nested_other_axes(ops, data, batch: int) -> list:
    """Rows of one channel concatenated (one run of the output at batch
    1), then channels; channels, then images (axis 0); channels, then
    columns (the outer Concat copies)."""
    rows = ops.concat(ops.conv(data, "r1", 1), ops.conv(data, "r2", 1), dim=2, name="rows")
    rows2 = ops.concat(ops.conv(data, "r3", 1), ops.conv(data, "r4", 1), dim=2, name="rows2")
    channels = ops.concat(rows, rows2, dim=1, name="channels")
    inner = ops.concat(ops.conv(data, "i1", 3), ops.conv(data, "i2", 2), dim=1, name="inner")
    images = ops.concat(inner, ops.conv(data, "i3", 5), dim=0, name="images")
    inner2 = ops.concat(ops.conv(data, "j1", 3), ops.conv(data, "j2", 2), dim=1, name="inner2")
    columns = ops.concat(inner2, ops.conv(data, "j3", 5), dim=3, name="columns")
    return [ops.relu(channels, "channels_relu"), ops.relu(images, "images_relu"),
            ops.relu(columns, "columns_relu")]


def read_by_two(ops, data, batch: int) -> list:
    """One convolution's output in two Concats, each nested in another."""
    x = ops.conv(data, "x", 3)
    left = ops.concat(x, ops.conv(data, "a", 4), dim=1, name="left")
    right = ops.concat(x, ops.conv(data, "b", 4), dim=1, name="right")
    left2 = ops.concat(left, ops.conv(data, "c", 2), dim=1, name="left2")
    right2 = ops.concat(right, ops.conv(data, "d", 2), dim=1, name="right2")
    return [ops.add(left2, right2, "sum")]


def read_by_concat_and_other(ops, data, batch: int) -> list:
    """A Concat's output read by a later Concat and by a relu; another's by
    a Concat and as a graph output."""
    inner = ops.concat(ops.conv(data, "a", 3), ops.conv(data, "b", 2), dim=1, name="inner")
    outer = ops.concat(inner, ops.conv(data, "c", 4), dim=1, name="outer")
    other = ops.relu(inner, "inner_relu")
    head = ops.concat(ops.conv(data, "d", 1), ops.conv(data, "e", 2), dim=1, name="head")
    outer2 = ops.concat(ops.conv(data, "f", 2), head, dim=1, name="outer2")
    return [ops.relu(outer, "outer_relu"), other, head, ops.relu(outer2, "outer2_relu")]


def inputs_and_weights(ops, data, batch: int) -> list:
    """Concats of the data input and of weights, nested in others."""
    with_data = ops.concat(data, ops.conv(data, "a", 3), dim=1, name="with_data")
    w = ops.weight("w", (batch, 2, SIDE, SIDE))
    with_weight = ops.concat(with_data, w, dim=1, name="with_weight")
    outer = ops.concat(ops.conv(data, "b", 2), with_weight, dim=1, name="outer")
    both = ops.concat(ops.weight("u", (batch, 1, SIDE, SIDE)),
                      ops.weight("v", (batch, 2, SIDE, SIDE)), dim=1, name="both")
    outer2 = ops.concat(both, ops.conv(data, "c", 2), dim=1, name="outer2")
    return [ops.relu(outer, "outer_relu"), ops.relu(outer2, "outer2_relu")]


CASES: dict[str, Callable] = {case.__name__: case for case in (
    nested_same_axis, nested_other_axes, read_by_two, read_by_concat_and_other,
    inputs_and_weights)}


def _case(name: str, batch: int) -> tuple[mx.sym.Symbol, np.ndarray, dict, list[np.ndarray]]:
    """The graph, an input, its weights, and numpy's outputs."""
    data = np.random.default_rng(batch).standard_normal(
        (batch, CHANNELS, SIDE, SIDE)).astype(np.float32)
    sym = mx.sym.Group(CASES[name](SymOps(), mx.sym.Variable("data"), batch))
    weights = random_weights(sym, {"data": data.shape}, seed=7)
    expected = CASES[name](NumpyOps(weights), data.astype(np.float64), batch)
    return sym, data, weights, expected


def _on_cpu_ref(sym, data, weights, threads: int, split: str, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setenv("ACC_CPU_REF_IMAGE_SPLIT", split)
    return outputs_on_cpu_ref(sym, data, weights, threads)


@pytest.mark.parametrize("split", ["0", "1"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(CASES))
def test_concat_views_match_numpy_and_the_cpu_path(name: str, batch: int, threads: int,
                                                   split: str, monkeypatch) -> None:
    sym, data, weights, expected = _case(name, batch)
    host = host_outputs(sym, data, weights)
    outputs = _on_cpu_ref(sym, data, weights, threads, split, monkeypatch)
    assert len(outputs) == len(host) == len(expected)
    for k, (result, on_cpu, reference) in enumerate(zip(outputs, host, expected)):
        np.testing.assert_allclose(on_cpu, reference, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}: CPU path, output {k}")
        np.testing.assert_allclose(result, reference, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}: cpu_ref, output {k}")


def test_nested_concats_are_elided_at_batch_1(monkeypatch, capfd) -> None:
    """The cases above exercise views of views: at batch 1 cpu_ref runs none
    of nested_same_axis's Concats (each input written in place into the
    root), and only the copying Concats of nested_other_axes (the one along
    the columns)."""
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    for name, copied in (("nested_same_axis", 0), ("nested_other_axes", 1)):
        sym, data, weights, _ = _case(name, 1)
        with loaded_on_cpu_ref(sym, data, weights, 1) as model:
            capfd.readouterr()
            model.infer({"data": data})
            ops = PROFILE.findall(capfd.readouterr().err)
        assert "Convolution" in ops
        assert ops.count("Concat") == copied, (name, ops)


def _unit(x, name: str, filters: int, kernel=(1, 1), pad=(0, 0)):
    """Gluon's Inception unit: a convolution without bias, BatchNorm, relu."""
    x = mx.sym.Convolution(x, num_filter=filters, kernel=kernel, pad=pad, no_bias=True,
                           name=f"{name}_conv")
    x = mx.sym.BatchNorm(x, eps=1e-3, fix_gamma=False, name=f"{name}_bn")
    return mx.sym.Activation(x, act_type="relu", name=f"{name}_relu")


def _e_block(x, name: str, width: int):
    """Inception-v3's E block: a 1x1 branch; a 1x1 then a (1x3, 3x1) pair
    concatenated; a 1x1, a 3x3, then a pair; an average pool and 1x1. The
    four branches concatenated again."""
    b1 = _unit(x, f"{name}_b1", width)
    b2 = _unit(x, f"{name}_b2", width)
    b2 = mx.sym.Concat(_unit(b2, f"{name}_b2a", width, (1, 3), (0, 1)),
                       _unit(b2, f"{name}_b2b", width, (3, 1), (1, 0)), dim=1,
                       name=f"{name}_b2_cat")
    b3 = _unit(_unit(x, f"{name}_b3", width), f"{name}_b3_3x3", width, (3, 3), (1, 1))
    b3 = mx.sym.Concat(_unit(b3, f"{name}_b3a", width, (1, 3), (0, 1)),
                       _unit(b3, f"{name}_b3b", width, (3, 1), (1, 0)), dim=1,
                       name=f"{name}_b3_cat")
    b4 = mx.sym.Pooling(x, kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg",
                        name=f"{name}_pool")
    b4 = _unit(b4, f"{name}_b4", width)
    return mx.sym.Concat(b1, b2, b3, b4, dim=1, name=f"{name}_cat")


def _inception() -> mx.sym.Symbol:
    x = _unit(mx.sym.Variable("data"), "stem", 8, (3, 3), (1, 1))
    x = _e_block(x, "e1", 4)
    x = _e_block(x, "e2", 6)
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x, name="flat"), num_hidden=10, name="fc")
    return mx.sym.softmax(x, name="prob")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 8])
def test_inception_e_blocks_match_the_cpu_path(batch: int, threads: int, monkeypatch) -> None:
    monkeypatch.delenv("ACC_CPU_REF_IMAGE_SPLIT", raising=False)
    sym = _inception()
    data = np.random.default_rng(3).standard_normal((batch, 3, 9, 9)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=4)
    host = host_outputs(sym, data, weights)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        outputs = [np.array(value) for value in model.infer({"data": data}).values()]
    np.testing.assert_allclose(outputs[0], host[0], rtol=RTOL, atol=1e-6)
    # The same through the executor, which partitions the graph for cpu_ref.
    exe = sym.simple_bind(mx.cpu_ref(), data=data.shape)
    for key, value in weights.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    np.testing.assert_allclose(exe.forward(data=data)[0].asnumpy(), host[0], rtol=RTOL,
                               atol=1e-6)
