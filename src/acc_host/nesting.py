"""Nested lists of values flattened to one list and regrouped: the loop
variables, states and outputs that MXNet's control-flow functions
(``foreach``, ``while_loop``, ``cond``) take as an item or a nested list,
for arrays (mx.nd.contrib) and for symbols (mx.sym.contrib) alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import GraphError

__all__ = ["flatten", "regroup"]

# A nesting: 0 for one item that stands alone, n > 0 for one item that
# counts as n values (a symbol of n outputs), a list of nestings for a list.
Nesting = Any


def flatten(value: Any, leaf: type, what: str,
            width: Callable[[Any], int] = lambda item: 0) -> tuple[list[Any], Nesting]:
    """The leaves of value (a leaf or a nested list of leaves), in order,
    and its nesting; width(leaf) is how many values one leaf stands for
    (0: itself alone). what names value in the GraphError for anything else."""
    if isinstance(value, leaf):
        return [value], width(value)
    if not isinstance(value, (list, tuple)):
        name = leaf.__name__
        raise GraphError(f"{what} must be one {name} or a (nested) list of {name}s, got "
                         f"{type(value).__name__}")
    flat: list[Any] = []
    nestings = []
    for item in value:
        items, nesting = flatten(item, leaf, what, width)
        flat += items
        nestings.append(nesting)
    return flat, nestings


def regroup(values: list[Any], nesting: Nesting) -> tuple[Any, list[Any]]:
    """values (at least as many as nesting holds) grouped as nesting says,
    and the values left over."""
    if isinstance(nesting, int):
        if nesting == 0:
            return values[0], values[1:]
        return values[:nesting], values[nesting:]
    result = []
    for item in nesting:
        grouped, values = regroup(values, item)
        result.append(grouped)
    return result, values
