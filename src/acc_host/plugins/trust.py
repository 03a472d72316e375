"""Whether a library file found by discovery may be loaded at all, in the
spirit of ssh's StrictModes (docs/security.md has the trust model).

A path is walked one component at a time, the way the kernel resolves it:
every symlink met on the way (in the file's name or in a directory above
it) is recorded, and every real directory whose entries were looked up.
Then, for the user running acc_host (the effective uid):

* every directory walked, every symlink and the file itself must be owned
  by that user or by root;
* no directory walked may be writable by its group or by everyone, unless
  it has the sticky bit (``/tmp``: others cannot rename or replace what is
  not theirs there);
* the library file, and the directory named by ``MXNET_ACC_LIBRARIES`` (whose
  every library is loaded), must not be writable by group or everyone,
  sticky bit or not.

"Writable by its group" is excused when the group is the user's private
group (named like the user, the user's primary group, no other member), as
Debian's ssh does for umask-002 systems. ``MXNET_ACC_STRICT_MODES=0`` turns
the checks off. Where the platform has no POSIX owners (no ``os.geteuid``)
nothing is checked.
"""

from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass

from ..errors import LibraryError

__all__ = ["STRICT_ENV_VAR", "UntrustedLibraryError", "PathWalk", "strict_modes", "walk",
           "library_problems", "directory_problems", "check_library", "check_directory",
           "refusal"]

STRICT_ENV_VAR = "MXNET_ACC_STRICT_MODES"  # "0": load libraries whatever their permissions
_MAX_LINKS = 40  # as Linux's ELOOP limit


class UntrustedLibraryError(LibraryError):
    """A library (or the directory it was found in) could be changed by
    another user; ``problems`` lists every reason."""

    def __init__(self, message: str, path: str, problems: list[str]) -> None:
        super().__init__(message, path)
        self.problems = problems


@dataclass(frozen=True)
class PathWalk:
    """How a path resolves. ``path``: as given, made absolute; ``target``:
    the real path; ``links``: every symlink followed, in order;
    ``directories``: every real directory an entry was looked up in;
    ``error``: why the walk stopped early (a missing component: ``target``
    is then the path as far as it resolved, joined with the rest)."""

    path: str
    target: str
    links: tuple[str, ...]
    directories: tuple[str, ...]
    error: OSError | None = None

    @property
    def is_link(self) -> bool:
        return bool(self.links)


def strict_modes() -> bool:
    """Whether the checks apply (unless ``MXNET_ACC_STRICT_MODES=0``)."""
    return os.environ.get(STRICT_ENV_VAR, "1") != "0" and hasattr(os, "geteuid")


def walk(path: str | os.PathLike[str]) -> PathWalk:
    """Resolves path component by component, without normalizing ``..``
    before the symlinks in front of it are followed."""
    raw = os.fspath(path)
    given = os.path.abspath(raw)
    pending = _parts(raw if os.path.isabs(raw) else os.path.join(os.getcwd(), raw))
    current = os.sep
    links: list[str] = []
    directories: list[str] = []
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        if current not in directories:
            directories.append(current)
        candidate = os.path.join(current, part)
        try:
            status = os.lstat(candidate)
            if stat.S_ISLNK(status.st_mode):
                if len(links) >= _MAX_LINKS:
                    raise OSError(f"more than {_MAX_LINKS} symlinks")
                link = os.readlink(candidate)
        except OSError as error:
            rest = os.path.join(candidate, *pending) if pending else candidate
            return PathWalk(given, rest, tuple(links), tuple(directories), error)
        if stat.S_ISLNK(status.st_mode):
            links.append(candidate)
            pending = _parts(link) + pending
            if os.path.isabs(link):
                current = os.sep
        else:
            current = candidate
    return PathWalk(given, current, tuple(links), tuple(directories))


def _parts(path: str) -> list[str]:
    return path.split(os.sep)


def library_problems(path: str | os.PathLike[str]) -> tuple[PathWalk, list[str]]:
    """The walk of a library path and every reason not to trust it (none
    when the file does not exist: the loader reports that)."""
    return _problems(walk(path), "library")


def directory_problems(path: str | os.PathLike[str]) -> tuple[PathWalk, list[str]]:
    """The same for a directory every library of which is loaded."""
    return _problems(walk(path), "directory")


def _problems(resolved: PathWalk, kind: str) -> tuple[PathWalk, list[str]]:
    if not hasattr(os, "geteuid"):
        return resolved, []
    problems: list[str] = []
    for directory in resolved.directories:
        problems += _entry_problems(directory, "directory", allow_sticky=True)
    for link in resolved.links:
        problems += _entry_problems(link, "symlink", allow_sticky=True)
    if resolved.error is None:
        problems += _entry_problems(resolved.target, kind, allow_sticky=False)
    elif not isinstance(resolved.error, FileNotFoundError | NotADirectoryError):
        problems.append(f"{resolved.target} cannot be checked: {resolved.error}")
    return resolved, problems


def _entry_problems(path: str, kind: str, allow_sticky: bool) -> list[str]:
    try:
        status = os.lstat(path)
    except OSError as error:
        return [f"{kind} {path} cannot be checked: {error}"]
    problems = []
    me = os.geteuid()
    if status.st_uid not in (0, me):
        problems.append(f"{kind} {path} is owned by {_user(status.st_uid)}, not by you "
                        f"({_user(me)}) or root")
    if stat.S_ISLNK(status.st_mode):
        return problems  # a symlink's own mode means nothing
    writers = []
    if status.st_mode & stat.S_IWGRP and not _private_group(status.st_gid):
        writers.append(f"group {_group(status.st_gid)}")
    if status.st_mode & stat.S_IWOTH:
        writers.append("everyone")
    sticky = stat.S_ISDIR(status.st_mode) and status.st_mode & stat.S_ISVTX
    if writers and not (allow_sticky and sticky):
        problems.append(f"{kind} {path} is writable by {' and '.join(writers)} "
                        f"(mode {stat.filemode(status.st_mode)})")
    return problems


@functools.cache
def _user(uid: int) -> str:
    import pwd  # POSIX only, and read only to name an owner in a refusal

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


@functools.cache
def _group(gid: int) -> str:
    import grp  # POSIX only, and read only to name a group in a refusal

    try:
        return f"{grp.getgrgid(gid).gr_name} (gid {gid})"
    except KeyError:
        return f"gid {gid}"


@functools.cache
def _private_group(gid: int) -> bool:
    """Whether gid is the current user's own group: the primary group,
    named like the user, with no other member."""
    import grp  # POSIX only (see _user)
    import pwd

    try:
        user = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return (gid == user.pw_gid and group.gr_name == user.pw_name
            and set(group.gr_mem) <= {user.pw_name})


def refusal(path: str, problems: list[str]) -> UntrustedLibraryError:
    """The error refusing path for problems (not raised)."""
    return UntrustedLibraryError(
        f"not trusted: {'; '.join(problems)}: another user could change what is loaded (set "
        f"{STRICT_ENV_VAR}=0 to load it anyway; see docs/security.md)", path, problems)


def check_library(path: str | os.PathLike[str]) -> PathWalk:
    """The walk of a library path; raises UntrustedLibraryError when the
    checks apply and fail."""
    resolved, problems = library_problems(path)
    if problems and strict_modes():
        raise refusal(resolved.path, problems)
    return resolved


def check_directory(path: str | os.PathLike[str]) -> PathWalk:
    """The same for the directory named by ``MXNET_ACC_LIBRARIES``."""
    resolved, problems = directory_problems(path)
    if problems and strict_modes():
        raise refusal(resolved.path, problems)
    return resolved
