"""The cffi view of ``mxnet_acc.h``: the only module that builds the FFI.

The declarations are read from the header itself (the region between the
``ACC_CDEF_BEGIN`` and ``ACC_CDEF_END`` markers), never retyped here, so the
host and every plugin see one definition of the ABI.

Parsing them (cffi's ``cdef``, through pycparser) costs tens of milliseconds
of every ``import acc_host``. The build (build_plugins.py) therefore also
writes them pre-parsed beside the header copy, ``_bundled/mxnet_acc.cffi``
(:func:`write_preparsed`): the arguments of cffi's out-of-line ABI-mode FFI
(``set_source(name, None)``; ``emit_python_code``) as Python literals, with
the SHA-256 of the declarations they came from. The FFI is built from that
file when its SHA-256 is that of the header's declarations now, and by
parsing them otherwise (a stale or missing file costs the parse, never a
wrong declaration); :data:`FFI_SOURCE` says which. Both give the same types,
constants and functions (tests/abi/test_preparsed_cdef.py).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cffi

__all__ = ["HEADER_NAME", "PREPARSED_NAME", "header_path", "cdef_source", "ffi", "FFI_SOURCE",
           "API_VERSION", "status_name", "preparsed_text", "write_preparsed", "Library", "dlopen"]

HEADER_NAME = "mxnet_acc.h"
PREPARSED_NAME = "mxnet_acc.cffi"
# The module name the pre-parsed FFI carries (cffi's set_source name).
_FFI_NAME = "_acc_host_abi"
_PREPARSED_FORMAT = 1
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


def _cdef_digest(declarations: str) -> str:
    return hashlib.sha256(declarations.encode("utf-8")).hexdigest()


def preparsed_text(declarations: str) -> str:
    """The pre-parsed form of declarations (cffi-parsable C): what
    :func:`write_preparsed` writes, a Python literal (a dict) holding the
    format, the declarations' SHA-256 and the keyword arguments of
    ``_cffi_backend.FFI`` that cffi's ``emit_python_code`` produces."""
    import tempfile

    builder = cffi.FFI()
    builder.cdef(declarations)
    builder.set_source(_FFI_NAME, None)
    with tempfile.TemporaryDirectory() as folder:
        generated = Path(folder) / f"{_FFI_NAME}.py"
        with contextlib.redirect_stdout(io.StringIO()):  # cffi says "generating PATH"
            builder.emit_python_code(str(generated))
        tree = ast.parse(generated.read_text(encoding="utf-8"))
    calls = [node.value for node in tree.body if isinstance(node, ast.Assign)
             and isinstance(node.value, ast.Call)]
    if len(calls) != 1 or [ast.literal_eval(arg) for arg in calls[0].args] != [_FFI_NAME]:
        raise ValueError("cffi's emit_python_code wrote an unexpected module "
                         "(one FFI(name, ...) call expected)")
    arguments = {item.arg: ast.literal_eval(item.value) for item in calls[0].keywords}
    record = {"format": _PREPARSED_FORMAT, "cdef_sha256": _cdef_digest(declarations),
              "name": _FFI_NAME, "arguments": arguments}
    return "# Generated from mxnet_acc.h by build_plugins.py; do not edit.\n" + repr(record) + "\n"


def write_preparsed(out_dir: Path, header: Path | None = None) -> Path:
    """Writes the pre-parsed declarations of header (by default the one the
    host reads) to out_dir/mxnet_acc.cffi; returns its path."""
    path = Path(out_dir) / PREPARSED_NAME
    text = preparsed_text(cdef_source(header))
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def _preparsed_ffi(declarations: str) -> Any | None:
    """The FFI of the pre-parsed file beside the header, when it was made
    from declarations; else None."""
    path = header_path().parent / PREPARSED_NAME
    try:
        record = ast.literal_eval(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not (isinstance(record, dict) and record.get("format") == _PREPARSED_FORMAT
            and record.get("cdef_sha256") == _cdef_digest(declarations)
            and isinstance(record.get("arguments"), dict)):
        return None
    import _cffi_backend  # cffi's C module: what the pre-parsed FFI is

    try:
        return _cffi_backend.FFI(record["name"], **record["arguments"])
    except Exception:  # a file cffi cannot use (another cffi version's format): parse
        return None


# "pre-parsed": the FFI came from _bundled/mxnet_acc.cffi; "parsed": from
# cffi's cdef of the header's declarations.
FFI_SOURCE = "parsed"


@functools.cache
def _build_ffi() -> Any:
    global FFI_SOURCE
    declarations = cdef_source()
    preparsed = _preparsed_ffi(declarations)
    if preparsed is not None:
        FFI_SOURCE = "pre-parsed"
        return preparsed
    built = cffi.FFI()
    built.cdef(declarations)
    return built


ffi: cffi.FFI = _build_ffi()
# What a lib object raises for a declared symbol the library does not
# export: AttributeError from a parsed FFI, ffi.error from a pre-parsed one.
_MISSING: tuple[type[BaseException], ...] = (AttributeError, getattr(ffi, "error", AttributeError))


def raw_from_buffer() -> Callable[[Any, Any, bool], Any]:
    """cffi's C-level ``from_buffer(cdecl, buffer, require_writable)``
    without a Python wrapper: the pre-parsed FFI's own method, or the
    backend's function under a parsed ``cffi.FFI``."""
    backend = getattr(ffi, "_backend", None)
    if backend is not None:
        return backend.from_buffer  # type: ignore[no-any-return]
    return ffi.from_buffer  # type: ignore[no-any-return]


class Library:
    """A library opened through the FFI (:func:`dlopen`): its exported
    functions and the declarations' constants as attributes. A declared
    symbol the library does not export raises AttributeError, whichever
    FFI (pre-parsed or parsed) opened it; what was found is kept in the
    instance, so later lookups are plain attribute reads."""

    def __init__(self, lib: Any) -> None:
        self.__dict__["_cffi_lib"] = lib

    def __getattr__(self, name: str) -> Any:
        try:
            value = getattr(self.__dict__["_cffi_lib"], name)
        except _MISSING as error:
            raise AttributeError(str(error)) from None
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_cffi_lib"])


def dlopen(path: str | None, flags: int | None = None) -> Library:
    """The library at path (None: the process itself) through the FFI;
    OSError when the loader refuses it."""
    return Library(ffi.dlopen(path) if flags is None else ffi.dlopen(path, flags))


_constants = dlopen(None)  # integer constants of the cdef; reads no library symbol

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
