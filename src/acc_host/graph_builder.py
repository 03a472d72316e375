"""Building MXNet symbol-JSON graphs from Python, node by node.

A stand-in for composing graphs until the Symbol API exists: it produces the
same dicts real MXNet writes ("nodes", "arg_nodes", "node_row_ptr", "heads",
"attrs"), with attribute values in MXNet's string conventions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["GraphBuilder", "Entry", "format_attr"]

Entry = tuple[int, int]  # (node id, output index)


def format_attr(value: Any) -> str:
    """MXNet's attribute spelling: (3, 3) -> "(3, 3)", True -> "True"."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (tuple, list)):
        items = ", ".join(str(int(item)) for item in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return str(value)


class GraphBuilder:
    """Accumulates nodes in topological order."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []

    def var(self, name: str) -> Entry:
        self.nodes.append({"op": "null", "name": name, "inputs": []})
        return (len(self.nodes) - 1, 0)

    def op(self, op_name: str, name: str, inputs: Sequence[Entry], **attrs: Any) -> Entry:
        node: dict[str, Any] = {"op": op_name, "name": name,
                                "inputs": [[node_id, index, 0] for node_id, index in inputs]}
        if attrs:
            node["attrs"] = {key: format_attr(value) for key, value in attrs.items()}
        self.nodes.append(node)
        return (len(self.nodes) - 1, 0)

    def graph(self, heads: Sequence[Entry]) -> dict[str, Any]:
        """The symbol JSON dict with the given outputs."""
        return {
            "nodes": [dict(node) for node in self.nodes],
            "arg_nodes": [i for i, node in enumerate(self.nodes) if node["op"] == "null"],
            "node_row_ptr": list(range(len(self.nodes) + 1)),
            "heads": [[node_id, index, 0] for node_id, index in heads],
            "attrs": {"mxnet_version": ["int", 10901]},
        }
