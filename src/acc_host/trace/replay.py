"""Re-issuing a trace's calls against a plugin build (see :mod:`acc_host.trace`).

Each library of the trace is opened afresh (a private copy of the file, so
its global state starts clean even when the same file is loaded in this
process) and its calls are made again in the trace's order with the
recorded arguments: host tensors from the recorded bytes, device pointers
mapped from the recorded ``mx_alloc`` results to the new ones, executors
from the recorded ``accGetExecutor`` results to the new ones. Each call's
result is compared with the recording: the status, the name, the device
count, the ids of supportedOps, and the bytes of every host tensor the
plugin wrote (infer's and an executor's outputs, copyFromAcc's
destination). The first difference is reported; a float difference comes
with its largest absolute and relative error.

Not replayed, and listed in the report's notes: configure calls naming a file
(``path``: exports and imports of compiled models), whose files belong to
the traced run.
"""

from __future__ import annotations

import bisect
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..abi import cdata, header
from ..abi.tensor import numpy_dtype
from ..compare import mismatch
from ..errors import TraceError
from .format import BlobStore, Trace, read_trace

__all__ = ["Divergence", "ReplayReport", "replay"]


@dataclass
class Divergence:
    """The first call whose result differs from the recording."""

    seq: int
    fn: str
    library: str
    what: str

    def __str__(self) -> str:
        return f"call {self.seq} ({self.library}: {self.fn}): {self.what}"


@dataclass
class ReplayReport:
    trace: Path
    libraries: dict[str, str]          # recorded path -> replayed path
    calls: int = 0                     # calls replayed
    notes: list[str] = field(default_factory=list)  # calls skipped, handshakes added
    divergence: Divergence | None = None

    @property
    def matched(self) -> bool:
        return self.divergence is None

    def format_text(self) -> str:
        lines = [f"replayed {self.calls} calls of {self.trace}"]
        lines += [f"  {recorded} -> {used}" for recorded, used in self.libraries.items()]
        lines += [f"  note: {item}" for item in self.notes]
        lines.append(f"first divergence: {self.divergence}" if self.divergence
                     else "no divergence")
        return "\n".join(lines)


class _Replayed:
    """One library opened for replay, with its pointer and executor maps."""

    def __init__(self, path: str, copy: Path) -> None:
        try:
            shutil.copyfile(path, copy)
            self.plugin = cdata.RawLibrary(str(copy))
        except OSError as error:
            raise TraceError(f"cannot open {path} for replay: {error}") from None
        self._bases: list[int] = []                  # recorded allocation starts, sorted
        self._allocations: dict[int, tuple[int, int]] = {}  # recorded -> (new, size)
        self.executors: dict[int, Any] = {}
        # The arguments of each model's loadModel and infer calls, alive
        # until its unloadModel: a plugin that retains weights (ABI 1.1)
        # reads them until then.
        self.model_arguments: dict[str, list[Any]] = {}

    def allocated(self, recorded: int, new: int, size: int) -> None:
        bisect.insort(self._bases, recorded)
        self._allocations[recorded] = (new, size)

    def freed(self, recorded: int) -> None:
        if self._allocations.pop(recorded, None) is not None:
            self._bases.remove(recorded)

    def device_pointer(self, recorded: int) -> int:
        index = bisect.bisect_right(self._bases, recorded) - 1
        if index >= 0:
            base = self._bases[index]
            new, size = self._allocations[base]
            if recorded - base < max(size, 1):
                return new + (recorded - base)
        if recorded == 0:
            return 0
        raise TraceError(f"device pointer {recorded:#x} is not inside any recorded mx_alloc")

    def unchecked(self, entry: str, *args: Any) -> Any:
        """entry(*args) of the replayed library, its answer as given."""
        return self.plugin.unchecked(entry, *args)

    def message(self) -> str:
        if not self.plugin.has("accGetLastError"):
            return ""
        text = self.unchecked("accGetLastError")
        return "" if text == cdata.NULL else cdata.string(text).decode("utf-8", "replace")


class _Args:
    """cffi objects built for one call, kept alive until it returns."""

    def __init__(self, blobs: BlobStore, library: _Replayed) -> None:
        self.blobs, self.library = blobs, library
        self.keep: list[Any] = []
        self.host: list[tuple[Any, dict[str, Any]]] = []  # (buffer, record) of host tensors

    def text(self, value: str | None) -> Any:
        if value is None:
            return cdata.NULL
        made = cdata.new("char[]", value.encode("utf-8"))
        self.keep.append(made)
        return made

    def texts(self, values: list[str | None]) -> Any:
        made = cdata.new("const char *[]", max(len(values), 1))
        for index, value in enumerate(values):
            made[index] = self.text(value)
        self.keep.append(made)
        return made

    def blob_text(self, reference: str) -> Any:
        made = cdata.new("char[]", self.blobs.get(reference))
        self.keep.append(made)
        return made

    def tensors(self, records: list[dict[str, Any]]) -> Any:
        made = cdata.new("MXTensor[]", max(len(records), 1))
        for slot, record in zip(made, records):
            self._fill(slot, record)
        self.keep.append(made)
        return made

    def _fill(self, slot: Any, record: dict[str, Any]) -> None:
        shape = cdata.new("uint64_t[]", record["shape"] or [0])
        self.keep.append(shape)
        slot.shape, slot.shape_len = shape, len(record["shape"])
        slot.dtype, slot.dev_id = record["dtype"], record["dev"]
        slot.isSparse = 0
        if "layout" in record:
            slot.layout = self.text(record["layout"])
        if record["dev"] == header.HOST_DEVICE:
            data = bytearray(self.blobs.get(record["data"])) if "data" in record \
                else bytearray(record["nbytes"])
            buffer = cdata.from_buffer(data)
            self.keep += [data, buffer]
            slot.data = buffer if record["ptr"] else cdata.NULL
            self.host.append((data, record))
        else:
            slot.data = cdata.cast("void *", self.library.device_pointer(record["ptr"]))


def _compare_tensor(blobs: BlobStore, recorded: dict[str, Any], data: bytes | bytearray
                    ) -> str | None:
    """None when data holds the recorded bytes, else what differs."""
    if "data" not in recorded:
        return None
    expected = blobs.get(recorded["data"])
    if expected == bytes(data):
        return None
    label = f"output {recorded['shape']} differs"
    try:
        dtype = numpy_dtype(recorded["dtype"])
        difference = mismatch(np.frombuffer(bytes(data), dtype), np.frombuffer(expected, dtype))
    except (TraceError, ValueError, TypeError):
        return label
    return f"{label}: {difference or 'in its bytes only (signed zeros or NaN payloads)'}"


def _call(library: _Replayed, blobs: BlobStore, record: dict[str, Any]) -> tuple[int, str | None]:
    """Makes one call again; returns its status and what differs beyond it."""
    fn, args, out = record["fn"], record["args"], record.get("out", {})
    made = _Args(blobs, library)
    if fn in ("getAccApiVersion", "getNumAcc", "supportsImperative"):
        return int(library.unchecked(fn)), None
    if fn == "initialize":
        return int(library.unchecked("initialize", args["version"])), None
    if fn == "getAccName":
        buffer = cdata.new("char[]", args["size"])
        status = int(library.unchecked("getAccName", buffer, args["size"]))
        name = cdata.read(buffer).split(b"\0", 1)[0].decode("ascii", "replace")
        return status, (None if status or name == out.get("name")
                        else f"name {name!r}, recorded {out.get('name')!r}")
    if fn == "mx_alloc":
        pointer = cdata.new("void **")
        status = int(library.unchecked("mx_alloc", args["dev"], args["size"], pointer))
        if status == 0 and "ptr" in out:
            library.allocated(out["ptr"], cdata.address(pointer[0]), args["size"])
        return status, None
    if fn == "mx_free":
        status = int(library.unchecked("mx_free", args["dev"], cdata.cast("void *",
                                                       library.device_pointer(args["ptr"]))))
        library.freed(args["ptr"])
        return status, None
    if fn == "mx_releaseAll":
        return int(library.unchecked("mx_releaseAll", args["dev"])), None
    if fn in ("copyToAcc", "copyFromAcc"):
        dst, src = made.tensors([args["dst"]]), made.tensors([args["src"]])
        status = int(library.unchecked(fn, dst, src))
        if fn == "copyFromAcc" and status == 0 and "dst" in out and made.host:
            return status, _compare_tensor(blobs, out["dst"], made.host[0][0])
        return status, None
    if fn == "supportedOps":
        capacity = args["capacity"]
        ids, count = cdata.new("int[]", max(capacity, 1)), cdata.new("int *", -1)
        status = int(library.unchecked("supportedOps",
                                       made.blob_text(args["json"]), made.texts(args["names"]),
                                      made.tensors(args["data"]), len(args["names"]),
                                      args["dev"], ids, capacity, count))
        found = list(ids[0:max(0, min(count[0], capacity))])
        return status, (None if status or found == out.get("ids")
                        else f"ids {found}, recorded {out.get('ids')}")
    if fn == "supportedOpsReasons":
        capacity, size = args["capacity"], args["reason_size"]
        ids, count = cdata.new("int[]", max(capacity, 1)), cdata.new("int *", -1)
        reasons = cdata.new("char[]", max(capacity * size, 1))
        status = int(library.unchecked("supportedOpsReasons",
                                       made.blob_text(args["json"]), made.texts(args["names"]),
                                       made.tensors(args["data"]), len(args["names"]),
                                       args["dev"], ids, capacity, count, reasons, size))
        found = list(ids[0:max(0, min(count[0], capacity))])
        return status, (None if status or found == out.get("ids")
                        else f"ids {found}, recorded {out.get('ids')}")
    if fn in ("loadModel", "infer"):
        library.model_arguments.setdefault(str(args["model_id"]), []).append(made)
    if fn == "loadModel":
        return int(library.unchecked("loadModel",
                                     made.text(args["model_id"]), made.blob_text(args["json"]),
                                 made.texts(args["names"]), made.tensors(args["data"]),
                                 len(args["names"]), args["dev"])), None
    if fn == "unloadModel":
        status = int(library.unchecked("unloadModel", made.text(args["model_id"])))
        library.model_arguments.pop(str(args["model_id"]), None)
        return status, None
    if fn in ("infer", "executor_forward"):
        inputs = made.tensors(args["inputs"])
        first_output = len(made.host)
        outputs = made.tensors(args["outputs"])
        if fn == "infer":
            status = int(library.unchecked("infer", made.text(args["model_id"]),
                                           made.texts(args["in_names"]),
                                           made.texts(args["out_names"]), inputs, outputs,
                                   len(args["inputs"]), len(args["outputs"])))
        else:
            handle = library.executors.get(args["executor"])
            if handle is None:
                raise TraceError(f"call {record['seq']}: executor {args['executor']:#x} was not "
                                 "made by a replayed accGetExecutor")
            status = int(handle.forward(handle, inputs, len(args["inputs"]), outputs,
                                        len(args["outputs"])))
        if status == 0:
            host_outputs = [data for data, _ in made.host[first_output:]]
            recorded = [item for item in out.get("outputs", [])
                        if item["dev"] == header.HOST_DEVICE]
            for index, (data, expected) in enumerate(zip(host_outputs, recorded)):
                difference = _compare_tensor(blobs, expected, data)
                if difference is not None:
                    names = args.get("out_names") or []
                    label = names[index] if index < len(names) else f"output {index}"
                    return status, f"{label}: {difference}"
        return status, None
    if fn == "accGetExecutor":
        attrs = args["attrs"]
        handle = cdata.new("MXAccExecutor **")
        status = int(library.unchecked("accGetExecutor",
            made.text(args["op"]), made.tensors(args["inputs"]), made.tensors(args["outputs"]),
            len(args["inputs"]), len(args["outputs"]), made.texts(list(attrs)),
            made.texts(list(attrs.values())), len(attrs), args["dev"], handle))
        if status == 0 and "executor" in out:
            library.executors[out["executor"]] = cdata.gc(handle[0], lambda h: h.release(h))
        return status, None
    if fn == "configure":
        settings = args["settings"]
        keys, values = made.texts(list(settings)), made.texts(list(settings.values()))
        out_keys, out_values = cdata.new("const char *const **"), cdata.new("const char *const **")
        count = cdata.new("int *")
        return int(library.unchecked("configure",
                                     keys, values, len(settings), args["dev"], out_keys, out_values,
                                 count)), None
    raise TraceError(f"call {record['seq']}: unknown function {fn!r}")


def _choose(trace: Trace, names: Mapping[int, str], replacements: Mapping[str, str]
            ) -> dict[int, str]:
    """The library file to replay each traced library against (names: the
    traced libraries' accelerator names)."""
    chosen = {}
    for index, info in trace.libraries.items():
        recorded = info["path"]
        chosen[index] = (replacements.get(names.get(index, ""))
                         or replacements.get(os.path.basename(recorded)) or recorded)
    unknown = set(replacements) - set(names.values()) - {
        os.path.basename(info["path"]) for info in trace.libraries.values()}
    if unknown:
        raise TraceError(f"the trace has no library called {', '.join(sorted(unknown))} "
                         f"(it has {', '.join(sorted(set(names.values())))})")
    return chosen


def replay(path: str | os.PathLike[str], libraries: Mapping[str, str] | None = None,
           only: str | None = None) -> ReplayReport:
    """Replays the trace at path. libraries maps a traced library's
    accelerator name (or file name) to the build to replay it against
    (default: the traced file itself); only, when given, replays the calls
    of that accelerator alone. Stops at the first divergence."""
    trace = read_trace(path)
    names = trace.library_names()
    chosen = _choose(trace, names, libraries or {})
    report = ReplayReport(trace.path, {trace.libraries[index]["path"]: used
                                       for index, used in chosen.items()})
    with tempfile.TemporaryDirectory(prefix="acc-host-replay-") as scratch:
        opened: dict[int, _Replayed] = {}
        for record in trace.calls():
            index = record["lib"]
            if only is not None and names.get(index) != only:
                continue
            label = names.get(index) or os.path.basename(trace.libraries[index]["path"])
            if record["fn"] == "configure" and "path" in record["args"].get("settings", {}):
                report.notes.append(f"call {record['seq']} ({label}: configure "
                                      f"{', '.join(record['args']['settings'])})")
                continue
            if "unrecorded" in record["args"] or "unrecorded" in record.get("out", {}):
                raise TraceError(f"call {record['seq']} ({record['fn']}) was not recorded "
                                 "completely; it cannot be replayed")
            library = opened.get(index)
            if library is None:
                copy = Path(scratch) / f"{index}-{os.path.basename(chosen[index])}"
                library = opened[index] = _Replayed(chosen[index], copy)
                if record["fn"] not in ("getAccApiVersion", "initialize"):
                    # traced after the library was loaded: make its handshake first
                    status = int(library.unchecked("initialize", trace.header.get("host_api",
                                                                         header.API_VERSION)))
                    report.notes.append(f"{label}: the trace starts after initialize(); "
                                          f"the replayer called it (status {status})")
            status, difference = _call(library, trace.blobs, record)
            report.calls += 1
            if status != record["ret"]:
                message = library.message() if status else ""
                difference = (f"returned {status} ({header.status_name(status)}), recorded "
                              f"{record['ret']} ({header.status_name(record['ret'])})"
                              + (f": {message}" if message else ""))
            if difference is not None:
                report.divergence = Divergence(record["seq"], record["fn"], label, difference)
                break
        for library in opened.values():
            library.executors.clear()
    return report
