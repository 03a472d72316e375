"""cpu_ref runs every operator it has, in both modes: imperative
(accGetExecutor on device memory) and symbolic (a one-operator graph through
supportedOps/loadModel/infer), like the host's CPU path: the numpy
definitions of acc_host.ops, themselves tested against hand-derived and
independent results (tests/test_ops_*.py) and MXNet's own outputs
(tests/test_models.py). Every output of an operator is compared, so
operators with several (SliceChannel, LayerNorm with output_mean_var) are
checked whole.

Cases carry their input dtypes: float16 results are compared with the
registry computing on the same float16 inputs, within one float16 rounding
(rtol and atol 1e-3: cpu_ref computes in float32 and rounds once, where the
registry may compute in float64); integer results must be equal. Operators
and dtypes cpu_ref does not implement are declined as unsupported."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from cpu_ref_cases import CASES, REJECTED, Case, RejectedCase, case_id

import acc_host as mx
from acc_host import ops
from acc_host.abi.annotate import annotate_symbol, output_name
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.operator_versions import op_version
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import OperatorError, ShapeError

RTOL, ATOL = 1e-4, 1e-5
SCALE_TOLERANCE = 1e-6  # see _assert_all_close
# One float16 rounding apart: a float16 ulp is at most 2^-10 of the value.
RTOL_FLOAT16, ATOL_FLOAT16 = 1e-3, 1e-3

# Operators whose first input must be positive to stay in their domain (a
# NaN on both sides would compare equal, and prove nothing).
POSITIVE_INPUT = {"log", "log1p", "log2", "log10", "sqrt", "rsqrt", "_power", "broadcast_power",
                  "_power_scalar"}
# Operators defined on (-1, 1), and arccosh on [1, inf).
UNIT_INPUT = {"arcsin", "arccos", "arctanh"}
# Operators compared on few distinct values, so that ties, equal operands
# and zeros occur: comparisons, logical operations, searches.
FEW_VALUES = {op for op, *_ in CASES if any(word in op for word in (
    "equal", "greater", "lesser", "logical", "arg", "topk"))} | {"_Equal", "_EqualScalar"}
# Operators whose reductions skip NaNs get some.
WITH_NANS = {"nansum", "nanprod"}
# Embedding's and take's indices: whole and fractional positions, some out
# of range (clipped, wrapped).
INDEX_INPUT = {"Embedding": 0, "take": 1}


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
            few_values: bool) -> np.ndarray:
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -3 if few_values else -20
        return rng.integers(low, 4 if few_values else 40, shape).astype(dtype)
    if few_values:
        return rng.integers(-2, 3, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def _indices(rng: np.random.Generator, case: Case, size: int, shape: tuple[int, ...],
             dtype: np.dtype) -> np.ndarray:
    """Positions along an axis of size entries: for "raise" inside [-size,
    size), otherwise also beyond; floats get fractions (truncated toward
    zero)."""
    strict = case.attrs.get("mode") == "raise"
    low, high = (-size, size) if strict else (-3, size + 3)
    if dtype.kind == "u":
        low = 0
    ids = rng.integers(low, high, shape)
    if dtype.kind == "f" and not strict:
        ids = ids + rng.choice(np.array([0.0, 0.25, 0.75]), shape)
    return ids.astype(dtype)


def _inputs(case: Case, seed: int) -> list[np.ndarray]:
    op, attrs, shapes = case.op, case.attrs, case.shapes
    dtypes = [np.dtype(name) for name in case.input_dtypes()]
    rng = np.random.default_rng(seed)
    few = op in FEW_VALUES
    # np.asarray: a 0-d shape gives numpy scalars, not arrays
    arrays = [np.asarray(_random(rng, shape, dtype, few)) for shape, dtype in zip(shapes, dtypes)]
    if op == "BatchNorm":
        arrays[4] = rng.uniform(0.2, 2.0, shapes[4]).astype(dtypes[4])  # variances
    elif op in POSITIVE_INPUT:
        arrays[0] = rng.uniform(0.1, 4.0, shapes[0]).astype(dtypes[0])
    elif op in UNIT_INPUT:
        arrays[0] = rng.uniform(-0.95, 0.95, shapes[0]).astype(dtypes[0])
    elif op == "arccosh":
        arrays[0] = rng.uniform(1.05, 4.0, shapes[0]).astype(dtypes[0])
    elif op in WITH_NANS:
        arrays[0][rng.random(shapes[0]) < 0.3] = np.nan
    elif op == "Embedding":
        arrays[0] = _indices(rng, case, attrs["input_dim"], shapes[0], dtypes[0])
    elif op == "take":
        data = shapes[0]
        axis = attrs.get("axis", 0) % len(data)
        arrays[1] = _indices(rng, case, data[axis], shapes[1], dtypes[1])
    elif op == "RNN" and attrs.get("use_sequence_length"):
        arrays[-1] = rng.integers(1, shapes[0][0] + 1, shapes[-1]).astype(dtypes[-1])
    elif op.startswith("_onnx_"):
        _onnx_inputs(case, rng, arrays, dtypes)
    elif op == "_equal" and dtypes[0] == np.int64:
        # Neighbours beyond 2^53, which only exact integer comparison tells apart.
        arrays = [(2**53 + rng.integers(-2, 3, shape)).astype(np.int64) for shape in shapes]
    return arrays


def _positions(rng: np.random.Generator, size: int, shape: tuple[int, ...],
               dtype: np.dtype) -> np.ndarray:
    """Valid positions along an axis of size entries, negative ones (counted
    from the end) included where the dtype is signed."""
    low = 0 if dtype.kind == "u" else -size
    return rng.integers(low, size, shape).astype(dtype)


def _onnx_inputs(case: Case, rng: np.random.Generator, arrays: list[np.ndarray],
                 dtypes: list[np.dtype]) -> None:
    """Inputs of the ONNX importer's operators that need values in a domain:
    indices inside their axes, lengths, targets, positive arguments."""
    op, attrs, shapes = case.op, case.attrs, case.shapes
    if op in ("_onnx_gather", "_onnx_gather_elements", "_onnx_scatter_elements"):
        data = shapes[0]
        axis = attrs.get("axis", 0) % len(data)
        arrays[1] = _positions(rng, data[axis], shapes[1], dtypes[1])
    elif op in ("_onnx_gather_nd", "_onnx_scatter_nd"):
        data, index = shapes[0], shapes[1]
        batch = attrs.get("batch_dims", 0)
        columns = [_positions(rng, data[batch + j], index[:-1], dtypes[1])
                   for j in range(index[-1])]
        arrays[1] = np.stack(columns, axis=-1).astype(dtypes[1])
    elif op == "_onnx_one_hot":
        depth = attrs["depth"]
        low = 0 if dtypes[0].kind == "u" else -depth - 1
        arrays[0] = rng.integers(low, depth + 2, shapes[0]).astype(dtypes[0])
    elif op == "_onnx_reverse_sequence":
        steps = shapes[0][attrs.get("time_axis", 0)]
        arrays[1] = rng.integers(0, steps + 1, shapes[1]).astype(dtypes[1])
    elif op in ("_onnx_nll_loss", "_onnx_softmax_cross_entropy"):
        classes = shapes[0][1]
        target = rng.integers(0, classes, shapes[1])
        if "ignore_index" in attrs:
            target[rng.random(shapes[1]) < 0.3] = attrs["ignore_index"]
        arrays[1] = target.astype(dtypes[1])
        if len(arrays) > 2:
            arrays[2] = rng.uniform(0.5, 2.0, shapes[2]).astype(dtypes[2])
    elif (op == "_onnx_unary" and attrs["fn"] in ("sqrt", "log")) or \
            (op == "_onnx_reduce" and attrs["fn"] == "log_sum") or \
            (op == "_onnx_binary" and attrs["fn"] == "pow" and dtypes[0].kind == "f"):
        arrays[0] = np.abs(arrays[0]) + np.array(1, dtypes[0])
    elif op == "_onnx_binary" and attrs["fn"] in ("bitshift_left", "bitshift_right"):
        arrays[1] = rng.integers(0, 8 * dtypes[1].itemsize + 2, shapes[1]).astype(dtypes[1])
    elif op == "_onnx_binary" and attrs["fn"] == "pow":
        arrays[0] = rng.integers(0, 4, shapes[0]).astype(dtypes[0])
        arrays[1] = rng.integers(0, 5, shapes[1]).astype(dtypes[1])
    elif op == "_onnx_cumprod" or (op == "_onnx_reduce" and attrs["fn"] == "prod"):
        if dtypes[0].kind == "f":
            arrays[0] = rng.uniform(0.5, 1.5, shapes[0]).astype(dtypes[0])
    elif op == "_onnx_det":
        arrays[0] = (rng.standard_normal(shapes[0]) + 2 * np.eye(shapes[0][-1])).astype(dtypes[0])


def _host_results(op: str, inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """The host's CPU path: the operator's numpy definition (every visible
    output)."""
    definition = ops.get(op)
    return definition.run(definition.parse(attrs), inputs)


def _assert_all_close(results: list[np.ndarray], expected: list[np.ndarray]) -> None:
    """Equal shapes and dtypes; integers equal, floats within the tolerance
    of their dtype. A float32 element may also be off by SCALE_TOLERANCE
    times the array's largest magnitude: a sum of products rounds at the
    scale of its terms, so an element that cancels to near zero carries an
    error set by the others (a 70 x 80 x 90 Gemm whose values reach 170 gave
    -0.094019 against numpy's -0.093994 on an AVX2 CPU: a difference of
    1.5e-7 of the largest value, from the order of the sums alone)."""
    assert len(results) == len(expected)
    for result, reference in zip(results, expected):
        assert result.shape == reference.shape and result.dtype == reference.dtype
        if reference.dtype.kind in "iu":
            np.testing.assert_array_equal(result, reference)
        elif reference.dtype == np.float16:
            np.testing.assert_allclose(result.astype(np.float32), reference.astype(np.float32),
                                       rtol=RTOL_FLOAT16, atol=ATOL_FLOAT16)
        else:
            finite = np.abs(reference[np.isfinite(reference)])
            scale = float(finite.max()) if finite.size else 0.0
            np.testing.assert_allclose(result, reference, rtol=RTOL,
                                       atol=max(ATOL, SCALE_TOLERANCE * scale))


def _one_op_graph(op: str, attrs: dict, inputs: list[np.ndarray]):
    names = ["data"] + [f"arg{i}" for i in range(1, len(inputs))]
    node = getattr(mx.sym, op)(*[mx.sym.Variable(name) for name in names], name="node",
                               **attrs)
    graph = annotate_symbol(node, {name: array.shape for name, array in zip(names, inputs)},
                            weights=names[1:],
                            dtypes={name: array.dtype for name, array in zip(names, inputs)})
    return graph, dict(zip(names, inputs)), _host_results(op, inputs, attrs)


def _outputs_by_name(results: dict, count: int) -> list[np.ndarray]:
    """The results of a one-operator graph in output order, by the naming
    rule of mxnet_acc.h ("node_output", or "node_output<k>" for several)."""
    return [results[output_name("node", k, count)] for k in range(count)]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_matches_reference(library, case: Case) -> None:
    op, attrs = case.op, case.attrs
    inputs = _inputs(case, seed=1)
    expected = _host_results(op, inputs, attrs)
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in inputs]
    for buffer, array in zip(buffers, inputs):
        buffer.copy_from_host(array)
    outputs = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in expected]
    executor = OperatorExecutor(library, op, [b.spec for b in buffers],
                                [b.spec for b in outputs], attrs)
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
    op, attrs = case.op, case.attrs
    graph, values, expected = _one_op_graph(op, attrs, _inputs(case, seed=3))
    assert library.supported_ops(json.dumps(graph), {"data": TensorSpec.of(values["data"])},
                                 len(graph["nodes"])) == [len(graph["nodes"]) - 1]
    weights = {name: value for name, value in values.items() if name != "data"}
    with LoadedModel(library, graph, weights) as model:
        results = model.infer({"data": values["data"]})
    _assert_all_close(_outputs_by_name(results, len(expected)), expected)


def test_every_operator_has_cases(library) -> None:
    """Every name cpu_ref lists (aliases included) is an operator of the
    host's registry at the version cpu_ref claims, and has a float32 and a
    float16 case here (a case of another of its names counts): every
    operator runs float16, on its float32 kernels or by moving elements."""
    listed = mx.cpu_ref(0).configure(query="ops")["ops"].split(",")
    tested = {dtype: {id(ops.get(case.op)) for case in CASES if case.input_dtypes()[0] == dtype}
              for dtype in ("float32", "float16")}
    for entry in listed:
        name, version = entry.rsplit(":", 1)
        definition = ops.find(name)
        assert definition is not None, f"{name} is not in the host's registry"
        assert int(version) == op_version(name), name
        for dtype, operators in tested.items():
            if dtype == "float16" and name in NO_FLOAT16:
                continue
            assert id(definition) in operators, f"{name} has no {dtype} case"


# Operators whose numpy definition itself refuses float16 (so the host has
# no float16 result to match): cpu_ref declines float16 for them.
NO_FLOAT16 = {"_onnx_det": "numpy.linalg.det raises TypeError for float16"}


@pytest.mark.parametrize("op", sorted(NO_FLOAT16))
def test_declines_float16_the_host_cannot_compute(library, op: str) -> None:
    with pytest.raises(mx.PluginUnsupportedError, match="only"):
        OperatorExecutor(library, op, [TensorSpec((2, 2), np.float16)],
                         [TensorSpec((), np.float16)], {})


def test_covers_the_whole_registry(library) -> None:
    """cpu_ref lists every name of the host's registry (the ONNX importer's
    ``_onnx_*`` operators are checked by the test below)."""
    listed = {entry.rsplit(":", 1)[0]
              for entry in mx.cpu_ref(0).configure(query="ops")["ops"].split(",")}
    assert sorted(name for name in set(ops.all_ops()) - listed
                  if not name.startswith("_onnx_")) == []


# _onnx_* operators that cpu_ref leaves out, each with the reason. Every
# operator of onnx_ops.py can be offered to a plugin with some dtype the ABI
# describes (those whose values cannot, bool results and the casts to
# dtypes without a TensorDType, are refused by attribute: see ops_onnx_elementwise.c).
ONNX_EXCLUDED: dict[str, str] = {
    "_onnx_rnn": "ONNX's RNN/LSTM/GRU where they differ from MXNet's RNN (activations, clip, "
                 "peepholes, reverse alone, sequence_lens): the importer uses RNN, which cpu_ref "
                 "runs, wherever they agree, and leaves these rare forms to the host",
}


def test_covers_the_onnx_operators(library) -> None:
    listed = {entry.rsplit(":", 1)[0]
              for entry in mx.cpu_ref(0).configure(query="ops")["ops"].split(",")}
    assert sorted(name for name in set(ops.all_ops()) - listed
                  if name.startswith("_onnx_") and name not in ONNX_EXCLUDED) == []


@pytest.mark.parametrize("case", REJECTED, ids=lambda case: case_id(case[:3]))
def test_rejects_what_the_registry_rejects(library, case: RejectedCase) -> None:
    op, attrs, in_shapes, out_shapes = case
    definition = ops.get(op)
    with pytest.raises((OperatorError, ShapeError)):
        definition.infer_shape(definition.parse(attrs), list(in_shapes))
    with pytest.raises(mx.PluginError) as error:
        OperatorExecutor(library, op, [TensorSpec(shape, np.float32) for shape in in_shapes],
                         [TensorSpec(shape, np.float32) for shape in out_shapes], attrs)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"


# (operator, attributes, input specs, output specs) of dtypes the registry
# accepts and cpu_ref does not implement: declined, so that the host runs
# them on the CPU.
F64, I8, I32 = np.float64, np.int8, np.int32
Specs = list[tuple[tuple[int, ...], Any]]
DECLINED: list[tuple[str, dict, Specs, Specs]] = [
    ("Activation", {"act_type": "relu"}, [((2, 3), F64)], [((2, 3), F64)]),
    ("Convolution", {"kernel": (1,), "num_filter": 1, "no_bias": True},
     [((1, 1, 3), I8), ((1, 1, 1), I8)], [((1, 1, 3), I8)]),
    ("elemwise_add", {}, [((3,), I32), ((3,), I32)], [((3,), I32)]),
    ("_plus_scalar", {"scalar": 1}, [((3,), I8)], [((3,), I8)]),
    ("exp", {}, [((3,), I32)], [((3,), I32)]),
    ("sum", {}, [((3,), F64)], [((1,), F64)]),
    ("softmax", {"dtype": "float64"}, [((2, 3), np.float32)], [((2, 3), F64)]),
    ("topk", {}, [((2, 3), I32)], [((2, 1), np.float32)]),
    ("BatchNorm", {}, [((2, 3), F64)] + [((3,), F64)] * 4, [((2, 3), F64)]),
]


@pytest.mark.parametrize("op, attrs, inputs, outputs", DECLINED,
                         ids=[f"{op}-{index}" for index, (op, *_) in enumerate(DECLINED)])
def test_declines_dtypes_it_does_not_implement(library, op, attrs, inputs, outputs) -> None:
    with pytest.raises(mx.PluginUnsupportedError, match="only"):
        OperatorExecutor(library, op, [TensorSpec(shape, dtype) for shape, dtype in inputs],
                         [TensorSpec(shape, dtype) for shape, dtype in outputs], attrs)
    values = [np.zeros(shape, dtype) for shape, dtype in inputs]
    graph, specs, _ = _one_op_graph(op, attrs, values)
    assert library.supported_ops(json.dumps(graph), {"data": TensorSpec.of(specs["data"])},
                                 len(graph["nodes"])) == []


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
        OperatorExecutor(library, op, [TensorSpec(shape, np.float32) for shape in in_shapes],
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
