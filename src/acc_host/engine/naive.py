"""NaiveEngine: every operation runs in the pushing thread, at push.

For debugging: a failure is raised by the push itself, with the call
site on the stack, and nothing is stored on the vars.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..errors import EngineError
from .base import (
    Engine,
    OpBlock,
    RunContext,
    SyncFn,
    check_waitable,
    enter_operation,
    leave_operation,
    operation_state,
)
from .var import Var

_local = operation_state()

__all__ = ["NaiveEngine"]


class NaiveEngine(Engine):
    name = "NaiveEngine"

    def __init__(self) -> None:
        # The RunContext of the latest inline run's context (a named tuple
        # costs a quarter of a microsecond to make, and it never changes).
        self._run_ctx = RunContext(None, "naive")

    def _push(self, block: OpBlock) -> None:
        run_ctx = RunContext(block.ctx, "naive")
        enter_operation()
        try:
            if block.is_async:
                _run_async(block, run_ctx)
            else:
                block.fn(run_ctx)
        finally:
            leave_operation()
        if block.counts:
            for var in block.mutate_vars:
                var.bump()

    def run_now(self, fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                mutate_vars: Sequence[Var] = ()) -> bool:
        self.push_sync(fn, ctx, const_vars, mutate_vars)
        return True

    def run_inline(self, fn: SyncFn, ctx: Any, const_vars: tuple[Var, ...],
                   mutate_vars: tuple[Var, ...]) -> bool:
        run_ctx = self._run_ctx
        if run_ctx.ctx is not ctx:
            run_ctx = self._run_ctx = RunContext(ctx, "naive")
        local = _local
        depth = local.depth
        local.depth = depth + 1
        try:
            fn(run_ctx)
        finally:
            local.depth = depth
        for var in mutate_vars:
            if var._watches:
                var.bump()
            else:  # bump() without watches to tell
                var.version += 1
        return True

    def run_now_watching(self, fn: SyncFn, ctx: Any, watched: tuple[Var, ...],
                         mutate_vars: tuple[Var, ...]) -> bool:
        # Nothing is ever pending: run_inline's grant, the watched vars
        # need no look.
        return self.run_inline(fn, ctx, (), mutate_vars)

    def wait_for_var(self, var: Var) -> None:
        check_waitable(var, "wait_for_var")

    def wait_to_read(self, var: Var) -> None:
        if type(var) is not Var or _local.depth > 0:  # check_waitable's cases
            check_waitable(var, "wait_to_read")

    def wait_for_all(self) -> None:
        """Nothing is ever pending."""

    def drain(self) -> None:
        """Nothing is ever pending."""

    def shutdown(self) -> None:
        """No threads to stop."""


def _run_async(block: OpBlock, run_ctx: RunContext) -> None:
    """Calls an async function and blocks until it calls back (possibly
    from another thread); a failure it reports is raised here."""
    finished = threading.Event()
    outcome: list[BaseException | None] = []

    def on_complete(exception: BaseException | None = None) -> None:
        if outcome:
            raise EngineError("on_complete() was called twice")
        outcome.append(exception)
        finished.set()

    block.fn(run_ctx, on_complete)
    finished.wait()
    if outcome[0] is not None:
        raise outcome[0]


