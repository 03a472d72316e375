"""Every registered operator, called imperatively with wrong input, raises
an acc_host error (issue 31; docs/robustness.md, `ndarray-op-any-bad-input`).

For each operator of the registry (aliases once), hypothesis draws inputs
of random ranks, extents (0 included), dtypes (every one NDArray holds) and
counts, and attribute
values both plausible (small integers, tuples, the operator's own choices)
and absurd, and calls ``mx.nd.<op>(...)``. Success is fine (many operators
take odd input); an exception must be an ``AccHostError`` whose message,
for operator errors, names the operator. Each example is bounded in time.

The imperative dispatch turns an exception that is not an acc_host error
into an ``OperatorInternalError`` (its safety net); an operator that needs
it lacks a validation, so that too fails here, naming the operator and the
original exception.

``ACC_HOST_OPERATOR_EXAMPLES`` sets the examples per operator: 12 by
default (about half a minute for all of them), 60 in a full run
(``ACC_HOST_FULL_TESTS=1``, as CI runs; about 12,000 calls). The examples
are derandomized, so a run is repeatable and CI does not fail on a draw.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.engines import using_engine

import acc_host as mx
from acc_host.errors import AccHostError, OperatorError, OperatorInternalError
from acc_host.ops import registry

EXAMPLES = int(os.environ.get("ACC_HOST_OPERATOR_EXAMPLES",
                              "60" if os.environ.get("ACC_HOST_FULL_TESTS") == "1" else "12"))
TIME_BOUND_S = 10.0  # per example
OPS = {op.name: op for op in registry.all_ops().values()}
DTYPES = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8")


class ExampleTimeout(BaseException):
    """An example ran past TIME_BOUND_S (BaseException: no operator may
    catch it)."""


@pytest.fixture(scope="module", autouse=True)
def naive_engine() -> Iterator[None]:
    """Errors are raised by the call itself, and a hang is in this thread,
    where the alarm interrupts it."""
    with using_engine("NaiveEngine"):
        yield


def _choices(param: Any) -> tuple[str, ...]:
    """The values a choice() parameter allows, read from its refusal."""
    try:
        param.parser("\x00not-a-choice")
    except ValueError as error:
        match = re.search(r"expected one of (.*), got", str(error))
        if match:
            return tuple(match.group(1).split(", "))
    except Exception:  # noqa: BLE001  (not a choice parameter)
        pass
    return ()


_small_int = st.integers(min_value=-3, max_value=6)
_tuple = st.lists(st.one_of(_small_int, st.none()), max_size=5).map(tuple)
_float = st.sampled_from([0.0, -1.0, 0.5, 2.0, 1e-5, 1e30, float("nan"), float("inf")])
_absurd = st.sampled_from(["", "None", "abc", "(", "((1, 2), 3)", "1e400", "-0", "True",
                           "[1, 'a']", "float33", "(0, 0)", "()", "1.5"])


def _attribute_value(param: Any) -> st.SearchStrategy[Any]:
    plausible = [_small_int, _tuple, _float, st.booleans(), st.sampled_from(DTYPES)]
    choices = _choices(param)
    if choices:
        plausible.insert(0, st.sampled_from(choices))
    return st.one_of(*plausible, _absurd)


@st.composite
def _attributes(draw: Any, op: registry.OpDef) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for param in op.params:
        required = param.default is registry.REQUIRED
        if required or draw(st.integers(0, 2)) == 0:
            if required and param.name in ("num_args", "num_outputs") or draw(st.booleans()) \
                    and param.name in ("num_args", "num_outputs"):
                attrs[param.name] = draw(st.integers(1, 4))
            else:
                attrs[param.name] = draw(_attribute_value(param))
    return attrs


_shape = st.lists(st.integers(min_value=0, max_value=4), max_size=5).map(tuple)


@st.composite
def _arrays(draw: Any, count: int) -> list[mx.nd.NDArray]:
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    arrays = []
    for _ in range(count):
        shape = draw(_shape)
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        if dtype.kind in "iu":
            low = 0 if dtype.kind == "u" else -3
            values = rng.integers(low, 5, shape).astype(dtype)
        else:
            values = (rng.standard_normal(shape) * 3).astype(dtype)
        arrays.append(mx.nd.array(values, dtype=dtype))
    return arrays


def _expected_inputs(op: registry.OpDef, attrs: dict[str, Any]) -> int:
    try:
        return len(op.input_names(op.parse(attrs)))
    except AccHostError:
        return len(op.arguments) if not callable(op.arguments) else 1


@st.composite
def _calls(draw: Any, op: registry.OpDef) -> tuple[list[mx.nd.NDArray], dict[str, Any]]:
    attrs = draw(_attributes(op))
    count = _expected_inputs(op, attrs)
    if draw(st.integers(0, 9)) == 0:  # sometimes a wrong number of inputs
        count = max(0, count + draw(st.sampled_from([-1, 1])))
    return draw(_arrays(count)), attrs


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise ExampleTimeout(f"an example ran past {TIME_BOUND_S} s")


def _call(name: str, arrays: list[mx.nd.NDArray], attrs: dict[str, Any]) -> None:
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
    try:
        with np.errstate(all="ignore"):
            result = getattr(mx.nd, name)(*arrays, **attrs)
            for output in result if isinstance(result, list) else [result]:
                output.asnumpy()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", sorted(OPS))
def test_operator_raises_only_acc_host_errors(name: str) -> None:
    op = OPS[name]

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(call=_calls(op))
    def check(call: tuple[list[mx.nd.NDArray], dict[str, Any]]) -> None:
        arrays, attrs = call
        described = (f"{name}({', '.join(f'{a.shape} {a.dtype}' for a in arrays)}, "
                     f"{attrs})")
        try:
            _call(name, arrays, attrs)
        except OperatorInternalError as error:
            pytest.fail(f"{described}: needed the dispatch's safety net (no validation "
                        f"caught it): {error.__cause__!r}")
        except AccHostError as error:
            if isinstance(error, OperatorError):
                assert name in str(error), f"{described}: {error} does not name {name}"
        except ExampleTimeout:
            pytest.fail(f"{described}: ran past {TIME_BOUND_S} s")
        except Exception as error:  # noqa: BLE001  (the point of the test)
            pytest.fail(f"{described}: raised {type(error).__name__}: {error}")

    check()


def test_every_operator_is_covered() -> None:
    """The parametrization is the registry's, aliases aside."""
    assert set(OPS) == {op.name for op in registry.all_ops().values()}
    assert len(OPS) >= 200
