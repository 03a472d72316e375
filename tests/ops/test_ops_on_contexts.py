"""The proposal's test plan: "a test accelerator library that reuses the CPU
operator implementations runs all unit tests". Every operator case runs
through the user-facing API on each context: the CPU; cpu_ref in imperative
mode (mx.nd.<Op> on arrays that live on cpu_ref: accGetExecutor); cpu_ref in
symbolic mode (a bound executor: supportedOps, loadModel, infer). On the
accelerator contexts the test also checks that the operator really ran
there, not on the CPU fallback."""

from __future__ import annotations

import numpy as np
import pytest
from support import cpu_ref_runs as base
from support.cpu_ref_cases import CASES, Case, case_id

import acc_host as mx
from acc_host.ndarray import dispatch

CONTEXTS = ["cpu", "cpu_ref-imperative", "cpu_ref-symbolic"]


def _mlu_cases() -> list[Case]:
    """The cases whose operator and dtypes mlu_sim claims (it runs a subset;
    attribute values it declines fall back to the CPU inside the same call)."""
    if not any(library.name == "mlu" for library in mx.libraries()):
        return []
    listed = {entry.split(":")[0] for entry in
              mx.Context("mlu", 0).configure(query="ops")["ops"].split(",")}
    return [case for case in CASES if case.op in listed
            and set(case.input_dtypes()) <= {"float32", "float16"}]


def _imperative(case: Case, inputs: list[np.ndarray], ctx: mx.Context) -> list[np.ndarray]:
    arrays = [mx.nd.array(values, ctx=ctx) for values in inputs]
    result = getattr(mx.nd, case.op)(*arrays, **case.attrs)
    results = result if isinstance(result, list) else [result]
    assert all(output.context == ctx for output in results)
    return [output.asnumpy() for output in results]


def _symbolic(case: Case, inputs: list[np.ndarray], ctx: mx.Context,
              on_accelerator: bool = True) -> list[np.ndarray]:
    names = [f"in{k}" for k in range(len(inputs))]
    node = getattr(mx.sym, case.op)(*[mx.sym.Variable(name) for name in names], name="node",
                                     **case.attrs)
    arrays = {name: mx.nd.array(values, ctx=ctx) for name, values in zip(names, inputs)}
    aux = node.list_auxiliary_states()
    exe = node.bind(ctx, {name: array for name, array in arrays.items() if name not in aux},
                    aux_states={name: arrays[name] for name in aux}, data_names=names)
    if ctx.is_accelerator and on_accelerator:
        assert exe.placement() == {"node": str(ctx)}
    outputs = [output.asnumpy() for output in exe.forward()]
    exe.close()
    return outputs


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_operator_on_context(case: Case, context: str) -> None:
    inputs = base.case_inputs(case, seed=11)
    expected = base.host_results(case.op, inputs, case.attrs)
    if context == "cpu":
        results = _imperative(case, inputs, mx.cpu())
    elif context == "cpu_ref-imperative":
        ctx = mx.cpu_ref(0)
        before = dispatch.stats(ctx)
        results = _imperative(case, inputs, ctx)
        after = dispatch.stats(ctx)
        assert after["accelerator_calls"] == before["accelerator_calls"] + 1
        assert after["fallbacks"] == before["fallbacks"]
    else:
        results = _symbolic(case, inputs, mx.cpu_ref(0))
    base.assert_all_close(results, expected)


@pytest.mark.parametrize("mode", ["imperative", "symbolic"])
@pytest.mark.parametrize("case", _mlu_cases(), ids=case_id)
def test_operator_on_mlu(case: Case, mode: str) -> None:
    """mlu_sim, for the operators it supports: the same results through both
    modes (with the CPU taking what it declines)."""
    inputs = base.case_inputs(case, seed=12)
    expected = base.host_results(case.op, inputs, case.attrs)
    ctx = mx.Context("mlu", 0)
    results = _imperative(case, inputs, ctx) if mode == "imperative" else \
        _symbolic(case, inputs, ctx, on_accelerator=False)
    base.assert_all_close(results, expected)

