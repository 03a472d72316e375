"""cpu_ref's softmax, LayerNorm, element-wise activations and transposes
shared among threads (ranges of rows, of 16 values, or of the first axis
longer than 1): the same values bit for bit on
1, 2 and 3 threads, and the definition's values (numpy, float64) within the
kernels' tolerances, at a transformer's shapes and at shapes whose rows or
values do not divide evenly among the threads."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from scipy.special import erf

import acc_host as mx


@pytest.fixture
def threads() -> Iterator[Callable[[int], None]]:
    yield lambda n: mx.cpu_ref(0).configure(num_threads=n)
    mx.cpu_ref(0).configure(num_threads=1)


def on_cpu_ref(values: np.ndarray) -> mx.nd.NDArray:
    return mx.nd.array(values, mx.cpu_ref(0))


def by_thread_count(set_threads: Callable[[int], None],
                    run: Callable[[], np.ndarray]) -> np.ndarray:
    """run()'s result, checked equal bit for bit on 1, 2 and 3 threads."""
    results = []
    for n in (1, 2, 3):
        set_threads(n)
        results.append(run())
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])
    return results[0]


SHAPES = [(1, 6, 197, 197), (2, 12, 128, 128), (3, 37, 51)]


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_rows_on_threads(shape: tuple[int, ...],
                                 threads: Callable[[int], None]) -> None:
    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(np.float32)
    got = by_thread_count(threads, lambda: mx.nd.softmax(on_cpu_ref(x), axis=-1).asnumpy())
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-37)


@pytest.mark.parametrize("shape", [(1, 197, 384), (2, 128, 768), (5, 13, 33)])
def test_layer_norm_rows_on_threads(shape: tuple[int, ...],
                                    threads: Callable[[int], None]) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    gamma = rng.standard_normal(shape[-1]).astype(np.float32)
    beta = rng.standard_normal(shape[-1]).astype(np.float32)

    def run() -> np.ndarray:
        return mx.nd.LayerNorm(on_cpu_ref(x), on_cpu_ref(gamma), on_cpu_ref(beta), axis=-1,
                               eps=1e-5).asnumpy()

    got = by_thread_count(threads, run)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(x64.var(axis=-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("count", [197 * 1536, 128 * 3072 + 7, 40])
def test_gelu_on_threads(count: int, threads: Callable[[int], None]) -> None:
    x = (np.random.default_rng(2).standard_normal(count) * 4).astype(np.float32)
    got = by_thread_count(threads,
                          lambda: mx.nd.LeakyReLU(on_cpu_ref(x), act_type="gelu").asnumpy())
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got, 0.5 * x64 * (1 + erf(x64 / np.sqrt(2))), rtol=2e-5,
                               atol=1e-6)


@pytest.mark.parametrize("count", [197 * 1536 + 3, 33])
def test_activation_on_threads(count: int, threads: Callable[[int], None]) -> None:
    x = (np.random.default_rng(3).standard_normal(count) * 4).astype(np.float32)
    got = by_thread_count(threads,
                          lambda: mx.nd.Activation(on_cpu_ref(x), act_type="tanh").asnumpy())
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


# A ViT's attention transposes: (1, 197, 1, 3, 384) -> (3, 197, 1, 1, 384) and
# the keys' (1, 6, 197, 64) -> (1, 6, 64, 197); and an odd 3-D one.
@pytest.mark.parametrize("shape, axes", [((1, 197, 1, 3, 384), (3, 1, 0, 2, 4)),
                                         ((1, 6, 197, 64), (0, 1, 3, 2)),
                                         ((5, 7, 300), (2, 0, 1))])
def test_transpose_on_threads(shape: tuple[int, ...], axes: tuple[int, ...],
                              threads: Callable[[int], None]) -> None:
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    want = np.transpose(x, axes)
    got = by_thread_count(threads, lambda: mx.nd.transpose(on_cpu_ref(x), axes=axes).asnumpy())
    np.testing.assert_array_equal(got, want)
    got_onnx = by_thread_count(
        threads, lambda: mx.nd._onnx_transpose(on_cpu_ref(x), perm=axes).asnumpy())
    np.testing.assert_array_equal(got_onnx, want)
