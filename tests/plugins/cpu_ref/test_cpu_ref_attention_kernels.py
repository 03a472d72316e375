"""cpu_ref's fast kernels at the shapes of a transformer's attention
(4 heads, sequence 128, head size 16): the scores' scaling by a power of
two (a multiply, the same floats as the divide), the softmax of their rows
(vector max), the product of the weights with the values (a narrow product
read in place). Oracle: numpy, in float64 where it sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

import acc_host as mx


def on_cpu_ref(values: np.ndarray) -> mx.nd.NDArray:
    return mx.nd.array(values, mx.cpu_ref(0))


@pytest.mark.parametrize("divisor", [4.0, 0.25, -8.0, 3.0, 2.0 ** -126])
def test_division_by_a_scalar_is_the_correctly_rounded_quotient(divisor: float) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4 * 128 * 128) * 10.0 ** rng.integers(-40, 38, 4 * 128 * 128))
    x = np.concatenate([x.astype(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38],
                                 np.float32)])
    got = (on_cpu_ref(x) / divisor).asnumpy()
    with np.errstate(all="ignore"):
        want = x / np.float32(divisor)
    np.testing.assert_array_equal(got, want)  # bit for bit, NaN where NaN


def test_softmax_of_attention_scores() -> None:
    rng = np.random.default_rng(1)
    scores = (rng.standard_normal((1, 4, 128, 128)) * 4).astype(np.float32)
    scores[0, 0, 3, 5] = np.nan  # a NaN row stays NaN, the others are unaffected
    scores[0, 1, 7] = -np.inf
    scores[0, 1, 7, 9] = 2.0
    got = mx.nd.softmax(on_cpu_ref(scores), axis=-1).asnumpy()
    x = scores.astype(np.float64)
    shifted = np.exp(x - np.nanmax(x, axis=-1, keepdims=True))
    want = shifted / shifted.sum(axis=-1, keepdims=True)
    assert np.isnan(got[0, 0, 3]).all()
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6, atol=1e-7)
    assert got[0, 1, 7, 9] == 1.0


def test_softmax_of_masked_scores_has_no_subnormals() -> None:
    """Masked positions (BERT's additive -10000) and far-off scores give
    probabilities below float32's smallest normal: they come out as 0, not
    as subnormals, which would slow the product with the values 100-fold."""
    rng = np.random.default_rng(3)
    scores = (rng.standard_normal((2, 4, 128, 128)) * 30).astype(np.float32)
    scores[1, :, :, 100:] -= 10000.0
    got = mx.nd.softmax(on_cpu_ref(scores), axis=-1).asnumpy()
    x = scores.astype(np.float64)
    shifted = np.exp(x - x.max(axis=-1, keepdims=True))
    want = shifted / shifted.sum(axis=-1, keepdims=True)
    # (x - max) rounded in float: about 4e-6 relative at scores 60 apart
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-37)
    tiny = np.finfo(np.float32).tiny
    assert not ((got > 0) & (got < tiny)).any()
    assert (got[1, :, :, 100:] == 0).all()
    assert (got[want < tiny] == 0).all()


@pytest.mark.parametrize("m, k, n", [(128, 128, 16), (128, 128, 5), (37, 128, 16),
                                     (128, 100, 13)])
def test_narrow_attention_products(m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1, 4, m, k)).astype(np.float32)
    b = rng.standard_normal((1, 4, k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    mx.cpu_ref(0).configure(num_threads=1)  # the narrow products read in place
    got = mx.nd._onnx_matmul(on_cpu_ref(a), on_cpu_ref(b)).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    got_batch = mx.nd.batch_dot(on_cpu_ref(a[0]), on_cpu_ref(b[0])).asnumpy()
    np.testing.assert_allclose(got_batch, want[0], rtol=1e-4, atol=1e-4)


def _gelu_in_double(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    erfc = np.fromiter((math.erfc(-value / math.sqrt(2.0)) for value in v), np.float64, v.size)
    return 0.5 * v * erfc


def test_gelu_of_an_mlp_activation_matches_erf_in_double() -> None:
    """GELU by fused multiply-adds (its erfc fit and exponential) at a
    ViT MLP's shape, every value of [-5, 5] at 1e-5 apart and beyond."""
    x = np.concatenate([np.linspace(-5.0, 5.0, 1_000_001),
                        np.array([-13.0, -11.6, -8.0, 8.0, 30.0, 0.0, -0.0])]).astype(np.float32)
    got = mx.nd.LeakyReLU(on_cpu_ref(x.reshape(-1, 1)), act_type="gelu").asnumpy().ravel()
    want = _gelu_in_double(x)
    inner = np.abs(x) <= 5.0
    np.testing.assert_allclose(got[inner], want[inner], rtol=2e-6, atol=4e-7)
    np.testing.assert_allclose(got[~inner], want[~inner], rtol=2e-5, atol=4e-7)


def test_gelu_and_softmax_fast_and_reference_kernels_agree_bit_for_bit() -> None:
    """The fast kernels run GELU and softmax's exp in FMA clones; the
    reference kernels run the same C on the baseline, where fmaf is libm's:
    one rounding each, so the same floats (whole vectors and remainders)."""
    rng = np.random.default_rng(5)
    activations = (rng.standard_normal((197, 1536)) * 3).astype(np.float32)
    scores = (rng.standard_normal((1, 6, 197, 197)) * 4).astype(np.float32)
    library = mx.get_library("cpu_ref")
    results = {}
    for which in ("fast", "reference"):
        assert library.configure(0, {"kernels": which}) == {"kernels": which}
        try:
            results[which] = (
                mx.nd.LeakyReLU(on_cpu_ref(activations), act_type="gelu").asnumpy(),
                mx.nd.softmax(on_cpu_ref(scores), axis=-1).asnumpy())
        finally:
            library.configure(0, {"kernels": "fast"})
    for fast, reference in zip(results["fast"], results["reference"]):
        np.testing.assert_array_equal(fast, reference)
