"""Engine variables and their dependency queues (MXNet's versioned vars).

A :class:`Var` names a piece of state that operations read (const) or
write (mutate). Each var keeps a FIFO of the operations waiting for it:
consecutive reads run together, a write waits for every earlier read and
write, and reads wait for the write before them. These methods only keep
the books; the engine calls them under its own lock.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["Var", "WriteWatch", "grantable_now"]


# The queue of a var no block ever waited for: empty, and never appended to.
_NO_PENDING: Any = ()


class Var:
    """A dependency variable. ``version`` counts the writes that finished
    on it; ``exception`` holds the failure of the last failed operation
    that wrote it, until a wait delivers it."""

    __slots__ = ("_pending", "_running_reads", "_writing", "version", "exception", "deleted",
                 "_watches", "__weakref__")

    def __init__(self) -> None:
        # (block, is_write): a deque from the first block queued (most vars,
        # an imperative call's result among them, never queue one).
        self._pending: deque[tuple[Any, bool]] = _NO_PENDING  # type: ignore[assignment]
        self._running_reads = 0
        self._writing = False
        self.version = 0
        # References to the WriteWatches on this var (replaced, never changed
        # in place, so that a write iterating them needs no lock).
        self._watches: tuple[weakref.ref[WriteWatch], ...] = ()
        self.exception: BaseException | None = None
        self.deleted = False

    # ---- granting ------------------------------------------------------------------

    def add_read(self, block: Any) -> bool:
        """Queues a read; True when it may start at once."""
        if not self._writing and not self._pending:
            self._running_reads += 1
            return True
        self._queue().append((block, False))
        return False

    def add_write(self, block: Any) -> bool:
        """Queues a write; True when it may start at once."""
        if not self._writing and not self._running_reads and not self._pending:
            self._writing = True
            return True
        self._queue().append((block, True))
        return False

    def _queue(self) -> deque[tuple[Any, bool]]:
        """The queue of waiting blocks, made at the first one."""
        pending = self._pending
        if pending is _NO_PENDING:
            pending = self._pending = deque()
        return pending

    def finish_read(self) -> list[Any]:
        """Ends one read; returns the blocks granted by it (a waiting write)."""
        self._running_reads -= 1
        if self._running_reads == 0 and self._pending:
            block, _ = self._pending.popleft()  # reads never wait behind reads
            self._writing = True
            return [block]
        return []

    def finish_write(self, counts: bool) -> list[Any]:
        """Ends the running write (``counts``: it bumps the version);
        returns the blocks granted: the reads that follow it, or the next
        write."""
        self._writing = False
        if counts:
            self.bump()
        granted = []
        pending = self._pending
        while pending and not pending[0][1]:
            granted.append(pending.popleft()[0])
            self._running_reads += 1
        if not granted and pending:
            granted.append(pending.popleft()[0])
            self._writing = True
        return granted

    def bump(self) -> None:
        """A write finished: the version moves, then the watches learn it
        (in that order, see WriteWatch)."""
        self.version += 1
        for ref in self._watches:
            watch = ref()
            if watch is not None:
                watch.written = True

    # ---- state -------------------------------------------------------------------------

    @property
    def write_pending(self) -> bool:
        """Whether a write is running or queued (reads queue only behind one)."""
        return self._writing or bool(self._pending)

    @property
    def idle(self) -> bool:
        """Whether no operation is running on or waiting for the var."""
        return not self._writing and not self._running_reads and not self._pending

    def __repr__(self) -> str:
        state = "deleted" if self.deleted else "failed" if self.exception else "ok"
        return (f"<Var v{self.version} {state} reads={self._running_reads} "
                f"writing={self._writing} queued={len(self._pending)}>")


def grantable_now(unwritten: tuple[Var, ...], mutate: tuple[Var, ...]) -> bool:
    """Whether an operation writing mutate could start at once with no
    write running or queued on the unwritten vars (those it reads, or
    whose versions it checks) and nothing failed on any of them. Under the
    engine's lock."""
    for var in unwritten:
        if var._writing or var._pending or var.exception is not None:
            return False
    for var in mutate:
        if var._writing or var._running_reads or var._pending or var.exception is not None:
            return False
    return True


class WriteWatch:
    """Tells in O(1) whether any of a set of vars may have been written: a
    write to any of them sets ``written`` (after moving its version). A
    reader that keeps the versions it last saw clears ``written`` *before*
    comparing them, so a write during the comparison is either seen by it or
    sets the flag again. Created with ``written`` set. Held by its owner;
    the vars keep only weak references."""

    __slots__ = ("written", "__weakref__")

    def __init__(self, variables: Iterable[Var]) -> None:
        self.written = True
        ref = weakref.ref(self)
        for var in variables:
            var._watches = (*(r for r in var._watches if r() is not None), ref)
