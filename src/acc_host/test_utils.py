"""Helpers in the spirit of ``mxnet.test_utils``."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .context import Context, current_context
from .errors import ContextError

__all__ = ["list_acc", "list_gpus", "default_context", "set_default_context", "default_rtols",
           "default_atols", "effective_dtype", "get_tolerance", "get_tols", "get_rtol",
           "get_atol", "same", "checkShapes", "almost_equal", "assert_almost_equal",
           "assert_allclose", "assert_exception"]


def list_acc(ctx: Context) -> list[int]:
    """Device ids of the accelerator of ctx: [0, ..., getNumAcc() - 1], as
    ``mx.test_utils.list_gpus()`` lists GPUs."""
    if not isinstance(ctx, Context) or ctx.library is None:
        raise ContextError(f"list_acc() needs an accelerator context, got {ctx!r}")
    return list(range(ctx.library.num_devices))


def list_gpus() -> list[int]:
    """[]: acc-host drives no GPUs (see list_acc)."""
    return []


_default_context: list[Context] = []


def default_context() -> Context:
    """The context set_default_context() gave, else the current context."""
    return _default_context[-1] if _default_context else current_context()


def set_default_context(ctx: Context) -> None:
    _default_context[:] = [ctx]


# MXNet 1.9's default tolerances for comparisons, by dtype
_RTOLS = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-5}
_ATOLS = {"float16": 1e-1, "float32": 1e-3, "float64": 1e-20}
_EXACT = ("bool", "int8", "uint8", "int32", "uint32", "int64", "uint64")


def default_rtols() -> dict[np.dtype, float]:
    return {np.dtype(name): value for name, value in
            [*_RTOLS.items(), *((name, 0) for name in _EXACT)]}


def default_atols() -> dict[np.dtype, float]:
    return {np.dtype(name): value for name, value in
            [*_ATOLS.items(), *((name, 0) for name in _EXACT)]}


def effective_dtype(dat: Any) -> np.dtype:
    return np.dtype(dat.dtype)


def get_tolerance(dat: Any, tol: Any, default_tol: Mapping[np.dtype, float]) -> float:
    if isinstance(tol, numbers.Number):
        return float(tol)  # type: ignore[arg-type]
    dtype = effective_dtype(dat)
    return dict(tol or {}).get(dtype, default_tol[dtype])


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """The larger of the two arrays' tolerances (given, or by dtype)."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def _host(value: Any) -> np.ndarray:
    return value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)


def same(a: Any, b: Any) -> bool:
    return bool(np.array_equal(_host(a), _host(b)))


def checkShapes(a: Any, b: Any) -> None:  # noqa: N802 (MXNet's name)
    if tuple(a.shape) != tuple(b.shape):
        raise AssertionError(f"a.shape = {tuple(a.shape)} and b.shape = {tuple(b.shape)} "
                             "are not equal")


def almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None, equal_nan: bool = False,
                 use_broadcast: bool = True) -> bool:
    """Whether |a - b| <= atol + rtol * |b| everywhere (tolerances by dtype
    when not given)."""
    rtol, atol = get_tols(a, b, rtol, atol)
    left, right = _host(a), _host(b)
    if not use_broadcast and left.shape != right.shape:
        return False
    return bool(np.allclose(left, right, rtol=rtol, atol=atol, equal_nan=equal_nan))


def assert_almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                        names: tuple[str, str] = ("a", "b"), equal_nan: bool = False,
                        use_broadcast: bool = True, mismatches: tuple[int, int] = (10, 10)
                        ) -> None:
    """Raises AssertionError, naming the worst element, unless a and b
    (NDArrays, numpy arrays or numbers) are almost equal."""
    rtol, atol = get_tols(a, b, rtol, atol)
    left, right = _host(a), _host(b)
    if not use_broadcast:
        checkShapes(left, right)
    if np.allclose(left, right, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    left64, right64 = np.broadcast_arrays(left.astype(np.float64), right.astype(np.float64))
    with np.errstate(invalid="ignore"):
        excess = np.abs(left64 - right64) - (atol + rtol * np.abs(right64))
    excess = np.where(np.isnan(excess), np.inf, excess)
    bad = np.argwhere(excess > 0)
    worst = tuple(int(k) for k in np.unravel_index(np.argmax(excess), excess.shape))
    shown = ", ".join(f"{tuple(int(k) for k in index)}: {left64[tuple(index)]} vs "
                      f"{right64[tuple(index)]}" for index in bad[:mismatches[0]])
    raise AssertionError(
        f"{names[0]} and {names[1]} differ at {len(bad)} of {excess.size} positions "
        f"(rtol={rtol}, atol={atol}); the worst at {worst}: {names[0]}={left64[worst]}, "
        f"{names[1]}={right64[worst]}; {shown}")


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0,
                    equal_nan: bool = True) -> None:
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_exception(f: Callable[..., Any], exception_type: type[BaseException], *args: Any,
                     **kwargs: Any) -> None:
    """Raises AssertionError unless f(*args, **kwargs) raises exception_type."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise "
                         f"{exception_type.__name__}")



