"""Captures what MXNet 1.9.1's mx.viz.plot_network draws for the models in
tests/models: every node it adds to its graphviz Digraph (name, label, fill
colour, shape) and every edge (from the input to the reader, as drawn, and
its label), recorded from the Digraph's node() and edge() calls.

Runs in a side environment with MXNet and the graphviz Python package (the
dot program is not needed; it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_plot_expected.py tests/mxnet_expected/viz

Writes plot_network.json: {case: {"nodes": [...], "edges": [...]}} for each
model with shapes, and for two of them also without shapes and with weights
shown, and with dtypes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ("squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "squeezenet_biased")
VARIANTS = ("squeezenet1_1", "transformer_enc")  # also without shapes, and with dtypes


def capture(mx: Any, graphviz: Any, symbol: Any, **kwargs: Any) -> dict[str, Any]:
    nodes: list[dict[str, str]] = []
    edges: list[dict[str, str]] = []
    original_node, original_edge = graphviz.Digraph.node, graphviz.Digraph.edge

    def node(self: Any, name: str, label: str | None = None, **attrs: str) -> None:
        nodes.append({"name": name, "label": label if label is not None else name,
                      "fillcolor": attrs.get("fillcolor", ""), "shape": attrs.get("shape", "")})
        original_node(self, name, label, **attrs)

    def edge(self: Any, tail_name: str, head_name: str, label: str | None = None,
             **attrs: str) -> None:
        # MXNet adds (reader, input) with dir=back: drawn from the input to the reader.
        edges.append({"source": head_name, "target": tail_name, "label": label or ""})
        original_edge(self, tail_name, head_name, label, **attrs)

    graphviz.Digraph.node, graphviz.Digraph.edge = node, edge
    try:
        mx.viz.plot_network(symbol, **kwargs)
    finally:
        graphviz.Digraph.node, graphviz.Digraph.edge = original_node, original_edge
    return {"nodes": nodes, "edges": edges}


def main() -> int:
    import graphviz
    import mxnet as mx
    import numpy as np

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    cases: dict[str, Any] = {}
    for name in MODELS:
        folder = ROOT / "tests" / "models" / name
        symbol = mx.sym.load(str(folder / "model-symbol.json"))
        shape = tuple(np.load(folder / "input_0.npy").shape)
        cases[f"{name}-shape"] = capture(mx, graphviz, symbol, shape={"data": shape})
        if name in VARIANTS:
            cases[f"{name}-weights"] = capture(mx, graphviz, symbol, hide_weights=False)
            cases[f"{name}-dtype"] = capture(mx, graphviz, symbol, shape={"data": shape},
                                             dtype={"data": np.float32})
    # One line per model and variant, compact.
    lines = [f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}"
             for key, value in cases.items()]
    (out / "plot_network.json").write_text("{\n" + ",\n".join(lines) + "\n}\n",
                                           encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
