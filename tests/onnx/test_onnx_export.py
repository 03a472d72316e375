"""mx.onnx.export_model: the shipped MXNet 1.9.1 models and every exporter
function, checked with onnx's full checker and run by onnxruntime (a test
oracle only) against MXNet's own outputs and the host CPU path."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import MODELS

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.onnx.export_ops import EXPORTERS, canonical, exported_operators  # noqa: E402
from acc_host.onnx.exporter import DEFAULT_OPSET  # noqa: E402
from acc_host.ops import tensor as tensor_ops  # noqa: E402

NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]
RTOL, ATOL = 1e-4, 1e-5
S = mx.sym


def _fixture(name: str) -> tuple[str, np.ndarray, list[np.ndarray]]:
    folder = MODELS / name
    expected = [np.load(folder / f"expected_{k}.npy")
                for k in range(len(list(folder.glob("expected_*.npy"))))]
    return str(folder / "model"), np.load(folder / "input_0.npy"), expected


def run_onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_cpu(sym: Any, args: dict[str, np.ndarray], aux: dict[str, np.ndarray],
            data_names: list[str]) -> list[np.ndarray]:
    executor = sym.bind(mx.cpu(), {k: mx.nd.array(v, dtype=v.dtype) for k, v in args.items()},
                        aux_states={k: mx.nd.array(v, dtype=v.dtype) for k, v in aux.items()},
                        data_names=data_names)
    return [out.asnumpy() for out in executor.forward()]


# ---- the shipped models ------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_model_exports_and_matches_mxnet(name: str) -> None:
    prefix, image, expected = _fixture(name)
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    model = mx.onnx.export_model(sym, {**arg_params, **aux_params}, [image.shape], np.float32)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == DEFAULT_OPSET
    assert [value.name for value in model.graph.input] == ["data"]
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert tuple(dims) == image.shape
    assert [value.name for value in model.graph.output] == sym.list_outputs()
    initializers = {init.name: init for init in model.graph.initializer}
    for key, value in {**arg_params, **aux_params}.items():
        if key in initializers:
            np.testing.assert_array_equal(onnx.numpy_helper.to_array(initializers[key]),
                                          value.asnumpy())
    used = {name for node in model.graph.node for name in node.input}
    assert {key for key in {**arg_params, **aux_params} if key in used} <= set(initializers)
    outputs = run_onnxruntime(model, {"data": image})
    assert len(outputs) == len(expected)
    for output, reference in zip(outputs, expected):
        np.testing.assert_allclose(output, reference, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", NAMES)
def test_model_round_trip_through_import(name: str) -> None:
    """export -> mx.onnx.import_model -> the host CPU path."""
    prefix, image, expected = _fixture(name)
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    model = mx.onnx.export_model(sym, [arg_params, aux_params], [image.shape])
    sym2, args2, aux2 = mx.onnx.import_model(model)
    args = {key: value.asnumpy() for key, value in args2.items()}
    aux = {key: value.asnumpy() for key, value in aux2.items()}
    outputs = run_cpu(sym2, {"data": image, **args}, aux, ["data"])
    for output, reference in zip(outputs, expected):
        np.testing.assert_allclose(output, reference, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("opset", [13, 18, 20])
def test_transformer_at_other_opsets(opset: int) -> None:
    """LayerNorm decomposed before 17, Reduce axes as inputs from 18, Gelu from 20."""
    prefix, tokens, expected = _fixture("transformer_enc_mxcodes")
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    model = mx.onnx.export_model(sym, {**arg_params, **aux_params}, [tokens.shape],
                                 opset_version=opset)
    onnx.checker.check_model(model, full_check=True)
    ops = {node.op_type for node in model.graph.node}
    assert ("LayerNormalization" in ops) == (opset >= 17)
    assert ("Gelu" in ops) == (opset >= 20)
    for output, reference in zip(run_onnxruntime(model, {"data": tokens}), expected):
        np.testing.assert_allclose(output, reference, rtol=RTOL, atol=ATOL)


def test_file_forms(tmp_path: Path) -> None:
    """sym and params as files; a path in gives the path back, None the ModelProto."""
    prefix, image, expected = _fixture("squeezenet1_1")
    target = tmp_path / "squeezenet.onnx"
    result = mx.onnx.export_model(f"{prefix}-symbol.json", f"{prefix}-0000.params",
                                  input_shape=[image.shape], input_type=np.float32,
                                  onnx_file_path=str(target))
    assert result == str(target) and target.exists()
    loaded = onnx.load(str(target))
    onnx.checker.check_model(str(target), full_check=True)
    np.testing.assert_allclose(run_onnxruntime(loaded, {"data": image})[0], expected[0],
                               rtol=RTOL, atol=ATOL)
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    proto = mx.onnx.export_model(sym, {**arg_params, **aux_params}, [image.shape])
    assert isinstance(proto, onnx.ModelProto)
    assert [node.SerializeToString() for node in proto.graph.node] == \
        [node.SerializeToString() for node in loaded.graph.node]
    assert proto.graph.name == "acc_host_model" and loaded.graph.name == "squeezenet"
    big = tmp_path / "external.onnx"
    assert mx.onnx.export_model(sym, {**arg_params, **aux_params}, [image.shape],
                                onnx_file_path=big, large_model=True) == str(big)
    assert (tmp_path / "external.onnx.data").exists()
    np.testing.assert_allclose(run_onnxruntime(str(big), {"data": image})[0], expected[0],
                               rtol=RTOL, atol=ATOL)


def test_argument_errors() -> None:
    prefix, image, _ = _fixture("squeezenet1_1")
    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, 0)
    params = {**arg_params, **aux_params}
    with pytest.raises(mx.InvalidArgumentError, match="dynamic"):
        mx.onnx.export_model(sym, params, [image.shape], dynamic=True)
    with pytest.raises(mx.InvalidArgumentError, match="2 input shapes for 1 data inputs"):
        mx.onnx.export_model(sym, params, [image.shape, image.shape])
    missing = dict(params)
    missing.pop(next(iter(arg_params)))
    with pytest.raises(mx.InvalidArgumentError, match="every other argument must be in params"):
        mx.onnx.export_model(sym, missing, [image.shape])
    with pytest.raises(mx.InvalidArgumentError, match="opset_version 9"):
        mx.onnx.export_model(sym, params, [image.shape], opset_version=9)


def test_unsupported_operators_reported_at_once() -> None:
    data = S.Variable("data")
    a = S.Pooling(data, kernel=(2, 2), pool_type="lp", p_value=1, name="lp_pool")
    b = S.topk(a, k=2, ret_typ="mask", name="mask_topk")
    c = S._onnx_cumsum(b, axis=1, name="cumsum_node")
    d = S._onnx_trilu(c, name="trilu_node")
    with pytest.raises(mx.UnsupportedOnnxExportError) as info:
        mx.onnx.export_model(d, {}, [(1, 2, 6, 6)])
    error = info.value
    assert isinstance(error, mx.OperatorError)
    assert [entry[:2] for entry in error.unsupported] == [
        ("lp_pool", "Pooling"), ("mask_topk", "topk"), ("cumsum_node", "_onnx_cumsum"),
        ("trilu_node", "_onnx_trilu")]
    for name in ("lp_pool", "mask_topk", "cumsum_node", "trilu_node"):
        assert name in str(error)


def test_softmax_output_label_is_not_an_input() -> None:
    data = S.Variable("data")
    out = S.SoftmaxOutput(S.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")
    rng = np.random.default_rng(0)
    params = {"fc_weight": rng.standard_normal((4, 6)).astype(np.float32),
              "fc_bias": rng.standard_normal(4).astype(np.float32)}
    model = mx.onnx.export_model(out, params, [(3, 6)])
    assert [value.name for value in model.graph.input] == ["data"]
    x = rng.standard_normal((3, 6)).astype(np.float32)
    reference = run_cpu(out, {"data": x, **params, "softmax_label": np.zeros(3, np.float32)},
                        {}, ["data", "softmax_label"])
    np.testing.assert_allclose(run_onnxruntime(model, {"data": x})[0], reference[0],
                               rtol=RTOL, atol=ATOL)


# ---- every exporter function against the CPU path ------------------------------------------

Inputs = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def uniform(low: float = -2.0, high: float = 2.0) -> Inputs:
    return lambda rng, shape: rng.uniform(low, high, shape).astype(np.float32)


def integers(low: int, high: int, dtype: Any = np.float32) -> Inputs:
    return lambda rng, shape: rng.integers(low, high, shape).astype(dtype)


def halves(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.integers(-8, 9, shape) / 2).astype(np.float32)


class Case:
    """A symbol over data variables (shapes given, filled by make), with its
    other arguments and auxiliary states as random parameters."""

    def __init__(self, ident: str, build: Callable[..., Any],
                 shapes: dict[str, tuple[int, ...]], make: Inputs | dict[str, Inputs] | None = None,
                 opsets: tuple[int, ...] = (DEFAULT_OPSET,)) -> None:
        self.ident, self.build, self.shapes, self.make, self.opsets = (
            ident, build, shapes, make, opsets)

    def symbol(self) -> Any:
        return self.build(*(S.Variable(name) for name in self.shapes))

    def data(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        values = {}
        for name, shape in self.shapes.items():
            make = self.make.get(name) if isinstance(self.make, dict) else self.make
            values[name] = (make or uniform())(rng, shape)
        return values

    def __repr__(self) -> str:
        return self.ident


def random_params(sym: Any, shapes: dict[str, tuple[int, ...]],
                  rng: np.random.Generator) -> tuple[dict, dict]:
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    args = {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in zip(sym.list_arguments(), arg_shapes) if name not in shapes}
    aux = {name: rng.uniform(0.5, 1.5, shape).astype(np.float32)
           for name, shape in zip(sym.list_auxiliary_states(), aux_shapes)}
    return args, aux


def check_case(case: Case, opset: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    sym = case.symbol()
    data = case.data(rng)
    args, aux = random_params(sym, case.shapes, rng)
    reference = run_cpu(sym, {**data, **args}, aux, list(case.shapes))
    model = mx.onnx.export_model(sym, {**args, **aux}, list(case.shapes.values()),
                                 [value.dtype for value in data.values()],
                                 opset_version=opset)
    onnx.checker.check_model(model, full_check=True)
    assert [value.name for value in model.graph.input] == list(case.shapes)
    outputs = run_onnxruntime(model, data)
    assert len(outputs) == len(reference)
    for output, expected in zip(outputs, reference):
        assert output.dtype == expected.dtype and output.shape == expected.shape
        np.testing.assert_allclose(output, expected, rtol=RTOL, atol=ATOL)


X = {"data": (2, 3, 4)}
IMG = {"data": (2, 3, 8, 8)}

NN_CASES = [
    Case("conv2d", lambda d: S.Convolution(d, num_filter=4, kernel=(3, 3), pad=(1, 1),
                                           stride=(2, 2), name="c"), {"data": (2, 3, 9, 9)}),
    Case("conv2d_groups_dilate_nobias",
         lambda d: S.Convolution(d, num_filter=4, kernel=(3, 3), dilate=(2, 2), num_group=2,
                                 no_bias=True, name="c"), {"data": (1, 4, 10, 10)}),
    Case("conv1d", lambda d: S.Convolution(d, num_filter=2, kernel=(3,), pad=(2,), name="c"),
         {"data": (2, 3, 8)}),
    Case("conv3d", lambda d: S.Convolution(d, num_filter=2, kernel=(2, 2, 2), name="c"),
         {"data": (1, 2, 5, 5, 5)}),
    Case("deconv_adj", lambda d: S.Deconvolution(d, num_filter=3, kernel=(3, 3), stride=(2, 2),
                                                 pad=(1, 1), adj=(1, 1), no_bias=False,
                                                 name="dc"), {"data": (1, 2, 5, 5)}),
    Case("deconv_groups_target",
         lambda d: S.Deconvolution(d, num_filter=4, kernel=(4, 4), stride=(2, 2), num_group=2,
                                   target_shape=(11, 11), name="dc"), {"data": (1, 2, 5, 5)}),
    Case("fc_flatten", lambda d: S.FullyConnected(d, num_hidden=5, name="fc"), X),
    Case("fc_no_flatten", lambda d: S.FullyConnected(d, num_hidden=5, flatten=False, name="fc"),
         X),
    Case("fc_no_bias_2d", lambda d: S.FullyConnected(d, num_hidden=5, no_bias=True, name="fc"),
         {"data": (3, 7)}),
    *[Case(f"activation_{kind}", lambda d, kind=kind: S.Activation(d, act_type=kind), X,
           opsets=(17, 18))
      for kind in ("relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish")],
    *[Case(f"leaky_{kind}", lambda d, kind=kind: S.LeakyReLU(d, act_type=kind, slope=0.3,
                                                           name="lr"), IMG, opsets=(17, 20))
      for kind in ("leaky", "prelu", "rrelu", "elu", "selu", "gelu")],
    Case("pool_max_valid", lambda d: S.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1)), IMG),
    Case("pool_max_full", lambda d: S.Pooling(d, kernel=(3, 3), stride=(2, 2),
                                              pooling_convention="full"), {"data": (1, 2, 8, 8)}),
    Case("pool_avg_valid_pad", lambda d: S.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                                   pool_type="avg"), IMG),
    Case("pool_avg_full_pad", lambda d: S.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                                  pool_type="avg", pooling_convention="full"),
         IMG),
    Case("pool_avg_full_exclude_pad",
         lambda d: S.Pooling(d, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                             pooling_convention="full", count_include_pad=False), IMG),
    Case("pool_sum_full", lambda d: S.Pooling(d, kernel=(2, 3), stride=(2, 2), pad=(1, 0),
                                              pool_type="sum", pooling_convention="full"), IMG),
    Case("pool_lp2", lambda d: S.Pooling(d, kernel=(2, 2), stride=(2, 2), pool_type="lp",
                                         p_value=2), IMG),
    Case("pool_same_1d", lambda d: S.Pooling(d, kernel=(3,), stride=(2,), pool_type="avg",
                                             pooling_convention="same"), {"data": (1, 2, 7)}),
    Case("pool_max_3d", lambda d: S.Pooling(d, kernel=(2, 2, 2), stride=(2, 2, 2)),
         {"data": (1, 2, 4, 5, 4)}),
    *[Case(f"pool_global_{kind}", lambda d, kind=kind: S.Pooling(
        d, kernel=(1, 1), global_pool=True, pool_type=kind, p_value=2), IMG)
      for kind in ("max", "avg", "sum", "lp")],
    Case("batchnorm", lambda d: S.BatchNorm(d, fix_gamma=False, eps=1e-3, name="bn"), IMG),
    Case("batchnorm_fix_gamma_global", lambda d: S.BatchNorm(d, use_global_stats=True,
                                                             name="bn"), IMG),
    Case("batchnorm_last_axis_mean_var",
         lambda d: S.BatchNorm(d, axis=-1, fix_gamma=False, output_mean_var=True, name="bn"), X),
    Case("layernorm", lambda d: S.LayerNorm(d, name="ln"), X, opsets=(13, 17)),
    Case("layernorm_axis1_mean_std",
         lambda d: S.LayerNorm(d, axis=1, output_mean_var=True, name="ln"), X),
    Case("instancenorm", lambda d: S.InstanceNorm(d, eps=1e-3, name="in"), IMG),
    Case("softmax_temperature", lambda d: S.softmax(d, axis=1, temperature=2.0), X),
    Case("softmax_dtype", lambda d: S.softmax(d, dtype="float64"), X),
    Case("log_softmax", lambda d: S.log_softmax(d, axis=0), X),
    Case("softmax_activation_instance", lambda d: S.SoftmaxActivation(d), X),
    Case("softmax_activation_channel", lambda d: S.SoftmaxActivation(d, mode="channel"), X),
    Case("softmax_output_flat", lambda d: S.SoftmaxOutput(d, name="so"), IMG),
    Case("softmax_output_multi", lambda d: S.SoftmaxOutput(d, multi_output=True, name="so"), IMG),
    Case("dropout", lambda d: S.Dropout(d, p=0.4), X),
    Case("flatten", lambda d: S.Flatten(d), X),
    Case("embedding_clipped", lambda d: S.Embedding(d, input_dim=10, output_dim=4, name="emb"),
         {"data": (2, 5)}, integers(-3, 14)),
    Case("upsampling", lambda d: S.UpSampling(d, scale=2, sample_type="nearest", num_args=1),
         IMG),
    Case("upsampling_two_inputs",
         lambda a, b: S.UpSampling(a, b, scale=2, sample_type="nearest", num_args=2),
         {"data": (1, 2, 4, 4), "data1": (1, 3, 2, 2)}),
    *[Case(f"pad_{mode}", lambda d, mode=mode: S.Pad(
        d, mode=mode, pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=1.5), IMG)
      for mode in ("constant", "edge", "reflect")],
]

ONE, TWO = {"data": (2, 3, 4)}, {"data": (2, 3, 4), "data1": (2, 3, 4)}
BROADCAST = {"data": (2, 3, 4), "data1": (1, 3, 1)}
SMALL_INTS = integers(-3, 4)


def _unary_inputs(name: str) -> Inputs:
    if name in ("log", "sqrt", "rsqrt", "log2", "log10", "log1p"):
        return uniform(0.2, 3.0)
    if name == "arccosh":
        return uniform(1.1, 3.0)
    if name in ("arcsin", "arccos", "arctanh"):
        return uniform(-0.9, 0.9)
    if name in ("round", "rint", "fix", "trunc", "floor", "ceil", "sign", "logical_not"):
        return halves
    if name in ("reciprocal", "rcbrt"):
        return uniform(0.3, 2.0)
    return uniform()


TENSOR_CASES = [
    *[Case(f"elemwise_{name}", lambda a, b, name=name: getattr(S, name)(a, b), TWO, SMALL_INTS)
      for name, _, _ in tensor_ops._ELEMWISE_BINARY],
    *[Case(name, lambda a, b, name=name: getattr(S, name)(a, b), BROADCAST, SMALL_INTS)
      for name, _, _ in tensor_ops._BROADCAST_BINARY],
    *[Case(name, lambda d, name=name: getattr(S, name)(d, scalar=2.0), ONE, SMALL_INTS)
      for name, _, _, _ in tensor_ops._SCALAR_OPS],
    *[Case(f"unary_{name}", lambda d, name=name: getattr(S, name)(d), ONE, _unary_inputs(name))
      for name in tensor_ops._UNARY],
    Case("copy", lambda d: S._copy(d), ONE),
    Case("blockgrad", lambda d: S.BlockGrad(d), ONE),
    Case("zeros_like", lambda d: S.zeros_like(d), ONE),
    Case("ones_like", lambda d: S.ones_like(d), ONE),
    Case("cast_int32", lambda d: S.Cast(d, dtype="int32"), ONE, uniform(-9, 9)),
    Case("cast_float64", lambda d: S.Cast(d, dtype="float64"), ONE),
    Case("clip", lambda d: S.clip(d, a_min=-0.5, a_max=0.7), ONE),
    Case("add_n", lambda a, b, c: S.add_n(a, b, c),
         {"data": (2, 3), "data1": (2, 3), "data2": (2, 3)}),
    Case("reshape_codes", lambda d: S.Reshape(d, shape=(-4, 1, -1, -3)), {"data": (2, 3, 4)}),
    Case("reshape_reverse", lambda d: S.Reshape(d, shape=(-1, 0), reverse=True), ONE),
    Case("reshape_keep_rest", lambda d: S.reshape(d, shape=(0, -2)), ONE),
    Case("squeeze", lambda d: S.squeeze(d, axis=(1,)), {"data": (2, 1, 4)}),
    Case("squeeze_all", lambda d: S.squeeze(d), {"data": (1, 1)}),
    Case("expand_dims", lambda d: S.expand_dims(d, axis=-1), ONE),
    Case("transpose_default", lambda d: S.transpose(d), ONE),
    Case("transpose_axes", lambda d: S.transpose(d, axes=(1, 0, 2)), ONE),
    Case("concat", lambda a, b: S.Concat(a, b, dim=-1), {"data": (2, 3), "data1": (2, 5)}),
    Case("stack", lambda a, b: S.stack(a, b, axis=1), TWO),
    Case("split", lambda d: S.SliceChannel(d, num_outputs=2, axis=-1), ONE),
    Case("split_squeeze", lambda d: S.split(d, num_outputs=3, axis=1, squeeze_axis=True), ONE),
    Case("slice", lambda d: S.slice(d, begin=(None, 2), end=(None, 0), step=(1, -1)), ONE),
    Case("slice_through_zero", lambda d: S.slice(d, begin=(1, None), end=(None, None),
                                                 step=(1, -2)), {"data": (3, 5)}),
    Case("slice_axis", lambda d: S.slice_axis(d, axis=2, begin=-3, end="None"), ONE),
    Case("slice_like", lambda a, b: S.slice_like(a, b, axes=(0, 2)),
         {"data": (4, 3, 5), "data1": (2, 3, 3)}),
    Case("broadcast_to", lambda d: S.broadcast_to(d, shape=(2, 0, 4)), {"data": (1, 3, 1)}),
    Case("broadcast_axis", lambda d: S.broadcast_axis(d, axis=(0, 2), size=(2, 5)),
         {"data": (1, 3, 1)}),
    Case("broadcast_like", lambda a, b: S.broadcast_like(a, b),
         {"data": (1, 3, 1), "data1": (2, 3, 4)}),
    Case("tile", lambda d: S.tile(d, reps=(2, 1, 3)), {"data": (3, 2)}),
    Case("repeat_axis", lambda d: S.repeat(d, repeats=2, axis=1), ONE),
    Case("repeat_flat", lambda d: S.repeat(d, repeats=3), {"data": (2, 2)}),
    Case("dot_2d", lambda a, b: S.dot(a, b), {"data": (3, 4), "data1": (4, 5)}),
    Case("dot_nd_transposed", lambda a, b: S.dot(a, b, transpose_a=True, transpose_b=True),
         {"data": (4, 2, 3), "data1": (5, 4)}),
    Case("dot_vectors", lambda a, b: S.dot(a, b), {"data": (4,), "data1": (4,)}),
    Case("batch_dot", lambda a, b: S.batch_dot(a, b, transpose_b=True),
         {"data": (2, 3, 4), "data1": (2, 5, 4)}),
    Case("batch_dot_transpose_a", lambda a, b: S.batch_dot(a, b, transpose_a=True),
         {"data": (2, 4, 3), "data1": (2, 4, 5)}),
    *[Case(f"take_{mode}", lambda a, i, mode=mode: S.take(a, i, axis=1, mode=mode),
           {"data": (2, 5, 3), "data1": (2, 4)},
           {"data": uniform(), "data1": integers(-4 if mode != "clip" else -7, 5 if mode !=
                                                 "clip" else 9)})
      for mode in ("clip", "wrap", "raise")],
    Case("where", lambda c, x, y: S.where(c, x, y), {"data": (2, 3), "data1": (2, 3),
                                                     "data2": (2, 3)},
         {"data": integers(0, 2), "data1": uniform(), "data2": uniform()}),
    Case("where_rows", lambda c, x, y: S.where(c, x, y),
         {"data": (2,), "data1": (2, 3), "data2": (2, 3)},
         {"data": lambda rng, shape: np.array([0, 1], np.float32), "data1": uniform(),
          "data2": uniform()}),
    *[Case(f"reduce_{name}", lambda d, name=name: getattr(S, name)(d, axis=(0, 2)), ONE)
      for name in ("sum", "mean", "prod", "max", "min", "nansum", "nanprod")],
    Case("reduce_all", lambda d: S.sum(d), ONE),
    Case("reduce_keepdims_exclude", lambda d: S.mean(d, axis=(1,), keepdims=True, exclude=True),
         ONE, opsets=(13, 18)),
    Case("reduce_nan", lambda d: S.nansum(d, axis=(1,)), ONE,
         lambda rng, shape: np.where(rng.uniform(size=shape) < 0.3, np.nan,
                                     rng.uniform(-1, 1, shape)).astype(np.float32)),
    Case("argmax_flat", lambda d: S.argmax(d), ONE),
    Case("argmax_axis", lambda d: S.argmax(d, axis=1, keepdims=True), ONE),
    Case("argmin_axis", lambda d: S.argmin(d, axis=-1), ONE),
    Case("topk_both", lambda d: S.topk(d, axis=1, k=2, ret_typ="both"), ONE),
    Case("topk_value_ascending", lambda d: S.topk(d, k=3, ret_typ="value", is_ascend=True), ONE),
    Case("topk_indices_flat", lambda d: S.topk(d, axis=None, k=4, dtype="int32"), ONE),
]

CASES = NN_CASES + TENSOR_CASES


@pytest.mark.parametrize("case,opset", [(case, opset) for case in CASES for opset in case.opsets],
                         ids=lambda value: str(value))
def test_exporter_matches_cpu_path(case: Case, opset: int) -> None:
    check_case(case, opset)


def test_every_exporter_is_tested() -> None:
    tested = set()
    for case in CASES:
        nodes = json.loads(case.symbol().tojson())["nodes"]
        tested.update(canonical(node["op"]) for node in nodes if node["op"] != "null")
    assert set(EXPORTERS) - tested == set()
    assert "reshape" in exported_operators() and "_onnx_cumsum" not in exported_operators()


@settings(max_examples=25, deadline=None)
@given(pool_type=st.sampled_from(["max", "avg", "sum"]),
       convention=st.sampled_from(["valid", "full"]),
       kernel=st.integers(1, 4), stride=st.integers(1, 3), pad=st.integers(0, 2),
       size=st.integers(4, 9), include_pad=st.sampled_from([None, True, False]))
def test_pooling_geometry(pool_type: str, convention: str, kernel: int, stride: int, pad: int,
                          size: int, include_pad: bool | None) -> None:
    """Random 2-D windows under both conventions: MXNet's output extents and
    divisors are reproduced with explicit padding."""
    pad = min(pad, kernel - 1)
    extent = size + 2 * pad - kernel
    out = (-(-extent // stride) if convention == "full" else extent // stride) + 1
    if (out - 1) * stride - pad >= size:
        return  # a window wholly outside the data: refused, see below
    case = Case("pool", lambda d: S.Pooling(d, kernel=(kernel, kernel), stride=(stride, stride),
                                            pad=(pad, pad), pool_type=pool_type,
                                            pooling_convention=convention,
                                            count_include_pad=include_pad),
                {"data": (1, 2, size, size)})
    check_case(case, DEFAULT_OPSET)


def test_pooling_window_outside_data_is_refused() -> None:
    data = S.Variable("data")
    sym = S.Pooling(data, kernel=(1, 1), stride=(3, 3), pooling_convention="full", name="p")
    with pytest.raises(mx.UnsupportedOnnxExportError, match="wholly outside"):
        mx.onnx.export_model(sym, {}, [(1, 1, 5, 5)])


def test_verbose_logs_each_node(caplog: pytest.LogCaptureFixture) -> None:
    data = S.Variable("data")
    sym = S.Activation(S.FullyConnected(data, num_hidden=3, name="fc"), act_type="relu",
                       name="act")
    params = {"fc_weight": np.ones((3, 4), np.float32), "fc_bias": np.zeros(3, np.float32)}
    with caplog.at_level("INFO", logger="acc_host.onnx.export"):
        mx.onnx.export_model(sym, params, [(2, 4)], verbose=True)
    assert "fc (FullyConnected) -> Gemm" in caplog.text
    assert "act (Activation) -> Relu" in caplog.text


def test_onnx_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from acc_host.onnx import _onnx

    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(_onnx.OnnxMissingError, match="needs the 'onnx' package"):
        mx.onnx.export_model(S.relu(S.Variable("data")), {}, [(2, 3)])


def test_outputs_that_are_inputs_or_repeated() -> None:
    data = S.Variable("data")
    relu = S.relu(data, name="r")
    model = mx.onnx.export_model(S.Group([data, relu, relu]), {}, (2, 3),
                                 run_shape_inference=True)
    onnx.checker.check_model(model, full_check=True)
    assert [value.name for value in model.graph.output] == ["data_output", "r_output",
                                                            "r_output_output"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for output, expected in zip(run_onnxruntime(model, {"data": x}),
                                [x, np.maximum(x, 0), np.maximum(x, 0)]):
        np.testing.assert_array_equal(output, expected)
