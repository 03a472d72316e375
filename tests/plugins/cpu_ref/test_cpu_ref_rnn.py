"""cpu_ref's RNN as a loaded model: the weights packed at loadModel, packed
again when infer() is given new ones, fast and reference kernels, against
the host's numpy operator (the oracle, itself checked against MXNet and
onnxruntime in tests/ops and tests/onnx).

The operator's single cases (imperative and one-node models, every mode,
LSTMP, clip, sequence_length) are in tests/cpu_ref_cases.py, which
test_cpu_ref_ops.py and test_cpu_ref_reference_kernels.py run.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.cpu_ref_runs import kernels

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.errors import AccHostError
from acc_host.ops import get
from acc_host.ops.rnn import layout, parameter_count

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")




def _rnn_graph(attrs: dict, steps: int, batch: int, features: int, seed: int
               ) -> tuple[mx.sym.Symbol, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One RNN node whose parameter vector is a weight (as the ONNX importer
    makes it); returns the symbol, its data inputs and its weights."""
    rng = np.random.default_rng(seed)
    sizes = layout(get("RNN").parse(attrs), features)
    names = ["data", "parameters", "state"] + (["state_cell"] if attrs["mode"] == "lstm" else [])
    symbol = mx.sym.RNN(*[mx.sym.Variable(name) for name in names], name="rnn", **attrs)
    data = {"data": rng.uniform(-1, 1, (steps, batch, features)).astype(np.float32),
            "state": rng.uniform(-0.5, 0.5, sizes.state_shape(batch)).astype(np.float32)}
    if attrs["mode"] == "lstm":
        data["state_cell"] = rng.uniform(-0.5, 0.5, sizes.cell_shape(batch)).astype(np.float32)
    weights = {"parameters": rng.uniform(-0.4, 0.4, parameter_count(sizes)).astype(np.float32)}
    return symbol, data, weights


def _host(symbol: mx.sym.Symbol, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    args = {name: mx.nd.array(value) for name, value in feeds.items()}
    executor = symbol.bind(mx.cpu(), args)
    return [out.asnumpy() for out in executor.forward()]


MODELS = {
    "lstm_bidirectional_2": dict(mode="lstm", state_size=16, num_layers=2, bidirectional=True,
                                 state_outputs=True),
    "gru_2": dict(mode="gru", state_size=70, num_layers=2, state_outputs=True),
    "rnn_tanh": dict(mode="rnn_tanh", state_size=9, num_layers=1, state_outputs=True),
    "rnn_relu_bidirectional": dict(mode="rnn_relu", state_size=5, num_layers=1,
                                   bidirectional=True),
    "lstmp": dict(mode="lstm", state_size=20, num_layers=2, projection_size=7,
                  state_outputs=True),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("which", ["fast", "reference"])
def test_loaded_model_matches_host(library, name: str, which: str) -> None:
    attrs = MODELS[name]
    for seed, (steps, batch, features) in enumerate([(7, 3, 5), (1, 1, 130), (20, 2, 64)]):
        symbol, data, weights = _rnn_graph(attrs, steps, batch, features, seed)
        expected = _host(symbol, {**data, **weights})
        graph = annotate_symbol(symbol, {key: value.shape for key, value in data.items()},
                                weights=weights)
        with kernels(library, which), LoadedModel(library, graph, weights) as model:
            outputs = list(model.infer(data).values())
        assert len(outputs) == len(expected)
        for ours, theirs in zip(outputs, expected):
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def test_new_weights_at_infer_are_packed_again(library) -> None:
    symbol, data, weights = _rnn_graph(MODELS["lstm_bidirectional_2"], 6, 2, 4, 0)
    graph = annotate_symbol(symbol, {key: value.shape for key, value in data.items()},
                            weights=weights)
    other = {"parameters": (weights["parameters"][::-1] * 0.9).copy()}
    with LoadedModel(library, graph, weights) as model:
        first = list(model.infer(data).values())
        second = list(model.infer(data, weights=other).values())
        third = list(model.infer(data).values())  # the new weights stay
    for ours, theirs in zip(first, _host(symbol, {**data, **weights})):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    for ours, again, theirs in zip(second, third, _host(symbol, {**data, **other})):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(ours, again)


def test_computed_parameters_run_unpacked(library) -> None:
    """A vector computed in the graph (gluon's _rnn_param_concat) is packed by
    the kernel at each call, with the same results."""
    attrs = MODELS["gru_2"]
    symbol, data, weights = _rnn_graph(attrs, 5, 2, 3, 1)
    half = weights["parameters"].size // 2
    parts = {"p0": weights["parameters"][:half], "p1": weights["parameters"][half:]}
    joined = mx.sym._rnn_param_concat(mx.sym.Variable("p0"), mx.sym.Variable("p1"), dim=0,
                                      num_args=2)
    cell = [mx.sym.Variable("state_cell")] if attrs["mode"] == "lstm" else []
    computed = mx.sym.RNN(mx.sym.Variable("data"), joined, mx.sym.Variable("state"), *cell,
                          name="rnn", **attrs)
    graph = annotate_symbol(computed, {key: value.shape for key, value in data.items()},
                            weights=parts)
    with LoadedModel(library, graph, parts) as model:
        outputs = list(model.infer(data).values())
    for ours, theirs in zip(outputs, _host(symbol, {**data, **weights})):
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def test_bad_sequence_length_is_refused_with_the_value(library) -> None:
    params = np.zeros(parameter_count(layout(get("RNN").parse(
        dict(mode="gru", state_size=2, num_layers=1)), 3)), np.float32)
    ctx = mx.cpu_ref(0)
    with pytest.raises(AccHostError, match="sequence_length"):
        mx.nd.RNN(mx.nd.zeros((2, 1, 3), ctx=ctx), mx.nd.array(params, ctx=ctx),
                  mx.nd.zeros((1, 1, 2), ctx=ctx), mx.nd.array([3], dtype="int32", ctx=ctx),
                  mode="gru", state_size=2, num_layers=1, use_sequence_length=True).asnumpy()
