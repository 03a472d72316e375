"""The kernels of EfficientNet's SiLU and squeeze-excitation blocks on
cpu_ref, at sizes where they take their fast paths: the sigmoid and the
fused SiLU with their FMA exponential (within 1e-6 relative of the double
formula), the squeeze-excitation scale shared out between threads by rows
(the same values on 1 and 2 threads, each the float product numpy gives),
global average pooling of large planes in partial sums (within float
rounding of numpy's sum in double) and the 5 x 5 depthwise rows eight
vectors at a time (against the host's CPU path)."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import host_outputs, loaded_on_cpu_ref, random_weights

import acc_host as mx


def _infer(sym: mx.sym.Symbol, data: np.ndarray, threads: int,
           weights: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    with loaded_on_cpu_ref(sym, data, weights or {}, threads) as model:
        return [np.asarray(v) for v in model.infer({"data": data}).values()]


def _sigmoid64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


@pytest.mark.parametrize("threads", [1, 2])
def test_sigmoid_and_silu_within_1e6_of_double(threads: int) -> None:
    # 2^17 values over [-80, 80]: every lane position, both clamps unused
    values = np.linspace(-80.0, 80.0, 1 << 17, dtype=np.float32).reshape(1, 32, 64, 64)
    data = mx.sym.Variable("data")
    gate = _infer(mx.sym.sigmoid(data), values, threads)[0]
    silu = _infer(mx.sym.broadcast_mul(data, mx.sym.sigmoid(data)), values, threads)[0]
    want_gate = _sigmoid64(values)
    np.testing.assert_allclose(gate, want_gate, rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(silu, values * want_gate, rtol=1e-6, atol=1e-30)


def test_squeeze_excitation_scale_same_on_two_threads() -> None:
    rng = np.random.default_rng(7)
    values = rng.standard_normal((1, 144, 28, 28)).astype(np.float32)  # 451 KB: shared
    data = mx.sym.Variable("data")
    scale = mx.sym.Variable("scale", shape=(1, 144, 1, 1))
    sym = mx.sym.broadcast_mul(data, scale)
    weights = {"scale": rng.standard_normal((1, 144, 1, 1)).astype(np.float32)}
    one = _infer(sym, values, 1, weights)[0]
    two = _infer(sym, values, 2, weights)[0]
    np.testing.assert_array_equal(one, values * weights["scale"])
    np.testing.assert_array_equal(two, one)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", [7, 12, 56])  # below and above the partial sums' 128 values
def test_global_average_pool_matches_double_sum(threads: int, size: int) -> None:
    rng = np.random.default_rng(size)
    values = (rng.standard_normal((1, 40, size, size)) + 3.0).astype(np.float32)
    data = mx.sym.Variable("data")
    sym = mx.sym.Pooling(data, kernel=(1, 1), global_pool=True, pool_type="avg")
    got = _infer(sym, values, threads)[0]
    want = values.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size, stride", [(14, 1), (28, 1), (33, 2)])
def test_depthwise_5x5_rows_match_host(threads: int, size: int, stride: int) -> None:
    """14 x 14: one vector per row, a last group of six; 28: two per row,
    the second masked; 33 at stride 2: the column-parity split plane."""
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=24, num_group=24, kernel=(5, 5), pad=(2, 2),
                              stride=(stride, stride), name="dw")
    sym = mx.sym.Activation(conv, act_type="relu")
    values = np.random.default_rng(size).standard_normal((1, 24, size, size)).astype(np.float32)
    weights = random_weights(sym, {"data": values.shape}, seed=size)
    got = _infer(sym, values, threads, weights)[0]
    np.testing.assert_allclose(got, host_outputs(sym, values, weights)[0], rtol=1e-5, atol=1e-6)
