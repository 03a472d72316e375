"""cpu_ref runs every operator it has, in both modes, like the numpy
reference: imperative (accGetExecutor on device memory) and symbolic (a
one-operator graph through supportedOps/loadModel/infer)."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_ref_cases import CASES, Case, case_id

import acc_host as mx
from acc_host import reference
from acc_host.annotate import annotate
from acc_host.graph_builder import GraphBuilder, format_attr
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


def _string_attrs(attrs: dict) -> dict[str, str]:
    return {key: format_attr(value) for key, value in attrs.items()}


def _one_op_graph(op: str, attrs: dict, inputs: list[np.ndarray]):
    builder = GraphBuilder()
    names = ["data"] + [f"arg{i}" for i in range(1, len(inputs))]
    entries = [builder.var(name) for name in names]
    out = builder.op(op, "node", entries, **attrs)
    graph = builder.graph([out])
    expected = reference.run_operator(op, inputs, _string_attrs(attrs))
    specs = [[TensorSpec.of(array)] for array in inputs] + [[TensorSpec.of(expected)]]
    return annotate(graph, specs, weights=names[1:]), dict(zip(names, inputs)), expected


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_matches_reference(library, case: Case) -> None:
    op, attrs, _ = case
    inputs = _inputs(case, seed=1)
    expected = reference.run_operator(op, inputs, _string_attrs(attrs))
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
                               reference.run_operator(op, second, _string_attrs(attrs)),
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
