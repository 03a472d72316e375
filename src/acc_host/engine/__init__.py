"""The dependency engine (``mx.engine``), after MXNet's.

Functions are pushed with the vars they read (``const_vars``) and write
(``mutate_vars``); the engine runs them so that writes to a var happen in
push order, every read sees the last write pushed before it, and
independent functions may run in parallel. ``MXNET_ENGINE_TYPE`` picks the
engine when it is first used: ``ThreadedEngine`` (the default; also
``ThreadedEnginePerDevice`` and ``ThreadedEnginePooled``) or ``NaiveEngine``
(everything runs at push, in the caller's thread). See docs/engine.md.
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from ..errors import EngineError
from .base import AsyncFn, Engine, Operator, RunContext, SyncFn, in_operation
from .blas_threads import apply_policy as apply_blas_policy
from .naive import NaiveEngine
from .threaded import ThreadedEngine
from .var import Var, WriteWatch

__all__ = ["Engine", "NaiveEngine", "ThreadedEngine", "Var", "WriteWatch", "RunContext",
           "Operator", "get", "engine_type", "set_engine_type", "new_var", "push_sync",
           "push_async", "push_delete", "wait_for_var", "wait_to_read", "wait_for_all", "drain",
           "new_operator", "push", "delete_operator", "in_operation"]

_THREADED_NAMES = ("ThreadedEngine", "ThreadedEnginePerDevice", "ThreadedEnginePooled")
_current: Engine | None = None
_lock = threading.Lock()
_exit_hook = False


def _cpu_threads() -> int:
    text = os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise EngineError(f"MXNET_CPU_WORKER_NTHREADS={text!r}: expected a positive integer")
    return count


def _create(kind: str) -> Engine:
    apply_blas_policy()  # the CPU path's BLAS threads, before any CPU work runs
    if kind == "NaiveEngine":
        return NaiveEngine()
    if kind in _THREADED_NAMES:
        return ThreadedEngine(_cpu_threads())
    raise EngineError(f"unknown engine type {kind!r} (MXNET_ENGINE_TYPE): expected "
                      f"NaiveEngine or {', '.join(_THREADED_NAMES)}")


def get() -> Engine:
    """The engine in use, created on first use from MXNET_ENGINE_TYPE."""
    engine = _current
    if engine is not None:
        return engine
    return _install(os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEngine"))


def _install(kind: str) -> Engine:
    global _current, _exit_hook
    with _lock:
        if _current is None or _current.name != _canonical(kind):
            engine = _create(kind)
            previous, _current = _current, engine
            if previous is not None:
                previous.shutdown()
        if not _exit_hook:
            atexit.register(shutdown_at_exit)
            _exit_hook = True
        return _current


def _canonical(kind: str) -> str:
    return "ThreadedEngine" if kind in _THREADED_NAMES else kind


def engine_type() -> str:
    """"NaiveEngine" or "ThreadedEngine"."""
    return get().name


def set_engine_type(kind: str) -> Engine:
    """Switches engines (for tests and debugging): waits for everything
    pushed to the current engine, raising its first undelivered failure,
    then replaces it."""
    wait_for_all()
    return _install(kind)


def shutdown_at_exit() -> None:
    """Waits for pending work at interpreter exit; undelivered failures
    are reported as warnings, not raised."""
    engine = _current
    if engine is None or in_operation():
        return
    try:
        failures = engine.never_raised()
    except BaseException as error:  # nobody is left to catch it
        failures = [error]
    if failures:
        warnings.warn(f"an engine operation failed and no wait reported it: {failures[0]!r}",
                      RuntimeWarning, stacklevel=1)


# ---- MXNet's Engine API, on the current engine ----------------------------------------


def new_var() -> Var:
    return get().new_var()


def push_sync(fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
              mutate_vars: Sequence[Var] = ()) -> None:
    get().push_sync(fn, ctx, const_vars, mutate_vars)


def push_async(fn: AsyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
               mutate_vars: Sequence[Var] = ()) -> None:
    get().push_async(fn, ctx, const_vars, mutate_vars)


def push_delete(var: Var) -> None:
    get().push_delete(var)


def wait_for_var(var: Var) -> None:
    get().wait_for_var(var)


def wait_to_read(var: Var) -> None:
    get().wait_to_read(var)


def wait_for_all() -> None:
    get().wait_for_all()


def drain() -> None:
    """Waits for everything pushed without reporting failures (for
    counters and caches that must see finished work)."""
    get().drain()


def new_operator(fn: AsyncFn, const_vars: Sequence[Var] = (),
                 mutate_vars: Sequence[Var] = ()) -> Operator:
    return get().new_operator(fn, const_vars, mutate_vars)


def push(op: Operator, ctx: Any = None) -> None:
    get().push(op, ctx)


def delete_operator(op: Operator) -> None:
    get().delete_operator(op)
