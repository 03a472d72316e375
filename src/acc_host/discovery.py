"""Finding accelerator libraries when acc_host is imported.

Three places are searched, in this order:

1. the plugins bundled with the installed package (unless
   ``MXNET_ACC_BUNDLED=0``), in file-name order;
2. every shared library in the directory named by the
   ``MXNET_ACC_LIBRARIES`` environment variable, in file-name order;
3. the libraries that installed packages register through the
   ``acc_host.plugins`` entry-point group (unless
   ``MXNET_ACC_ENTRY_POINTS=0``), by distribution and entry-point name; see
   :mod:`acc_host.entry_points` for the contract.

Every library looked at is recorded in :func:`report` with its source
(``bundled``, ``MXNET_ACC_LIBRARIES`` or ``entry point DIST:NAME``). One
that fails to load, or an entry point that gives no usable path, is
reported with an :class:`AccLibraryWarning` naming it and the reason; the
import itself never fails because of one.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import entry_points
from .errors import AccHostError, EntryPointError
from .library import AccLibrary
from .registry import register

__all__ = ["ENV_VAR", "BUNDLED_ENV_VAR", "ENTRY_POINTS_ENV_VAR", "AccLibraryWarning", "Found",
           "bundled_dir", "library_files", "discover", "report"]

ENV_VAR = "MXNET_ACC_LIBRARIES"
BUNDLED_ENV_VAR = "MXNET_ACC_BUNDLED"  # "0": do not load the bundled plugins
ENTRY_POINTS_ENV_VAR = entry_points.ENV_VAR  # "0": do not look at the entry points
_LIBRARY_NAME = re.compile(r".*(\.so(\.\d+)*|\.dylib|\.dll)\Z")


class AccLibraryWarning(UserWarning):
    """An accelerator library found by discovery could not be loaded."""


@dataclass(frozen=True)
class Found:
    """One library discovery looked at: loaded, or the reason it was not."""

    path: Path | None  # None: an entry point that gave no usable path
    source: str  # "bundled", ENV_VAR or "entry point DIST:NAME"
    library: AccLibrary | None
    error: str | None


_report: list[Found] = []


def bundled_dir() -> Path:
    return Path(__file__).resolve().parent / "_bundled"


def library_files(directory: Path) -> list[Path]:
    """Shared libraries directly inside directory, in name order."""
    return sorted(path for path in directory.iterdir()
                  if path.is_file() and _LIBRARY_NAME.match(path.name))


def _load(path: Path, source: str, stacklevel: int = 3) -> None:
    try:
        _report.append(Found(path, source, register(path), None))
    except AccHostError as error:
        _report.append(Found(path, source, None, str(error)))
        warnings.warn(f"acc_host: skipped accelerator library {path} (from {source}): {error}",
                      AccLibraryWarning, stacklevel=stacklevel)


def _load_entry_points() -> None:
    try:
        points = entry_points.plugin_entry_points()
    except Exception as error:  # broken metadata of some installed distribution
        warnings.warn(f"acc_host: reading the {entry_points.GROUP} entry points failed: "
                      f"{type(error).__name__}: {error}", AccLibraryWarning, stacklevel=3)
        return
    for point in points:
        source = entry_points.label(point)
        try:
            paths = entry_points.library_paths(point)
        except EntryPointError as error:
            _report.append(Found(None, source, None, str(error)))
            warnings.warn(f"acc_host: skipped {error}", AccLibraryWarning, stacklevel=3)
            continue
        for path in paths:
            _load(path, source, stacklevel=4)


def discover() -> list[Found]:
    """Loads the bundled libraries, those of $MXNET_ACC_LIBRARIES and those of
    the ``acc_host.plugins`` entry points; returns what was found this time."""
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
    if entry_points.enabled():
        _load_entry_points()
    return _report[start:]


def report() -> list[Found]:
    """Everything discovery has looked at in this process."""
    return list(_report)
