"""mx.recordio against files MXNet 1.9.1 wrote
(tools/mxnet_compat/make_recordio_expected.py, side environment): acc-host
reads them back and writes byte-identical files for the same records."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from support.paths import MXNET_EXPECTED, ROOT

import acc_host as mx

EXPECTED = MXNET_EXPECTED / "recordio"
_spec = importlib.util.spec_from_file_location(
    "make_recordio_expected", ROOT / "tools" / "mxnet_compat" / "make_recordio_expected.py")
assert _spec is not None and _spec.loader is not None
CASES = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(CASES)


def test_reads_mxnet_records() -> None:
    reader = mx.recordio.MXRecordIO(EXPECTED / "plain.rec", "r")
    assert [reader.read() for _ in CASES.RECORDS] == CASES.RECORDS
    assert reader.read() is None
    reader.reset()
    assert reader.read() == CASES.RECORDS[0]
    reader.close()


def test_writes_byte_identical_records(tmp_path: Path) -> None:
    with mx.recordio.MXRecordIO(tmp_path / "plain.rec", "w") as writer:
        for record in CASES.RECORDS:
            writer.write(record)
    assert (tmp_path / "plain.rec").read_bytes() == (EXPECTED / "plain.rec").read_bytes()


def test_indexed_records(tmp_path: Path) -> None:
    writer = mx.recordio.MXIndexedRecordIO(tmp_path / "i.idx", tmp_path / "i.rec", "w")
    for number, record in enumerate(CASES.RECORDS):
        writer.write_idx(10 * (number + 1), record)
    writer.close()
    for suffix in ("idx", "rec"):
        assert ((tmp_path / f"i.{suffix}").read_bytes()
                == (EXPECTED / f"indexed.{suffix}").read_bytes())
    reader = mx.recordio.MXIndexedRecordIO(EXPECTED / "indexed.idx", EXPECTED / "indexed.rec",
                                           "r")
    assert reader.keys == [10 * (k + 1) for k in range(len(CASES.RECORDS))]
    assert reader.read_idx(40) == CASES.RECORDS[3]
    assert reader.read_idx(10) == CASES.RECORDS[0]
    with pytest.raises(mx.InvalidArgumentError, match="no record with key"):
        reader.read_idx(11)


def test_pack_matches_mxnet(tmp_path: Path) -> None:
    with mx.recordio.MXRecordIO(tmp_path / "packed.rec", "w") as writer:
        for header in CASES.HEADERS:
            writer.write(mx.recordio.pack(mx.recordio.IRHeader(*header), b"payload"))
    assert (tmp_path / "packed.rec").read_bytes() == (EXPECTED / "packed.rec").read_bytes()
    reader = mx.recordio.MXRecordIO(EXPECTED / "packed.rec", "r")
    header, payload = mx.recordio.unpack(reader.read())
    assert (header.flag, header.label, header.id, payload) == (0, 3.0, 7, b"payload")
    header, payload = mx.recordio.unpack(reader.read())
    assert header.flag == 3 and header.id2 == 9 and payload == b"payload"
    np.testing.assert_array_equal(header.label, [1.0, 2.5, -4.0])


def test_image_records_round_trip_in_bgr() -> None:
    image = np.random.default_rng(0).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    record = mx.recordio.pack_img((0, 1.0, 2, 0), image, img_fmt=".png")
    header, decoded = mx.recordio.unpack_img(record)
    assert header.label == 1.0
    np.testing.assert_array_equal(decoded, image)
    _, gray = mx.recordio.unpack_img(record, iscolor=0)
    assert gray.shape == (6, 5)


def test_bad_files_are_typed_errors(tmp_path: Path) -> None:
    data = (EXPECTED / "plain.rec").read_bytes()
    (tmp_path / "cut.rec").write_bytes(data[:30])
    reader = mx.recordio.MXRecordIO(tmp_path / "cut.rec", "r")
    reader.read()
    with pytest.raises(mx.ModelFileError):
        while reader.read() is not None:
            pass
    (tmp_path / "junk.rec").write_bytes(b"not a record file")
    with pytest.raises(mx.ModelFileError, match="magic"):
        mx.recordio.MXRecordIO(tmp_path / "junk.rec", "r").read()
    with pytest.raises(mx.ModelFileError):
        mx.recordio.unpack(b"short")
