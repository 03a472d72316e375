"""Differential checking (acc_host.differential): every offloaded subgraph
run again on the CPU path and compared; a changed kernel is narrowed down to
the node that computes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx
from acc_host import differential

SQUEEZENET = MODELS / "squeezenet1_1"


def _bind_squeezenet(ctx: mx.Context) -> tuple[mx.runtime.executor.Executor, np.ndarray]:
    symbol, args, aux = mx.model.load_checkpoint(str(SQUEEZENET / "model"), 0)
    x = np.load(SQUEEZENET / "input_0.npy")
    return symbol.bind(ctx, {"data": mx.nd.array(x), **args}, aux_states=aux), x


def test_a_correct_plugin_passes_on_a_real_model() -> None:
    executor, x = _bind_squeezenet(mx.cpu_ref(0))
    report = differential.check(executor, data=x)
    assert report.ok, report.format_text()
    assert report.subgraphs_checked >= 1 and report.outputs_checked >= 1
    np.testing.assert_allclose(executor.outputs[0].asnumpy(),
                               np.load(SQUEEZENET / "expected_0.npy"), rtol=1e-4, atol=1e-5)
    assert "all within tolerance" in report.format_text()


@pytest.mark.slow
def test_a_changed_kernel_is_narrowed_to_its_node(perturbed_cpu_ref: Path) -> None:
    ctx = mx.load_acc(perturbed_cpu_ref, acc_name="cpu_ref_perturbed")
    executor, x = _bind_squeezenet(ctx)
    report = differential.check(executor, data=x)
    assert not report.ok
    mismatch = report.mismatches[0]
    assert mismatch.op == "Pooling" and mismatch.node is not None
    symbol, _, _ = mx.model.load_checkpoint(str(SQUEEZENET / "model"), 0)
    pooling = {node["name"]: node.get("attrs", {}) for node in json.loads(symbol.tojson())["nodes"]
               if node["op"] == "Pooling"}
    assert pooling[mismatch.node]["pool_type"] == "avg"  # the kernel that was changed
    assert "MISMATCH" in report.format_text() and mismatch.node in report.format_text()


def test_tolerances_follow_the_dtype() -> None:
    assert differential.tolerance(np.float16) > differential.tolerance(np.float32)
    assert differential.tolerance(np.int32) == (0.0, 0.0)
    assert differential.tolerance(np.float32, {"float32": (0.1, 0.1)}) == (0.1, 0.1)


@pytest.mark.slow
def test_without_narrowing_only_the_output_is_named(perturbed_cpu_ref: Path) -> None:
    ctx = mx.load_acc(perturbed_cpu_ref, acc_name="cpu_ref_perturbed")
    executor, x = _bind_squeezenet(ctx)
    report = differential.check(executor, narrow=False, data=x)
    assert report.mismatches and report.mismatches[0].node is None
    loose = differential.check(executor, tolerances={"float32": (1e-2, 1e-3)}, data=x)
    assert loose.ok, loose.format_text()
