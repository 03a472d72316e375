"""MXNet 1.9.1's control flow (_foreach, _while_loop, _cond) against MXNet
itself: checkpoints MXNet made (tests/models/control_flow, generate.py)
read, written back byte for byte and run on the CPU path, cpu_ref and
mlu_sim against MXNet's outputs; symbols built by mx.sym.contrib against
the JSON MXNet builds from the same functions; each body compiled once
(one loadModel) and run on every iteration."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host import symbol as sym_mod
from acc_host import symbol_contrib, trace
from acc_host.errors import GraphError, ShapeError
from acc_host.runtime.control_flow import body_executors_of, with_bodies

# The bodies are small: every supported operator is offered, whatever it
# would cost, so that the accelerators really run them.
pytestmark = pytest.mark.usefixtures("offload_everything")

MODELS = Path(__file__).resolve().parents[1] / "models" / "control_flow"
NAMES = ("foreach_rnn", "while_loop", "cond")
CONTEXTS = ("cpu", "cpu_ref", "mlu")


def _context(name: str) -> mx.Context:
    return mx.cpu() if name == "cpu" else mx.Context(name, 0)


def _cases(name: str) -> list[tuple[dict, dict, dict]]:
    meta = json.loads((MODELS / name / "meta.json").read_text())
    return [(dict(np.load(MODELS / name / f"inputs_{k}.npz")),
             dict(np.load(MODELS / name / f"expected_{k}.npz")), case)
            for k, case in enumerate(meta["cases"])]


@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_round_trips_byte_for_byte(name: str) -> None:
    text = (MODELS / name / "model-symbol.json").read_text()
    symbol = mx.sym.load_json(text)
    assert symbol.tojson() == text
    (node,) = [node for node in symbol.graph.nodes if node.subgraphs]
    assert node.op == {"foreach_rnn": "_foreach", "while_loop": "_while_loop",
                       "cond": "_cond"}[name]


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("name", NAMES)
def test_outputs_match_mxnet(name: str, context: str) -> None:
    symbol, args, aux = mx.model.load_checkpoint(str(MODELS / name / "model"), 0)
    for inputs, expected, case in _cases(name):
        arrays = {**args, **{key: mx.nd.array(value) for key, value in inputs.items()}}
        executor = symbol.bind(_context(context), arrays, aux_states=aux,
                               data_names=list(inputs))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mx.AccFallbackWarning)
            outputs = [output.asnumpy() for output in executor.forward()]
        assert len(outputs) == len(expected)
        for k, output in enumerate(outputs):
            want = expected[f"output{k}"]
            if name == "while_loop" and k == 0:
                # MXNet leaves the rows past the last iteration unset; the
                # host writes zeros there.
                steps = case["steps"]
                assert np.all(output[steps:] == 0)
                output, want = output[:steps], want[:steps]
            np.testing.assert_allclose(output, want, rtol=1e-5, atol=2e-6)
        if context != "cpu":  # a body's operators ran on the accelerator
            bodies = body_executors_of(executor)
            assert bodies is not None
            placed = {where for _, _, body in bodies.items()
                      for where in body.executor.placement().values()}
            assert f"{context}(0)" in placed
        executor.close()


def test_foreach_body_is_loaded_once_and_run_every_step(tmp_path: Path) -> None:
    symbol, args, aux = mx.model.load_checkpoint(str(MODELS / "foreach_rnn" / "model"), 0)
    inputs, expected, _ = _cases("foreach_rnn")[0]
    steps = inputs["data"].shape[0]
    path = tmp_path / "trace.jsonl"
    trace.start(path)
    try:
        executor = symbol.bind(mx.cpu_ref(0), {**args, **{key: mx.nd.array(value) for key, value
                                                          in inputs.items()}},
                               data_names=list(inputs))
        for _ in range(3):
            outputs = executor.forward()
            np.testing.assert_allclose(outputs[0].asnumpy(), expected["output0"], rtol=1e-5,
                                       atol=2e-6)
        bodies = body_executors_of(executor)
        assert bodies is not None
        ((_, _, body),) = bodies.items()
        (operator,) = body.executor.subgraphs
        assert operator.loads == 1 and body.runs == 3 * steps
        executor.close()
    finally:
        trace.stop()
    calls = [record["fn"] for record in trace.read_trace(path).calls()]
    assert calls.count("loadModel") == 1
    assert calls.count("infer") == 3 * steps
    assert calls.count("unloadModel") == 1  # closing the executor closes its bodies


def test_new_weights_reach_the_body() -> None:
    symbol, args, _ = mx.model.load_checkpoint(str(MODELS / "foreach_rnn" / "model"), 0)
    inputs, expected, _ = _cases("foreach_rnn")[0]
    executor = symbol.bind(mx.cpu_ref(0), {**args, **{key: mx.nd.array(value) for key, value
                                                      in inputs.items()}},
                           data_names=list(inputs))
    first = executor.forward()[1].asnumpy()
    np.testing.assert_allclose(first, expected["output1"], rtol=1e-5, atol=2e-6)
    executor.arg_dict["wh"][:] = np.zeros(args["wh"].shape, np.float32)
    reference = symbol.bind(mx.cpu(), {**{key: value.copy() for key, value in
                                          executor.arg_dict.items()}}, data_names=list(inputs))
    np.testing.assert_allclose(executor.forward()[1].asnumpy(),
                               reference.forward()[1].asnumpy(), rtol=1e-5, atol=2e-6)


def test_explain_lists_each_body_under_its_node() -> None:
    symbol, args, _ = mx.model.load_checkpoint(str(MODELS / "foreach_rnn" / "model"), 0)
    executor = symbol.simple_bind(mx.cpu_ref(0), data=(6, 2, 8), h0=(2, 16))
    assert executor.partition is not None
    text = with_bodies(executor, executor.partition.explain()).format_text()
    lines = text.splitlines()
    node_line = next(k for k, line in enumerate(lines) if " _foreach " in line)
    assert "control_flow" in lines[node_line]
    assert lines[node_line + 1].startswith("    body 0 (body): 5/5 operators on cpu_ref")
    assert any(line.startswith("      ix ") and "cpu_ref(0) sg0" in line for line in lines)


def _fresh_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Automatic names counted from 0, as in a new MXNet process."""
    monkeypatch.setattr(sym_mod, "_names", sym_mod._NameManager())
    monkeypatch.setattr(symbol_contrib, "_subgraph_counters", {})


def test_sym_contrib_builds_mxnets_json(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_names(monkeypatch)
    data, h0, w = mx.sym.var("data"), mx.sym.var("h0"), mx.sym.var("w")

    def step(d, states):
        fc = mx.sym.FullyConnected(d, weight=w, no_bias=True, num_hidden=4, name="fc")
        t = mx.sym.tanh(mx.sym.elemwise_add(fc, states[0], name="add"), name="t")
        return t, [t]

    outputs, states = mx.sym.contrib.foreach(step, data, [h0])
    assert (mx.sym.Group([outputs] + states).tojson()
            == (MODELS / "built_foreach.json").read_text())
    i, a, b = mx.sym.var("i"), mx.sym.var("a"), mx.sym.var("b")
    outputs, states = mx.sym.contrib.while_loop(
        lambda i, a: mx.sym.broadcast_lesser(i, mx.sym.sum(b, name="sb"), name="lt"),
        lambda i, a: ([mx.sym.elemwise_mul(a, a, name="sq")],
                      [mx.sym.elemwise_add(i, mx.sym.ones_like(i, name="one"), name="inc"),
                       mx.sym.broadcast_add(a, b, name="ab")]),
        [i, a], max_iterations=6)
    assert (mx.sym.Group(outputs + states).tojson()
            == (MODELS / "built_while_loop.json").read_text())
    p, q = mx.sym.var("p"), mx.sym.var("q")
    pred = mx.sym._greater_scalar(mx.sym.sum(p, name="ps"), scalar=0, name="_greater_scalar0")
    result = mx.sym.contrib.cond(pred, lambda: mx.sym.elemwise_mul(p, q, name="m"),
                                 lambda: [mx.sym.elemwise_sub(p, q, name="s")])
    assert result.tojson() == (MODELS / "built_cond.json").read_text()


def test_built_symbols_run_like_numpy() -> None:
    data, h0 = mx.sym.var("data"), mx.sym.var("h0")
    outputs, states = mx.sym.contrib.foreach(
        lambda d, s: (mx.sym.elemwise_mul(d, s[0]), [mx.sym.elemwise_add(d, s[0])]),
        data, [h0])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    executor = mx.sym.Group([outputs] + states).bind(
        mx.cpu(), {"data": mx.nd.array(x), "h0": mx.nd.array(np.ones(3, np.float32))})
    got_outputs, got_state = (value.asnumpy() for value in executor.forward())
    state, rows = np.ones(3, np.float32), []
    for row in x:
        rows.append(row * state)
        state = row + state
    np.testing.assert_allclose(got_outputs, np.stack(rows))
    np.testing.assert_allclose(got_state, state)


def test_nd_contrib_matches_the_symbolic_forms() -> None:
    x = mx.nd.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    outputs, states = mx.nd.contrib.foreach(lambda d, s: (d * 2, [s[0] + d]), x,
                                            [mx.nd.zeros((2,))])
    np.testing.assert_allclose(outputs.asnumpy(), x.asnumpy() * 2)
    np.testing.assert_allclose(states[0].asnumpy(), x.asnumpy().sum(axis=0))
    outputs, (i, a) = mx.nd.contrib.while_loop(
        lambda i, a: i < 3, lambda i, a: ([a * 2], [i + 1, a + 1]),
        [mx.nd.array([0.0]), mx.nd.array([1.0])], max_iterations=10)
    assert outputs[0].shape == (10, 1)  # max_iterations rows, as MXNet's
    np.testing.assert_allclose(outputs[0].asnumpy().ravel(), [2, 4, 6] + [0] * 7)
    assert i.asscalar() == 3 and a.asscalar() == 4
    picked = mx.nd.contrib.cond(mx.nd.array([0.0]), lambda: mx.nd.array([1.0]),
                                lambda: mx.nd.array([2.0]))
    assert picked.asscalar() == 2


def test_bad_bodies_raise_typed_errors() -> None:
    text = json.loads((MODELS / "cond" / "model-symbol.json").read_text())
    node = next(node for node in text["nodes"] if node["op"] == "_cond")
    node["subgraphs"] = node["subgraphs"][:2]
    with pytest.raises(GraphError, match="needs 3 subgraphs"):
        mx.sym.load_json(json.dumps(text))
    node["subgraphs"] = "nope"
    with pytest.raises(GraphError, match="subgraphs"):
        mx.sym.load_json(json.dumps(text))
    text = json.loads((MODELS / "foreach_rnn" / "model-symbol.json").read_text())
    node = next(node for node in text["nodes"] if node["op"] == "_foreach")
    node["attrs"]["in_data_locs"] = "[9]"
    with pytest.raises(GraphError, match="in_data_locs"):
        mx.sym.load_json(json.dumps(text))
    symbol, args, _ = mx.model.load_checkpoint(str(MODELS / "foreach_rnn" / "model"), 0)
    with pytest.raises(ShapeError):
        symbol.simple_bind(mx.cpu(), data=(6, 2, 8), h0=(2, 15))


def test_cli_partition_and_run_show_the_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    from acc_host.cli import main

    prefix = str(MODELS / "foreach_rnn" / "model")
    shapes = ["--shape", "data=6,2,8", "--shape", "h0=2,16"]
    assert main(["partition", prefix, "--acc", "cpu_ref", *shapes]) == 0
    text = capsys.readouterr().out
    assert "control_flow: the host runs the control flow" in text
    assert "    body 0 (body): 5/5 operators on cpu_ref in 1 subgraph(s)" in text
    assert main(["partition", prefix, "--acc", "cpu_ref", *shapes, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (body,) = document["explain"]["bodies"]
    assert body["explain"]["counts"] == {"offloaded": 5}
    assert main(["run", prefix, "--acc", "cpu_ref", *shapes, "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "body 0 of _foreach" in text and "5/5 operators offloaded in 1 subgraph(s), run 18 " \
        "times" in text


@pytest.mark.parametrize("context", CONTEXTS)
def test_while_loop_that_never_runs(context: str) -> None:
    # MXNet 1.9.1 itself cannot run this (its shape inference needs a step);
    # the host gives max_iterations zero rows and the loop variables as given.
    symbol, args, _ = mx.model.load_checkpoint(str(MODELS / "while_loop" / "model"), 0)
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    executor = symbol.bind(_context(context), {**args, "i": mx.nd.zeros((1,)),
                                               "x": mx.nd.array(x), "limit": mx.nd.zeros((1,))},
                           data_names=["i", "x", "limit"])
    rows, i, final = (value.asnumpy() for value in executor.forward())
    assert rows.shape == (8, 2, 16) and not rows.any()
    assert i.tolist() == [0.0]
    np.testing.assert_array_equal(final, x)


def test_reshape_family_shares_the_bodies(tmp_path: Path) -> None:
    symbol, args, _ = mx.model.load_checkpoint(str(MODELS / "foreach_rnn" / "model"), 0)
    path = tmp_path / "trace.jsonl"
    trace.start(path)
    try:
        executor = symbol.simple_bind(mx.cpu_ref(0), data=(6, 2, 8), h0=(2, 16))
        executor.copy_params_from(args)
        reference = symbol.simple_bind(mx.cpu(), data=(3, 2, 8), h0=(2, 16))
        reference.copy_params_from(args)
        x = np.random.default_rng(4).standard_normal((3, 2, 8)).astype(np.float32)
        executor.forward(data=np.zeros((6, 2, 8), np.float32))
        shorter = executor.reshape(data=(3, 2, 8))  # a new sequence length, the same steps
        np.testing.assert_allclose(shorter.forward(data=x)[0].asnumpy(),
                                   reference.forward(data=x)[0].asnumpy(), rtol=1e-5, atol=2e-6)
        mx.nd.waitall()
    finally:
        trace.stop()
    calls = [record["fn"] for record in trace.read_trace(path).calls()]
    assert calls.count("loadModel") == 1 and calls.count("infer") == 6 + 3
