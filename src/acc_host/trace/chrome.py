"""A trace as a timeline in the Chrome trace event format (open it in
chrome://tracing or https://ui.perfetto.dev).

One process row per device (``cpu_ref(0)``, ``mlu(1)``, ``cpu(0)`` for the
host's own operators), one thread row per host thread; each call or span is
a complete ("X") event whose category says what it was: ``compile``
(loadModel, accGetExecutor), ``copy`` (copyToAcc, copyFromAcc), ``infer``
(infer, an executor's forward), ``memory``, ``query`` (the rest), and
``cpu_op`` for operators the host ran itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .format import Trace, read_trace

__all__ = ["CATEGORIES", "chrome_events", "export_chrome"]

CATEGORIES = {"loadModel": "compile", "accGetExecutor": "compile", "copyToAcc": "copy",
              "copyFromAcc": "copy", "infer": "infer", "executor_forward": "infer",
              "mx_alloc": "memory", "mx_free": "memory", "mx_releaseAll": "memory",
              "unloadModel": "memory"}


def _device(record: dict[str, Any], names: dict[int, str]) -> str:
    args = record["args"]
    dev = args.get("dev")
    if dev is None:
        for key in ("dst", "src"):
            if isinstance(args.get(key), dict) and args[key]["dev"] >= 0:
                dev = args[key]["dev"]
    label = names.get(record["lib"], f"library {record['lib']}")
    return f"{label}({dev})" if dev is not None else label


def chrome_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace's calls and spans as Chrome trace events (times in µs)."""
    names = trace.library_names()
    model_devices: dict[str, str] = {}
    processes: dict[str, int] = {}
    threads: dict[str, int] = {}
    events: list[dict[str, Any]] = []
    for record in trace.records:
        if record["kind"] == "library":
            continue
        if record["kind"] == "span":
            device, name, category = record["device"], record["name"], record["cat"]
            details: dict[str, Any] = {}
        else:
            args = record["args"]
            model = args.get("model_id")
            if record["fn"] == "loadModel" and model:
                model_devices[model] = _device(record, names)
            device = model_devices.get(model, _device(record, names)) if model \
                else _device(record, names)
            name = record["fn"] + (f" {model}" if model else "")
            category = CATEGORIES.get(record["fn"], "query")
            details = {"seq": record["seq"], "status": record["ret"]}
            if "error" in record:
                details["error"] = record["error"]
            if record.get("out", {}).get("reasons"):  # supportedOpsReasons (ABI 1.1)
                details["declined"] = record["out"]["reasons"]
        pid = processes.setdefault(device, len(processes) + 1)
        tid = threads.setdefault(record["thread"], len(threads) + 1)
        events.append({"name": name, "cat": category, "ph": "X", "ts": record["t"] / 1000,
                       "dur": record["dur"] / 1000, "pid": pid, "tid": tid, "args": details})
    for device, pid in processes.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": device}})
        for thread, tid in threads.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": thread}})
    return events


def export_chrome(trace_path: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Writes the trace at trace_path as a Chrome trace JSON file at out."""
    events = chrome_events(read_trace(trace_path))
    target = Path(out)
    target.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}),
                      encoding="utf-8")
    return target
