"""cpu_ref folds a BatchNorm into the filters of the Convolution or
FullyConnected step before it at loadModel; it keeps the folded filters
only where the kernels read them besides the packed ones (direct
convolutions, the matrix-vector product of 1 x 1 images or of a
FullyConnected at batch 1), and elsewhere folds through one scratch into
the packed filters alone (dense_steps.c, dense_keeps_folded). Each kind of
step, at batch 1 and 3, answers as the host's unfused CPU path: loaded,
with new weights from infer(), and exported then imported again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.symbol_weights import assert_matches_host as _check
from support.symbol_weights import assert_new_weights_used, loaded_on_cpu_ref, random_weights

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel


def _bn(x: mx.sym.Symbol, name: str) -> mx.sym.Symbol:
    return mx.sym.BatchNorm(x, fix_gamma=False, eps=1e-3, name=name)


def _graph() -> mx.sym.Symbol:
    """BatchNorm after: a packed 3 x 3 convolution, a grouped one, a
    depthwise (direct) one, a pointwise one, a 1 x 1 convolution of 1 x 1
    images (matrix-vector at batch 1) and a FullyConnected."""
    data = mx.sym.Variable("data")
    x = _bn(mx.sym.Convolution(data, num_filter=16, kernel=(3, 3), pad=(1, 1), no_bias=True,
                               name="c3"), "c3_bn")
    x = mx.sym.Activation(x, act_type="relu")
    x = _bn(mx.sym.Convolution(x, num_filter=16, num_group=2, kernel=(3, 3), pad=(1, 1),
                               name="grouped"), "grouped_bn")
    x = _bn(mx.sym.Convolution(x, num_filter=16, num_group=16, kernel=(3, 3), pad=(1, 1),
                               name="dw"), "dw_bn")
    x = _bn(mx.sym.Convolution(x, num_filter=24, kernel=(1, 1), name="pw"), "pw_bn")
    x = mx.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg")
    x = _bn(mx.sym.Convolution(x, num_filter=32, kernel=(1, 1), name="head"), "head_bn")
    x = mx.sym.Activation(x, act_type="relu")
    return _bn(mx.sym.FullyConnected(mx.sym.flatten(x), num_hidden=10, name="fc"), "fc_bn")


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_folded_step_matches_host(batch: int, threads: int) -> None:
    sym = _graph()
    data = np.random.default_rng(batch).standard_normal((batch, 3, 10, 10)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=3)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        assert_new_weights_used(model, sym, data, weights,
                                random_weights(sym, {"data": data.shape}, seed=4))


@pytest.mark.parametrize("batch", [1, 3])
def test_imported_model_answers_as_compiled(batch: int, tmp_path: Path) -> None:
    sym = _graph()
    data = np.random.default_rng(5).standard_normal((batch, 3, 10, 10)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=6)
    graph = annotate_symbol(sym, {"data": data.shape}, weights=list(weights))
    library = mx.get_library("cpu_ref")
    path = tmp_path / "folded.model"
    with LoadedModel(library, graph, weights) as compiled:
        expected = compiled.infer({"data": data})
        mx.cpu_ref(0).configure(export_model=compiled.model_id, path=path)
    model_id = LoadedModel.new_id()
    mx.cpu_ref(0).configure(import_model=model_id, path=path)
    with LoadedModel.adopt(library, graph, model_id) as imported:
        got = imported.infer({"data": data})
        for name in expected:
            assert got[name].tobytes() == expected[name].tobytes(), name
        _check(got, sym, data, weights)
        fresh = random_weights(sym, {"data": data.shape}, seed=7)
        _check(imported.infer({"data": data}, weights=fresh), sym, data, fresh)
