"""Module and executor behaviour beyond the real-model checks: parameters,
rebinding, prediction, and the errors a user meets first."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx


def _net():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    bn = mx.sym.BatchNorm(fc, fix_gamma=False, name="bn")
    return mx.sym.softmax(bn, name="prob")


def _params(seed: int = 0):
    rng = np.random.default_rng(seed)
    arg = {"fc_weight": rng.standard_normal((3, 4)), "fc_bias": rng.standard_normal(3),
           "bn_gamma": rng.uniform(0.5, 1.5, 3), "bn_beta": rng.standard_normal(3)}
    aux = {"bn_moving_mean": rng.standard_normal(3), "bn_moving_var": rng.uniform(0.5, 2, 3)}
    return ({k: mx.nd.array(v, dtype="float32") for k, v in arg.items()},
            {k: mx.nd.array(v, dtype="float32") for k, v in aux.items()})


def _expected(x: np.ndarray, arg, aux) -> np.ndarray:
    a = {k: v.asnumpy().astype(np.float64) for k, v in {**arg, **aux}.items()}
    fc = x @ a["fc_weight"].T + a["fc_bias"]
    bn = (fc - a["bn_moving_mean"]) / np.sqrt(a["bn_moving_var"] + 1e-3) * a["bn_gamma"] \
        + a["bn_beta"]
    e = np.exp(bn - bn.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_module_forward_predict_and_rebatching() -> None:
    arg, aux = _params()
    mod = mx.mod.Module(_net(), label_names=None)
    mod.bind(data_shapes=[("data", (2, 4))], for_training=False)
    mod.set_params(arg, aux)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    mod.forward(mx.io.DataBatch([mx.nd.array(x[:2])]))
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), _expected(x[:2], arg, aux),
                               rtol=1e-5)
    assert mod.output_shapes == [("prob_output", (2, 3))]
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]))  # a new batch size rebinds
    assert mod.get_outputs()[0].shape == (5, 3)
    predicted = mx.mod.Module(_net(), label_names=None)
    predicted.bind(data_shapes=[("data", (2, 4))])
    predicted.set_params(arg, aux)
    result = predicted.predict(x)  # batches of 2, the last one padded
    assert result.shape == (5, 3)
    np.testing.assert_allclose(result.asnumpy(), _expected(x, arg, aux), rtol=1e-5)
    got_arg, got_aux = predicted.get_params()
    np.testing.assert_array_equal(got_arg["fc_weight"].asnumpy(), arg["fc_weight"].asnumpy())
    assert set(got_aux) == {"bn_moving_mean", "bn_moving_var"}


def test_module_parameter_errors() -> None:
    arg, aux = _params()
    mod = mx.mod.Module(_net(), label_names=None)
    with pytest.raises(mx.GraphError, match="bind"):
        mod.forward(mx.io.DataBatch([mx.nd.zeros((2, 4))]))
    mod.bind(data_shapes=[("data", (2, 4))])
    with pytest.raises(mx.GraphError, match="set_params"):
        mod.forward(mx.io.DataBatch([mx.nd.zeros((2, 4))]))
    partial = dict(arg)
    del partial["fc_bias"]
    with pytest.raises(mx.GraphError, match="'fc_bias' is missing"):
        mod.set_params(partial, aux)
    mod.set_params(partial, aux, allow_missing=True)  # initialized instead
    with pytest.raises(mx.GraphError, match="allow_extra"):
        mod.set_params({**arg, "stray": mx.nd.zeros(1)}, aux)
    wrong = dict(arg, fc_weight=mx.nd.zeros((4, 3)))
    with pytest.raises(mx.GraphError, match="has shape \\(4, 3\\)"):
        mod.set_params(wrong, aux)
    with pytest.raises(mx.GraphError, match="not arguments"):
        mx.mod.Module(_net(), data_names=("image",))
    with pytest.raises(mx.GraphError, match="data names"):
        mx.mod.Module(_net(), label_names=None).bind(data_shapes=[("x", (1, 4))])


def test_bind_checks_shapes_and_names() -> None:
    net = _net()
    arg, aux = _params()
    args = {"data": mx.nd.zeros((2, 4)), **arg}
    exe = net.bind(mx.cpu(), args, aux_states=aux)
    assert exe.forward()[0].shape == (2, 3)
    with pytest.raises(mx.ShapeError, match="fc"):
        net.bind(mx.cpu(), dict(args, fc_weight=mx.nd.zeros((3, 5))), aux_states=aux)
    with pytest.raises(mx.GraphError, match="missing"):
        net.bind(mx.cpu(), {"data": mx.nd.zeros((2, 4))}, aux_states=aux)
    with pytest.raises(mx.GraphError, match="3 arguments given for 5"):
        net.bind(mx.cpu(), list(args.values())[:3], aux_states=aux)
    with pytest.raises(mx.ShapeError, match="bound with"):
        exe.forward(data=np.zeros((3, 4), np.float32))
    with pytest.raises(mx.GraphError, match="not an argument"):
        exe.forward(image=np.zeros((2, 4), np.float32))
    with pytest.raises(mx.ShapeError, match="cannot infer"):
        net.simple_bind(mx.cpu())


def test_executor_sees_changed_arguments() -> None:
    net = _net()
    arg, aux = _params()
    exe = net.simple_bind(mx.cpu(), data=(1, 4))
    for name, value in arg.items():
        exe.arg_dict[name][:] = value
    for name, value in aux.items():
        exe.aux_dict[name][:] = value
    x = np.ones((1, 4), np.float32)
    first = exe.forward(data=x)[0].asnumpy()
    version = exe.arg_dict["fc_bias"].version
    exe.arg_dict["fc_bias"][:] = exe.arg_dict["fc_bias"].asnumpy() + 5
    assert exe.arg_dict["fc_bias"].version == version + 1
    second = exe.forward(data=x)[0].asnumpy()
    assert not np.allclose(first, second)
    arg["fc_bias"] = exe.arg_dict["fc_bias"]
    np.testing.assert_allclose(second, _expected(x, arg, aux), rtol=1e-5)


def test_bind_takes_the_dtypes_of_data_descriptions() -> None:
    """An Embedding fed int32 token ids (DataDesc dtype) gathers the rows
    of those ids; the arguments' dtypes follow the description."""
    ids = mx.sym.Variable("ids")
    symbol = mx.sym.Embedding(ids, input_dim=5, output_dim=2, name="emb")
    mod = mx.mod.Module(symbol, data_names=["ids"], label_names=None)
    mod.bind(data_shapes=[mx.io.DataDesc("ids", (3,), np.int32)], for_training=False)
    table = np.arange(10, dtype=np.float32).reshape(5, 2)
    mod.set_params({"emb_weight": mx.nd.array(table)}, {})
    assert mod.executor.arg_dict["ids"].dtype == np.int32
    mod.forward(mx.io.DataBatch([mx.nd.array(np.array([4, 0, 2]), dtype="int32")]))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), table[[4, 0, 2]])
