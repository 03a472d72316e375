"""``Symbol.json_document()`` builds the symbol JSON's dict without writing
and parsing the text (the bind's annotation for the plugin): it must equal
``json.loads(symbol.tojson())`` for every model the tests carry, built or
loaded, and share nothing the symbol holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import acc_host as mx

MODELS = Path(__file__).resolve().parents[1] / "models"
FILES = sorted(MODELS.rglob("*symbol.json"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(MODELS)) for p in FILES])
def test_equals_the_parsed_text_of_a_loaded_model(path: Path) -> None:
    symbol = mx.sym.load(str(path))
    assert symbol.json_document() == json.loads(symbol.tojson())


def test_equals_the_parsed_text_of_a_built_symbol() -> None:
    data = mx.sym.var("data", shape=(1, 3, 8, 8))
    conv = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="conv")
    bn = mx.sym.BatchNorm(conv, name="bn")
    out = mx.sym.Group([mx.sym.relu(bn, name="relu"), mx.sym.Pooling(
        bn, kernel=(2, 2), pool_type="max", name="pool")])
    assert out.json_document() == json.loads(out.tojson())


def test_changing_the_document_leaves_the_symbol_alone() -> None:
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    before = fc.tojson()
    document = fc.json_document()
    for node in document["nodes"]:
        node.setdefault("attrs", {})["__kind__"] = "changed"
        node["inputs"].append([0, 0, 0])
    document["attrs"]["extra"] = ["int", 1]
    document["heads"].clear()
    assert fc.tojson() == before
    assert fc.json_document() == json.loads(before)
