"""The real MXNet 1.9.1 models of tests/models run whole on cpu_ref in
symbolic mode (supportedOps, loadModel, infer) and match the outputs MXNet
itself computed, at the same tolerances as the host's CPU path
(tests/frontend/test_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol, output_name
from acc_host.abi.loaded_model import LoadedModel

NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def library():
    return mx.get_library("cpu_ref")


def _expected(folder: Path) -> list[np.ndarray]:
    count = len(list(folder.glob("expected_*.npy")))
    return [np.load(folder / f"expected_{k}.npy") for k in range(count)]


@pytest.mark.parametrize("name", NAMES)
def test_model_runs_whole_on_cpu_ref(library, name: str) -> None:
    folder = MODELS / name
    data = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    graph = annotate_symbol(sym, {"data": data.shape},
                            weights=list(arg_params) + list(aux_params))
    nodes = graph["nodes"]

    # Every operator node is supported: the model needs no CPU fallback.
    operators = [k for k, node in enumerate(nodes) if node["op"] != "null"]
    supported = library.supported_ops(json.dumps(graph), {}, len(nodes))
    unsupported = sorted({nodes[k]["op"] for k in set(operators) - set(supported)})
    assert supported == operators, f"{name}: unsupported operators {unsupported}"

    weights = {**{key: value.asnumpy() for key, value in arg_params.items()},
               **{key: value.asnumpy() for key, value in aux_params.items()}}
    expected = _expected(folder)
    with LoadedModel(library, graph, weights) as model:
        results = model.infer({"data": data})
    # Heads are named "<node>_output" by the rule of mxnet_acc.h section 8.
    head_names = [output_name(nodes[node]["name"], index,
                              len(json.loads(nodes[node]["attrs"]["__out_shapes__"])))
                  for node, index, *_ in graph["heads"]]
    assert list(results) == head_names
    assert len(results) == len(expected)
    for head, reference in zip(head_names, expected):
        result = results[head]
        assert result.shape == reference.shape and result.dtype == reference.dtype
        np.testing.assert_allclose(result, reference, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name}: {head}")
