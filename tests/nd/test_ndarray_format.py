"""MXNet NDArray-list (.params) files: the real MXNet 1.9.1 checkpoints in
tests/models load and are rewritten byte for byte; every dtype round-trips;
hand-built files of each array layout load; damaged or hostile files raise
ModelFileError and nothing else."""

from __future__ import annotations

import ast
import json
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import MODELS

from acc_host.errors import InvalidArgumentError, ModelFileError, TensorError
from acc_host.ndarray.params_file import (
    DTYPE_BY_FLAG,
    V1_MAGIC,
    V2_MAGIC,
    V3_MAGIC,
    dumps,
    load,
    loads,
    save,
)

MODELS_DIR = MODELS
MODEL_NAMES = ["mobilenetv2_1_0", "squeezenet1_1", "transformer_enc", "transformer_enc_mxcodes"]
ARRAYS_AT = 24  # list magic + reserved + array count


# ---- building files by hand, straight from the layout ------------------------------


def _list_header(count: int, magic: int = 0x112) -> bytes:
    return struct.pack("<QQQ", magic, 0, count)


def _names_block(names: list[str]) -> bytes:
    encoded = [name.encode() for name in names]
    return struct.pack("<Q", len(encoded)) + b"".join(
        struct.pack("<Q", len(name)) + name for name in encoded)


def _tail(flag: int, payload: bytes) -> bytes:
    """Context cpu(0), the type flag and the elements."""
    return struct.pack("<iii", 1, 0, flag) + payload


def _v2_array(shape: tuple[int, ...], flag: int, payload: bytes, magic: int = V2_MAGIC,
              stype: int = 0) -> bytes:
    return (struct.pack(f"<Iii{len(shape)}q", magic, stype, len(shape), *shape)
            + _tail(flag, payload))


def _small_file(named: bool = True) -> bytes:
    """Three small arrays of different dtypes, written by hand."""
    arrays = [
        _v2_array((2, 3), 0, np.arange(6, dtype="<f4").tobytes()),
        _v2_array((4,), 6, np.array([1, -2, 3, -4], dtype="<i8").tobytes()),
        _v2_array((1, 2), 3, bytes([7, 250])),
    ]
    names = ["arg:w", "arg:bias", "aux:running_mean"] if named else []
    return _list_header(len(arrays)) + b"".join(arrays) + _names_block(names)


SMALL = _small_file()
SMALL_UNNAMED = _small_file(named=False)


def _model_params(name: str) -> Path:
    return MODELS_DIR / name / "model-0000.params"


def _symbol_shapes(name: str) -> dict[str, tuple[int, ...]]:
    """Variable name -> the __shape__ the symbol JSON records (0 = not known)."""
    graph = json.loads((MODELS_DIR / name / "model-symbol.json").read_text())
    return {node["name"]: tuple(ast.literal_eval(node["attrs"]["__shape__"]))
            for node in graph["nodes"]
            if node["op"] == "null" and "__shape__" in node.get("attrs", {})}


# ---- the real MXNet 1.9.1 checkpoints -----------------------------------------------


def test_every_model_folder_is_shipped() -> None:
    # tests/models also holds the project's own generated models (rnn/,
    # control_flow/, squeezenet_biased/), each with its generating script.
    assert set(MODEL_NAMES) <= {path.name for path in MODELS_DIR.iterdir() if path.is_dir()}
    for name in MODEL_NAMES:
        folder = MODELS_DIR / name
        for file in ("model-symbol.json", "model-0000.params", "input_0.npy",
                     "expected_0.npy", "meta.json"):
            assert (folder / file).is_file(), folder / file


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_checkpoint_loads_and_matches_its_symbol(name: str) -> None:
    arrays, names = load(_model_params(name))
    assert len(arrays) == len(names) > 0
    assert all(key.startswith(("arg:", "aux:")) for key in names)
    assert len(set(names)) == len(names)
    symbol_shapes = _symbol_shapes(name)
    assert {key[4:] for key in names} == set(symbol_shapes)
    for key, array in zip(names, arrays):
        assert array.dtype == np.float32
        assert np.isfinite(array).all()
        declared = symbol_shapes[key[4:]]
        assert array.ndim == len(declared), key
        assert all(want in (0, got) for want, got in zip(declared, array.shape)), key
    meta = json.loads((MODELS_DIR / name / "meta.json").read_text())
    if "num_params" in meta:
        assert sum(array.size for array in arrays) == meta["num_params"]


def test_known_shapes() -> None:
    squeeze = dict(zip(*reversed(load(_model_params("squeezenet1_1")))))
    assert squeeze["arg:squeezenet0_conv0_weight"].shape == (64, 3, 3, 3)
    assert squeeze["arg:squeezenet0_conv0_bias"].shape == (64,)
    mobile = dict(zip(*reversed(load(_model_params("mobilenetv2_1_0")))))
    assert mobile["arg:mobilenetv20_features_conv0_weight"].shape == (32, 3, 3, 3)
    assert mobile["aux:mobilenetv20_features_batchnorm0_running_mean"].shape == (32,)
    assert mobile["aux:mobilenetv20_features_batchnorm0_running_var"].shape == (32,)
    encoder = dict(zip(*reversed(load(_model_params("transformer_enc")))))
    assert encoder["arg:tfenc_embedding0_weight"].shape == (1000, 128)
    assert encoder["arg:tfenc_pos_embed"].shape == (1, 32, 128)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_checkpoint_rewritten_byte_for_byte(name: str, tmp_path: Path) -> None:
    original = _model_params(name).read_bytes()
    arrays, names = loads(original)
    assert dumps(arrays, names) == original
    copy = tmp_path / "copy.params"
    save(copy, arrays, names)
    assert copy.read_bytes() == original


def test_large_checkpoint_loads_fast() -> None:
    path = _model_params("mobilenetv2_1_0")
    assert path.stat().st_size > 14_000_000
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        load(path)
        best = min(best, time.perf_counter() - start)
    assert best < 0.1, f"{best:.3f} s"


def test_loaded_arrays_are_independent_writable_and_aligned() -> None:
    data = bytearray(SMALL)
    arrays, _ = loads(data)
    for array in arrays:
        assert array.flags.writeable and array.flags.aligned and array.flags.c_contiguous
    data[ARRAYS_AT + 40:ARRAYS_AT + 64] = bytes(24)  # the first array's elements
    np.testing.assert_array_equal(arrays[0], np.arange(6, dtype=np.float32).reshape(2, 3))
    arrays[0][0, 0] = 42.0
    assert loads(SMALL)[0][0][0, 0] == 0.0


# ---- what the hand-built layouts mean ------------------------------------------------


def test_small_file_contents() -> None:
    arrays, names = loads(SMALL)
    assert names == ["arg:w", "arg:bias", "aux:running_mean"]
    np.testing.assert_array_equal(arrays[0], np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(arrays[1], np.array([1, -2, 3, -4], dtype=np.int64))
    assert arrays[2].dtype == np.uint8 and arrays[2].tolist() == [[7, 250]]
    assert dumps(arrays, names) == SMALL
    assert loads(SMALL_UNNAMED)[1] == []
    assert dumps(arrays) == SMALL_UNNAMED


def test_written_layout_is_mxnet_1_9s() -> None:
    data = dumps([np.array([[1.5, 2.5]], dtype=np.float32)], ["arg:x"])
    expected = (struct.pack("<QQQ", 0x112, 0, 1)
                + struct.pack("<IiiqqiiI", V2_MAGIC, 0, 2, 1, 2, 1, 0, 0)
                + struct.pack("<ff", 1.5, 2.5)
                + struct.pack("<QQ", 1, 5) + b"arg:x")
    assert data == expected


def test_version_1_array() -> None:
    body = struct.pack("<Iiqq", V1_MAGIC, 2, 2, 2) + _tail(1, struct.pack("<4d", 1, 2, 3, 4))
    arrays, names = loads(_list_header(1) + body + _names_block(["a"]))
    assert names == ["a"]
    np.testing.assert_array_equal(arrays[0], np.array([[1.0, 2.0], [3.0, 4.0]]))


def test_pre_version_1_array() -> None:
    body = struct.pack("<III", 2, 3, 1) + _tail(4, struct.pack("<3i", 5, -6, 7))
    arrays, _ = loads(_list_header(1) + body + _names_block([]))
    np.testing.assert_array_equal(arrays[0], np.array([[5], [-6], [7]], dtype=np.int32))


def test_version_3_scalar() -> None:
    body = struct.pack("<Iii", V3_MAGIC, 0, 0) + _tail(2, np.float16(0.5).tobytes())
    arrays, _ = loads(_list_header(1) + body + _names_block([]))
    assert arrays[0].shape == () and arrays[0].dtype == np.float16 and arrays[0] == 0.5


def test_scalar_switches_the_whole_file_to_version_3() -> None:
    data = dumps([np.float32(3.0), np.zeros((2,), np.int8)])
    assert struct.unpack_from("<I", data, ARRAYS_AT)[0] == V3_MAGIC
    second = ARRAYS_AT + 4 + 4 + 4 + 8 + 4 + 4
    assert struct.unpack_from("<I", data, second)[0] == V3_MAGIC
    assert struct.unpack_from("<I", dumps([np.zeros(2)], version=3), ARRAYS_AT)[0] == V3_MAGIC
    with pytest.raises(InvalidArgumentError, match="version 3"):
        dumps([np.float32(3.0)], version=2)
    with pytest.raises(InvalidArgumentError, match="2 or 3"):
        dumps([np.zeros(2)], version=1)


def test_bool_bytes_are_normalised() -> None:
    body = _v2_array((3,), 7, bytes([0, 1, 2]))
    arrays, _ = loads(_list_header(1) + body + _names_block([]))
    assert arrays[0].dtype == np.bool_ and arrays[0].tolist() == [False, True, True]
    assert dumps(arrays)[-8 - 3:-8] == bytes([0, 1, 1])


# ---- round trips ---------------------------------------------------------------------

SHAPES = [(), (0,), (2, 0, 3), (5,), (2, 3, 4), (1, 1, 1, 1, 1, 2)]


def _sample(dtype: np.dtype, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "f":
        return rng.standard_normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("flag", sorted(DTYPE_BY_FLAG))
def test_every_dtype_round_trips(flag: int) -> None:
    dtype = DTYPE_BY_FLAG[flag].newbyteorder("=")
    arrays = [_sample(dtype, shape, seed) for seed, shape in enumerate(SHAPES)]
    names = [f"arg:p{index}" for index in range(len(arrays))]
    for given_names in (names, None, []):
        data = dumps(arrays, given_names)
        loaded, loaded_names = loads(data)
        assert loaded_names == (names if given_names else [])
        for want, got in zip(arrays, loaded):
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        assert dumps(loaded, loaded_names) == data
        assert struct.unpack_from("<Ii", data, ARRAYS_AT) == (V3_MAGIC, 0)  # has a 0-d array
        assert struct.unpack_from("<i", data, ARRAYS_AT + 8)[0] == 0  # the 0-d array: ndim 0


def test_type_flags_are_written() -> None:
    for flag, dtype in DTYPE_BY_FLAG.items():
        data = dumps([np.zeros((1,), dtype)])
        assert struct.unpack_from("<i", data, ARRAYS_AT + 4 + 4 + 4 + 8 + 8)[0] == flag


def test_empty_list_round_trips(tmp_path: Path) -> None:
    data = dumps([])
    assert data == _list_header(0) + struct.pack("<Q", 0)
    assert loads(data) == ([], [])
    path = tmp_path / "empty.params"
    save(path, [], [])
    assert load(path) == ([], [])
    assert load(str(path)) == ([], [])


def test_unicode_names_and_sources(tmp_path: Path) -> None:
    arrays = [np.ones((2, 2), np.float32), np.zeros((1,), np.float64)]
    names = ["arg:poids_é", "aux:变量"]
    path = tmp_path / "named.params"
    save(path, arrays, names)
    for source in (path, str(path), path.read_bytes(), bytearray(path.read_bytes()),
                   memoryview(path.read_bytes())):
        loaded, loaded_names = load(source)
        assert loaded_names == names
        np.testing.assert_array_equal(loaded[0], arrays[0])


def test_non_contiguous_and_big_endian_inputs() -> None:
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    native = dumps([np.ascontiguousarray(base[:, ::2]), base.T.copy()])
    assert dumps([base[:, ::2], base.T]) == native
    assert dumps([base[:, ::2].astype(">f8"), base.T.astype(">f8")]) == native
    assert dumps([[[1.0, 2.0]]]) == dumps([np.array([[1.0, 2.0]])])


@pytest.mark.parametrize("bad", [np.zeros(2, np.complex64), np.array(["a"]),
                                 np.array([object()]), np.zeros(2, "datetime64[s]")])
def test_unsupported_dtypes_are_refused(bad: np.ndarray) -> None:
    with pytest.raises(TensorError, match="cannot be saved"):
        dumps([np.zeros(1), bad])


def test_bad_names_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="2 names for 1 arrays"):
        dumps([np.zeros(1)], ["a", "b"])
    with pytest.raises(InvalidArgumentError, match="not one string"):
        dumps([np.zeros(1)], "a")
    with pytest.raises(InvalidArgumentError, match="not str"):
        dumps([np.zeros(1)], [b"a"])  # type: ignore[list-item]


# ---- damaged and hostile files -------------------------------------------------------


def _set(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    patched = bytearray(data)
    struct.pack_into(fmt, patched, offset, *values)
    return bytes(patched)


def _refused(data: bytes, pattern: str) -> ModelFileError:
    with pytest.raises(ModelFileError, match=pattern) as info:
        loads(data)
    assert str(info.value).startswith("<bytes>: byte offset ")
    return info.value


@pytest.mark.parametrize("data", [SMALL, SMALL_UNNAMED], ids=["named", "unnamed"])
def test_every_truncation_is_refused(data: bytes) -> None:
    for cut in range(len(data)):
        with pytest.raises(ModelFileError):
            loads(data[:cut])
    assert loads(data)


def test_truncation_message() -> None:
    message = str(_refused(SMALL[:ARRAYS_AT + 40 + 10], "truncated"))
    assert f"byte offset {ARRAYS_AT + 40}" in message and "array 0 (of 3)" in message
    assert "needs 24 bytes, only 10 remain" in message


def test_file_name_in_message(tmp_path: Path) -> None:
    path = tmp_path / "broken.params"
    path.write_bytes(SMALL[:-3])
    with pytest.raises(ModelFileError, match=r"broken\.params: byte offset \d+: .*name 2"):
        load(path)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.params")


def test_wrong_list_magic() -> None:
    _refused(_set(SMALL, 0, "<Q", 0x113), r"byte offset 0: not an MXNet NDArray-list file")
    _refused(b"\x89PNG\r\n\x1a\n" + bytes(40), "not an MXNet NDArray-list file")


def test_flipped_array_magic() -> None:
    data = _set(SMALL, ARRAYS_AT, "<I", V2_MAGIC ^ 0x00FF0000)
    message = str(_refused(data, f"byte offset {ARRAYS_AT}: array 0 .*unknown array magic"))
    assert "0xf96cfac9" in message


def test_huge_and_negative_ndim() -> None:
    _refused(_set(SMALL, ARRAYS_AT + 8, "<i", 0x7FFFFFFF), "ndim 2147483647 exceeds the limit")
    _refused(_set(SMALL, ARRAYS_AT + 8, "<i", 33), "ndim 33 exceeds the limit of 32")
    _refused(_set(SMALL, ARRAYS_AT + 8, "<i", -5), "negative ndim -5")
    # A legacy ndim (the first word) above the limit is an unknown magic.
    _refused(_set(SMALL, ARRAYS_AT, "<I", 33), "unknown array magic")


def test_huge_dims_are_refused_before_allocating() -> None:
    data = _set(SMALL, ARRAYS_AT + 12, "<qq", 1 << 62, 1 << 62)
    start = time.perf_counter()
    message = str(_refused(data, f"byte offset {ARRAYS_AT + 40}: truncated: array 0"))
    assert time.perf_counter() - start < 1.0
    assert str(1 << 126) in message  # prod(dims) * itemsize, computed exactly
    _refused(_set(SMALL, ARRAYS_AT + 12, "<q", -2), r"negative dimension")
    third_dims_at = ARRAYS_AT + 64 + 64 + 12
    assert struct.unpack_from("<qq", SMALL, third_dims_at) == (1, 2)
    _refused(_set(SMALL, third_dims_at, "<qq", 1, 1000),
             rf"byte offset {third_dims_at + 16 + 12}: truncated: array 2 \(of 3\) of shape "
             r"\(1, 1000\) and dtype uint8 needs 1000 bytes")


def test_counts_out_of_range() -> None:
    _refused(_set(SMALL, 16, "<Q", (1 << 64) - 1), "byte offset 16: negative array count -1")
    _refused(_set(SMALL, 16, "<Q", 1 << 40), "array count 1099511627776 is more than")
    names_at = len(SMALL) - (8 + 8 + 5 + 8 + 8 + 8 + 16)
    assert struct.unpack_from("<Q", SMALL, names_at)[0] == 3
    _refused(_set(SMALL, names_at, "<Q", (1 << 64) - 2), "negative name count -2")
    _refused(_set(SMALL, names_at, "<Q", 1 << 50), "name count .* is more than")
    _refused(_set(SMALL, names_at, "<Q", 2), f"byte offset {names_at}: the file has 3 arrays "
                                             f"but 2 names")


def test_name_length_past_the_end() -> None:
    first_name_at = len(SMALL) - (8 + 5 + 8 + 8 + 8 + 16)
    assert struct.unpack_from("<Q", SMALL, first_name_at)[0] == 5
    _refused(_set(SMALL, first_name_at, "<Q", 1 << 60),
             f"byte offset {first_name_at}: name 0 .*runs past the end")
    _refused(_set(SMALL, first_name_at, "<Q", (1 << 64) - 1), "runs past the end")


def test_invalid_utf8_name() -> None:
    data = SMALL.replace(b"arg:w", b"arg:\xff")
    _refused(data, "name 0 .*not valid UTF-8")


def test_trailing_bytes_are_an_error() -> None:
    _refused(SMALL + b"\0", rf"byte offset {len(SMALL)}: 1 unexpected bytes after the last name")
    _refused(SMALL_UNNAMED + SMALL, "unexpected bytes after the last array")


def test_unknown_and_unsupported_type_flags() -> None:
    flag_at = ARRAYS_AT + 4 + 4 + 4 + 16 + 8
    _refused(_set(SMALL, flag_at, "<i", 99), f"byte offset {flag_at}: .*unknown element type")
    _refused(_set(SMALL, flag_at, "<i", -1), "unknown element type flag -1")
    _refused(_set(SMALL, flag_at, "<i", 12), r"bfloat16 \(flag 12\) is not supported")


def test_bad_storage_types_and_none_arrays_are_refused() -> None:
    # Sparse records are read (tests/nd/test_sparse_params.py); a dense
    # record relabelled sparse is damaged (its dense shape is no storage shape).
    stype_at = ARRAYS_AT + 4
    _refused(_set(SMALL, stype_at, "<i", 1), "byte offset")
    _refused(_set(SMALL, stype_at, "<i", 2), "byte offset")
    _refused(_set(SMALL, stype_at, "<i", -1), "undefined storage is not supported")
    _refused(_set(SMALL, stype_at, "<i", 7), "unknown storage type 7")
    none_v2 = _list_header(1) + struct.pack("<Iii", V2_MAGIC, 0, 0) + _names_block([])
    _refused(none_v2, r"none\) array \(ndim 0 in a version 2")
    none_v3 = _list_header(1) + struct.pack("<Iii", V3_MAGIC, 0, -1) + _names_block([])
    _refused(none_v3, r"none\) array \(ndim -1 in a version 3")
    unknown_dim = _list_header(1) + struct.pack("<Iiiq", V3_MAGIC, 0, 1, -1) + _tail(0, b"")
    _refused(unknown_dim + _names_block([]), r"unknown \(-1\) dimension")
    legacy_none = _list_header(1) + struct.pack("<I", 0) + _names_block([])
    _refused(legacy_none, r"legacy ndim 0")


# ---- random damage: ModelFileError or success, nothing else --------------------------

_EXTREMES = [0, 1, 0x7F, 0xFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 62, (1 << 63) - 1,
             1 << 63, (1 << 64) - 1]


def _check_robust(data: bytes) -> None:
    try:
        arrays, names = loads(data)
    except ModelFileError as error:
        assert str(error).startswith("<bytes>: byte offset ")
        return
    assert names == [] or len(names) == len(arrays)
    assert loads(dumps(arrays, names))[1] == names


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["flip", "set", "insert", "delete"]),
                          st.integers(0, len(SMALL) - 1), st.integers(0, 255)),
                min_size=1, max_size=6))
def test_random_byte_mutations(edits: list[tuple[str, int, int]]) -> None:
    data = bytearray(SMALL)
    for kind, position, value in edits:
        position %= max(len(data), 1)
        if kind == "flip":
            data[position] ^= 1 << (value % 8)
        elif kind == "set":
            data[position] = value
        elif kind == "insert":
            data.insert(position, value)
        elif data:
            del data[position]
    _check_robust(bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(SMALL) - 4), st.sampled_from(_EXTREMES), st.booleans())
def test_random_field_overwrites(position: int, value: int, wide: bool) -> None:
    if wide and position <= len(SMALL) - 8:
        _check_robust(_set(SMALL, position, "<Q", value))
    else:
        _check_robust(_set(SMALL, position, "<I", value & 0xFFFFFFFF))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bodies_after_a_valid_header(body: bytes) -> None:
    _check_robust(_list_header(2) + body)
    _check_robust(_list_header(1) + struct.pack("<I", V2_MAGIC) + body)


def test_empty_shape_too_large_for_numpy() -> None:
    # Holds no elements, yet numpy cannot build the shape: found by the fuzzing below.
    body = struct.pack("<Iiiqqq", V2_MAGIC, 0, 3, 0, 1 << 62, 1 << 40) + _tail(0, b"")
    _refused(_list_header(1) + body + _names_block([]), "holds no elements but is too large")
    fits = struct.pack("<Iiiqq", V2_MAGIC, 0, 2, 0, 1 << 40) + _tail(0, b"")
    assert loads(_list_header(1) + fits + _names_block([]))[0][0].shape == (0, 1 << 40)
