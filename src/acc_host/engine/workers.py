"""The engine's worker threads: a pool for CPU work and one thread per
accelerator device, each fed by its own FIFO queue.

A thread that waits for a result may also take work from a queue (see
:meth:`Worker.help`): when the worker's threads are all asleep, the waiter
runs the next block itself instead of waking a thread and sleeping until it
is done. That saves two thread hand-offs (tens of microseconds each on an
idle machine) on the common "forward, then read the output" pattern. Order
is kept: a worker's blocks still start in queue order, and never more of
them at once than the worker has threads.

For the same reason a push does not always wake a thread. A worker that ran
a block less than ``LINGER`` seconds ago is *lingering*: its idle threads
sleep for at most ``POLL`` seconds at a time and look at the queue when they
wake, so a push finds them without a notify, and a caller that waits for the
result usually runs the block itself before they look. Waking a thread that
would then find its block taken costs more than the block on small models:
the woken thread takes the GIL (cffi releases it during every plugin call)
and hands it back. Work nobody waits for still starts within ``POLL``; a
worker idle for longer than ``LINGER`` sleeps until a push notifies it, so
an idle process does not poll.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["LINGER", "POLL", "Worker"]

_STOP = object()
LINGER = 0.05  # seconds after its last block during which a worker polls
POLL = 0.001   # a lingering idle thread's longest sleep


class Worker:
    """``threads`` daemon threads that take blocks from one queue, in order,
    and hand each to ``run(block, stream)``; ``stream`` names the worker."""

    def __init__(self, stream: str, threads: int, run: Callable[[Any, str], None]) -> None:
        self.stream = stream
        self._run = run
        self._queue: deque[Any] = deque()
        # Entered directly except where a thread waits (the Condition's own
        # __enter__ is a Python frame, and put, help and _done run per block).
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._capacity = threads
        self._running = 0  # blocks started and not yet returned, by any thread
        self._asleep = 0   # threads waiting without a timeout: a push must notify
        self._last = 0.0   # time.monotonic() when a block last finished
        self._threads = [threading.Thread(target=self._loop, name=f"engine-{stream}-{index}",
                                          daemon=True) for index in range(threads)]
        for thread in self._threads:
            thread.start()

    def put(self, block: Any) -> None:
        with self._lock:  # the Condition's lock: notify() may be called under it
            self._queue.append(block)
            if self._asleep:
                self._ready.notify()

    def _take(self) -> Any:
        """The next block, once one is queued and a run slot is free."""
        with self._ready:
            while not self._queue or self._running >= self._capacity:
                if self._queue or time.monotonic() - self._last > LINGER:
                    # a full worker's _done() notifies; so does a push to a sleeper
                    self._asleep += 1
                    self._ready.wait()
                    self._asleep -= 1
                else:
                    self._ready.wait(POLL)
            block = self._queue.popleft()
            if block is not _STOP:
                self._running += 1
            return block

    def _done(self) -> None:
        with self._lock:
            self._running -= 1
            self._last = time.monotonic()
            if self._queue:
                self._ready.notify()

    def _loop(self) -> None:
        run, stream = self._run, self.stream
        while True:
            block = self._take()
            if block is _STOP:
                return
            try:
                run(block, stream)
            finally:
                self._done()

    def help(self) -> bool:
        """Runs the next queued block on the calling thread if a run slot is
        free; returns whether it ran one."""
        if not self._queue:  # read without the lock: a push that races it is another's
            return False
        with self._lock:
            if (not self._queue or self._running >= self._capacity
                    or self._queue[0] is _STOP):
                return False
            block = self._queue.popleft()
            self._running += 1
        try:
            self._run(block, self.stream)
        finally:
            self._done()
        return True

    def stop(self) -> None:
        """Ends the threads once the queue before this call is drained."""
        with self._ready:
            self._queue.extend([_STOP] * len(self._threads))
            self._last = 0.0
            self._ready.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
