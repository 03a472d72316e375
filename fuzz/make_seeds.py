#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/
from real inputs: graph JSONs annotated by the host, model files exported by
the plugins themselves, .params files, symbol JSON and ONNX models written
by acc_host's own writers. The files are committed; rerun this script after
a format change (their names are stable, so a rerun shows up as a diff).

    PYTHONPATH=src python3 fuzz/make_seeds.py

Seeds are kept small (a few KiB each, the largest below 64 KiB): mutations
of a small input are cheap and reach the same code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
MODELS = ROOT / "tests" / "models"

os.environ.setdefault("MXNET_ACC_OFFLOAD_COST", "0")

import acc_host as mx  # noqa: E402
from acc_host.abi.annotate import annotate_symbol  # noqa: E402
from acc_host.abi.loaded_model import LoadedModel  # noqa: E402
from acc_host.ndarray import params_file  # noqa: E402


def _write(target: str, name: str, data: bytes | str) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    (folder / name).write_bytes(data)
    print(f"{target}/{name}: {len(data)} bytes")


# ---- small graphs, with their weights ------------------------------------------------------


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def relu_net():
    """data + w -> relu."""
    out = mx.sym.Activation(mx.sym.elemwise_add(mx.sym.Variable("data"), mx.sym.Variable("w"),
                                                name="add"), act_type="relu", name="act")
    return out, {"data": (2, 3)}, {"w": _rng(0).standard_normal((2, 3)).astype(np.float32)}


def conv_net():
    """conv -> batch norm -> relu -> max pool -> flatten -> fc -> softmax: every
    opcode of mlu_sim's ISA but matmul-free ones appears in its program."""
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, num_filter=3, kernel=(3, 3), pad=(1, 1), name="conv")
    x = mx.sym.BatchNorm(x, fix_gamma=False, name="bn")
    x = mx.sym.Activation(x, act_type="relu", name="relu")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(1, 1), pool_type="avg", name="avg")
    x = mx.sym.Flatten(x, name="flat")
    x = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    out = mx.sym.softmax(x, name="prob")
    rng = _rng(1)
    weights = {
        "conv_weight": rng.standard_normal((3, 2, 3, 3)), "conv_bias": rng.standard_normal(3),
        "bn_gamma": rng.uniform(0.5, 1.5, 3), "bn_beta": rng.standard_normal(3),
        "bn_moving_mean": rng.standard_normal(3), "bn_moving_var": rng.uniform(0.5, 1.5, 3),
        "fc_weight": rng.standard_normal((4, 3)), "fc_bias": rng.standard_normal(4),
    }
    return out, {"data": (1, 2, 4, 4)}, {k: v.astype(np.float32) for k, v in weights.items()}


def residual_net():
    """Two branches added, a copy and a concat: several segments and I/O slots."""
    data = mx.sym.Variable("data")
    a = mx.sym.Convolution(data, num_filter=2, kernel=(1, 1), name="a")
    b = mx.sym.Convolution(data, num_filter=2, kernel=(3, 3), pad=(1, 1), name="b")
    x = mx.sym.elemwise_add(a, b, name="sum")
    x = mx.sym.Activation(x, act_type="sigmoid", name="sig")
    x = mx.sym.Concat(x, a, dim=1, name="cat")
    out = mx.sym.Pooling(x, global_pool=True, kernel=(1, 1), pool_type="avg", name="gap")
    rng = _rng(2)
    weights = {"a_weight": rng.standard_normal((2, 2, 1, 1)), "a_bias": rng.standard_normal(2),
               "b_weight": rng.standard_normal((2, 2, 3, 3)), "b_bias": rng.standard_normal(2)}
    return out, {"data": (1, 2, 3, 3)}, {k: v.astype(np.float32) for k, v in weights.items()}


NETS = {"relu": relu_net, "conv": conv_net, "residual": residual_net}


def annotated(net, dev_id: int = 0) -> tuple[dict, dict]:
    symbol, shapes, weights = net()
    return annotate_symbol(symbol, {**shapes, **{k: v.shape for k, v in weights.items()}},
                           weights=weights, dev_id=dev_id), weights


# ---- the targets -------------------------------------------------------------------------


def graph_json_seeds() -> None:
    for name, net in NETS.items():
        graph, _ = annotated(net)
        _write("graph_json", f"{name}.json", json.dumps(graph))
    # A real model, annotated as the host passes it to plugins, and as MXNet wrote it.
    sym = mx.sym.load(str(MODELS / "transformer_enc" / "model-symbol.json"))
    arrays, names = params_file.load(MODELS / "transformer_enc" / "model-0000.params")
    weights = {n.split(":", 1)[1]: a for n, a in zip(names, arrays)}
    data_shape = np.load(MODELS / "transformer_enc" / "input_0.npy").shape
    graph = annotate_symbol(sym, {"data": data_shape}, weights=weights)
    _write("graph_json", "transformer_enc.json", json.dumps(graph, separators=(",", ":")))
    _write("graph_json", "squeezenet_symbol.json",
           (MODELS / "squeezenet1_1" / "model-symbol.json").read_text())
    # Corner cases of the grammar the real files do not show.
    _write("graph_json", "escapes.json",
           '{"nodes":[{"op":"null","name":"d\\u00e9j\\u00e0 \\ud83d\\ude00\\"\\\\\\/\\b\\f\\n'
           '\\r\\t","inputs":[]},{"op":"Activation","name":"a","attrs":{"act_type":"relu",'
           '"x":"-1.5e+3"},"inputs":[[0,0,0]]}],"arg_nodes":[0],"heads":[[1,0,0]],'
           '"attrs":{"mxnet_version":["int",10901]},"n":[true,false,null,-0.0,1E2]}')


def _export(context, net, name: str, target: str, precision: str | None = None) -> None:
    graph, weights = annotated(net, context.device_id)
    library = mx.get_library(context.device_type)
    if precision is not None:
        context.configure(precision=precision)
    try:
        with LoadedModel(library, graph, weights, dev_id=context.device_id) as model:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "model"
                context.configure(export_model=model.model_id, path=str(path))
                _write(target, name, path.read_bytes())
    finally:
        if precision is not None:
            context.configure(precision="fp32")


def model_file_seeds() -> None:
    mlu = mx.mlu(3)  # the card whose precision the tests change and restore
    for name, net in NETS.items():
        _export(mlu, net, f"{name}.model", "mlu_model")
    _export(mlu, conv_net, "conv_int8.model", "mlu_model", precision="int8")
    cpu_ref = mx.Context("cpu_ref", 0)
    for name, net in NETS.items():
        _export(cpu_ref, net, f"{name}.model", "cpu_ref_model")


def params_seeds() -> None:
    rng = _rng(3)
    arrays = [rng.standard_normal((2, 3)).astype(np.float32), np.arange(4, dtype=np.int64),
              np.array([True, False]), np.zeros((0, 3), np.float16)]
    _write("params", "named_v2.params",
           params_file.dumps(arrays, ["arg:w", "aux:m", "arg:flag", "arg:empty"]))
    _write("params", "unnamed_v3.params",
           params_file.dumps([np.float64(2.5), np.ones(3, np.uint8)], version=3))
    _, weights = annotated(conv_net)
    _write("params", "conv.params", params_file.dumps(
        list(weights.values()), [f"arg:{name}" for name in weights]))
    # Version 1 and pre-version-1 arrays, assembled by hand (params_file.py's tables).
    import struct
    v1 = struct.pack("<IiqqiiI", params_file.V1_MAGIC, 2, 1, 2, 1, 0, 0) + bytes(8)
    legacy = struct.pack("<IIIiiI", 2, 2, 1, 1, 0, 4) + bytes(8)
    header = struct.pack("<QQQ", params_file.LIST_MAGIC, 0, 2)
    _write("params", "v1_legacy.params", header + v1 + legacy + struct.pack("<Q", 0))


def symbol_json_seeds() -> None:
    for name, net in NETS.items():
        symbol, _, _ = net()
        _write("symbol_json", f"{name}-symbol.json", symbol.tojson())
    _write("symbol_json", "transformer_enc-symbol.json",
           (MODELS / "transformer_enc_mxcodes" / "model-symbol.json").read_text())
    _write("symbol_json", "squeezenet-symbol.json",
           (MODELS / "squeezenet1_1" / "model-symbol.json").read_text())
    # Pre-1.0 files spell attributes "attr" and "param".
    _write("symbol_json", "old_keys-symbol.json", json.dumps({
        "nodes": [{"op": "null", "name": "data", "inputs": []},
                  {"op": "null", "name": "fc_weight", "attr": {"__shape__": "(4, 0)"},
                   "inputs": []},
                  {"op": "FullyConnected", "name": "fc", "param": {"num_hidden": "4",
                                                                   "no_bias": "True"},
                   "inputs": [[0, 0], [1, 0]]},
                  {"op": "SoftmaxOutput", "name": "out", "inputs": [[2, 0]]}],
        "arg_nodes": [0, 1], "heads": [[3, 0]]}))


def onnx_seeds() -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inputs, outputs, initializers, opset=17):
        graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                 ir_version=8).SerializeToString()

    rng = _rng(4)
    f32 = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    init = numpy_helper.from_array
    _write("onnx", "conv_relu.onnx", model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("GlobalAveragePool", ["p"], ["y"])],
        [vi("x", f32, [1, 2, 4, 4])], [vi("y", f32, [1, 3, 1, 1])],
        [init(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w"),
         init(rng.standard_normal(3).astype(np.float32), "b")]))
    _write("onnx", "matmul_softmax.onnx", model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
        [vi("x", f32, [2, 3])], [vi("y", f32, [2, 4])],
        [init(rng.standard_normal((3, 4)).astype(np.float32), "w"),
         init(rng.standard_normal(4).astype(np.float32), "b")]))
    # Shape arithmetic folded at import: Shape -> Gather -> Concat -> Reshape.
    _write("onnx", "shape_fold.onnx", model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "i"], ["g"], axis=0),
         helper.make_node("Concat", ["g", "minus1"], ["t"], axis=0),
         helper.make_node("Reshape", ["x", "t"], ["r"]),
         helper.make_node("Transpose", ["r"], ["tr"], perm=[1, 0]),
         helper.make_node("Constant", [], ["k"], value=init(np.float32(2.0).reshape(()))),
         helper.make_node("Mul", ["tr", "k"], ["y"])],
        [vi("x", f32, [2, 3, 4])], [vi("y", f32, [12, 2])],
        [init(np.array([0], np.int64), "i"), init(np.array([-1], np.int64), "minus1")]))
    _write("onnx", "layernorm_gelu.onnx", model(
        [helper.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1),
         helper.make_node("Div", ["n", "sqrt2"], ["d"]),
         helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["p"]),
         helper.make_node("Mul", ["n", "p"], ["q"]),
         helper.make_node("Mul", ["q", "half"], ["y"])],
        [vi("x", f32, [1, 2, 4])], [vi("y", f32, [1, 2, 4])],
        [init(np.ones(4, np.float32), "g"), init(np.zeros(4, np.float32), "be"),
         init(np.float32(np.sqrt(2)).reshape(()), "sqrt2"),
         init(np.float32(1).reshape(()), "one"), init(np.float32(0.5).reshape(()), "half")]))
    onnx.checker.check_model(onnx.load_from_string((CORPUS / "onnx" / "conv_relu.onnx")
                                                   .read_bytes()))
    # Recipes (fuzz/python/onnx_fuzz.py): a seed picked by the first byte,
    # then a few structural mutations of it.
    _write("onnx", "recipe_attribute", bytes([1, 1, 0, 1, 4, 0, 0, 7, 3]))
    _write("onnx", "recipe_op_type", bytes([2, 0, 2, 40, 10, 1, 5, 2, 1]))
    _write("onnx", "recipe_new_node", bytes([3, 10, 0, 77, 0, 2, 1, 1, 12, 1, 0, 3]))


SEEDS = {"graph_json": graph_json_seeds, "mlu_model": model_file_seeds,
         "params": params_seeds, "symbol_json": symbol_json_seeds, "onnx": onnx_seeds}


def main(argv: list[str]) -> int:
    for name in argv or list(SEEDS):
        SEEDS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
