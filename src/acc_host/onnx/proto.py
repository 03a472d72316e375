"""ONNX's protobuf messages, read from their wire format without the ``onnx``
and ``protobuf`` packages: the one place that knows the wire format.

:func:`parse_model` decodes a ``ModelProto`` (onnx.proto, the field numbers
of the ONNX IR) into plain objects that carry the fields the importer and
the translators read, under protobuf's names (``model.graph.node[0].input``,
``tensor.raw_data``, ``HasField("dim_value")``). A tensor's ``raw_data`` is
a memoryview of the buffer the model was read from, so an initializer's
array is a view of the file's bytes, not a copy. Fields this module does not
know are skipped (a newer IR's additions); a malformed message (truncated,
a bad varint, a wire type its field does not have, a length past its end,
nesting deeper than protobuf's limit of 100) is a :class:`ProtoError`
naming the field and the byte offset.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar

import numpy as np

from ..errors import ModelFileError

#: protobuf's default nesting limit for messages.
MAX_DEPTH = 100

# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5

# Field kinds: how a field's value is decoded (its wire type follows).
INT, UINT, FLOAT, DOUBLE, STR, BYTES, MSG = "int", "uint", "float", "double", "str", "bytes", "msg"

_WIRE = {INT: VARINT, UINT: VARINT, FLOAT: I32, DOUBLE: I64, STR: LEN, BYTES: LEN, MSG: LEN}
_NUMPY = {INT: None, UINT: None, FLOAT: "<f4", DOUBLE: "<f8"}
_UNPACK_F = struct.Struct("<f").unpack_from
_UNPACK_D = struct.Struct("<d").unpack_from


class ProtoError(ModelFileError):
    """A malformed ONNX protobuf message; the message names the field and
    the byte offset in the buffer read."""


class Message:
    """A decoded message. Fields read and not set hold their defaults (0,
    "", an empty tuple, an empty message); ``HasField`` tells a set scalar
    or message field from an unset one, as protobuf's does."""

    #: field number -> (name, kind, repeated, message class or None)
    FIELDS: ClassVar[dict[int, tuple[str, str, bool, Any]]] = {}
    #: byte offset of the message in the buffer read (for error messages)
    offset: int = 0

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        return name in self.__dict__

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k != "offset")
        return f"{type(self).__name__}({fields})"


def _define(cls: type[Message], fields: dict[int, tuple[str, str, bool, Any]]) -> None:
    """Gives cls its fields and their defaults (class attributes, so an
    instance holds only what the buffer set)."""
    cls.FIELDS = fields
    for name, kind, repeated, _ in fields.values():
        if repeated:
            setattr(cls, name, ())
        elif kind == MSG:
            continue  # set below, once every class exists
        else:
            setattr(cls, name, {STR: "", BYTES: b"", FLOAT: 0.0, DOUBLE: 0.0}.get(kind, 0))


class StringStringEntryProto(Message):
    key: str
    value: str


class OperatorSetIdProto(Message):
    domain: str
    version: int


class Segment(Message):
    begin: int
    end: int


class TensorProto(Message):
    dims: Any
    data_type: int
    segment: Segment
    float_data: Any
    int32_data: Any
    string_data: Any
    int64_data: Any
    name: str
    doc_string: str
    raw_data: Any
    external_data: Any
    data_location: int
    double_data: Any
    uint64_data: Any
    metadata_props: Any


class SparseTensorProto(Message):
    values: TensorProto
    indices: TensorProto
    dims: Any


class Dimension(Message):
    dim_value: int
    dim_param: str
    denotation: str


class TensorShapeProto(Message):
    dim: Any


class TensorTypeProto(Message):
    elem_type: int
    shape: TensorShapeProto


class SequenceTypeProto(Message):
    elem_type: TypeProto


class MapTypeProto(Message):
    key_type: int
    value_type: TypeProto


class OptionalTypeProto(Message):
    elem_type: TypeProto


class SparseTensorTypeProto(Message):
    elem_type: int
    shape: TensorShapeProto


class OpaqueTypeProto(Message):
    domain: str
    name: str


class TypeProto(Message):
    tensor_type: TensorTypeProto
    sequence_type: SequenceTypeProto
    map_type: MapTypeProto
    optional_type: OptionalTypeProto
    sparse_tensor_type: SparseTensorTypeProto
    opaque_type: OpaqueTypeProto
    denotation: str

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802 (protobuf's name)
        """The set member of the "value" oneof (the last one read wins)."""
        found = None
        for name in ("tensor_type", "sequence_type", "map_type", "optional_type",
                     "sparse_tensor_type", "opaque_type"):
            if name in self.__dict__:
                found = name
        return found


class ValueInfoProto(Message):
    name: str
    type: TypeProto
    doc_string: str
    metadata_props: Any


class AttributeProto(Message):
    """An attribute; ``type`` is one of the AttributeType codes below."""

    UNDEFINED, FLOAT, INT, STRING, TENSOR, GRAPH = 0, 1, 2, 3, 4, 5
    FLOATS, INTS, STRINGS, TENSORS, GRAPHS = 6, 7, 8, 9, 10
    SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO, TYPE_PROTOS = 11, 12, 13, 14

    name: str
    ref_attr_name: str
    doc_string: str
    type: int
    f: float
    i: int
    s: Any
    t: TensorProto
    g: GraphProto
    sparse_tensor: SparseTensorProto
    tp: TypeProto
    floats: Any
    ints: Any
    strings: Any
    tensors: Any
    graphs: Any
    sparse_tensors: Any
    type_protos: Any


class NodeProto(Message):
    input: Any
    output: Any
    name: str
    op_type: str
    domain: str
    overload: str
    attribute: Any
    doc_string: str
    metadata_props: Any


class GraphProto(Message):
    node: Any
    name: str
    initializer: Any
    sparse_initializer: Any
    doc_string: str
    input: Any
    output: Any
    value_info: Any
    metadata_props: Any


class FunctionProto(Message):
    name: str
    input: Any
    output: Any
    attribute: Any
    attribute_proto: Any
    node: Any
    doc_string: str
    opset_import: Any
    domain: str
    overload: str
    value_info: Any
    metadata_props: Any


class ModelProto(Message):
    ir_version: int
    opset_import: Any
    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    doc_string: str
    graph: GraphProto
    metadata_props: Any
    functions: Any


# The field numbers of onnx.proto (and onnx-ml.proto's shared messages).
_define(StringStringEntryProto, {1: ("key", STR, False, None), 2: ("value", STR, False, None)})
_define(OperatorSetIdProto, {1: ("domain", STR, False, None), 2: ("version", INT, False, None)})
_define(Segment, {1: ("begin", INT, False, None), 2: ("end", INT, False, None)})
_define(TensorProto, {
    1: ("dims", INT, True, None), 2: ("data_type", INT, False, None),
    3: ("segment", MSG, False, Segment), 4: ("float_data", FLOAT, True, None),
    5: ("int32_data", INT, True, None), 6: ("string_data", BYTES, True, None),
    7: ("int64_data", INT, True, None), 8: ("name", STR, False, None),
    9: ("raw_data", BYTES, False, None), 10: ("double_data", DOUBLE, True, None),
    11: ("uint64_data", UINT, True, None), 12: ("doc_string", STR, False, None),
    13: ("external_data", MSG, True, StringStringEntryProto),
    14: ("data_location", INT, False, None),
    16: ("metadata_props", MSG, True, StringStringEntryProto)})
_define(SparseTensorProto, {1: ("values", MSG, False, TensorProto),
                            2: ("indices", MSG, False, TensorProto), 3: ("dims", INT, True, None)})
_define(Dimension, {1: ("dim_value", INT, False, None), 2: ("dim_param", STR, False, None),
                    3: ("denotation", STR, False, None)})
_define(TensorShapeProto, {1: ("dim", MSG, True, Dimension)})
_define(TensorTypeProto, {1: ("elem_type", INT, False, None),
                          2: ("shape", MSG, False, TensorShapeProto)})
_define(SequenceTypeProto, {1: ("elem_type", MSG, False, TypeProto)})
_define(MapTypeProto, {1: ("key_type", INT, False, None), 2: ("value_type", MSG, False, TypeProto)})
_define(OptionalTypeProto, {1: ("elem_type", MSG, False, TypeProto)})
_define(SparseTensorTypeProto, {1: ("elem_type", INT, False, None),
                                2: ("shape", MSG, False, TensorShapeProto)})
_define(OpaqueTypeProto, {1: ("domain", STR, False, None), 2: ("name", STR, False, None)})
_define(TypeProto, {
    1: ("tensor_type", MSG, False, TensorTypeProto), 4: ("sequence_type", MSG, False,
                                                          SequenceTypeProto),
    5: ("map_type", MSG, False, MapTypeProto), 6: ("denotation", STR, False, None),
    7: ("opaque_type", MSG, False, OpaqueTypeProto),
    8: ("sparse_tensor_type", MSG, False, SparseTensorTypeProto),
    9: ("optional_type", MSG, False, OptionalTypeProto)})
_define(ValueInfoProto, {1: ("name", STR, False, None), 2: ("type", MSG, False, TypeProto),
                         3: ("doc_string", STR, False, None),
                         4: ("metadata_props", MSG, True, StringStringEntryProto)})
_define(AttributeProto, {
    1: ("name", STR, False, None), 2: ("f", FLOAT, False, None), 3: ("i", INT, False, None),
    4: ("s", BYTES, False, None), 5: ("t", MSG, False, TensorProto),
    6: ("g", MSG, False, GraphProto), 7: ("floats", FLOAT, True, None),
    8: ("ints", INT, True, None), 9: ("strings", BYTES, True, None),
    10: ("tensors", MSG, True, TensorProto), 11: ("graphs", MSG, True, GraphProto),
    13: ("doc_string", STR, False, None), 14: ("tp", MSG, False, TypeProto),
    15: ("type_protos", MSG, True, TypeProto), 20: ("type", INT, False, None),
    21: ("ref_attr_name", STR, False, None), 22: ("sparse_tensor", MSG, False, SparseTensorProto),
    23: ("sparse_tensors", MSG, True, SparseTensorProto)})
_define(NodeProto, {
    1: ("input", STR, True, None), 2: ("output", STR, True, None), 3: ("name", STR, False, None),
    4: ("op_type", STR, False, None), 5: ("attribute", MSG, True, AttributeProto),
    6: ("doc_string", STR, False, None), 7: ("domain", STR, False, None),
    8: ("overload", STR, False, None),
    9: ("metadata_props", MSG, True, StringStringEntryProto)})
_define(GraphProto, {
    1: ("node", MSG, True, NodeProto), 2: ("name", STR, False, None),
    5: ("initializer", MSG, True, TensorProto), 10: ("doc_string", STR, False, None),
    11: ("input", MSG, True, ValueInfoProto), 12: ("output", MSG, True, ValueInfoProto),
    13: ("value_info", MSG, True, ValueInfoProto),
    15: ("sparse_initializer", MSG, True, SparseTensorProto),
    16: ("metadata_props", MSG, True, StringStringEntryProto)})
_define(FunctionProto, {
    1: ("name", STR, False, None), 4: ("input", STR, True, None), 5: ("output", STR, True, None),
    6: ("attribute", STR, True, None), 7: ("node", MSG, True, NodeProto),
    8: ("doc_string", STR, False, None), 9: ("opset_import", MSG, True, OperatorSetIdProto),
    10: ("domain", STR, False, None), 11: ("attribute_proto", MSG, True, AttributeProto),
    12: ("value_info", MSG, True, ValueInfoProto), 13: ("overload", STR, False, None),
    14: ("metadata_props", MSG, True, StringStringEntryProto)})
_define(ModelProto, {
    1: ("ir_version", INT, False, None), 2: ("producer_name", STR, False, None),
    3: ("producer_version", STR, False, None), 4: ("domain", STR, False, None),
    5: ("model_version", INT, False, None), 6: ("doc_string", STR, False, None),
    7: ("graph", MSG, False, GraphProto), 8: ("opset_import", MSG, True, OperatorSetIdProto),
    14: ("metadata_props", MSG, True, StringStringEntryProto),
    25: ("functions", MSG, True, FunctionProto)})

MESSAGES = (StringStringEntryProto, OperatorSetIdProto, Segment, TensorProto, SparseTensorProto,
            Dimension, TensorShapeProto, TensorTypeProto, SequenceTypeProto, MapTypeProto,
            OptionalTypeProto, SparseTensorTypeProto, OpaqueTypeProto, TypeProto,
            ValueInfoProto, AttributeProto, NodeProto, GraphProto, FunctionProto, ModelProto)
for _cls in MESSAGES:  # an unset message field reads as an empty message
    for _name, _kind, _repeated, _sub in _cls.FIELDS.values():
        if _kind == MSG and not _repeated:
            setattr(_cls, _name, _sub())


class _Reader:
    """One decode: the buffer, and the tensors stored outside it."""

    def __init__(self, data: Any) -> None:
        self.view = memoryview(data).cast("B")
        self.external: list[TensorProto] = []

    def fail(self, cls: type[Message], number: int, offset: int, what: str) -> ProtoError:
        field = cls.FIELDS.get(number)
        label = f"{cls.__name__}.{field[0]} (field {number})" if field else \
            f"{cls.__name__} field {number}"
        return ProtoError(f"ONNX protobuf: {label} at byte {offset}: {what}")

    def varint(self, pos: int, end: int, cls: type[Message], number: int) -> tuple[int, int]:
        view = self.view
        result = shift = 0
        start = pos
        while True:
            if pos >= end:
                raise self.fail(cls, number, start, "truncated varint")
            byte = view[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7
            if shift >= 70:
                raise self.fail(cls, number, start, "varint longer than 10 bytes")

    def message(self, cls: type[Message], pos: int, end: int, depth: int) -> Message:
        if depth > MAX_DEPTH:
            raise ProtoError(f"ONNX protobuf: {cls.__name__} at byte {pos}: messages nested "
                             f"deeper than {MAX_DEPTH}")
        msg = cls()
        msg.offset = pos
        fields = cls.FIELDS
        values = msg.__dict__
        view = self.view
        while pos < end:
            tag_at = pos
            byte = view[pos]
            if byte < 0x80:
                key, pos = byte, pos + 1
            else:
                key, pos = self.varint(pos, end, cls, 0)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ProtoError(f"ONNX protobuf: {cls.__name__} at byte {tag_at}: field "
                                 "number 0")
            field = fields.get(number)
            if field is None:
                pos = self.skip(wire, pos, end, cls, number, tag_at)
                continue
            name, kind, repeated, sub = field
            if wire == LEN:
                length, start = self.varint(pos, end, cls, number)
                pos = start + length
                if pos > end:
                    raise self.fail(cls, number, tag_at, f"length {length} runs past the end "
                                    f"of its message (byte {end})")
                if kind == MSG:
                    value: Any = self.message(sub, start, pos, depth + 1)
                elif kind == STR:
                    try:
                        value = str(view[start:pos], "utf-8")
                    except UnicodeDecodeError:
                        raise self.fail(cls, number, tag_at, "not UTF-8 text") from None
                elif kind == BYTES:
                    value = view[start:pos]
                elif repeated:  # a packed run of numbers
                    chunk = self.packed(kind, start, pos, cls, number)
                    values.setdefault(name, []).append(chunk)
                    continue
                else:
                    raise self.fail(cls, number, tag_at, f"wire type 2; a {kind} field has "
                                    f"wire type {_WIRE[kind]}")
            elif wire != _WIRE[kind]:
                raise self.fail(cls, number, tag_at, f"wire type {wire}; a {kind} field "
                                f"has wire type {_WIRE[kind]}")
            elif wire == VARINT:
                value, pos = self.varint(pos, end, cls, number)
                if kind == INT and value >= 1 << 63:
                    value -= 1 << 64
                elif value >= 1 << 64:
                    raise self.fail(cls, number, tag_at, "varint above 64 bits")
            elif wire == I32:
                if pos + 4 > end:
                    raise self.fail(cls, number, tag_at, "truncated 32-bit value")
                value = _UNPACK_F(view, pos)[0]
                pos += 4
            else:
                if pos + 8 > end:
                    raise self.fail(cls, number, tag_at, "truncated 64-bit value")
                value = _UNPACK_D(view, pos)[0]
                pos += 8
            if repeated:
                values.setdefault(name, []).append(value)
            else:
                values[name] = value
        if pos != end:
            raise ProtoError(f"ONNX protobuf: {cls.__name__} at byte {msg.offset}: its last "
                             f"field runs past its end (byte {end})")
        for name, kind, repeated, _ in fields.values():
            if repeated and kind in _NUMPY and name in values:
                values[name] = _joined(values[name], kind)
                if name in _AS_LISTS:
                    values[name] = values[name].tolist()
        if cls is TensorProto and values.get("data_location") == 1:
            self.external.append(msg)  # type: ignore[arg-type]
        return msg

    def skip(self, wire: int, pos: int, end: int, cls: type[Message], number: int,
             tag_at: int) -> int:
        """The position after an unknown field's value."""
        if wire == VARINT:
            return self.varint(pos, end, cls, number)[1]
        if wire in (I64, I32):
            pos += 8 if wire == I64 else 4
        elif wire == LEN:
            length, pos = self.varint(pos, end, cls, number)
            pos += length
        else:
            raise self.fail(cls, number, tag_at, f"wire type {wire} (groups and undefined types "
                            "are not read)")
        if pos > end:
            raise self.fail(cls, number, tag_at, f"value runs past the end of its message (byte "
                            f"{end})")
        return pos

    def packed(self, kind: str, start: int, end: int, cls: type[Message], number: int) -> Any:
        """A packed repeated field's numbers: a numpy array (a view of the
        buffer for floats and doubles)."""
        code = _NUMPY[kind]
        if code is not None:
            size = np.dtype(code).itemsize
            if (end - start) % size:
                raise self.fail(cls, number, start, f"packed run of {end - start} bytes is not "
                                f"a whole number of {size}-byte values")
            return np.frombuffer(self.view[start:end], code)
        raw = np.frombuffer(self.view[start:end], np.uint8)
        if raw.size and raw[-1] >= 0x80:
            raise self.fail(cls, number, end - 1, "truncated varint in a packed run")
        last = np.flatnonzero(raw < 0x80)  # each varint's last byte
        if last.size == raw.size:
            values = raw.astype(np.int64)
        else:
            first = np.empty_like(last)
            first[0:1] = 0
            first[1:] = last[:-1] + 1
            lengths = last - first + 1
            if lengths.max() > 10:
                raise self.fail(cls, number, start, "varint longer than 10 bytes in a "
                                "packed run")
            group = np.repeat(np.arange(last.size), lengths)
            shifts = (np.arange(raw.size) - first[group]).astype(np.uint64) * np.uint64(7)
            parts = (raw & 0x7F).astype(np.uint64) << shifts
            values = np.bitwise_or.reduceat(parts, first).view(np.int64)
        if kind == UINT:
            return values.view(np.uint64)
        return values


#: Repeated numeric fields read as lists of Python numbers (short ones:
#: dims and attribute values); the others are numpy arrays.
_AS_LISTS = frozenset({"dims", "ints", "floats"})


def _joined(chunks: list, kind: str) -> np.ndarray:
    """A repeated numeric field's values (read packed, unpacked or both) as
    one array: int64 (uint64 for UINT), float32 or float64."""
    dtype = {INT: np.int64, UINT: np.uint64, FLOAT: np.float32, DOUBLE: np.float64}[kind]
    if len(chunks) == 1 and isinstance(chunks[0], np.ndarray):
        return chunks[0].astype(dtype, copy=False)
    parts = [c if isinstance(c, np.ndarray) else np.array([c], dtype) for c in chunks]
    return np.concatenate([p.astype(dtype, copy=False) for p in parts])




def parse(cls: type[Message], data: Any) -> Message:
    """A message of type cls decoded from data (bytes, a memoryview, an
    mmap: the bytes fields are views of it)."""
    reader = _Reader(data)
    return reader.message(cls, 0, len(reader.view), 0)


def parse_model(data: Any) -> tuple[ModelProto, list[TensorProto]]:
    """(the ModelProto in data, its tensors whose data_location is EXTERNAL)."""
    reader = _Reader(data)
    model = reader.message(ModelProto, 0, len(reader.view), 0)
    assert isinstance(model, ModelProto)
    return model, reader.external


# --- TensorProto values ----------------------------------------------------------------------

#: TensorProto.DataType codes with a numpy dtype of their own, and the
#: field their values are in when not in raw_data.
_TYPES: dict[int, tuple[str, str]] = {
    1: ("<f4", "float_data"), 2: ("u1", "int32_data"), 3: ("i1", "int32_data"),
    4: ("<u2", "int32_data"), 5: ("<i2", "int32_data"), 6: ("<i4", "int32_data"),
    7: ("<i8", "int64_data"), 9: ("?", "int32_data"), 10: ("<f2", "int32_data"),
    11: ("<f8", "double_data"), 12: ("<u4", "uint64_data"), 13: ("<u8", "uint64_data"),
    14: ("<c8", "float_data"), 15: ("<c16", "double_data")}
STRING = 8
#: Types numpy has no dtype for (bfloat16, the float8, 4-, 2- and 6-bit
#: types), read by onnx's numpy_helper into ml_dtypes arrays.
EXOTIC_TYPES = frozenset({16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28})
#: The dtype each TensorProto.DataType code stands for, as a type of a value.
_NAMES = {16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
          20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn",
          24: "float8_e8m0fnu", 25: "uint2", 26: "int2", 27: "float6_e2m3fn",
          28: "float6_e3m2fn"}


def np_dtype(code: int) -> np.dtype:
    """The numpy dtype of a TensorProto.DataType code (ml_dtypes' for
    bfloat16 and the float8 types, as onnx's helper gives); a KeyError for
    a code with none (UNDEFINED, unknown, or no ml_dtypes)."""
    entry = _TYPES.get(code)
    if entry is not None:
        return np.dtype(entry[0]).newbyteorder("=")
    if code == STRING:
        return np.dtype(object)
    if code in _NAMES:
        try:
            import ml_dtypes  # onnx's own dependency, for these types only
        except ImportError:
            raise KeyError(code) from None
        if hasattr(ml_dtypes, _NAMES[code]):
            return np.dtype(getattr(ml_dtypes, _NAMES[code]))
    raise KeyError(code)


def tensor_array(tensor: TensorProto, label: str) -> np.ndarray:
    """A tensor's values, of shape dims: a read-only view of raw_data when
    the values are there, else an array of the typed field's values. A
    tensor whose data_type is unknown, whose data is stored elsewhere or in
    segments, or whose data does not hold dims' count of values is a
    ProtoError naming it and its byte offset."""
    dims = tuple(int(d) for d in tensor.dims)
    at = f" (TensorProto at byte {tensor.offset})"
    if any(d < 0 for d in dims):
        raise ProtoError(f"{label}: negative dimension in {dims}{at}")
    where = f"{label} of shape {dims}"
    count = 1
    for dim in dims:
        count *= dim
    if tensor.HasField("segment"):
        raise ProtoError(f"{where}: tensors stored in segments are not read{at}")
    if tensor.data_location == 1:
        raise ProtoError(f"{where}: its data is stored in an external file, which is read "
                         f"only for a model read from a path or a named file{at}")
    code = tensor.data_type
    if code in EXOTIC_TYPES:
        return _exotic(tensor, dims, where + at)
    if code == STRING:
        if len(tensor.string_data) != count:
            raise ProtoError(f"{where}: {len(tensor.string_data)} strings for dims {dims}{at}")
        values = np.empty(count, dtype=object)
        try:
            values[:] = [str(s, "utf-8") for s in tensor.string_data]
        except UnicodeDecodeError:
            raise ProtoError(f"{where}: a string_data value is not UTF-8 text{at}") from None
        return _shaped(values, dims, where + at)
    entry = _TYPES.get(code)
    if entry is None:
        raise ProtoError(f"{where}: data_type {code} is not a TensorProto.DataType this "
                         f"reader knows{at}")
    dtype = np.dtype(entry[0])
    if tensor.HasField("raw_data"):
        raw = tensor.raw_data
        if len(raw) != count * dtype.itemsize:
            raise ProtoError(f"{where}: raw_data holds {len(raw)} bytes; dims {dims} of "
                             f"{dtype.name} take {count * dtype.itemsize}{at}")
        value = np.frombuffer(raw, dtype)
        if not dtype.isnative:
            value = value.astype(dtype.newbyteorder("="))
        return _shaped(value, dims, where + at)
    field = entry[1]
    data = np.asarray(getattr(tensor, field))
    complex_ = code in (14, 15)
    have = data.size // 2 if complex_ else data.size
    if have != count or (complex_ and data.size % 2):
        raise ProtoError(f"{where}: {field} holds {data.size} values; dims {dims} take "
                         f"{count * 2 if complex_ else count}{at}")
    if complex_:
        value = data.astype(np.float32 if code == 14 else np.float64).view(dtype)
    elif code == 10:  # float16 bit patterns
        value = data.astype(np.uint16).view(np.float16)
    elif code == 9:
        value = data != 0
    else:
        value = data.astype(dtype.newbyteorder("="))
    return _shaped(value, dims, where + at)


def _shaped(value: np.ndarray, dims: tuple, where: str) -> np.ndarray:
    """value (of dims' count of elements) reshaped to dims; dims numpy
    cannot hold (an empty tensor whose other extents overflow its index,
    too many dimensions) are a ProtoError."""
    try:
        return value.reshape(dims)
    except (ValueError, MemoryError) as error:
        raise ProtoError(f"{where}: dims numpy cannot hold: {error}") from None


def _exotic(tensor: TensorProto, dims: tuple, where: str) -> np.ndarray:
    """A tensor of a type numpy has no dtype for, read by onnx's numpy_helper
    (these types need its bit-level conversions and ml_dtypes): the one use
    of the onnx package on the import path, for models holding them."""
    try:
        from onnx import TensorProto as OnnxTensor
        from onnx import numpy_helper
    except ImportError:
        raise ProtoError(f"{where}: data_type {tensor.data_type} needs the 'onnx' package "
                         "to be read") from None
    proto = OnnxTensor()
    proto.dims.extend(dims)
    proto.data_type = tensor.data_type
    if tensor.HasField("raw_data"):
        proto.raw_data = bytes(tensor.raw_data)
    else:
        proto.int32_data.extend(int(v) for v in np.asarray(tensor.int32_data))
    try:
        value: np.ndarray = numpy_helper.to_array(proto)
    except Exception as error:  # onnx's ValueError and the like
        raise ProtoError(f"{where}: {error}") from None
    return value

