"""Switching the dependency engine around a block, from and back to a
settled engine (the engine_kind fixture of conftest.py uses it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["settle_engine", "using_engine"]


def settle_engine() -> None:
    """Waits for everything pushed; failures an earlier test left behind
    (a forward nobody waited for, a library that died) are not the caller's."""
    import acc_host as mx

    try:
        mx.engine.wait_for_all()
    except Exception:  # whatever an earlier test left
        pass


@contextlib.contextmanager
def using_engine(kind: str) -> Iterator[str]:
    """The engine kind for the block, from and back to a settled engine."""
    import acc_host as mx

    previous = mx.engine.engine_type()
    settle_engine()
    mx.engine.set_engine_type(kind)
    try:
        yield kind
    finally:
        settle_engine()
        mx.engine.set_engine_type(previous)
