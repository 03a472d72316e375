"""acc_host.plugins.trust: the StrictModes-like checks on library paths, and how
symlinks are resolved (docs/security.md). Files here are plain files: no
library is loaded. Discovery's use of the checks is in test_safe_discovery.py.

The tests that need a file owned by another user chown it, which only root
can; as another user they are skipped.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

import pytest

from acc_host.errors import LibraryError
from acc_host.plugins import trust

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root can chown to another user")
NOBODY = 65534  # another user's and another group's id (nobody, nogroup)


def library(directory: Path, name: str = "libx.so", mode: int = 0o755) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"\x7fELF not really")
    path.chmod(mode)
    return path


def foreign_group() -> int:
    """A group that is not the user's private group, which the user may
    give a file (root: any)."""
    if os.geteuid() == 0:
        return NOBODY
    user = pwd.getpwuid(os.geteuid())
    for gid in os.getgroups():
        try:
            group = grp.getgrgid(gid)
        except KeyError:  # a group without a name is nobody's private group
            return gid
        private = (gid == user.pw_gid and group.gr_name == user.pw_name
                   and set(group.gr_mem) <= {user.pw_name})
        if not private:
            return gid
    pytest.skip("the user belongs to no group but a private one")


def owner(uid: int) -> str:
    """How a refusal names the owner uid: "name (uid N)", or "uid N"."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(trust.STRICT_ENV_VAR, raising=False)


def test_a_private_file_in_private_directories_passes(tmp_path: Path) -> None:
    path = library(tmp_path / "libs")
    resolved, problems = trust.library_problems(path)
    assert problems == []
    assert resolved.target == str(path) and not resolved.is_link
    assert resolved.directories[0] == "/" and resolved.directories[-1] == str(path.parent)
    assert trust.check_library(path) == resolved


@pytest.mark.parametrize(("mode", "writers"), [(0o757, "everyone"), (0o777, "everyone")])
def test_a_library_writable_by_everyone_is_refused(tmp_path: Path, mode: int,
                                                   writers: str) -> None:
    path = library(tmp_path, mode=mode)
    with pytest.raises(trust.UntrustedLibraryError) as error:
        trust.check_library(path)
    assert isinstance(error.value, LibraryError) and error.value.path == str(path)
    assert error.value.problems == [
        f"library {path} is writable by {writers} (mode {stat.filemode(os.stat(path).st_mode)})"]
    assert f"set {trust.STRICT_ENV_VAR}=0 to load it anyway" in str(error.value)


def test_a_library_writable_by_a_shared_group_is_refused(tmp_path: Path) -> None:
    path = library(tmp_path, mode=0o775)
    os.chown(path, -1, foreign_group())
    _, problems = trust.library_problems(path)
    assert len(problems) == 1 and "is writable by group" in problems[0]


def test_the_users_private_group_may_write(tmp_path: Path) -> None:
    user = pwd.getpwuid(os.geteuid())
    try:
        group = grp.getgrgid(user.pw_gid)
    except KeyError:
        pytest.skip("the user's primary group has no entry")
    if group.gr_name != user.pw_name or set(group.gr_mem) - {user.pw_name}:
        pytest.skip(f"group {group.gr_name} is not {user.pw_name}'s private group")
    path = library(tmp_path, mode=0o775)
    os.chown(path, -1, user.pw_gid)
    assert trust.library_problems(path)[1] == []


def test_a_writable_directory_above_the_library_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    path = library(shared / "vendor")
    shared.chmod(0o777)
    _, problems = trust.library_problems(path)
    assert problems == [f"directory {shared} is writable by everyone (mode drwxrwxrwx)"]


def test_a_sticky_directory_above_is_accepted_but_not_as_the_scanned_one(tmp_path: Path) -> None:
    public = tmp_path / "public"  # like /tmp
    path = library(public / "mine")
    public.chmod(0o1777)
    assert trust.library_problems(path)[1] == []
    assert trust.directory_problems(public / "mine")[1] == []
    # A library directly in it is fine (no one else may replace it), but
    # every library of the directory is another matter: anyone may add one.
    library(public, "libdirect.so")
    assert trust.library_problems(public / "libdirect.so")[1] == []
    _, problems = trust.directory_problems(public)
    assert problems == [f"directory {public} is writable by everyone (mode drwxrwxrwt)"]
    with pytest.raises(trust.UntrustedLibraryError, match="writable by everyone"):
        trust.check_directory(public)


@ROOT_ONLY
def test_a_library_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = library(tmp_path)
    os.chown(path, NOBODY, -1)
    _, problems = trust.library_problems(path)
    assert problems == [f"library {path} is owned by {owner(NOBODY)}, not by you "
                        f"({owner(0)}) or root"]


@ROOT_ONLY
def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    path = library(theirs)
    os.chown(theirs, NOBODY, -1)
    _, problems = trust.library_problems(path)
    assert problems == [f"directory {theirs} is owned by {owner(NOBODY)}, not by you "
                        f"({owner(0)}) or root"]


def test_symlinks_are_followed_and_recorded(tmp_path: Path) -> None:
    real = library(tmp_path / "real", "libreal.so.1")
    links = tmp_path / "links"
    links.mkdir()
    (links / "libreal.so").symlink_to("../real/libreal.so.1")
    (links / "libalias.so").symlink_to(links / "libreal.so")
    resolved = trust.walk(links / "libalias.so")
    assert resolved.path == str(links / "libalias.so") and resolved.target == str(real)
    assert resolved.links == (str(links / "libalias.so"), str(links / "libreal.so"))
    assert str(real.parent) in resolved.directories and resolved.error is None


def test_dot_dot_after_a_symlink_is_resolved_physically(tmp_path: Path) -> None:
    library(tmp_path / "b", "libx.so")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "into_b").symlink_to(tmp_path / "b" / "deeper", target_is_directory=True)
    (tmp_path / "b" / "deeper").mkdir()
    # into_b/.. is b (where the link points), not a (as os.path.normpath says).
    resolved = trust.walk(tmp_path / "a" / "into_b" / ".." / "libx.so")
    assert resolved.target == str(tmp_path / "b" / "libx.so") and resolved.error is None


def test_the_checks_apply_to_the_target_of_a_symlink(tmp_path: Path) -> None:
    target = library(tmp_path / "elsewhere", mode=0o666)
    link = tmp_path / "good" / "libx.so"
    link.parent.mkdir()
    link.symlink_to(target)
    resolved, problems = trust.library_problems(link)
    assert resolved.target == str(target)
    assert problems == [f"library {target} is writable by everyone (mode -rw-rw-rw-)"]


def test_a_symlink_in_a_writable_directory_is_refused(tmp_path: Path) -> None:
    target = library(tmp_path / "private")
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "libx.so").symlink_to(target)
    drop.chmod(0o777)
    _, problems = trust.library_problems(drop / "libx.so")
    assert problems == [f"directory {drop} is writable by everyone (mode drwxrwxrwx)"]


@ROOT_ONLY
def test_a_symlink_owned_by_another_user_in_a_sticky_directory_is_refused(tmp_path: Path) -> None:
    target = library(tmp_path / "private")
    public = tmp_path / "public"
    public.mkdir()
    link = public / "libx.so"
    link.symlink_to(target)
    os.lchown(link, NOBODY, -1)  # they could point it elsewhere
    public.chmod(0o1777)
    _, problems = trust.library_problems(link)
    assert problems == [f"symlink {link} is owned by {owner(NOBODY)}, not by you "
                        f"({owner(0)}) or root"]


def test_a_symlink_loop_cannot_be_checked(tmp_path: Path) -> None:
    (tmp_path / "liba.so").symlink_to(tmp_path / "libb.so")
    (tmp_path / "libb.so").symlink_to(tmp_path / "liba.so")
    resolved, problems = trust.library_problems(tmp_path / "liba.so")
    assert resolved.error is not None and len(resolved.links) == 40
    assert problems == [f"{resolved.target} cannot be checked: more than 40 symlinks"]


def test_a_missing_file_is_left_to_the_loader(tmp_path: Path) -> None:
    for missing in (tmp_path / "libnone.so", tmp_path / "nodir" / "libnone.so"):
        resolved, problems = trust.library_problems(missing)
        assert problems == [] and isinstance(resolved.error, FileNotFoundError)
        assert resolved.target == str(missing)


def test_strict_modes_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = library(tmp_path, mode=0o777)
    for value in ("", "1", "yes", "off"):  # only "0" turns them off
        monkeypatch.setenv(trust.STRICT_ENV_VAR, value)
        assert trust.strict_modes()
        with pytest.raises(trust.UntrustedLibraryError):
            trust.check_library(path)
    monkeypatch.setenv(trust.STRICT_ENV_VAR, "0")
    assert not trust.strict_modes()
    assert trust.check_library(path).target == str(path)
    assert trust.library_problems(path)[1]  # still found, only not enforced
