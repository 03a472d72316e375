"""cpu_ref runs every operator it has, in both modes: imperative
(accGetExecutor on device memory) and symbolic (a one-operator graph through
supportedOps/loadModel/infer), like the host's CPU path: the numpy
definitions of acc_host.ops, themselves tested against hand-derived and
independent results (tests/ops/test_ops_*.py) and MXNet's own outputs
(tests/frontend/test_models.py). Every output of an operator is compared, so
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
from support.cpu_ref_cases import CASES, REJECTED, Case, RejectedCase, case_id
from support.cpu_ref_runs import (
    ATOL,
    RTOL,
    assert_all_close,
    case_inputs,
    host_results,
    one_op_graph,
    outputs_by_name,
)

import acc_host as mx
from acc_host import ops
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.operator_versions import op_version
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import OperatorError, ShapeError
from acc_host.ops.control_flow import BODIES


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_matches_reference(library, case: Case) -> None:
    op, attrs = case.op, case.attrs
    inputs = case_inputs(case, seed=1)
    expected = host_results(op, inputs, attrs)
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in inputs]
    for buffer, array in zip(buffers, inputs):
        buffer.copy_from_host(array)
    outputs = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in expected]
    executor = OperatorExecutor(library, op, [b.spec for b in buffers],
                                [b.spec for b in outputs], attrs)
    executor.forward(buffers, outputs)
    assert_all_close([output.to_host() for output in outputs], expected)
    # The executor is reusable with fresh data of the same shapes.
    second = case_inputs(case, seed=2)
    for buffer, array in zip(buffers, second):
        buffer.copy_from_host(array)
    executor.forward(buffers, outputs)
    assert_all_close([output.to_host() for output in outputs], host_results(op, second, attrs))
    executor.close()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_symbolic_matches_reference(library, case: Case) -> None:
    op, attrs = case.op, case.attrs
    graph, values, expected = one_op_graph(op, attrs, case_inputs(case, seed=3))
    assert library.supported_ops(json.dumps(graph), {"data": TensorSpec.of(values["data"])},
                                 len(graph["nodes"])) == [len(graph["nodes"]) - 1]
    weights = {name: value for name, value in values.items() if name != "data"}
    with LoadedModel(library, graph, weights) as model:
        results = model.infer({"data": values["data"]})
    assert_all_close(outputs_by_name(results, len(expected)), expected)


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
    ``_onnx_*`` operators are checked by the test below; the ``_dyn_*``
    operators never reach a plugin: binding replaces them by static ones,
    see docs/dynamic_shapes.md; nor do the control-flow nodes, which the
    host runs, offering their bodies instead, see docs/control_flow.md)."""
    listed = {entry.rsplit(":", 1)[0]
              for entry in mx.cpu_ref(0).configure(query="ops")["ops"].split(",")}
    assert sorted(name for name in set(ops.all_ops()) - listed - set(BODIES)
                  if not name.startswith(("_onnx_", "_dyn_"))) == []


# _onnx_* operators that cpu_ref leaves out, each with the reason. Every
# operator of onnx_ops.py can be offered to a plugin with some dtype the ABI
# describes (those whose values cannot, bool results and the casts to
# dtypes without a TensorDType, are refused by attribute: see ops_onnx_elementwise.c),
# so the list holds the operator whose output shape depends on data and the
# host-only ONNX operators of onnx_attention.py, onnx_quant.py, onnx_sampling.py,
# onnx_dft.py, onnx_nms.py, onnx_bitcast.py, onnx_state.py, onnx_col2im.py,
# onnx_linear_attention.py and onnx_deform_conv.py (docs/onnx.md says why).
ONNX_EXCLUDED: dict[str, str] = {
    "_onnx_nonzero": "its output shape depends on data: offload refuses it (host path only)",
    "_onnx_rnn": "ONNX's RNN/LSTM/GRU where they differ from MXNet's RNN (activations, clip, "
                 "peepholes, reverse alone, sequence_lens): the importer uses RNN, which cpu_ref "
                 "runs, wherever they agree, and leaves these rare forms to the host",
    "_onnx_attention": "host only: a multi-output fused operator no plugin kernel implements",
    "_onnx_rotary_embedding": "host only: no plugin kernel implements it",
    "_onnx_quantize_linear": "host only: the quantized dtypes' kernels are not in cpu_ref",
    "_onnx_dequantize_linear": "host only: the quantized dtypes' kernels are not in cpu_ref",
    "_onnx_dynamic_quantize_linear": "host only: a data-dependent scale, no plugin kernel",
    "_onnx_matmul_integer": "host only: integer GEMM is not in cpu_ref",
    "_onnx_qlinear_matmul": "host only: quantized GEMM is not in cpu_ref",
    "_onnx_grid_sample": "host only: no plugin kernel implements it",
    "_onnx_affine_grid": "host only: no plugin kernel implements it",
    "_onnx_roi_align": "host only: no plugin kernel implements it",
    "_onnx_dft": "host only: no plugin kernel implements it",
    "_onnx_stft": "host only: no plugin kernel implements it",
    "_onnx_col2im": "host only: no plugin kernel implements it",
    "_onnx_linear_attention": "host only: a recurrence no plugin kernel implements",
    "_onnx_deform_conv": "host only: no plugin kernel implements it",
    "_onnx_non_max_suppression": "its output shape depends on data: host path only",
    "_onnx_unique": "its output shape depends on data: host path only",
    "_onnx_bitcast": "host only: a reinterpretation of bytes, nothing to accelerate",
    "_onnx_swiglu": "host only: no plugin kernel implements it",
    "_onnx_causal_conv_with_state": "host only: no plugin kernel implements it",
    "_onnx_tensor_scatter": "host only: no plugin kernel implements it",
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
    graph, specs, _ = one_op_graph(op, attrs, values)
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
        graph, values, expected = one_op_graph(case[0], case[1], case_inputs(case, seed=4))
        weights = {name: value for name, value in values.items() if name != "data"}
        with LoadedModel(library, graph, weights) as model:
            mx.cpu_ref(0).configure(num_threads=1)
            single = model.infer({"data": values["data"]})["node_output"]
            mx.cpu_ref(0).configure(num_threads=3)
            multi = model.infer({"data": values["data"]})["node_output"]
            mx.cpu_ref(0).configure(num_threads=1)
        np.testing.assert_array_equal(single, multi)
        np.testing.assert_allclose(single, expected[0], rtol=RTOL, atol=ATOL)
