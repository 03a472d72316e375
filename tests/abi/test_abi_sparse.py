"""Sparse tensors across the ABI (1.2, mxnet_acc.h section 12): the 1.1
header is kept as published and 1.2 only adds to it; acc_host.abi.sparse
checks every index and length of a CSR or row-sparse array before a
plugin sees it (a TensorError naming what is wrong) and builds the
SparseTensor / RowSparseTensor; the host never gives a sparse tensor or a
storage annotation to a plugin that does not take them."""

from __future__ import annotations

import hashlib
import json

import cffi
import numpy as np
import pytest
from support.sparse_arrays import random_csr, random_row_sparse

import acc_host as mx
from acc_host.abi import header
from acc_host.abi.annotate import annotate_symbol, signature
from acc_host.abi.header import ffi
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.sparse import CsrParts, RowSparseParts, SparseDescriptor, sparse_parts
from acc_host.abi.tensor import TensorArray, TensorSpec
from acc_host.errors import TensorError
from acc_host.plugins import sdk

HEADER_1_1_SHA256 = "889cce6975dd294dc296c8f51fc6bda95a7b89c68452ea8f67a0ca6fdb8793d6"
F32 = np.dtype(np.float32)


def _ffi(path) -> cffi.FFI:
    built = cffi.FFI()
    built.cdef(header.cdef_source(path))
    return built


def test_the_1_1_header_is_kept_as_published() -> None:
    path = sdk.header("1.1")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == HEADER_1_1_SHA256
    assert "RowSparseTensor" not in path.read_text()


def test_1_2_only_adds_to_1_1() -> None:
    old, new = _ffi(sdk.header("1.1")), _ffi(sdk.header("1.2"))
    for name in ("MXTensor", "SparseTensor", "MXAccExecutor"):
        assert old.sizeof(name) == new.sizeof(name)
        assert [(f, old.offsetof(name, f)) for f, _ in old.typeof(name).fields] == \
            [(f, new.offsetof(name, f)) for f, _ in new.typeof(name).fields]
    old_decls = old._parser._declarations  # noqa: SLF001 - cffi has no public listing
    new_decls = new._parser._declarations  # noqa: SLF001
    assert set(old_decls) < set(new_decls)
    added = {key for key in set(new_decls) - set(old_decls) if not key.startswith("anonymous")}
    assert {"function supportsSparse", "typedef RowSparseTensor", "macro MX_ACC_STORAGE_CSR",
            "macro MX_ACC_STORAGE_ROW_SPARSE", "macro MX_ACC_STORAGE_DENSE"} <= added
    lib = new.dlopen(None)
    assert (lib.MX_ACC_STORAGE_DENSE, lib.MX_ACC_STORAGE_CSR, lib.MX_ACC_STORAGE_ROW_SPARSE) == \
        (0, 1, 2)
    assert [field for field, _ in new.typeof("RowSparseTensor").fields] == \
        ["data", "row_ids", "num_rows_stored"]


@pytest.mark.parametrize(("arrays", "words"), [
    (([1.0, 2.0], [0, 3], [0, 1, 2]), "indices[1] is 3, not below the 3 columns"),
    (([1.0, 2.0], [0, 1], [0, 2, 1]), "indptr must run from 0 to 2"),
    (([1.0, 2.0], [0, 1], [0, 2, 1, 2]), "indptr has 4 entries; 2 rows need 3"),
    (([1.0, 2.0, 3.0], [0, 1, 2], [0, 3, 2]), "indptr must run from 0 to 3"),
    (([1.0, 2.0, 3.0], [0, 1, 2], [0, 2, 1, 3][:3]), "indptr must run from 0 to 3"),
    (([1.0, 2.0], [0, -1], [0, 1, 2]), "negative index -1"),
    (([1.0, 2.0], [0.5, 1.0], [0, 1, 2]), "must hold integers"),
    (([1.0], [0, 1], [0, 1, 1]), "2 column indices for 1 values"),
])
def test_malformed_csr_is_a_tensor_error(arrays, words) -> None:
    data, indices, indptr = (np.asarray(a) for a in arrays)
    with pytest.raises(TensorError, match=words.replace("[", r"\[").replace("]", r"\]")):
        CsrParts.checked(data.astype(np.float32), indices, indptr, (2, 3))


def test_decreasing_indptr_names_the_row() -> None:
    with pytest.raises(TensorError, match="indptr decreases at row 1"):
        CsrParts.checked(np.ones(3, np.float32), [0, 1, 2], [0, 2, 1, 3], (3, 3))


@pytest.mark.parametrize(("row_ids", "data_shape", "words"), [
    ([1, 0], (2, 2), "strictly increasing"),
    ([1, 1], (2, 2), "strictly increasing"),
    ([0, 5], (2, 2), "row id 5 is not below the 5 rows"),
    ([0, 1], (2, 3), r"data has shape \(2, 3\)"),
])
def test_malformed_row_sparse_is_a_tensor_error(row_ids, data_shape, words) -> None:
    with pytest.raises(TensorError, match=words):
        RowSparseParts.checked(np.ones(data_shape, np.float32), row_ids, (5, 2))


def test_sparse_parts_reads_the_host_sparse_arrays() -> None:
    dense = np.array([[0, 2, 0], [1, 0, 3]], np.float32)
    parts = sparse_parts(mx.nd.sparse.csr_matrix(dense))
    assert isinstance(parts, CsrParts)
    np.testing.assert_array_equal(parts.dense(), dense)
    table = mx.nd.sparse.row_sparse_array((np.ones((1, 2), np.float32), [3]), shape=(5, 2))
    rows = sparse_parts(table)
    assert isinstance(rows, RowSparseParts) and rows.row_ids.tolist() == [3]
    assert sparse_parts(mx.nd.array(dense)) is None and sparse_parts(dense) is None


def test_descriptors_point_at_the_arrays() -> None:
    csr, dense = random_csr(np.random.default_rng(1), (4, 9), 0.3)
    array = TensorArray([TensorSpec(dense.shape, F32, header.STORAGE_CSR)], dev_id=0)
    array.set_sparse(0, csr)
    tensor = array.pointer[0]
    assert tensor.isSparse == header.STORAGE_CSR and tensor.dev_id == header.HOST_DEVICE
    struct = ffi.cast("SparseTensor *", tensor.data)
    assert (struct.num_rows, struct.num_nonzero) == (4, csr.data.size)
    assert [struct.indptr[r] for r in range(5)] == csr.indptr.tolist()
    table, _ = random_row_sparse(np.random.default_rng(2), (6, 2), 3)
    rows = SparseDescriptor(table)
    assert rows.code == header.STORAGE_ROW_SPARSE and rows.struct.num_rows_stored == 3
    assert [rows.struct.row_ids[j] for j in range(3)] == table.row_ids.tolist()
    with pytest.raises(TensorError, match="expects csr storage, got a dense array"):
        array.set_sparse(0, dense)
    with pytest.raises(TensorError, match="expected"):
        array.set_sparse(0, random_csr(np.random.default_rng(3), (4, 8), 0.3)[0])


def test_annotations_name_the_storage_kinds() -> None:
    out = mx.sym.Embedding(mx.sym.Variable("ids"), mx.sym.Variable("w"), input_dim=10,
                           output_dim=2, name="emb")
    graph = annotate_symbol(out, {"ids": (3,)}, {"w": np.zeros((10, 2), np.float32)},
                            stypes={"w": "row_sparse"})
    attrs = {node["name"]: node["attrs"] for node in graph["nodes"]}
    assert attrs["w"]["__out_stypes__"] == "[2]" and "__out_stypes__" not in attrs["ids"]
    assert json.loads(attrs["emb"]["__in_stypes__"]) == [0, 2]
    assert signature(graph).weights["w"].stype == header.STORAGE_ROW_SPARSE
    dense = annotate_symbol(out, {"ids": (3,)}, {"w": np.zeros((10, 2), np.float32)})
    assert "stypes" not in json.dumps(dense)


def test_a_plugin_without_supports_sparse_is_never_given_one() -> None:
    library = mx.get_library("mlu")
    assert library.api_version == header.API_VERSION and not library.supports_sparse
    assert mx.get_library("cpu_ref").supports_sparse
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=2, name="fc")
    weights = {"fc_weight": np.ones((2, 4), np.float32), "fc_bias": np.ones(2, np.float32)}
    graph = annotate_symbol(out, {"x": (3, 4)}, weights, stypes={"x": "csr"})
    with pytest.raises(TensorError, match="does not take sparse tensors"):
        library.supported_ops(json.dumps(graph), {}, len(graph["nodes"]), 0)
    with pytest.raises(TensorError, match="does not take sparse tensors"):
        library.supported_ops(json.dumps(annotate_symbol(out, {"x": (3, 4)}, weights)),
                              {"x": TensorSpec((3, 4), F32, header.STORAGE_CSR)},
                              len(graph["nodes"]), 0)
    with pytest.raises(TensorError, match="inputs \\['x'\\] are sparse"):
        LoadedModel(library, graph, weights)
