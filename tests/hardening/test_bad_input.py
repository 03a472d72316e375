"""Bad input at the user API (issue 10, point 8; docs/robustness.md).

Each row of the table in docs/robustness.md is one case here: a malformed
symbol JSON, .params file or ONNX model, wrong shapes and dtypes at bind
and forward, declared shapes too large for the machine. Every case must
raise the documented acc_host exception, whose message names what was
wrong, and must leave the process (and the executor, where there is one)
working. NaN and Inf inputs are not errors: they propagate, on the CPU
path and on the bundled accelerators, as numpy says they should.
"""

from __future__ import annotations

import json
import re
import struct
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import ROOT
from support.robustness_rows import HARDENING_ROWS, MISBEHAVING_ROWS, defined_tests

import acc_host as mx
from acc_host.errors import (
    AccHostError,
    AllocationTooLargeError,
    ContextError,
    DTypeError,
    GraphError,
    InvalidArgumentError,
    ModelFileError,
    ModelFileNotFoundError,
    OperatorError,
    OperatorInternalError,
    RankError,
    ShapeError,
    TensorError,
    UnknownAcceleratorError,
    UnknownOperatorError,
    UnsupportedOnnxOperatorError,
)
from acc_host.ndarray import params_file

DOC = ROOT / "docs" / "robustness.md"
TERA = 1 << 40
DATA = mx.sym.Variable("data")
RELU = mx.sym.Activation(DATA, act_type="relu", name="r")
FC = mx.sym.FullyConnected(DATA, num_hidden=4, name="fc")


@dataclass(frozen=True)
class Row:
    id: str
    where: str  # load / infer / import / bind / forward / params
    run: Callable[[Path], Any]  # given a scratch directory
    error: type[BaseException]
    fragments: tuple[str, ...]  # the message contains each
    huge: bool = False  # must be refused before allocating


# ---- symbol JSON ------------------------------------------------------------------------------


def _load_json(edit: Callable[[dict[str, Any]], Any], symbol: Any = RELU) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        document = json.loads(symbol.tojson())
        edit(document)
        return mx.sym.load_json(json.dumps(document))
    return run


def _node(document: dict[str, Any], op: str) -> dict[str, Any]:
    return next(node for node in document["nodes"] if node["op"] == op)


def _set(target: dict[str, Any], key: str, value: Any) -> None:
    target[key] = value


def _insert(document: dict[str, Any], index: int, node: dict[str, Any]) -> None:
    """Inserts a node (the node_row_ptr of the file no longer applies)."""
    document.pop("node_row_ptr", None)
    document["nodes"].insert(index, node)


def _set_shape_hint(document: dict[str, Any], shape: str) -> None:
    document["nodes"][0]["attrs"] = {"__shape__": shape}


def _bind_hinted(shape: str) -> Callable[[Path], Any]:
    def run(tmp: Path) -> Any:
        document = json.loads(RELU.tojson())
        _set_shape_hint(document, shape)
        return mx.sym.load_json(json.dumps(document)).simple_bind(mx.cpu())
    return run


def _write_and_load(tmp: Path, text: str) -> Any:
    path = tmp / "model-symbol.json"
    path.write_text(text, encoding="utf-8")
    return mx.sym.load(str(path))


def _infer_hinted(shape: str) -> Callable[[Path], Any]:
    """infer_shape of a symbol file whose data hint feeds an operator that
    infers shapes by running on zeros of its input shapes (_onnx_split)."""
    def run(tmp: Path) -> Any:
        document = {"nodes": [{"op": "null", "name": "data", "inputs": [],
                               "attrs": {"__shape__": shape}},
                              {"op": "_onnx_split", "name": "split", "inputs": [[0, 0, 0]],
                               "attrs": {"num_outputs": "2"}}],
                    "arg_nodes": [0], "heads": [[1, 0, 0], [1, 1, 0]]}
        return mx.sym.load_json(json.dumps(document)).infer_shape()
    return run


SYMBOL_ROWS = [
    Row("json-not-json", "load", lambda tmp: _write_and_load(tmp, '{"nodes": [1,'), GraphError,
        ("symbol JSON: not valid JSON",)),
    Row("json-no-nodes", "load", _load_json(lambda d: d.pop("nodes")), GraphError,
        ('expected an object with a "nodes" array',)),
    Row("json-no-heads", "load", _load_json(lambda d: d.pop("heads")), GraphError,
        ('expected a non-empty "heads" array',)),
    Row("json-cycle", "load",
        _load_json(lambda d: _set(d["nodes"][0], "inputs", [[1, 0, 0]])), GraphError,
        ("node 0 ('data') input 0 refers to node 1", "a cycle")),
    Row("json-self-loop", "load",
        _load_json(lambda d: _set(d["nodes"][1], "inputs", [[1, 0, 0]])), GraphError,
        ("node 1 ('r') input 0 refers to node 1", "a cycle")),
    Row("json-input-node-out-of-range", "load",
        _load_json(lambda d: _set(d["nodes"][1], "inputs", [[7, 0, 0]])), GraphError,
        ("node 1 ('r') input 0 refers to node 7",)),
    Row("json-input-output-out-of-range", "load",
        _load_json(lambda d: _set(d["nodes"][1], "inputs", [[0, 3, 0]])), GraphError,
        ("an input of 'r' uses output 3 of 'data', which has 1",)),
    Row("json-input-not-integer", "load",
        _load_json(lambda d: _set(d["nodes"][1], "inputs", [["0", 0, 0]])), GraphError,
        ("node 1 ('r') input 0 must be an integer, got '0'",)),
    Row("json-head-out-of-range", "load", _load_json(lambda d: _set(d, "heads", [[5, 0, 0]])),
        GraphError, ("head 0 refers to node 5",)),
    Row("json-unknown-op", "load",
        _load_json(lambda d: _set(d["nodes"][1], "op", "NoSuchOp")), UnknownOperatorError,
        ("node 'r'", "unknown operator 'NoSuchOp'")),
    Row("json-attribute-not-string", "load",
        _load_json(lambda d: _set(d["nodes"][1], "attrs", {"act_type": 3})), GraphError,
        ("node 1 ('r'): attribute 'act_type' must be a string, got 3",)),
    Row("json-attrs-not-object", "load",
        _load_json(lambda d: _set(d["nodes"][1], "attrs", ["relu"])), GraphError,
        ("node 1 ('r'): 'attrs' must be an object",)),
    Row("json-attribute-bad-value", "load",
        _load_json(lambda d: _set(d["nodes"][1], "attrs", {"act_type": "bogus"})),
        OperatorError, ("node 'r'", "act_type='bogus'", "expected one of relu")),
    Row("json-attribute-bad-tuple", "load",
        _load_json(lambda d: _set(_node(d, "Convolution")["attrs"], "kernel", "(a, b)"),
                   mx.sym.Convolution(DATA, num_filter=2, kernel=(3, 3), name="c")),
        OperatorError, ("node 'c'", "kernel='(a, b)'")),
    Row("json-count-too-large", "load",
        _load_json(lambda d: _set(_node(d, "SliceChannel")["attrs"], "num_outputs",
                                  str(TERA)),
                   mx.sym.SliceChannel(DATA, num_outputs=2, name="s")),
        OperatorError, ("node 's'", f"num_outputs='{TERA}'", "expected a count from 1 to 65536"),
        huge=True),
    Row("json-wrong-input-count", "load",
        _load_json(lambda d: _set(d["nodes"][1], "inputs", [[0, 0, 0], [0, 0, 0]])), GraphError,
        ("node 'r' (Activation) has 2 inputs, expected 1",)),
    Row("json-variable-with-inputs", "load",
        _load_json(lambda d: _insert(d, 1, {"op": "null", "name": "v", "inputs": [[0, 0, 0]]})),
        GraphError,
        ("node 1 ('v') is a variable but has inputs",)),
    Row("json-duplicate-variable", "load",
        _load_json(lambda d: (_insert(d, 1, {"op": "null", "name": "data", "inputs": []}),
                              d["nodes"][2].__setitem__("inputs", [[1, 0, 0]]),
                              d["nodes"].append({"op": "elemwise_add", "name": "sum",
                                                 "inputs": [[0, 0, 0], [2, 0, 0]]}),
                              d.__setitem__("heads", [[3, 0, 0]]))), GraphError,
        ("two different variables are named 'data'",)),
    Row("json-bad-shape-hint", "load",
        lambda tmp: _bind_hinted("(2, x)")(tmp), GraphError,
        ("variable 'data': bad __shape__ '(2, x)'",)),
    Row("json-huge-shape-hint-inferred", "infer", _infer_hinted(f"({TERA}, 1024)"),
        AllocationTooLargeError, ("_onnx_split: shape inference on inputs of shapes "
                                  "[(1099511627776, 1024)] would take 4.0 PiB",), huge=True),
    Row("json-shape-hint-too-many-dims", "infer", _infer_hinted(str((1,) * 70)), ShapeError,
        ("node 'split' (_onnx_split): _onnx_split: maximum supported dimension",)),
    Row("json-result-too-many-dims", "infer",
        lambda tmp: mx.sym.take(DATA, mx.sym.Variable("i"), name="t").infer_shape(
            data=(1,) * 40, i=(1,) * 40), RankError,
        ("node 't' (take): take: output 0 would have 79 dimensions; arrays have at most 64",)),
    Row("json-shape-hint-none-extent", "bind", lambda tmp: _bind_hinted("(2, None)")(tmp),
        GraphError, ("variable 'data': bad __shape__ '(2, None)': extents must be integers",)),
    Row("json-missing-file", "load", lambda tmp: mx.sym.load(str(tmp / "none-symbol.json")),
        ModelFileNotFoundError, ("symbol file", "none-symbol.json not found")),
    Row("checkpoint-wrong-epoch", "load", lambda tmp: _checkpoint(tmp, 7), ModelFileNotFoundError,
        ("m-0007.params not found", "epochs saved with this prefix: 3")),
    Row("checkpoint-wrong-prefix", "load", lambda tmp: _checkpoint(tmp, 3, "other"),
        ModelFileNotFoundError, ("other-symbol.json and ", "other-0003.params not found")),
]

# ---- bind and simple_bind ----------------------------------------------------------------------

_ARGS = {"data": (2, 3), "fc_weight": (4, 3), "fc_bias": (4,)}


def _fc_bind(**changes: Any) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        args: dict[str, Any] = {name: mx.nd.ones(shape) for name, shape in _ARGS.items()}
        args.update(changes)
        return FC.bind(mx.cpu(), {name: value for name, value in args.items()
                                  if value is not None})
    return run


_BN = mx.sym.BatchNorm(FC, name="bn")


def _checkpoint(tmp: Path, epoch: int, prefix: str = "m") -> Any:
    """load_checkpoint(prefix, epoch) in a directory holding epoch 3 of m."""
    mx.model.save_checkpoint(tmp / "m", 3, FC, _GOOD_PARAMS, {})
    return mx.model.load_checkpoint(tmp / prefix, epoch)


def _deep_bind(_tmp: Path) -> Any:
    """A float64 input that meets the float32 weights two operators in."""
    net = mx.sym.FullyConnected(mx.sym.Activation(DATA, act_type="relu", name="r0"),
                                num_hidden=4, name="fc")
    return net.bind(mx.cpu(), {"data": mx.nd.ones((2, 3), dtype=np.float64), **_GOOD_PARAMS})


def _naive(call: Callable[[], Any]) -> Any:
    """call() under NaiveEngine (which used to skip inference)."""
    from support.engines import using_engine

    with using_engine("NaiveEngine"):
        return call()


def _unknown_accelerator(_tmp: Path) -> Any:
    return mx.foo(0)


BIND_ROWS = [
    Row("bind-missing-argument", "bind", _fc_bind(fc_bias=None), GraphError,
        ("bind: arguments missing: ['fc_bias']",)),
    Row("bind-extra-argument", "bind", _fc_bind(fc_extra=mx.nd.ones(1)), GraphError,
        ("unknown: ['fc_extra']",)),
    Row("bind-not-an-ndarray", "bind", _fc_bind(fc_bias=np.ones(4, np.float32)), GraphError,
        ("bind: argument 'fc_bias' must be an NDArray, got ndarray",)),
    Row("bind-empty-huge-span", "bind",
        lambda tmp: mx.sym.take(DATA, mx.sym.Variable("i"), axis=2, name="t").simple_bind(
            mx.cpu(), data=(2, 2**31 - 1, 3, 0), i=(1,)), ShapeError,
        ("an array: shape (2, 2147483647, 3, 0) is empty, but its other extents span "
         "12884901882 positions",)),
    Row("bind-wrong-shape", "bind", _fc_bind(fc_weight=mx.nd.ones((4, 5))), ShapeError,
        ("node 'fc' (FullyConnected)", "weight has shape (4, 5), expected (4, 3)")),
    Row("bind-wrong-dtype", "bind", _fc_bind(fc_weight=mx.nd.ones((4, 3), dtype=np.int32)),
        DTypeError, ("input 'fc_weight' has dtype int32, the model takes float32",
                     "node 'fc' (FullyConnected)")),
    Row("bind-input-dtype", "bind", _fc_bind(data=mx.nd.ones((2, 3), dtype=np.float64)),
        DTypeError, ("input 'data' has dtype float64, the model takes float32",
                     "cast the input to float32")),
    Row("bind-input-dtype-deep", "bind", _deep_bind, DTypeError,
        ("input 'data' has dtype float64, the model takes float32",)),
    Row("bind-no-shapes", "bind", lambda tmp: FC.simple_bind(mx.cpu()), ShapeError,
        ("cannot infer the shapes of data, fc_weight, fc_bias",)),
    Row("bind-unknown-shape-name", "bind",
        lambda tmp: RELU.simple_bind(mx.cpu(), data=(2, 3), datum=(2, 3)), GraphError,
        ("'datum' not among the graph's inputs (data inputs: data;",)),
    Row("bind-misspelt-input", "bind", lambda tmp: _BN.simple_bind(mx.cpu(), dat=(2, 3)),
        GraphError, ("'dat' not among the graph's inputs (data inputs: data; and 6 parameters; "
                     "did you mean 'data' for 'dat'?)",)),
    Row("bind-negative-extent", "bind", lambda tmp: RELU.simple_bind(mx.cpu(), data=(-1, 3)),
        ShapeError, ("the shape given for 'data', (-1, 3), has a negative extent",)),
    Row("bind-fractional-extent", "bind",
        lambda tmp: RELU.simple_bind(mx.cpu(), data=(2.5, 3)), ShapeError,
        ("the shape given for 'data', (2.5, 3), has an extent that is not an integer",)),
    Row("bind-unknown-dtype", "bind",
        lambda tmp: RELU.simple_bind(mx.cpu(), data=(2, 3), type_dict={"data": "float33"}),
        TensorError, ("the dtype given for 'data', 'float33', is not a dtype",)),
    Row("bind-unknown-accelerator-attribute", "bind", _unknown_accelerator,
        UnknownAcceleratorError, ("module 'acc_host' has no attribute 'foo': no accelerator "
                                  "called 'foo' is loaded (loaded: ",)),
    Row("bind-unknown-context", "bind",
        lambda tmp: RELU.simple_bind(mx.Context("tpu", 0), data=(2, 3)), ContextError,
        ("no accelerator called 'tpu' is loaded",)),
    Row("bind-huge-shape", "bind",
        lambda tmp: RELU.simple_bind(mx.cpu(), data=(TERA, TERA)), AllocationTooLargeError,
        ("simple_bind: the arguments and auxiliary states (the largest, 'data', of shape "
         f"({TERA}, {TERA}))", "refused before allocating"), huge=True),
    Row("bind-huge-shape-hint", "bind", _bind_hinted(f"({TERA}, 1024)"),
        AllocationTooLargeError, ("'data', of shape (1099511627776, 1024)", "4.0 PiB"),
        huge=True),
    Row("bind-huge-intermediate", "bind",
        lambda tmp: mx.sym.broadcast_to(DATA, shape=(TERA, 4), name="wide").simple_bind(
            mx.cpu(), data=(1, 4)), AllocationTooLargeError,
        ("simple_bind: the planned memory of the bind and a forward (16 bytes of arguments",
         "17592186044416 of outputs", "would take 32.0 TiB"), huge=True),
    Row("bind-over-configured-limit", "bind",
        lambda tmp: RELU.simple_bind(mx.cpu(), data=(1024, 1024)), AllocationTooLargeError,
        ("would take 4.0 MiB (4194304 bytes), more than MXNET_ACC_MAX_ALLOC_BYTES=1048576",)),
    Row("bind-pooling-empty-axis", "bind",
        lambda tmp: mx.sym.Pooling(DATA, global_pool=True, kernel=(1, 1), name="p").simple_bind(
            mx.cpu(), data=(1, 2, 0, 3)), ShapeError,
        ("node 'p' (Pooling): Pooling: spatial axis 0 of data (1, 2, 0, 3) has size 0",)),
    Row("ndarray-too-many-dims", "bind", lambda tmp: mx.nd.zeros((1,) * 70), RankError,
        ("shape (1, 1,", "has 70 dimensions; arrays have at most 64")),
    Row("ndarray-take-too-many-dims", "bind",
        lambda tmp: mx.nd.take(mx.nd.zeros((1,) * 40), mx.nd.zeros((1,) * 40)), RankError,
        ("take: output 0 would have 79 dimensions",)),
    Row("ndarray-huge", "bind", lambda tmp: mx.nd.zeros((TERA,)), AllocationTooLargeError,
        ("an array (shape (1099511627776,), float32) would take 4.0 TiB",), huge=True),
]

# ---- forward ------------------------------------------------------------------------------------


def _forward(**kwargs: Any) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        exe = RELU.simple_bind(mx.cpu(), data=(2, 3))
        try:
            return exe.forward(**kwargs)[0].asnumpy()
        finally:
            # The executor is still usable after the bad call.
            good = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
            np.testing.assert_array_equal(exe.forward(data=good)[0].asnumpy(),
                                          np.maximum(good, 0))
    return run


def _module(batch: list[Any], init: bool = True) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        mod = mx.mod.Module(FC, data_names=["data"], label_names=None)
        mod.bind([("data", (2, 3))], for_training=False)
        if init:
            mod.init_params()
        return mod.forward(mx.io.DataBatch([mx.nd.array(value) for value in batch]))
    return run


FORWARD_ROWS = [
    Row("ndarray-op-shapes", "forward",
        lambda tmp: mx.nd.broadcast_add(mx.nd.ones((4,)), mx.nd.ones((3,))), ShapeError,
        ("broadcast_add: operands could not be broadcast together with shapes (4,) (3,)",
         "(inputs: lhs (4,) float32, rhs (3,) float32)")),
    Row("ndarray-op-shapes-naive", "forward", lambda tmp: _naive(
        lambda: mx.nd.FullyConnected(mx.nd.ones((2, 3)), mx.nd.ones((4, 5)), mx.nd.ones(4),
                                     num_hidden=4)), ShapeError,
        ("FullyConnected: weight has shape (4, 5), expected (4, 3)",
         "(inputs: data (2, 3) float32, weight (4, 5) float32, bias (4,) float32)")),
    Row("forward-wrong-shape", "forward", _forward(data=np.ones((3, 3))), ShapeError,
        ("forward: 'data' has shape (3, 3), the executor was bound with (2, 3)",)),
    Row("forward-unknown-argument", "forward", _forward(datum=np.ones((2, 3))), GraphError,
        ("forward: 'datum' is not an argument (data)",)),
    Row("forward-not-numbers", "forward", _forward(data=np.full((2, 3), "x")), TensorError,
        ("forward: 'data' cannot be converted to the bound dtype float32",
         "could not convert string to float")),
    Row("forward-ragged", "forward", _forward(data=[[1, 2, 3], [4]]), TensorError,
        ("forward: 'data' cannot be converted to the bound dtype float32", "inhomogeneous")),
    Row("module-forward-parameter-shape", "forward", _module([np.ones((2, 3, 4))]), ShapeError,
        ("Module.forward: data of shape {'data': (2, 3, 4)} needs parameter 'fc_weight' of "
         "shape (4, 12), the module's has shape (4, 3)",)),
    Row("module-forward-data-count", "forward", _module([np.ones((2, 3))] * 2), GraphError,
        ("Module.forward: 2 data arrays for data names ['data']",)),
    Row("module-forward-before-init", "forward", _module([np.ones((2, 3))], init=False),
        GraphError, ("call set_params() or init_params() before forward()",)),
]

# ---- .params files ------------------------------------------------------------------------------

_PARAMS = params_file.dumps([np.ones((2, 3), np.float32)], ["arg:w"])
_ARRAY = 24  # the first array record: magic, stype, ndim, 2 dims, context, type flag
_DIMS, _FLAG = _ARRAY + 12, _ARRAY + 36


def _params(edit: Callable[[bytearray], Any]) -> Callable[[Path], Any]:
    def run(tmp: Path) -> Any:
        data = bytearray(_PARAMS)
        edit(data)
        path = tmp / "bad.params"
        path.write_bytes(bytes(data))
        return mx.nd.load(str(path))
    return run


def _pack(fmt: str, offset: int, *values: int) -> Callable[[bytearray], None]:
    return lambda data: struct.pack_into(fmt, data, offset, *values)


def _checkpoint_params(params: dict[str, Any], **kwargs: Any) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        mod = mx.mod.Module(FC, data_names=["data"], label_names=None)
        mod.bind([("data", (2, 3))], for_training=False)
        return mod.set_params(params, {}, **kwargs)
    return run


_GOOD_PARAMS = {"fc_weight": mx.nd.ones((4, 3)), "fc_bias": mx.nd.ones(4)}

PARAMS_ROWS = [
    Row("params-truncated", "load", _params(lambda data: data.__delitem__(slice(40, None))),
        ModelFileError, ("bad.params: byte offset 36: truncated: array 0 (of 1): 2 dims needs 16 "
                         "bytes, only 4 remain",)),
    Row("params-bad-magic", "load", _params(_pack("<Q", 0, 0x113)), ModelFileError,
        ("not an MXNet NDArray-list file: magic 0x113, expected 0x112",)),
    Row("params-unknown-dtype", "load", _params(_pack("<i", _FLAG, 99)), ModelFileError,
        ("array 0 (of 1): unknown element type flag 99",)),
    Row("params-size-too-small", "load", _params(_pack("<qq", _DIMS, 2, 8)), ModelFileError,
        ("truncated: array 0 (of 1) of shape (2, 8) and dtype float32 needs 64 bytes, only 45 "
         "remain",)),
    Row("params-size-too-large", "load", _params(_pack("<qq", _DIMS, 1, 3)), ModelFileError,
        ("bad.params: byte offset 76: name count", "is more than the remaining 25 bytes")),
    Row("params-huge-shape", "load", _params(_pack("<qq", _DIMS, TERA, 3)), ModelFileError,
        ("array 0 (of 1) of shape (1099511627776, 3) and dtype float32 needs 13194139533312 "
         "bytes",), huge=True),
    Row("params-overflowing-shape", "load", _params(_pack("<qq", _DIMS, 1 << 62, 1 << 62)),
        ModelFileError, ("of shape (4611686018427387904, 4611686018427387904)",), huge=True),
    Row("params-huge-count", "load", _params(_pack("<Q", 16, 1 << 60)), ModelFileError,
        ("array count 1152921504606846976 is more than the remaining",), huge=True),
    Row("params-unnamed-checkpoint", "load",
        lambda tmp: (params_file.save(tmp / "list.params", [np.ones(2, np.float32)]),
                     mx.model.load_params(tmp / "list.params")), ModelFileError,
        ("list.params: a checkpoint's parameters must be named",)),
    Row("params-bad-key", "load",
        lambda tmp: (params_file.save(tmp / "keys.params", [np.ones(2, np.float32)],
                                         ["weight"]),
                     mx.model.load_params(tmp / "keys.params")), ModelFileError,
        ("parameter 'weight' is neither 'arg:<name>' nor 'aux:<name>'",)),
    Row("params-missing", "bind", _checkpoint_params({"fc_weight": mx.nd.ones((4, 3))}),
        GraphError, ("Module: parameter 'fc_bias' is missing; pass allow_missing=True",)),
    Row("params-extra", "bind",
        _checkpoint_params({**_GOOD_PARAMS, "fc_extra": mx.nd.ones(1)}), GraphError,
        ("Module: parameters ['fc_extra'] are not in the symbol; pass allow_extra=True",)),
    Row("params-wrong-shape", "bind",
        _checkpoint_params({"fc_weight": mx.nd.ones((4, 5)), "fc_bias": mx.nd.ones(4)}),
        GraphError, ("Module: parameter 'fc_weight' has shape (4, 5), the symbol needs (4, 3)",)),
]

# ---- ONNX ---------------------------------------------------------------------------------------


def _onnx_model(nodes: list[Any], inputs: list[Any], initializers: list[Any] = ()) -> Any:
    onnx = pytest.importorskip("onnx")
    helper = onnx.helper
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _relu_model(shape: list[int]) -> Any:
    onnx = pytest.importorskip("onnx")
    return _onnx_model([onnx.helper.make_node("Relu", ["x"], ["y"])],
                       [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)])


def _initializer(dims: list[int], raw: bytes) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        onnx = pytest.importorskip("onnx")
        tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=dims,
                                  raw_data=raw)
        model = _onnx_model([onnx.helper.make_node("Add", ["x", "w"], ["y"])],
                            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                                [3])], [tensor])
        return mx.onnx.import_model(model)
    return run


def _one_node(op: str, inputs: list[str], attrs: dict[str, Any] | None = None,
              constants: dict[str, np.ndarray] | None = None) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        onnx = pytest.importorskip("onnx")
        from onnx import numpy_helper
        initializers = [numpy_helper.from_array(value, name)
                        for name, value in (constants or {}).items()]
        graph_inputs = [onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [3])
                        for name in inputs if name not in (constants or {})]
        model = _onnx_model([onnx.helper.make_node(op, inputs, ["y"], **(attrs or {}))],
                            graph_inputs, initializers)
        return mx.onnx.import_model(model)
    return run


def _onnx_file(tmp: Path) -> Any:
    path = tmp / "bad.onnx"
    path.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    return mx.onnx.import_model(str(path))


def _onnx_bind(shape: list[int]) -> Callable[[Path], Any]:
    def run(_tmp: Path) -> Any:
        symbol, _, _ = mx.onnx.import_model(_relu_model(shape))
        return symbol.simple_bind(mx.cpu())
    return run


def _gather_40_by_40(_tmp: Path) -> Any:
    onnx = pytest.importorskip("onnx")
    value = onnx.helper.make_tensor_value_info
    symbol, _, _ = mx.onnx.import_model(_onnx_model(
        [onnx.helper.make_node("Gather", ["x", "i"], ["y"])],
        [value("x", onnx.TensorProto.FLOAT, [1] * 40),
         value("i", onnx.TensorProto.INT64, [1] * 40)]))
    return symbol.simple_bind(mx.cpu())


def _gather_empty_huge_span(_tmp: Path) -> Any:
    onnx = pytest.importorskip("onnx")
    value = onnx.helper.make_tensor_value_info
    symbol, _, _ = mx.onnx.import_model(_onnx_model(
        [onnx.helper.make_node("Gather", ["x", "i"], ["y"], axis=2)],
        [value("x", onnx.TensorProto.FLOAT, None), value("i", onnx.TensorProto.INT64, [1])]))
    return symbol.simple_bind(mx.cpu(), x=(2, 2**31 - 1, 3, 0), i=(1,))


ONNX_ROWS = [
    Row("onnx-malformed-bytes", "import",
        lambda tmp: mx.onnx.import_model(b"\x08\x07garbage\xff\xff"), ModelFileError,
        ("<11 bytes>: not a valid ONNX model (protobuf ModelProto)",)),
    Row("onnx-malformed-file", "import", _onnx_file, ModelFileError,
        ("bad.onnx: not a valid ONNX model",)),
    Row("onnx-not-a-model", "import", lambda tmp: mx.onnx.import_model(42),
        InvalidArgumentError, ("expected a path, bytes or an onnx.ModelProto, got int",)),
    Row("onnx-unknown-op", "import", _one_node("FooBar", ["x"]), UnsupportedOnnxOperatorError,
        ("1 unsupported operator(s)", "FooBar (domain ai.onnx, opset 13): no translation")),
    Row("onnx-initializer-size-mismatch", "import", _initializer([1 << 20, 1 << 20], b"\0" * 4),
        ModelFileError, ("ONNX initializer 'w' of shape (1048576, 1048576)",
                         "raw_data holds 4 bytes"), huge=True),
    Row("onnx-initializer-negative-dim", "import", _initializer([-3], b"\0" * 12),
        ModelFileError, ("ONNX initializer 'w': negative dimension in (-3,)",)),
    Row("onnx-huge-constant", "import",
        _one_node("ConstantOfShape", ["shape"],
                  constants={"shape": np.array([TERA, 1024], np.int64)}),
        AllocationTooLargeError, ("ConstantOfShape", "would take 4.0 PiB"), huge=True),
    Row("onnx-endless-range", "import",
        _one_node("Range", ["a", "b", "c"], constants={
            "a": np.array(0, np.float32), "b": np.array(1, np.float32),
            "c": np.array(0, np.float32)}), UnsupportedOnnxOperatorError,
        ("Range(0.0, 1.0, 0.0) has no finite length",)),
    Row("onnx-gather-too-many-dims", "bind", _gather_40_by_40, RankError,
        ("would have 79 dimensions",)),
    Row("onnx-empty-input-huge-span", "bind", _gather_empty_huge_span, ShapeError,
        ("shape (2, 2147483647, 3, 0) is empty, but its other extents span 12884901882 "
         "positions",)),
    Row("onnx-huge-input", "bind", _onnx_bind([TERA, 1 << 20]), AllocationTooLargeError,
        ("simple_bind: the arguments and auxiliary states (the largest, 'x', of shape "
         "(1099511627776, 1048576))",), huge=True),
]

ROWS = SYMBOL_ROWS + BIND_ROWS + FORWARD_ROWS + PARAMS_ROWS + ONNX_ROWS


@pytest.mark.parametrize("row", [
    pytest.param(row, id=row.id, marks=[pytest.mark.needs_onnx] if row in ONNX_ROWS else [])
    for row in ROWS])
def test_bad_input_raises_the_documented_error(row: Row, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if row.id == "bind-over-configured-limit":
        monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(1 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(row.error) as raised:
            row.run(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(raised.value, AccHostError)
    for fragment in row.fragments:
        assert fragment in str(raised.value)
    if row.huge:  # refused before allocating anything of the declared size
        assert peak < 64 << 20, f"{peak} bytes were allocated"
    # The process carries on.
    np.testing.assert_array_equal(mx.nd.array([1, -1]).asnumpy(), [1, -1])


def test_forward_casts_other_dtypes_as_mxnet_copies_do() -> None:
    exe = RELU.simple_bind(mx.cpu(), data=(2, 3))
    values = np.array([[-2, 3, 5], [7, -1, 0]], np.int64)
    result = exe.forward(data=values)[0].asnumpy()
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, np.maximum(values, 0).astype(np.float32))


def test_extra_params_can_be_ignored_as_in_mxnet() -> None:
    mod = mx.mod.Module(FC, data_names=["data"], label_names=None)
    mod.bind([("data", (2, 3))], for_training=False)
    mod.set_params({**_GOOD_PARAMS, "fc_extra": mx.nd.ones(1)}, {}, allow_extra=True)
    mod.forward(mx.io.DataBatch([mx.nd.ones((2, 3))]))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((2, 4), 4.0))


def test_the_limit_is_read_when_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", "lots")
    with pytest.raises(InvalidArgumentError, match="MXNET_ACC_MAX_ALLOC_BYTES='lots'"):
        mx.nd.zeros((2, 2))
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(1 << 20))
    assert mx.nd.zeros((512, 512)).shape == (512, 512)  # exactly the limit


# ---- NaN and Inf propagate ----------------------------------------------------------------------


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    return np.einsum("nchwij,fcij->nfhw", windows, w) + b[None, :, None, None]


def _pool(x: np.ndarray, reduce: Callable[..., np.ndarray]) -> np.ndarray:
    n, c, h, w = x.shape
    return reduce(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# name: (symbol, oracle(x, params)); params are named as the symbol's arguments
NAN_CASES: dict[str, tuple[Any, Callable[..., np.ndarray]]] = {
    "relu": (mx.sym.Activation(DATA, act_type="relu"), lambda x, p: np.maximum(x, 0)),
    "sigmoid": (mx.sym.Activation(DATA, act_type="sigmoid"), lambda x, p: _sigmoid(x)),
    "tanh": (mx.sym.Activation(DATA, act_type="tanh"), lambda x, p: np.tanh(x)),
    "add": (DATA + DATA, lambda x, p: x + x),
    "softmax": (mx.sym.softmax(DATA, axis=-1), lambda x, p: _softmax(x)),
    "convolution": (mx.sym.Convolution(DATA, num_filter=2, kernel=(3, 3), pad=(1, 1), name="c"),
                    lambda x, p: _conv(x, p["c_weight"], p["c_bias"])),
    "fully_connected": (mx.sym.FullyConnected(DATA, num_hidden=3, name="f"),
                        lambda x, p: x.reshape(len(x), -1) @ p["f_weight"].T + p["f_bias"]),
    "max_pooling": (mx.sym.Pooling(DATA, kernel=(2, 2), stride=(2, 2), pool_type="max"),
                    lambda x, p: _pool(x, np.max)),
    "avg_pooling": (mx.sym.Pooling(DATA, kernel=(2, 2), stride=(2, 2), pool_type="avg"),
                    lambda x, p: _pool(x, np.mean)),
    "batch_norm": (mx.sym.BatchNorm(DATA, name="bn", fix_gamma=False, eps=1e-3),
                   lambda x, p: ((x - p["bn_moving_mean"][None, :, None, None])
                                 / np.sqrt(p["bn_moving_var"][None, :, None, None] + 1e-3)
                                 * p["bn_gamma"][None, :, None, None]
                                 + p["bn_beta"][None, :, None, None])),
}
# Where an accelerator drops NaN instead of propagating it: a known
# difference, reported (docs/robustness.md), not a crash.
NAN_DROPPED = {
    ("cpu_ref", "max_pooling"): "cpu_ref's max pooling skips NaN (numpy and the CPU path "
                                "propagate it; MXNet's own pooling skips it too)",
}
CONTEXTS = {"cpu": mx.cpu, "cpu_ref": lambda: mx.cpu_ref(0), "mlu_sim": lambda: mx.mlu(0)}


def _nan_params() -> list[Any]:
    params = []
    for context in CONTEXTS:
        for name in NAN_CASES:
            marks = ([pytest.mark.xfail(reason=NAN_DROPPED[context, name], strict=True)]
                     if (context, name) in NAN_DROPPED else [])
            params.append(pytest.param(context, name, marks=marks, id=f"{context}-{name}"))
    return params


@pytest.mark.parametrize("context, name", _nan_params())
def test_nan_and_inf_inputs_propagate(context: str, name: str,
                                      offload_everything: None) -> None:
    symbol, oracle = NAN_CASES[name]
    shape = (1, 3, 6, 6)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(np.float32)
    # NaN, +Inf and -Inf far enough apart that no 3x3 window sees two of them.
    x[0, 0, 0, 0], x[0, 1, 5, 5], x[0, 2, 3, 0] = np.nan, np.inf, -np.inf
    ctx = CONTEXTS[context]()
    exe = symbol.simple_bind(ctx, data=shape)
    params = {}
    for arrays in (exe.arg_dict, exe.aux_dict):
        for key, array in arrays.items():
            if key != "data":
                value = rng.uniform(0.5, 1.5, array.shape).astype(np.float32)
                array[:] = value
                params[key] = value
    if context != "cpu":
        assert set(exe.placement().values()) == {str(ctx)}
    with np.errstate(invalid="ignore", over="ignore"):
        expected = oracle(x.astype(np.float64), params).astype(np.float32)
    actual = exe.forward(data=x)[0].asnumpy()
    assert np.isnan(expected).any()
    for mask in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(mask(actual), mask(expected), err_msg=mask.__name__)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=1e-4, atol=1e-5)


# ---- the table ----------------------------------------------------------------------------------


def test_every_row_of_the_table_has_its_test() -> None:
    """docs/robustness.md lists each case by its id; this file,
    tests/hardening/test_misbehaving.py and tests/hardening/test_hardening.py
    (support/robustness_rows.py) test exactly those."""
    text = DOC.read_text(encoding="utf-8")
    documented = re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M)
    assert len(documented) == len(set(documented)), "a row id appears twice"
    tested = [row.id for row in ROWS] + list(OTHER_ROWS) + list(MISBEHAVING_ROWS) + list(
        HARDENING_ROWS)
    assert sorted(documented) == sorted(tested)
    for name in OTHER_ROWS.values():
        assert callable(globals().get(name)), name
    misbehaving = defined_tests("test_misbehaving")
    for name in MISBEHAVING_ROWS.values():
        assert name in misbehaving, name
    for name in HARDENING_ROWS.values():  # "test" in test_hardening, or "module:test"
        module, _, test = name.rpartition(":")
        assert test in defined_tests(module or "test_hardening"), name


def test_an_operator_s_stray_exception_is_typed_and_names_the_operator(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatch's safety net: an exception that is not an acc_host error
    from an operator's computation is an OperatorInternalError naming the
    operator and its inputs, with the original as __cause__ (no operator
    needs it today: tests/hardening/test_operator_errors_property.py fails on it)."""
    import dataclasses

    from acc_host.ops import registry

    op = registry.get("relu")

    def broken(attrs: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.ones(3) + np.ones(2)]  # numpy's ValueError

    monkeypatch.setitem(registry._REGISTRY, "relu", dataclasses.replace(op, compute=broken))
    with pytest.raises(OperatorInternalError, match=r"relu \(inputs: data \(2,\) float32\): "
                                                      "ValueError: operands could not") as raised:
        mx.nd.relu(mx.nd.ones(2)).asnumpy()
    assert isinstance(raised.value.__cause__, ValueError)


def test_cli_run_exits_2_for_an_input_the_model_does_not_take(tmp_path: Path) -> None:
    """docs/cli.md: exit 2 for an input shape or dtype the model does not
    take (a ShapeError at bind), not 1."""
    from acc_host.cli import main
    from acc_host.cli.errors import USAGE, exit_code

    prefix = tmp_path / "m"
    mx.model.save_checkpoint(prefix, 0, FC, _GOOD_PARAMS, {})
    assert main(["run", str(prefix), "--acc", "cpu_ref", "--shape", "2,5"]) == USAGE
    np.save(tmp_path / "x.npy", np.ones((2, 3)))  # float64
    assert main(["run", str(prefix), "--acc", "cpu_ref", "--input",
                 f"data={tmp_path / 'x.npy'}"]) == USAGE
    assert exit_code(DTypeError("x")) == USAGE == exit_code(ShapeError("x"))
    assert exit_code(ModelFileNotFoundError("x")) == 3 and exit_code(OperatorError("x")) == 1


def test_unknown_attributes_of_the_module_stay_attribute_errors() -> None:
    """mx.foo is an UnknownAcceleratorError, which is an AttributeError:
    getattr with a default and hasattr work; dunder names get a plain one."""
    assert not hasattr(mx, "foo") and getattr(mx, "foo", 7) == 7
    with pytest.raises(AttributeError) as raised:
        mx.__wrapped__  # noqa: B018
    assert type(raised.value) is AttributeError
    assert not hasattr(mx, "__wrapped__")
    with pytest.raises(UnknownAcceleratorError, match="no accelerator called 'foo'"):
        mx.Context("foo", 0)
    assert mx.cpu_ref(0) == mx.Context("cpu_ref", 0)


# Rows that are not errors, with their tests.
OTHER_ROWS = {
    "ndarray-op-safety-net": "test_an_operator_s_stray_exception_is_typed_and_names_the_operator",
    "cli-run-bad-input": "test_cli_run_exits_2_for_an_input_the_model_does_not_take",
    "module-unknown-attribute": "test_unknown_attributes_of_the_module_stay_attribute_errors",
    "forward-other-dtype": "test_forward_casts_other_dtypes_as_mxnet_copies_do",
    "params-extra-allowed": "test_extra_params_can_be_ignored_as_in_mxnet",
    "forward-nan-inf": "test_nan_and_inf_inputs_propagate",
}
