"""Counting the executor's one-call direct path (LoadedModel's
BoundInference.direct, which forward() and predict() take once the plan is
one bound subgraph), for tests that check whether it ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from acc_host.abi.loaded_model import BoundInference


def count_direct_calls(monkeypatch: pytest.MonkeyPatch, counted: Callable[[], None],
                       after: bool = False) -> None:
    """Calls counted() at every call of a direct call made from now on
    (before it runs, or with after, once it returned without raising)."""
    make = BoundInference.direct

    def direct(infer: BoundInference, inputs: Any, read: Any = ()) -> Any:
        call = make(infer, inputs, read)
        if call is None:
            return None

        def run(values: Any) -> Any:
            if not after:
                counted()
            results = call(values)
            if after:
                counted()
            return results

        return run

    monkeypatch.setattr(BoundInference, "direct", direct)


def count_output_reads(monkeypatch: pytest.MonkeyPatch, counted: Callable[[], None]) -> None:
    """Calls counted() at every copy made by an executor output's one-copy
    reader (BoundInference.reader) made from now on (not when the reader
    refused a freed buffer)."""
    make = BoundInference.reader

    def reader(infer: BoundInference, buffer: Any) -> Any:
        copy = make(infer, buffer)
        if copy is None:
            return None

        def read() -> Any:
            values = copy()
            if values is not None:
                counted()
            return values

        return read

    monkeypatch.setattr(BoundInference, "reader", reader)
