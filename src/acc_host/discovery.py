"""Finding accelerator libraries when acc_host is imported.

Two places are searched, in this order: the plugins bundled with the
installed package (unless ``MXNET_ACC_BUNDLED=0``), and every shared library
in the directory named by the ``MXNET_ACC_LIBRARIES`` environment variable.
A library that fails to load is reported with an :class:`AccLibraryWarning`
naming the file and the reason; the import itself never fails because of
one.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import AccHostError
from .library import AccLibrary
from .registry import register

__all__ = ["ENV_VAR", "BUNDLED_ENV_VAR", "AccLibraryWarning", "Found", "bundled_dir",
           "library_files", "discover",
           "report"]

ENV_VAR = "MXNET_ACC_LIBRARIES"
BUNDLED_ENV_VAR = "MXNET_ACC_BUNDLED"  # "0": do not load the bundled plugins
_LIBRARY_NAME = re.compile(r".*(\.so(\.\d+)*|\.dylib|\.dll)\Z")


class AccLibraryWarning(UserWarning):
    """An accelerator library found by discovery could not be loaded."""


@dataclass(frozen=True)
class Found:
    """One library discovery looked at: loaded, or the reason it was not."""

    path: Path
    source: str  # "bundled" or ENV_VAR
    library: AccLibrary | None
    error: str | None


_report: list[Found] = []


def bundled_dir() -> Path:
    return Path(__file__).resolve().parent / "_bundled"


def library_files(directory: Path) -> list[Path]:
    """Shared libraries directly inside directory, in name order."""
    return sorted(path for path in directory.iterdir()
                  if path.is_file() and _LIBRARY_NAME.match(path.name))


def _load(path: Path, source: str) -> None:
    try:
        _report.append(Found(path, source, register(path), None))
    except AccHostError as error:
        _report.append(Found(path, source, None, str(error)))
        warnings.warn(f"acc_host: skipped accelerator library {path} (from {source}): {error}",
                      AccLibraryWarning, stacklevel=3)


def discover() -> list[Found]:
    """Loads the bundled libraries and those of $MXNET_ACC_LIBRARIES; returns
    what was found this time."""
    start = len(_report)
    bundled = bundled_dir()
    if bundled.is_dir() and os.environ.get(BUNDLED_ENV_VAR, "1") != "0":
        for path in library_files(bundled):
            _load(path, "bundled")
    directory = os.environ.get(ENV_VAR)
    if directory:
        if Path(directory).is_dir():
            for path in library_files(Path(directory)):
                _load(path, ENV_VAR)
        else:
            warnings.warn(f"acc_host: {ENV_VAR}={directory!r} is not a directory",
                          AccLibraryWarning, stacklevel=2)
    return _report[start:]


def report() -> list[Found]:
    """Everything discovery has looked at in this process."""
    return list(_report)
