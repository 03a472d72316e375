"""Releases that must not wait: unloadModel, mx_free and executor releases
run by the garbage collector.

A finalizer runs on whatever thread the collector happens to run on, in
the middle of that thread's work. Every call into a plugin holds its
device's lock, so a finalizer that simply took the lock would make that
thread wait for another thread's call on the device, for as long as it
lasts (a slow infer(): seconds), though the thread never touched the
device. So a release asked for by the collector runs at once only when the
device's lock is free (or already held by the thread); otherwise it is
queued for a helper thread of the library's, which waits for the lock
instead. Explicit releases (``close()``, ``free()``) wait as before: their
caller expects the release done when they return.

The helper thread starts when something is queued and ends once it has
had nothing to do for a few seconds; a queued release still pending when
the interpreter exits is reclaimed by the plugin's mx_releaseAll.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections import deque
from collections.abc import Callable
from typing import Protocol

__all__ = ["Releaser", "release_now"]

_IDLE_SECONDS = 5.0


class _Locks(Protocol):
    def __getitem__(self, dev_id: int, /) -> threading.RLock: ...


class Releaser:
    """The deferred releases of one library (``name``, for messages),
    whose device locks are ``locks``."""

    def __init__(self, name: str, locks: _Locks) -> None:
        self._name = name
        self._locks = locks
        self._queue: deque[tuple[int, Callable[[], object]]] = deque()
        # Reentrant: the collector may run a finalizer on a thread that is
        # inside release() already.
        self._ready = threading.Condition(threading.RLock())
        self._thread: threading.Thread | None = None
        self._running = 0

    def release(self, dev_id: int, function: Callable[[], object], wait: bool) -> None:
        """Runs function under device dev_id's lock: at once when wait is
        true or the lock can be had without waiting, else on the helper
        thread."""
        lock = self._locks[dev_id]
        if wait:
            with lock:
                function()
            return
        if lock.acquire(blocking=False):
            try:
                function()
            finally:
                lock.release()
            return
        with self._ready:
            self._queue.append((dev_id, function))
            thread = self._thread
            if thread is None or not thread.is_alive():  # not started, idle, or lost in fork()
                thread = threading.Thread(target=self._serve, daemon=True,
                                          name=f"acc-host releases ({self._name})")
                self._thread = thread
                thread.start()
            self._ready.notify()

    def pending(self) -> int:
        """Releases queued or running on the helper thread."""
        with self._ready:
            return len(self._queue) + self._running

    def flush(self, timeout: float | None = None) -> bool:
        """Waits until no release is queued or running; returns whether
        that happened within timeout seconds."""
        with self._ready:
            return self._ready.wait_for(lambda: not self._queue and not self._running, timeout)

    def _serve(self) -> None:
        while True:
            with self._ready:
                if not self._ready.wait_for(lambda: bool(self._queue), _IDLE_SECONDS):
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
                dev_id, function = self._queue.popleft()
                self._running += 1
            try:
                with self._locks[dev_id]:
                    function()
            except Exception as error:  # no caller to report to
                warnings.warn(f"{self._name}: a release on device {dev_id} failed: {error}",
                              RuntimeWarning, stacklevel=1)
            finally:
                with self._ready:
                    self._running -= 1
                    self._ready.notify_all()


def release_now(finalizer: weakref.finalize) -> None:
    """Runs a release finalizer now, waiting for its device (what close()
    and free() do); nothing if it ran already. The finalizer's function
    takes ``wait`` as a keyword."""
    detached = finalizer.detach()
    if detached is not None:
        _, function, args, kwargs = detached
        function(*args, **{**kwargs, "wait": True})
