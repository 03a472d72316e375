"""ONNX If, Loop and Scan against onnxruntime (a test-only oracle).

PyTorch exports (tests/models/control_flow/make_pytorch_models.py: a
scripted data-dependent If, a scripted for loop carrying an RNN state, a
scripted while loop whose body holds an If) at several input shapes and
values, on the CPU path, cpu_ref and mlu_sim; then small graphs built here
for what the exports do not cover: nested loops reading outer-scope values
at two depths, Loop with only a trip count or only a condition, scan
outputs, Scan along other axes and in reverse, Scan-8's batch axis, an If
reading outer values in both branches. Tolerance: rtol 1e-5, atol 1e-5
(float32; the paths differ in summation order only)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.onnx.backend import prepare  # noqa: E402
from acc_host.onnx.importer import import_graph  # noqa: E402
from acc_host.runtime.control_flow import body_executors_of  # noqa: E402

# Small graphs: every supported operator is offered, whatever it would cost.
pytestmark = pytest.mark.usefixtures("offload_everything")

MODELS = Path(__file__).resolve().parents[1] / "models" / "control_flow"
CONTEXTS = (None, "cpu_ref", "mlu")
RTOL = ATOL = 1e-5


def _pytorch_cases() -> dict[str, list[list[np.ndarray]]]:
    rng = np.random.default_rng(1)

    def normal(*shape: int, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale + shift).astype(np.float32)

    return {
        "torch_if": [[normal(3, 8, shift=1.0)], [normal(3, 8, shift=-1.0)],
                     [normal(5, 8, shift=1.0)], [normal(1, 8, shift=-1.0)]],
        "torch_loop": [[normal(t, b, 8), normal(b, 12)] for t, b in ((5, 2), (1, 3), (9, 2))],
        # mean |x| from 0.01 to 10: 0 to 12 iterations before it passes 4
        "torch_while": [[normal(b, 6, scale=0.01, shift=v)] for b, v in
                        ((2, 0.01), (3, 0.5), (1, 10.0), (4, 1.5), (2, -3.0))],
    }


PYTORCH = _pytorch_cases()


def _check(model: Any, cases: list[list[np.ndarray]], accelerator: str | None) -> Any:
    session = ort.InferenceSession(model.SerializeToString() if not isinstance(model, Path)
                                   else str(model))
    rep = prepare(model if not isinstance(model, Path) else str(model), accelerator=accelerator)
    for inputs in cases:
        expected = session.run(None, {spec.name: value for spec, value
                                      in zip(session.get_inputs(), inputs)})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mx.AccFallbackWarning)
            got = rep.run(inputs)
        assert len(got) == len(expected)
        for value, want in zip(got, expected):
            if want.size == 0 and np.size(value) == 0:
                continue  # onnxruntime gives an empty scan output shape (0,)
            assert np.shape(value) == want.shape
            np.testing.assert_allclose(value, want, rtol=RTOL, atol=ATOL)
    return rep


@pytest.mark.parametrize("accelerator", CONTEXTS)
@pytest.mark.parametrize("name", sorted(PYTORCH))
def test_pytorch_exports_match_onnxruntime(name: str, accelerator: str | None) -> None:
    rep = _check(MODELS / f"{name}.onnx", PYTORCH[name], accelerator)
    assert rep.imported is not None and not rep._specialised  # no re-import between shapes


def test_pytorch_while_runs_a_data_dependent_number_of_iterations() -> None:
    rep = prepare(str(MODELS / "torch_while.onnx"))
    steps = {int(rep.run([x])[1].reshape(-1)[0]) for (x,) in PYTORCH["torch_while"]}
    assert len(steps) >= 3  # the inputs drive the loop to different lengths


def test_loop_body_runs_on_the_accelerator_and_loads_once() -> None:
    rep = _check(MODELS / "torch_loop.onnx", PYTORCH["torch_loop"][:1] * 3, "cpu_ref")
    assert not rep._specialised  # imported once: its trip count is read at run time
    bodies = body_executors_of(rep.executor)
    assert bodies is not None
    ((_, _, body),) = bodies.items()
    placement = body.executor.placement()
    assert any(where == "cpu_ref(0)" for where in placement.values())
    assert all(operator.loads == 1 for operator in body.executor.subgraphs)
    assert body.runs == 3 * PYTORCH["torch_loop"][0][0].shape[0]


# ---- graphs built here ------------------------------------------------------------


def _value(name: str, dtype: int = TensorProto.FLOAT, shape: Any = None) -> Any:
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes: list, inputs: list, outputs: list, initializers: list = (),
           opset: int = 17) -> Any:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _scalar(name: str, value: Any, dtype: int) -> Any:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name + "_t", dtype, [], [value]))


def test_nested_loops_read_outer_values_at_two_depths() -> None:
    # outer: for i < M: acc = acc + inner(acc); inner: for j < 3: v = v * w + b
    inner = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Mul", ["v_in", "w"], ["vw"]),
         helper.make_node("Add", ["vw", "b"], ["v_out"])],
        "inner", [_value("j", TensorProto.INT64, []), _value("c_in", TensorProto.BOOL, []),
                  _value("v_in")], [_value("c_out", TensorProto.BOOL, []), _value("v_out")])
    outer = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         _scalar("three", 3, TensorProto.INT64),
         helper.make_node("Loop", ["three", "", "acc_in"], ["inner_v"], body=inner),
         helper.make_node("Add", ["acc_in", "inner_v"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "outer", [_value("i", TensorProto.INT64, []), _value("cond_in", TensorProto.BOOL, []),
                  _value("acc_in")],
        [_value("cond_out", TensorProto.BOOL, []), _value("acc_out"), _value("scan")])
    model = _model([helper.make_node("Loop", ["m", "c", "x"], ["final", "scans"], body=outer)],
                   [_value("m", TensorProto.INT64, []), _value("c", TensorProto.BOOL, []),
                    _value("x", shape=[2, 3]), _value("w", shape=[2, 3]),
                    _value("b", shape=[3])],
                   [_value("final"), _value("scans")])
    rng = np.random.default_rng(2)
    cases = [[np.array(m, np.int64), np.array(True), rng.standard_normal((2, 3)).astype(np.float32),
              (rng.standard_normal((2, 3)) * 0.5).astype(np.float32),
              rng.standard_normal(3).astype(np.float32)] for m in (0, 1, 4)]
    for accelerator in CONTEXTS:
        _check(model, cases, accelerator)


def test_loop_with_only_a_condition_and_only_a_trip_count() -> None:
    # while sum(x) < limit: x = x * 2 (no trip count); scan output x
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_in", "two"], ["x_out"]),
         helper.make_node("ReduceSum", ["x_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["c_out"]),
         helper.make_node("Identity", ["x_out"], ["row"])],
        "body", [_value("i", TensorProto.INT64, []), _value("c_in", TensorProto.BOOL, []),
                 _value("x_in")],
        [_value("c_out", TensorProto.BOOL, []), _value("x_out"), _value("row")],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    model = _model([helper.make_node("Loop", ["", "c", "x"], ["y", "rows"], body=body)],
                   [_value("c", TensorProto.BOOL, []), _value("x", shape=[3]),
                    _value("limit", shape=[])], [_value("y"), _value("rows")])
    cases = [[np.array(True), np.array([0.5, 1.0, 0.25], np.float32),
              np.array(limit, np.float32)] for limit in (1.0, 20.0, 200.0)]
    cases.append([np.array(False), np.ones(3, np.float32), np.array(9.0, np.float32)])
    for accelerator in CONTEXTS:
        _check(model, cases, accelerator)
    # only a trip count: the iteration number feeds the body
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["s_in", "fi"], ["s_out"])],
        "body", [_value("i", TensorProto.INT64, []), _value("c_in", TensorProto.BOOL, []),
                 _value("s_in")], [_value("c_in", TensorProto.BOOL, []), _value("s_out")])
    model = _model([helper.make_node("Loop", ["m", "", "s"], ["total"], body=body)],
                   [_value("m", TensorProto.INT64, []), _value("s", shape=[2])],
                   [_value("total")])
    _check(model, [[np.array(n, np.int64), np.array([1.0, -1.0], np.float32)]
                   for n in (0, 1, 5)], None)


@pytest.mark.parametrize("accelerator", CONTEXTS)
def test_scan_along_other_axes_and_in_reverse(accelerator: str | None) -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "b"], ["y"])],
        "body", [_value("s_in", shape=[2]), _value("a", shape=[2]), _value("b", shape=[2])],
        [_value("s_out", shape=[2]), _value("y", shape=[2])])
    node = helper.make_node("Scan", ["s", "xa", "xb"], ["final", "ys"], body=body,
                            num_scan_inputs=2, scan_input_axes=[1, 0],
                            scan_input_directions=[0, 1], scan_output_axes=[1],
                            scan_output_directions=[1])
    model = _model([node], [_value("s", shape=[2]), _value("xa", shape=[2, 4]),
                            _value("xb", shape=[4, 2])],
                   [_value("final"), _value("ys")])
    rng = np.random.default_rng(3)
    cases = [[rng.standard_normal(2).astype(np.float32),
              rng.standard_normal((2, 4)).astype(np.float32),
              rng.standard_normal((4, 2)).astype(np.float32)] for _ in range(2)]
    _check(model, cases, accelerator)


def test_if_reads_outer_values_in_both_branches() -> None:
    then = helper.make_graph([helper.make_node("Add", ["x", "y"], ["out"])], "then", [],
                             [_value("out")])
    other = helper.make_graph([helper.make_node("Sub", ["x", "z"], ["out2"])], "else", [],
                              [_value("out2")])
    model = _model([helper.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
                    helper.make_node("Greater", ["sx", "zero"], ["c"]),
                    helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other)],
                   [_value("x", shape=[3]), _value("y", shape=[3]), _value("z", shape=[3])],
                   [_value("r")], [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    symbol = import_graph(model).symbol
    (node,) = [node for node in symbol.graph.nodes if node.subgraphs]
    assert node.op == "_cond" and {p.name for p, _, _ in node.inputs} >= {"x", "y", "z"}
    cases = [[np.array(v, np.float32) * s, np.ones(3, np.float32), np.full(3, 2.0, np.float32)]
             for v in ([1, 2, 3],) for s in (1.0, -1.0)]
    for accelerator in CONTEXTS:
        _check(model, cases, accelerator)


def test_if_with_a_constant_condition_is_decided_at_import() -> None:
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "then", [], [_value("a")])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["b"])], "else", [],
                              [_value("b")])
    model = _model([_scalar("c", 0, TensorProto.BOOL),
                    helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other)],
                   [_value("x", shape=[3])], [_value("r")])
    symbol = import_graph(model).symbol
    assert not any(node.subgraphs for node in symbol.graph.nodes)
    _check(model, [[np.array([-1.0, 2.0, -3.0], np.float32)]], None)


def test_control_flow_round_trips_as_symbol_json() -> None:
    symbol = import_graph(onnx.load(str(MODELS / "torch_while.onnx"))).symbol
    text = symbol.tojson()
    again = mx.sym.load_json(text)
    assert again.tojson() == text
    (loop,) = [node for node in again.graph.nodes if node.op == "_loop"]
    (inner,) = [node for node in loop.subgraphs[0].nodes if node.subgraphs]
    assert inner.op == "_cond"
