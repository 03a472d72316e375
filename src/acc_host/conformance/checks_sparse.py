"""Sparse tensors (mxnet_acc.h section 12, ABI 1.2), for plugins that claim
them (``supportsSparse()`` returns 1; only sparse.claim runs otherwise).

Ids: sparse.claim (supportsSparse answers 0 or 1, the same each time, and
1 only in a 1.2 build; a PASS for a plugin that does not export it),
sparse.numerics.<case> (each sparse case the plugin accepts in
supportedOps, against numpy, with the outputs in guarded buffers and the
sparse arrays unchanged afterwards), sparse.malformed (a malformed CSR
array is refused with MX_ACC_ERR_INVALID_ARG, not answered MX_ACC_OK).

The cases are the operators MXNet runs on sparse inputs: dot and
FullyConnected with CSR data, Embedding with a row-sparse weight, take from
a row-sparse table. A plugin declining one (with the storage annotations)
makes that check a SKIP naming its reason: which sparse kinds a plugin runs
is its choice; running them wrong, or accepting malformed ones, is not.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import symbol as sym
from ..abi import header
from ..abi.annotate import annotate_symbol, signature
from ..abi.loaded_model import CHECK_OUTPUTS_VARIABLE, LoadedModel
from ..abi.sparse import CsrParts, RowSparseParts, SparseParts
from ..errors import AccHostError, PluginError
from ..symbol import Symbol
from .report import CheckFailed, CheckSkipped
from .session import Session

__all__ = ["checks", "SparseCase"]

_RTOL, _ATOL = 1e-4, 1e-5
_INVALID_ARG = 1  # MX_ACC_ERR_INVALID_ARG


@dataclass(frozen=True)
class SparseCase:
    """One graph with a sparse input, its values and numpy's result."""

    name: str
    symbol: Symbol
    values: dict[str, Any]      # every variable: a dense array or sparse parts
    stypes: dict[str, str]
    weights: tuple[str, ...]
    expected: np.ndarray


def _csr(dense: np.ndarray) -> CsrParts:
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=dense.shape[0]))])
    return CsrParts.checked(dense[rows, cols], cols, indptr, dense.shape)


def _cases() -> list[SparseCase]:
    rng = np.random.default_rng(12)
    dense = np.where(rng.random((5, 40)) < 0.15, rng.standard_normal((5, 40)), 0)
    dense = dense.astype(np.float32)
    dense[2] = 0  # an empty row
    rhs = rng.standard_normal((40, 6)).astype(np.float32)
    weight = rng.standard_normal((3, 40)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    rows = np.array([1, 4, 7, 11])
    table = RowSparseParts.checked(rng.standard_normal((4, 5)).astype(np.float32), rows, (12, 5))
    ids = np.array([[1, 2, 11], [7, 0, 4]], np.float32)
    indices = np.array([4, 0, 11, 3], np.float32)
    x, w = sym.Variable("x"), sym.Variable("w")
    return [
        SparseCase("dot_csr", sym.dot(x, w), {"x": _csr(dense), "w": rhs}, {"x": "csr"}, (),
                   dense @ rhs),
        SparseCase("fully_connected_csr", sym.FullyConnected(x, num_hidden=3, name="fc"),
                   {"x": _csr(dense), "fc_weight": weight, "fc_bias": bias}, {"x": "csr"},
                   ("fc_weight", "fc_bias"), dense @ weight.T + bias),
        SparseCase("embedding_row_sparse",
                   sym.Embedding(x, w, input_dim=12, output_dim=5, name="emb"),
                   {"x": ids, "w": table}, {"w": "row_sparse"}, ("w",),
                   table.dense()[ids.astype(np.int64)]),
        SparseCase("take_row_sparse", sym.take(w, x), {"w": table, "x": indices},
                   {"w": "row_sparse"}, (), table.dense()[indices.astype(np.int64)]),
    ]


def _claims(session: Session) -> bool:
    library = session.require_library()
    return bool(library.supports_sparse)


def check_claim(session: Session) -> str:
    raw = session.raw
    if not raw.has("supportsSparse"):  # claims nothing, so nothing to hold it to
        return ("supportsSparse is not exported (optional, ABI 1.2): the host gives the plugin "
                "no sparse tensors")
    answers = {int(raw.unchecked("supportsSparse")) for _ in range(3)}
    if len(answers) != 1 or not answers <= {0, 1}:
        raise CheckFailed(f"supportsSparse() answered {sorted(answers)}, not one of 0 or 1")
    library = session.require_library()
    if answers == {1} and library.api_version < header.SPARSE_API_VERSION:
        raise CheckFailed(f"supportsSparse() is 1 but the plugin is built for ABI "
                          f"{library.api_version}, before sparse tensors (102): the host "
                          "ignores it")
    return f"supportsSparse() is {answers.pop()}"


def _graph(session: Session, case: SparseCase) -> dict[str, Any]:
    shapes = {name: value.shape for name, value in case.values.items()}
    dtypes = {name: value.dtype for name, value in case.values.items()}
    return annotate_symbol(case.symbol, shapes, list(case.weights), dtypes,
                           session.require_devices()[0], case.stypes)


def _accepted(session: Session, case: SparseCase) -> dict[str, Any]:
    """The case's graph when the plugin accepts every operator of it; a
    CheckSkipped with its reason otherwise."""
    if not _claims(session):
        raise CheckSkipped("the plugin does not take sparse tensors (supportsSparse)")
    library = session.require_library()
    graph = _graph(session, case)
    specs = signature(graph).data
    dev = session.require_devices()[0]
    ids, reasons = library.supported_ops_reasons(json.dumps(graph), specs, len(graph["nodes"]),
                                                 dev)
    operators = [k for k, node in enumerate(graph["nodes"]) if node["op"] != "null"]
    if ids != operators:
        said = "; ".join(reasons.get(k, "") for k in operators if k not in ids)
        raise CheckSkipped(f"{case.name} declined{': ' + said if said else ''}")
    return graph


def _arrays_of(value: Any) -> list[np.ndarray]:
    if isinstance(value, CsrParts):
        return [value.data, value.indices, value.indptr]
    if isinstance(value, RowSparseParts):
        return [value.data, value.row_ids]
    return [value]


def check_numerics(session: Session, case: SparseCase) -> str:
    graph = _accepted(session, case)
    library = session.require_library()
    before = {name: [array.tobytes() for array in _arrays_of(value)]
              for name, value in case.values.items()}
    weights = {name: case.values[name] for name in case.weights}
    inputs = {name: value for name, value in case.values.items() if name not in case.weights}
    previous = os.environ.get(CHECK_OUTPUTS_VARIABLE)
    os.environ[CHECK_OUTPUTS_VARIABLE] = "1"  # guarded outputs, read at load
    try:
        with LoadedModel(library, graph, weights, session.require_devices()[0]) as model:
            (result,) = model.infer(inputs).values()
    except AccHostError as error:
        raise CheckFailed(f"{case.name}: {error}") from None
    finally:
        if previous is None:
            os.environ.pop(CHECK_OUTPUTS_VARIABLE, None)
        else:
            os.environ[CHECK_OUTPUTS_VARIABLE] = previous
    result = np.asarray(result)
    if result.shape != case.expected.shape or not np.allclose(result, case.expected, _RTOL,
                                                              _ATOL):
        diff = (float(np.abs(result - case.expected).max())
                if result.shape == case.expected.shape else "shape")
        raise CheckFailed(f"{case.name}: results differ from numpy's (max abs diff {diff})")
    written = [name for name, value in case.values.items()
               if [array.tobytes() for array in _arrays_of(value)] != before[name]]
    if written:
        raise CheckFailed(f"{case.name}: the plugin wrote into its inputs {written}")
    return f"{case.name}: matches numpy; outputs within their buffers, inputs untouched"


def _malformed() -> list[tuple[str, SparseParts]]:
    """Arrays a host must never pass, each with a length that stays inside
    its arrays (a plugin that checks nothing reads out of bounds only
    through the bad index itself)."""
    def csr(data: list[float], indices: list[int], indptr: list[int]) -> CsrParts:
        return CsrParts(np.asarray(data, np.float32), np.asarray(indices, np.uint64),
                        np.asarray(indptr, np.uint64), (5, 40))

    return [("column index past the columns", csr([1, 2], [3, 4000], [0, 1, 2, 2, 2, 2])),
            ("decreasing indptr", csr([1, 2], [3, 4], [0, 2, 1, 2, 2, 2])),
            ("indptr not ending at num_nonzero", csr([1, 2], [3, 4], [0, 1, 1, 1, 1, 1])),
            ("indptr not starting at 0", csr([1, 2], [3, 4], [1, 1, 2, 2, 2, 2]))]


def check_malformed(session: Session) -> str:
    cases = {case.name: case for case in _cases()}
    case = cases["fully_connected_csr"]
    try:
        graph = _accepted(session, case)
    except CheckSkipped:
        case = cases["dot_csr"]
        graph = _accepted(session, case)
    library = session.require_library()
    weights = {name: case.values[name] for name in case.weights}
    refused = []
    with LoadedModel(library, graph, weights, session.require_devices()[0]) as model:
        for label, parts in _malformed():
            inputs = {name: value for name, value in case.values.items()
                      if name not in case.weights}
            inputs["x"] = parts
            try:
                model.infer(inputs)
            except PluginError as error:
                if error.code != _INVALID_ARG:
                    raise CheckFailed(f"{label}: refused with {error.code_name}, not "
                                      "MX_ACC_ERR_INVALID_ARG") from None
                refused.append(label)
                continue
            raise CheckFailed(f"{case.name}: a CSR input with a {label} was accepted "
                              "(MX_ACC_OK); mxnet_acc.h section 12 asks the plugin to refuse it")
    return f"{len(refused)} malformed CSR inputs refused with MX_ACC_ERR_INVALID_ARG"


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    yield "sparse.claim", lambda: check_claim(session)
    try:
        claimed = _claims(session)
    except (AccHostError, CheckSkipped):  # did not load: abi.load says why
        claimed = False
    if not claimed:  # sparse.claim's SKIP says why; nothing more to check
        return
    for case in _cases():
        yield f"sparse.numerics.{case.name}", functools.partial(check_numerics, session, case)
    yield "sparse.malformed", lambda: check_malformed(session)
