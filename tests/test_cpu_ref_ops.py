"""cpu_ref runs every operator it has, in both modes: imperative
(accGetExecutor on device memory) and symbolic (a one-operator graph through
supportedOps/loadModel/infer), like the host's CPU path: the numpy
definitions of acc_host.ops, themselves tested against hand-derived and
independent results (tests/test_ops_*.py) and MXNet's own outputs
(tests/test_models.py). Every output of an operator is compared, so
operators with several (SliceChannel, LayerNorm with output_mean_var) are
checked whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cpu_ref_cases import CASES, REJECTED, Case, RejectedCase, case_id

import acc_host as mx
from acc_host import ops
from acc_host.errors import OperatorError, ShapeError
from acc_host.annotate import annotate_symbol, output_name
from acc_host.imperative import Executor
from acc_host.memory import DeviceBuffer
from acc_host.operator_versions import op_version
from acc_host.symbolic import LoadedModel
from acc_host.tensor import TensorSpec

RTOL, ATOL = 1e-4, 1e-5

# Operators whose first input must be positive to stay in their domain (a
# NaN on both sides would compare equal, and prove nothing).
POSITIVE_INPUT = {"log", "log1p", "log2", "log10", "sqrt", "rsqrt", "_power", "broadcast_power",
                  "_power_scalar"}


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _inputs(case: Case, seed: int) -> list[np.ndarray]:
    op, attrs, shapes = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) * 3 for shape in shapes]
    if op == "BatchNorm":
        arrays[4] = rng.uniform(0.2, 2.0, shapes[4]).astype(np.float32)  # variances
    elif op in POSITIVE_INPUT:
        arrays[0] = rng.uniform(0.1, 4.0, shapes[0]).astype(np.float32)
    elif op == "Embedding":
        # Token ids as floats: whole ids, fractions (truncated toward zero)
        # and ids outside [0, input_dim) (clipped to the first/last row).
        ids = rng.integers(-3, attrs["input_dim"] + 3, shapes[0])
        fractions = rng.choice(np.array([0.0, 0.25, 0.75]), shapes[0])
        arrays[0] = (ids + fractions).astype(np.float32)
    return arrays


def _host_results(op: str, inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """The host's CPU path: the operator's numpy definition (every visible
    output)."""
    definition = ops.get(op)
    return definition.run(definition.parse(attrs), inputs)


def _assert_all_close(results: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(results) == len(expected)
    for result, reference in zip(results, expected):
        assert result.shape == reference.shape
        np.testing.assert_allclose(result, reference, rtol=RTOL, atol=ATOL)


def _one_op_graph(op: str, attrs: dict, inputs: list[np.ndarray]):
    names = ["data"] + [f"arg{i}" for i in range(1, len(inputs))]
    node = getattr(mx.sym, op)(*[mx.sym.Variable(name) for name in names], name="node",
                               **attrs)
    graph = annotate_symbol(node, {name: array.shape for name, array in zip(names, inputs)},
                            weights=names[1:])
    return graph, dict(zip(names, inputs)), _host_results(op, inputs, attrs)


def _outputs_by_name(results: dict, count: int) -> list[np.ndarray]:
    """The results of a one-operator graph in output order, by the naming
    rule of mxnet_acc.h ("node_output", or "node_output<k>" for several)."""
    return [results[output_name("node", k, count)] for k in range(count)]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_matches_reference(library, case: Case) -> None:
    op, attrs, _ = case
    inputs = _inputs(case, seed=1)
    expected = _host_results(op, inputs, attrs)
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in inputs]
    for buffer, array in zip(buffers, inputs):
        buffer.copy_from_host(array)
    outputs = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in expected]
    executor = Executor(library, op, [b.spec for b in buffers], [b.spec for b in outputs], attrs)
    executor.forward(buffers, outputs)
    _assert_all_close([output.to_host() for output in outputs], expected)
    # The executor is reusable with fresh data of the same shapes.
    second = _inputs(case, seed=2)
    for buffer, array in zip(buffers, second):
        buffer.copy_from_host(array)
    executor.forward(buffers, outputs)
    _assert_all_close([output.to_host() for output in outputs], _host_results(op, second, attrs))
    executor.close()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_symbolic_matches_reference(library, case: Case) -> None:
    op, attrs, _ = case
    graph, values, expected = _one_op_graph(op, attrs, _inputs(case, seed=3))
    assert library.supported_ops(json.dumps(graph), {"data": TensorSpec.of(values["data"])},
                                 len(graph["nodes"])) == [len(graph["nodes"]) - 1]
    weights = {name: value for name, value in values.items() if name != "data"}
    with LoadedModel(library, graph, weights) as model:
        results = model.infer({"data": values["data"]})
    _assert_all_close(_outputs_by_name(results, len(expected)), expected)


def test_every_operator_has_cases(library) -> None:
    """Every name cpu_ref lists (aliases included) is an operator of the
    host's registry at the version cpu_ref claims, and has at least one case
    here (a case of another of its names counts)."""
    listed = mx.cpu_ref(0).configure(query="ops")["ops"].split(",")
    tested = {id(ops.get(op)) for op, _, _ in CASES}
    for entry in listed:
        name, version = entry.rsplit(":", 1)
        definition = ops.find(name)
        assert definition is not None, f"{name} is not in the host's registry"
        assert int(version) == op_version(name), name
        assert id(definition) in tested, f"{name} has no case in tests/cpu_ref_cases.py"


@pytest.mark.parametrize("case", REJECTED, ids=lambda case: case_id(case[:3]))
def test_rejects_what_the_registry_rejects(library, case: RejectedCase) -> None:
    op, attrs, in_shapes, out_shapes = case
    definition = ops.get(op)
    with pytest.raises((OperatorError, ShapeError)):
        definition.infer_shape(definition.parse(attrs), list(in_shapes))
    with pytest.raises(mx.PluginError) as error:
        Executor(library, op, [TensorSpec(shape, np.float32) for shape in in_shapes],
                 [TensorSpec(shape, np.float32) for shape in out_shapes], attrs)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"


@pytest.mark.parametrize("op, attrs, in_shapes, out_shapes", [
    ("Flatten", {}, [(2**40, 2**40)], [(2**40, 2**40)]),
    ("Reshape", {"shape": (-1,)}, [(0, 2**62, 2**62)], [(0,)]),
    ("Concat", {"num_args": 2, "dim": 0}, [(2**61, 1), (2**61, 1)], [(2**62, 1)]),
    ("dot", {}, [(2**31, 2**31), (2**31, 1)], [(2**31, 1)]),
])
def test_refuses_shapes_too_large_to_index(library, op, attrs, in_shapes, out_shapes) -> None:
    """Extents whose products overflow 64-bit offsets are refused before any
    shape arithmetic, even for empty tensors (where the count is 0)."""
    with pytest.raises(mx.PluginError, match="too large"):
        Executor(library, op, [TensorSpec(shape, np.float32) for shape in in_shapes],
                 [TensorSpec(shape, np.float32) for shape in out_shapes], attrs)


def test_thread_count_does_not_change_results(library) -> None:
    for case in (CASES[0], next(case for case in CASES if case[0] == "batch_dot")):
        graph, values, expected = _one_op_graph(case[0], case[1], _inputs(case, seed=4))
        weights = {name: value for name, value in values.items() if name != "data"}
        with LoadedModel(library, graph, weights) as model:
            mx.cpu_ref(0).configure(num_threads=1)
            single = model.infer({"data": values["data"]})["node_output"]
            mx.cpu_ref(0).configure(num_threads=3)
            multi = model.infer({"data": values["data"]})["node_output"]
            mx.cpu_ref(0).configure(num_threads=1)
        np.testing.assert_array_equal(single, multi)
        np.testing.assert_allclose(single, expected[0], rtol=RTOL, atol=ATOL)
