"""Data-parallel inference: Module(context=[...]) and gluon.utils.split_and_load.

A batch split over several contexts must give the outputs of one context
(the CPU path is the oracle); the slicing follows MXNet 1.9's rules
(_split_input_slice for Module, split_data for Gluon), whose values for a
few sizes are written out here from MXNet's source semantics.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from support.conv_fc_net import conv_fc_net, weights
from support.paths import ROOT

import acc_host as mx
from acc_host.module_parallel import split_batch

HAS_MLU = any(library.name == "mlu" and library.num_devices >= 2 for library in mx.libraries())


def _outputs(context: object, batch: np.ndarray) -> tuple[str, np.ndarray]:
    net = conv_fc_net()
    module = mx.mod.Module(net, label_names=None, context=context)
    module.bind(data_shapes=[("data", batch.shape)], for_training=False)
    module.set_params({name: mx.nd.array(value) for name, value in weights(1).items()}, {})
    module.forward(mx.io.DataBatch([mx.nd.array(batch)]), is_train=False)
    return type(module).__name__, module.get_outputs()[0].asnumpy()


def _contexts(spec: str) -> list[mx.Context]:
    return [mx.cpu() if name == "cpu" else mx.Context(name.split(":")[0], int(name.split(":")[1]))
            for name in spec.split("+")]


@pytest.mark.skipif(not HAS_MLU, reason="needs the bundled mlu plugin with 2 devices")
@pytest.mark.parametrize("spec", ["mlu:0+mlu:1", "cpu_ref:0+mlu:1", "cpu+mlu:0",
                                  "mlu:0+mlu:1+mlu:2"])
@pytest.mark.parametrize("batch_size", [8, 5])
def test_module_over_several_contexts_matches_one(spec: str, batch_size: int) -> None:
    batch = np.random.default_rng(batch_size).standard_normal(
        (batch_size, 3, 5, 5)).astype(np.float32)
    _, expected = _outputs(mx.cpu(), batch)
    kind, got = _outputs(_contexts(spec), batch)
    assert kind == "DataParallelModule"
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAS_MLU, reason="needs the bundled mlu plugin with 2 devices")
def test_parallel_module_predict_score_and_new_batch_size() -> None:
    module = mx.mod.Module(conv_fc_net(), label_names=None,
                           context=[mx.Context("mlu", 0), mx.Context("mlu", 1)])
    module.bind(data_shapes=[("data", (4, 3, 5, 5))], for_training=False)
    module.set_params({name: mx.nd.array(value) for name, value in weights(2).items()}, {})
    images = np.random.default_rng(0).standard_normal((10, 3, 5, 5)).astype(np.float32)
    reference = mx.mod.Module(conv_fc_net(), label_names=None)
    reference.bind(data_shapes=[("data", (4, 3, 5, 5))], for_training=False)
    reference.set_params({name: mx.nd.array(value) for name, value in weights(2).items()}, {})
    np.testing.assert_allclose(module.predict(images).asnumpy(),
                               reference.predict(images).asnumpy(), rtol=1e-5, atol=1e-5)
    module.forward(mx.io.DataBatch([mx.nd.array(images[:6])]))
    assert module.get_outputs()[0].shape == (6, 3)
    assert [o.shape[0] for o in module.get_outputs(merge_multi_context=False)[0]] == [3, 3]


def test_module_over_two_cpu_ref_devices_matches_one() -> None:
    """cpu_ref has one device unless CPU_REF_NUM_DEVICES says more, which it
    reads when loaded: so in a child process."""
    script = (
        "import numpy as np, acc_host as mx\n"
        "from support.conv_fc_net import conv_fc_net, weights\n"
        "batch = np.random.default_rng(3).standard_normal((8, 3, 5, 5)).astype(np.float32)\n"
        "outs = []\n"
        "for ctx in (mx.cpu(), [mx.cpu_ref(0), mx.cpu_ref(1)]):\n"
        "    m = mx.mod.Module(conv_fc_net(), label_names=None, context=ctx)\n"
        "    m.bind(data_shapes=[('data', batch.shape)], for_training=False)\n"
        "    m.set_params({k: mx.nd.array(v) for k, v in weights(1).items()}, {})\n"
        "    m.forward(mx.io.DataBatch([mx.nd.array(batch)]))\n"
        "    outs.append(m.get_outputs()[0].asnumpy())\n"
        "np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)\n"
        "print(type(m).__name__)\n")
    env = dict(os.environ, CPU_REF_NUM_DEVICES="2",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src"),
                                           os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "DataParallelModule"


@pytest.mark.parametrize(("size", "parts", "expected"), [
    (8, 2, [(0, 4), (4, 8)]), (8, 3, [(0, 3), (3, 6), (6, 8)]), (5, 2, [(0, 2), (2, 5)]),
    (7, 4, [(0, 2), (2, 4), (4, 6), (6, 7)])])
def test_split_batch_follows_mxnet(size: int, parts: int, expected: list[tuple[int, int]]) -> None:
    assert [(s.start, s.stop) for s in split_batch(size, parts)] == expected


def test_split_batch_refuses_empty_parts() -> None:
    with pytest.raises(mx.ShapeError, match="empty part"):
        split_batch(2, 3)


def test_split_and_load() -> None:
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    contexts = [mx.cpu(), mx.cpu_ref(0)]
    parts = mx.gluon.utils.split_and_load(data, contexts, even_split=False)
    assert [part.context for part in parts] == contexts
    np.testing.assert_array_equal(parts[0].asnumpy(), data[:2])
    np.testing.assert_array_equal(parts[1].asnumpy(), data[2:])
    with pytest.raises(mx.InvalidArgumentError, match="evenly"):
        mx.gluon.utils.split_and_load(data, contexts)
    columns = mx.gluon.utils.split_data(mx.nd.array(data.T), 2, batch_axis=1, even_split=False)
    np.testing.assert_array_equal(columns[1].asnumpy(), data.T[:, 2:])
