"""The state one conformance run shares between its checks.

The library under test is loaded from a private copy in a temporary
directory, so that the kit gets a fresh instance of the plugin (its own
static state, its own initialize()) and never disturbs a copy the process
already uses (mx_releaseAll on a device would free the arrays of the
running program). A library that cannot be loaded from elsewhere (it finds
sibling libraries through ``$ORIGIN``) is loaded from its own path instead.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

from ..abi import cdata, header
from ..abi.library import AccLibrary, validate_acc_name
from ..errors import LibraryError, NotALibraryError
from ..trace import recorder
from .report import CheckFailed, CheckSkipped

__all__ = ["Session", "status_text", "ERR_INVALID_ARG", "ERR_NOT_FOUND", "ERR_DEVICE",
           "ERR_STATE"]

_CODES = {name: code for code, name in
          ((code, header.status_name(code)) for code in range(32))}
ERR_INVALID_ARG: int = _CODES["MX_ACC_ERR_INVALID_ARG"]
ERR_NOT_FOUND: int = _CODES["MX_ACC_ERR_NOT_FOUND"]
ERR_DEVICE: int = _CODES["MX_ACC_ERR_DEVICE"]
ERR_STATE: int = _CODES["MX_ACC_ERR_STATE"]

# The name the private copy is loaded under until its own name is checked.
_PROVISIONAL_NAME = "conformance"


def status_text(code: int) -> str:
    """"MX_ACC_ERR_NOT_FOUND (5)" for 5."""
    return f"{header.status_name(code)} ({code})"


class Session:
    """One library under test: where it is, the loaded copy once
    :meth:`load` succeeded, the devices to test and caches the checks share."""

    def __init__(self, path: str, devices: Sequence[int] | None = None) -> None:
        self.path = os.path.realpath(os.fspath(path))
        self.requested_devices = None if devices is None else [int(d) for d in devices]
        self.devices: list[int] = []
        self.library: AccLibrary | None = None
        self.load_error: str | None = None
        self.load_note = ""
        self._workdir = tempfile.TemporaryDirectory(prefix="acc_conformance_")
        self.cache: dict[str, Any] = {}

    # ---- files ---------------------------------------------------------------

    def private_copy(self, label: str) -> str:
        """A new copy of the library file (a separate instance once loaded)."""
        directory = os.path.join(self._workdir.name, label)
        os.makedirs(directory, exist_ok=True)
        target = os.path.join(directory, os.path.basename(self.path))
        shutil.copy2(self.path, target)
        return target

    @functools.cached_property
    def raw(self) -> cdata.RawLibrary:
        """The library's private copy, opened unchecked (dlopen only:
        nothing is called), for the symbol checks."""
        return cdata.RawLibrary(self.load_path)

    @functools.cached_property
    def load_path(self) -> str:
        """The file the in-process checks load: a private copy when it loads."""
        if not os.path.isfile(self.path):
            return self.path
        copy = self.private_copy("main")
        try:
            cdata.RawLibrary(copy)
        except OSError:
            try:
                cdata.RawLibrary(self.path)
            except OSError:
                return copy  # fails either way: report the copy's error
            self.load_note = ("loaded from its own path: a copy elsewhere does not load, so the "
                              "kit shares the library with this process")
            return self.path
        return copy

    # ---- loading ---------------------------------------------------------------

    def load(self) -> AccLibrary:
        """Loads the library through acc_host's own loader (AccLibrary):
        symbols, initialize(), name, devices, modes. Raises LibraryError."""
        if self.library is not None:
            return self.library
        try:
            library = AccLibrary(self.load_path, acc_name=_PROVISIONAL_NAME,
                                 tracer=recorder.current())
        except NotALibraryError as error:
            raise LibraryError(str(error).replace(self.load_path, self.path), self.path) from None
        try:
            library.name = validate_acc_name(library.library_name, self.path)
        except LibraryError:
            pass  # abi.name reports it; messages keep the provisional name
        self.library = library
        count = library.num_devices
        wanted = list(range(count)) if self.requested_devices is None else self.requested_devices
        self.devices = [dev for dev in wanted if 0 <= dev < count]
        return library

    def require_library(self) -> AccLibrary:
        """The loaded library, or CheckSkipped when it did not load."""
        if self.library is None:
            raise CheckSkipped("the library did not load (see abi.load)")
        return self.library

    def require_devices(self) -> list[int]:
        self.require_library()
        if not self.devices:
            raise CheckSkipped("no device selected")
        return self.devices

    def require_imperative(self) -> AccLibrary:
        library = self.require_library()
        if not library.supports_imperative:
            raise CheckSkipped("symbolic-only library (supportsImperative() is 0): no device "
                               "memory functions")
        return library

    # ---- raw calls ---------------------------------------------------------------

    def last_error(self) -> str:
        library = self.require_library()
        return library.last_error()

    def has_last_error(self) -> bool:
        return self.require_library()._last_error is not None

    def expect_status(self, what: str, status: int, *expected: int) -> None:
        """CheckFailed unless status is one of expected, naming the plugin's message."""
        if status in expected:
            return
        wanted = " or ".join(status_text(code) for code in expected)
        message = self.last_error() if status != header.OK else ""
        suffix = f": {message}" if message else ""
        raise CheckFailed(f"{what} returned {status_text(status)}, expected {wanted}{suffix}")

    def cleanup(self) -> None:
        """Removes the private copies (the loaded code stays mapped)."""
        self._workdir.cleanup()
