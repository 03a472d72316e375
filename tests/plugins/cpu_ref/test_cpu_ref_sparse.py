"""cpu_ref's sparse operators (ABI 1.2, ops/ops_sparse.c): dot and
FullyConnected with CSR data, Embedding with a row-sparse weight and take
from a row-sparse table, in symbolic mode (loadModel/infer) and imperative
mode (accGetExecutor), against numpy; and the checks of every index and
length cpu_ref receives (malformed arrays passed past the host's own
checks are MX_ACC_ERR_INVALID_ARG naming what is wrong)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.sparse_arrays import random_csr, random_row_sparse

import acc_host as mx
from acc_host.abi import header
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.sparse import CsrParts, RowSparseParts
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import PluginError

F32 = np.dtype(np.float32)
CSR, RSP = header.STORAGE_CSR, header.STORAGE_ROW_SPARSE


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _run(library, symbol, shapes, values, stypes, weights=()):
    """symbol loaded on cpu_ref with the variables in stypes sparse; values
    maps every variable to a dense array or sparse parts."""
    weight_values = {name: values[name] for name in weights}
    dtypes = {name: value.dtype for name, value in values.items()}
    graph = annotate_symbol(symbol, shapes, weight_values, dtypes=dtypes, stypes=stypes)
    with LoadedModel(library, graph, weight_values) as model:
        results = model.infer({name: value for name, value in values.items()
                               if name not in weights})
    return next(iter(results.values()))


@pytest.mark.parametrize("density", [0.0, 0.05, 0.5])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_dot_csr_dense(library, density, transpose_b) -> None:
    rng = np.random.default_rng(int(density * 100) + transpose_b)
    csr, dense = random_csr(rng, (7, 40), density)
    rhs = rng.standard_normal((5, 40) if transpose_b else (40, 5)).astype(np.float32)
    out = mx.sym.dot(mx.sym.Variable("a"), mx.sym.Variable("b"), transpose_b=transpose_b)
    got = _run(library, out, {"a": dense.shape, "b": rhs.shape}, {"a": csr, "b": rhs},
               {"a": "csr"})
    expected = dense @ (rhs.T if transpose_b else rhs)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# Below 1 nonzero per column cpu_ref gathers from the weight's rows; above,
# it transposes the weight first (ops_sparse.c, csr_times).
@pytest.mark.parametrize("density", [0.02, 0.6])
@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected_csr_data(library, no_bias, density) -> None:
    rng = np.random.default_rng(3)
    csr, dense = random_csr(rng, (6, 300), density)
    weight = rng.standard_normal((4, 300)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=4, no_bias=no_bias, name="fc")
    values = {"x": csr, "fc_weight": weight, **({} if no_bias else {"fc_bias": bias})}
    weights = [name for name in values if name != "x"]
    got = _run(library, out, {"x": dense.shape}, values, {"x": "csr"}, weights)
    np.testing.assert_allclose(got, dense @ weight.T + (0 if no_bias else bias), rtol=1e-5,
                               atol=1e-5)


def test_embedding_row_sparse_weight(library) -> None:
    rng = np.random.default_rng(4)
    table, dense = random_row_sparse(rng, (50, 6), 12)
    # Stored rows, absent rows, and ids MXNet clips (negative, too large).
    ids = np.array([[table.row_ids[0], 1, 49], [-3, 77, table.row_ids[5]]], np.float32)
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=50,
                           output_dim=6, name="emb")
    got = _run(library, out, {"ids": ids.shape}, {"ids": ids, "w": table}, {"w": "row_sparse"},
               ["w"])
    np.testing.assert_array_equal(got, dense[np.clip(ids.astype(np.int64), 0, 49)])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_row_sparse_table(library, mode) -> None:
    rng = np.random.default_rng(5)
    table, dense = random_row_sparse(rng, (9, 2, 3), 4)
    indices = np.array([0, 3, 8, -2, 11], np.int32)
    out = mx.sym.take(mx.sym.Variable("a"), mx.sym.Variable("i"), mode=mode)
    got = _run(library, out, {"a": dense.shape, "i": indices.shape}, {"a": table, "i": indices},
               {"a": "row_sparse"})
    np.testing.assert_array_equal(got, np.take(dense, indices, axis=0, mode=mode))


def test_sparse_weight_given_again_to_infer(library) -> None:
    rng = np.random.default_rng(6)
    first, _ = random_row_sparse(rng, (20, 3), 5)
    second, dense = random_row_sparse(rng, (20, 3), 7)
    ids = np.arange(20, dtype=np.float32)
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=20,
                           output_dim=3)
    graph = annotate_symbol(out, {"ids": (20,)}, {"w": dense}, stypes={"w": "row_sparse"})
    with LoadedModel(library, graph, {"w": first}) as model:
        np.testing.assert_array_equal(next(iter(model.infer({"ids": ids}).values())),
                                      first.dense())
        got = next(iter(model.infer({"ids": ids}, weights={"w": second}).values()))
    np.testing.assert_array_equal(got, dense)


def test_imperative_fully_connected_with_csr(library) -> None:
    rng = np.random.default_rng(7)
    csr, dense = random_csr(rng, (5, 64), 0.1)
    weight = rng.standard_normal((3, 64)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    specs = [TensorSpec(dense.shape, F32, CSR), TensorSpec(weight.shape, F32),
             TensorSpec(bias.shape, F32)]
    executor = OperatorExecutor(library, "FullyConnected", specs, [TensorSpec((5, 3), F32)],
                                {"num_hidden": 3})
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in (weight, bias)]
    for buffer, array in zip(buffers, (weight, bias)):
        buffer.copy_from_host(array)
    out = DeviceBuffer(library, 0, TensorSpec((5, 3), F32))
    executor.forward([csr, *buffers], [out])
    np.testing.assert_allclose(out.to_host(), dense @ weight.T + bias, rtol=1e-5, atol=1e-5)
    executor.close()


def test_imperative_take_from_row_sparse(library) -> None:
    rng = np.random.default_rng(8)
    table, dense = random_row_sparse(rng, (10, 4), 3)
    indices = np.array([2, 9, 0], np.float32)
    executor = OperatorExecutor(library, "take", [TensorSpec(dense.shape, F32, RSP),
                                                  TensorSpec(indices.shape, F32)],
                                [TensorSpec((3, 4), F32)])
    index_buffer = DeviceBuffer(library, 0, TensorSpec.of(indices))
    index_buffer.copy_from_host(indices)
    out = DeviceBuffer(library, 0, TensorSpec((3, 4), F32))
    executor.forward([table, index_buffer], [out])
    np.testing.assert_array_equal(out.to_host(), dense[indices.astype(np.int64)])
    executor.close()


def test_supported_ops_declines_other_sparse_readers_with_a_reason(library) -> None:
    x = mx.sym.Variable("x")
    out = mx.sym.FullyConnected(mx.sym.relu(x, name="relu"), num_hidden=2, name="fc")
    graph = annotate_symbol(out, {"x": (3, 8)}, ["fc_weight", "fc_bias"], stypes={"x": "csr"})
    ids, reasons = library.supported_ops_reasons(
        json.dumps(graph), {"x": TensorSpec((3, 8), F32, CSR)}, len(graph["nodes"]), 0)
    relu = next(i for i, node in enumerate(graph["nodes"]) if node["name"] == "relu")
    fc = next(i for i, node in enumerate(graph["nodes"]) if node["name"] == "fc")
    assert relu not in ids and fc in ids  # fc reads relu's dense output
    assert "input 0 is csr" in reasons[relu] and "relu" in reasons[relu]


def test_float16_sparse_is_declined(library) -> None:
    out = mx.sym.dot(mx.sym.Variable("a"), mx.sym.Variable("b"))
    graph = annotate_symbol(out, {"a": (2, 4), "b": (4, 3)}, [],
                            dtypes={"a": np.float16, "b": np.float16}, stypes={"a": "csr"})
    ids, reasons = library.supported_ops_reasons(
        json.dumps(graph), {"a": TensorSpec((2, 4), np.float16, CSR),
                            "b": TensorSpec((4, 3), np.float16)}, len(graph["nodes"]), 0)
    assert ids == [] and "float32 only" in reasons[2]


# ---- malformed arrays, past the host's checks -------------------------------------------


def _fc_model(library):
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=2, no_bias=True, name="fc")
    weight = np.ones((2, 5), np.float32)
    graph = annotate_symbol(out, {"x": (3, 5)}, {"fc_weight": weight}, stypes={"x": "csr"})
    return LoadedModel(library, graph, {"fc_weight": weight})


def _unchecked_csr(data, indices, indptr, shape=(3, 5)):
    """CSR parts built without CsrParts.checked: what a host with a bug, or
    a hostile caller, could pass."""
    return CsrParts(np.asarray(data, np.float32), np.asarray(indices, np.uint64),
                    np.asarray(indptr, np.uint64), shape)


@pytest.mark.parametrize(("parts", "words"), [
    (_unchecked_csr([1, 2], [0, 5], [0, 1, 2, 2]), "column index 5"),
    (_unchecked_csr([1, 2], [0, 1], [0, 2, 1, 2]), "not monotone"),
    (_unchecked_csr([1, 2], [0, 1], [1, 1, 2, 2]), "indptr[0] is 1"),
    (_unchecked_csr([1, 2], [0, 1], [0, 1, 2, 9]), "not monotone"),
    (_unchecked_csr([1, 2], [0, 1], [0, 1, 1, 1]), "indptr ends at 1"),
    (_unchecked_csr([1, 2, 3], [0, 1, 7], [0, 1, 3, 3]), "column index 7 at 2"),
])
def test_malformed_csr_is_refused_by_cpu_ref(library, parts, words) -> None:
    with _fc_model(library) as model:
        with pytest.raises(PluginError) as refused:
            model.infer({"x": parts})
    assert refused.value.code == 1 and words in str(refused.value)  # MX_ACC_ERR_INVALID_ARG


@pytest.mark.parametrize(("row_ids", "words"), [([3, 1], "row id 1 at 1"),
                                                 ([0, 20], "row id 20 at 1"),
                                                 ([2, 2], "row id 2 at 1")])
def test_malformed_row_sparse_is_refused_by_cpu_ref(library, row_ids, words) -> None:
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=20,
                           output_dim=2)
    graph = annotate_symbol(out, {"ids": (2,)}, {"w": np.zeros((20, 2), np.float32)},
                            stypes={"w": "row_sparse"})
    parts = RowSparseParts(np.ones((2, 2), np.float32), np.asarray(row_ids, np.uint64), (20, 2))
    with pytest.raises(PluginError) as refused:
        LoadedModel(library, graph, {"w": parts})
    assert refused.value.code == 1 and words in str(refused.value)


def test_export_of_a_model_with_sparse_weights_is_unsupported(library, tmp_path) -> None:
    table, dense = random_row_sparse(np.random.default_rng(9), (8, 2), 2)
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=8,
                           output_dim=2)
    graph = annotate_symbol(out, {"ids": (2,)}, {"w": dense}, stypes={"w": "row_sparse"})
    with LoadedModel(library, graph, {"w": table}) as model:
        with pytest.raises(PluginError, match="sparse weights"):
            library.configure(0, {"export_model": model.model_id,
                                  "path": str(tmp_path / "m.bin")})
