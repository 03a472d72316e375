"""MXNet symbol JSON: reading it into graph nodes and writing it back the
way MXNet (NNVM's graph saver with dmlc's JSON writer) does.

The format: ``{"nodes": [...], "arg_nodes": [...], "node_row_ptr": [...],
"heads": [...], "attrs": {...}}``. Each node has "op" ("null" for a
variable), "name", optional "attrs" (string values; files older than MXNet
1.0 use "attr" and "param", merged here as MXNet itself does) and "inputs",
a list of [node id, output index, version] entries pointing at earlier
nodes. ``node_row_ptr[i]`` is the number of outputs (hidden ones included)
of the nodes before node i.

Writing reproduces MXNet's bytes: two-space indentation, ", " before each
line break, objects and arrays on one line when they are short (a map of at
most one entry, an integer array of at most ten), input entries always on
one line. Files MXNet wrote therefore round-trip byte for byte.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GraphError

__all__ = ["Node", "Entry", "Subgraph", "parse_graph", "write_graph", "graph_document"]

# The "mxnet_version" graph attribute of the JSON the host writes (MXNet 1.9.1).
MXNET_VERSION = ["int", 10901]

# Keys a node may carry besides the ones this module understands; they are
# kept and written back unchanged.
_NODE_KEYS = ("op", "name", "attrs", "attr", "param", "inputs", "subgraphs")


@dataclass(eq=False)
class Node:
    """One graph node. ``inputs`` are (producer, output index, version)."""

    op: str
    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    inputs: list[Entry] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    num_outputs: int | None = None  # all outputs, hidden ones included, when known
    # The bodies of a control-flow node (_cond, _foreach, _while_loop), in
    # MXNet's "subgraphs" order; empty for every other node.
    subgraphs: list[Subgraph] = field(default_factory=list)

    @property
    def is_variable(self) -> bool:
        return self.op == "null"

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.name!r})"


Entry = tuple[Node, int, int]


@dataclass(eq=False)
class Subgraph:
    """A graph owned by a node (a control-flow body): its nodes in
    topological order (file order when read) and its outputs. Its variables
    are the body's inputs, in node order (MXNet's list_inputs)."""

    nodes: list[Node]
    heads: list[Entry]

    @property
    def inputs(self) -> list[Node]:
        return [node for node in self.nodes if node.is_variable]


def _fail(message: str) -> GraphError:
    return GraphError(f"symbol JSON: {message}")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{what} must be an integer, got {value!r}")
    return value


def _entry(value: Any, what: str, nodes: list[Node], before: int) -> Entry:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise _fail(f"{what} must be [node, index] or [node, index, version], got {value!r}")
    node_id, index = _int(value[0], what), _int(value[1], what)
    version = _int(value[2], what) if len(value) == 3 else 0
    if not 0 <= node_id < before:
        raise _fail(f"{what} refers to node {node_id}, which does not precede it (a dangling "
                    "input, a forward reference or a cycle)")
    if index < 0:
        raise _fail(f"{what} has a negative output index {index}")
    return nodes[node_id], index, version


def _attrs(raw: Mapping[str, Any], where: str) -> dict[str, str]:
    merged: dict[str, str] = {}
    for key in ("attrs", "attr", "param"):
        section = raw.get(key)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise _fail(f"{where}: {key!r} must be an object")
        for name, value in section.items():
            if not isinstance(value, str):
                raise _fail(f"{where}: attribute {name!r} must be a string, got {value!r}")
            merged[name] = value
    return merged


def parse_graph(source: str | Mapping[str, Any], *, depth: int = 0
                ) -> tuple[list[Node], list[Entry], dict[str, Any]]:
    """(nodes in file order, heads, graph attrs) of a symbol JSON text or dict.

    Checks what a malformed file gets wrong: structure, types, inputs that
    do not point at an earlier node (which also rules out cycles), heads and
    output indices out of range."""
    if isinstance(source, str):
        try:
            # strict=False: control characters raw inside strings, as dmlc's
            # writer leaves them (it escapes only \\, ", \n, \r and \t) and
            # its reader accepts them, so files MXNet wrote load; _string
            # writes them escaped.
            document = json.loads(source, strict=False)
        except json.JSONDecodeError as error:
            raise _fail(f"not valid JSON: {error}") from None
        except RecursionError:
            raise _fail("not valid JSON: nested too deeply") from None
        except ValueError as error:  # an integer of more digits than int() converts
            raise _fail(f"not valid JSON: {error}") from None
    else:
        document = source
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise _fail('expected an object with a "nodes" array')
    raw_nodes = document["nodes"]
    row_ptr = document.get("node_row_ptr")
    if row_ptr is not None and (not isinstance(row_ptr, list)
                                or len(row_ptr) != len(raw_nodes) + 1):
        raise _fail("node_row_ptr must have one entry per node plus one")
    nodes: list[Node] = []
    for position, raw in enumerate(raw_nodes):
        where = f"node {position}"
        if not isinstance(raw, dict):
            raise _fail(f"{where} is not an object")
        op, name = raw.get("op"), raw.get("name")
        if not isinstance(op, str) or not isinstance(name, str):
            raise _fail(f'{where} needs string "op" and "name"')
        where = f"node {position} ({name!r})"
        inputs = raw.get("inputs", [])
        if not isinstance(inputs, list):
            raise _fail(f'{where}: "inputs" must be an array')
        node = Node(op, name, _attrs(raw, where),
                    [_entry(entry, f"{where} input {k}", nodes, position)
                     for k, entry in enumerate(inputs)],
                    {key: value for key, value in raw.items() if key not in _NODE_KEYS})
        if node.is_variable and node.inputs:
            raise _fail(f"{where} is a variable but has inputs")
        if "subgraphs" in raw:
            node.subgraphs = _subgraphs(raw["subgraphs"], where, depth)
        if row_ptr is not None:
            node.num_outputs = _int(row_ptr[position + 1], "node_row_ptr") - _int(
                row_ptr[position], "node_row_ptr")
            if node.num_outputs < 1:
                raise _fail(f"{where}: node_row_ptr gives it {node.num_outputs} outputs")
        nodes.append(node)
    for node in nodes:
        for producer, index, _ in node.inputs:
            _check_index(producer, index, f"an input of {node.name!r}")
    raw_heads = document.get("heads")
    if not isinstance(raw_heads, list) or not raw_heads:
        raise _fail('expected a non-empty "heads" array')
    heads = [_entry(head, f"head {k}", nodes, len(nodes)) for k, head in enumerate(raw_heads)]
    for producer, index, _ in heads:
        _check_index(producer, index, "a head")
    graph_attrs = document.get("attrs", {})
    if not isinstance(graph_attrs, dict):
        raise _fail('"attrs" must be an object')
    return nodes, heads, dict(graph_attrs)


#: How deep bodies may nest in a file (a body's node owning bodies, ...).
MAX_SUBGRAPH_DEPTH = 32


def _subgraphs(raw: Any, where: str, depth: int) -> list[Subgraph]:
    """The bodies of a node (its "subgraphs"), each parsed as a graph; depth:
    how many bodies enclose the node."""
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise _fail(f'{where}: "subgraphs" must be an array of graphs')
    if depth >= MAX_SUBGRAPH_DEPTH:
        raise _fail(f"{where}: subgraphs nested more than {MAX_SUBGRAPH_DEPTH} deep")
    bodies = []
    for position, document in enumerate(raw):
        try:
            nodes, heads, _ = parse_graph(document, depth=depth + 1)
        except GraphError as error:
            raise _fail(f"{where} subgraph {position}: "
                        f"{str(error).removeprefix('symbol JSON: ')}") from None
        bodies.append(Subgraph(nodes, heads))
    return bodies


def _check_index(node: Node, index: int, what: str) -> None:
    if node.num_outputs is not None and index >= node.num_outputs:
        raise _fail(f"{what} uses output {index} of {node.name!r}, which has "
                    f"{node.num_outputs}")


# ---- writing ---------------------------------------------------------------------


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _string(text: str) -> str:
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
               .replace("\r", "\\r").replace("\t", "\\t"))
    # dmlc's writer escapes only the five above; the other control characters
    # cannot appear raw in JSON, so they are written as \u00XX.
    escaped = _CONTROL.sub(lambda match: f"\\u{ord(match.group()):04x}", escaped)
    return f'"{escaped}"'


def _value(value: Any, indent: int) -> str:
    """A value as dmlc's writer formats it at the given indentation."""
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, dict):
        return _object(value, indent, multi_line=len(value) > 1)
    if isinstance(value, (list, tuple)):
        plain = all(isinstance(item, (int, float, str)) and not isinstance(item, bool)
                    for item in value)
        return _array(value, indent, multi_line=not plain or len(value) > 10)
    if value is None:
        return "null"
    raise TypeError(f"cannot write {type(value).__name__} into symbol JSON")


def _array(items: Any, indent: int, multi_line: bool) -> str:
    if not items:
        return "[]"
    if not multi_line:
        return "[" + ", ".join(_value(item, indent) for item in items) + "]"
    pad = " " * (indent + 2)
    body = ", \n".join(pad + _value(item, indent + 2) for item in items)
    return "[\n" + body + "\n" + " " * indent + "]"


def _object(pairs: Mapping[str, Any], indent: int, multi_line: bool,
            raw: Mapping[str, str] | None = None) -> str:
    """raw maps keys to values already formatted."""
    formatted = [(key, raw[key] if raw and key in raw else _value(value, indent + 2))
                 for key, value in pairs.items()]
    if not multi_line:
        return "{" + ", ".join(f"{_string(key)}: {text}" for key, text in formatted) + "}"
    pad = " " * (indent + 2)
    body = ", \n".join(f"{pad}{_string(key)}: {text}" for key, text in formatted)
    return "{\n" + body + "\n" + " " * indent + "}"


def _entries(entries: list[list[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, entry)) + "]" for entry in entries) + "]"


def write_graph(nodes: list[Node], heads: list[Entry], graph_attrs: Mapping[str, Any],
                num_outputs: list[int]) -> str:
    """Symbol JSON for nodes (already in topological order), in MXNet's
    layout. num_outputs[i] counts all outputs of nodes[i]. The bodies of
    control-flow nodes are written inside their node, as MXNet 1.9 does:
    a "subgraphs" array after "inputs", each a graph without "attrs"."""
    return _document(nodes, heads, dict(graph_attrs), num_outputs, 0)


def graph_document(nodes: list[Node], heads: list[Entry], graph_attrs: Mapping[str, Any],
                   num_outputs: list[int]) -> dict[str, Any]:
    """``json.loads(write_graph(...))`` without writing and parsing the
    text: a new dict, none of whose lists and dicts the nodes hold (the
    caller may change it). Graphs with control-flow bodies or extra node
    keys go through the text."""
    if any(node.subgraphs or node.extra for node in nodes):
        return json.loads(write_graph(nodes, heads, graph_attrs, num_outputs))  # type: ignore[no-any-return]
    position = {id(node): k for k, node in enumerate(nodes)}
    node_dicts: list[dict[str, Any]] = []
    for node in nodes:
        entry: dict[str, Any] = {"op": node.op, "name": node.name}
        if node.attrs:
            entry["attrs"] = dict(sorted(node.attrs.items()))
        entry["inputs"] = [[position[id(p)], index, version] for p, index, version in node.inputs]
        node_dicts.append(entry)
    row_ptr = [0]
    for count in num_outputs:
        row_ptr.append(row_ptr[-1] + count)
    return {"nodes": node_dicts,
            "arg_nodes": [k for k, node in enumerate(nodes) if node.is_variable],
            "node_row_ptr": row_ptr,
            "heads": [[position[id(p)], index, version] for p, index, version in heads],
            "attrs": json.loads(json.dumps(dict(graph_attrs)))}


def _total_outputs(node: Node) -> int:
    """All outputs of a body's node: from the file, else the registry."""
    if node.num_outputs is not None:
        return node.num_outputs
    if node.is_variable:
        return 1
    from ..ops import registry  # the operator modules are loaded on first use
    op = registry.get(node.op)
    return op.total_outputs(op.parse(node.attrs))


def _document(nodes: list[Node], heads: list[Entry], graph_attrs: dict[str, Any] | None,
              num_outputs: list[int], indent: int) -> str:
    position = {id(node): k for k, node in enumerate(nodes)}
    node_texts = []
    for node in nodes:
        pairs: dict[str, Any] = {"op": node.op, "name": node.name}
        raw: dict[str, str] = {}
        if node.attrs:
            pairs["attrs"] = dict(sorted(node.attrs.items()))
        pairs["inputs"] = None
        raw["inputs"] = _entries([[position[id(p)], index, version]
                                  for p, index, version in node.inputs])
        if node.subgraphs:
            pairs["subgraphs"] = None
            pad = " " * (indent + 8)
            raw["subgraphs"] = "[\n" + ", \n".join(
                pad + _document(body.nodes, body.heads, None,
                                [_total_outputs(n) for n in body.nodes], indent + 8)
                for body in node.subgraphs) + "\n" + " " * (indent + 6) + "]"
        pairs.update(node.extra)
        node_texts.append(_object(pairs, indent + 4, multi_line=True, raw=raw))
    row_ptr = [0]
    for count in num_outputs:
        row_ptr.append(row_ptr[-1] + count)
    document: dict[str, Any] = {
        "nodes": None,
        "arg_nodes": [k for k, node in enumerate(nodes) if node.is_variable],
        "node_row_ptr": row_ptr,
        "heads": None,
    }
    if graph_attrs is not None:
        document["attrs"] = graph_attrs
    pad = " " * (indent + 4)
    raw_document = {
        "nodes": "[\n" + ", \n".join(pad + text for text in node_texts) + "\n"
                 + " " * (indent + 2) + "]",
        "heads": _entries([[position[id(p)], index, version] for p, index, version in heads]),
    }
    return _object(document, indent, multi_line=True, raw=raw_document)
