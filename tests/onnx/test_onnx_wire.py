"""acc_host.onnx.proto and acc_host.onnx.reader: ONNX files read without the
onnx package, checked against onnx's own parse (protobuf's) field by field,
and hostile bytes refused with typed errors that name the field and offset."""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import TESTS

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as OnnxTensor  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.backend.test import loader as suite_loader  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.errors import AccHostError, InvalidArgumentError, ModelFileError  # noqa: E402
from acc_host.onnx import proto  # noqa: E402
from acc_host.onnx.reader import read_model  # noqa: E402

# --- the generic walk ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A repeated scalar or bytes field's values as a comparable list."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return [bytes(v) if isinstance(v, memoryview) else v for v in value]


def assert_same(ours: proto.Message, theirs: Any, path: str = "model") -> None:
    """Every field our message class knows, compared with onnx's message of
    the same name: presence, values, and sub-messages recursively."""
    known = theirs.DESCRIPTOR.fields_by_name
    for name, kind, repeated, _ in type(ours).FIELDS.values():
        assert name in known, f"{path}.{name}: onnx's {type(theirs).__name__} has no such field"
        mine, other = getattr(ours, name), getattr(theirs, name)
        where = f"{path}.{name}"
        if repeated and kind == proto.MSG:
            assert len(mine) == len(other), where
            for index, (a, b) in enumerate(zip(mine, other)):
                assert_same(a, b, f"{where}[{index}]")
        elif repeated:
            a, b = _plain(mine), _plain(other)
            assert len(a) == len(b) and all(x == y or (x != x and y != y)  # NaN == NaN
                                            for x, y in zip(a, b)), where
        else:
            assert ours.HasField(name) == theirs.HasField(name), where
            if kind == proto.MSG:
                if ours.HasField(name):
                    assert_same(mine, other, where)
            elif kind == proto.BYTES:
                assert bytes(mine) == bytes(other), where
            else:
                assert mine == other or (mine != mine and other != other), where


def _tensors(model: Any) -> list[Any]:
    """Every TensorProto of a model (initializers and tensor attributes, in
    subgraphs too), in a fixed order."""
    found: list[Any] = []

    def graph(g: Any) -> None:
        found.extend(g.initializer)
        for node in g.node:
            for attr in node.attribute:
                if attr.type == proto.AttributeProto.TENSOR:
                    found.append(attr.t)
                found.extend(attr.tensors)
                if attr.type == proto.AttributeProto.GRAPH:
                    graph(attr.g)
                for body in attr.graphs:
                    graph(body)

    graph(model.graph)
    return found


def _same_values(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    if ours.dtype == object:
        assert ours.tolist() == theirs.tolist()
    else:
        np.testing.assert_array_equal(ours.view(np.uint8) if ours.dtype.kind == "V" else ours,
                                      theirs.view(np.uint8) if theirs.dtype.kind == "V"
                                      else theirs)


def check_file(path: Path) -> None:
    check_bytes(path.read_bytes())


def check_bytes(data: bytes) -> None:
    """Our parse of a model's bytes against onnx's, field by field, and
    every tensor's values against numpy_helper's."""
    theirs = onnx.load_from_string(data)
    ours = read_model(data)
    assert_same(ours, theirs)
    for mine, other in zip(_tensors(ours), _tensors(theirs)):
        try:
            expected = numpy_helper.to_array(other)
        except Exception:  # noqa: BLE001 (what onnx cannot read, we refuse)
            with pytest.raises(ModelFileError):
                proto.tensor_array(mine, "t")
            continue
        _same_values(proto.tensor_array(mine, "t"), expected)


#: The backend suite's model files (its node cases are made in memory:
#: test_every_backend_suite_node_case_reads_as_onnx_reads_it reads them).
SUITE_DATA = Path(suite_loader.__file__).parent.parent / "data"
SUITE_FILES = sorted(SUITE_DATA.rglob("*.onnx"))
TEST_FILES = sorted(TESTS.rglob("*.onnx"))


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_every_model_of_the_tests_reads_as_onnx_reads_it(path: Path) -> None:
    check_file(path)


@pytest.mark.parametrize("path", [
    pytest.param(path, marks=[] if index % 10 == 0 else [pytest.mark.onnx_full])
    for index, path in enumerate(SUITE_FILES)], ids=lambda p: p.parent.name + "/" + p.name)
def test_backend_suite_files_read_as_onnx_reads_them(path: Path) -> None:
    check_file(path)


@pytest.mark.onnx_full
def test_every_backend_suite_node_case_reads_as_onnx_reads_it() -> None:
    cases = suite_loader.load_model_tests(kind="node")
    assert len(cases) > 1000
    failures = []
    for case in cases:
        model = case.model if case.model is not None else \
            onnx.load(str(Path(case.model_dir) / "model.onnx"))
        try:
            check_bytes(model.SerializeToString())
        except AssertionError as error:
            failures.append(f"{case.name}: {error}")
    assert not failures, "\n".join(failures[:20])


# --- sources ------------------------------------------------------------------------------------


def _small_model(**tensor: Any) -> Any:
    """x -> Add(x, w) with w an initializer (make_tensor's keywords; with
    raw=True, vals are its raw_data as they are, whatever the dims)."""
    data_type = tensor.pop("data_type", OnnxTensor.FLOAT)
    dims = tensor.pop("dims", [3])
    vals = tensor.pop("vals", [1.0, 2.0, 3.0])
    if tensor.pop("raw", False):
        w = OnnxTensor(name="w", data_type=data_type, dims=dims, raw_data=vals)
    elif tensor.pop("as_is", False):  # float_data whatever the dims
        w = OnnxTensor(name="w", data_type=data_type, dims=dims, float_data=vals)
    else:
        w = helper.make_tensor("w", data_type, dims, vals)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", OnnxTensor.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", OnnxTensor.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_every_source_kind_reads_the_same(tmp_path: Path) -> None:
    model = _small_model()
    data = model.SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with open(path, "rb") as file:
        from_file = read_model(file)
    for parsed in (read_model(str(path)), read_model(path), read_model(data),
                   read_model(bytearray(data)), read_model(model), from_file,
                   read_model(io.BytesIO(data))):
        assert_same(parsed, model)
    assert read_model(parsed) is parsed
    with pytest.raises(InvalidArgumentError, match="expected a path, bytes"):
        read_model(3.5)
    with pytest.raises(InvalidArgumentError, match="binary mode"):
        read_model(io.StringIO("text"))


def test_raw_data_is_a_view_of_the_file_bytes() -> None:
    data = _small_model(vals=np.arange(3, dtype=np.float32).tobytes(), raw=True) \
        .SerializeToString()
    model = read_model(data)
    value = proto.tensor_array(model.graph.initializer[0], "w")
    assert not value.flags.owndata and not value.flags.writeable
    np.testing.assert_array_equal(value, [0, 1, 2])
    assert np.shares_memory(value, np.frombuffer(data, np.uint8))


def test_a_large_file_is_mapped_and_read_alike(tmp_path: Path) -> None:
    from acc_host.onnx import reader

    values = np.random.default_rng(0).standard_normal(reader.MMAP_BYTES // 2, np.float32)
    model = _small_model(dims=[values.size], vals=values.tobytes(), raw=True)
    path = tmp_path / "large.onnx"
    onnx.save(model, str(path))
    ours = read_model(path)
    assert_same(ours, model)
    value = proto.tensor_array(ours.graph.initializer[0], "w")
    assert not value.flags.writeable and not value.flags.owndata
    np.testing.assert_array_equal(value, values)
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert not read_model(tmp_path / "empty.onnx").HasField("graph")


@pytest.mark.parametrize("data_type,values", [
    (OnnxTensor.FLOAT, [1.5, -2.0]), (OnnxTensor.DOUBLE, [1.5, -2.0]),
    (OnnxTensor.INT64, [-(2**62), 7]), (OnnxTensor.INT32, [-5, 7]), (OnnxTensor.INT8, [-5, 7]),
    (OnnxTensor.UINT8, [250, 7]), (OnnxTensor.INT16, [-300, 7]), (OnnxTensor.UINT16, [65000, 7]),
    (OnnxTensor.UINT32, [2**32 - 1, 7]), (OnnxTensor.UINT64, [2**64 - 1, 7]),
    (OnnxTensor.BOOL, [True, False]), (OnnxTensor.FLOAT16, [1.5, -2.0]),
    (OnnxTensor.COMPLEX64, [1 + 2j, -3j]), (OnnxTensor.COMPLEX128, [1 + 2j, -3j]),
    (OnnxTensor.STRING, [b"ab", "\u00e9".encode()]), (OnnxTensor.BFLOAT16, [1.5, -2.0])])
@pytest.mark.parametrize("raw", [False, True])
def test_every_data_type_reads_as_numpy_helper_reads_it(data_type: int, values: list,
                                                        raw: bool) -> None:
    if raw and data_type == OnnxTensor.STRING:
        pytest.skip("strings have no raw_data form")
    tensor = helper.make_tensor("t", data_type, [2], values, raw=False)
    if raw:
        tensor = numpy_helper.from_array(numpy_helper.to_array(tensor), "t")
    ours = proto.parse(proto.TensorProto, tensor.SerializeToString())
    assert isinstance(ours, proto.TensorProto)
    _same_values(proto.tensor_array(ours, "t"), numpy_helper.to_array(tensor))


def test_packed_and_unpacked_repeated_fields_read_alike() -> None:
    # TensorProto: dims (1) unpacked 2, 3; float_data (4) packed 6 floats,
    # then one more unpacked; data_type (2) FLOAT
    floats = struct.pack("<6f", *range(6))
    unpacked = b"\x08\x02\x08\x03\x10\x01" + b"\x22" + bytes([len(floats)]) + floats
    packed_dims = b"\x0a\x02\x02\x03\x10\x01" + b"\x22" + bytes([len(floats)]) + floats
    for data in (unpacked, packed_dims):
        tensor = proto.parse(proto.TensorProto, data)
        assert tensor.dims == [2, 3]
        np.testing.assert_array_equal(proto.tensor_array(tensor, "t"),
                                      np.arange(6, dtype=np.float32).reshape(2, 3))
    # int64_data (7): a packed run with multi-byte and negative varints, one unpacked
    values = [0, 1, 127, 128, 300, -1, -(2**63), 2**63 - 1]
    run = b"".join(_varint(v & (2**64 - 1)) for v in values)
    data = b"\x3a" + _varint(len(run)) + run + b"\x38" + _varint(5)
    tensor = proto.parse(proto.TensorProto, data)
    assert tensor.int64_data.tolist() == values + [5]
    assert tensor.int64_data.tolist() == list(OnnxTensor.FromString(data).int64_data)


def test_unknown_fields_are_skipped() -> None:
    model = _small_model()
    data = model.SerializeToString()
    # unknown fields of each wire type on the ModelProto: 99 varint, 98
    # 64-bit, 97 length-delimited, 96 32-bit
    extra = (_varint(99 << 3) + _varint(2**40) + _varint(98 << 3 | 1) + b"\0" * 8
             + _varint(97 << 3 | 2) + _varint(3) + b"abc" + _varint(96 << 3 | 5) + b"\0" * 4)
    assert_same(read_model(extra + data + extra), model)


def test_external_data_is_read_from_the_models_folder(tmp_path: Path) -> None:
    values = np.arange(4096, dtype=np.float32)
    model = _small_model(dims=[4096], vals=values.tobytes(), raw=True)
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.data",
              size_threshold=0)
    ours = read_model(str(path))
    assert_same(ours, onnx.load(str(path)))
    np.testing.assert_array_equal(proto.tensor_array(ours.graph.initializer[0], "w"), values)
    with pytest.raises(ModelFileError, match="stored in an external file"):
        proto.tensor_array(read_model(path.read_bytes()).graph.initializer[0], "w")
    # a location outside the model's folder is refused
    escaping = onnx.load(str(path), load_external_data=False)
    escaping.graph.initializer[0].external_data[0].value = "../ext.data"
    (tmp_path / "sub").mkdir()
    onnx.save(escaping, str(tmp_path / "sub" / "esc.onnx"))
    with pytest.raises(ModelFileError, match="outside the model's folder"):
        read_model(str(tmp_path / "sub" / "esc.onnx"))
    # a length past the file's end
    short = onnx.load(str(path), load_external_data=False)
    for entry in short.graph.initializer[0].external_data:
        if entry.key == "length":
            entry.value = str(10**9)
    onnx.save(short, str(tmp_path / "short.onnx"))
    with pytest.raises(ModelFileError, match="the file holds 16384"):
        read_model(str(tmp_path / "short.onnx"))


# --- malformed bytes ----------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@pytest.mark.parametrize("data,match", [
    (b"\x08", r"ModelProto.ir_version \(field 1\) at byte 1: truncated varint"),
    (b"\x08" + b"\xff" * 11, "ModelProto.ir_version .* varint longer than 10 bytes"),
    (b"\x0d\0\0\0\0", r"ModelProto.ir_version \(field 1\) at byte 0: wire type 5; a int "
     "field has wire type 0"),
    (b"\x3a\x05ab", r"ModelProto.graph \(field 7\) at byte 0: length 5 runs past the end"),
    (b"\x3a\x03\x12\x05a", r"GraphProto.name \(field 2\) at byte 2: length 5 runs past"),
    (b"\x12\x02\xff\xfe", r"ModelProto.producer_name \(field 2\) at byte 0: not UTF-8"),
    (b"\xfb\x07", "ModelProto field 127 at byte 0: wire type 3"),
    (b"\x00", "at byte 0: field number 0"),
    (b"\xf9\x07\0\0", r"ModelProto field 127 at byte 0: value runs past the end"),
])
def test_malformed_bytes_name_the_field_and_offset(data: bytes, match: str) -> None:
    with pytest.raises(proto.ProtoError, match=match):
        read_model(data)
    with pytest.raises(proto.ProtoError, match=r"^<\d+ bytes>: not a valid ONNX model"):
        read_model(data)


def test_nesting_deeper_than_protobufs_limit_is_refused() -> None:
    # TypeProto.sequence_type.elem_type, 200 deep
    data = b""
    for _ in range(200):
        sequence = b"\x0a" + _varint(len(data)) + data
        data = b"\x22" + _varint(len(sequence)) + sequence
    with pytest.raises(proto.ProtoError, match="nested deeper than 100"):
        proto.parse(proto.TypeProto, data)


@pytest.mark.parametrize("tensor,match", [
    (dict(dims=[-3], vals=b"\0" * 12, raw=True), r"negative dimension in \(-3,\)"),
    (dict(dims=[2**40, 2**40], vals=b"\0" * 4, raw=True),
     r"of shape \(1099511627776, 1099511627776\): raw_data holds 4 bytes"),
    (dict(dims=[4], vals=[1.0, 2.0], as_is=True), "float_data holds 2 values; dims .4,. take 4"),
    (dict(data_type=77, dims=[1], vals=b"\0" * 4, raw=True),
     "data_type 77 is not a TensorProto.DataType"),
    (dict(dims=[0, 2**62, 2**62], vals=b"", raw=True), "dims numpy cannot hold"),
    (dict(dims=[1] * 70, vals=b"\0" * 4, raw=True), "dims numpy cannot hold"),
])
def test_bad_tensors_are_model_file_errors(tensor: dict, match: str) -> None:
    data = _small_model(**tensor).SerializeToString()
    with pytest.raises(ModelFileError, match=match) as raised:
        mx.onnx.import_model(data)
    assert "TensorProto at byte" in str(raised.value)


def test_strings_that_are_not_utf8_are_refused() -> None:
    tensor = helper.make_tensor("t", OnnxTensor.STRING, [1], [b"\xff"])
    ours = proto.parse(proto.TensorProto, tensor.SerializeToString())
    with pytest.raises(proto.ProtoError, match="string_data value is not UTF-8"):
        proto.tensor_array(ours, "t")


def test_bad_data_type_written_by_hand_is_refused() -> None:
    # TensorProto: dims [1], data_type 77, raw_data 4 bytes
    data = b"\x08\x01\x10\x4d\x4a\x04\0\0\0\0"
    tensor = proto.parse(proto.TensorProto, data)
    with pytest.raises(proto.ProtoError, match="data_type 77"):
        proto.tensor_array(tensor, "t")


def _hostile_seed() -> bytes:
    model = _small_model(dims=[2, 2], vals=[1.0, 2.0, 3.0, 4.0])
    model.graph.node[0].attribute.extend([helper.make_attribute("a", [1, 2, 3]),
                                          helper.make_attribute("s", "text")])
    return model.SerializeToString()


SEED = _hostile_seed()


def _read_everything(data: bytes) -> None:
    """Reads data as a model, all the way to every tensor's values and
    every value's type, and imports it: only typed errors may come out."""
    from acc_host.onnx.importer import _tensor_type, attr_value

    try:
        model = read_model(data)
        for tensor in _tensors(model):
            proto.tensor_array(tensor, "t")
        for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
            _tensor_type(value)
        for node in model.graph.node:
            for attr in node.attribute:
                attr_value(attr)
        mx.onnx.import_model(data)
    except AccHostError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(SEED)))
def test_truncated_models_raise_typed_errors(cut: int) -> None:
    _read_everything(SEED[:cut])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 7)),
                min_size=1, max_size=4))
def test_bit_flipped_models_raise_typed_errors(flips: list[tuple[int, int]]) -> None:
    data = bytearray(SEED)
    for position, bit in flips:
        data[position] ^= 1 << bit
    _read_everything(bytes(data))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64))
def test_random_bytes_raise_typed_errors(data: bytes) -> None:
    _read_everything(data)


def test_reading_a_file_does_not_import_onnx(tmp_path: Path) -> None:
    """read_model and import_model in a process where onnx is not loaded
    (sys.modules checked after)."""
    import subprocess

    path = tmp_path / "m.onnx"
    path.write_bytes(_small_model().SerializeToString())
    code = ("import sys, acc_host as mx\n"
            f"mx.onnx.import_model({str(path)!r})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('onnx', 'google', 'ml_dtypes')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout.strip().splitlines()[-1] == "[]"
