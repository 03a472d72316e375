"""Finding accelerator libraries when acc_host is imported.

Three places are searched, in this order:

1. the plugins bundled with the installed package (unless
   ``MXNET_ACC_BUNDLED=0``), in file-name order;
2. every shared library in the directory named by the
   ``MXNET_ACC_LIBRARIES`` environment variable, in file-name order;
3. the libraries that installed packages register through the
   ``acc_host.plugins`` entry-point group (unless
   ``MXNET_ACC_ENTRY_POINTS=0``), by distribution and entry-point name; see
   :mod:`acc_host.plugins.entry_points` for the contract.

The bundled plugins are part of the installed package and load directly.
Every other library must first pass the trust checks of
:mod:`acc_host.plugins.trust` (the file, the directories above it and the
``MXNET_ACC_LIBRARIES`` directory writable only by the user or root; unless
``MXNET_ACC_STRICT_MODES=0``), then is loaded once in a probe process
(:mod:`acc_host.plugins.probe`, unless ``MXNET_ACC_PROBE=0``; results are
cached): one that crashes, aborts, exits or hangs there is not loaded here.
docs/security.md has the trust model.

Every library looked at is recorded in :func:`report` with its source
(``bundled``, ``MXNET_ACC_LIBRARIES`` or ``entry point DIST:NAME``), the
real file when the path goes through symlinks, and the probe's result. One
that is refused or fails to load, or an entry point that gives no usable
path, is reported with an :class:`AccLibraryWarning` naming it and the
reason; the import itself never fails because of one.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..abi.library import AccLibrary
from ..errors import AccHostError, EntryPointError
from . import entry_points, probe, trust
from .probe import ProbeResult
from .registry import register

__all__ = ["ENV_VAR", "BUNDLED_ENV_VAR", "ENTRY_POINTS_ENV_VAR", "AccLibraryWarning", "Found",
           "bundled_dir", "library_files", "discover", "report"]

ENV_VAR = "MXNET_ACC_LIBRARIES"
BUNDLED_ENV_VAR = "MXNET_ACC_BUNDLED"  # "0": do not load the bundled plugins
ENTRY_POINTS_ENV_VAR = entry_points.ENV_VAR  # "0": do not look at the entry points
_LIBRARY_NAME = re.compile(r".*(\.so(\.\d+)*|\.dylib|\.dll)\Z")
# Warnings point at the caller of discover(): _warn <- a helper <- discover <- caller.
_STACKLEVEL = 4


class AccLibraryWarning(UserWarning):
    """An accelerator library found by discovery was refused or could not be loaded."""


@dataclass(frozen=True)
class Found:
    """One library discovery looked at: loaded, or the reason it was not.

    ``target`` is the real file when ``path`` goes through a symlink (the
    file the trust checks looked at and the loader loads), else None.
    ``probe`` is the probe's result, None when the library was not probed
    (bundled, ``MXNET_ACC_PROBE=0``, refused before, or no such file).
    """

    path: Path | None  # None: an entry point that gave no usable path
    source: str  # "bundled", ENV_VAR or "entry point DIST:NAME"
    library: AccLibrary | None
    error: str | None
    target: Path | None = None
    probe: ProbeResult | None = None


@dataclass
class _Candidate:
    """A library to check, probe and load, or the reason it will not be."""

    path: Path | None
    source: str
    error: str | None = None
    warned: bool = False  # its warning was given already (with its whole directory's)
    target: Path | None = None
    probe: ProbeResult | None = None


_report: list[Found] = []


def bundled_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "_bundled"


def library_files(directory: Path) -> list[Path]:
    """Shared libraries directly inside directory, in name order."""
    return sorted(path for path in directory.iterdir()
                  if path.is_file() and _LIBRARY_NAME.match(path.name))


def _not_a_file(path: Path) -> str | None:
    """Why an entry named like a library cannot be one (a dangling symlink,
    a symlink loop, a directory, a FIFO, a device, a socket), or None for
    a regular file (after its symlinks)."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return "a dangling symlink (its target does not exist)" if path.is_symlink() \
            else "gone while the directory was read"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symlink loop"
        return f"cannot be examined: {error.strerror or error}"
    mode = status.st_mode
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            via = f" (through a symlink to {os.path.realpath(path)})" if path.is_symlink() else ""
            return f"{what}{via}, not a library file"
    return None if stat.S_ISREG(mode) else "not a regular file"


def _named_entries(directory: Path) -> list[tuple[Path, str | None]]:
    """Every entry of directory named like a shared library, in name order,
    with the reason it is not a library file (None for a regular file)."""
    return [(path, _not_a_file(path)) for path in sorted(directory.iterdir())
            if _LIBRARY_NAME.match(path.name)]


def _warn(message: str) -> None:
    warnings.warn(message, AccLibraryWarning, stacklevel=_STACKLEVEL)


def _load(candidate: _Candidate) -> None:
    """Registers the candidate's library unless it was refused; records
    what happened."""
    path, source = candidate.path, candidate.source
    library = None
    error = candidate.error
    if error is None and path is not None:  # (an entry point without a path has an error)
        try:
            library = register(path)
        except AccHostError as failure:
            error = str(failure)
        except Exception as failure:  # a plugin can make anything go wrong
            error = f"{type(failure).__name__}: {failure}"
    _report.append(Found(path, source, library, error, candidate.target, candidate.probe))
    if error is None or candidate.warned:
        return
    if path is None:  # the error starts with the entry point's label
        _warn(f"acc_host: skipped {error}")
    else:
        _warn(f"acc_host: skipped accelerator library {path} (from {source}): {error}")


def _directory_candidates(directory: str) -> list[_Candidate]:
    """The libraries of the MXNET_ACC_LIBRARIES directory; all refused when
    the directory fails the trust checks."""
    folder = Path(directory)
    if not folder.is_dir():
        _warn(f"acc_host: {ENV_VAR}={directory!r} is not a directory")
        return []
    try:
        found = [_Candidate(path, ENV_VAR, None if reason is None else f"not loaded: {reason}")
                 for path, reason in _named_entries(folder)]
    except OSError as error:
        _warn(f"acc_host: {ENV_VAR}={directory!r} cannot be read: {error}")
        return []
    if trust.strict_modes():
        try:
            trust.check_directory(folder)
        except Exception as error:  # UntrustedLibraryError; anything else refuses as well
            reason = str(error) if isinstance(error, AccHostError) else (
                f"not trusted: the trust checks failed: {type(error).__name__}: {error}")
            _warn(f"acc_host: skipped every library in {ENV_VAR}={directory!r}: {reason}")
            for candidate in found:
                candidate.error, candidate.warned = reason, True
    return found


def _entry_point_candidates() -> list[_Candidate]:
    try:
        points = entry_points.plugin_entry_points()
    except Exception as error:  # broken metadata of some installed distribution
        _warn(f"acc_host: reading the {entry_points.GROUP} entry points failed: "
              f"{type(error).__name__}: {error}")
        return []
    found = []
    for point in points:
        source = entry_points.label(point)
        try:
            paths = entry_points.library_paths(point)
        except EntryPointError as error:
            found.append(_Candidate(None, source, str(error)))
            continue
        found += [_Candidate(path, source) for path in paths]
    return found


def _check_trust(candidates: list[_Candidate]) -> None:
    """Resolves every candidate's symlinks; refuses those failing the trust
    checks (unless MXNET_ACC_STRICT_MODES=0)."""
    strict = trust.strict_modes()
    for candidate in candidates:
        if candidate.path is None:
            continue
        try:
            resolved, problems = trust.library_problems(candidate.path)
        except Exception as error:  # never fatal: refuse what could not be checked
            candidate.error = candidate.error or (
                f"not trusted: the trust checks failed: {type(error).__name__}: {error}")
            continue
        if resolved.is_link:
            candidate.target = Path(resolved.target)
        if problems and strict and candidate.error is None:
            candidate.error = str(trust.refusal(resolved.path, problems))


def _probe(candidates: list[_Candidate]) -> None:
    """Loads every candidate not refused yet in a probe process (or finds
    the result in the cache); refuses those that did not survive it."""
    if not probe.enabled():
        return
    todo = [candidate for candidate in candidates if candidate.error is None
            and candidate.path is not None and candidate.path.is_file()]
    if not todo:
        return
    timeout, problem = probe.timeout_from_environment()
    if problem:
        _warn(f"acc_host: {problem}")
    try:
        results = probe.probe_many([candidate.path for candidate in todo
                                              if candidate.path is not None], timeout)
    except Exception as error:  # never fatal: what could not be probed is not loaded
        for candidate in todo:
            candidate.error = (f"could not be probed: {type(error).__name__}: {error} (set "
                               f"{probe.PROBE_ENV_VAR}=0 to load libraries without "
                               "probing them)")
        return
    for candidate, result in zip(todo, results):
        candidate.probe = result
        if not result.safe:
            candidate.error = result.detail + (
                f" (a cached result: the file is probed again once it changes, or with "
                f"{probe.CACHE_ENV_VAR}=0)" if result.cached else "")


def discover() -> list[Found]:
    """Loads the bundled libraries, those of $MXNET_ACC_LIBRARIES and those of
    the ``acc_host.plugins`` entry points; returns what was found this time."""
    start = len(_report)
    bundled = bundled_dir()
    if bundled.is_dir() and os.environ.get(BUNDLED_ENV_VAR, "1") != "0":
        for path in library_files(bundled):
            _load(_Candidate(path, "bundled"))
    candidates: list[_Candidate] = []
    directory = os.environ.get(ENV_VAR)
    if directory:
        candidates += _directory_candidates(directory)
    if entry_points.enabled():
        candidates += _entry_point_candidates()
    _check_trust(candidates)
    _probe(candidates)
    for candidate in candidates:
        _load(candidate)
    return _report[start:]


def report() -> list[Found]:
    """Everything discovery has looked at in this process."""
    return list(_report)
