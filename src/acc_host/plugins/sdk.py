"""What a plugin is compiled against: the header and the SDK's C sources.

The header is the one the host itself reads (:func:`acc_host.abi.header.header_path`:
the installed copy beside the bundled libraries, else the checkout's
``include/``). The SDK is ``plugins/common/`` of the source tree, the C
helpers every bundled plugin compiles in (a strict JSON parser with
locale-independent numbers, the annotated-graph parser, attributes, status
messages, tensors and the compiled-model file helpers). ``build_plugins.py``
copies it to ``_bundled/sdk/`` next to the installed header; a checkout that
was not built yet has only the original. ``acc-host sdk`` prints these
locations (docs/plugin_guide.md).
"""

from __future__ import annotations

from pathlib import Path

from ..abi import header as abi_header
from ..errors import AccHostError

__all__ = ["SDK_DIR_NAME", "SdkNotFoundError", "header", "include_dir", "source_dir",
           "sources", "cflags", "abi_version"]

SDK_DIR_NAME = "sdk"
_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # acc_host/
# Beside the installed header, then the source checkout's original.
_SOURCE_CANDIDATES = (
    _PACKAGE_DIR / "_bundled" / SDK_DIR_NAME,
    _PACKAGE_DIR.parent.parent / "plugins" / "common",
)
# A directory is the SDK when it holds these (the JSON parser and its numbers).
_MARKERS = ("json.h", "json.c", "decimal.h", "decimal.c")


class SdkNotFoundError(AccHostError, FileNotFoundError):
    """The SDK sources are not where an installed acc-host or a checkout
    keeps them."""


def header() -> Path:
    """Path of ``mxnet_acc.h``, the header the host reads too."""
    return abi_header.header_path()


def include_dir() -> Path:
    """The directory holding ``mxnet_acc.h``."""
    return header().parent


def source_dir() -> Path:
    """The directory of the SDK's C sources and headers."""
    for candidate in _SOURCE_CANDIDATES:
        if all((candidate / name).is_file() for name in _MARKERS):
            return candidate
    raise SdkNotFoundError(
        f"the SDK sources ({', '.join(_MARKERS)}) are not installed with acc_host (looked in "
        f"{', '.join(map(str, _SOURCE_CANDIDATES))}); reinstall acc-host, or in a checkout run "
        "build_plugins.py")


def sources() -> list[Path]:
    """The SDK's C files, in name order (compile in the ones you use)."""
    return sorted(source_dir().glob("*.c"))


def cflags() -> list[str]:
    """Compiler flags to build a plugin: the header's and the SDK's
    include directories."""
    return [f"-I{include_dir()}", f"-I{source_dir()}"]


def abi_version() -> int:
    """``MX_ACC_API_VERSION`` of the header (MAJOR * 100 + MINOR)."""
    return abi_header.API_VERSION
