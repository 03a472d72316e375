"""The trace file: JSON Lines, one record per line, and a blob directory.

A trace written to ``PATH`` is the file ``PATH`` and, for tensor data and
graph JSON larger than :data:`INLINE_BYTES`, the directory ``PATH.blobs``
holding each distinct byte string once, named by its SHA-256. Records:

* the header, first: ``{"format": "acc-host-trace", "version": 1,
  "host_api": 100, "pid": ..., "time": unix seconds}``;
* ``{"kind": "library", "lib": i, "path": ..., "name": ...}`` when a
  library's calls start being recorded (every later call names its library
  by ``lib``; ``name``, its accelerator name, is absent when recording
  starts before getAccName());
* ``{"kind": "call", "seq": n, "lib": i, "fn": name, "args": {...},
  "ret": status, "out": {...}, "error": message, "t": ns, "dur": ns,
  "thread": name}``: one ABI call, ``t`` counted from the header's time;
* ``{"kind": "span", "cat": ..., "name": ..., "t": ns, "dur": ns, "thread":
  name, "device": ...}``: host work (a CPU operator) for the timeline.

A byte string is written as ``"hex:<bytes>"`` when small, else as
``"sha256:<digest>"`` naming its blob. A tensor is a dict with ``shape``,
``dtype`` (the ABI's TensorDType value), ``dev`` (``MX_ACC_HOST_DEVICE`` for
host memory), ``ptr`` (the data address, so device buffers can be matched
to their ``mx_alloc``), ``nbytes`` and, for host data the call reads or
writes, ``data`` (a byte string as above).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TraceError

__all__ = ["FORMAT", "VERSION", "INLINE_BYTES", "BlobStore", "Trace", "read_trace"]

FORMAT = "acc-host-trace"
VERSION = 1
INLINE_BYTES = 64


class BlobStore:
    """Byte strings of one trace, stored once each by SHA-256."""

    def __init__(self, trace_path: str | os.PathLike[str]) -> None:
        self.directory = Path(f"{os.fspath(trace_path)}.blobs")
        self._known: set[str] = set()

    def put(self, data: bytes | memoryview) -> str:
        if len(data) <= INLINE_BYTES:
            return "hex:" + bytes(data).hex()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self._known:
            path = self.directory / digest
            if not path.exists():
                self.directory.mkdir(parents=True, exist_ok=True)
                scratch = path.with_suffix(".part")
                scratch.write_bytes(data)
                os.replace(scratch, path)
            self._known.add(digest)
        return "sha256:" + digest

    def get(self, reference: str) -> bytes:
        kind, _, value = reference.partition(":")
        if kind == "hex":
            try:
                return bytes.fromhex(value)
            except ValueError:
                raise TraceError(f"malformed inline bytes {reference[:40]!r}") from None
        if kind != "sha256" or len(value) != 64:
            raise TraceError(f"malformed byte reference {reference[:80]!r}")
        path = self.directory / value
        try:
            data = path.read_bytes()
        except OSError as error:
            raise TraceError(f"blob {value} of the trace is missing: {error}") from None
        if hashlib.sha256(data).hexdigest() != value:
            raise TraceError(f"blob {path} is damaged (its SHA-256 does not match its name)")
        return data


@dataclass
class Trace:
    """A trace read back: its header, libraries, calls and spans in order."""

    path: Path
    header: dict[str, Any]
    libraries: dict[int, dict[str, Any]]
    records: list[dict[str, Any]]
    blobs: BlobStore

    def library_names(self) -> dict[int, str]:
        """Each library's accelerator name: from its record, else from its
        recorded getAccName()."""
        names = {index: info["name"] for index, info in self.libraries.items()
                 if isinstance(info.get("name"), str)}
        for record in self.calls():
            if record["fn"] == "getAccName" and "name" in record.get("out", {}):
                names.setdefault(record["lib"], record["out"]["name"])
        return names

    def calls(self, lib: int | None = None) -> Iterator[dict[str, Any]]:
        for record in self.records:
            if record["kind"] == "call" and (lib is None or record["lib"] == lib):
                yield record


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Reads a trace file, checking every record's shape (a damaged or
    foreign file raises TraceError naming the line)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise TraceError(f"{path}: cannot read the trace: {error}") from None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise TraceError(f"{path}:{number}: not JSON: {error}") from None
        if not isinstance(record, dict):
            raise TraceError(f"{path}:{number}: a record must be a JSON object")
        records.append(record)
    if not records or records[0].get("format") != FORMAT:
        raise TraceError(f"{path}: not an acc-host trace (no {FORMAT!r} header)")
    header = records.pop(0)
    if header.get("version") != VERSION:
        raise TraceError(f"{path}: trace format version {header.get('version')!r}; this "
                         f"acc-host reads version {VERSION}")
    libraries: dict[int, dict[str, Any]] = {}
    for index, record in enumerate(records):
        kind = record.get("kind")
        if kind == "library":
            if not isinstance(record.get("lib"), int) or not isinstance(record.get("path"), str):
                raise TraceError(f"{path}: library record {index} lacks lib/path")
            libraries[record["lib"]] = record
        elif kind == "call":
            if not (isinstance(record.get("fn"), str) and isinstance(record.get("args"), dict)
                    and record.get("lib") in libraries):
                raise TraceError(f"{path}: call record {index} is malformed or names an "
                                 "unknown library")
        elif kind != "span":
            raise TraceError(f"{path}: record {index} has unknown kind {kind!r}")
    return Trace(path, header, libraries, records, BlobStore(path))
