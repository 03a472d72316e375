"""Models exported from PyTorch (tests/onnx_models/*.onnx, built by
tests/onnx_models/make_pytorch_models.py with torch's TorchScript exporter,
opset 17) on the host CPU path, cpu_ref and the mlu simulator.

Each model ships with a sample input and torch's own output for it (.npz).
acc-host's output is checked against onnxruntime's on the same input
(onnxruntime is a test-only oracle: acc-host never calls it) and against
torch's. Tolerance: rtol=1e-4, atol=1e-5. The models are float32 end to end;
acc-host, onnxruntime and torch differ only in summation order and in their
exp/erf/tanh/rsqrt implementations, which after at most two transformer
layers (LayerNorm renormalises each) leaves differences of about 1e-6
(measured: <= 1.1e-6 on every context; outputs are O(1)). 1e-4 relative
leaves a margin of two orders of magnitude and still catches any real error
(a wrong transpose, a dropped mask or bias moves outputs by 1e-2 or more).

The accelerator runs must really use the accelerator: every Convolution and
FullyConnected node (and the whole of the two CNNs) is placed on it.

The second half checks, one by one, the translations these exports rely on
(ReLU6 as ``clip``, Linear layers' MatMul + Add as FullyConnected, residual
Adds as ``elemwise_add``, Flatten of a computed value).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from support.paths import ONNX_MODELS

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.onnx.backend import prepare  # noqa: E402

# Placement checks on small graphs: every supported operator is offered,
# whatever it would cost (cost-aware partitioning is tested in test_offload.py).
pytestmark = pytest.mark.usefixtures("offload_everything")

MODELS = ONNX_MODELS
NAMES = ("resnet_small", "dwsep_small", "vit_small", "bert_small")
CONTEXTS = ("cpu", "cpu_ref", "mlu")
RTOL, ATOL = 1e-4, 1e-5
# models whose every operator node is expected on the accelerator
WHOLLY_ON_ACCELERATOR = {"resnet_small", "dwsep_small"}


def _context(name: str) -> Any:
    if name == "cpu":
        return mx.cpu()
    try:
        return getattr(mx, name)(0)
    except AttributeError:
        pytest.skip(f"the bundled {name} plugin is not loaded")


def _sample(name: str) -> tuple[Any, dict[str, np.ndarray], list[np.ndarray]]:
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    data = np.load(MODELS / f"{name}.npz")
    feeds = {value.name: data[value.name] for value in model.graph.input}
    torch_out = [data[f"output_{i}"] for i in range(len(model.graph.output))]
    return model, feeds, torch_out


def _onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ops(symbol: Any) -> list[str]:
    return [node["op"] for node in json.loads(symbol.tojson())["nodes"] if node["op"] != "null"]


def test_models_are_small_and_pytorch_exported():
    for name in NAMES:
        path = MODELS / f"{name}.onnx"
        assert path.stat().st_size < 1_500_000
        model = onnx.load(str(path))
        assert model.producer_name == "pytorch"
        assert {(o.domain, o.version) for o in model.opset_import} == {("", 17)}
    ops = {node.op_type for node in onnx.load(str(MODELS / "bert_small.onnx")).graph.node}
    assert {"Gather", "LayerNormalization", "MatMul", "Softmax", "Erf", "Tanh"} <= ops
    ops = {node.op_type for node in onnx.load(str(MODELS / "dwsep_small.onnx")).graph.node}
    assert "Clip" in ops
    groups = [attr.i for node in onnx.load(str(MODELS / "dwsep_small.onnx")).graph.node
              for attr in node.attribute if node.op_type == "Conv" and attr.name == "group"]
    assert max(groups) == 64  # depthwise convolutions


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("name", NAMES)
def test_model_matches_onnxruntime_and_torch(name, context):
    ctx = _context(context)
    model, feeds, torch_out = _sample(name)
    expected = _onnxruntime(model, feeds)
    for ours, theirs in zip(expected, torch_out):  # the oracle agrees with torch
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    rep = prepare(model, accelerator=ctx)
    outputs = rep.run(feeds)
    assert len(outputs) == len(expected)
    for ours, oracle, theirs in zip(outputs, expected, torch_out):
        assert ours.shape == oracle.shape and ours.dtype == np.float32
        np.testing.assert_allclose(ours, oracle, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    again = rep.run(feeds)  # a second forward through the bound executor
    for first, second in zip(outputs, again):
        np.testing.assert_array_equal(first, second)

    executor = rep.executor
    placement = executor.placement()
    ops = dict(zip((node["name"] for node in json.loads(rep.imported.symbol.tojson())["nodes"]
                    if node["op"] != "null"), _ops(rep.imported.symbol)))
    if context == "cpu":
        assert executor.partition is None and set(placement.values()) == {"cpu(0)"}
        return
    where = str(ctx)
    on_accelerator = [node for node, device in placement.items() if device == where]
    assert on_accelerator and executor.partition.subgraphs
    heavy = [node for node, op in ops.items() if op in ("Convolution", "FullyConnected")]
    assert heavy and all(placement[node] == where for node in heavy)
    if name in WHOLLY_ON_ACCELERATOR:
        assert set(placement.values()) == {where}
        assert len(executor.partition.subgraphs) == 1


@pytest.mark.parametrize("name", ["resnet_small", "dwsep_small"])
def test_module_runs_cnn_on_mlu(name):
    """The documented Module path: import_model, bind, set_params, forward. (The
    transformers go through the backend only: Module.bind infers parameter
    shapes from the graph, and their 0-d constants have no shape hint.)"""
    ctx = _context("mlu")
    model, feeds, torch_out = _sample(name)
    sym, arg_params, aux_params = mx.onnx.import_model(model)
    mod = mx.mod.Module(sym, data_names=["input"], label_names=None, context=ctx)
    mod.bind(data_shapes=[("input", feeds["input"].shape)], for_training=False)
    mod.set_params(arg_params, aux_params)
    mod.forward(mx.io.DataBatch([mx.nd.array(feeds["input"])]))
    (out,) = mod.get_outputs()
    np.testing.assert_allclose(out.asnumpy(), _onnxruntime(model, feeds)[0], rtol=RTOL,
                               atol=ATOL)
    np.testing.assert_allclose(out.asnumpy(), torch_out[0], rtol=RTOL, atol=ATOL)


def test_mlu_reports_simulated_work_for_the_resnet():
    ctx = _context("mlu")
    model, feeds, _ = _sample("resnet_small")
    rep = prepare(model, accelerator=ctx)
    rep.run(feeds)
    ctx.configure(reset_stats=1)
    rep.run(feeds)
    stats = ctx.configure(query="stats")
    assert float(stats["sim_time_ns"]) > 0 and int(float(stats["launches"])) >= 1


# ---- the translations these exports rely on ------------------------------------------------

def _model(nodes: list, inputs: list, outputs: list, initializers: dict | None = None,
           opset: int = 17) -> Any:
    graph = helper.make_graph(
        nodes, "t", inputs, outputs,
        [numpy_helper.from_array(value, key) for key, value in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _check(model: Any, feeds: dict[str, np.ndarray], contexts: tuple[str, ...] = CONTEXTS
           ) -> list[str]:
    """Runs model on each context against onnxruntime; the host ops imported."""
    expected = _onnxruntime(model, feeds)
    for context in contexts:
        outputs = prepare(model, accelerator=_context(context)).run(feeds)
        for ours, oracle in zip(outputs, expected):
            np.testing.assert_allclose(ours, oracle, rtol=1e-5, atol=1e-6)
    return _ops(mx.onnx.import_model(model)[0])


def _value(name: str, shape: tuple, dtype: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.mark.parametrize("low, high, op", [(0.0, 6.0, "clip"), (-1.5, 0.25, "clip"),
                                           (2.0, 1.0, "_onnx_clip"), (0.0, None, "_onnx_clip"),
                                           (0.0, 0.1, "_onnx_clip")])
def test_clip_with_constant_bounds_is_mxnet_clip(low, high, op):
    """ReLU6 (Clip 0..6) becomes MXNet's clip; bounds out of order (ONNX: the
    result is max), missing, or not exact in float32 (0.1) keep _onnx_clip."""
    names = ["x", "low", "high" if high is not None else ""]
    consts = {"low": np.array(low, np.float64 if low == 0.0 and high == 0.1 else np.float32)}
    if high is not None:
        consts["high"] = np.array(high, consts["low"].dtype)
    dtype = TensorProto.DOUBLE if consts["low"].dtype == np.float64 else TensorProto.FLOAT
    model = _model([helper.make_node("Clip", names, ["y"])], [_value("x", (2, 3, 4, 4), dtype)],
                   [_value("y", (2, 3, 4, 4), dtype)], consts)
    x = (np.random.default_rng(0).standard_normal((2, 3, 4, 4)) * 4).astype(consts["low"].dtype)
    assert _check(model, {"x": x}, ("cpu", "cpu_ref")) == [op]


def test_relu6_clip_runs_on_mlu():
    consts = {"low": np.array(0.0, np.float32), "high": np.array(6.0, np.float32)}
    model = _model([helper.make_node("Clip", ["x", "low", "high"], ["y"])],
                   [_value("x", (1, 4, 3, 3))], [_value("y", (1, 4, 3, 3))], consts)
    x = (np.random.default_rng(1).standard_normal((1, 4, 3, 3)) * 8).astype(np.float32)
    np.testing.assert_array_equal(prepare(model, accelerator=_context("mlu")).run([x])[0],
                                  np.clip(x, 0, 6))
    assert set(prepare(model, accelerator="mlu").executor.placement().values()) == {"mlu(0)"}


def test_matmul_with_constant_weight_and_bias_is_one_fully_connected():
    rng = np.random.default_rng(2)
    consts = {"W": rng.standard_normal((8, 5)).astype(np.float32),
              "b": rng.standard_normal(5).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]),
             helper.make_node("Add", ["b", "m"], ["y"])]   # the bias on either side
    model = _model(nodes, [_value("x", (2, 3, 8))], [_value("y", (2, 3, 5))], consts)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    assert _check(model, {"x": x}) == ["FullyConnected"]
    sym, arg_params, _ = mx.onnx.import_model(model)
    np.testing.assert_array_equal(arg_params["W_transposed"].asnumpy(), consts["W"].T)
    assert sorted(arg_params) == ["W_transposed", "b"]


def test_matmul_output_used_twice_keeps_the_unbiased_product():
    rng = np.random.default_rng(3)
    consts = {"W": rng.standard_normal((4, 4)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32),
              "c": rng.standard_normal((1, 4)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"]),
             helper.make_node("Add", ["m", "c"], ["z"]),      # a 2-D bias: broadcast
             helper.make_node("Add", ["y", "m"], ["w"])]      # same shapes: element-wise
    model = _model(nodes, [_value("x", (3, 4))],
                   [_value(n, (3, 4)) for n in ("y", "z", "w")], consts)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    ops = _check(model, {"x": x})
    assert sorted(ops) == ["FullyConnected", "FullyConnected", "broadcast_add", "elemwise_add"]


def test_matmul_not_a_linear_layer_stays_onnx_matmul():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    vector = _model([helper.make_node("MatMul", ["x", "W"], ["y"])], [_value("x", (4,))],
                    [_value("y", (3,))], {"W": w})
    assert _check(vector, {"x": rng.standard_normal(4).astype(np.float32)}) == ["_onnx_matmul"]
    both = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                  [_value("x", (2, 2, 4)), _value("w", (4, 3))], [_value("y", (2, 2, 3))])
    feeds = {"x": rng.standard_normal((2, 2, 4)).astype(np.float32), "w": w}
    assert _check(both, feeds, ("cpu", "cpu_ref")) == ["_onnx_matmul"]
    ints = _model([helper.make_node("MatMul", ["x", "W"], ["y"])],
                  [_value("x", (2, 4), TensorProto.INT32)],
                  [_value("y", (2, 3), TensorProto.INT32)],
                  {"W": np.arange(12, dtype=np.int32).reshape(4, 3)})
    assert _check(ints, {"x": np.arange(8, dtype=np.int32).reshape(2, 4)},
                  ("cpu",)) == ["_onnx_matmul"]


def test_add_of_equal_shapes_is_elementwise_and_flatten_of_computed_value_is_mxnet():
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["s"]),       # residual: elemwise_add
             helper.make_node("Add", ["s", "v"], ["t"]),       # broadcasting: broadcast_add
             helper.make_node("Flatten", ["t"], ["y"])]
    model = _model(nodes, [_value("x", (2, 3, 4, 4)), _value("v", (3, 1, 1))],
                   [_value("y", (2, 48))])
    feeds = {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32),
             "v": rng.standard_normal((3, 1, 1)).astype(np.float32)}
    assert _check(model, feeds) == ["Activation", "elemwise_add", "broadcast_add", "Flatten"]


# ---- the transformers as one loaded cpu_ref model ------------------------------------------


def _imported_with_fixed_batch(name: str) -> tuple[Any, dict, dict, dict[str, np.ndarray]]:
    model, feeds, _ = _sample(name)
    sym, arg_params, aux_params = mx.onnx.import_model(model)
    weights = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
    return model, sym, weights, feeds


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["vit_small", "bert_small"])
def test_transformer_annotates_and_loads_as_one_cpu_ref_model(name, threads):
    """With the weights' shapes and dtypes (a mapping of arrays), the imported
    graph's shapes are all known: it loads as one cpu_ref model, which
    matches onnxruntime; the ONNX backend runs it as one cpu_ref subgraph."""
    from acc_host.abi.annotate import annotate_symbol
    from acc_host.abi.loaded_model import LoadedModel

    model, sym, weights, feeds = _imported_with_fixed_batch(name)
    expected = _onnxruntime(model, feeds)
    graph = annotate_symbol(sym, {key: value.shape for key, value in feeds.items()},
                            weights=weights,
                            dtypes={key: value.dtype for key, value in feeds.items()})
    ctx = _context("cpu_ref")
    ctx.configure(num_threads=threads)
    try:
        with LoadedModel(mx.get_library("cpu_ref"), graph, weights) as loaded:
            outputs = list(loaded.infer(feeds).values())
    finally:
        ctx.configure(num_threads=1)
    assert len(outputs) == len(expected)
    for ours, oracle in zip(outputs, expected):
        np.testing.assert_allclose(ours, oracle, rtol=RTOL, atol=ATOL)
    if threads == 1:
        rep = prepare(model, accelerator=ctx)
        for ours, oracle in zip(rep.run(feeds), expected):
            np.testing.assert_allclose(ours, oracle, rtol=RTOL, atol=ATOL)
        assert set(rep.executor.placement().values()) == {str(ctx)}
        assert len(rep.executor.partition.subgraphs) == 1


def test_constants_carry_shape_and_dtype_hints():
    """An initializer read only by Gather (its table) or a Concat is known to
    shape inference from the imported symbol alone."""
    rng = np.random.default_rng(6)
    consts = {"table": rng.standard_normal((10, 4)).astype(np.float32),
              "cls": rng.standard_normal((2, 1, 4)).astype(np.float32)}
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"]),
             helper.make_node("Concat", ["cls", "rows"], ["y"], axis=1)]
    model = _model(nodes, [_value("ids", (2, 3), TensorProto.INT64)], [_value("y", (2, 4, 4))],
                   consts)
    ids = np.array([[0, 9, 3], [1, 1, 2]], np.int64)
    assert _check(model, {"ids": ids}, ("cpu", "cpu_ref")) == ["_onnx_gather", "Concat"]
    sym, _, _ = mx.onnx.import_model(model)
    _, out_shapes, _ = sym.infer_shape(ids=(2, 3))
    assert out_shapes == [(2, 4, 4)]
    _, out_types, _ = sym.infer_type(ids=np.int64)
    assert out_types == [np.float32]


def test_annotate_symbol_takes_weight_arrays():
    """A scalar weight (shape ()) cannot carry a shape hint: the mapping form
    of annotate_symbol's weights gives it; a non-array value is refused."""
    from acc_host.abi.annotate import annotate_symbol
    from acc_host.errors import InvalidArgumentError

    out = mx.sym.broadcast_add(mx.sym.Variable("data"), mx.sym.Variable("w"), name="add")
    with pytest.raises(InvalidArgumentError):
        annotate_symbol(out, {"data": (2, 3)}, weights=["w"])
    graph = annotate_symbol(out, {"data": (2, 3)}, weights={"w": np.float32(2.0) * np.ones(())})
    assert json.loads(graph["nodes"][-1]["attrs"]["__out_shapes__"]) == [[2, 3]]
    with pytest.raises(InvalidArgumentError, match="expected an array"):
        annotate_symbol(out, {"data": (2, 3)}, weights={"w": 2.0})


def _gelu_nodes(x: str, form: str) -> list:
    """0.5 x (1 + erf(x / sqrt 2)) as PyTorch exports it (form "div": nn.GELU;
    "half_first": x * 0.5 * (1 + erf(x * (1 / sqrt 2))))."""
    if form == "div":
        return [helper.make_node("Div", [x, "sqrt2"], ["d"]),
                helper.make_node("Erf", ["d"], ["e"]),
                helper.make_node("Add", ["e", "one"], ["a"]),
                helper.make_node("Mul", [x, "a"], ["m"]),
                helper.make_node("Mul", ["m", "half"], ["y"])]
    return [helper.make_node("Mul", ["inv_sqrt2", x], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["one", "e"], ["a"]),
            helper.make_node("Mul", ["half", x], ["m"]),
            helper.make_node("Mul", ["a", "m"], ["y"])]


_GELU_CONSTS = {"sqrt2": np.array(2 ** 0.5, np.float32), "one": np.array(1.0, np.float32),
                "half": np.array(0.5, np.float32),
                "inv_sqrt2": np.array(0.5 ** 0.5, np.float32)}


@pytest.mark.parametrize("form", ["div", "half_first"])
def test_erf_gelu_chain_is_leaky_relu_gelu(form):
    rng = np.random.default_rng(7)
    model = _model(_gelu_nodes("x", form), [_value("x", (2, 5, 8))], [_value("y", (2, 5, 8))],
                   _GELU_CONSTS)
    x = (rng.standard_normal((2, 5, 8)) * 3).astype(np.float32)
    assert _check(model, {"x": x}) == ["LeakyReLU"]


def test_erf_gelu_chain_with_a_shared_intermediate_is_kept():
    rng = np.random.default_rng(8)
    nodes = _gelu_nodes("x", "div") + [helper.make_node("Add", ["e", "y"], ["z"])]
    model = _model(nodes, [_value("x", (3, 8))], [_value("z", (3, 8))], _GELU_CONSTS)
    ops = _check(model, {"x": rng.standard_normal((3, 8)).astype(np.float32)})
    assert "LeakyReLU" not in ops and "erf" in ops


@pytest.mark.parametrize("bias", [True, False])
def test_last_axis_layer_normalization_is_mxnet_layer_norm(bias):
    rng = np.random.default_rng(9)
    consts = {"scale": rng.standard_normal(8).astype(np.float32)}
    if bias:
        consts["bias"] = rng.standard_normal(8).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "scale"] + (["bias"] if bias else []),
                            ["y"], epsilon=1e-3)
    model = _model([node], [_value("x", (2, 5, 8))], [_value("y", (2, 5, 8))], consts)
    x = (rng.standard_normal((2, 5, 8)) * 2 + 1).astype(np.float32)
    assert _check(model, {"x": x}) == ["LayerNorm"]


def test_layer_normalization_over_several_axes_stays_onnx_norm():
    rng = np.random.default_rng(10)
    consts = {"scale": rng.standard_normal((5, 8)).astype(np.float32)}
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], axis=1)
    model = _model([node], [_value("x", (2, 5, 8))], [_value("y", (2, 5, 8))], consts)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    assert _check(model, {"x": x}) == ["_onnx_norm"]


def test_float_arithmetic_with_a_scalar_constant_is_a_scalar_operator():
    rng = np.random.default_rng(11)
    consts = {"two": np.array(2.0, np.float32), "one": np.array([1.0], np.float32),
              "v": np.array([[0.25]], np.float32), "k": np.array([3], np.int32)}
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]),
             helper.make_node("Sub", ["one", "a"], ["b"]),
             helper.make_node("Div", ["b", "v"], ["c"]),
             helper.make_node("Div", ["two", "c"], ["d"]),
             helper.make_node("Add", ["d", "x"], ["y"]),
             helper.make_node("Div", ["i", "k"], ["q"]),      # integers: truncation
             helper.make_node("Div", ["y", "x"], ["r"])]      # floats: broadcast_div
    model = _model(nodes, [_value("x", (3, 4)), _value("i", (3, 4), TensorProto.INT32)],
                   [_value("r", (3, 4)), _value("q", (3, 4), TensorProto.INT32)], consts)
    feeds = {"x": (rng.standard_normal((3, 4)) + 3).astype(np.float32),
             "i": rng.integers(-20, 20, (3, 4)).astype(np.int32)}
    assert _check(model, feeds, ("cpu", "cpu_ref")) == [
        "_mul_scalar", "_rminus_scalar", "_div_scalar", "_rdiv_scalar", "elemwise_add",
        "broadcast_div", "_onnx_binary"]
