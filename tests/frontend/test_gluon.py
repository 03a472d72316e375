"""Gluon for inference against MXNet 1.9.1's Gluon.

tests/mxnet_expected/gluon holds, per network of
tools/mxnet_compat/gluon_networks.py, what MXNet's Gluon wrote
(make_gluon_expected.py, side environment): the export (symbol + params),
save_parameters' file, an input and the hybridized network's output.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from support.paths import MXNET_EXPECTED, ROOT

import acc_host as mx
from acc_host.gluon import nn

GLUON = MXNET_EXPECTED / "gluon"


def _networks() -> ModuleType:
    path = ROOT / "tools" / "mxnet_compat" / "gluon_networks.py"
    spec = importlib.util.spec_from_file_location("gluon_networks", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NETWORKS = _networks()
CONTEXTS = ["cpu", *(name for name in ("cpu_ref", "mlu")
                     if any(library.name == name for library in mx.libraries()))]


def _context(name: str) -> mx.Context:
    return mx.cpu() if name == "cpu" else mx.Context(name, 0)


def _sample(name: str) -> tuple[np.ndarray, np.ndarray]:
    return np.load(GLUON / f"{name}-input.npy"), np.load(GLUON / f"{name}-output.npy")


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("name", NETWORKS.NETWORKS)
def test_symbolblock_imports_matches_mxnet(name: str, context: str) -> None:
    ctx = _context(context)
    block = mx.gluon.SymbolBlock.imports(str(GLUON / f"{name}-symbol.json"), ["data"],
                                         str(GLUON / f"{name}-0000.params"), ctx=ctx)
    sample, expected = _sample(name)
    out = block(mx.nd.array(sample, ctx=ctx))
    assert out.context == ctx
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("name", NETWORKS.NETWORKS)
def test_gluon_nn_network_matches_mxnet(name: str, context: str, hybridize: bool) -> None:
    ctx = _context(context)
    net = NETWORKS.build(nn, name)
    net.load_parameters(str(GLUON / f"{name}.params"), ctx=ctx)
    if hybridize:
        net.hybridize()
    sample, expected = _sample(name)
    out = net(mx.nd.array(sample, ctx=ctx))
    assert out.context == ctx
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NETWORKS.NETWORKS)
def test_parameter_files_are_byte_identical_to_mxnet(name: str, tmp_path: Path) -> None:
    net = NETWORKS.build(nn, name)
    net.load_parameters(str(GLUON / f"{name}.params"))
    net.save_parameters(str(tmp_path / "saved.params"))
    assert (tmp_path / "saved.params").read_bytes() == (GLUON / f"{name}.params").read_bytes()
    net.hybridize()
    net(mx.nd.array(_sample(name)[0]))
    net.export(str(tmp_path / "exported"), 0)
    assert ((tmp_path / "exported-0000.params").read_bytes()
            == (GLUON / f"{name}-0000.params").read_bytes())
    # the exported pair loads back as a SymbolBlock with the same output
    block = mx.gluon.SymbolBlock.imports(str(tmp_path / "exported-symbol.json"), "data",
                                         str(tmp_path / "exported-0000.params"))
    np.testing.assert_allclose(block(mx.nd.array(_sample(name)[0])).asnumpy(),
                               _sample(name)[1], rtol=1e-4, atol=1e-5)


def test_collect_params_names_follow_mxnet() -> None:
    net = NETWORKS.build(nn, "conv2d")
    names = list(net.collect_params())
    assert names[:6] == ["conv2d_conv0_weight", "conv2d_conv0_bias", "conv2d_batchnorm0_gamma",
                         "conv2d_batchnorm0_beta", "conv2d_batchnorm0_running_mean",
                         "conv2d_batchnorm0_running_var"]
    assert list(net.collect_params(".*dense.*weight")) == ["conv2d_dense0_weight",
                                                           "conv2d_dense1_weight"]
    exported = mx.nd.load(str(GLUON / "conv2d-0000.params"))
    assert isinstance(exported, dict)
    assert {key[4:] for key in exported} == set(names)


def test_deferred_initialization_and_symbolblock_over_a_symbol() -> None:
    net = nn.HybridSequential(prefix="t_")
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize(mx.init.Xavier())
    with pytest.raises(mx.gluon.DeferredInitializationError):
        net[0].weight.data()
    x = mx.nd.array(np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32))
    imperative = net(x).asnumpy()
    assert net[0].weight.shape == (4, 6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), imperative, rtol=1e-5, atol=1e-6)
    # a SymbolBlock over the traced symbol, sharing the parameters
    data = mx.sym.Variable("data")
    block = mx.gluon.SymbolBlock(net(data), data, params=net.collect_params())
    np.testing.assert_allclose(block(x).asnumpy(), imperative, rtol=1e-5, atol=1e-6)


def test_errors_are_typed() -> None:
    net = NETWORKS.build(nn, "embedding")
    with pytest.raises(mx.GraphError, match="has not been initialized"):
        net(mx.nd.array([[1, 2, 3, 4, 5]]))
    with pytest.raises(mx.GraphError, match="are missing"):
        NETWORKS.build(nn, "conv1d").load_parameters(str(GLUON / "embedding.params"))
    with pytest.raises(mx.InvalidArgumentError, match="not a HybridBlock"):
        nn.HybridSequential().add(nn.Sequential())  # type: ignore[arg-type]
