"""The engines' wait_to_read keeps check_waitable's refusals on its short
path: a wait inside a pushed function (which would deadlock) and a wait on
something that is not an engine var are EngineErrors, under each engine;
a wait outside an operation on a var with nothing pending returns."""

from __future__ import annotations

import pytest

import acc_host as mx
from acc_host import engine
from acc_host.errors import EngineError


@pytest.mark.usefixtures("engine_kind")
def test_a_wait_inside_an_operation_is_refused() -> None:
    watched, written = engine.new_var(), engine.new_var()
    seen: list[BaseException] = []

    def waits(_run_ctx: object) -> None:
        try:
            engine.wait_to_read(watched)
        except EngineError as error:
            seen.append(error)
            raise

    try:
        engine.push_sync(waits, None, [], [written])
        engine.wait_to_read(written)  # ThreadedEngine: the failure comes with the wait
    except EngineError as error:
        assert "would deadlock" in str(error)
    assert len(seen) == 1 and "inside a pushed function would deadlock" in str(seen[0])
    engine.wait_to_read(watched)  # outside an operation: nothing pending, it returns


@pytest.mark.usefixtures("engine_kind")
def test_a_wait_on_a_non_var_is_refused() -> None:
    for wrong in (None, 3, object()):
        with pytest.raises(EngineError, match="needs an engine var"):
            engine.wait_to_read(wrong)  # type: ignore[arg-type]


@pytest.mark.usefixtures("engine_kind")
def test_an_array_wait_inside_an_operation_is_refused() -> None:
    a = mx.nd.ones((2, 2))
    a.wait_to_read()
    outcome: list[BaseException] = []

    def waits(_run_ctx: object) -> None:
        try:
            a.wait_to_read()
        except EngineError as error:
            outcome.append(error)

    engine.push_sync(waits, None, [], [engine.new_var()])
    engine.wait_for_all()
    assert len(outcome) == 1 and "would deadlock" in str(outcome[0])
