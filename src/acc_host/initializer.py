"""Parameter initializers (``mx.init``), following MXNet's rules for which
parameters get the initializer's pattern: names ending in "weight" do;
"bias", "beta", "moving_mean" start at zero; "gamma", "moving_var" at one."""

from __future__ import annotations

import abc
import math

import numpy as np

from .errors import InvalidArgumentError
from .ndarray import NDArray

__all__ = ["Initializer", "Uniform", "Normal", "Zero", "One", "Constant", "Xavier"]

_rng = np.random.default_rng()


class Initializer(abc.ABC):
    """Fills arrays by the role their name gives them."""

    def __call__(self, name: str, array: NDArray) -> None:
        if name.endswith(("bias", "beta", "moving_mean", "running_mean")):
            values = np.zeros(array.shape)
        elif name.endswith(("gamma", "moving_var", "running_var")):
            values = np.ones(array.shape)
        else:
            values = self._weight(array.shape)
        array[:] = values.astype(array.dtype)

    @abc.abstractmethod
    def _weight(self, shape: tuple[int, ...]) -> np.ndarray:
        """Values for a weight of this shape."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Uniform(Initializer):
    def __init__(self, scale: float = 0.07) -> None:
        self.scale = scale

    def _weight(self, shape: tuple[int, ...]) -> np.ndarray:
        return _rng.uniform(-self.scale, self.scale, shape)


class Normal(Initializer):
    def __init__(self, sigma: float = 0.01) -> None:
        self.sigma = sigma

    def _weight(self, shape: tuple[int, ...]) -> np.ndarray:
        return _rng.normal(0.0, self.sigma, shape)


class Constant(Initializer):
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, name: str, array: NDArray) -> None:
        array[:] = np.full(array.shape, self.value, array.dtype)

    def _weight(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.full(shape, self.value)


class Zero(Constant):
    def __init__(self) -> None:
        super().__init__(0.0)


class One(Constant):
    def __init__(self) -> None:
        super().__init__(1.0)


class Xavier(Initializer):
    """MXNet's Xavier: scale sqrt(magnitude / factor) with factor from the
    fan-in, fan-out or their average."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3) -> None:
        if rnd_type not in ("uniform", "gaussian") or factor_type not in ("avg", "in", "out"):
            raise InvalidArgumentError("Xavier: rnd_type uniform/gaussian, factor_type "
                                       "avg/in/out")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, magnitude

    def _weight(self, shape: tuple[int, ...]) -> np.ndarray:
        if len(shape) < 2:
            raise InvalidArgumentError(f"Xavier needs at least 2 dimensions, got {shape}")
        receptive = math.prod(shape[2:])
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            return _rng.uniform(-scale, scale, shape)
        return _rng.normal(0, scale, shape)
