"""The engine's worker threads: a pool for CPU work and one thread per
accelerator device, each fed by its own FIFO queue."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Worker"]


class Worker:
    """``threads`` daemon threads that take blocks from one queue, in order,
    and hand each to ``run(block, stream)``; ``stream`` names the worker."""

    def __init__(self, stream: str, threads: int, run: Callable[[Any, str], None]) -> None:
        self.stream = stream
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._run = run
        self._threads = [threading.Thread(target=self._loop, name=f"engine-{stream}-{index}",
                                          daemon=True) for index in range(threads)]
        for thread in self._threads:
            thread.start()

    def _loop(self) -> None:
        get, run, stream = self.queue.get, self._run, self.stream
        while True:
            block = get()
            if block is None:
                return
            run(block, stream)

    def stop(self) -> None:
        """Ends the threads once the queue before this call is drained."""
        for _ in self._threads:
            self.queue.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()
