"""Symbols: MXNet JSON in and out without loss, names, inference, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx

NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]


@pytest.mark.parametrize("name", NAMES)
def test_json_round_trip_is_byte_identical(name: str, tmp_path: Path) -> None:
    path = MODELS / name / "model-symbol.json"
    sym = mx.sym.load(path)
    assert sym.tojson() == path.read_text()
    sym.save(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()
    assert mx.sym.load_json(sym.tojson()).tojson() == sym.tojson()


def test_lists_follow_mxnet_naming() -> None:
    sym = mx.sym.load(MODELS / "mobilenetv2_1_0" / "model-symbol.json")
    arguments, aux = sym.list_arguments(), sym.list_auxiliary_states()
    assert arguments[0] == "data"
    assert all(name.endswith(("running_mean", "running_var")) for name in aux)
    assert len(aux) == 2 * sum(1 for n in json.loads(sym.tojson())["nodes"]
                               if n["op"] == "BatchNorm")
    assert not set(arguments) & set(aux)
    params, _ = mx.model.load_params(MODELS / "mobilenetv2_1_0" / "model-0000.params")
    assert set(params) == set(arguments) - {"data"}
    internals = sym.get_internals()
    outputs = internals.list_outputs()
    assert outputs[0] == "data" and sym.list_outputs()[0] in outputs
    last_conv = [name for name in outputs if name.endswith("conv0_fwd_output")][0]
    assert internals[last_conv].list_outputs() == [last_conv]


def _small_net():
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data=data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv0")
    bn = mx.sym.BatchNorm(conv, name="bn0")
    act = mx.sym.Activation(bn, act_type="relu", name="relu0")
    fc = mx.sym.FullyConnected(act, num_hidden=5, name="fc0")
    return mx.sym.softmax(fc, name="prob")


def test_composition_names_and_shapes() -> None:
    net = _small_net()
    assert net.list_arguments() == ["data", "conv0_weight", "conv0_bias", "bn0_gamma",
                                    "bn0_beta", "fc0_weight", "fc0_bias"]
    assert net.list_auxiliary_states() == ["bn0_moving_mean", "bn0_moving_var"]
    assert net.list_outputs() == ["prob_output"]
    arg_shapes, out_shapes, aux_shapes = net.infer_shape(data=(2, 3, 8, 8))
    assert arg_shapes == [(2, 3, 8, 8), (4, 3, 3, 3), (4,), (4,), (4,), (5, 256), (5,)]
    assert out_shapes == [(2, 5)] and aux_shapes == [(4,), (4,)]
    assert net.infer_shape() == (None, None, None)
    partial = net.infer_shape_partial()
    assert partial[0][0] is None
    arg_types, out_types, _ = net.infer_type(data=np.float32)
    assert set(arg_types) == {np.dtype(np.float32)} and out_types == [np.dtype(np.float32)]
    group = mx.sym.Group([net, net.get_internals()["relu0_output"]])
    assert group.list_outputs() == ["prob_output", "relu0_output"]
    assert mx.sym.load_json(group.tojson()).list_outputs() == group.list_outputs()


def test_automatic_names_and_arithmetic() -> None:
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    total = (a + b) * 2 - 1
    exe = total.bind(mx.cpu(), {"a": mx.nd.array([1.0, 2.0]), "b": mx.nd.array([3.0, 4.0])})
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), [7.0, 11.0])
    auto = mx.sym.Activation(a, act_type="tanh")
    assert auto.name.startswith("activation")


def test_shape_hints_and_errors() -> None:
    data = mx.sym.Variable("data", shape=(0, 3, 8, 8))
    conv = mx.sym.Convolution(data, num_filter=2, kernel=(3, 3), name="c")
    assert conv.infer_shape(data=(5, 3, 8, 8))[1] == [(5, 2, 6, 6)]
    with pytest.raises(mx.ShapeError, match="__shape__"):
        conv.infer_shape(data=(5, 4, 8, 8))
    with pytest.raises(mx.ShapeError, match="c"):
        conv.infer_shape(data=(5, 3, 8, 8), c_weight=(2, 3, 5, 5))
    with pytest.raises(mx.GraphError, match="not among the graph's inputs"):
        conv.infer_shape(date=(1, 3, 8, 8))


def _graph(nodes, heads=None):
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": heads or [[1, 0, 0]],
                       "attrs": {"mxnet_version": ["int", 10901]}})


VAR = {"op": "null", "name": "x", "inputs": []}


@pytest.mark.parametrize("text, error, match", [
    ("{", mx.GraphError, "not valid JSON"),
    ("[]", mx.GraphError, "nodes"),
    (_graph([VAR, {"op": "relu", "name": "r", "inputs": [[1, 0, 0]]}]), mx.GraphError,
     "does not precede"),
    (_graph([VAR, {"op": "relu", "name": "r", "inputs": [[7, 0, 0]]}]), mx.GraphError,
     "refers to node 7"),
    (_graph([VAR, {"op": "Frobnicate", "name": "f", "inputs": [[0, 0, 0]]}]),
     mx.UnknownOperatorError, "Frobnicate"),
    (_graph([VAR, {"op": "Activation", "name": "a", "attrs": {"act_type": "blue"},
                   "inputs": [[0, 0, 0]]}]), mx.OperatorError, "act_type"),
    (_graph([VAR, {"op": "Activation", "name": "a", "inputs": [[0, 0, 0]]}]),
     mx.OperatorError, "act_type"),
    (_graph([VAR, {"op": "elemwise_add", "name": "s", "inputs": [[0, 0, 0]]}]), mx.GraphError,
     "has 1 inputs, expected 2"),
    (_graph([VAR, {"op": "Activation", "name": "a", "attrs": {"act_type": "relu"},
                   "inputs": [[0, 3, 0]]}]), mx.GraphError, "output 3"),
    (_graph([VAR], heads=[[5, 0, 0]]), mx.GraphError, "head 0"),
])
def test_malformed_json_is_a_clear_error(text: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        mx.sym.load_json(text)


def test_hostile_json_and_attributes() -> None:
    with pytest.raises(mx.GraphError, match="nested too deeply"):
        mx.sym.load_json("[" * 100000 + "]" * 100000)
    hostile = _graph([VAR, {"op": "Convolution", "name": "c", "inputs": [[0, 0, 0]],
                            "attrs": {"kernel": "(" * 50000 + ")" * 50000,
                                      "num_filter": "1"}}])
    with pytest.raises(mx.OperatorError, match="kernel"):
        mx.sym.load_json(hostile)
    with pytest.raises(mx.OperatorError, match="num_filter"):
        mx.sym.load_json(_graph([VAR, {"op": "Convolution", "name": "c", "inputs": [[0, 0, 0]],
                                       "attrs": {"kernel": "(3, 3)",
                                                 "num_filter": "9" * 10000}}]))


def test_missing_file() -> None:
    with pytest.raises(mx.ModelFileNotFoundError, match="symbol file .* not found") as raised:
        mx.sym.load("/nonexistent/model-symbol.json")
    assert isinstance(raised.value, FileNotFoundError)
    assert raised.value.filename == "/nonexistent/model-symbol.json"
