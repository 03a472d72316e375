"""Data batches and iterators (``mx.io``), enough for Module.forward and
Module.predict."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from .errors import InvalidArgumentError
from .ndarray import NDArray, array

__all__ = ["DataDesc", "DataBatch", "NDArrayIter"]


class DataDesc(NamedTuple):
    """Name, shape and dtype of one input."""

    name: str
    shape: tuple[int, ...]
    dtype: Any = np.float32
    layout: str = "NCHW"


class DataBatch:
    """One batch: data and label arrays, the number of padding examples."""

    def __init__(self, data: Sequence[NDArray], label: Sequence[NDArray] | None = None,
                 pad: int = 0, index: Any = None, bucket_key: Any = None,
                 provide_data: Sequence[DataDesc] | None = None,
                 provide_label: Sequence[DataDesc] | None = None) -> None:
        if data is None or isinstance(data, NDArray):
            raise InvalidArgumentError("DataBatch.data must be a list of NDArrays")
        self.data = list(data)
        self.label = list(label) if label is not None else None
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label


class NDArrayIter:
    """Batches over arrays along axis 0; the last batch is padded with the
    first examples ("pad") or dropped ("discard")."""

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        if last_batch_handle not in ("pad", "discard"):
            raise InvalidArgumentError("last_batch_handle must be 'pad' or 'discard'")
        self.data = _named(data, data_name)
        self.label = _named(label, label_name) if label is not None else []
        self.batch_size = batch_size
        self.last_batch_handle = last_batch_handle
        self.num_data = self.data[0][1].shape[0]
        self.cursor = 0

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(name, (self.batch_size, *values.shape[1:]), values.dtype)
                for name, values in self.data]

    @property
    def provide_label(self) -> list[DataDesc]:
        return [DataDesc(name, (self.batch_size, *values.shape[1:]), values.dtype)
                for name, values in self.label]

    def reset(self) -> None:
        self.cursor = 0

    def __iter__(self) -> Iterator[DataBatch]:
        return self

    def __next__(self) -> DataBatch:
        if self.cursor >= self.num_data:
            raise StopIteration
        end = self.cursor + self.batch_size
        pad = max(0, end - self.num_data)
        if pad and self.last_batch_handle == "discard":
            raise StopIteration
        take = np.arange(self.cursor, end) % self.num_data
        self.cursor = end
        return DataBatch([array(values[take]) for _, values in self.data],
                         [array(values[take]) for _, values in self.label] or None, pad=pad,
                         provide_data=self.provide_data, provide_label=self.provide_label)

    next = __next__


def _named(source: Any, default_name: str) -> list[tuple[str, np.ndarray]]:
    if isinstance(source, dict):
        items = list(source.items())
    elif isinstance(source, (list, tuple)):
        items = [(f"{default_name}{k}" if k else default_name, value)
                 for k, value in enumerate(source)]
    else:
        items = [(default_name, source)]
    return [(name, value.asnumpy() if isinstance(value, NDArray) else np.asarray(value))
            for name, value in items]


def __getattr__(name: str) -> Any:
    """mx.io.ImageRecordIter (acc_host.image_iter, loaded when first used)."""
    if name == "ImageRecordIter":
        from .image_iter import ImageRecordIter

        return ImageRecordIter
    raise AttributeError(f"module 'acc_host.io' has no attribute {name!r}")
