"""Storage-type inference in graphs (acc_host.graph.storage) against MXNet
1.9.1: the output storage types simple_bind gave for the symbols of
tests/models/sparse/infer_storage.json (made by make_sparse_refs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import acc_host as mx
from acc_host.errors import GraphError
from acc_host.graph.storage import infer_storage_type, output_storage_types

HERE = Path(__file__).resolve().parents[1] / "models" / "sparse"
CASES = {case["name"]: case for case in json.loads((HERE / "infer_storage.json").read_text())}


NOT_GRAPH_OPERATORS = {
    "cast_storage_csr": "cast_storage is a host function, not a registry operator (every "
                        "registry operator must be in cpu_ref; see graph/storage.py)",
    "cast_storage_rsp_dns": "cast_storage is a host function, not a registry operator",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_storage_types_match_mxnet(name: str) -> None:
    case = CASES[name]
    if name in NOT_GRAPH_OPERATORS:
        # The rule itself, on the storage types MXNet was given.
        stype = case["symbol"]["nodes"][-1]["attrs"]["stype"]
        inputs = [case["stypes"].get(arg, "default") for arg in case["shapes"]]
        assert output_storage_types("cast_storage", {"stype": stype}, inputs) == \
            case["outputs"], NOT_GRAPH_OPERATORS[name]
        return
    symbol = mx.sym.load_json(json.dumps(case["symbol"]))
    args, outputs, aux = infer_storage_type(symbol, case["stypes"])
    assert outputs == case["outputs"]
    assert len(args) == len(symbol.list_arguments()) and aux == []
    for arg, stype in zip(symbol.list_arguments(), args):
        assert stype == case["stypes"].get(arg, stype)


def test_variable_attribute_and_keywords() -> None:
    x = mx.sym.Variable("x", stype="csr")
    w = mx.sym.Variable("w")
    args, outputs, _ = infer_storage_type(mx.sym.dot(x, w, transpose_a=True))
    assert args == ["csr", "default"] and outputs == ["row_sparse"]
    _, outputs, _ = infer_storage_type(mx.sym.dot(x, w), x="default", w="csr")
    assert outputs == ["csr"]
    with pytest.raises(GraphError, match="not inputs"):
        infer_storage_type(mx.sym.dot(x, w), y="csr")
    with pytest.raises(GraphError, match="unknown storage type"):
        infer_storage_type(mx.sym.dot(x, w), w="coo")


def test_unlisted_operators_fall_back_to_default() -> None:
    assert output_storage_types("exp", None, ["csr"]) == ["default"]
    assert output_storage_types("Convolution", None, ["row_sparse", "default"]) == ["default"]
    assert output_storage_types("relu", None, ["row_sparse"]) == ["row_sparse"]
    assert output_storage_types("_sparse_retain", None, ["row_sparse", "default"]) == \
        ["row_sparse"]
