"""gluon.utils: splitting a batch over several contexts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import ndarray as nd
from ..context import Context
from ..errors import InvalidArgumentError

__all__ = ["split_data", "split_and_load"]


def split_data(data: nd.NDArray, num_slice: int, batch_axis: int = 0,
               even_split: bool = True) -> list[nd.NDArray]:
    """num_slice parts of data along batch_axis (MXNet's rule: equal parts
    of size // num_slice, the last one taking the remainder; even_split
    refuses a remainder)."""
    size = data.shape[batch_axis]
    if num_slice < 1:
        raise InvalidArgumentError(f"split_data: num_slice must be positive, got {num_slice}")
    if even_split and size % num_slice != 0:
        raise InvalidArgumentError(
            f"split_data: data with shape {data.shape} cannot be split evenly into "
            f"{num_slice} slices along axis {batch_axis}; use a batch size that is a "
            "multiple of the number of slices or even_split=False")
    step = size // num_slice
    if not even_split and size < num_slice:
        step, num_slice = 1, size
    bounds = [(k * step, (k + 1) * step if k < num_slice - 1 else size)
              for k in range(num_slice)]
    if batch_axis == 0:
        return [data[begin:end] for begin, end in bounds]
    return [nd.slice_axis(data, axis=batch_axis, begin=begin, end=end)  # type: ignore[attr-defined]
            for begin, end in bounds]


def split_and_load(data: Any, ctx_list: Sequence[Context], batch_axis: int = 0,
                   even_split: bool = True) -> list[nd.NDArray]:
    """data split along batch_axis, one part copied to each context."""
    if not isinstance(data, nd.NDArray):
        data = nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    parts = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(parts, ctx_list)]
