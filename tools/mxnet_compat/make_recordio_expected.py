"""Writes RecordIO files with MXNet 1.9.1 for tests/frontend/test_recordio.py.

Runs in a side environment that has MXNet (it never imports acc_host)::

    python tools/mxnet_compat/make_recordio_expected.py \
        tests/mxnet_expected/recordio

plain.rec: RECORDS written with MXRecordIO (odd lengths, an empty record,
payloads holding the record magic at 4-aligned and unaligned offsets);
indexed.rec/.idx: the same with MXIndexedRecordIO under keys 10, 20, ...;
packed.rec: pack() of headers with a scalar and an array label.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

MAGIC = struct.pack("<I", 0xCED7230A)
RECORDS = [b"hello", b"", b"abcd" * 3, MAGIC + b"xy" + MAGIC * 2 + b"tail", b"z" + MAGIC,
           bytes(range(256)) * 3, MAGIC]
HEADERS = [(0, 3.0, 7, 0), (0, [1.0, 2.5, -4.0], 8, 9)]


def main() -> int:
    import mxnet as mx

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    writer = mx.recordio.MXRecordIO(str(out / "plain.rec"), "w")
    for record in RECORDS:
        writer.write(record)
    writer.close()
    writer = mx.recordio.MXIndexedRecordIO(str(out / "indexed.idx"), str(out / "indexed.rec"),
                                           "w")
    for number, record in enumerate(RECORDS):
        writer.write_idx(10 * (number + 1), record)
    writer.close()
    writer = mx.recordio.MXRecordIO(str(out / "packed.rec"), "w")
    for header in HEADERS:
        writer.write(mx.recordio.pack(mx.recordio.IRHeader(*header), b"payload"))
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
