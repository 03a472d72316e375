"""The published versions of ``mxnet_acc.h``: the current one, which the
host reads, and each earlier one as it was published, so that a plugin can
be built against an older header to test version skew (``acc-host sdk
--abi 1.0``, :func:`acc_host.plugins.sdk.cflags`).

Earlier headers are kept under ``acc_host/abi/headers/<MAJOR.MINOR>/mxnet_acc.h``,
byte for byte as published, so that ``#include "mxnet_acc.h"`` finds them
through one ``-I`` flag. They are never edited: a change to the ABI is a
new version (docs/abi.md has the changelog).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import AccHostError
from . import header

__all__ = ["AbiVersionError", "parse_version", "published_versions", "header_for"]

_HEADERS_DIR = Path(__file__).resolve().parent / "headers"
_VERSION_TEXT = re.compile(r"(\d+)\.(\d+)\Z")


class AbiVersionError(AccHostError, ValueError):
    """An ABI version that is malformed or was never published."""


def parse_version(version: int | str) -> int:
    """MAJOR * 100 + MINOR for "1.0", "1.1" or an int such as 101."""
    if isinstance(version, int) and not isinstance(version, bool):
        if version < 0:
            raise AbiVersionError(f"ABI version {version} is negative")
        return version
    if isinstance(version, str):
        match = _VERSION_TEXT.match(version.strip())
        if match and int(match.group(2)) < 100:
            return int(match.group(1)) * 100 + int(match.group(2))
    raise AbiVersionError(f"ABI version {version!r} is not MAJOR.MINOR (such as "
                          f"{header.version_text(header.API_VERSION)})")


def _earlier() -> dict[int, Path]:
    found = {}
    if _HEADERS_DIR.is_dir():
        for folder in _HEADERS_DIR.iterdir():
            path = folder / header.HEADER_NAME
            if _VERSION_TEXT.match(folder.name) and path.is_file():
                found[parse_version(folder.name)] = path
    return found


def published_versions() -> list[int]:
    """Every published ABI version this acc_host can serve, ascending (the
    current one last)."""
    return sorted({*_earlier(), header.API_VERSION})


def header_for(version: int | str | None = None) -> Path:
    """The header of ABI version (None: the current one, which the host
    itself reads)."""
    wanted = header.API_VERSION if version is None else parse_version(version)
    if wanted == header.API_VERSION:
        return header.header_path()
    path = _earlier().get(wanted)
    if path is None:
        known = ", ".join(header.version_text(v) for v in published_versions())
        raise AbiVersionError(f"ABI version {header.version_text(wanted)} was not published by "
                              f"this acc_host; it serves {known}")
    return path
