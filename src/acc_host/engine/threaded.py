"""ThreadedEngine: operations run on worker threads as soon as their
dependencies allow.

Each push queues the operation on the FIFO of every var it touches (see
:mod:`acc_host.engine.var`); when its last dependency is granted it goes to
the worker of its context: the CPU pool (``MXNET_CPU_WORKER_NTHREADS``
threads, default 1) or the one thread of its accelerator device, so one
device's calls stay in push order while devices and the CPU overlap (cffi
releases the GIL during plugin calls).

A failing operation stores its exception on the vars it mutates; an
operation that touches a failed var is skipped and inherits the failure;
waits deliver it (once per var), ``wait_for_all`` delivers the first one
and clears them all.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import EngineError
from .base import (
    Engine,
    OpBlock,
    RunContext,
    SyncFn,
    check_waitable,
    enter_operation,
    in_operation,
    leave_operation,
    normalize_vars,
    operation_state,
)
from .var import Var, grantable_now
from .workers import Worker

__all__ = ["ThreadedEngine"]

_local = operation_state()

_LOCAL = operation_state()  # the thread-local record in_operation reads

_HELP_ROUNDS = 8  # queued blocks a waiter runs before it waits behind a marker


class ThreadedEngine(Engine):
    name = "ThreadedEngine"

    def __init__(self, cpu_threads: int = 1) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._idle_waiters = 0  # threads in _idle.wait(): the last finish notifies them
        self._pending = 0
        self._pushed = 0
        self._failed: dict[Var, None] = {}      # vars holding an undelivered failure, in order
        self._orphans: list[BaseException] = []  # failures of operations that mutate nothing
        # Failures a wait raised while other vars still hold them (kept until
        # no var holds a failure; compared by identity): never_raised() skips them.
        self._delivered: list[BaseException] = []
        self._stopped = False
        self._cpu = Worker("cpu", cpu_threads, self._execute)
        self._devices: dict[tuple[int, int], Worker] = {}
        self._devices_lock = threading.Lock()
        self._workers: tuple[Worker, ...] = (self._cpu,)  # replaced, never changed in place
        self._caller_ctx = RunContext(None, "caller")  # run_now_watching's latest

    # ---- pushing ----------------------------------------------------------------------

    def _push(self, block: OpBlock) -> None:
        with self._lock:
            if self._stopped:
                raise EngineError("the engine was shut down")
            self._pending += 1
            self._pushed += 1
            waiting = 0
            for var in block.const_vars:
                if not var.add_read(block):
                    waiting += 1
            for var in block.mutate_vars:
                if not var.add_write(block):
                    waiting += 1
            block.pending = waiting
        if waiting == 0:
            self._dispatch((block,))

    def run_now(self, fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                mutate_vars: Sequence[Var] = ()) -> bool:
        if in_operation():
            return False
        const, mutate = normalize_vars(const_vars, mutate_vars)
        return self._run_granted(fn, ctx, const, mutate, const)

    def run_now_watching(self, fn: SyncFn, ctx: Any, watched: tuple[Var, ...],
                         mutate_vars: tuple[Var, ...]) -> bool:
        # The synchronous inference's grant (acc_host.runtime.direct_run), once per
        # forward: _run_granted, _admit and _finish inlined for an operation
        # that reads nothing, with no block made when nothing queued behind
        # it, and the RunContext of the latest ctx kept.
        local = _LOCAL
        if local.depth:
            return False
        run_ctx = self._caller_ctx
        if run_ctx.ctx is not ctx:
            run_ctx = self._caller_ctx = RunContext(ctx, "caller")
        # The lock taken and released by hand: `with` costs twice as much,
        # twice per forward.
        lock = self._lock
        lock.acquire()
        try:
            if self._stopped or ((self._pending or self._failed)
                                 and not grantable_now(watched, mutate_vars)):
                return False
            self._pending += 1
            self._pushed += 1
            # Granted as add_write would grant it: every var is idle (nothing
            # pending at all, or grantable_now checked each).
            for var in mutate_vars:
                var._writing = True
        finally:
            lock.release()
        failure: BaseException | None = None
        local.depth = 1
        try:
            fn(run_ctx)
        except BaseException as error:  # stored on the vars, raised at the next wait
            failure = error
        local.depth = 0
        lock.acquire()
        try:
            if failure is None and not self._idle_waiters:
                queued = False
                if self._pending != 1:  # else it is the only operation: nothing queued
                    for var in mutate_vars:
                        if var._pending:
                            queued = True
                            break
                if not queued:  # nothing queued behind it: finish_write without grants
                    for var in mutate_vars:
                        var._writing = False
                        if var._watches:
                            var.bump()
                        else:  # bump() without watches to tell
                            var.version += 1
                    self._pending -= 1
                    return True
        finally:
            lock.release()
        block = OpBlock(fn, False, ctx, (), mutate_vars)
        self._complete(block, failure)
        return True

    def run_inline(self, fn: SyncFn, ctx: Any, const_vars: tuple[Var, ...],
                   mutate_vars: tuple[Var, ...]) -> bool:
        # run_now_watching's grant with reads held: the reads and writes
        # granted as add_read and add_write would grant them (every var idle
        # of writes, or _admit checked each), finished without a block when
        # nothing queued behind them meanwhile.
        local = operation_state()
        if local.depth:
            return False
        with self._lock:
            if not self._admit(const_vars, mutate_vars):
                return False
            for var in const_vars:
                var._running_reads += 1
            for var in mutate_vars:
                var._writing = True
        failure: BaseException | None = None
        local.depth = 1
        try:
            fn(RunContext(ctx, "caller"))
        except BaseException as error:  # stored on the vars, raised at the next wait
            failure = error
        finally:
            local.depth = 0
        with self._lock:
            if failure is None and not self._idle_waiters and not any(
                    var._pending for var in const_vars) and not any(
                    var._pending for var in mutate_vars):
                for var in const_vars:
                    var._running_reads -= 1
                for var in mutate_vars:
                    var._writing = False
                    if var._watches:
                        var.bump()
                    else:  # bump() without watches to tell
                        var.version += 1
                self._pending -= 1
                return True
        self._complete(OpBlock(fn, False, ctx, const_vars, mutate_vars), failure)
        return True

    def _run_granted(self, fn: SyncFn, ctx: Any, const: tuple[Var, ...],
                     mutate: tuple[Var, ...], unwritten: tuple[Var, ...]) -> bool:
        """Runs fn on the calling thread, reading const and writing mutate,
        if it can start at once: no write running or queued on the
        unwritten vars (const, or vars whose versions alone fn reads),
        nothing at all on mutate, no failure on either; granted exactly as
        _push would. Returns whether it ran."""
        with self._lock:
            if not self._admit(unwritten, mutate):
                return False
            block = OpBlock(fn, False, ctx, const, mutate)
            for var in const:
                var.add_read(block)
            for var in mutate:
                var.add_write(block)
        self._execute(block, "caller")
        return True

    def _admit(self, unwritten: tuple[Var, ...], mutate: tuple[Var, ...]) -> bool:
        """Under the lock: whether an operation writing mutate, with no write
        running or queued on the unwritten vars, may start at once on the
        calling thread; if so it is counted as pending (the caller grants
        the vars)."""
        if self._stopped:
            return False
        # With nothing pending and no failure stored, no var has an
        # operation running or queued, or a failure: nothing to check.
        if (self._pending or self._failed) and not grantable_now(unwritten, mutate):
            return False
        self._pending += 1
        self._pushed += 1
        return True

    def _worker(self, ctx: Any) -> Worker:
        library = getattr(ctx, "library", None)
        if library is None:
            return self._cpu
        key = (id(library), ctx.device_id)
        worker = self._devices.get(key)
        if worker is None:
            with self._devices_lock:
                worker = self._devices.get(key)
                if worker is None:
                    worker = self._devices[key] = Worker(str(ctx), 1, self._execute)
                    self._workers = (*self._workers, worker)
        return worker

    def _dispatch(self, blocks: Iterable[OpBlock]) -> None:
        """Sends ready blocks to their workers; wait markers and blocks that
        inherit a failure finish here without running."""
        ready = deque(blocks)
        while ready:
            block = ready.popleft()
            if block.marker is not None:
                block.marker.set()
                ready.extend(self._finish(block, None))
                continue
            # Failures sit on vars only while _failed lists them.
            failure = _inherited_failure(block) if self._failed else None
            if failure is not None:
                ready.extend(self._finish(block, failure))
                continue
            self._worker(block.ctx).put(block)

    # ---- running ------------------------------------------------------------------------

    def _execute(self, block: OpBlock, stream: str) -> None:
        run_ctx = RunContext(block.ctx, stream)
        if block.is_async:
            self._execute_async(block, run_ctx)
            return
        failure: BaseException | None = None
        enter_operation()
        try:
            block.fn(run_ctx)
        except BaseException as error:  # stored on the vars, raised at the next wait
            failure = error
        finally:
            leave_operation()
        self._complete(block, failure)

    def _execute_async(self, block: OpBlock, run_ctx: RunContext) -> None:
        def on_complete(exception: BaseException | None = None) -> None:
            self._complete(block, exception)

        enter_operation()
        try:
            block.fn(run_ctx, on_complete)
        except BaseException as error:
            if not block.done:
                self._complete(block, error)
        finally:
            leave_operation()

    def _complete(self, block: OpBlock, failure: BaseException | None) -> None:
        ready = self._finish(block, failure)
        if ready:
            self._dispatch(ready)

    def _finish(self, block: OpBlock, failure: BaseException | None) -> list[OpBlock]:
        """Releases block's vars; returns the blocks that became ready."""
        ready: list[OpBlock] = []
        with self._lock:
            if block.done:
                raise EngineError("on_complete() was called twice for one operation")
            block.done = True
            # The function's closure may hold arrays and device buffers: they
            # go with their last user, not with the block, which an idle
            # worker keeps until it takes the next.
            block.fn = None
            for var in block.const_vars:
                for granted in var.finish_read():
                    granted.pending -= 1
                    if granted.pending == 0:
                        ready.append(granted)
            counts = block.counts and failure is None
            for var in block.mutate_vars:
                if failure is not None:
                    var.exception = failure
                    self._failed[var] = None
                for granted in var.finish_write(counts):
                    granted.pending -= 1
                    if granted.pending == 0:
                        ready.append(granted)
            if failure is not None and not block.mutate_vars:
                self._orphans.append(failure)
            self._pending -= 1
            if self._pending == 0 and self._idle_waiters:
                self._idle.notify_all()
        return ready

    # ---- waiting ------------------------------------------------------------------------

    def _wait_marker(self, var: Var, write: bool) -> None:
        # First run what is queued on the waiting thread (see Worker.help):
        # in the common "push, then wait" pattern that finishes the var's
        # operations without a marker. A few rounds at most, so that pushes
        # from other threads cannot keep the waiter busy; then a marker
        # orders the wait after everything pushed so far.
        for _ in range(_HELP_ROUNDS):
            if not (not var.idle if write else var.write_pending) or not self._help():
                break
        with self._lock:
            busy = not var.idle if write else var.write_pending
        if busy:
            marker = threading.Event()
            block = OpBlock(None, False, None, () if write else (var,), (var,) if write else (),
                            counts=False, marker=marker)
            self._push(block)
            while not marker.is_set():
                if not self._help():
                    marker.wait()
        self._deliver(var)

    def _help(self) -> bool:
        """Runs one queued block on the waiting thread when a worker has one
        and no free thread is already on it (see Worker.help); returns
        whether it did."""
        for worker in self._workers:
            if worker.help():
                return True
        return False

    def _deliver(self, var: Var) -> None:
        if var.exception is None:  # set only under the lock, by a failing operation
            return
        with self._lock:
            failure = var.exception
            if failure is None:
                return
            var.exception = None
            self._failed.pop(var, None)
            if self._failed:
                self._delivered.append(failure)
            else:
                self._delivered.clear()
        raise failure

    def wait_for_var(self, var: Var) -> None:
        check_waitable(var, "wait_for_var")
        # Nothing on the var and no failure: done, without the lock (what this
        # thread pushed set these flags under the lock before returning).
        if var._writing or var._running_reads or var._pending or var.exception is not None:
            self._wait_marker(var, write=True)

    def wait_to_read(self, var: Var) -> None:
        if type(var) is not Var or _local.depth > 0:  # check_waitable's cases
            check_waitable(var, "wait_to_read")
        if var._writing or var._pending or var.exception is not None:
            self._wait_marker(var, write=False)

    def wait_for_all(self) -> None:
        if in_operation():
            raise EngineError("wait_for_all() inside a pushed function would deadlock")
        self.drain()
        failures = self._take_failures(include_delivered=True)
        if failures:
            raise failures[0]

    def never_raised(self) -> list[BaseException]:
        self.drain()
        return self._take_failures(include_delivered=False)

    def _take_failures(self, include_delivered: bool) -> list[BaseException]:
        """The stored failures (those a wait already raised through another
        var of their operation too, or not), cleared."""
        with self._lock:
            failures = [var.exception for var in self._failed if var.exception is not None
                        and (include_delivered
                             or not any(var.exception is seen for seen in self._delivered))]
            failures += self._orphans
            for var in self._failed:
                var.exception = None
            self._failed.clear()
            self._delivered.clear()
            self._orphans.clear()
        return failures

    def drain(self) -> None:
        if in_operation():
            raise EngineError("waiting for all operations inside a pushed function would "
                              "deadlock")
        while True:
            with self._idle:
                if not self._pending:
                    return
            if not self._help():
                with self._idle:
                    if self._pending:
                        self._wait_idle()

    def _wait_idle(self) -> None:
        """_idle.wait(), counted (the caller holds the lock)."""
        self._idle_waiters += 1
        try:
            self._idle.wait()
        finally:
            self._idle_waiters -= 1

    # ---- lifetime ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Waits for everything pushed, then stops the worker threads; the
        engine refuses pushes afterwards. Undelivered failures are dropped."""
        with self._idle:
            while self._pending:
                self._wait_idle()
            self._stopped = True
        self._cpu.stop()
        with self._devices_lock:
            for worker in self._devices.values():
                worker.stop()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"pushed": self._pushed, "pending": self._pending,
                    "device_workers": len(self._devices)}


def _inherited_failure(block: OpBlock) -> BaseException | None:
    for var in block.const_vars:
        if var.exception is not None:
            return var.exception
    for var in block.mutate_vars:
        if var.exception is not None:
            return var.exception
    return None

