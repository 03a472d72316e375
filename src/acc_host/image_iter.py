"""``mx.io.ImageRecordIter`` for evaluation: batches of images from an
MXNet .rec file (im2rec's image records), as MXNet's C++ iterator makes
them without random augmentation.

Each record is decoded (RGB), resized so that its shorter side is
``resize`` when given (MXNet's rule: the longer side becomes
resize * long // short), center-cropped to data_shape (C, H, W), and
normalized per channel as ``(pixel - mean) * scale / std``. Labels are the
records' labels (label_width values each). The last batch is filled by
wrapping around to the first records (``round_batch``) and ``pad`` counts
those. Decoding and resizing use Pillow (see acc_host.image).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import image, recordio
from .errors import InvalidArgumentError, ShapeError
from .io import DataBatch, DataDesc
from .ndarray import array

__all__ = ["ImageRecordIter"]


class ImageRecordIter:
    def __init__(self, path_imgrec: str | Path, data_shape: Sequence[int], batch_size: int,
                 label_width: int = 1, mean_r: float = 0.0, mean_g: float = 0.0,
                 mean_b: float = 0.0, std_r: float = 1.0, std_g: float = 1.0,
                 std_b: float = 1.0, scale: float = 1.0, resize: int = -1,
                 rand_crop: bool = False, rand_mirror: bool = False, shuffle: bool = False,
                 round_batch: bool = True, data_name: str = "data",
                 label_name: str = "softmax_label", inter_method: int = 1,
                 dtype: str = "float32", ctx: Any = None, **kwargs: Any) -> None:
        if rand_crop or rand_mirror or shuffle:
            raise InvalidArgumentError("ImageRecordIter: acc-host's iterator is for "
                                       "evaluation; rand_crop, rand_mirror and shuffle are "
                                       "not supported")
        if len(data_shape) != 3 or data_shape[0] not in (1, 3):
            raise InvalidArgumentError(f"ImageRecordIter: data_shape must be (1 or 3, H, W), "
                                       f"got {tuple(data_shape)}")
        if batch_size < 1:
            raise InvalidArgumentError(f"ImageRecordIter: batch_size must be positive, got "
                                       f"{batch_size}")
        self.data_shape = tuple(int(n) for n in data_shape)
        self.batch_size = batch_size
        self.label_width = label_width
        self._mean = np.array([mean_r, mean_g, mean_b][:self.data_shape[0]], np.float32)
        self._std = np.array([std_r, std_g, std_b][:self.data_shape[0]], np.float32)
        self._scale = scale
        self._resize = resize
        self._interp = inter_method
        self._round_batch = round_batch
        self._data_name, self._label_name = data_name, label_name
        self._dtype = np.dtype(dtype)
        self._ctx = ctx
        self._records = self._read_all(path_imgrec)
        if not self._records:
            raise InvalidArgumentError(f"{path_imgrec}: the record file holds no images")
        self._cursor = 0

    @staticmethod
    def _read_all(path: str | Path) -> list[bytes]:
        reader = recordio.MXRecordIO(path, "r")
        records = []
        while (record := reader.read()) is not None:
            records.append(record)
        reader.close()
        return records

    @property
    def provide_data(self) -> list[DataDesc]:
        return [DataDesc(self._data_name, (self.batch_size, *self.data_shape), self._dtype)]

    @property
    def provide_label(self) -> list[DataDesc]:
        shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size,
                                                                  self.label_width)
        return [DataDesc(self._label_name, shape, np.float32)]

    def reset(self) -> None:
        self._cursor = 0

    def _example(self, record: bytes) -> tuple[np.ndarray, np.ndarray]:
        header, payload = recordio.unpack(record)
        channels, height, width = self.data_shape
        picture = image.imdecode(payload, flag=1 if channels == 3 else 0)
        if self._resize > 0:
            picture = image.resize_short(picture, self._resize, self._interp)
        pixels = picture.asnumpy()
        rows, cols = pixels.shape[:2]
        if rows < height or cols < width:
            raise ShapeError(f"ImageRecordIter: an image of {rows} x {cols} is smaller than "
                             f"data_shape {self.data_shape}; set resize")
        top, left = (rows - height) // 2, (cols - width) // 2
        crop = pixels[top:top + height, left:left + width].astype(np.float32)
        chw = np.transpose(crop, (2, 0, 1))
        values = (chw - self._mean[:, None, None]) * self._scale / self._std[:, None, None]
        label = np.atleast_1d(np.asarray(header.label, np.float32))[:self.label_width]
        return values.astype(self._dtype), label

    def __iter__(self) -> Iterator[DataBatch]:
        return self

    def next(self) -> DataBatch:
        return self.__next__()

    def __next__(self) -> DataBatch:
        total = len(self._records)
        if self._cursor >= total:
            raise StopIteration
        indices = list(range(self._cursor, min(self._cursor + self.batch_size, total)))
        pad = self.batch_size - len(indices)
        if pad and self._round_batch:
            indices += [k % total for k in range(pad)]
        self._cursor += self.batch_size
        examples = [self._example(self._records[k]) for k in indices]
        data = np.stack([values for values, _ in examples])
        labels = np.stack([label for _, label in examples])
        if self.label_width == 1:
            labels = labels[:, 0]
        return DataBatch([array(data, ctx=self._ctx, dtype=data.dtype)],
                         [array(labels, ctx=self._ctx)], pad=pad if self._round_batch else 0,
                         provide_data=self.provide_data, provide_label=self.provide_label)
