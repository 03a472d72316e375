"""Engine.run_inline: an operation run on the calling thread when the
engine can grant it at once (what a small imperative call takes instead of
a hand-off to a worker), and the waits' lock-free return when nothing is
pending. Engines are made directly, as in test_engine.py, so the process
engine is not disturbed."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from acc_host.engine import Engine, NaiveEngine, ThreadedEngine, Var
from acc_host.engine.base import in_operation
from acc_host.errors import EngineError


@pytest.fixture(params=["naive", "threaded"])
def eng(request: pytest.FixtureRequest) -> Iterator[Engine]:
    instance: Engine = NaiveEngine() if request.param == "naive" else ThreadedEngine(1)
    yield instance
    instance.shutdown()


def test_runs_on_the_caller_as_an_operation_and_bumps_what_it_writes(eng: Engine) -> None:
    read, written = Var(), Var()
    seen: list[tuple[str, bool]] = []

    def work(_run_ctx: object) -> None:
        seen.append((threading.current_thread().name, in_operation()))

    assert eng.run_inline(work, None, (read,), (written,))
    assert seen == [(threading.current_thread().name, True)]
    assert (read.version, written.version) == (0, 1)
    assert not in_operation()
    eng.wait_for_var(written)
    eng.wait_to_read(read)


def test_threaded_declines_while_a_write_is_pending_and_keeps_push_order() -> None:
    eng = ThreadedEngine(1)
    try:
        var, other = Var(), Var()
        gate = threading.Event()
        order: list[str] = []
        def pushed(_run_ctx: object) -> None:
            gate.wait(5)
            order.append("pushed")

        eng.push_sync(pushed, None, (), (var,))
        # A read of var must wait for the pushed write: not granted at once.
        assert not eng.run_inline(lambda _ctx: order.append("inline"), None, (var,), (other,))
        # Independent vars are granted while the write runs.
        assert eng.run_inline(lambda _ctx: order.append("independent"), None, (), (other,))
        gate.set()
        eng.wait_for_all()
        assert order == ["independent", "pushed"]
        assert (var.version, other.version) == (1, 1)
    finally:
        eng.shutdown()


def test_a_failure_is_stored_or_raised_as_for_a_push(eng: Engine) -> None:
    var = Var()

    def failing(_run_ctx: object) -> None:
        raise ValueError("inline failure")

    if isinstance(eng, NaiveEngine):
        with pytest.raises(ValueError, match="inline failure"):
            eng.run_inline(failing, None, (), (var,))
        return
    assert eng.run_inline(failing, None, (), (var,))  # ran; the failure is on the var
    with pytest.raises(ValueError, match="inline failure"):
        eng.wait_to_read(var)
    eng.wait_to_read(var)  # delivered once
    assert eng.run_inline(lambda _ctx: None, None, (), (var,))
    assert var.version == 1  # the failed write did not count


def test_a_pushed_operation_queued_behind_an_inline_one_runs_after_it() -> None:
    """A push that arrives while the inline operation runs (from another
    thread) is queued behind it and granted when it finishes."""
    eng = ThreadedEngine(1)
    try:
        var = Var()
        order: list[str] = []
        started, release = threading.Event(), threading.Event()

        def inline(_run_ctx: object) -> None:
            started.set()
            release.wait(5)
            order.append("inline")

        def pusher() -> None:
            started.wait(5)
            eng.push_sync(lambda _ctx: order.append("pushed"), None, (), (var,))
            release.set()

        thread = threading.Thread(target=pusher)
        thread.start()
        assert eng.run_inline(inline, None, (), (var,))
        thread.join()
        eng.wait_for_var(var)
        assert order == ["inline", "pushed"]
        assert var.version == 2
    finally:
        eng.shutdown()


def test_inside_an_operation_it_declines_and_waits_still_refuse() -> None:
    eng = ThreadedEngine(1)
    try:
        var, other = Var(), Var()
        answers: list[object] = []

        def outer(_run_ctx: object) -> None:
            answers.append(eng.run_inline(lambda _ctx: None, None, (), (other,)))
            try:
                eng.wait_to_read(other)  # nothing pending, still a deadlock risk: refused
            except EngineError as error:
                answers.append(error)

        eng.push_sync(outer, None, (), (var,))
        eng.wait_for_all()
        assert answers[0] is False and isinstance(answers[1], EngineError)
    finally:
        eng.shutdown()


def test_a_fresh_thread_is_not_in_an_operation_and_runs_inline(eng: Engine) -> None:
    """A thread that never ran an operation reads depth 0 (a class default
    of the thread-local record) and is granted at once."""
    seen: list[bool] = []

    def fresh() -> None:
        seen.append(in_operation())
        assert eng.run_inline(lambda _ctx: seen.append(in_operation()), None, (), (Var(),))
        seen.append(in_operation())

    thread = threading.Thread(target=fresh)
    thread.start()
    thread.join(10)
    assert seen == [False, True, False]
