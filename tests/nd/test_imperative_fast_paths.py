"""The short paths of small imperative calls: the benchmark's operators
(acc_host.ndarray.call_plan and dispatch, benchmarks/public_path.py) give
numpy's results on every call under each engine and context; results made
from pooled device buffers never share memory with a live result; an
in-place operator on the CPU writes the array's own elements (a view taken
before sees the change); checked mode still takes the guarded path."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx

CONTEXTS = ["cpu", "cpu_ref"]


def _ctx(name: str) -> mx.Context:
    return mx.cpu() if name == "cpu" else mx.cpu_ref(0)


def _values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((8, 8)).astype(np.float32)


@pytest.mark.usefixtures("engine_kind")
@pytest.mark.parametrize("where", CONTEXTS)
def test_the_benchmark_operators_on_every_call(where: str) -> None:
    ctx = _ctx(where)
    kept = []
    for seed in range(4):  # planned from the second call on
        x, y = _values(seed), _values(seed + 100)
        a, b = mx.nd.array(x, ctx=ctx), mx.nd.array(y, ctx=ctx)
        results = [(a + b, x + y), (mx.nd.relu(a), np.maximum(x, 0)), (a * 2, x * 2),
                   (mx.nd.dot(a, b), x @ y), (a.sum(), np.array([x.sum()])), (a[1:3], x[1:3])]
        for result, expected in results:
            result.wait_to_read()
            assert result.context == ctx
            np.testing.assert_allclose(result.asnumpy(), expected, rtol=1e-5, atol=1e-5)
        version = a.version
        a += 1
        a.wait_to_read()
        assert a.version == version + 1
        np.testing.assert_allclose(a.asnumpy(), x + 1, rtol=1e-6)
        kept.append((results, x, y))
    for results, x, y in kept:  # live results keep their own memory
        np.testing.assert_allclose(results[0][0].asnumpy(), x + y, rtol=1e-6)
        np.testing.assert_allclose(results[2][0].asnumpy(), x * 2, rtol=1e-6)


@pytest.mark.usefixtures("engine_kind")
def test_pooled_results_never_alias_a_live_one() -> None:
    ctx = mx.cpu_ref(0)
    x = _values(7)
    a = mx.nd.array(x, ctx=ctx)
    results = []
    for step in range(6):
        dropped = a + step  # collected at once: its buffer goes to the pool
        dropped.wait_to_read()
        del dropped
        results.append(a * float(step))  # takes the pooled buffer
    for step, result in enumerate(results):
        np.testing.assert_allclose(result.asnumpy(), x * step, rtol=1e-6)


@pytest.mark.usefixtures("engine_kind")
def test_an_in_place_operator_on_the_cpu_writes_the_array() -> None:
    x = _values(3)
    a = mx.nd.array(x)
    view = a[2:5]
    before = view.asnumpy()
    for _ in range(2):  # planned at the first call
        a += 1
        a *= 2
    expected = ((x + 1) * 2 + 1) * 2
    np.testing.assert_allclose(a.asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(view.asnumpy(), expected[2:5], rtol=1e-6)
    assert not np.allclose(view.asnumpy(), before)
    b = mx.nd.array(x)
    b += b  # the input is the array written
    np.testing.assert_allclose(b.asnumpy(), x + x, rtol=1e-6)
    ints = mx.nd.array(np.arange(6).reshape(2, 3), dtype=np.int32)
    ints += 250
    ints *= 3
    np.testing.assert_array_equal(ints.asnumpy(), (np.arange(6).reshape(2, 3) + 250) * 3)


@pytest.mark.usefixtures("engine_kind")
def test_checked_mode_takes_the_guarded_path(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = mx.cpu_ref(0)
    x, y = _values(11), _values(12)
    a, b = mx.nd.array(x, ctx=ctx), mx.nd.array(y, ctx=ctx)
    (a + b).wait_to_read()  # planned, unchecked
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    for step in range(2):
        result = a + b
        np.testing.assert_allclose(result.asnumpy(), x + step + y, rtol=1e-6)
        a += 1
    monkeypatch.delenv("MXNET_ACC_CHECK_OUTPUTS")
    np.testing.assert_allclose(a.asnumpy(), x + 2, rtol=1e-6)
