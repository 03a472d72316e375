"""One operator case (support/cpu_ref_cases.py) run and checked: its inputs
drawn in the operator's domain, the host's CPU path as the expected results,
the one-operator graph of symbolic mode, and the comparison at the
tolerances of each dtype. Shared by the tests that run the cases on cpu_ref
(plugins/cpu_ref/test_cpu_ref_ops.py, test_cpu_ref_reference_kernels.py) and
on every context (ops/test_ops_on_contexts.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import acc_host as mx
from acc_host import ops
from acc_host.abi.annotate import annotate_symbol, output_name

from .cpu_ref_cases import CASES, Case

__all__ = ["ATOL", "RTOL", "assert_all_close", "case_inputs", "host_results", "one_op_graph",
           "outputs_by_name"]

RTOL, ATOL = 1e-4, 1e-5
SCALE_TOLERANCE = 1e-6  # see assert_all_close
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


def case_inputs(case: Case, seed: int) -> list[np.ndarray]:
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


def host_results(op: str, inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    """The host's CPU path: the operator's numpy definition (every visible
    output)."""
    definition = ops.get(op)
    return definition.run(definition.parse(attrs), inputs)


def assert_all_close(results: list[np.ndarray], expected: list[np.ndarray]) -> None:
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


def one_op_graph(op: str, attrs: dict, inputs: list[np.ndarray]):
    names = ["data"] + [f"arg{i}" for i in range(1, len(inputs))]
    node = getattr(mx.sym, op)(*[mx.sym.Variable(name) for name in names], name="node",
                               **attrs)
    graph = annotate_symbol(node, {name: array.shape for name, array in zip(names, inputs)},
                            weights=names[1:],
                            dtypes={name: array.dtype for name, array in zip(names, inputs)})
    return graph, dict(zip(names, inputs)), host_results(op, inputs, attrs)


def outputs_by_name(results: dict, count: int) -> list[np.ndarray]:
    """The results of a one-operator graph in output order, by the naming
    rule of mxnet_acc.h ("node_output", or "node_output<k>" for several)."""
    return [results[output_name("node", k, count)] for k in range(count)]


@contextmanager
def kernels(library: Any, which: str) -> Iterator[None]:
    """cpu_ref device 0 set to `which` kernels ("reference" or "fast"),
    fast again afterwards."""
    assert library.configure(0, {"kernels": which}) == {"kernels": which}
    try:
        yield
    finally:
        library.configure(0, {"kernels": "fast"})
