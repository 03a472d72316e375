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

``abi`` ("1.0", 100, ...) picks the header of an earlier published ABI
version instead (:mod:`acc_host.abi.versions`), to build a plugin the way a
vendor built it against an older acc-host and test version skew.
"""

from __future__ import annotations

from pathlib import Path

from ..abi import header as abi_header
from ..abi import versions
from ..errors import AccHostError

__all__ = ["SDK_DIR_NAME", "SdkNotFoundError", "header", "include_dir", "source_dir",
           "sources", "cflags", "abi_version", "abi_versions"]

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


def header(abi: int | str | None = None) -> Path:
    """Path of ``mxnet_acc.h``: the header the host reads too, or that of
    the published ABI version abi."""
    return versions.header_for(abi)


def include_dir(abi: int | str | None = None) -> Path:
    """The directory holding ``mxnet_acc.h`` (of ABI version abi)."""
    return header(abi).parent


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


def cflags(abi: int | str | None = None) -> list[str]:
    """Compiler flags to build a plugin: the header's (of ABI version abi)
    and the SDK's include directories."""
    return [f"-I{include_dir(abi)}", f"-I{source_dir()}"]


def abi_version(abi: int | str | None = None) -> int:
    """``MX_ACC_API_VERSION`` of the header (MAJOR * 100 + MINOR): the
    current one, or abi once it is known to be published."""
    if abi is None:
        return abi_header.API_VERSION
    header(abi)  # an AbiVersionError unless published
    return versions.parse_version(abi)


def abi_versions() -> list[int]:
    """The ABI versions whose header this acc_host serves, ascending."""
    return versions.published_versions()
