"""gluon.nn's basic layers: containers, Dense, Activation, Dropout,
BatchNorm, LayerNorm, Embedding, Flatten, Lambda. Each hybrid_forward calls
the registered operator MXNet's layer calls, with the same attributes."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ...errors import InvalidArgumentError
from ..block import Block, HybridBlock

__all__ = ["Sequential", "HybridSequential", "Dense", "Activation", "Dropout", "BatchNorm",
           "LayerNorm", "Embedding", "Flatten", "Lambda", "HybridLambda", "LeakyReLU"]


class _Chain:
    """What Sequential and HybridSequential share: children run in order,
    indexing (a slice is a new container of the same kind) and length."""

    _children: OrderedDict[str, Block]
    _prefix: str

    def _run_children(self, x: Any, args: tuple[Any, ...]) -> Any:
        for block in self._children.values():
            x = block(x, *args)
            args = ()
        return x

    def __getitem__(self, key: int | slice) -> Any:
        layers = list(self._children.values())[key]
        if isinstance(layers, list):
            net = type(self)(prefix=self._prefix)  # type: ignore[call-arg]
            with net.name_scope():  # type: ignore[attr-defined]
                net.add(*layers)  # type: ignore[attr-defined]
            return net
        return layers

    def __len__(self) -> int:
        return len(self._children)


class Sequential(_Chain, Block):
    """Runs its children in order."""

    def add(self, *blocks: Block) -> None:
        for block in blocks:
            self.register_child(block)

    def forward(self, x: Any, *args: Any) -> Any:
        return self._run_children(x, args)


class HybridSequential(_Chain, HybridBlock):
    """Runs its HybridBlock children in order."""

    def add(self, *blocks: HybridBlock) -> None:
        for block in blocks:
            if not isinstance(block, HybridBlock):
                raise InvalidArgumentError(f"HybridSequential.add: {type(block).__name__} is "
                                           "not a HybridBlock")
            self.register_child(block)

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:  # noqa: N803
        return self._run_children(x, args)


def _act(F: Any, x: Any, activation: str | None, name: str) -> Any:  # noqa: N803
    if activation is None:
        return x
    return F.Activation(x, act_type=activation, name=name)


class Dense(HybridBlock):
    """FullyConnected: weight (units, in_units), bias (units,)."""

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True,
                 flatten: bool = True, dtype: Any = "float32", weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_units: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self._units, self._in_units, self._flatten = units, in_units, flatten
            self.weight = self.params.get("weight", shape=(units, in_units),
                                          init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True)
            self.bias = (self.params.get("bias", shape=(units,), init=bias_initializer,
                                         dtype=dtype, allow_deferred_init=True)
                         if use_bias else None)
            self.act = activation

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:  # noqa: N803
        inputs = [x, weight] if bias is None else [x, weight, bias]
        out = F.FullyConnected(*inputs, num_hidden=self._units, flatten=self._flatten,
                               no_bias=bias is None, name=f"{self._prefix}fwd")
        return _act(F, out, self.act, f"{self._prefix}{self.act}_fwd" if self.act else "")

    def __repr__(self) -> str:
        return f"Dense({self._in_units or None} -> {self._units}, {self.act or 'linear'})"


class Activation(HybridBlock):
    def __init__(self, activation: str, **kwargs: Any) -> None:
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self) -> str:
        return self._act_type

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Activation(x, act_type=self._act_type, name=f"{self._prefix}fwd")


class LeakyReLU(HybridBlock):
    def __init__(self, alpha: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name=f"{self._prefix}fwd")


class Dropout(HybridBlock):
    """Identity at inference (acc-host runs inference only)."""

    def __init__(self, rate: float, axes: tuple[int, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rate, self._axes = rate, tuple(axes)

    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        if self._rate <= 0:
            return x
        return F.Dropout(x, p=self._rate, axes=self._axes, name=f"{self._prefix}fwd")


class BatchNorm(HybridBlock):
    """BatchNorm with the running statistics (use_global_stats at inference)."""

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5,
                 center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones",
                 running_mean_initializer: Any = "zeros",
                 running_variance_initializer: Any = "ones", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attrs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                       "fix_gamma": not scale, "use_global_stats": use_global_stats}
        self.in_channels = in_channels
        shape = (in_channels,)
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                     shape=shape, init=gamma_initializer,
                                     allow_deferred_init=True, differentiable=scale)
        self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                    shape=shape, init=beta_initializer,
                                    allow_deferred_init=True, differentiable=center)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=shape,
                                            init=running_mean_initializer,
                                            allow_deferred_init=True, differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null", shape=shape,
                                           init=running_variance_initializer,
                                           allow_deferred_init=True, differentiable=False)

    def _alias(self) -> str:
        return "batchnorm"

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any, running_mean: Any,  # noqa: N803
                       running_var: Any) -> Any:
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, name=f"{self._prefix}fwd",
                           **self._attrs)


class LayerNorm(HybridBlock):
    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._axis, self._epsilon = axis, epsilon
        self.gamma = self.params.get("gamma", shape=(in_channels,), init=gamma_initializer,
                                     allow_deferred_init=True, differentiable=scale)
        self.beta = self.params.get("beta", shape=(in_channels,), init=beta_initializer,
                                    allow_deferred_init=True, differentiable=center)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:  # noqa: N803
        return F.LayerNorm(x, gamma, beta, axis=self._axis, eps=self._epsilon,
                           name=f"{self._prefix}fwd")


class Embedding(HybridBlock):
    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, sparse_grad: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attrs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                      init=weight_initializer, dtype=dtype,
                                      allow_deferred_init=True)

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:  # noqa: N803
        return F.Embedding(x, weight, name=f"{self._prefix}fwd", **self._attrs)


class Flatten(HybridBlock):
    def hybrid_forward(self, F: Any, x: Any) -> Any:  # noqa: N803
        return F.Flatten(x, name=f"{self._prefix}fwd")


class Lambda(Block):
    """A block of a function of NDArrays."""

    def __init__(self, function: Any, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        self._function = function

    def forward(self, *args: Any) -> Any:
        return self._function(*args)


class HybridLambda(HybridBlock):
    """A block of a function (F, x, ...) -> output."""

    def __init__(self, function: Any, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        self._function = function

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:  # noqa: N803
        return self._function(F, x, *args)
