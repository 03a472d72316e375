"""Random numbers (``mx.random``, ``mx.nd.random``, ``mx.nd.random_*``).

Samples are drawn on the host by one numpy generator per context and then
placed on the context (an accelerator's array is copied to its device).
``seed(s)`` reseeds every context's generator (``seed(s, ctx)`` only ctx's)
from (s, device type, device id), so after a seed the same calls give the
same numbers, and two devices give different but reproducible streams.
The streams are not MXNet's (its generators are other algorithms); the
distributions and their parameters are.
"""

from __future__ import annotations

import numbers
import threading
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random import PCG64, Generator, default_rng

from .context import Context, current_context
from .errors import InvalidArgumentError
from .ndarray import NDArray, array

__all__ = ["seed", "uniform", "normal", "randn", "randint", "exponential", "gamma", "poisson",
           "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle",
           "uniform_like", "normal_like", "exponential_like", "gamma_like", "poisson_like",
           "negative_binomial_like", "generalized_negative_binomial_like"]

_lock = threading.Lock()
_generators: dict[tuple[str, int], Generator] = {}
_global_seed: int | None = None


def _stream(seed_state: int, ctx: Context) -> Generator:
    key = [seed_state, zlib.crc32(ctx.device_type.encode()), ctx.device_id]
    return Generator(PCG64(key))


def seed(seed_state: int, ctx: Context | str = "all") -> None:
    """Seeds the generator of ctx, or of every context ("all")."""
    global _global_seed
    if isinstance(seed_state, bool) or not isinstance(seed_state, numbers.Integral):
        raise InvalidArgumentError(f"seed must be an integer, got {seed_state!r}")
    value = int(seed_state)
    if value < 0:
        raise InvalidArgumentError(f"seed must be non-negative, got {value}")
    with _lock:
        if ctx == "all":
            _global_seed = value
            _generators.clear()
        elif isinstance(ctx, Context):
            _generators[(ctx.device_type, ctx.device_id)] = _stream(value, ctx)
        else:
            raise InvalidArgumentError(f"seed(ctx=...) takes a Context or 'all', got {ctx!r}")


def _generator(ctx: Context) -> Generator:
    key = (ctx.device_type, ctx.device_id)
    generator = _generators.get(key)
    if generator is None:
        generator = (default_rng() if _global_seed is None
                     else _stream(_global_seed, ctx))
        _generators[key] = generator
    return generator


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        return (1,)
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    result = tuple(int(extent) for extent in shape)
    if any(extent < 0 for extent in result):
        raise InvalidArgumentError(f"negative extent in shape {result}")
    return result or (1,)


def _dtype(dtype: Any) -> np.dtype:
    return np.dtype("float32" if dtype is None else dtype)


def _sample(draw: Any, shape: Any, dtype: Any, ctx: Context | None, out: Any) -> Any:
    target_ctx = out.context if out is not None else ctx or current_context()
    size = tuple(out.shape) if out is not None else _shape(shape)
    with _lock:
        values = np.asarray(draw(_generator(target_ctx), size))
    values = values.astype(out.dtype if out is not None else _dtype(dtype))
    if out is not None:
        if not isinstance(out, NDArray):
            raise InvalidArgumentError(f"out must be an NDArray, got {type(out).__name__}")
        out[:] = values
        return out
    return array(values, ctx=target_ctx, dtype=values.dtype)


def _parameter(value: Any, name: str) -> Any:
    """A scalar parameter, or an NDArray of parameters (one sample shape per entry)."""
    if isinstance(value, NDArray):
        return value.asnumpy().astype(np.float64)
    if isinstance(value, numbers.Real):
        return float(value)
    raise InvalidArgumentError(f"{name} must be a number or an NDArray, got {value!r}")


def _by_parameters(params: Sequence[Any], shape: Any) -> Any:
    """MXNet's rule for array parameters: the result has shape
    params.shape + shape."""
    arrays = [p for p in params if isinstance(p, np.ndarray)]
    if not arrays:
        return shape
    base = arrays[0].shape
    if any(p.shape != base for p in arrays):
        raise InvalidArgumentError("random: parameter arrays have different shapes")
    extra = () if shape is None else _shape(shape)
    return base + extra


def _broadcast(value: Any, size: tuple[int, ...]) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    return value.reshape(value.shape + (1,) * (len(size) - value.ndim))


def uniform(low: Any = 0.0, high: Any = 1.0, shape: Any = None, dtype: Any = None,
            ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples of U[low, high)."""
    low, high = _parameter(low, "low"), _parameter(high, "high")
    return _sample(lambda g, size: g.uniform(_broadcast(low, size), _broadcast(high, size),
                                             size), _by_parameters([low, high], shape), dtype,
                   ctx, out)


def normal(loc: Any = 0.0, scale: Any = 1.0, shape: Any = None, dtype: Any = None,
           ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples of N(loc, scale^2)."""
    loc, scale = _parameter(loc, "loc"), _parameter(scale, "scale")
    if np.any(np.asarray(scale) < 0):
        raise InvalidArgumentError(f"normal: scale must be non-negative, got {scale}")
    return _sample(lambda g, size: g.normal(_broadcast(loc, size), _broadcast(scale, size),
                                            size), _by_parameters([loc, scale], shape), dtype,
                   ctx, out)


def randn(*shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = None,
          ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """normal() with the shape given as positional extents."""
    return normal(loc, scale, shape, dtype, ctx, out)


def randint(low: int, high: int, shape: Any = None, dtype: Any = None,
            ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Integers in [low, high), int32 by default."""
    if high <= low:
        raise InvalidArgumentError(f"randint: high ({high}) must exceed low ({low})")
    return _sample(lambda g, size: g.integers(low, high, size), shape,
                   dtype or "int32", ctx, out)


def exponential(scale: Any = 1.0, shape: Any = None, dtype: Any = None,
                ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples of the exponential distribution of mean scale."""
    scale = _parameter(scale, "scale")
    return _sample(lambda g, size: g.exponential(_broadcast(scale, size), size),
                   _by_parameters([scale], shape), dtype, ctx, out)


def gamma(alpha: Any = 1.0, beta: Any = 1.0, shape: Any = None, dtype: Any = None,
          ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Samples of Gamma(shape alpha, scale beta)."""
    alpha, beta = _parameter(alpha, "alpha"), _parameter(beta, "beta")
    return _sample(lambda g, size: g.gamma(_broadcast(alpha, size), _broadcast(beta, size),
                                           size), _by_parameters([alpha, beta], shape), dtype,
                   ctx, out)


def poisson(lam: Any = 1.0, shape: Any = None, dtype: Any = None,
            ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Poisson samples (as float32 by default, as MXNet)."""
    lam = _parameter(lam, "lam")
    return _sample(lambda g, size: g.poisson(_broadcast(lam, size), size),
                   _by_parameters([lam], shape), dtype, ctx, out)


def negative_binomial(k: Any = 1, p: Any = 1.0, shape: Any = None, dtype: Any = None,
                      ctx: Context | None = None, out: Any = None, **kwargs: Any) -> Any:
    """Failures before the k-th success with success probability p."""
    k, p = _parameter(k, "k"), _parameter(p, "p")
    return _sample(lambda g, size: g.negative_binomial(_broadcast(k, size),
                                                       _broadcast(p, size), size),
                   _by_parameters([k, p], shape), dtype, ctx, out)


def generalized_negative_binomial(mu: Any = 1.0, alpha: Any = 1.0, shape: Any = None,
                                  dtype: Any = None, ctx: Context | None = None, out: Any = None,
                                  **kwargs: Any) -> Any:
    """Gamma-Poisson mixture of mean mu and dispersion alpha (Poisson for alpha 0)."""
    mu, alpha = _parameter(mu, "mu"), _parameter(alpha, "alpha")

    def draw(g: Generator, size: tuple[int, ...]) -> np.ndarray:
        mean = np.broadcast_to(_broadcast(mu, size), size)
        spread = np.broadcast_to(_broadcast(alpha, size), size)
        mixed = spread > 0
        safe = np.where(mixed, spread, 1.0)
        rate = np.where(mixed, g.gamma(1.0 / safe, mean * safe, size), mean)
        return g.poisson(rate)

    return _sample(draw, _by_parameters([mu, alpha], shape), dtype, ctx, out)


def multinomial(data: Any, shape: Any = None, get_prob: bool = False, out: Any = None,
                dtype: str = "int32", **kwargs: Any) -> Any:
    """Category indices drawn from the probabilities in data's last axis
    (shape data.shape[:-1] + shape)."""
    if not isinstance(data, NDArray):
        raise InvalidArgumentError("multinomial: data must be an NDArray of probabilities")
    probabilities = data.asnumpy().astype(np.float64)
    extra = () if shape is None else _shape(shape)
    rows = probabilities.reshape(-1, probabilities.shape[-1])
    count = int(np.prod(extra, dtype=np.int64)) if extra else 1
    with _lock:
        generator = _generator(data.context)
        cumulative = np.cumsum(rows, axis=1)
        draws = generator.random((rows.shape[0], count)) * cumulative[:, -1:]
    picks = np.stack([np.searchsorted(c, d, side="right") for c, d in zip(cumulative, draws)])
    picks = np.minimum(picks, rows.shape[1] - 1)
    result_shape = probabilities.shape[:-1] + extra
    samples = array(picks.reshape(result_shape).astype(dtype), ctx=data.context)
    if not get_prob:
        return samples
    chosen = np.take_along_axis(rows, picks, axis=1)
    with np.errstate(divide="ignore"):
        logs = np.log(chosen).reshape(result_shape).astype(data.dtype)
    return [samples, array(logs, ctx=data.context)]


def shuffle(data: Any, **kwargs: Any) -> Any:
    """A copy of data with its first axis shuffled."""
    values = data.asnumpy()
    with _lock:
        order = _generator(data.context).permutation(values.shape[0])
    return array(values[order], ctx=data.context)


def _like(sampler: Any) -> Any:
    def sample_like(data: Any, *args: Any, **kwargs: Any) -> Any:
        return sampler(*args, shape=data.shape, dtype=data.dtype, ctx=data.context, **kwargs)

    sample_like.__name__ = f"{sampler.__name__}_like"
    sample_like.__doc__ = f"{sampler.__name__}() with data's shape, dtype and context."
    return sample_like


uniform_like = _like(uniform)
normal_like = _like(normal)
exponential_like = _like(exponential)
gamma_like = _like(gamma)
poisson_like = _like(poisson)
negative_binomial_like = _like(negative_binomial)
generalized_negative_binomial_like = _like(generalized_negative_binomial)

#: MXNet's legacy operator names in mx.nd (mx.nd.random_normal, ...)
LEGACY_NAMES = {"random_uniform": uniform, "random_normal": normal, "random_randint": randint,
                "random_exponential": exponential, "random_gamma": gamma,
                "random_poisson": poisson, "random_negative_binomial": negative_binomial,
                "random_generalized_negative_binomial": generalized_negative_binomial,
                "sample_multinomial": multinomial, "shuffle": shuffle,
                "uniform": uniform, "normal": normal}
