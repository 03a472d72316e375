"""The host checks what supportedOps() answers before trusting it."""

from __future__ import annotations

import pytest

import acc_host as mx


def _net():
    data = mx.sym.Variable("data")
    return mx.sym.Activation(mx.sym.Activation(data, act_type="relu", name="a"),
                             act_type="tanh", name="b")


@pytest.mark.parametrize("label, ids, match", [
    ("ids_range", "2,7", "not ascending, unique node ids below 3"),
    ("ids_order", "2,1", "not ascending"),
    ("ids_variable", "0,1", "variable nodes \\[0\\]"),
])
def test_bad_answers_name_the_plugin(build_fake, label: str, ids: str, match: str) -> None:
    ctx = mx.load_acc(build_fake(label, FAKE_NAME=f'"{label}"', FAKE_IDS=ids))
    with pytest.raises(mx.PluginContractError, match=match) as error:
        _net().simple_bind(ctx, data=(2, 2))
    assert label in str(error.value)


def test_an_empty_answer_runs_everything_on_the_cpu(build_fake) -> None:
    ctx = mx.load_acc(build_fake("declines", FAKE_NAME='"declines"'))
    exe = _net().simple_bind(ctx, data=(2, 2))
    assert set(exe.placement().values()) == {"cpu(0)"}
    exe.arg_dict["data"][:] = [[-1.0, 1.0], [2.0, -2.0]]
    result = exe.forward()[0].asnumpy()
    assert result.tolist()[0][0] == 0.0 and result[0][1] > 0.76


def test_a_subgraph_the_plugin_cannot_compile_runs_on_the_cpu(build_fake) -> None:
    from acc_host.runtime.subgraph import AccFallbackWarning

    # This plugin claims both operators but its loadModel() always answers
    # MX_ACC_ERR_UNSUPPORTED.
    ctx = mx.load_acc(build_fake("claims", FAKE_NAME='"claims"', FAKE_IDS="1,2"))
    exe = _net().simple_bind(ctx, data=(2, 2))
    assert set(exe.placement().values()) == {"claims(0)"}
    exe.arg_dict["data"][:] = [[-1.0, 1.0], [2.0, -2.0]]
    with pytest.warns(AccFallbackWarning, match="fake compiles nothing"):
        first = exe.forward()[0].asnumpy()
    assert set(exe.placement().values()) == {"cpu(0)"}
    second = exe.forward()[0].asnumpy()
    assert first.tolist() == second.tolist() and first[0][0] == 0.0
