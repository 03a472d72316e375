"""The MXNet 1.9 inference API of issue 36 against MXNet's own results.

The expected values in tests/mxnet_expected were computed by MXNet 1.9.1
(tools/mxnet_compat/make_expected.py, run in a side environment): NDArray's
fluent methods and comparison operators, and the evaluation metrics. The
random module is checked for seeding and distributions, Module/Executor
checkpoint methods against MXNet-written files in tests/models.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import MODELS, MXNET_EXPECTED, ONNX_MODELS

import acc_host as mx

EXPECTED = MXNET_EXPECTED
METHODS = json.loads((EXPECTED / "ndarray_methods.json").read_text(encoding="utf-8"))
METHOD_ARRAYS = dict(np.load(EXPECTED / "ndarray_methods.npz"))
METRICS = json.loads((EXPECTED / "metrics.json").read_text(encoding="utf-8"))
METRIC_ARRAYS = dict(np.load(EXPECTED / "metrics.npz"))


def _contexts() -> list[str]:
    names = ["cpu"]
    names += [library.name for library in mx.libraries() if library.name in ("cpu_ref", "mlu")]
    return names


def _context(name: str) -> mx.Context:
    return mx.cpu() if name == "cpu" else mx.Context(name, 0)


def _case_id(index: int) -> str:
    case = METHODS["cases"][index]
    return f"{index}-{case['method']}"


@pytest.mark.parametrize("context", _contexts())
@pytest.mark.parametrize("index", range(len(METHODS["cases"])), ids=_case_id)
def test_ndarray_method_matches_mxnet(index: int, context: str) -> None:
    case = METHODS["cases"][index]
    ctx = _context(context)

    def value(arg: Any) -> Any:
        if isinstance(arg, dict):
            return mx.nd.array(METHOD_ARRAYS[f"input_{arg['array']}"], ctx=ctx)
        return tuple(arg) if isinstance(arg, list) else arg

    subject = mx.nd.array(METHOD_ARRAYS[f"input_{case['subject']}"], ctx=ctx)
    kwargs = {key: tuple(v) if isinstance(v, list) else v for key, v in case["kwargs"].items()}
    result = getattr(subject, case["method"])(*map(value, case["args"]), **kwargs)
    results = result if isinstance(result, list) else [result]
    assert len(results) == case["outputs"]
    for k, item in enumerate(results):
        expected = METHOD_ARRAYS[f"case{index}_{k}"]
        assert item.context == ctx
        got = item.asnumpy()
        assert got.shape == expected.shape
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=1e-5, atol=1e-5)  # MXNet computes in float32


def test_fluent_method_refuses_surplus_positional_attributes() -> None:
    with pytest.raises(mx.OperatorError, match="positional attributes"):
        mx.nd.ones((2, 2)).sum(0, False, False, 7)
    with pytest.raises(mx.ShapeError, match="one_hot"):
        mx.nd.one_hot(mx.nd.array([1, 2]), depth=0)


@pytest.mark.parametrize("context", _contexts())
def test_host_operators_in_mx_nd(context: str) -> None:
    ctx = _context(context)
    labels = mx.nd.array([0, 2, 5], ctx=ctx)
    encoded = mx.nd.one_hot(labels, 3)
    assert encoded.context == ctx
    np.testing.assert_array_equal(encoded.asnumpy(), [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    target = mx.nd.zeros((3,), ctx=ctx)
    mx.nd.sort(mx.nd.array([3, 1, 2], ctx=ctx), out=target)
    np.testing.assert_array_equal(target.asnumpy(), [1, 2, 3])


def test_symbol_fluent_methods_and_eval() -> None:
    x = METHOD_ARRAYS["input_x"]
    data = mx.sym.Variable("data")
    out = data.sum(axis=1).transpose().clip(-1.0, 1.0)
    result = out.eval(mx.cpu(), data=mx.nd.array(x))
    np.testing.assert_allclose(result[0].asnumpy(), np.clip(x.sum(axis=1).T, -1, 1),
                               rtol=1e-5)
    assert not hasattr(data, "sort")  # a host operator: not in graphs
    assert data.reshape((4, 15)).eval(data=mx.nd.array(x))[0].shape == (4, 15)


# ---- metrics ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", METRICS["metrics"], ids=lambda case: case["name"])
def test_metric_matches_mxnet(case: dict[str, Any]) -> None:
    metric = getattr(mx.metric, case["constructor"])(**case["kwargs"])
    for update in range(2):
        metric.update([mx.nd.array(METRIC_ARRAYS[case["label"]][update])],
                      [mx.nd.array(METRIC_ARRAYS[case["pred"]][update])])
    for got, expected in ((metric.get(), case["get"]), (metric.get_global(), case["get_global"])):
        assert got[0] == expected[0]
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)
    assert [name for name, _ in metric.get_name_value()] == [n for n, _ in case["name_value"]]


def test_metric_create_and_reset() -> None:
    metric = mx.metric.create(["acc", "ce"])
    assert isinstance(metric, mx.metric.CompositeEvalMetric)
    assert math.isnan(mx.metric.create("acc").get()[1])
    metric.update([mx.nd.array([0, 1])], [mx.nd.array([[0.9, 0.1], [0.2, 0.8]])])
    assert metric.get()[1][0] == 1.0
    metric.reset()
    assert all(math.isnan(value) for value in metric.get()[1])
    with pytest.raises(mx.InvalidArgumentError, match="unknown metric"):
        mx.metric.create("no-such-metric")
    with pytest.raises(mx.ShapeError):
        mx.metric.Accuracy().update([mx.nd.array([0])], [mx.nd.array([[1, 0]]),
                                                          mx.nd.array([[1, 0]])])


# ---- random -----------------------------------------------------------------------------


@pytest.mark.parametrize("context", _contexts())
def test_random_seed_is_deterministic_per_context(context: str) -> None:
    ctx = _context(context)
    mx.random.seed(123)
    first = [mx.nd.random.uniform(shape=(4, 5), ctx=ctx).asnumpy(),
             mx.nd.random.normal(2, 3, shape=(100,), ctx=ctx).asnumpy(),
             mx.nd.random_normal(shape=(3,), ctx=ctx).asnumpy()]
    mx.random.seed(123)
    second = [mx.nd.random.uniform(shape=(4, 5), ctx=ctx).asnumpy(),
              mx.nd.random.normal(2, 3, shape=(100,), ctx=ctx).asnumpy(),
              mx.nd.random_normal(shape=(3,), ctx=ctx).asnumpy()]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    mx.random.seed(124)
    assert not np.array_equal(mx.nd.random.uniform(shape=(4, 5), ctx=ctx).asnumpy(), first[0])
    # seeding one context leaves another's stream alone
    mx.random.seed(5, ctx=ctx)
    a = mx.nd.random.uniform(shape=(3,), ctx=ctx).asnumpy()
    mx.random.seed(5, ctx=ctx)
    np.testing.assert_array_equal(mx.random.uniform(shape=(3,), ctx=ctx).asnumpy(), a)


def test_random_distributions() -> None:
    mx.random.seed(0)
    uniform = mx.nd.random.uniform(-1, 3, shape=(20000,)).asnumpy()
    assert uniform.dtype == np.float32 and uniform.min() >= -1 and uniform.max() < 3
    assert abs(uniform.mean() - 1.0) < 0.05
    normal = mx.nd.random.normal(1.0, 2.0, shape=(20000,)).asnumpy()
    assert abs(normal.mean() - 1.0) < 0.1 and abs(normal.std() - 2.0) < 0.1
    ints = mx.nd.random.randint(0, 5, shape=(1000,)).asnumpy()
    assert ints.dtype == np.int32 and set(ints.tolist()) == {0, 1, 2, 3, 4}
    per_row = mx.nd.random.normal(mx.nd.array([0.0, 100.0]), mx.nd.array([1.0, 1.0]),
                                  shape=500).asnumpy()
    assert per_row.shape == (2, 500) and abs(per_row[1].mean() - 100) < 0.5
    picks = mx.nd.random.multinomial(mx.nd.array([[0.0, 1.0, 0.0]]), shape=10).asnumpy()
    assert picks.tolist() == [[1] * 10]
    like = mx.nd.random.normal_like(mx.nd.zeros((2, 3), dtype="float64"))
    assert like.shape == (2, 3) and like.dtype == np.float64
    with pytest.raises(mx.InvalidArgumentError):
        mx.random.seed(-1)


# ---- contexts, test_utils -------------------------------------------------------------------


def test_gpu_is_a_clear_error_naming_the_accelerators() -> None:
    assert mx.context.num_gpus() == 0
    assert mx.test_utils.list_gpus() == []
    with pytest.raises(mx.ContextError, match="no GPUs") as error:
        mx.gpu(0)
    for library in mx.libraries():
        assert f"mx.{library.name}(0)" in str(error.value)


def test_assert_almost_equal() -> None:
    values = np.linspace(0, 1, 10, dtype=np.float32)
    mx.test_utils.assert_almost_equal(mx.nd.array(values), values + 1e-5)
    with pytest.raises(AssertionError, match=r"differ at 1 of 10 positions.*worst at \(3,\)"):
        changed = values.copy()
        changed[3] += 0.1
        mx.test_utils.assert_almost_equal(mx.nd.array(values), changed)
    mx.test_utils.assert_almost_equal(values, values + 0.05, rtol=0, atol=0.06)
    assert mx.test_utils.almost_equal(values, values)
    assert not mx.test_utils.almost_equal(values, values[:5], use_broadcast=False)


# ---- executor, module, symbol -------------------------------------------------------------


def test_module_checkpoint_round_trip_is_byte_identical(tmp_path: Path) -> None:
    prefix = MODELS / "squeezenet1_1" / "model"
    module = mx.mod.Module.load(str(prefix), 0, context=mx.cpu(), label_names=None)
    sample = np.load(MODELS / "squeezenet1_1" / "input_0.npy")
    module.bind(data_shapes=[("data", sample.shape)], for_training=False)
    module.forward(mx.io.DataBatch([mx.nd.array(sample)]), is_train=False)
    np.testing.assert_allclose(module.get_outputs()[0].asnumpy(),
                               np.load(MODELS / "squeezenet1_1" / "expected_0.npy"),
                               rtol=1e-4, atol=1e-5)
    module.save_checkpoint(str(tmp_path / "copy"), 3)
    assert ((tmp_path / "copy-0003.params").read_bytes()
            == Path(f"{prefix}-0000.params").read_bytes())
    module.reshape(data_shapes=[("data", (2, *sample.shape[1:]))])
    module.forward(mx.io.DataBatch([mx.nd.array(np.concatenate([sample, sample]))]))
    assert module.get_outputs()[0].shape[0] == 2


def test_module_score_with_a_metric() -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.softmax(mx.sym.FullyConnected(data, num_hidden=3, name="fc"))
    module = mx.mod.Module(net, label_names=None)
    module.bind(data_shapes=[("data", (4, 2))], for_training=False)
    weight = np.array([[1, 0], [0, 1], [-1, -1]], np.float32)
    module.set_params({"fc_weight": mx.nd.array(weight), "fc_bias": mx.nd.zeros((3,))}, {})
    x = np.array([[3, 0], [0, 3], [-3, -3], [3, 0], [0, 3], [1, 0]], np.float32)
    y = np.array([0, 1, 2, 1, 1, 0], np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=4)
    score = module.score(it, "acc")
    # as MXNet's score: the last batch's 2 padding examples (x[0], x[1], both
    # right) are scored too: 5 of 6 right plus 2 of 2
    assert score == [("accuracy", pytest.approx(7 / 8))]


def test_executor_copy_params_from() -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    executor = net.simple_bind(mx.cpu(), data=(1, 3))
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    executor.copy_params_from({"fc_weight": mx.nd.array(weight),
                               "fc_bias": mx.nd.array([1, 2])})
    out = executor.forward(data=mx.nd.ones((1, 3)))[0].asnumpy()
    np.testing.assert_allclose(out, weight.sum(axis=1, keepdims=True).T + [1, 2])
    with pytest.raises(mx.GraphError, match="allow_extra_params"):
        executor.copy_params_from({"nope": mx.nd.ones((1,))})
    executor.copy_params_from({"nope": mx.nd.ones((1,))}, allow_extra_params=True)
    with pytest.raises(mx.ShapeError):
        executor.copy_params_from({"fc_bias": mx.nd.ones((3,))})


# ---- runtime, contrib.onnx --------------------------------------------------------------


def test_runtime_features_are_mxnets_names_all_disabled() -> None:
    features = mx.runtime.Features()
    assert [feature.name for feature in mx.runtime.feature_list()][:3] == ["CUDA", "CUDNN",
                                                                          "NCCL"]
    assert not features.is_enabled("cuda") and not features.is_enabled("OPENCV")
    with pytest.raises(mx.InvalidArgumentError, match="unknown"):
        features.is_enabled("WARP_DRIVE")


@pytest.mark.parametrize("context", _contexts())
def test_contrib_onnx_import_to_gluon(context: str) -> None:
    pytest.importorskip("onnx", reason="mx.contrib.onnx needs the onnx package")
    folder = ONNX_MODELS
    reference = np.load(folder / "resnet_small.npz")
    ctx = _context(context)
    block = mx.contrib.onnx.import_to_gluon(str(folder / "resnet_small.onnx"), ctx)
    out = block(mx.nd.array(reference["input"], ctx=ctx))
    np.testing.assert_allclose(out.asnumpy(), reference["output_0"], rtol=1e-3, atol=1e-4)
    metadata = mx.contrib.onnx.get_model_metadata(str(folder / "resnet_small.onnx"))
    assert metadata["input_tensor_data"] == [("input", (2, 3, 32, 32))]


def test_operator_functions_take_positional_attributes() -> None:
    """As in MXNet, mx.nd.<op>(x, a, b) passes a and b as the operator's
    attributes in their declared order (sum: axis, keepdims; clip: a_min,
    a_max)."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = mx.nd.array(data)
    np.testing.assert_array_equal(mx.nd.sum(x, 1).asnumpy(), data.sum(axis=1))
    np.testing.assert_array_equal(mx.nd.sum(x, 1, True).asnumpy(), data.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(mx.nd.clip(x, 1.0, 4.0).asnumpy(), np.clip(data, 1.0, 4.0))
    with pytest.raises(mx.OperatorError, match="'axis' given twice"):
        mx.nd.sum(x, 1, axis=0)
    with pytest.raises(mx.OperatorError, match="positional attributes given"):
        mx.nd.broadcast_add(x, 3)
    with pytest.raises(mx.OperatorError, match="inputs come before"):
        mx.nd.broadcast_add(x, 3, x)
