"""docs/mxnet_compat.md against MXNet 1.9.1's names and acc_host itself.

The names come from tools/mxnet_compat/mxnet_names.json (written by
list_names.py with MXNet installed); the statuses from status.toml. A name the
page marks supported must resolve in acc_host, and the page must be what the
generator writes now.
"""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType

import pytest
from support.paths import ROOT

TOOLS = ROOT / "tools" / "mxnet_compat"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mxnet_compat_generate", TOOLS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()
ROWS = GENERATE.entries()
SUPPORTED = [name for _, name, state, _ in ROWS if state in ("supported", "differs")]


def test_names_come_from_mxnet_1_9_1() -> None:
    names = json.loads((TOOLS / "mxnet_names.json").read_text(encoding="utf-8"))
    assert names["mxnet"] == "1.9.1"
    for module in ("mx", "mx.nd", "mx.sym", "mx.mod", "mx.gluon", "mx.gluon.nn", "mx.gluon.rnn",
                   "mx.gluon.model_zoo.vision", "mx.io", "mx.metric", "mx.random", "mx.context",
                   "mx.test_utils", "mx.viz", "mx.image", "mx.recordio", "mx.contrib.onnx",
                   "mx.runtime"):
        assert names["modules"][module], module
    assert "sum" in names["classes"]["mx.nd.NDArray"]


@pytest.mark.parametrize("name", SUPPORTED)
def test_supported_name_resolves(name: str) -> None:
    GENERATE.resolve(name)


def test_every_name_has_a_reason_unless_supported() -> None:
    for _, name, state, note in ROWS:
        if state in ("differs", "missing"):
            assert note, f"{name} is {state} without a note"


def test_page_is_current() -> None:
    page = ROOT / "docs" / "mxnet_compat.md"
    assert page.read_text(encoding="utf-8") == GENERATE.render(), (
        "docs/mxnet_compat.md is stale: run python tools/mxnet_compat/generate.py")
