"""Sparse inputs at the accelerator boundary (ABI 1.2): the wide-and-deep
model made by MXNet 1.9.1 (tests/models/wide_deep: CSR features into
FullyConnected, a row-sparse embedding table into an MLP) on the CPU path,
on cpu_ref (CSR and row-sparse kept sparse across the ABI, as the trace
shows) and on mlu_sim (which takes no sparse tensors: densified at the
boundary, as explain says), each against MXNet's outputs; and a plugin
built against the 1.1 header, which is never given a sparse tensor."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host import trace
from acc_host.abi.library import AccLibrary
from acc_host.partition.storage import judge_storage
from acc_host.plugins import registry, sdk

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "models" / "wide_deep"
RTOL, ATOL = 1e-4, 1e-5  # meta.json's tolerance


@pytest.fixture(scope="module")
def wide_deep():
    symbol, args, _ = mx.model.load_checkpoint(str(MODEL / "model"), 0)
    io = np.load(MODEL / "io.npz")
    csr = mx.nd.sparse.csr_matrix(
        (io["csr_data_data"], io["csr_data_indices"], io["csr_data_indptr"]),
        shape=tuple(io["csr_data_shape"]))
    return symbol, args, csr, io["cat_ids"], io["expected"]


def _bind(wide_deep, ctx):
    symbol, args, csr, ids, _ = wide_deep
    # A copy: forward(csr_data=...) replaces the bound array's value.
    return symbol.bind(ctx, args={**args, "csr_data": csr.copy(), "cat_ids": mx.nd.array(ids)},
                       data_names=["csr_data", "cat_ids"])


def _numpy_wide_deep(args, dense: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The model in numpy, on dense values: an oracle for other inputs."""
    value = {name: array.asnumpy() for name, array in args.items()}
    wide = dense @ value["wide_weight"].T + value["wide_bias"]
    rows = value["emb_weight"][np.clip(ids.astype(np.int64), 0, 999)].reshape(len(ids), -1)
    hidden = np.maximum(rows @ value["deep1_weight"].T + value["deep1_bias"], 0)
    return wide + hidden @ value["deep2_weight"].T + value["deep2_bias"]


def test_the_checkpoint_holds_sparse_storage(wide_deep) -> None:
    symbol, args, csr, _, _ = wide_deep
    assert args["emb_weight"].stype == "row_sparse" and csr.stype == "csr"
    attrs = symbol.attr_dict()
    assert attrs["csr_data"]["__storage_type__"] == "2"
    assert attrs["emb_weight"]["__storage_type__"] == "1"


def test_cpu_path_matches_mxnet(wide_deep) -> None:
    exe = _bind(wide_deep, mx.cpu())
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), wide_deep[4], rtol=RTOL, atol=ATOL)
    assert exe.arg_dict["csr_data"].stype == "csr"


def test_cpu_ref_keeps_csr_and_row_sparse_across_the_abi(wide_deep, tmp_path) -> None:
    path = tmp_path / "wide_deep.trace"
    trace.start(str(path))
    try:
        exe = _bind(wide_deep, mx.cpu_ref(0))
        out = exe.forward()[0].asnumpy()
    finally:
        trace.stop()
    np.testing.assert_allclose(out, wide_deep[4], rtol=RTOL, atol=ATOL)
    partition = exe.partition
    assert [spec.sparse_inputs for spec in partition.subgraphs] == \
        [{"csr_data": 1, "emb_weight": 2}]
    assert {verdict.verdict for verdict in partition.storage.values()} == {"sparse"}
    text = partition.explain().format_text()
    assert "input 0 (csr_data) is csr: kept sparse across the ABI" in text
    assert "input 1 (emb_weight) is row_sparse: kept sparse across the ABI" in text
    # The trace: loadModel is given the row-sparse table, infer the CSR batch.
    calls = {call["fn"]: call for call in trace.read_trace(str(path)).calls()
             if call["fn"] in ("loadModel", "infer")}
    loaded = dict(zip(calls["loadModel"]["args"]["names"], calls["loadModel"]["args"]["data"]))
    assert loaded["emb_weight"]["sparse"] == 2 and loaded["emb_weight"]["rows_stored"] == 300
    inputs = dict(zip(calls["infer"]["args"]["in_names"], calls["infer"]["args"]["inputs"]))
    assert inputs["csr_data"]["sparse"] == 1
    assert inputs["csr_data"]["nnz"] == wide_deep[2].data.shape[0]
    assert "sparse" not in inputs["cat_ids"]


def test_cpu_ref_takes_a_new_csr_batch(wide_deep) -> None:
    symbol, args, _, ids, _ = wide_deep
    exe = _bind(wide_deep, mx.cpu_ref(0))
    exe.forward()
    rng = np.random.default_rng(39)
    dense = np.where(rng.random((8, 10000)) < 0.001, 1.0, 0.0).astype(np.float32)
    out = exe.forward(csr_data=mx.nd.sparse.csr_matrix(dense))[0].asnumpy()
    assert exe.arg_dict["csr_data"].stype == "csr"
    np.testing.assert_allclose(out, _numpy_wide_deep(args, dense, ids), rtol=RTOL, atol=ATOL)


def test_mlu_sim_densifies_at_the_boundary(wide_deep, monkeypatch) -> None:
    monkeypatch.setenv("MXNET_ACC_OFFLOAD_COST", "0")  # offload what mlu_sim accepts
    exe = _bind(wide_deep, mx.mlu(0))
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), wide_deep[4], rtol=RTOL, atol=ATOL)
    partition = exe.partition
    assert all(not spec.sparse_inputs for spec in partition.subgraphs)
    wide = next(k for k, node in enumerate(partition.graph.nodes) if node.name == "wide")
    assert partition.storage[wide].verdict == "densified"
    reasons = {item.name: item for item in partition.explain().nodes}
    assert reasons["wide"].subgraph is not None
    assert reasons["wide"].storage == (
        "input 0 (csr_data) is csr: densified at the subgraph boundary (mlu does not take "
        "sparse tensors (ABI 1.2 supportsSparse()))")
    # mlu_sim runs no Embedding: the CPU runs it on the row-sparse table.
    assert reasons["emb"].subgraph is None
    assert "the CPU runs it on the sparse array" in reasons["emb"].reason


@pytest.fixture(scope="module")
def template_1_1(tmp_path_factory):
    """The template plugin built against the 1.1 header as published."""
    sources = [*sorted((ROOT / "plugins" / "template").glob("*.c")), *sdk.sources()]
    path = tmp_path_factory.mktemp("template11") / "libtemplate11.so"
    build = subprocess.run(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
                            "-fPIC", "-shared", "-fvisibility=hidden", *sdk.cflags("1.1"),
                            *map(str, sources), "-o", str(path), "-lm"],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    return path


def test_a_1_1_plugin_is_never_given_a_sparse_tensor(template_1_1) -> None:
    library = AccLibrary(template_1_1, acc_name="template11")
    assert library.api_version == 101 and not library.supports_sparse
    ctx = mx.Context(registry.register(template_1_1, "template11").name, 0)
    rng = np.random.default_rng(11)
    dense = np.where(rng.random((4, 30)) < 0.2, rng.standard_normal((4, 30)), 0)
    dense = dense.astype(np.float32)
    # The template runs Activation: offered dense, it takes the CSR densified.
    out = mx.sym.Activation(mx.sym.Variable("x", stype="csr"), act_type="relu", name="relu")
    exe = out.bind(ctx, args={"x": mx.nd.sparse.csr_matrix(dense)}, data_names=["x"])
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), np.maximum(dense, 0))
    partition = exe.partition
    assert len(partition.subgraphs) == 1 and not partition.subgraphs[0].sparse_inputs
    assert "stypes" not in str(partition.subgraphs[0].graph)
    (verdict,) = partition.storage.values()
    assert verdict.verdict == "densified"
    assert "template11 does not take sparse tensors" in verdict.reason
    exe.close()


def test_judge_storage() -> None:
    readers = {3: ((0, "x", "csr"),), 5: ((1, "w", "row_sparse"),), 7: ((0, "x", "csr"),)}
    verdicts = judge_storage(readers, [3], [3, 5], {5: "no row_sparse here"}, "acc")
    assert {k: v.verdict for k, v in verdicts.items()} == \
        {3: "sparse", 5: "densified", 7: "cpu"}
    assert verdicts[5].reason == "acc declined it sparse: no row_sparse here"
    untaken = judge_storage(readers, None, [7], {}, "old")
    assert {k: v.verdict for k, v in untaken.items()} == {3: "cpu", 5: "cpu", 7: "densified"}
    assert "old does not take sparse tensors" in untaken[7].reason
