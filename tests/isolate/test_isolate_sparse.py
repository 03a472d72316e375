"""Isolated mode carries sparse tensors (ABI 1.2): a CSR or row-sparse
array's arrays travel through the call's shared staging segment and the
plugin's process rebuilds its SparseTensor / RowSparseTensor; and weights
of a plugin that retains them (cpu_ref) stay valid in that process after
the staging segment is reused."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from support.sparse_arrays import random_csr, random_row_sparse

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.sparse import CsrParts
from acc_host.errors import PluginError
from acc_host.plugins import registry

MODEL = Path(__file__).resolve().parents[1] / "models" / "wide_deep"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    copy = tmp_path_factory.mktemp("isolated_sparse") / "libcpu_ref_sparse_iso.so"
    shutil.copy(mx.get_library("cpu_ref").path, copy)
    mx.load_acc(copy, acc_name="iso_sparse_cpu_ref", isolate=True)
    library = registry.get_library("iso_sparse_cpu_ref")
    assert library.isolated and library.supports_sparse
    return library


def test_csr_data_and_retained_dense_weights(library) -> None:
    rng = np.random.default_rng(21)
    csr, dense = random_csr(rng, (6, 80), 0.1)
    weight = rng.standard_normal((4, 80)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=4, name="fc")
    weights = {"fc_weight": weight, "fc_bias": bias}
    graph = annotate_symbol(out, {"x": dense.shape}, weights, stypes={"x": "csr"})
    with LoadedModel(library, graph, {k: v.copy() for k, v in weights.items()}) as model:
        for _ in range(3):  # the staging segment is reused by every call
            np.testing.assert_allclose(model.infer({"x": csr})["fc_output"],
                                       dense @ weight.T + bias, rtol=1e-5, atol=1e-5)


def test_row_sparse_weight(library) -> None:
    table, dense = random_row_sparse(np.random.default_rng(22), (30, 3), 9)
    ids = np.arange(30, dtype=np.float32)
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=30,
                           output_dim=3)
    graph = annotate_symbol(out, {"ids": (30,)}, {"w": dense}, stypes={"w": "row_sparse"})
    with LoadedModel(library, graph, {"w": table}) as model:
        np.testing.assert_array_equal(next(iter(model.infer({"ids": ids}).values())), dense)


def test_malformed_csr_is_refused_in_the_plugin_process(library) -> None:
    out = mx.sym.dot(mx.sym.Variable("a"), mx.sym.Variable("b"))
    graph = annotate_symbol(out, {"a": (2, 5), "b": (5, 3)}, [], stypes={"a": "csr"})
    bad = CsrParts(np.ones(2, np.float32), np.array([1, 9], np.uint64),
                   np.array([0, 1, 2], np.uint64), (2, 5))
    with LoadedModel(library, graph, {}) as model:
        with pytest.raises(PluginError, match="column index 9"):
            model.infer({"a": bad, "b": np.ones((5, 3), np.float32)})
    assert library.alive


def test_wide_and_deep_isolated(library) -> None:
    symbol, args, _ = mx.model.load_checkpoint(str(MODEL / "model"), 0)
    io = np.load(MODEL / "io.npz")
    csr = mx.nd.sparse.csr_matrix(
        (io["csr_data_data"], io["csr_data_indices"], io["csr_data_indptr"]), shape=(8, 10000))
    exe = symbol.bind(mx.Context("iso_sparse_cpu_ref", 0),
                      args={**args, "csr_data": csr, "cat_ids": mx.nd.array(io["cat_ids"])},
                      data_names=["csr_data", "cat_ids"])
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), io["expected"], rtol=1e-4, atol=1e-5)
    assert [spec.sparse_inputs for spec in exe.partition.subgraphs] == \
        [{"csr_data": 1, "emb_weight": 2}]
    exe.close()
