"""tests/models/squeezenet_biased: a SqueezeNet-class MXNet 1.9.1
checkpoint whose 26 convolution biases are random and non-zero (the model
zoo's are all zero, so a convolution that drops its bias would match MXNet
on squeezenet1_1). The accelerators match MXNet's outputs on it, and the
biases matter: leaving them out moves the outputs far beyond the tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx

FOLDER = Path(__file__).resolve().parents[2] / "models" / "squeezenet_biased"
RTOL, ATOL = 1e-4, 1e-5


def _run(ctx: mx.Context, arg_params: dict, aux_params: dict) -> np.ndarray:
    sym = mx.sym.load(str(FOLDER / "model-symbol.json"))
    data = np.load(FOLDER / "input_0.npy")
    exe = sym.simple_bind(ctx, data=data.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    try:
        return exe.forward(data=data)[0].asnumpy()
    finally:
        exe.close()


def test_every_convolution_has_a_non_zero_bias() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    _, arg_params, _ = mx.model.load_checkpoint(str(FOLDER / "model"), 0)
    biases = {key: value.asnumpy() for key, value in arg_params.items() if key.endswith("_bias")}
    assert len(biases) == meta["op_histogram"]["Convolution"] == meta["num_biases"] == 26
    assert all(np.all(value != 0) for value in biases.values())


@pytest.mark.parametrize("ctx", [mx.cpu(), mx.cpu_ref(0), mx.mlu(0)], ids=str)
def test_matches_mxnet_and_the_biases_matter(ctx: mx.Context) -> None:
    _, arg_params, aux_params = mx.model.load_checkpoint(str(FOLDER / "model"), 0)
    expected = np.load(FOLDER / "expected_0.npy")
    result = _run(ctx, arg_params, aux_params)
    np.testing.assert_allclose(result, expected, rtol=RTOL, atol=ATOL)
    no_bias = {key: (mx.nd.zeros(value.shape) if key.endswith("_bias") else value)
               for key, value in arg_params.items()}
    without = _run(ctx, no_bias, aux_params)
    assert np.abs(without - expected).max() > 100 * (ATOL + RTOL * np.abs(expected).max())
