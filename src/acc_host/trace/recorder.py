"""Recording the host's ABI calls (see :mod:`acc_host.trace`).

While a :class:`Tracer` is active, every loaded :class:`AccLibrary` calls its
plugin through a :class:`TracedLib`: a stand-in for the cffi library whose
functions encode their arguments (:mod:`.encode`), call the plugin, time the
call and append one record to the trace. Untraced, the host calls cffi
directly and pays nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..abi import header
from ..errors import TraceError
from . import encode
from .format import FORMAT, VERSION, BlobStore

__all__ = ["Tracer", "TracedLib", "current", "on_change", "start", "stop"]

_lock = threading.Lock()
_current: Tracer | None = None
# Called with the new tracer (None when tracing stops): the registry of
# loaded libraries hands it to each of them.
_listeners: list[Callable[[Tracer | None], None]] = []


class Tracer:
    """Writes one trace file (and its blobs)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self._stream = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (kept open)
        except OSError as error:
            raise TraceError(f"cannot write the trace {self.path}: {error}") from None
        self.blobs = BlobStore(self.path)
        self._lock = threading.Lock()
        self._seq = 0
        self._libraries: dict[str, int] = {}
        self._origin = time.perf_counter_ns()
        self._write({"format": FORMAT, "version": VERSION, "host_api": header.API_VERSION,
                     "pid": os.getpid(), "time": time.time()})

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"))
        with self._lock:
            if self._stream.closed:
                return
            self._stream.write(line + "\n")
            self._stream.flush()

    def wrap(self, raw: Any, path: str, name: str | None,
             last_error: Callable[[], str]) -> TracedLib:
        """The stand-in through which a library (the one at path, whose
        cffi library is raw) calls its plugin while this trace records."""
        return TracedLib(raw, self, path, name, last_error)

    def library_index(self, path: str, name: str | None = None) -> int:
        """The number of the library at path in this trace (recording it,
        with its accelerator name when known, the first time)."""
        with self._lock:
            index = self._libraries.get(path)
            if index is not None:
                return index
            index = self._libraries[path] = len(self._libraries)
        record: dict[str, Any] = {"kind": "library", "lib": index, "path": path}
        if name is not None:
            record["name"] = name
        self._write(record)
        return index

    def now(self) -> int:
        return time.perf_counter_ns() - self._origin

    def call(self, lib: int, fn: str, args: dict[str, Any], ret: int, out: dict[str, Any],
             error: str, start: int, end: int) -> None:
        with self._lock:
            seq = self._seq
            self._seq += 1
        record: dict[str, Any] = {"kind": "call", "seq": seq, "lib": lib, "fn": fn,
                                  "args": args, "ret": ret, "out": out, "t": start,
                                  "dur": end - start, "thread": threading.current_thread().name}
        if error:
            record["error"] = error
        self._write(record)

    def span(self, cat: str, name: str, start: int, end: int, device: str = "cpu(0)") -> None:
        self._write({"kind": "span", "cat": cat, "name": name, "t": start, "dur": end - start,
                     "thread": threading.current_thread().name, "device": device})

    def close(self) -> None:
        with self._lock:
            self._stream.close()


class TracedLib:
    """The cffi library of one plugin, recording each ABI function it calls."""

    def __init__(self, raw: Any, tracer: Tracer, path: str, name: str | None,
                 last_error: Callable[[], str]) -> None:
        self._raw = raw
        self._tracer = tracer
        self._index = tracer.library_index(path, name)
        self._last_error = last_error  # the plugin's message for a failed call

    def __getattr__(self, name: str) -> Any:
        if name == "executor_forward":  # an MXAccExecutor's forward, not a library symbol
            def function(handle: Any, *args: Any) -> Any:
                return handle.forward(handle, *args)
        else:
            function = getattr(self._raw, name)
        if name not in encode.ENCODERS:
            return function
        wrapped = self._wrap(name, function)
        setattr(self, name, wrapped)  # later lookups skip __getattr__
        return wrapped

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        before, after = encode.ENCODERS[name]
        tracer, index = self._tracer, self._index

        def traced(*args: Any) -> Any:
            try:
                recorded = before(tracer.blobs, *args)
            except Exception as error:  # never let tracing break the call itself
                recorded = {"unrecorded": f"{type(error).__name__}: {error}"}
            start = tracer.now()
            result = function(*args)
            end = tracer.now()
            status = int(result) if isinstance(result, int) else 0
            try:
                out = after(tracer.blobs, status, *args)
            except Exception as error:
                out = {"unrecorded": f"{type(error).__name__}: {error}"}
            error_text = self._last_error() if status != header.OK and name in encode.STATUS_CALLS \
                else ""
            tracer.call(index, name, recorded, status, out, error_text, start, end)
            return result

        traced.__name__ = name
        return traced


def current() -> Tracer | None:
    """The active tracer, or None."""
    return _current


def on_change(listener: Callable[[Tracer | None], None]) -> None:
    """Calls listener with the new tracer whenever a trace starts, and with
    None when it stops."""
    _listeners.append(listener)


def start(path: str | os.PathLike[str]) -> Tracer:
    """Starts recording every ABI call to path (replacing an active trace):
    libraries loaded now and later are traced; models loaded before this
    call keep calling infer() untraced."""
    global _current

    tracer = Tracer(path)
    with _lock:
        previous, _current = _current, tracer
    for listener in _listeners:
        listener(tracer)
    if previous is not None:
        previous.close()
    return tracer


def stop() -> Path | None:
    """Stops recording; returns the trace's path (None if none was active)."""
    global _current

    with _lock:
        tracer, _current = _current, None
    if tracer is None:
        return None
    for listener in _listeners:
        listener(None)
    tracer.close()
    return tracer.path
