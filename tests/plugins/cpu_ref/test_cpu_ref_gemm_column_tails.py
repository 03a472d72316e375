"""The GEMM's last columns on cpu_ref (under AVX-512, tails of up to 12
columns run with vectors along the weights' rows): 1 x 1 convolutions whose
planes leave n mod 48 = 1 to 47 positions after the 48-column tiles (7 x 7:
1, 14 x 14: 4, ...), with output channels not a multiple of 8, input
channels over several k blocks, bias, a fused residual and relu; and
FullyConnected layers (the weights pre-packed as B) whose outputs leave such
tails. Against numpy in float64, on 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import outputs_on_cpu_ref, random_weights

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5

# (height, width): positions mod 48 of 1, 2, 4, 8, 9, 15, 16, 17, 47.
PLANES = [(7, 7), (5, 10), (14, 14), (7, 8), (3, 19), (7, 9), (8, 8), (5, 13), (5, 19)]


def _conv_graph(channels: int) -> mx.sym.Symbol:
    """Two 1 x 1 convolutions of the input; the second adds the first as
    its residual, then relu (fused into the second's epilogue)."""
    data = mx.sym.Variable("data")
    short = mx.sym.Convolution(data, num_filter=channels, kernel=(1, 1), name="short")
    body = mx.sym.Convolution(data, num_filter=channels, kernel=(1, 1), name="body")
    body = mx.sym.broadcast_add(short, body, name="residual")
    return mx.sym.Activation(body, act_type="relu", name="relu")


def _conv1x1(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    w = weight.astype(np.float64).reshape(weight.shape[0], -1)
    return np.einsum("oc,nchw->nohw", w, x.astype(np.float64)) + bias[None, :, None, None]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("plane", PLANES, ids=[f"{h}x{w}" for h, w in PLANES])
def test_conv1x1_column_tails_match_numpy(plane: tuple[int, int], threads: int) -> None:
    height, width = plane
    channels, inputs = 37, 200  # 4 panels of 8 and 5 rows; k = 200: two blocks
    sym = _conv_graph(channels)
    data = np.random.default_rng(1).standard_normal((1, inputs, height, width))
    data = data.astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=5)
    (got,) = outputs_on_cpu_ref(sym, data, weights, threads)
    short = _conv1x1(data, weights["short_weight"], weights["short_bias"])
    body = _conv1x1(data, weights["body_weight"], weights["body_bias"])
    want = np.maximum(short + body, 0.0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("hidden", [49, 100, 111, 143])
def test_fully_connected_column_tails_match_numpy(hidden: int, threads: int) -> None:
    """Outputs mod 48 of 1, 4, 15 and 47, 13 rows, k = 300 (three blocks)."""
    data_var = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data_var, num_hidden=hidden, name="fc")
    sym = mx.sym.Activation(fc, act_type="relu", name="relu")
    data = np.random.default_rng(2).standard_normal((13, 300)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=6)
    (got,) = outputs_on_cpu_ref(sym, data, weights, threads)
    want = data.astype(np.float64) @ weights["fc_weight"].astype(np.float64).T
    want = np.maximum(want + weights["fc_bias"], 0.0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
