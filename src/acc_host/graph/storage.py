"""Storage types in symbol graphs: MXNet's codes and FInferStorageType.

MXNet marks a variable's storage type with the ``__storage_type__``
attribute, the storage type's code as a string (``mx.sym.Variable('x',
stype='csr')`` writes ``"2"``). Codes: -1 undefined, 0 default (dense),
1 row_sparse, 2 csr.

:func:`infer_storage_type` gives every entry of a graph its storage type by
MXNet 1.9.1's FInferStorageType rules for the operators that have them (the
table below; tests/graph/../nd/test_sparse_infer.py checks them against
MXNet's ``simple_bind`` on the symbols of tests/models/sparse): a variable
has the type it is given, else the one its ``__storage_type__`` names, else
default. Every other operator, and every combination the table does not
name, gives default (MXNet's storage fallback: the operator reads dense
copies). MXNet does not expose this pass on ``Symbol``; this module is its
public place.

==============================  ===================================================
operator                        result
==============================  ===================================================
dot                             csr x default: default; with transpose_a:
                                row_sparse; csr x row_sparse: default;
                                default x csr (no transpose_a): csr;
                                ``forward_stype``, when set, wins
elemwise_add, elemwise_sub      csr, csr: csr; row_sparse, row_sparse: row_sparse
elemwise_mul                    as add; and default with csr (either side): csr,
                                default with row_sparse: row_sparse
broadcast_mul, broadcast_div    csr, default: csr
unary with f(0) = 0             the input's (``ZERO_PRESERVING``; ``clip`` when its
                                range holds 0)
slice                           csr: csr
zeros_like                      the input's
Concat (``dim`` 0)              all csr: csr
add_n                           all row_sparse: row_sparse
_sparse_retain                  row_sparse: row_sparse
cast_storage                    its ``stype``
==============================  ===================================================

FullyConnected with a csr data input, Embedding with a row_sparse weight,
sum and mean of csr all give default, as every unnamed operator does.

``cast_storage`` and ``_sparse_retain`` are not operators of the registry
(which lists what graphs may hold and every bundled plugin implements):
``mx.nd.cast_storage`` and ``mx.nd.sparse.retain`` are host functions, and a
graph with such a node is refused when it is loaded. Their rules above serve
:func:`output_storage_types`' callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import GraphError

__all__ = ["STORAGE_CODES", "STORAGE_NAMES", "STORAGE_ATTR", "ZERO_PRESERVING",
           "storage_type_code", "storage_type_name", "output_storage_types",
           "infer_storage_entries", "infer_storage_type"]

#: The attribute MXNet writes on variables with a storage type.
STORAGE_ATTR = "__storage_type__"
STORAGE_CODES: dict[str, int] = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
STORAGE_NAMES: dict[int, str] = {code: name for name, code in STORAGE_CODES.items()}
DEFAULT = "default"
CSR = "csr"
ROW_SPARSE = "row_sparse"

#: Unary operators that map 0 to 0, whose sparse input keeps its storage
#: type (MXNet registers them with csr and row_sparse FComputeEx).
ZERO_PRESERVING = frozenset({
    "relu", "abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix", "square", "sqrt",
    "cbrt", "negative", "sin", "tan", "arcsin", "arctan", "sinh", "tanh", "arcsinh", "arctanh",
    "expm1", "log1p", "degrees", "radians", "_copy", "BlockGrad", "_mul_scalar", "_div_scalar",
})


def storage_type_code(stype: str) -> int:
    """The code of a storage type name ('default', 'row_sparse', 'csr')."""
    if stype not in STORAGE_CODES or stype == "undefined":
        raise GraphError(f"unknown storage type {stype!r} (expected 'default', 'row_sparse' "
                         "or 'csr')")
    return STORAGE_CODES[stype]


def storage_type_name(code: int | str) -> str:
    """The name of a storage type code (an int, or the string MXNet's JSON
    holds)."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        raise GraphError(f"storage type code {code!r} is not an integer") from None
    if number not in STORAGE_NAMES:
        raise GraphError(f"unknown storage type code {number} (expected -1, 0, 1 or 2)")
    return STORAGE_NAMES[number]


def _dot(attrs: Any, inputs: Sequence[str]) -> str:
    forward = getattr(attrs, "forward_stype", None) if attrs is not None else None
    if forward:
        return str(forward)
    lhs, rhs = inputs
    transpose_a = bool(attrs.transpose_a) if attrs is not None else False
    if lhs == CSR and rhs == DEFAULT:
        return ROW_SPARSE if transpose_a else DEFAULT
    if lhs == DEFAULT and rhs == CSR and not transpose_a:
        return CSR
    return DEFAULT


def _elemwise(op_name: str, inputs: Sequence[str]) -> str:
    lhs, rhs = inputs
    if lhs == rhs and lhs in (CSR, ROW_SPARSE):
        return lhs
    if op_name == "elemwise_mul" and DEFAULT in (lhs, rhs):
        other = rhs if lhs == DEFAULT else lhs
        return other
    return DEFAULT


def output_storage_types(op_name: str, attrs: Any, inputs: Sequence[str],
                         num_outputs: int = 1) -> list[str]:
    """The storage types of an operator's outputs for its inputs' (MXNet's
    FInferStorageType, falling back to default)."""
    result = DEFAULT
    sparse = [stype for stype in inputs if stype != DEFAULT]
    if op_name == "cast_storage" and attrs is not None:
        result = str(attrs["stype"])
    elif op_name == "dot" and len(inputs) == 2:
        result = _dot(attrs, inputs)
    elif not sparse:
        result = DEFAULT
    elif op_name in ("elemwise_add", "elemwise_sub", "elemwise_mul") and len(inputs) == 2:
        result = _elemwise(op_name, inputs)
    elif op_name in ("broadcast_mul", "broadcast_div") and list(inputs) == [CSR, DEFAULT]:
        result = CSR
    elif len(inputs) == 1 and (op_name in ZERO_PRESERVING or (
            op_name == "clip" and attrs is not None and attrs.a_min <= 0 <= attrs.a_max)):
        result = inputs[0]
    elif op_name == "slice" and inputs == [CSR]:
        result = CSR
    elif op_name == "zeros_like" and len(inputs) == 1:
        result = inputs[0]
    elif op_name == "Concat" and set(inputs) == {CSR} and attrs is not None \
            and attrs["dim"] == 0:
        result = CSR
    elif op_name == "add_n" and set(inputs) == {ROW_SPARSE}:
        result = ROW_SPARSE
    elif op_name == "_sparse_retain" and inputs and inputs[0] == ROW_SPARSE:
        result = ROW_SPARSE
    return [result] + [DEFAULT] * (num_outputs - 1)


def _variable_stype(node: Any, given: Mapping[str, str]) -> str:
    if node.name in given:
        stype = given[node.name]
        storage_type_code(stype)
        return stype
    code = node.attrs.get(STORAGE_ATTR)
    if code is None:
        return DEFAULT
    name = storage_type_name(code)
    return DEFAULT if name == "undefined" else name


def infer_storage_entries(graph: Any, given: Mapping[str, str] | None = None) -> list[str]:
    """The storage type of every entry of graph (an
    :class:`acc_host.graph.Graph`), by entry number; given names the
    storage types of variables."""
    given = dict(given or {})
    unknown = sorted(set(given) - {node.name for node in graph.nodes if node.is_variable})
    if unknown:
        raise GraphError(f"infer_storage_type: {', '.join(unknown)} are not inputs of the graph")
    entries = [DEFAULT] * graph.num_entries
    for k, node in enumerate(graph.nodes):
        outputs = graph.output_entries(k)
        if node.is_variable:
            entries[outputs[0]] = _variable_stype(node, given)
            continue
        inputs = [entries[entry] for entry in graph.input_entries(k)]
        op, attrs = graph.ops[k], graph.attrs[k]
        for entry, stype in zip(outputs, output_storage_types(op.name, attrs, inputs,
                                                              len(outputs))):
            entries[entry] = stype
    return entries


def infer_storage_type(symbol: Any, given: Mapping[str, str] | None = None, **stypes: str
                       ) -> tuple[list[str], list[str], list[str]]:
    """(argument, output, auxiliary-state) storage types of a symbol (or a
    Graph), in the order of list_arguments, list_outputs and
    list_auxiliary_states, as MXNet's storage inference gives them; the
    variables' storage types come from given and the keyword arguments,
    else their ``__storage_type__`` attribute, else default."""
    graph = getattr(symbol, "graph", symbol)
    entries = infer_storage_entries(graph, {**(given or {}), **stypes})
    arguments, aux = graph.variables()
    return ([entries[graph.output_entries(k)[0]] for k in arguments],
            [entries[graph.entry(node, output)] for node, output in graph.heads],
            [entries[graph.output_entries(k)[0]] for k in aux])
