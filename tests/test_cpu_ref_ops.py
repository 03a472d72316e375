"""cpu_ref runs every operator it has, in both modes: imperative (accGetExecutor on device memory) and symbolic (a
one-operator graph through supportedOps/loadModel/infer), like the host's
CPU path: the numpy definitions of acc_host.ops, themselves tested against
hand-derived and independent results (tests/test_ops_*.py) and MXNet's own
outputs (tests/test_models.py)."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_ref_cases import CASES, Case, case_id

import acc_host as mx
from acc_host import ops
from acc_host.annotate import annotate_symbol
from acc_host.imperative import Executor
from acc_host.memory import DeviceBuffer
from acc_host.symbolic import LoadedModel
from acc_host.tensor import TensorSpec

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _inputs(case: Case, seed: int) -> list[np.ndarray]:
    op, _, shapes = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) * 3 for shape in shapes]
    if op == "BatchNorm":
        arrays[4] = rng.uniform(0.2, 2.0, shapes[4]).astype(np.float32)  # variances
    return arrays


def _host_result(op: str, inputs: list[np.ndarray], attrs: dict) -> np.ndarray:
    """The host's CPU path: the operator's numpy definition."""
    definition = ops.get(op)
    return definition.run(definition.parse(attrs), inputs)[0]


def _one_op_graph(op: str, attrs: dict, inputs: list[np.ndarray]):
    names = ["data"] + [f"arg{i}" for i in range(1, len(inputs))]
    node = getattr(mx.sym, op)(*[mx.sym.Variable(name) for name in names], name="node",
                               **attrs)
    graph = annotate_symbol(node, {name: array.shape for name, array in zip(names, inputs)},
                            weights=names[1:])
    return graph, dict(zip(names, inputs)), _host_result(op, inputs, attrs)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_matches_reference(library, case: Case) -> None:
    op, attrs, _ = case
    inputs = _inputs(case, seed=1)
    expected = _host_result(op, inputs, attrs)
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in inputs]
    for buffer, array in zip(buffers, inputs):
        buffer.copy_from_host(array)
    output = DeviceBuffer(library, 0, TensorSpec.of(expected))
    executor = Executor(library, op, [b.spec for b in buffers], [output.spec], attrs)
    executor.forward(buffers, [output])
    np.testing.assert_allclose(output.to_host(), expected, rtol=RTOL, atol=ATOL)
    # The executor is reusable with fresh data of the same shapes.
    second = _inputs(case, seed=2)
    for buffer, array in zip(buffers, second):
        buffer.copy_from_host(array)
    executor.forward(buffers, [output])
    np.testing.assert_allclose(output.to_host(),
                               _host_result(op, second, attrs),
                               rtol=RTOL, atol=ATOL)
    executor.close()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_symbolic_matches_reference(library, case: Case) -> None:
    op, attrs, _ = case
    graph, values, expected = _one_op_graph(op, attrs, _inputs(case, seed=3))
    import json

    assert library.supported_ops(json.dumps(graph), {"data": TensorSpec.of(values["data"])},
                                 len(graph["nodes"])) == [len(graph["nodes"]) - 1]
    weights = {name: value for name, value in values.items() if name != "data"}
    with LoadedModel(library, graph, weights) as model:
        result = model.infer({"data": values["data"]})["node_output"]
        np.testing.assert_allclose(result, expected, rtol=RTOL, atol=ATOL)


def test_thread_count_does_not_change_results(library) -> None:
    case = CASES[0]
    graph, values, expected = _one_op_graph(case[0], case[1], _inputs(case, seed=4))
    weights = {name: value for name, value in values.items() if name != "data"}
    with LoadedModel(library, graph, weights) as model:
        mx.cpu_ref(0).configure(num_threads=1)
        single = model.infer({"data": values["data"]})["node_output"]
        mx.cpu_ref(0).configure(num_threads=3)
        multi = model.infer({"data": values["data"]})["node_output"]
        mx.cpu_ref(0).configure(num_threads=1)
    np.testing.assert_array_equal(single, multi)
    np.testing.assert_allclose(single, expected, rtol=RTOL, atol=ATOL)
