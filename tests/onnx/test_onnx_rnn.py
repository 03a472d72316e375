"""ONNX RNN/LSTM/GRU import against onnxruntime (a test-only oracle).

Two PyTorch exports (tests/onnx_models/make_torch_rnn_models.py: a 2-layer
bidirectional LSTM, time-major, and a 2-layer bidirectional GRU,
batch-first, each with a Linear head) run at several sequence lengths and
batches on the CPU path, cpu_ref and mlu. Single nodes built here cover the
attributes PyTorch does not write (layout=1, non-default activations, clip,
sequence_lens, peepholes, linear_before_reset=0, absent states), each
checked against onnxruntime (for layout=1, which onnxruntime refuses, the
layout=0 node between Transposes), and which of them import to MXNet's RNN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.onnx.backend import prepare  # noqa: E402

MODELS = Path(__file__).resolve().parents[1] / "onnx_models"
RTOL, ATOL = 1e-4, 1e-5
CONTEXTS = {"cpu": mx.cpu, "cpu_ref": lambda: mx.cpu_ref(0), "mlu": lambda: mx.mlu(0)}


def _oracle(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime. It refuses layout=1, so a layout=1 node runs there as the
    layout=0 node between Transposes (X and states batch-first -> time-first,
    outputs back)."""
    (node,) = model.graph.node
    if not any(attr.name == "layout" and attr.i == 1 for attr in node.attribute):
        return _onnxruntime(model, feeds)
    nodes, inputs = [], list(node.input)
    for k, perm in ((0, [1, 0, 2]), (5, [1, 0, 2]), (6, [1, 0, 2])):
        if k < len(inputs) and inputs[k]:
            nodes.append(helper.make_node("Transpose", [inputs[k]], [f"{inputs[k]}_t"],
                                          perm=perm))
            inputs[k] = f"{inputs[k]}_t"
    attrs = {attr.name: helper.get_attribute_value(attr) for attr in node.attribute
             if attr.name != "layout"}
    attrs = {key: [v.decode() for v in value] if key == "activations" else value
             for key, value in attrs.items()}
    outputs = [f"{name}_t" for name in node.output]
    nodes.append(helper.make_node(node.op_type, inputs, outputs, **attrs))
    # Y (T, D, N, H) -> (N, T, D, H); states (D, N, H) -> (N, D, H)
    nodes += [helper.make_node("Transpose", [out], [name],
                               perm=[2, 0, 1, 3] if k == 0 else [1, 0, 2])
              for k, (out, name) in enumerate(zip(outputs, node.output))]
    graph = helper.make_graph(nodes, "time_first", list(model.graph.input),
                              list(model.graph.output), list(model.graph.initializer))
    time_first = helper.make_model(graph, opset_imports=list(model.opset_import))
    time_first.ir_version = model.ir_version
    return _onnxruntime(time_first, feeds)


def _onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ops(rep: Any) -> list[str]:
    return [node["op"] for node in json.loads(rep.imported.symbol.tojson())["nodes"]]


def _feeds(name: str, steps: int, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    batch_first = "batch_first" in name
    feeds = {"input": rng.standard_normal((batch, steps, 6) if batch_first
                                          else (steps, batch, 6)).astype(np.float32),
             "h0": (0.5 * rng.standard_normal((4, batch, 8))).astype(np.float32)}
    if name.startswith("lstm"):
        feeds["c0"] = (0.5 * rng.standard_normal((4, batch, 8))).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", ["lstm_bi2", "gru_bi2_batch_first"])
def test_pytorch_sample_matches_torch(name: str) -> None:
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    data = np.load(MODELS / f"{name}.npz")
    feeds = {value.name: data[value.name] for value in model.graph.input}
    outputs = prepare(model).run(feeds)
    assert len(outputs) == len(model.graph.output)
    for k, ours in enumerate(outputs):
        np.testing.assert_allclose(ours, data[f"output_{k}"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", ["lstm_bi2", "gru_bi2_batch_first"])
@pytest.mark.parametrize("ctx", sorted(CONTEXTS))
def test_pytorch_export_at_several_shapes(name: str, ctx: str) -> None:
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    rep = prepare(model, accelerator=CONTEXTS[ctx]())
    for seed, (steps, batch) in enumerate([(5, 2), (1, 1), (13, 3), (40, 4)]):
        feeds = _feeds(name, steps, batch, seed)
        expected = _onnxruntime(model, feeds)
        outputs = rep.run(feeds)
        for ours, theirs in zip(outputs, expected):
            assert ours.shape == theirs.shape
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    ops = _ops(rep)
    # PyTorch's LSTM/GRU (default activations, lbr=1 for GRU) is MXNet's RNN
    assert ops.count("RNN") == 2 and "_onnx_rnn" not in ops


# ---- single nodes --------------------------------------------------------------------------

GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _node_model(kind: str, steps: int, batch: int, features: int, hidden: int,
                attrs: dict[str, Any], optional: tuple[str, ...], seed: int = 0,
                lengths: list[int] | None = None) -> tuple[Any, dict[str, np.ndarray]]:
    """One kind node with constant W/R/B/P and the listed optional inputs
    (B, sequence_lens, initial_h, initial_c, P); initial states are graph
    inputs."""
    rng = np.random.default_rng(seed)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    gates = GATES[kind]
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, gates * hidden, features))
                                     .astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, gates * hidden, hidden))
                                     .astype(np.float32), "R")]
    x_shape = (batch, steps, features) if layout else (steps, batch, features)
    state_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    feeds = {"X": rng.uniform(-1, 1, x_shape).astype(np.float32)}
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    names = ["X", "W", "R"]
    for slot in ("B", "sequence_lens", "initial_h", "initial_c", "P"):
        if slot not in optional:
            names.append("")
            continue
        names.append(slot)
        if slot == "B":
            inits.append(numpy_helper.from_array(
                rng.uniform(-0.5, 0.5, (dirs, 2 * gates * hidden)).astype(np.float32), "B"))
        elif slot == "P":
            inits.append(numpy_helper.from_array(
                rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(np.float32), "P"))
        elif slot == "sequence_lens":
            inits.append(numpy_helper.from_array(np.array(lengths, np.int32), "sequence_lens"))
        else:
            feeds[slot] = rng.uniform(-0.5, 0.5, state_shape).astype(np.float32)
            graph_inputs.append(helper.make_tensor_value_info(slot, TensorProto.FLOAT,
                                                              state_shape))
    while names[-1] == "":
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, names, outputs, hidden_size=hidden, **attrs)
    graph = helper.make_graph([node], "rnn", graph_inputs,
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                               for n in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


CASES = {
    # name: (kind, attrs, optional inputs, lengths, imported as MXNet's RNN)
    "lstm_layout1_bidirectional": ("LSTM", {"direction": "bidirectional", "layout": 1},
                                   ("B", "initial_h", "initial_c"), None, True),
    "gru_lbr1": ("GRU", {"linear_before_reset": 1}, ("B", "initial_h"), None, True),
    "gru_lbr1_reverse": ("GRU", {"direction": "reverse", "linear_before_reset": 1},
                         ("B", "initial_h"), None, False),
    "rnn_relu_bidirectional": ("RNN", {"direction": "bidirectional",
                                       "activations": ["Relu", "Relu"]}, ("B",), None, True),
    "lstm_no_states": ("LSTM", {}, ("B",), None, True),
    "gru_lbr0": ("GRU", {}, ("B", "initial_h"), None, False),
    "lstm_peepholes": ("LSTM", {}, ("B", "initial_h", "initial_c", "P"), None, False),
    "lstm_clip": ("LSTM", {"clip": 0.3}, ("B",), None, False),
    "lstm_input_forget": ("LSTM", {"input_forget": 1}, ("B",), None, False),
    "gru_activations": ("GRU", {"activations": ["HardSigmoid", "Softsign"],
                                "activation_alpha": [0.3], "activation_beta": [0.4],
                                "linear_before_reset": 1}, ("B",), None, False),
    "rnn_affine_layout1": ("RNN", {"activations": ["Affine"], "activation_alpha": [0.7],
                                   "activation_beta": [0.1], "layout": 1}, ("B",), None, False),
    "lstm_sequence_lens_bidirectional": ("LSTM", {"direction": "bidirectional"},
                                         ("B", "sequence_lens", "initial_h", "initial_c"),
                                         [5, 2, 4], False),
    "gru_sequence_lens_layout1": ("GRU", {"layout": 1, "linear_before_reset": 1},
                                  ("B", "sequence_lens"), [1, 5, 3], False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_matches_onnxruntime(case: str) -> None:
    kind, attrs, optional, lengths, as_mxnet = CASES[case]
    model, feeds = _node_model(kind, 5, 3, 4, 6, attrs, optional, lengths=lengths)
    expected = _oracle(model, feeds)
    rep = prepare(model)
    outputs = rep.run(feeds)
    for ours, theirs in zip(outputs, expected):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    ops = _ops(rep)
    assert ("RNN" in ops) == as_mxnet and ("_onnx_rnn" in ops) != as_mxnet


@pytest.mark.parametrize("case", ["lstm_layout1_bidirectional", "lstm_peepholes"])
def test_node_on_cpu_ref_falls_back_where_needed(case: str) -> None:
    kind, attrs, optional, lengths, _ = CASES[case]
    model, feeds = _node_model(kind, 4, 2, 3, 5, attrs, optional, seed=1, lengths=lengths)
    outputs = prepare(model, accelerator=mx.cpu_ref(0)).run(feeds)
    for ours, theirs in zip(outputs, _oracle(model, feeds)):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def test_bad_activation_count_is_typed() -> None:
    model, feeds = _node_model("GRU", 3, 1, 2, 2, {"activations": ["Sigmoid"]}, ("B",))
    with pytest.raises(mx.errors.AccHostError, match="activations"):
        prepare(model).run(feeds)
