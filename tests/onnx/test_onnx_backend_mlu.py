"""The light real models of the official ONNX backend suite on the simulated
MLU (MluBackend): every graph is partitioned by mlu_sim's supportedOps, the
fused segments run on the simulated card, the rest (LRN, Gemm, Softmax,
Reshape, ConstantOfShape, ...) falls back to the host CPU path. The suite
compares every output against the reference output shipped with the model.

A second test checks that the accelerator really ran the convolutional part
of each model (a suite that passes because everything fell back would prove
nothing about the plugin).

The default run takes the light models of DEFAULT_REAL_MODELS
(tests/onnx/test_onnx_backend.py); the others carry onnx_full.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the ONNX backend suite needs the onnx test extra")

import onnx  # noqa: E402
import onnx.backend.test  # noqa: E402
from support.onnx_expected_failures import EXPECTED_FAILURES  # noqa: E402
from support.onnx_suite import DEFAULT_REAL_MODELS, build_suite  # noqa: E402

from acc_host.onnx.backend import MluBackend  # noqa: E402

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")

globals().update({f"Mlu{name}": case for name, case in build_suite(
    MluBackend, __name__, EXPECTED_FAILURES,
    include=rf"^test_({'|'.join(LIGHT_MODELS)})_cpu$").items()})

_LIGHT_DIR = Path(os.path.dirname(onnx.backend.test.__file__)) / "data" / "light"


@pytest.mark.parametrize("model_name", [
    pytest.param(name, marks=[] if f"test_{name}" in DEFAULT_REAL_MODELS else [
        pytest.mark.onnx_full]) for name in LIGHT_MODELS])
def test_the_mlu_runs_the_convolutions(model_name: str) -> None:
    model = onnx.load(str(_LIGHT_DIR / f"light_{model_name}.onnx"))
    rep = MluBackend.prepare(model)
    (name,) = rep.input_names
    (value,) = [value for value in model.graph.input if value.name == name]
    shape = tuple(dim.dim_value for dim in value.type.tensor_type.shape.dim)
    rep.run([np.random.default_rng(0).standard_normal(shape).astype(np.float32)])
    placement = rep.executor.placement()
    where = collections.Counter(placement.values())
    assert where["mlu(0)"] > 0 and where["cpu(0)"] > 0  # partitioned, with fallback
    ops = {node.name: node.op for node in rep.imported.symbol.graph.nodes}
    convolutions = [node for node in placement if ops[node] == "Convolution"]
    on_mlu = [node for node in convolutions if placement[node] == "mlu(0)"]
    assert convolutions and on_mlu == convolutions
