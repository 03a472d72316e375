"""``acc-host partition --format svg|png`` without Graphviz: the shared
models drawn by acc_host.drawing, and the SVG read back with xml.etree and
checked against the partition (every operator a node coloured by where it
runs, every operator-to-operator edge an arrow, declined operators marked
with their reasons)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import acc_host as mx
from acc_host.cli import main
from acc_host.cli.partition_cmd import refiner
from acc_host.partition.picture import CPU_COLOUR, DECLINED_STROKE, DEVICE_COLOURS, is_declined

MODELS = Path(__file__).resolve().parents[1] / "models"
SRC = Path(mx.__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _partition(name: str, accelerator: str) -> tuple[Any, Any, Any]:
    """The model's partition and explanation on accelerator(0), computed
    here as acc-host partition computes it; and the executor to close."""
    sym, _, _ = mx.model.load_checkpoint(str(MODELS / name / "model"), 0)
    shape = np.load(MODELS / name / "input_0.npy").shape
    ctx = mx.Context(accelerator, 0)
    exe = sym.simple_bind(ctx, data=shape)
    partition = exe.partition
    return partition, partition.explain(refiner(ctx.library, partition), True), exe


def _svg_graph(path: Path) -> tuple[dict[str, ET.Element], list[tuple[str, str]], ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    nodes = {group.get("data-id"): group for group in root.iter(f"{SVG}g")
             if (group.get("class") or "").split()[:1] == ["node"]}
    edges = [(group.get("data-source"), group.get("data-target"))
             for group in root.iter(f"{SVG}g") if group.get("class") == "edge"]
    return nodes, edges, root


def _cli_svg(name: str, accelerator: str, target: Path) -> None:
    shape = ",".join(map(str, np.load(MODELS / name / "input_0.npy").shape))
    assert main(["partition", str(MODELS / name / "model"), "--acc", accelerator, "--shape",
                 shape, "--format", "svg", "--output", str(target)]) == 0


@pytest.mark.parametrize("accelerator", ["cpu_ref", "mlu"])
@pytest.mark.parametrize("name", ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc",
                                  "squeezenet_biased"])
def test_svg_matches_the_partition(name: str, accelerator: str, tmp_path: Path) -> None:
    target = tmp_path / "partition.svg"
    _cli_svg(name, accelerator, target)
    nodes, edges, root = _svg_graph(target)
    partition, explanation, exe = _partition(name, accelerator)
    try:
        graph = partition.graph
        operators = {k: node.name for k, node in enumerate(graph.nodes) if not node.is_variable}
        assert sorted(nodes) == sorted(operators.values())
        expected_edges = [(producer.name, node.name) for node in graph.nodes
                          if not node.is_variable for producer, _, _ in node.inputs
                          if not producer.is_variable]
        assert Counter(edges) == Counter(expected_edges)
        colours = {"cpu(0)": CPU_COLOUR, f"{partition.accelerator}(0)": DEVICE_COLOURS[0]}
        for reason in explanation.nodes:
            group = nodes[operators[reason.node]]
            rect = group.find(f"{SVG}rect")
            assert rect.get("fill") == colours[reason.where], reason
            title = group.find(f"{SVG}title").text
            texts = [text.text for text in group.iter(f"{SVG}text")]
            # A long name is cut with an ellipsis in the box; the id and tooltip keep it.
            assert texts[1] == reason.op and title.startswith(f"{reason.name} ({reason.op})")
            assert texts[0] == reason.name or (texts[0].endswith("\u2026")
                                               and reason.name.startswith(texts[0][:-1]))
            if is_declined(reason):
                assert "declined" in group.get("class").split()
                assert rect.get("stroke") == DECLINED_STROKE and rect.get("stroke-dasharray")
                assert reason.reason in title and f"declined: {reason.kind}" in texts
            else:
                assert "declined" not in group.get("class").split()
            if reason.subgraph is None and reason.kind:
                assert f"{reason.kind}: {reason.reason}" in title
        legend = " ".join(text.text for group in root.iter(f"{SVG}g")
                          if group.get("class") == "legend" for text in group.iter(f"{SVG}text"))
        offloaded = sum(reason.subgraph is not None for reason in explanation.nodes)
        assert f"{partition.accelerator}(0): {offloaded} operator(s)" in legend
        if any(is_declined(reason) for reason in explanation.nodes):
            assert f"declined by {partition.accelerator}'s supportedOps" in legend
    finally:
        exe.close()


def test_declined_operators_show_their_reasons(tmp_path: Path) -> None:
    """The transformer on mlu: operators mlu_sim refuses are outlined and
    carry the explain report's reason."""
    target = tmp_path / "transformer.svg"
    _cli_svg("transformer_enc", "mlu", target)
    nodes, _, _ = _svg_graph(target)
    declined = {node_id: group for node_id, group in nodes.items()
                if "declined" in group.get("class").split()}
    assert declined
    for group in declined.values():
        assert "supportedOps" in group.find(f"{SVG}title").text


def _without_dot(*args: str) -> subprocess.CompletedProcess[bytes]:
    """acc-host in a child whose PATH holds no Graphviz."""
    env = {**os.environ, "PATH": "/nonexistent",
           "PYTHONPATH": os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "acc_host", *args], capture_output=True,
                          env=env, timeout=300, check=False)


def test_svg_and_png_without_graphviz(tmp_path: Path) -> None:
    model = str(MODELS / "squeezenet_biased" / "model")
    common = ["partition", model, "--acc", "cpu_ref", "--shape", "2,3,64,64"]
    svg = _without_dot(*common, "--format", "svg")
    assert svg.returncode == 0, svg.stderr.decode()
    assert ET.fromstring(svg.stdout).tag == f"{SVG}svg"
    target = tmp_path / "partition.png"
    png = _without_dot(*common, "--format", "png", "--output", str(target))
    assert png.returncode == 0, png.stderr.decode()
    data = target.read_bytes()
    assert data.startswith(PNG_MAGIC)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert 200 < width < 2000 and 1000 < height < 20000
    graphviz = _without_dot(*common, "--format", "svg", "--renderer", "graphviz")
    assert graphviz.returncode == 3 and b"needs Graphviz" in graphviz.stderr


def test_png_without_matplotlib_is_drawn_by_acc_host(tmp_path: Path) -> None:
    """No matplotlib: the built-in rasteriser (acc_host.drawing.pixels)
    draws the PNG, over the SVG's width and height."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('matplotlib is blocked here')\n")
    env_path = os.pathsep.join([str(blocker), str(SRC)])
    common = ["partition", str(MODELS / "squeezenet_biased" / "model"), "--acc", "cpu_ref",
              "--shape", "2,3,64,64", "--output"]
    env = {**os.environ, "PYTHONPATH": env_path}
    for form in ("png", "svg"):
        done = subprocess.run(
            [sys.executable, "-m", "acc_host", *common, str(tmp_path / f"x.{form}"), "--format",
             form], capture_output=True, text=True, timeout=300, check=False, env=env)
        assert done.returncode == 0, done.stderr
    data = (tmp_path / "x.png").read_bytes()
    assert data.startswith(PNG_MAGIC)
    size = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    svg = ET.parse(tmp_path / "x.svg").getroot()
    assert size == (int(svg.get("width")), int(svg.get("height")))
