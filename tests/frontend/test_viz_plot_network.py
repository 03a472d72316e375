"""mx.viz.plot_network draws what MXNet 1.9.1 draws (its nodes, labels,
colours and labelled edges, captured from MXNet's graphviz Digraph by
tools/mxnet_compat/make_plot_expected.py into
tests/mxnet_expected/viz/plot_network.json), without Graphviz, and returns
an object with the Digraph's render/save/pipe/_repr_svg_ surface."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx

TESTS = Path(__file__).resolve().parents[1]
EXPECTED = json.loads((TESTS / "mxnet_expected" / "viz" / "plot_network.json").read_text())
SVG = "{http://www.w3.org/2000/svg}"


def _symbol(name: str) -> mx.sym.Symbol:
    return mx.sym.load(str(TESTS / "models" / name / "model-symbol.json"))


def _plot(case: str) -> mx.viz.NetworkPlot:
    name, variant = case.rsplit("-", 1)
    shape = {"data": np.load(TESTS / "models" / name / "input_0.npy").shape}
    if variant == "shape":
        return mx.viz.plot_network(_symbol(name), shape=shape)
    if variant == "weights":
        return mx.viz.plot_network(_symbol(name), hide_weights=False)
    return mx.viz.plot_network(_symbol(name), shape=shape, dtype={"data": np.float32})


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_nodes_and_edges_match_mxnet(case: str) -> None:
    plot = _plot(case)
    assert plot.nodes == EXPECTED[case]["nodes"]
    assert plot.edges == EXPECTED[case]["edges"]


@pytest.mark.parametrize("case", ["squeezenet1_1-shape", "transformer_enc-weights"])
def test_the_svg_draws_them(case: str) -> None:
    plot = _plot(case)
    root = ET.fromstring(plot._repr_svg_())
    groups = list(root.iter(f"{SVG}g"))
    nodes = {group.get("data-id"): group for group in groups
             if (group.get("class") or "").startswith("node")}
    edges = [(group.get("data-source"), group.get("data-target")) for group in groups
             if group.get("class") == "edge"]
    expected = EXPECTED[case]
    # MXNet leaves shown weights to Graphviz's implicit nodes; acc-host draws them.
    weights = {edge["source"] for edge in expected["edges"]} - \
        {node["name"] for node in expected["nodes"]}
    assert set(nodes) == {node["name"] for node in expected["nodes"]} | weights
    assert sorted(edges) == sorted((edge["source"], edge["target"])
                                   for edge in expected["edges"])
    for node in expected["nodes"]:
        group = nodes[node["name"]]
        assert group.find(f"{SVG}rect").get("fill") == node["fillcolor"]
        lines = [text.text for text in group.iter(f"{SVG}text")]
        assert "\n".join(lines) == node["label"] or lines[0].endswith("\u2026")
    labels = [text.text for group in groups if group.get("class") == "edge"
              for text in group.iter(f"{SVG}text")]
    assert sorted(labels) == sorted(edge["label"] for edge in expected["edges"] if edge["label"])


def test_render_save_and_pipe(tmp_path: Path) -> None:
    plot = mx.viz.plot_network(_symbol("squeezenet_biased"), title="biased",
                               shape={"data": (2, 3, 64, 64)})
    assert plot.format == "pdf" and plot.name == "biased" and plot.filename == "biased.gv"
    assert plot.source.startswith('digraph "biased" {') and str(plot) == plot.source
    assert '"conv0" -> "data" [label="3x64x64" arrowtail=open dir=back]' in plot.source
    source = plot.save(directory=str(tmp_path))
    assert Path(source).read_text() == plot.source and source.endswith("biased.gv")
    pdf = plot.render(directory=str(tmp_path / "out"))
    assert pdf.endswith("biased.gv.pdf") and Path(pdf).read_bytes().startswith(b"%PDF")
    png = plot.render("picture", directory=str(tmp_path), format="png", cleanup=True)
    assert Path(png).read_bytes().startswith(b"\x89PNG") and not (tmp_path / "picture").exists()
    svg = plot.pipe("svg").decode()
    assert ET.fromstring(svg).tag == f"{SVG}svg" and ">biased</text>" in svg
    recoloured = mx.viz.plot_network(_symbol("squeezenet_biased"),
                                     node_attrs={"fillcolor": "#123456", "shape": "oval"})
    assert {node.fill for node in recoloured.drawing.nodes} == {"#123456"}


def test_refusals_are_typed() -> None:
    with pytest.raises(mx.InvalidArgumentError, match="needs a Symbol"):
        mx.viz.plot_network("not a symbol")
    with pytest.raises(mx.InvalidArgumentError, match="save_format 'jpg'"):
        mx.viz.plot_network(mx.sym.Variable("data"), save_format="jpg")
    plot = mx.viz.plot_network(mx.sym.Variable("data"))
    with pytest.raises(mx.InvalidArgumentError, match="opens no viewer"):
        plot.render(view=True)
    with pytest.raises(mx.InvalidArgumentError, match="format 'gif'"):
        plot.pipe("gif")
    with pytest.raises(mx.AccHostError, match="'other' not among the graph's inputs"):
        mx.viz.plot_network(_symbol("squeezenet1_1"), shape={"other": (1, 2)})
