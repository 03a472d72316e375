"""MXNet's RecordIO files (``mx.recordio``): .rec records, .idx indexes and
the image record header, byte-compatible with MXNet (dmlc-core's format).

A record is the magic 0xced7230a, a 32-bit word holding a continuation
flag (top 3 bits) and a length (low 29 bits), the bytes, and zero padding
to a multiple of 4. A payload that holds the magic at a 4-aligned offset
is written in parts (flags 1, 2, ..., 3) with that magic left out, so a
reader can resynchronize on magics; reading joins the parts with the magic
between them. An index file has one "key<TAB>byte offset" line per record.

``pack_img``/``unpack_img`` encode and decode with Pillow (MXNet uses
OpenCV); images are in OpenCV's BGR channel order, as MXNet's are.
"""

from __future__ import annotations

import io
import numbers
import struct
from collections import namedtuple
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .errors import AccHostError, InvalidArgumentError, ModelFileError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "PillowMissingError"]


class PillowMissingError(AccHostError, ImportError):
    """pack_img/unpack_img need the Pillow package, which is not installed."""


def pillow(who: str) -> Any:
    """Pillow's Image module; a PillowMissingError naming who needs it."""
    try:
        from PIL import Image  # optional: only the image functions need it
    except ImportError as error:
        raise PillowMissingError(f"{who} needs Pillow (pip install Pillow): {error}") from None
    return Image


def open_image(data: bytes, who: str) -> Any:
    """The decoded Pillow image in data (JPEG, PNG, ...); a ModelFileError
    naming who when it cannot be decoded."""
    image_module = pillow(who)
    try:
        image = image_module.open(io.BytesIO(data))
        image.load()
    except OSError as error:
        raise ModelFileError(f"{who}: cannot decode the image: {error}") from None
    return image


_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_LENGTH_MASK = (1 << 29) - 1

IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
_HEADER = struct.Struct("IfQQ")


class MXRecordIO:
    """Sequential reading ("r") or writing ("w") of a .rec file."""

    def __init__(self, uri: str | Path, flag: str) -> None:
        if flag not in ("r", "w"):
            raise InvalidArgumentError(f"MXRecordIO: flag must be 'r' or 'w', got {flag!r}")
        self.uri = str(uri)
        self.flag = flag
        self.is_open = False
        self._file: BinaryIO | None = None
        self.open()

    def open(self) -> None:
        self._file = open(self.uri, "wb" if self.flag == "w" else "rb")  # noqa: SIM115
        self.writable = self.flag == "w"
        self.is_open = True

    def close(self) -> None:
        if self.is_open and self._file is not None:
            self._file.close()
        self.is_open = False

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self) -> None:
        self.close()
        self.open()

    def _stream(self) -> BinaryIO:
        if not self.is_open or self._file is None:
            raise InvalidArgumentError(f"{self.uri}: the record file is closed")
        return self._file

    def tell(self) -> int:
        return self._stream().tell()

    def write(self, buf: bytes) -> None:
        if not self.writable:
            raise InvalidArgumentError(f"{self.uri}: opened for reading")
        if len(buf) > _LENGTH_MASK:
            raise InvalidArgumentError(f"a record holds at most {_LENGTH_MASK} bytes, got "
                                       f"{len(buf)}")
        stream = self._stream()
        view = memoryview(buf)
        start = 0
        for offset in range(0, len(buf) - len(buf) % 4, 4):
            if view[offset:offset + 4] == _MAGIC_BYTES:
                flag = 1 if start == 0 else 2
                stream.write(_MAGIC_BYTES + struct.pack("<I", flag << 29 | (offset - start)))
                stream.write(view[start:offset])
                start = offset + 4
        stream.write(_MAGIC_BYTES + struct.pack("<I", (3 if start else 0) << 29
                                                | (len(buf) - start)))
        stream.write(view[start:])
        stream.write(b"\0" * (-len(buf) % 4))

    def _read_part(self, stream: BinaryIO) -> tuple[int, bytes] | None:
        head = stream.read(8)
        if not head:
            return None
        if len(head) < 8:
            raise ModelFileError(f"{self.uri}: truncated record header at byte "
                                 f"{stream.tell() - len(head)}")
        magic, word = struct.unpack("<II", head)
        if magic != _MAGIC:
            raise ModelFileError(f"{self.uri}: no record magic at byte {stream.tell() - 8}")
        length = word & _LENGTH_MASK
        data = stream.read(length)
        if len(data) < length:
            raise ModelFileError(f"{self.uri}: record truncated ({len(data)} of {length} "
                                 "bytes)")
        stream.read(-length % 4)
        return word >> 29, data

    def read(self) -> bytes | None:
        """The next record, or None at the end of the file."""
        if self.writable:
            raise InvalidArgumentError(f"{self.uri}: opened for writing")
        stream = self._stream()
        part = self._read_part(stream)
        if part is None:
            return None
        flag, data = part
        if flag == 0:
            return data
        if flag != 1:
            raise ModelFileError(f"{self.uri}: a record starts with continuation flag {flag}")
        pieces = [data]
        while True:
            part = self._read_part(stream)
            if part is None:
                raise ModelFileError(f"{self.uri}: the file ends inside a record")
            flag, data = part
            pieces.append(data)
            if flag == 3:
                return _MAGIC_BYTES.join(pieces)
            if flag != 2:
                raise ModelFileError(f"{self.uri}: continuation flag {flag} inside a record")


class MXIndexedRecordIO(MXRecordIO):
    """Random access by key through an .idx file ("key<TAB>offset" lines)."""

    def __init__(self, idx_path: str | Path, uri: str | Path, flag: str,
                 key_type: type = int) -> None:
        self.idx_path = str(idx_path)
        self.key_type = key_type
        self.idx: dict[Any, int] = {}
        self.keys: list[Any] = []
        self._index: Any = None
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        self.idx, self.keys = {}, []
        if self.flag == "w":
            self._index = open(self.idx_path, "w", encoding="utf-8")  # noqa: SIM115
            return
        self._index = None
        with open(self.idx_path, encoding="utf-8") as index:
            for number, line in enumerate(index, 1):
                fields = line.strip().split("\t")
                if len(fields) < 2:
                    continue
                try:
                    key, position = self.key_type(fields[0]), int(fields[1])
                except ValueError:
                    raise ModelFileError(f"{self.idx_path}:{number}: not 'key<TAB>offset': "
                                         f"{line.strip()!r}") from None
                self.idx[key] = position
                self.keys.append(key)

    def close(self) -> None:
        if getattr(self, "_index", None) is not None:
            self._index.close()
            self._index = None
        super().close()

    def seek(self, idx: Any) -> None:
        if idx not in self.idx:
            raise InvalidArgumentError(f"{self.idx_path}: no record with key {idx!r}")
        self._stream().seek(self.idx[idx])

    def read_idx(self, idx: Any) -> bytes | None:
        self.seek(idx)
        return self.read()

    def write_idx(self, idx: Any, buf: bytes) -> None:
        key = self.key_type(idx)
        position = self.tell()
        self.write(buf)
        self._index.write(f"{key}\t{position}\n")
        self.idx[key] = position
        self.keys.append(key)


def pack(header: Any, s: bytes) -> bytes:
    """An image record: the IRHeader (flag, label, id, id2), then an array
    label (when label is not a number), then s."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return _HEADER.pack(*header) + s


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    if len(s) < _HEADER.size:
        raise ModelFileError(f"an image record has at least {_HEADER.size} bytes, got {len(s)}")
    header = IRHeader(*_HEADER.unpack(s[:_HEADER.size]))
    s = s[_HEADER.size:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise ModelFileError(f"the record's label of {header.flag} values is truncated")
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[4 * header.flag:]
    return header, s


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """pack() of img (H x W x 3 in BGR order, or H x W) encoded as JPEG or PNG."""
    Image = pillow("mx.recordio.pack_img")  # noqa: N806
    formats = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}
    if img_fmt.lower() not in formats:
        raise InvalidArgumentError(f"pack_img: img_fmt must be one of {sorted(formats)}")
    pixels = np.asarray(img)
    if pixels.ndim == 3 and pixels.shape[2] == 3:
        pixels = pixels[:, :, ::-1]  # BGR -> RGB
    buffer = io.BytesIO()
    options = {"quality": quality} if formats[img_fmt.lower()] == "JPEG" else {}
    Image.fromarray(np.ascontiguousarray(pixels.astype(np.uint8))).save(
        buffer, format=formats[img_fmt.lower()], **options)
    return pack(header, buffer.getvalue())


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """The header and the decoded image: BGR (H x W x 3) for color images
    or iscolor=1, H x W for grayscale or iscolor=0."""
    header, data = unpack(s)
    image = open_image(data, "unpack_img")
    if iscolor == 0:
        return header, np.asarray(image.convert("L"))
    if iscolor == 1 or image.mode not in ("L", "I;16"):
        return header, np.asarray(image.convert("RGB"))[:, :, ::-1].copy()
    return header, np.asarray(image)
