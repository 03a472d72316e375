"""``mx.AttrScope``: attributes given to every symbol created inside a
``with`` block, as MXNet's. ``mx.AttrScope(ctx_group="stage1")`` is how a
graph says which operators ``group2ctx`` places together (model
parallelism); the attribute is stored as ``__ctx_group__``, as MXNet writes
it in symbol JSON.

Scopes nest (inner values win) and are per thread. Attributes given to a
symbol explicitly win over the scope's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import TracebackType

from ..errors import GraphError

__all__ = ["AttrScope", "current_attrs"]

_local = threading.local()


def _key(name: str) -> str:
    return name if name.startswith("__") and name.endswith("__") else f"__{name}__"


class AttrScope:
    """``with AttrScope(ctx_group="dev1"):`` symbols created inside carry
    ``__ctx_group__ = "dev1"``."""

    def __init__(self, **attrs: str) -> None:
        for name, value in attrs.items():
            if not isinstance(value, str):
                raise GraphError(f"AttrScope: {name}={value!r} must be a string")
        self._attrs = {_key(name): value for name, value in attrs.items()}

    def __enter__(self) -> AttrScope:
        stack: list[dict[str, str]] = getattr(_local, "stack", [])
        merged = {**(stack[-1] if stack else {}), **self._attrs}
        _local.stack = [*stack, merged]
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        _local.stack = _local.stack[:-1]


def current_attrs(explicit: Mapping[str, str] | None = None) -> dict[str, str]:
    """The attributes of the innermost scope, updated with explicit ones."""
    stack: list[dict[str, str]] = getattr(_local, "stack", [])
    return {**(stack[-1] if stack else {}), **(explicit or {})}
