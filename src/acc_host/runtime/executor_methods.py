"""Executor methods of MXNet 1.9's API beyond binding and running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import GraphError, ShapeError
from ..ndarray import NDArray

__all__ = ["ExecutorMethods"]


class ExecutorMethods:
    """Mixed into Executor."""

    __slots__ = ()

    def copy_params_from(self, arg_params: Mapping[str, Any],
                         aux_params: Mapping[str, Any] | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copies parameters into the bound arrays by name (MXNet's
        copy_params_from): a name the executor does not have is an error
        unless allow_extra_params; shapes must match."""
        for what, given, bound in (("argument", arg_params, self.arg_dict),  # type: ignore[attr-defined]
                                   ("auxiliary state", aux_params or {},
                                    self.aux_dict)):  # type: ignore[attr-defined]
            for name, value in given.items():
                if name not in bound:
                    if allow_extra_params:
                        continue
                    raise GraphError(f"copy_params_from: {name!r} is not an {what} of the "
                                     "executor; pass allow_extra_params=True to skip it")
                shape = tuple(value.shape)
                if shape != bound[name].shape:
                    raise ShapeError(f"copy_params_from: {what} {name!r} has shape {shape}, "
                                     f"the executor's has {bound[name].shape}")
                if isinstance(value, NDArray):
                    value.copyto(bound[name])
                else:
                    bound[name][:] = value
