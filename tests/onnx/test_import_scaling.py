"""The ONNX import's work grows linearly with the model.

Translators ask for the shapes of values while the graph is built (MatMul as
FullyConnected, an Add of a residual, LayerNormalization over the last
axis); with a symbolic batch axis every question is answered at two probe
extents. Inferring the whole graph built so far at each question made the
import quadratic: ViT-S/16 and BERT-base took 83 s to prepare. These tests
count the nodes shape inference visits on a transformer-like graph at two
depths (a count, not a time, so a busy machine cannot fail them) and check
the imported model against onnxruntime.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from acc_host import graph as graph_module  # noqa: E402
from acc_host.onnx import backend  # noqa: E402
from acc_host.onnx.importer import import_graph  # noqa: E402

HIDDEN = 8
SEQUENCE = 4


def transformer_like(layers: int, batch: str | int = "batch") -> onnx.ModelProto:
    """layers pre-norm blocks: LayerNormalization, MatMul by a constant, Add
    of a bias, Relu, Mul by a scalar, Add of the block's input (residual),
    over an input of shape (batch, SEQUENCE, HIDDEN)."""
    rng = np.random.default_rng(0)
    nodes, weights = [], []

    def constant(name: str, shape: tuple[int, ...]) -> str:
        weights.append(numpy_helper.from_array(
            rng.standard_normal(shape).astype(np.float32), name))
        return name

    x = "input"
    for i in range(layers):
        p = f"l{i}_"
        nodes += [
            helper.make_node("LayerNormalization",
                             [x, constant(p + "gamma", (HIDDEN,)), constant(p + "beta", (HIDDEN,))],
                             [p + "norm"], axis=-1),
            helper.make_node("MatMul", [p + "norm", constant(p + "w", (HIDDEN, HIDDEN))],
                             [p + "mm"]),
            helper.make_node("Add", [p + "mm", constant(p + "bias", (HIDDEN,))], [p + "biased"]),
            helper.make_node("Relu", [p + "biased"], [p + "relu"]),
            helper.make_node("Mul", [p + "relu", constant(p + "scale", (1,))], [p + "scaled"]),
            helper.make_node("Add", [p + "scaled", x], [p + "out"]),
        ]
        x = p + "out"
    graph = helper.make_graph(
        nodes, "transformer_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, SEQUENCE, HIDDEN])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, SEQUENCE, HIDDEN])],
        weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _nodes_inferred(model: onnx.ModelProto, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many graph nodes shape inference visits while model is imported."""
    visited = [0]
    original = graph_module.Graph.infer_shapes_values

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        visited[0] += len(self.nodes)
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(graph_module.Graph, "infer_shapes_values", counting)
        import_graph(model)
    return visited[0]


@pytest.mark.parametrize("batch", ["batch", 2], ids=["symbolic_batch", "fixed_batch"])
def test_shape_inference_work_is_linear_in_depth(batch: str | int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    shallow = _nodes_inferred(transformer_like(8, batch), monkeypatch)
    deep = _nodes_inferred(transformer_like(32, batch), monkeypatch)
    # 4x the layers: linear work is about 4x (quadratic was 14-16x here)
    assert deep <= 5 * shallow, (shallow, deep)


def test_questions_cost_a_bounded_number_of_node_visits(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = 32
    model = transformer_like(layers)
    visited = _nodes_inferred(model, monkeypatch)
    imported = import_graph(model)
    host_nodes = len(imported.symbol.graph.nodes)
    # each node inferred once per probe extent (two) and once statically,
    # plus the variables read by each small inferred piece
    assert visited <= 6 * host_nodes, (visited, host_nodes)


@pytest.mark.parametrize("layers", [3, 24])
def test_imported_transformer_matches_onnxruntime(layers: int) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = transformer_like(layers)
    x = np.random.default_rng(1).standard_normal((3, SEQUENCE, HIDDEN)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"input": x})[0]
    for accelerator in (None, "cpu_ref"):
        got = backend.prepare(model, accelerator=accelerator).run([x])[0]
        np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * max(1.0, layers / 4))
