"""Symbol's fluent methods and ``eval``, as MXNet 1.9 has them:
``s.sum(axis=1)`` is ``mx.sym.sum(s, axis=1)``; ``s.eval(ctx, x=...)``
binds, runs one forward and returns the outputs."""

from __future__ import annotations

from typing import Any

from .ndarray.methods import FLUENT_OPERATORS, split_arguments

__all__ = ["SymbolMethods"]


def _fluent(op_name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        from . import symbol

        name, attr = kwargs.pop("name", None), kwargs.pop("attr", None)
        inputs, attrs = split_arguments(op_name, symbol.Symbol, self, args, kwargs)
        return symbol._create(op_name, inputs, attrs, name, attr)

    method.__name__ = op_name
    method.__doc__ = f"``mx.sym.{op_name}(self, ...)``"
    return method


def _registered(op_name: str) -> bool:
    from .ops import registry

    return registry.find(op_name) is not None


class SymbolMethods:
    """The fluent methods (mixed into Symbol)."""

    __slots__ = ()

    def reshape(self: Any, *shape: Any, **kwargs: Any) -> Any:
        """``mx.sym.Reshape(self, shape=...)``."""
        from . import symbol

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if shape:
            kwargs["shape"] = tuple(shape)
        name, attr = kwargs.pop("name", None), kwargs.pop("attr", None)
        return symbol._create("Reshape", [self], kwargs, name, attr)

    def astype(self: Any, dtype: Any, **kwargs: Any) -> Any:
        """``mx.sym.Cast(self, dtype=...)``."""
        import numpy as np

        from . import symbol

        return symbol._create("Cast", [self], {"dtype": np.dtype(dtype).name}, **kwargs)

    def eval(self, ctx: Any = None, **kwargs: Any) -> list[Any]:
        """Binds the symbol to ctx (default: the current context) with the
        given arrays for every argument, runs one forward and returns its
        outputs, as MXNet's Symbol.eval."""
        from .context import current_context

        executor = self.bind(ctx or current_context(), kwargs)  # type: ignore[attr-defined]
        return list(executor.forward())


for _method, _op in FLUENT_OPERATORS.items():
    # the host operators (one_hot, sort, ...) are not in the registry, so not in graphs
    if not hasattr(SymbolMethods, _method) and _registered(_op):
        setattr(SymbolMethods, _method, _fluent(_op))
