""".params files with CSR and row_sparse arrays, against files MXNet 1.9.1 wrote
(tests/models/sparse/make_sparse_refs.py): read, written byte for byte, and
damaged files refused with ModelFileError."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import ModelFileError
from acc_host.ndarray import params_file
from acc_host.ndarray.params_sparse import SparseRecord

HERE = Path(__file__).resolve().parents[1] / "models" / "sparse"
EXPECTED = dict(np.load(HERE / "params_expected.npz"))


def _expected(prefix: str, key: object) -> dict[str, np.ndarray]:
    start = f"{prefix}/{key}/"
    return {name[len(start):]: value for name, value in EXPECTED.items()
            if name.startswith(start)}


def _check(array: mx.nd.NDArray, expected: dict[str, np.ndarray]) -> None:
    assert array.stype == str(expected["stype"])
    np.testing.assert_array_equal(array.asnumpy(), expected["dense"])
    assert array.dtype == expected["dense"].dtype
    for part in ("data", "indices", "indptr"):
        if part in expected:
            np.testing.assert_array_equal(getattr(array, part).asnumpy(), expected[part])


def _rebuilt(expected: dict[str, np.ndarray]) -> mx.nd.NDArray:
    """The array made from its components, not read from a file."""
    stype, shape = str(expected["stype"]), expected["dense"].shape
    if stype == "csr":
        return mx.nd.sparse.csr_matrix((expected["data"], expected["indices"],
                                        expected["indptr"]), shape=shape)
    if stype == "row_sparse":
        return mx.nd.sparse.row_sparse_array((expected["data"], expected["indices"]),
                                             shape=shape)
    return mx.nd.array(expected["dense"])


def test_list_file_reads_mxnets_arrays() -> None:
    loaded = mx.nd.load(HERE / "sparse_list.params")
    assert isinstance(loaded, list) and len(loaded) == 8
    assert [array.stype for array in loaded] == ["csr", "row_sparse", "default", "csr",
                                                 "row_sparse", "row_sparse", "csr", "csr"]
    for index, array in enumerate(loaded):
        _check(array, _expected("list", index))


@pytest.mark.parametrize("name", ["sparse_list.params", "sparse_dict.params",
                                  "sparse_ckpt-0000.params"])
def test_round_trip_is_byte_identical(name: str, tmp_path: Path) -> None:
    original = (HERE / name).read_bytes()
    mx.nd.save(tmp_path / name, mx.nd.load(HERE / name))
    assert (tmp_path / name).read_bytes() == original


def test_arrays_built_from_components_save_as_mxnet_does(tmp_path: Path) -> None:
    listed = [_rebuilt(_expected("list", index)) for index in range(8)]
    mx.nd.save(tmp_path / "list.params", listed)
    assert (tmp_path / "list.params").read_bytes() == (HERE / "sparse_list.params").read_bytes()
    named = {key: _rebuilt(_expected("dict", key)) for key in ("x_csr", "w_rsp", "b_dense")}
    mx.nd.save(tmp_path / "dict.params", named)
    assert (tmp_path / "dict.params").read_bytes() == (HERE / "sparse_dict.params").read_bytes()


def test_checkpoint_with_row_sparse_weight(tmp_path: Path) -> None:
    symbol, args, aux = mx.model.load_checkpoint(str(HERE / "sparse_ckpt"), 0)
    assert args["embed_weight"].stype == "row_sparse" and args["wide_weight"].stype == "default"
    assert aux == {}
    assert symbol.attr_dict()["data"]["__storage_type__"] == "2"
    mx.model.save_checkpoint(str(tmp_path / "ckpt"), 0, symbol, args, aux)
    assert (tmp_path / "ckpt-0000.params").read_bytes() == \
        (HERE / "sparse_ckpt-0000.params").read_bytes()
    assert (tmp_path / "ckpt-symbol.json").read_text() == \
        (HERE / "sparse_ckpt-symbol.json").read_text()


def _csr_file(indptr: list[int], indices: list[int], values: list[float],
              shape: tuple[int, int], aux_flag: int = 6) -> bytes:
    body = struct.pack("<Ii", params_file.V2_MAGIC, 2)
    body += struct.pack("<iq", 1, len(values)) + struct.pack("<iqq", 2, *shape)
    body += struct.pack("<iii", 1, 0, 0)
    body += struct.pack("<iiq", aux_flag, 1, len(indptr)) + struct.pack("<iiq", 6, 1,
                                                                        len(indices))
    body += np.array(values, "<f4").tobytes() + np.array(indptr, "<i8").tobytes()
    body += np.array(indices, "<i8").tobytes()
    return struct.pack("<QQQ", params_file.LIST_MAGIC, 0, 1) + body + struct.pack("<Q", 0)


def test_handmade_csr_record_reads() -> None:
    (array,) = mx.nd.load(_csr_file([0, 1, 1, 3], [2, 0, 1], [1, 2, 3], (3, 4)))  # type: ignore
    np.testing.assert_array_equal(array.asnumpy(), [[0, 0, 1, 0], [0, 0, 0, 0], [2, 3, 0, 0]])


def test_extra_stored_values_past_indptr_are_dropped() -> None:
    arrays, _ = params_file.loads(_csr_file([0, 1, 1, 2], [2, 0, 9], [1, 2, 7], (3, 4)))
    record = arrays[0]
    assert isinstance(record, SparseRecord)
    np.testing.assert_array_equal(record.aux[1], [2, 0])
    np.testing.assert_array_equal(record.values, [1, 2])


@pytest.mark.parametrize("data, message", [
    (_csr_file([0, 2, 1, 3], [2, 0, 1], [1, 2, 3], (3, 4)), "indptr"),
    (_csr_file([0, 1, 1, 3], [2, 0, 4], [1, 2, 3], (3, 4)), "out of range"),
    (_csr_file([0, 1, 3], [2, 0, 1], [1, 2, 3], (3, 4)), "entries for 3 rows"),
    (_csr_file([0, 1, 1, 4], [2, 0, 1], [1, 2, 3], (3, 4)), "beyond"),
    (_csr_file([0, 1, 1, 3], [2, 0, 1], [1, 2, 3], (3, 4), aux_flag=0), "not an integer"),
])
def test_damaged_csr_records_are_model_file_errors(data: bytes, message: str) -> None:
    with pytest.raises(ModelFileError, match=message):
        params_file.loads(data)


def test_every_truncation_is_a_model_file_error() -> None:
    data = (HERE / "sparse_list.params").read_bytes()
    for size in range(0, len(data), 7):
        with pytest.raises(ModelFileError):
            params_file.loads(data[:size])
