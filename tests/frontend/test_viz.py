"""mx.viz.print_summary prints MXNet 1.9.1's table to the character
(tests/mxnet_expected/viz, captured by tools/mxnet_compat/make_viz_expected.py
in a side environment), with and without input shapes."""

from __future__ import annotations

import pytest
from support.paths import TESTS

import acc_host as mx


@pytest.mark.parametrize("shape", [{"data": (1, 3, 224, 224)}, None], ids=["shape", "noshape"])
@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenetv2_1_0"])
def test_print_summary_matches_mxnet(name: str, shape: dict | None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    symbol = mx.sym.load(str(TESTS / "models" / name / "model-symbol.json"))
    mx.viz.print_summary(symbol, shape=shape)
    suffix = "" if shape else "-noshape"
    expected = (TESTS / "mxnet_expected" / "viz" / f"{name}{suffix}.txt").read_text()
    assert capsys.readouterr().out == expected


def test_refusals_are_typed() -> None:
    with pytest.raises(mx.InvalidArgumentError, match="needs a Symbol"):
        mx.viz.print_summary("not a symbol")
    with pytest.raises(mx.InvalidArgumentError, match="graphviz"):
        mx.viz.plot_network(mx.sym.Variable("data"))
