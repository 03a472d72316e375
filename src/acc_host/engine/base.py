"""What both engines share: run contexts, operation blocks, argument
checks, and the marker telling code that it runs inside an operation."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ..errors import DeletedVarError, EngineError
from .var import Var

__all__ = ["Engine", "RunContext", "Operator", "OpBlock", "SyncFn", "AsyncFn", "Callback",
           "in_operation", "normalize_vars", "check_live", "operation_state"]


class RunContext(NamedTuple):
    """What a pushed function learns when it runs: the context it was
    pushed for and the stream (the worker) it runs on. (A named tuple: one
    is made per operation run, and a frozen dataclass costs three times as
    much to make.)"""

    ctx: Any
    stream: str


Callback = Callable[..., None]  # on_complete(exception=None)
SyncFn = Callable[[RunContext], None]
AsyncFn = Callable[[RunContext, Callback], None]

class _OperationState(threading.local):
    """A thread's record of the operations it runs; ``depth`` reads 0 on a
    thread that never ran one (a class default: a missing attribute of a
    thread-local costs an exception inside getattr, about 0.35 us)."""

    depth = 0


_local = _OperationState()


def in_operation() -> bool:
    """Whether the calling thread is running a pushed function (whose
    dependencies the engine already satisfied)."""
    return _local.depth > 0


def operation_state() -> threading.local:
    """The calling thread's record of the operations it runs: ``depth``
    (0 on a thread that never ran one) is what in_operation reads, for an
    engine that marks an operation it runs inline without the two calls
    below."""
    return _local


def enter_operation() -> None:
    _local.depth += 1


def leave_operation() -> None:
    _local.depth -= 1


def normalize_vars(const_vars: Sequence[Var], mutate_vars: Sequence[Var]
                   ) -> tuple[tuple[Var, ...], tuple[Var, ...]]:
    """Deduplicated vars; a var given both as const and as mutate counts as
    mutate (as in MXNet). Raises for deleted vars and non-vars."""
    mutate = tuple(dict.fromkeys(mutate_vars))
    const = tuple(var for var in dict.fromkeys(const_vars) if var not in mutate)
    for var in (*const, *mutate):
        if not isinstance(var, Var):
            raise EngineError(f"dependencies must be engine vars (engine.new_var()), got "
                              f"{type(var).__name__}")
        check_live(var)
    return const, mutate


def check_live(var: Var) -> None:
    """Raises DeletedVarError for a var deleted with push_delete()."""
    if var.deleted:
        raise DeletedVarError(f"{var!r} was deleted with push_delete(); it cannot be used")


class Operator:
    """A pre-created operation (new_operator): an async function and its
    dependencies, checked once, pushed many times."""

    __slots__ = ("fn", "const_vars", "mutate_vars", "deleted")

    def __init__(self, fn: AsyncFn, const_vars: Sequence[Var], mutate_vars: Sequence[Var]
                 ) -> None:
        if not callable(fn):
            raise EngineError(f"new_operator() needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.const_vars, self.mutate_vars = normalize_vars(const_vars, mutate_vars)
        self.deleted = False


class OpBlock:
    """One pushed operation on its way through the engine. ``pending`` counts
    the dependencies it still waits for; ``counts`` is False for markers
    that must not bump versions (waits, deletions)."""

    __slots__ = ("fn", "is_async", "ctx", "const_vars", "mutate_vars", "pending", "counts",
                 "marker", "done")

    def __init__(self, fn: Any, is_async: bool, ctx: Any, const_vars: tuple[Var, ...],
                 mutate_vars: tuple[Var, ...], counts: bool = True,
                 marker: threading.Event | None = None) -> None:
        self.fn = fn
        self.is_async = is_async
        self.ctx = ctx
        self.const_vars = const_vars
        self.mutate_vars = mutate_vars
        self.pending = 0
        self.counts = counts
        self.marker = marker  # a wait marker: set instead of running anything
        self.done = False


class Engine(ABC):
    """The engine interface (MXNet's Engine): see docs/engine.md."""

    name = "Engine"

    def new_var(self) -> Var:
        return Var()

    def push_sync(self, fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                  mutate_vars: Sequence[Var] = ()) -> None:
        """Runs fn(run_ctx) once every earlier write to const_vars and every
        earlier read and write of mutate_vars has finished."""
        const, mutate = normalize_vars(const_vars, mutate_vars)
        self._push(OpBlock(fn, False, ctx, const, mutate))

    def push_sync_normalized(self, fn: SyncFn, ctx: Any, const_vars: tuple[Var, ...],
                             mutate_vars: tuple[Var, ...]) -> None:
        """push_sync for a caller that pushes the same dependencies many
        times: const_vars and mutate_vars are as :func:`normalize_vars`
        returned them (checked once), so they are not checked again."""
        self._push(OpBlock(fn, False, ctx, const_vars, mutate_vars))

    def push_sync_now(self, fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                      mutate_vars: Sequence[Var] = ()) -> None:
        """push_sync for short work that may run on the calling thread: an
        engine runs it there, at once, when it could start at once anyway
        (saving a hand-off to a worker); otherwise it is queued as usual."""
        if not self.run_now(fn, ctx, const_vars, mutate_vars):
            self.push_sync(fn, ctx, const_vars, mutate_vars)

    def run_now(self, fn: SyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                mutate_vars: Sequence[Var] = ()) -> bool:
        """Runs fn on the calling thread, as a pushed operation, if it can
        start at once (nothing pending on its vars); returns whether it ran.
        Lets a caller skip work that only a deferred run needs, such as a
        snapshot of its arguments."""
        return False

    def run_now_watching(self, fn: SyncFn, ctx: Any, watched: tuple[Var, ...],
                         mutate_vars: tuple[Var, ...]) -> bool:
        """run_now for a function that writes mutate_vars and reads only the
        versions of the watched vars, not what they hold (it checks that
        something it keeps is still current): it starts only when no write
        is running or queued on a watched var, so the versions it sees are
        final, but it does not hold them as reads while it runs. The vars
        are as :func:`normalize_vars` returned them (checked once by the
        caller)."""
        return False

    def run_inline(self, fn: SyncFn, ctx: Any, const_vars: tuple[Var, ...],
                   mutate_vars: tuple[Var, ...]) -> bool:
        """run_now for vars as :func:`normalize_vars` returns them (checked
        by the caller): fn runs on the calling thread, as a pushed operation
        reading const_vars and writing mutate_vars, when it can start at once
        (NaiveEngine: always); returns whether it ran. A failure is handled
        as the engine handles a pushed operation's (stored on the written
        vars by ThreadedEngine, raised by NaiveEngine). What an imperative
        call of small arrays takes instead of a hand-off to a worker."""
        return False

    def push_async(self, fn: AsyncFn, ctx: Any = None, const_vars: Sequence[Var] = (),
                   mutate_vars: Sequence[Var] = ()) -> None:
        """As push_sync, but fn(run_ctx, on_complete) finishes only when it
        calls on_complete() (or on_complete(exception) to fail)."""
        const, mutate = normalize_vars(const_vars, mutate_vars)
        self._push(OpBlock(fn, True, ctx, const, mutate))

    def new_operator(self, fn: AsyncFn, const_vars: Sequence[Var] = (),
                     mutate_vars: Sequence[Var] = ()) -> Operator:
        return Operator(fn, const_vars, mutate_vars)

    def push(self, op: Operator, ctx: Any = None) -> None:
        """Pushes a pre-created operator (as push_async)."""
        if not isinstance(op, Operator):
            raise EngineError(f"push() needs an operator from new_operator(), got "
                              f"{type(op).__name__}")
        if op.deleted:
            raise EngineError("push(): the operator was deleted with delete_operator()")
        for var in (*op.const_vars, *op.mutate_vars):
            if var.deleted:
                raise DeletedVarError(f"push(): {var!r} was deleted with push_delete()")
        self._push(OpBlock(op.fn, True, ctx, op.const_vars, op.mutate_vars))

    def delete_operator(self, op: Operator) -> None:
        """Forbids further pushes of op; pushes already made still run."""
        if not isinstance(op, Operator):
            raise EngineError(f"delete_operator() needs an operator, got {type(op).__name__}")
        op.deleted = True

    def push_delete(self, var: Var) -> None:
        """Deletes var after every operation pushed on it so far; any later
        push with it raises DeletedVarError."""
        _, mutate = normalize_vars((), (var,))
        var.deleted = True
        self._push(OpBlock(_nothing, False, None, (), mutate, counts=False))

    @abstractmethod
    def _push(self, block: OpBlock) -> None:
        """Schedules a checked block."""

    @abstractmethod
    def wait_for_var(self, var: Var) -> None:
        """Blocks until every read and write of var pushed so far has
        finished; raises the failure stored on var (once)."""

    @abstractmethod
    def wait_to_read(self, var: Var) -> None:
        """Blocks until every write of var pushed so far has finished;
        raises the failure stored on var (once)."""

    @abstractmethod
    def wait_for_all(self) -> None:
        """Blocks until everything pushed has finished; raises the first
        failure not delivered yet and clears every stored failure."""

    def never_raised(self) -> list[BaseException]:
        """After everything pushed has finished: the stored failures that no
        wait has raised (through any var of their operation), cleared like
        every stored failure. What is left to report at exit."""
        self.wait_for_all()
        return []

    @abstractmethod
    def drain(self) -> None:
        """Blocks until everything pushed has finished, leaving failures
        stored for the waits that will report them."""

    @abstractmethod
    def shutdown(self) -> None:
        """Waits for pending work and stops the engine's threads."""

    def stats(self) -> dict[str, int]:
        return {}


def _nothing(_run_ctx: RunContext) -> None:
    """The body of a deletion: the var goes when nothing references it."""


def check_waitable(var: Var, what: str) -> None:
    if not isinstance(var, Var):
        raise EngineError(f"{what}() needs an engine var, got {type(var).__name__}")
    if in_operation():
        raise EngineError(f"{what}() inside a pushed function would deadlock: a pushed "
                          "function must declare what it reads and writes instead")
