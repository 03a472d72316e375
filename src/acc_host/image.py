"""Image helpers of ``mx.image`` for evaluation pipelines: decoding,
resizing and cropping, with MXNet 1.9's geometry rules (resize_short,
scale_down, center_crop). Decoding and resizing use Pillow (MXNet uses
OpenCV): decoded pixels agree for lossless formats, resized ones differ by
the two libraries' interpolation. Images are H x W x C uint8 NDArrays in
RGB order (BGR with to_rgb=False), as MXNet's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, ModelFileError
from .ndarray import NDArray, array
from .recordio import PillowMissingError, open_image, pillow

__all__ = ["imread", "imdecode", "imresize", "resize_short", "scale_down", "fixed_crop",
           "center_crop", "color_normalize", "PillowMissingError"]


# MXNet's interp codes (OpenCV's) -> Pillow's resampling filters
_FILTERS = {0: "NEAREST", 1: "BILINEAR", 2: "BICUBIC", 3: "BOX", 4: "LANCZOS"}


def _host(src: Any) -> np.ndarray:
    return src.asnumpy() if isinstance(src, NDArray) else np.asarray(src)


def _wrap(values: np.ndarray, like: Any) -> NDArray:
    ctx = like.context if isinstance(like, NDArray) else None
    return array(values, ctx=ctx, dtype=values.dtype)


def _gray(image: Any) -> np.ndarray:
    """Grayscale as MXNet's decoding of a color PNG makes it (OpenCV asks
    libpng for weights 0.299 and 0.587, which libpng keeps as 9797 and 19234
    of 32768, blue the remaining 3737, and truncates): (9797 R + 19234 G +
    3737 B) >> 15. Checked against MXNet 1.9.1's ImageRecordIter; for JPEG,
    libjpeg's own conversion may differ from this by 1."""
    if image.mode in ("L", "I;16", "I"):
        return np.asarray(image.convert("L"))
    rgb = np.asarray(image.convert("RGB")).astype(np.int64)
    weighted = 9797 * rgb[..., 0] + 19234 * rgb[..., 1] + 3737 * rgb[..., 2]
    return (weighted >> 15).astype(np.uint8)


def imdecode(buf: bytes | Any, flag: int = 1, to_rgb: bool = True,
             out: Any = None) -> NDArray:
    """The image in buf (JPEG, PNG, ...): H x W x 3 (flag 1) or H x W x 1 (flag 0)."""
    data = bytes(_host(buf).astype(np.uint8).tobytes()) if not isinstance(
        buf, (bytes, bytearray)) else bytes(buf)
    image = open_image(data, "imdecode")
    if flag == 0:
        pixels = _gray(image)[:, :, None]
    else:
        pixels = np.asarray(image.convert("RGB"))
        if not to_rgb:
            pixels = pixels[:, :, ::-1]
    result = array(np.ascontiguousarray(pixels), dtype=np.uint8)
    if out is not None:
        out[:] = result
        return out  # type: ignore[no-any-return]
    return result


def imread(filename: str | Path, flag: int = 1, to_rgb: bool = True,
           out: Any = None) -> NDArray:
    try:
        data = Path(filename).read_bytes()
    except OSError as error:
        raise ModelFileError(f"imread: cannot read {filename}: {error}") from None
    return imdecode(data, flag, to_rgb, out)


def imresize(src: Any, w: int, h: int, interp: int = 1) -> NDArray:
    """src resized to w x h (interp: MXNet's codes, 0 nearest, 1 bilinear,
    2 bicubic, 3 area, 4 Lanczos; 9 and 10 are taken as bicubic)."""
    if w <= 0 or h <= 0:
        raise InvalidArgumentError(f"imresize: size must be positive, got {w} x {h}")
    image_module = pillow("mx.image.imresize")
    pixels = _host(src)
    squeeze = pixels.ndim == 3 and pixels.shape[2] == 1
    image = image_module.fromarray(pixels[:, :, 0] if squeeze else pixels)
    resample = getattr(image_module.Resampling, _FILTERS.get(interp, "BICUBIC"))
    resized = np.asarray(image.resize((w, h), resample=resample))
    return _wrap(resized[:, :, None] if squeeze else resized, src)


def resize_short(src: Any, size: int, interp: int = 2) -> NDArray:
    """src resized so that its shorter side is size (MXNet's rounding)."""
    h, w = _host(src).shape[:2]
    new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
    return imresize(src, new_w, new_h, interp)


def scale_down(src_size: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """size (w, h) scaled down to fit in src_size (w, h), keeping its ratio."""
    w: float = size[0]
    h: float = size[1]
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def fixed_crop(src: Any, x0: int, y0: int, w: int, h: int,
               size: tuple[int, int] | None = None, interp: int = 2) -> NDArray:
    pixels = _host(src)[y0:y0 + h, x0:x0 + w]
    out = _wrap(np.ascontiguousarray(pixels), src)
    if size is not None and (w, h) != tuple(size):
        out = imresize(out, size[0], size[1], interp)
    return out


def center_crop(src: Any, size: tuple[int, int],
                interp: int = 2) -> tuple[NDArray, tuple[int, int, int, int]]:
    """The centered crop of size (w, h) (scaled down to fit, then resized
    to size) and its (x0, y0, w, h)."""
    h, w = _host(src).shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src: Any, mean: Any, std: Any = None) -> Any:
    """(src - mean) / std."""
    out = src - mean
    if std is not None:
        out = out / std
    return out
