"""The cffi view of ``mxnet_acc.h``: the only module that builds the FFI.

The declarations are read from the header itself (the region between the
``ACC_CDEF_BEGIN`` and ``ACC_CDEF_END`` markers), never retyped here, so the
host and every plugin see one definition of the ABI.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import cffi

__all__ = ["HEADER_NAME", "header_path", "cdef_source", "ffi", "API_VERSION", "status_name"]

HEADER_NAME = "mxnet_acc.h"
_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # acc_host/
# The installed copy sits beside the bundled libraries; a source checkout
# that was not built yet still has the original.
_HEADER_CANDIDATES = (
    _PACKAGE_DIR / "_bundled" / HEADER_NAME,
    _PACKAGE_DIR.parent.parent / "include" / HEADER_NAME,
)
_CDEF_REGION = re.compile(r"/\* ACC_CDEF_BEGIN \*/(.*?)/\* ACC_CDEF_END \*/", re.S)


def header_path() -> Path:
    """Path of the header the host's declarations come from."""
    for candidate in _HEADER_CANDIDATES:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{HEADER_NAME} not found (looked in {', '.join(map(str, _HEADER_CANDIDATES))}); "
        "reinstall acc-host or run build_plugins.py")


def cdef_source(header: Path | None = None) -> str:
    """The cffi-parsable declarations of the header."""
    text = (header or header_path()).read_text(encoding="utf-8")
    match = _CDEF_REGION.search(text)
    if match is None:
        raise ValueError(f"{header}: no ACC_CDEF_BEGIN/ACC_CDEF_END region")
    return match.group(1)


@functools.cache
def _build_ffi() -> cffi.FFI:
    built = cffi.FFI()
    built.cdef(cdef_source())
    return built


ffi = _build_ffi()
_constants = ffi.dlopen(None)  # integer constants of the cdef; reads no library symbol

API_VERSION: int = _constants.MX_ACC_API_VERSION
API_VERSION_MAJOR: int = _constants.MX_ACC_API_VERSION_MAJOR
HOST_DEVICE: int = _constants.MX_ACC_HOST_DEVICE
NAME_MAX: int = _constants.MX_ACC_NAME_MAX
MAX_NDIM: int = _constants.MX_ACC_MAX_NDIM
REASON_MAX: int = _constants.MX_ACC_REASON_MAX
API_VERSION_MINOR: int = _constants.MX_ACC_API_VERSION_MINOR
OK: int = _constants.MX_ACC_OK
ERR_UNSUPPORTED: int = _constants.MX_ACC_ERR_UNSUPPORTED
ERR_OUT_OF_MEMORY: int = _constants.MX_ACC_ERR_OUT_OF_MEMORY
ERR_VERSION: int = _constants.MX_ACC_ERR_VERSION
# Values of MXTensor.isSparse (ABI 1.2), and the first ABI version whose
# plugins may be given a sparse tensor or a storage annotation.
STORAGE_DENSE: int = _constants.MX_ACC_STORAGE_DENSE
STORAGE_CSR: int = _constants.MX_ACC_STORAGE_CSR
STORAGE_ROW_SPARSE: int = _constants.MX_ACC_STORAGE_ROW_SPARSE
SPARSE_API_VERSION = 102

_STATUS_NAMES = {
    getattr(_constants, name): name
    for name in dir(_constants) if name == "MX_ACC_OK" or name.startswith("MX_ACC_ERR_")
}

# TensorDType values by enumerator name ("kFloat32" -> 0).
DTYPE_VALUES: dict[str, int] = dict(ffi.typeof("TensorDType").relements)


def status_name(code: int) -> str:
    """Symbolic name of a status code, e.g. "MX_ACC_ERR_UNSUPPORTED"."""
    return _STATUS_NAMES.get(code, f"unknown status {code}")


def version_text(version: int) -> str:
    """"1.0" for 100."""
    return f"{version // 100}.{version % 100}"


def skew_advice(plugin: int) -> str:
    """What a plugin built for ABI version plugin and this host can do about
    their versions: a newer plugin needs a newer host or an older header, an
    older major a rebuild, the same major nothing."""
    host = API_VERSION
    if plugin // 100 > API_VERSION_MAJOR:
        return (f"the plugin is newer than this host (ABI {version_text(plugin)} > "
                f"{version_text(host)}): use an acc-host of ABI {plugin // 100}.x, or build the "
                f"plugin against this host's header (acc-host sdk --cflags)")
    if plugin // 100 < API_VERSION_MAJOR:
        return (f"the plugin is older than this host (ABI {version_text(plugin)} < "
                f"{version_text(host)}): rebuild it against this host's header (acc-host sdk "
                "--cflags)")
    if plugin > host:
        return (f"the plugin is built for a newer minor version (ABI {version_text(plugin)} > "
                f"{version_text(host)}), which this host loads: it never calls what that minor "
                "added")
    return f"same major version as this host (ABI {version_text(host)})"
