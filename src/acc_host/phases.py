"""Where the time to a first inference goes: named phases, timed on request.

``with phases.recording() as times:`` collects the seconds spent in each
``with phases.phase(name):`` block run inside it (on this thread or task;
repeated phases add up) into the dict ``times``. A phase inside another one
counts as the outer one (constant folding binds executors while an ONNX
model is translated: that is translation), so the phases never overlap and
add up to the time they cover. Outside a recording a phase
costs one ContextVar read. ``acc-host run --json`` reports them (see
docs/performance.md, "First inference"); ``import_seconds`` is how long
``import acc_host`` took in this process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["phase", "recording", "import_seconds"]

_times: ContextVar[dict[str, float] | None] = ContextVar("acc_host_phases", default=None)
_inside: ContextVar[bool] = ContextVar("acc_host_phase_inside", default=False)

#: Seconds ``import acc_host`` took (set at the end of the package's import).
import_seconds: float | None = None


@contextmanager
def recording() -> Iterator[dict[str, float]]:
    """Collects the phases run inside it into the dict it gives."""
    times: dict[str, float] = {}
    token = _times.set(times)
    try:
        yield times
    finally:
        _times.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Adds the block's wall time to phase name of the active recording."""
    times = _times.get()
    if times is None or _inside.get():
        yield
        return
    token = _inside.set(True)
    start = time.perf_counter()
    try:
        yield
    finally:
        times[name] = times.get(name, 0.0) + time.perf_counter() - start
        _inside.reset(token)
