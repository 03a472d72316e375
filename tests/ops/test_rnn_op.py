"""MXNet's fused RNN operator on the host CPU path.

Oracles: MXNet 1.9.1's own outputs for gluon.rnn exports (tests/models/rnn,
made by make_rnn_models.py), an independent per-step loop written here from
the equations for the single-layer cells, and for sequence_length, the same
operator run on each sample's truncated sequence alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import OperatorError, ShapeError
from acc_host.ops import get
from acc_host.ops.rnn import layout, parameter_count

MODELS = Path(__file__).resolve().parents[1] / "models" / "rnn"
EXPORTS = ("lstm_bi2", "gru_bi2", "rnn_tanh_ntc", "lstmp")


def _io(name: str) -> tuple[list[str], dict[str, np.ndarray]]:
    io = dict(np.load(MODELS / f"{name}-io.npz"))
    inputs = sorted(key[len("input_"):] for key in io if key.startswith("input_"))
    return inputs, io


@pytest.mark.parametrize("name", EXPORTS)
@pytest.mark.parametrize("ctx", ["cpu", "cpu_ref", "mlu"])
def test_mxnet_export_matches_mxnet(name: str, ctx: str) -> None:
    context = {"cpu": mx.cpu(), "cpu_ref": mx.cpu_ref(0), "mlu": mx.mlu(0)}[ctx]
    inputs, io = _io(name)
    block = mx.gluon.SymbolBlock.imports(str(MODELS / f"{name}-symbol.json"), inputs,
                                         str(MODELS / f"{name}-0000.params"), ctx=context)
    out = block(*[mx.nd.array(io[f"input_{key}"], ctx=context) for key in inputs])
    outs = out if isinstance(out, list) else [out]
    assert len(outs) == sum(key.startswith("output_") for key in io)
    for k, value in enumerate(outs):
        np.testing.assert_allclose(value.asnumpy(), io[f"output_{k}"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", EXPORTS)
def test_symbol_json_round_trip(name: str, tmp_path: Path) -> None:
    """The RNN node reads and writes back with MXNet's attributes and inputs."""
    symbol = mx.sym.load(str(MODELS / f"{name}-symbol.json"))
    symbol.save(str(tmp_path / "again.json"))
    ours = {node["name"]: node for node in json.loads((tmp_path / "again.json").read_text())
            ["nodes"]}
    theirs = [node for node in json.loads((MODELS / f"{name}-symbol.json").read_text())["nodes"]
              if node["op"] == "RNN"]
    assert len(theirs) == 1
    node = ours[theirs[0]["name"]]
    assert node["op"] == "RNN"
    assert node["attrs"] == theirs[0]["attrs"]
    assert len(node["inputs"]) == len(theirs[0]["inputs"])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _reference_layer(mode: str, x: np.ndarray, w: np.ndarray, u: np.ndarray, bw: np.ndarray,
                     bu: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
    """One forward layer, step by step, from MXNet's equations."""
    hidden = h.shape[1]
    outs = []
    for t in range(x.shape[0]):
        a, b = x[t] @ w.T + bw, h @ u.T + bu
        if mode == "lstm":
            s = a + b
            i, f = _sigmoid(s[:, :hidden]), _sigmoid(s[:, hidden:2 * hidden])
            g, o = np.tanh(s[:, 2 * hidden:3 * hidden]), _sigmoid(s[:, 3 * hidden:])
            c = f * c + i * g
            h = o * np.tanh(c)
        elif mode == "gru":
            r = _sigmoid(a[:, :hidden] + b[:, :hidden])
            z = _sigmoid(a[:, hidden:2 * hidden] + b[:, hidden:2 * hidden])
            n = np.tanh(a[:, 2 * hidden:] + r * b[:, 2 * hidden:])
            h = (1 - z) * n + z * h
        else:
            h = np.tanh(a + b) if mode == "rnn_tanh" else np.maximum(a + b, 0)
        outs.append(h)
    return np.stack(outs), h, c


@pytest.mark.parametrize("mode", ["rnn_relu", "rnn_tanh", "lstm", "gru"])
def test_single_layer_against_step_loop(mode: str) -> None:
    rng = np.random.default_rng(3)
    steps, batch, features, hidden = 6, 2, 5, 4
    gates = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}[mode]
    w = rng.uniform(-0.5, 0.5, (gates * hidden, features))
    u = rng.uniform(-0.5, 0.5, (gates * hidden, hidden))
    bw, bu = rng.uniform(-0.5, 0.5, (2, gates * hidden))
    x = rng.uniform(-1, 1, (steps, batch, features))
    h0, c0 = rng.uniform(-0.5, 0.5, (2, 1, batch, hidden))
    params = np.concatenate([w.ravel(), u.ravel(), bw, bu]).astype(np.float32)
    args = [mx.nd.array(x.astype(np.float32)), mx.nd.array(params),
            mx.nd.array(h0.astype(np.float32))]
    if mode == "lstm":
        args.append(mx.nd.array(c0.astype(np.float32)))
    outs = mx.nd.RNN(*args, mode=mode, state_size=hidden, num_layers=1, state_outputs=True)
    y, h, c = _reference_layer(mode, x, w, u, bw, bu, h0[0], c0[0])
    np.testing.assert_allclose(outs[0].asnumpy(), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1].asnumpy()[0], h, rtol=1e-5, atol=1e-6)
    if mode == "lstm":
        np.testing.assert_allclose(outs[2].asnumpy()[0], c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_sequence_length_is_each_sample_alone(mode: str, bidirectional: bool) -> None:
    rng = np.random.default_rng(5)
    steps, batch, features, hidden, layers = 7, 3, 4, 5, 2
    attrs = dict(mode=mode, state_size=hidden, num_layers=layers, bidirectional=bidirectional,
                 state_outputs=True)
    sizes = layout(get("RNN").parse(attrs), features)
    params = rng.uniform(-0.5, 0.5, parameter_count(sizes)).astype(np.float32)
    x = rng.uniform(-1, 1, (steps, batch, features)).astype(np.float32)
    h0 = rng.uniform(-0.5, 0.5, sizes.state_shape(batch)).astype(np.float32)
    c0 = rng.uniform(-0.5, 0.5, sizes.cell_shape(batch)).astype(np.float32)
    lengths = np.array([7, 3, 5], dtype=np.int32)
    cell = [mx.nd.array(c0)] if mode == "lstm" else []
    outs = mx.nd.RNN(mx.nd.array(x), mx.nd.array(params), mx.nd.array(h0), *cell,
                     mx.nd.array(lengths, dtype="int32"), use_sequence_length=True, **attrs)
    for b, length in enumerate(lengths):
        alone_cell = [mx.nd.array(c0[:, b:b + 1])] if mode == "lstm" else []
        alone = mx.nd.RNN(mx.nd.array(x[:length, b:b + 1]), mx.nd.array(params),
                          mx.nd.array(h0[:, b:b + 1]), *alone_cell, **attrs)
        y = outs[0].asnumpy()[:, b]
        np.testing.assert_allclose(y[:length], alone[0].asnumpy()[:, 0], rtol=1e-5, atol=1e-6)
        assert not y[length:].any()
        for k in range(1, len(outs)):
            np.testing.assert_allclose(outs[k].asnumpy()[:, b], alone[k].asnumpy()[:, 0],
                                       rtol=1e-5, atol=1e-6)


def test_shapes_and_outputs() -> None:
    data = mx.sym.Variable("data")
    rnn = mx.sym.RNN(data, mx.sym.Variable("p"), mx.sym.Variable("s"), mx.sym.Variable("c"),
                     mode="lstm", state_size=8, num_layers=2, bidirectional=True,
                     projection_size=5, state_outputs=True)
    arg_shapes, out_shapes, _ = rnn.infer_shape(data=(5, 3, 6))
    # every direction of every layer: i2h (32, in) + h2h (32, 5) + h2r (5, 8) + 2 x 32 biases
    per_direction = [32 * 6 + 32 * 5 + 40 + 64, 32 * 10 + 32 * 5 + 40 + 64]
    assert arg_shapes == [(5, 3, 6), (2 * sum(per_direction),), (4, 3, 5), (4, 3, 8)]
    assert out_shapes == [(5, 3, 10), (4, 3, 5), (4, 3, 8)]
    assert rnn.list_outputs()[1:] == ["rnn0_hy", "rnn0_cy"] or len(rnn.list_outputs()) == 3
    single = mx.sym.RNN(data, mx.sym.Variable("p"), mx.sym.Variable("s"), mode="gru",
                        state_size=4, num_layers=1)
    assert len(single.list_outputs()) == 1


@pytest.mark.parametrize("attrs, message", [
    (dict(mode="gru", projection_size=2), "projection_size is only supported"),
    (dict(mode="lstm", projection_size=8), "must be smaller than state_size"),
    (dict(mode="lstm", p=1.5), "p=1.5"),
    (dict(mode="tanh"), "expected one of"),
])
def test_bad_attributes_are_typed_errors(attrs: dict, message: str) -> None:
    x = mx.nd.zeros((2, 1, 3))
    cell = [mx.nd.zeros((1, 1, 8))] if attrs["mode"] == "lstm" else []
    with pytest.raises(OperatorError, match=message):
        mx.nd.RNN(x, mx.nd.zeros((100,)), mx.nd.zeros((1, 1, 8)), *cell,
                  state_size=8, num_layers=1, **attrs)


def test_wrong_parameter_length_names_the_input() -> None:
    with pytest.raises(ShapeError, match="parameters has shape"):
        mx.nd.RNN(mx.nd.zeros((2, 1, 3)), mx.nd.zeros((7,)), mx.nd.zeros((1, 1, 4)),
                  mode="rnn_tanh", state_size=4, num_layers=1)


def test_bad_sequence_length_is_a_shape_error() -> None:
    params = np.zeros(parameter_count(layout(get("RNN").parse(
        dict(mode="gru", state_size=2, num_layers=1)), 3)), np.float32)
    with pytest.raises(ShapeError, match="sequence_length"):
        mx.nd.RNN(mx.nd.zeros((2, 1, 3)), mx.nd.array(params), mx.nd.zeros((1, 1, 2)),
                  mx.nd.array([5], dtype="int32"), mode="gru", state_size=2, num_layers=1,
                  use_sequence_length=True).asnumpy()
