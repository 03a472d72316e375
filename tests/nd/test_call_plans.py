"""Planned imperative calls (acc_host.ndarray.invoke and its _CallPlan): a
signature called again runs the plan made at its first call. The results
are numpy's, on every engine and context; a signature change (shape,
dtype, attribute value or type, context) is a new plan; refusals are
raised on every call, never remembered as a plan; the allocation limit
and the operator version are read per call; an in-place operator is one
operation writing the array."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.abi import operator_versions
from acc_host.errors import AllocationTooLargeError, ShapeError, TensorError
from acc_host.ndarray import dispatch

CONTEXTS = ["cpu", "cpu_ref"]


def _ctx(name: str) -> mx.Context:
    return mx.cpu() if name == "cpu" else mx.cpu_ref(0)


def _values(seed: int, shape: tuple[int, ...] = (3, 4)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.usefixtures("engine_kind")
@pytest.mark.parametrize("where", CONTEXTS)
def test_repeated_calls_follow_their_inputs(where: str) -> None:
    ctx = _ctx(where)
    for seed in range(3):  # the first call plans, the others run the plan
        x, y = _values(seed), _values(seed + 10)
        a, b = mx.nd.array(x, ctx=ctx), mx.nd.array(y, ctx=ctx)
        np.testing.assert_allclose((a + b).asnumpy(), x + y, rtol=1e-6)
        np.testing.assert_allclose((a * 2).asnumpy(), x * 2, rtol=1e-6)
        np.testing.assert_allclose(mx.nd.relu(a).asnumpy(), np.maximum(x, 0))
        np.testing.assert_allclose(a.sum().asnumpy(), x.sum(), rtol=1e-5)
        np.testing.assert_allclose(a.sum(axis=1).asnumpy(), x.sum(axis=1), rtol=1e-5)
        np.testing.assert_allclose(mx.nd.dot(a, b.T).asnumpy(), x @ y.T, rtol=1e-5,
                                   atol=1e-6)
        assert (a + b).context == ctx


@pytest.mark.usefixtures("engine_kind")
def test_a_changed_signature_is_planned_anew() -> None:
    x = _values(1)
    a = mx.nd.array(x)
    np.testing.assert_allclose((a + 1).asnumpy(), x + 1)
    # another shape, dtype, attribute value and context: each its own result
    wide = _values(2, (2, 5))
    np.testing.assert_allclose((mx.nd.array(wide) + 1).asnumpy(), wide + 1)
    ints = mx.nd.array(np.arange(6).reshape(2, 3), dtype=np.int32)
    assert (ints + 1).dtype == np.int32
    np.testing.assert_array_equal((ints + 1).asnumpy(), np.arange(1, 7).reshape(2, 3))
    np.testing.assert_allclose((a + 2).asnumpy(), x + 2)
    np.testing.assert_allclose(a.sum(axis=0).asnumpy(), x.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(a.sum(axis=1).asnumpy(), x.sum(axis=1), rtol=1e-5)
    on_ref = mx.nd.array(x, ctx=mx.cpu_ref(0))
    assert (on_ref + 1).context == mx.cpu_ref(0)
    # the attribute's type is part of the signature: an int and a float
    # clip bound give the same values, each parsed from its own value
    np.testing.assert_allclose(mx.nd.clip(a, a_min=0, a_max=1).asnumpy(), np.clip(x, 0, 1))
    np.testing.assert_allclose(mx.nd.clip(a, a_min=0.0, a_max=1.0).asnumpy(),
                               np.clip(x, 0, 1))


@pytest.mark.usefixtures("engine_kind")
def test_refusals_are_raised_on_every_call() -> None:
    a, b = mx.nd.array(_values(3, (2, 3))), mx.nd.array(_values(4, (4, 5)))
    for _ in range(2):
        with pytest.raises(ShapeError):
            a + b
    with pytest.raises(TensorError, match="in-place"):
        a += mx.nd.array(_values(5, (3, 2, 3)))  # a result of another shape
    np.testing.assert_allclose(a.asnumpy(), _values(3, (2, 3)))


@pytest.mark.usefixtures("engine_kind")
@pytest.mark.parametrize("where", CONTEXTS)
def test_the_allocation_limit_is_read_per_call(where: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    a = mx.nd.array(_values(6, (16, 16)), ctx=_ctx(where))
    (a * 3).wait_to_read()  # planned
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", "512")
    with pytest.raises(AllocationTooLargeError):
        a * 3
    monkeypatch.delenv("MXNET_ACC_MAX_ALLOC_BYTES")
    np.testing.assert_allclose((a * 3).asnumpy(), _values(6, (16, 16)) * 3, rtol=1e-6)


@pytest.mark.usefixtures("engine_kind")
def test_an_operator_version_change_reaches_a_planned_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = mx.cpu_ref(0)
    x = _values(7)
    a = mx.nd.array(x, ctx=ctx)
    mx.nd.sigmoid(a).wait_to_read()  # planned, on the plugin
    start = dispatch.stats(ctx)
    monkeypatch.setitem(operator_versions.OP_VERSIONS, "sigmoid", 2)  # cpu_ref declines it
    result = mx.nd.sigmoid(a)
    np.testing.assert_allclose(result.asnumpy(), 1 / (1 + np.exp(-x)), rtol=1e-5)
    after = dispatch.stats(ctx)
    # declined (once per process: the refusal is cached), so the CPU ran it
    assert after["fallbacks"] - start["fallbacks"] == 1
    assert after["accelerator_calls"] == start["accelerator_calls"]


@pytest.mark.usefixtures("engine_kind")
@pytest.mark.parametrize("where", CONTEXTS)
def test_in_place_operators_write_the_array_once(where: str) -> None:
    ctx = _ctx(where)
    x = _values(8)
    a = mx.nd.array(x, ctx=ctx)
    a.wait_to_read()
    version = a.version
    a += 1
    a *= 2
    a -= mx.nd.array(x, ctx=ctx)
    a /= 4
    np.testing.assert_allclose(a.asnumpy(), ((x + 1) * 2 - x) / 4, rtol=1e-6)
    assert a.version == version + 4
    # broadcasting into the array, and into a view of it
    a += mx.nd.array(np.ones((1, 4), np.float32), ctx=ctx)
    np.testing.assert_allclose(a.asnumpy(), ((x + 1) * 2 - x) / 4 + 1, rtol=1e-6)
    if where == "cpu":  # views share host memory
        b = mx.nd.array(x)
        view = b[1:3]
        view += 10
        expected = x.copy()
        expected[1:3] += 10
        np.testing.assert_allclose(b.asnumpy(), expected, rtol=1e-6)


def test_a_plan_is_not_used_after_its_operator_is_registered_anew() -> None:
    """A plan holds the OpDef it was made for: after the registry's entry is
    replaced and put back (as tests and extensions do), calls of the same
    signature run the operator the registry holds, through either lookup
    (mx.nd.<op> and invoke)."""
    import dataclasses

    from acc_host.ops import registry

    original = registry.get("relu")

    def doubled(attrs: object, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return [np.maximum(inputs[0], 0) * 2]

    x = mx.nd.array(np.array([0.5, -1.0], np.float32))
    registry._REGISTRY["relu"] = dataclasses.replace(original, compute=doubled)
    try:
        np.testing.assert_array_equal(mx.nd.relu(x).asnumpy(), [1.0, 0.0])
        np.testing.assert_array_equal(mx.nd.relu(x).asnumpy(), [1.0, 0.0])  # planned
    finally:
        registry._REGISTRY["relu"] = original
    np.testing.assert_array_equal(mx.nd.relu(x).asnumpy(), [0.5, 0.0])
    np.testing.assert_array_equal(mx.nd.invoke("relu", [x], {})[0].asnumpy(), [0.5, 0.0])
