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

For packaging a plugin (docs/packaging.md): :func:`wheel_tag` is the tag
acc-host's own wheels carry, ``py3-none-<platform>`` (a plugin is loaded
with dlopen and never links against Python, so one wheel per platform
serves every Python 3), :func:`setup_options` gives a vendor's ``setup.py``
the setuptools classes that build such a wheel, and :func:`abi_functions`
lists what a plugin exports (11 functions, 17 with imperative mode).

``abi`` ("1.0", 100, ...) picks the header of an earlier published ABI
version instead (:mod:`acc_host.abi.versions`), to build a plugin the way a
vendor built it against an older acc-host and test version skew.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path
from typing import Any

from ..abi import header as abi_header
from ..abi import versions
from ..abi.library import IMPERATIVE_SYMBOLS, OPTIONAL_SYMBOLS, REQUIRED_SYMBOLS
from ..errors import AccHostError

__all__ = ["SDK_DIR_NAME", "SdkNotFoundError", "header", "include_dir", "source_dir",
           "sources", "cflags", "abi_version", "abi_versions", "wheel_platform", "wheel_tag",
           "setup_options", "abi_functions"]

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


def abi_functions(imperative: bool = True) -> tuple[str, ...]:
    """The functions a plugin may export: the required ten and
    accGetLastError (11), the six of imperative mode when imperative (17),
    then the optional supportedOpsReasons and retainsWeights (ABI 1.1) and
    supportsSparse (1.2). A plugin
    built with -fvisibility=hidden exports some of these and nothing else:
    every one of the first 11 (17 with imperative mode), any of the rest."""
    last_error, *additions = OPTIONAL_SYMBOLS
    return (*REQUIRED_SYMBOLS, last_error, *(IMPERATIVE_SYMBOLS if imperative else ()),
            *additions)


def wheel_platform() -> str:
    """The platform part of a wheel tag for this interpreter's platform, as
    bdist_wheel writes it (linux_x86_64, macosx_11_0_arm64, win_amd64)."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def wheel_tag() -> str:
    """The tag of a plugin wheel for this platform: py3-none-<platform>,
    as acc-host's own wheels (any Python 3, no Python ABI, this platform)."""
    return f"py3-none-{wheel_platform()}"


def setup_options() -> dict[str, Any]:
    """``setup()`` keyword arguments that make setuptools build a
    py3-none-<platform> wheel of a package shipping a plugin library::

        from setuptools import setup
        from acc_host.plugins.sdk import setup_options

        setup(**setup_options())

    ``distclass`` marks the distribution as holding native code (so the
    wheel is platform-specific and not py3-none-any) and ``cmdclass``'s
    bdist_wheel drops the interpreter and ABI parts of the tag (which would
    otherwise tie the wheel to one Python, cp311-cp311). The build needs
    acc-host (add it to the build-system requirements), as building the
    library with ``acc-host sdk`` does; docs/packaging.md also shows the
    same two classes written out in a setup.py that needs nothing."""
    # setuptools is a build-time dependency only: imported when asked.
    from setuptools.dist import Distribution

    try:  # setuptools >= 70.1 has the command; older ones take it from the wheel package
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class BinaryDistribution(Distribution):
        """The package ships a native library: its wheel is platform-specific."""

        def has_ext_modules(self) -> bool:
            return True

    class PlatformWheel(bdist_wheel):  # type: ignore[misc, valid-type]
        """Tags the wheel py3-none-<platform>: any Python 3 of the platform."""

        def get_tag(self) -> tuple[str, str, str]:
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    return {"cmdclass": {"bdist_wheel": PlatformWheel}, "distclass": BinaryDistribution}
