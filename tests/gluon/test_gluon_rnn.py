"""gluon.rnn layers and cells against MXNet 1.9.1's outputs.

tests/models/rnn/make_rnn_models.py made the files with MXNet: each layer's
save_parameters file (MXNet's structural names, _unfused.0.l_cell.i2h_weight)
and its inputs and outputs; each cell's parameters and four steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import InvalidArgumentError, ShapeError
from acc_host.gluon import rnn

MODELS = Path(__file__).resolve().parents[1] / "models" / "rnn"

LAYERS: dict[str, Callable[[], rnn.RNN | rnn.LSTM | rnn.GRU]] = {
    "lstm_bi2": lambda: rnn.LSTM(8, num_layers=2, bidirectional=True, prefix="lstm_bi2_"),
    "gru_bi2": lambda: rnn.GRU(8, num_layers=2, bidirectional=True, input_size=6,
                               prefix="gru_bi2_"),
    "rnn_tanh_ntc": lambda: rnn.RNN(8, activation="tanh", layout="NTC", prefix="rnn_tanh_ntc_"),
    "lstmp": lambda: rnn.LSTM(8, num_layers=2, projection_size=5, prefix="lstmp_"),
}
CONTEXTS = {"cpu": mx.cpu, "cpu_ref": lambda: mx.cpu_ref(0), "mlu": lambda: mx.mlu(0)}


def _io(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(MODELS / f"{name}-io.npz"))


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("ctx", sorted(CONTEXTS))
def test_layer_matches_mxnet(name: str, hybridize: bool, ctx: str) -> None:
    context = CONTEXTS[ctx]()
    io = _io(name)
    net = LAYERS[name]()
    net.initialize(ctx=context)
    x = mx.nd.array(io["input_data0"], ctx=context)
    net(x)  # the first forward learns the input width
    net.load_parameters(str(MODELS / f"{name}.params"), ctx=context)
    if hybridize:
        net.hybridize()
    states = [mx.nd.array(io[f"input_data{k}"], ctx=context)
              for k in range(1, sum(key.startswith("input_") for key in io))]
    if name == "gru_bi2":  # exported without states: gluon's zero states
        outs = [net(x)]
    else:
        out, new_states = net(x, states)
        outs = [out, *new_states]
    for k, value in enumerate(outs):
        np.testing.assert_allclose(value.asnumpy(), io[f"output_{k}"], rtol=1e-5, atol=1e-6)


def test_parameter_names_and_save_are_mxnet_s(tmp_path: Path) -> None:
    net = LAYERS["lstm_bi2"]()
    net.initialize()
    net(mx.nd.array(_io("lstm_bi2")["input_data0"]))
    assert list(net.collect_params())[:4] == ["lstm_bi2_l0_i2h_weight", "lstm_bi2_l0_h2h_weight",
                                              "lstm_bi2_l0_i2h_bias", "lstm_bi2_l0_h2h_bias"]
    net.load_parameters(str(MODELS / "lstm_bi2.params"))
    net.save_parameters(str(tmp_path / "again.params"))
    assert (tmp_path / "again.params").read_bytes() == (MODELS / "lstm_bi2.params").read_bytes()


def test_export_is_mxnet_s_graph(tmp_path: Path) -> None:
    io = _io("lstm_bi2")
    net = LAYERS["lstm_bi2"]()
    net.initialize()
    net.hybridize()
    x = mx.nd.array(io["input_data0"])
    net(x, [mx.nd.array(io["input_data1"]), mx.nd.array(io["input_data2"])])
    net.export(str(tmp_path / "mine"))
    ours = json.loads((tmp_path / "mine-symbol.json").read_text())
    theirs = json.loads((MODELS / "lstm_bi2-symbol.json").read_text())
    assert [n["op"] for n in ours["nodes"]] == [n["op"] for n in theirs["nodes"]]
    assert [n["name"] for n in ours["nodes"] if n["op"] == "null"] == \
        [n["name"] for n in theirs["nodes"] if n["op"] == "null"]
    rnn_attrs = [n["attrs"] for n in ours["nodes"] if n["op"] == "RNN"][0]
    expected = [n["attrs"] for n in theirs["nodes"] if n["op"] == "RNN"][0]
    for key in ("mode", "num_layers", "state_size", "bidirectional", "state_outputs"):
        assert rnn_attrs[key] == expected[key]


def test_bad_state_shape_is_a_shape_error() -> None:
    net = rnn.GRU(4, input_size=3)
    net.initialize()
    with pytest.raises(ShapeError, match="invalid recurrent state shape"):
        net(mx.nd.zeros((2, 5, 3)), [mx.nd.zeros((1, 4, 4))])


def test_bad_arguments_are_typed() -> None:
    with pytest.raises(InvalidArgumentError, match="layout"):
        rnn.LSTM(4, layout="CTN")
    with pytest.raises(InvalidArgumentError, match="activation"):
        rnn.RNN(4, activation="sigmoid")


CELLS = {
    "cell_rnn": lambda: rnn.RNNCell(8, activation="tanh"),
    "cell_lstm": lambda: rnn.LSTMCell(8),
    "cell_gru": lambda: rnn.GRUCell(8, input_size=6),
}


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("hybridize", [False, True])
def test_cell_matches_mxnet(name: str, hybridize: bool) -> None:
    io = _io(name)
    states = [mx.nd.array(io[key]) for key in sorted(io) if key.startswith("input_state")]
    cell = CELLS[name]()
    cell.initialize()
    cell(mx.nd.array(io["input_data"][0]), states)
    cell.load_parameters(str(MODELS / f"{name}.params"))
    if hybridize:
        cell.hybridize()
    outs = []
    for step in io["input_data"]:
        out, states = cell(mx.nd.array(step), states)
        outs.append(out.asnumpy())
    np.testing.assert_allclose(np.stack(outs), io["output"], rtol=1e-5, atol=1e-6)
    for k, state in enumerate(states):
        np.testing.assert_allclose(state.asnumpy(), io[f"output_state{k}"], rtol=1e-5,
                                   atol=1e-6)
    begin = [mx.nd.array(io[key]) for key in sorted(io) if key.startswith("input_state")]
    merged, _ = cell.unroll(len(outs), mx.nd.array(io["input_data"]), begin, layout="TNC",
                            merge_outputs=True)
    np.testing.assert_allclose(merged.asnumpy(), io["output"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("ctx", sorted(CONTEXTS))
def test_layer_and_export_at_other_shapes(name: str, ctx: str) -> None:
    """The hybridized layer, and its MXNet export as a SymbolBlock, at the
    other lengths and batches MXNet ran (one bound executor per shape)."""
    context = CONTEXTS[ctx]()
    io = _io(name)
    shapes = sorted({key.split("_")[0] for key in io if key.startswith("s")})
    assert len(shapes) == 2
    net = LAYERS[name]()
    net.initialize(ctx=context)
    net(mx.nd.array(io["input_data0"], ctx=context))
    net.load_parameters(str(MODELS / f"{name}.params"), ctx=context)
    net.hybridize()
    inputs = sorted(key[len("input_"):] for key in io if key.startswith("input_"))
    block = mx.gluon.SymbolBlock.imports(str(MODELS / f"{name}-symbol.json"), inputs,
                                         str(MODELS / f"{name}-0000.params"), ctx=context)
    for prefix in shapes:
        given = [mx.nd.array(io[f"{prefix}_input_{key}"], ctx=context) for key in inputs]
        out, states = net(given[0], given[1:])
        for k, value in enumerate([out, *states]):
            np.testing.assert_allclose(value.asnumpy(), io[f"{prefix}_output_{k}"],
                                       rtol=1e-5, atol=1e-6)
        exported = block(*given)
        exported = exported if isinstance(exported, list) else [exported]
        for k, value in enumerate(exported):
            np.testing.assert_allclose(value.asnumpy(), io[f"{prefix}_output_{k}"],
                                       rtol=1e-5, atol=1e-6)
