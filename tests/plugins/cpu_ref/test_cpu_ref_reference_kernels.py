"""cpu_ref's reference kernels (plugins/cpu_ref/kernels/reference/, selected
with configure(kernels="reference") or ACC_CPU_REF_KERNELS=reference)
against its fast kernels (kernels/fast/, the default) and against
independent oracles.

Every operator case of tests/support/cpu_ref_cases.py (the cases test_cpu_ref_ops.py
runs) runs imperatively and as a one-operator model with both kernel sets:

- Fast and reference agree bit for bit, except for the operators whose fast
  kernel sums products in another order (SUMMED_IN_ANOTHER_ORDER: the GEMM
  and blocked convolutions accumulate in float32, panel by panel; the
  reference kernels accumulate in double along the loops and round once).
  Those agree to float32 rounding of the sum: FAST_RTOL of the value, or
  FAST_SCALE of the output's largest magnitude for an element that cancels
  to near zero (the rounding error of a sum is set by its terms, not by its
  result); float16 outputs within one float16 rounding.
- The reference results match the host's CPU path (numpy) at the tolerances
  of test_cpu_ref_ops.py.

The shared MXNet models (tests/models) run whole in reference mode: they
match MXNet's own outputs at test_cpu_ref_models.py's tolerances and the
fast path's at MODEL_RTOL / MODEL_ATOL (their sums are long: a 1x1
convolution of mobilenetv2 sums 960 products).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from support.cpu_ref_cases import CASES, Case, case_id
from support.cpu_ref_runs import (
    assert_all_close,
    case_inputs,
    host_results,
    kernels,
    one_op_graph,
    outputs_by_name,
)
from support.paths import MODELS

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.operator_executor import OperatorExecutor
from acc_host.abi.tensor import TensorSpec
from acc_host.errors import AccHostError

MODEL_NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc"]

# RNN too: its fast kernel sums in float32 (GEMM and axpy rows) and uses
# a float exp, its reference doubles and libm
# Pooling: the fast global average pooling of planes of 128 values or more
# sums in 64 partial sums (max pooling takes no sum: still bit for bit)
SUMMED_IN_ANOTHER_ORDER = {"Convolution", "FullyConnected", "dot", "batch_dot",
                           "_onnx_matmul", "_onnx_gemm", "RNN"}
FAST_RTOL, FAST_SCALE = 1e-5, 1e-6
# A recurrence compounds the float32 exp's and the sums' rounding over its
# steps and layers (a 2-layer bidirectional GRU was seen 2e-5 apart).
RECURRENT_RTOL, RECURRENT_SCALE = 1e-4, 1e-5
MXNET_RTOL, MXNET_ATOL = 1e-4, 1e-5  # test_cpu_ref_models.py's
MODEL_RTOL, MODEL_ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _summed_in_another_order(op: str, attrs: dict) -> bool:
    if op == "Pooling":
        return str(attrs.get("pool_type", "max")) != "max"
    return op in SUMMED_IN_ANOTHER_ORDER


def _assert_fast_agrees(op: str, attrs: dict, fast: list[np.ndarray],
                        reference: list[np.ndarray]) -> None:
    assert len(fast) == len(reference)
    for got, want in zip(fast, reference):
        assert got.shape == want.shape and got.dtype == want.dtype
        if not _summed_in_another_order(op, attrs) or want.dtype.kind in "iu":
            np.testing.assert_array_equal(got, want)  # NaNs equal to NaNs
        elif want.dtype == np.float16:
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                       rtol=1e-3, atol=1e-3)
        else:
            finite = np.abs(want[np.isfinite(want)])
            scale = float(finite.max()) if finite.size else 0.0
            rtol, atol = ((RECURRENT_RTOL, RECURRENT_SCALE) if op == "RNN"
                          else (FAST_RTOL, FAST_SCALE))
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale)


def _imperative(library, case: Case, inputs: list[np.ndarray],
                expected: list[np.ndarray]) -> list[np.ndarray]:
    buffers = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in inputs]
    for buffer, array in zip(buffers, inputs):
        buffer.copy_from_host(array)
    outputs = [DeviceBuffer(library, 0, TensorSpec.of(array)) for array in expected]
    executor = OperatorExecutor(library, case.op, [b.spec for b in buffers],
                                [b.spec for b in outputs], case.attrs)
    try:
        executor.forward(buffers, outputs)
        return [output.to_host() for output in outputs]
    finally:
        executor.close()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_imperative_reference_matches_fast_and_numpy(library, case: Case) -> None:
    inputs = case_inputs(case, seed=4)
    expected = host_results(case.op, inputs, case.attrs)
    fast = _imperative(library, case, inputs, expected)
    with kernels(library, "reference"):
        reference = _imperative(library, case, inputs, expected)
    assert_all_close(reference, expected)
    _assert_fast_agrees(case.op, case.attrs, fast, reference)


@pytest.mark.slow  # the imperative test covers every case in the default run
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_symbolic_reference_matches_fast_and_numpy(library, case: Case) -> None:
    graph, values, expected = one_op_graph(case.op, case.attrs, case_inputs(case, seed=5))
    weights = {name: value for name, value in values.items() if name != "data"}
    results = {}
    for which in ("fast", "reference"):
        with kernels(library, which), LoadedModel(library, graph, weights) as model:
            results[which] = outputs_by_name(model.infer({"data": values["data"]}),
                                              len(expected))
    assert_all_close(results["reference"], expected)
    _assert_fast_agrees(case.op, case.attrs, results["fast"], results["reference"])


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_models_reference_matches_mxnet_and_fast(library, name: str) -> None:
    folder = MODELS / name
    data = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    weights = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
    graph = annotate_symbol(sym, {"data": data.shape}, weights=list(weights))
    expected = [np.load(folder / f"expected_{k}.npy")
                for k in range(len(list(folder.glob("expected_*.npy"))))]
    results = {}
    for which in ("fast", "reference"):
        with kernels(library, which), LoadedModel(library, graph, weights) as model:
            results[which] = list(model.infer({"data": data}).values())
    assert len(results["reference"]) == len(expected)
    for reference, fast, mxnet in zip(results["reference"], results["fast"], expected):
        np.testing.assert_allclose(reference, mxnet, rtol=MXNET_RTOL, atol=MXNET_ATOL)
        np.testing.assert_allclose(fast, reference, rtol=MODEL_RTOL, atol=MODEL_ATOL)


def test_a_model_keeps_the_kernels_it_was_loaded_with(library) -> None:
    """The setting applies to executors and models made after it: a model
    loaded with reference kernels keeps them when the device goes back to
    fast, and its results do not change."""
    case = next(case for case in CASES if case.op == "Convolution")
    graph, values, _ = one_op_graph(case.op, case.attrs, case_inputs(case, seed=6))
    weights = {name: value for name, value in values.items() if name != "data"}
    with kernels(library, "reference"):
        model = LoadedModel(library, graph, weights)
    with model:
        first = model.infer({"data": values["data"]})
        library.configure(0, {"kernels": "fast"})
        again = model.infer({"data": values["data"]})
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])


def test_configure_rejects_unknown_kernels(library) -> None:
    with pytest.raises(AccHostError, match="kernels=\"simd\": expected fast or reference"):
        library.configure(0, {"kernels": "simd"})
    assert library.configure(0, {"query": "kernels"}) == {"kernels": "fast"}


@pytest.mark.parametrize("value, answer", [("reference", "reference"), ("", "fast"),
                                           ("fast", "fast")])
def test_environment_variable_sets_the_default(value: str, answer: str) -> None:
    code = ("import acc_host as mx; "
            "print(mx.get_library('cpu_ref').configure(0, {'query': 'kernels'})['kernels'])")
    env = {**os.environ, "ACC_CPU_REF_KERNELS": value}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == answer


def test_environment_variable_is_checked() -> None:
    code = "import acc_host as mx; mx.get_library('cpu_ref')"
    env = {**os.environ, "ACC_CPU_REF_KERNELS": "quick"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode != 0
    assert 'ACC_CPU_REF_KERNELS="quick": expected fast or reference' in done.stderr


def test_the_graph_json_is_unchanged(library) -> None:
    """Reference mode changes no answer of supportedOps (what runs is the
    plugin's business, not the partitioner's)."""
    case = next(case for case in CASES if case.op == "FullyConnected")
    graph, values, _ = one_op_graph(case.op, case.attrs, case_inputs(case, seed=7))
    spec = {"data": TensorSpec.of(values["data"])}
    fast = library.supported_ops(json.dumps(graph), spec, len(graph["nodes"]))
    with kernels(library, "reference"):
        assert library.supported_ops(json.dumps(graph), spec, len(graph["nodes"])) == fast
