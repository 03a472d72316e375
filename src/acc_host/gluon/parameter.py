"""Gluon parameters: a named array per context, with deferred shapes.

A Parameter holds one NDArray per context it was initialized or loaded on.
Its shape may have unknown (0) extents until the first forward infers them
(``allow_deferred_init``), as in MXNet. A ParameterDict maps full names
(prefix + name) to Parameters and reads and writes MXNet's .params files.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import initializer as _init
from .. import ndarray as nd
from .. import symbol
from ..context import Context, current_context
from ..errors import GraphError, InvalidArgumentError, ShapeError

__all__ = ["Parameter", "Constant", "ParameterDict", "DeferredInitializationError"]


class DeferredInitializationError(GraphError):
    """A parameter's data was read before its shape was known."""


def _contexts(ctx: Context | Sequence[Context] | None) -> list[Context]:
    if ctx is None:
        return [current_context()]
    return list(ctx) if isinstance(ctx, (list, tuple)) else [ctx]  # type: ignore[list-item]


_INITIALIZERS = {"zeros": _init.Zero, "ones": _init.One}


def _initializer(init: Any) -> Any:
    if isinstance(init, str):
        if init.lower() not in _INITIALIZERS:
            raise InvalidArgumentError(f"unknown initializer {init!r}")
        return _INITIALIZERS[init.lower()]()
    return init


class Parameter:
    """A block's weight, bias or running statistic."""

    def __init__(self, name: str, grad_req: str = "write", shape: Any = None,
                 dtype: Any = "float32", lr_mult: float = 1.0, wd_mult: float = 1.0,
                 init: Any = None, allow_deferred_init: bool = False,
                 differentiable: bool = True, stype: str = "default",
                 grad_stype: str = "default") -> None:
        self.name = name
        self._shape: tuple[int, ...] | None = None
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.init = init
        self.grad_req = grad_req if differentiable else "null"
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self.allow_deferred_init = allow_deferred_init
        self._data: OrderedDict[Context, nd.NDArray] = OrderedDict()
        self._deferred: tuple[list[Context], Any] | None = None

    def __repr__(self) -> str:
        return f"Parameter {self.name} (shape={self.shape}, dtype={self.dtype.name})"

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self._shape

    @shape.setter
    def shape(self, new: Any) -> None:
        if new is None:
            self._shape = None
            return
        new = (int(new),) if isinstance(new, (int, np.integer)) else tuple(int(n) for n in new)
        if self._shape is not None:
            fits = len(new) == len(self._shape) and all(
                old in (0, n) for old, n in zip(self._shape, new))
            if not fits:
                raise ShapeError(f"parameter {self.name!r}: shape {new} does not fit the "
                                 f"declared {self._shape}")
        self._shape = new

    @property
    def _known(self) -> bool:
        return self._shape is not None and all(n > 0 for n in self._shape)

    def initialize(self, init: Any = None, ctx: Any = None, default_init: Any = None,
                   force_reinit: bool = False) -> None:
        """Fills the parameter on each context: its own init, else init,
        else default_init (Uniform(0.07) as MXNet's); deferred when the shape
        is not known yet."""
        if self._data and not force_reinit:
            return
        contexts = _contexts(ctx)
        chosen = _initializer(self.init) or _initializer(init) or default_init or \
            _init.Uniform(0.07)
        if not self._known:
            if not self.allow_deferred_init:
                raise DeferredInitializationError(
                    f"parameter {self.name!r} has the unknown shape {self.shape}")
            self._deferred = (contexts, chosen)
            return
        self._fill(contexts, chosen)

    def _fill(self, contexts: list[Context], chosen: Any) -> None:
        assert self._shape is not None
        first = nd.zeros(self._shape, ctx=contexts[0], dtype=self.dtype)
        chosen(self.name, first)
        self._data = OrderedDict((ctx, first if k == 0 else first.copyto(ctx))
                                 for k, ctx in enumerate(contexts))
        self._deferred = None

    def _finish_deferred_init(self) -> None:
        if self._deferred is not None and self._known:
            self._fill(*self._deferred)

    def _check_initialized(self) -> None:
        if not self._data:
            if self._deferred is not None:
                raise DeferredInitializationError(
                    f"parameter {self.name!r} has not been initialized yet: its shape "
                    f"{self.shape} is known after the first forward")
            raise GraphError(f"parameter {self.name!r} has not been initialized; call "
                             "initialize() or load_parameters() first")

    def data(self, ctx: Context | None = None) -> nd.NDArray:
        """The parameter's array on ctx (copied there from another context
        the first time it is asked for there)."""
        self._check_initialized()
        if ctx is None:
            ctx = next(iter(self._data)) if len(self._data) == 1 else current_context()
        if ctx not in self._data:
            self._data[ctx] = next(iter(self._data.values())).copyto(ctx)
        return self._data[ctx]

    def list_data(self) -> list[nd.NDArray]:
        self._check_initialized()
        return list(self._data.values())

    def list_ctx(self) -> list[Context]:
        if not self._data and self._deferred is not None:
            return list(self._deferred[0])
        return list(self._data)

    def set_data(self, data: Any) -> None:
        """Sets the value on every context (the shape must fit)."""
        values = data.asnumpy() if isinstance(data, nd.NDArray) else np.asarray(data)
        self.shape = values.shape
        if not self._data:
            contexts = self._deferred[0] if self._deferred else [current_context()]
            self._data = OrderedDict((ctx, nd.zeros(values.shape, ctx=ctx, dtype=self.dtype))
                                     for ctx in contexts)
            self._deferred = None
        for array in self._data.values():
            array[:] = values.astype(array.dtype)

    def _load(self, value: nd.NDArray, ctx: Any, cast_dtype: bool) -> None:
        if self._shape is not None:
            self.shape = value.shape
        else:
            self._shape = tuple(value.shape)
        if not cast_dtype and value.dtype != self.dtype and self._data:
            raise ShapeError(f"parameter {self.name!r} is {self.dtype.name}, the file's "
                             f"value {value.dtype.name}; pass cast_dtype=True")
        dtype = self.dtype if cast_dtype else value.dtype
        self.dtype = np.dtype(dtype)
        contexts = (_contexts(ctx) if ctx is not None else
                    (list(self._data) or (self._deferred[0] if self._deferred else None)
                     or [current_context()]))
        host = value.asnumpy().astype(dtype)
        self._data = OrderedDict((c, nd.array(host, ctx=c, dtype=dtype)) for c in contexts)
        self._deferred = None

    def reset_ctx(self, ctx: Any) -> None:
        contexts = _contexts(ctx)
        if self._data:
            host = next(iter(self._data.values())).asnumpy()
            self._data = OrderedDict((c, nd.array(host, ctx=c, dtype=self.dtype))
                                     for c in contexts)
        elif self._deferred is not None:
            self._deferred = (contexts, self._deferred[1])

    def cast(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        for ctx, array in list(self._data.items()):
            self._data[ctx] = array.astype(dtype)

    def var(self) -> Any:
        """The symbol variable of this parameter."""
        return symbol.Variable(self.name)

    def zero_grad(self) -> None:
        """Nothing to do: acc-host keeps no gradients."""


class Constant(Parameter):
    """A parameter with a fixed value."""

    def __init__(self, name: str, value: Any) -> None:
        values = value.asnumpy() if isinstance(value, nd.NDArray) else np.asarray(
            value, dtype=np.float32)
        super().__init__(name, grad_req="null", shape=values.shape, dtype=values.dtype,
                         init=_init.Constant(0.0))
        self.value = values

        class _Fill(_init.Initializer):
            def _weight(inner, shape: tuple[int, ...]) -> np.ndarray:  # noqa: N805
                return values

            def __call__(inner, name: str, array: nd.NDArray) -> None:  # noqa: N805
                array[:] = values

        self.init = _Fill()


class ParameterDict(Mapping[str, Parameter]):
    """Parameters by full name; get() creates them under the prefix."""

    def __init__(self, prefix: str = "", shared: ParameterDict | None = None) -> None:
        self._prefix = prefix
        self._params: OrderedDict[str, Parameter] = OrderedDict()
        self._shared = shared

    def __repr__(self) -> str:
        body = "\n".join(f"  {param!r}" for param in self._params.values())
        return f"{self._prefix}(\n{body}\n)"

    @property
    def prefix(self) -> str:
        return self._prefix

    def __getitem__(self, key: str) -> Parameter:
        return self._params[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def _get_impl(self, name: str) -> Parameter | None:
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._params[name]
        return None

    def get(self, name: str, **kwargs: Any) -> Parameter:  # type: ignore[override]
        """The parameter prefix + name, created with kwargs if new."""
        full = self._prefix + name
        param = self._get_impl(full)
        if param is None:
            param = Parameter(full, **kwargs)
            self._params[full] = param
        elif "shape" in kwargs and kwargs["shape"] is not None:
            param.shape = kwargs["shape"]
        return param

    def get_constant(self, name: str, value: Any = None) -> Parameter:
        full = self._prefix + name
        param = self._get_impl(full)
        if param is None:
            if value is None:
                raise GraphError(f"constant {full!r} does not exist; give its value")
            param = Constant(full, value)
            self._params[full] = param
        return param

    def update(self, other: Mapping[str, Parameter]) -> None:  # type: ignore[override]
        for key, value in other.items():
            if key in self._params and self._params[key] is not value:
                raise GraphError(f"cannot update: a different parameter named {key!r} exists")
            self._params[key] = value

    def initialize(self, init: Any = None, ctx: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        default = _initializer(init) or _init.Uniform(0.07)
        for param in self._params.values():
            param.initialize(None, ctx, default, force_reinit)

    def reset_ctx(self, ctx: Any) -> None:
        for param in self._params.values():
            param.reset_ctx(ctx)

    def list_ctx(self) -> list[Context]:
        seen: list[Context] = []
        for param in self._params.values():
            seen += [ctx for ctx in param.list_ctx() if ctx not in seen]
        return seen

    def setattr(self, name: str, value: Any) -> None:
        for param in self._params.values():
            setattr(param, name, value)

    def zero_grad(self) -> None:
        """Nothing to do: acc-host keeps no gradients."""

    def save(self, filename: str | Path, strip_prefix: str = "") -> None:
        """MXNet's .params file of the values, names without strip_prefix."""
        arrays = {}
        for param in self._params.values():
            name = param.name
            if strip_prefix and not name.startswith(strip_prefix):
                raise GraphError(f"strip_prefix {strip_prefix!r} is not a prefix of {name!r}")
            arrays[name[len(strip_prefix):]] = param.list_data()[0]
        nd.save(filename, arrays)

    def load(self, filename: str | Path, ctx: Any = None, allow_missing: bool = False,
             ignore_extra: bool = False, restore_prefix: str = "",
             cast_dtype: bool = False, dtype_source: str = "current") -> None:
        """Loads a .params file (names with "arg:"/"aux:" are accepted)."""
        loaded = nd.load(filename)
        if not isinstance(loaded, dict):
            raise GraphError(f"{filename}: the file has no parameter names")
        values = {restore_prefix + (key[4:] if key.startswith(("arg:", "aux:")) else key): value
                  for key, value in loaded.items()}
        if not allow_missing:
            missing = [name for name in self._params if name not in values]
            if missing:
                raise GraphError(f"{filename}: parameters {missing} are missing; pass "
                                 "allow_missing=True to keep their current values")
        if not ignore_extra:
            extra = [name for name in values if name not in self._params]
            if extra:
                raise GraphError(f"{filename}: {extra} are not parameters of the block; pass "
                                 "ignore_extra=True to skip them")
        for name, value in values.items():
            if name in self._params:
                self._params[name]._load(value, ctx, cast_dtype)

    def select(self, select: str | None) -> ParameterDict:
        chosen = ParameterDict(self._prefix)
        pattern = re.compile(select) if select else None
        for name, param in self._params.items():
            if pattern is None or pattern.match(name):
                chosen._params[name] = param
        return chosen
