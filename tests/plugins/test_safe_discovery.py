"""Discovery cannot break the host: libraries found through
MXNET_ACC_LIBRARIES or entry points are checked (acc_host.plugins.trust) and probed
in a child process first (acc_host.plugins.probe), with the result cached.

The misbehaving libraries are builds of tests/plugins/hostile_acc.c. Every
import of acc_host that discovers them runs in a child process (this one's
registry stays as it is) with a probe cache of its own; the host's survival
is that child's exit status 0. $HOSTILE_MARK_FILE tells which processes
loaded a library: "PID NAME" per load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.paths import TEST_PLUGINS

import acc_host as mx
import build_plugins
from acc_host.errors import LibraryError
from acc_host.plugins import probe as discovery_probe
from acc_host.plugins.probe import ProbeFailedError, ProbeResult

SRC = Path(mx.__file__).resolve().parent.parent
HOSTILE_SOURCE = TEST_PLUGINS / "hostile_acc.c"
SANITIZE = os.environ.get("ACC_HOST_SANITIZE") == "1"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root can chown to another user")

# The rows of the table in docs/security.md: what each build does, and what
# discovery reports (the probe's outcome and stage, and the words of the reason).
CRASHES = {
    "segv_init": ({"HOSTILE_SEGV": True}, "crashed", "initialize",
                  "killed by SIGSEGV in initialize() in a probe process"),
    "abort_init": ({"HOSTILE_ABORT": True}, "crashed", "initialize",
                   "killed by SIGABRT in initialize() in a probe process"),
    "exit3_init": ({"HOSTILE_EXIT": 3}, "exited", "initialize",
                   "exited with status 3 in initialize() in a probe process"),
    "exit0_init": ({"HOSTILE_EXIT": 0}, "exited", "initialize",
                   "exited with status 0 in initialize() in a probe process"),
    "segv_load": ({"HOSTILE_SEGV": True, "HOSTILE_IN_CONSTRUCTOR": True}, "crashed", "load",
                  "killed by SIGSEGV while being loaded (dlopen, its constructors"),
    "abort_unload": ({"HOSTILE_ABORT": True, "HOSTILE_IN_DESTRUCTOR": True}, "crashed", "exit",
                     "killed by SIGABRT at exit, after loading and initializing"),
}
HANGS = {
    "hang_init": ({"HOSTILE_HANG": True}, "in initialize()"),
    "hang_load": ({"HOSTILE_HANG": True, "HOSTILE_IN_CONSTRUCTOR": True}, "while being loaded"),
    "fork_hang": ({"HOSTILE_FORK_HANG": True}, "in initialize()"),
}

REPORT = textwrap.dedent("""
    import json, os, acc_host as mx
    from acc_host.cli.list_cmd import records
    print(json.dumps({"pid": os.getpid(), "names": sorted(lib.name for lib in mx.libraries()),
                      "records": records()}))
    """)


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """hostile(label, NAME=value, ...): hostile_acc.c built with -DNAME=value
    (a bare -DNAME for True) into lib<label>.so, once per label."""
    out = tmp_path_factory.mktemp("hostile_plugins")
    built: dict[str, Path] = {}

    def build(label: str, **macros: object) -> Path:
        if label not in built:
            macros.setdefault("HOSTILE_NAME", f'"{label}"')
            flags = [f"-D{name}" if value is True else f"-D{name}={value}"
                     for name, value in macros.items()]
            built[label] = build_plugins.compile_library(
                [HOSTILE_SOURCE], out / build_plugins.library_name(label), sanitize=SANITIZE,
                werror=True, extra_flags=flags)
        return built[label]

    return build


def install(directory: Path, library: Path, name: str | None = None, mode: int = 0o755) -> Path:
    """A copy of library in directory (a file of its own: its own cache entry)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (name or library.name)
    shutil.copyfile(library, path)
    path.chmod(mode)
    return path


def host(code: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs code in a child with only the given discovery variables set."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("MXNET_ACC_", "HOSTILE_"))}
    environment.update({"PYTHONPATH": os.pathsep.join([str(SRC), *filter(None, [
        os.environ.get("PYTHONPATH")])]), "MXNET_ACC_BUNDLED": "0",
        "MXNET_ACC_ENTRY_POINTS": "0", "MXNET_ACC_PROBE_CACHE": str(cache), **env})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, timeout=180, check=False)


def report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr  # the host survived
    result = json.loads(done.stdout.splitlines()[-1])
    result["by_file"] = {Path(record["link"] or record["path"]).name: record
                         for record in result["records"] if record["path"]}
    return result


def marks(path: Path) -> list[tuple[int, str]]:
    """(pid, library name) for every load recorded in the mark file."""
    if not path.exists():
        return []
    return [(int(pid), name) for pid, name in
            (line.split() for line in path.read_text().splitlines())]


# ---- crashes, aborts, exits and hangs --------------------------------------------------


def test_libraries_that_crash_abort_or_exit_are_skipped(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"))
    for label, (macros, *_) in CRASHES.items():
        install(accs, hostile(label, **macros))
    cache, mark = tmp_path / "cache.json", tmp_path / "marks"
    done = host(REPORT, cache, MXNET_ACC_LIBRARIES=str(accs), HOSTILE_MARK_FILE=str(mark))
    first = report(done)
    assert first["names"] == ["calm"]
    calm = first["by_file"]["libcalm.so"]
    assert calm["loaded"] and calm["probe"] == {"outcome": "ok", "stage": "done", "cached": False}
    for label, (_, outcome, stage, words) in CRASHES.items():
        record = first["by_file"][f"lib{label}.so"]
        assert not record["loaded"] and words in record["error"], record
        assert record["error"].endswith("so it was not loaded; its last output: "
                                        f"'hostile_acc: misbehaving {_where(stage)}'")
        assert record["probe"] == {"outcome": outcome, "stage": stage, "cached": False}
        assert (f"AccLibraryWarning: acc_host: skipped accelerator library {accs}/lib{label}.so "
                f"(from MXNET_ACC_LIBRARIES): {words}") in done.stderr
    # calm was loaded twice: in its probe process and in the host; the probe
    # process did not discover (and load) anything else.
    calm_loads = [pid for pid, name in marks(mark) if name == "calm"]
    assert len(calm_loads) == 2 and first["pid"] in calm_loads

    # The next import finds every verdict in the cache and starts no child.
    mark.unlink()
    again = report(host(REPORT, cache, MXNET_ACC_LIBRARIES=str(accs),
                        HOSTILE_MARK_FILE=str(mark)))
    assert again["names"] == ["calm"] and marks(mark) == [(again["pid"], "calm")]
    for label, (_, outcome, stage, words) in CRASHES.items():
        record = again["by_file"][f"lib{label}.so"]
        assert record["probe"] == {"outcome": outcome, "stage": stage, "cached": True}
        assert words in record["error"] and "(a cached result: the file is probed again" in (
            record["error"])
    assert again["by_file"]["libcalm.so"]["probe"]["cached"] is True


def _where(stage: str) -> str:
    return {"load": "in its constructor", "exit": "in its destructor"}.get(stage,
                                                                          "in initialize()")


def test_libraries_that_hang_are_killed_after_the_time_limit(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"))
    for label, (macros, _) in HANGS.items():
        install(accs, hostile(label, **macros))
    helper = tmp_path / "helper.pid"
    started = time.monotonic()
    result = report(host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs),
                         MXNET_ACC_PROBE_TIMEOUT="3", HOSTILE_PID_FILE=str(helper)))
    elapsed = time.monotonic() - started
    assert result["names"] == ["calm"]
    for label, (_, where) in HANGS.items():
        record = result["by_file"][f"lib{label}.so"]
        assert record["error"].startswith(f"timed out after 3 s {where}"), record
        assert record["probe"]["outcome"] == "timeout"
    # Four probes, two at a time at most: nobody waited for the hangs one by one.
    assert elapsed < 3 * 3 + 30
    # The helper the library forked was killed with its process group.
    pid = int(helper.read_text())
    assert not _alive(pid), f"the probe's helper process {pid} is still running"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")  # a zombie nobody reaped yet is dead


def test_a_cached_timeout_is_retried_with_a_longer_limit() -> None:
    identity = [1, 2, 3, 4, 5]
    entry = {"id": identity, "result": ProbeResult("/x.so", "timeout", "initialize",
                                                   "timed out", timeout=2.0).to_json()}
    assert discovery_probe._from_cache(entry, identity, 2.0).cached is True
    assert discovery_probe._from_cache(entry, identity, 1.0).outcome == "timeout"
    assert discovery_probe._from_cache(entry, identity, 5.0) is None
    assert discovery_probe._from_cache(entry, [1, 2, 3, 4, 6], 2.0) is None  # the file changed


# ---- the probe and its cache -------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "probe.json"
    monkeypatch.setenv(discovery_probe.CACHE_ENV_VAR, str(path))
    monkeypatch.delenv(discovery_probe.TIMEOUT_ENV_VAR, raising=False)
    return path


def test_probe_a_library_before_loading_it(hostile, tmp_path: Path, cache: Path) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    result = discovery_probe.probe(path)
    assert (result.outcome, result.stage, result.cached) == ("ok", "done", False)
    assert (result.name, result.devices, result.api_version) == ("calm", 2, mx.API_VERSION)
    assert result.safe and result.path == str(path)
    result.check()
    entries = json.loads(cache.read_text())["entries"]
    assert list(entries) == [str(path)] and entries[str(path)]["result"]["outcome"] == "ok"
    assert discovery_probe.probe(path).cached is True

    # The file changes (same inode, new contents): it is probed again.
    shutil.copyfile(hostile("segv_init", HOSTILE_SEGV=True), path)
    crashed = discovery_probe.probe(path)
    assert (crashed.outcome, crashed.stage, crashed.cached) == ("crashed", "initialize", False)
    with pytest.raises(ProbeFailedError, match="killed by SIGSEGV in initialize") as error:
        crashed.check()
    assert isinstance(error.value, LibraryError)
    assert (error.value.outcome, error.value.stage, error.value.path) == (
        "crashed", "initialize", str(path))
    assert discovery_probe.probe(path).cached is True


def test_a_library_that_fails_cleanly_is_safe_to_load(build_fake, cache: Path) -> None:
    result = discovery_probe.probe(build_fake("omits", FAKE_OMIT_SYMBOLS=True))
    assert result.outcome == "error" and result.safe
    assert "MissingSymbolsError" in result.detail and "loadModel, infer, configure" in (
        result.detail)


def test_two_paths_to_one_file_are_probed_once(hostile, tmp_path: Path, cache: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    real = install(tmp_path / "libs", hostile("calm"))
    link = tmp_path / "libs" / "libalias.so"
    link.symlink_to(real)
    mark = tmp_path / "marks"
    monkeypatch.setenv("HOSTILE_MARK_FILE", str(mark))
    first, second = discovery_probe.probe_many([link, real])
    assert first == second and first.path == str(real) and first.outcome == "ok"
    assert len(marks(mark)) == 1


@pytest.mark.parametrize("content", [b"\x00not json{", b"[]", b'{"format": 99}',
                                     b'{"format": 1, "host": "another acc_host", "entries": {}}'])
def test_a_corrupt_or_foreign_cache_is_ignored(hostile, tmp_path: Path, cache: Path,
                                              content: bytes) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    cache.parent.mkdir()
    cache.write_bytes(content)
    assert discovery_probe.probe(path).cached is False
    data = json.loads(cache.read_text())  # rewritten, valid
    assert data["format"] == 1 and list(data["entries"]) == [str(path)]


def test_a_cache_entry_of_the_wrong_shape_is_ignored(hostile, tmp_path: Path,
                                                     cache: Path) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    discovery_probe.probe(path)
    data = json.loads(cache.read_text())
    data["entries"][str(path)]["result"] = {"unexpected": "fields"}
    cache.write_text(json.dumps(data))
    assert discovery_probe.probe(path).cached is False


def test_a_cache_others_could_write_is_not_trusted(hostile, tmp_path: Path, cache: Path) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    discovery_probe.probe(path)
    cache.chmod(0o666)
    assert discovery_probe.probe(path).cached is False


def test_an_unusable_cache_location_is_not_fatal(hostile, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    (tmp_path / "a_file").write_text("")
    for where in (tmp_path / "a_file" / "cache.json", tmp_path):  # below a file; a directory
        monkeypatch.setenv(discovery_probe.CACHE_ENV_VAR, str(where))
        assert discovery_probe.probe(path).outcome == "ok"
    assert sorted(os.listdir(tmp_path)) == ["a_file", "libs"]  # no temporary file left


def test_where_the_cache_lives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(discovery_probe.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert discovery_probe.cache_path() == tmp_path / "xdg" / "acc_host" / "probe-cache.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # as the XDG spec says
    expected = tmp_path / "home" / ".cache" / "acc_host" / "probe-cache.json"
    assert discovery_probe.cache_path() == expected
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert discovery_probe.cache_path() == expected
    monkeypatch.setenv(discovery_probe.CACHE_ENV_VAR, str(tmp_path / "mine.json"))
    assert discovery_probe.cache_path() == tmp_path / "mine.json"
    monkeypatch.setenv(discovery_probe.CACHE_ENV_VAR, "0")
    assert discovery_probe.cache_path() is None


def test_the_cache_can_be_turned_off(hostile, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    monkeypatch.setenv(discovery_probe.CACHE_ENV_VAR, "0")
    assert [discovery_probe.probe(path).cached for _ in range(2)] == [False, False]
    assert discovery_probe.probe(path, use_cache=False).cached is False


@pytest.mark.parametrize("executable", ["", "/nonexistent/python", "false"])
def test_a_probe_that_cannot_run_refuses_and_is_not_cached(
        hostile, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
        executable: str) -> None:
    path = install(tmp_path / "libs", hostile("calm"))
    if executable == "false":  # a program that exits 1 whatever it is given
        executable = shutil.which("false") or pytest.skip("no false program")
    monkeypatch.setattr(sys, "executable", executable)
    result = discovery_probe.probe(path)
    assert result.outcome == "unavailable" and not result.safe and result.stage is None
    assert result.detail.startswith("could not be probed: ")
    assert f"set {discovery_probe.PROBE_ENV_VAR}=0 to load libraries" in result.detail
    if executable.endswith("false"):
        assert "the probe process ended (status 1) before loading it" in result.detail
    assert not cache.exists()


@pytest.mark.parametrize(("text", "expected", "complaint"), [
    (None, 10.0, False), ("", 10.0, False), ("2.5", 2.5, False), ("30", 30.0, False),
    ("0", 10.0, True), ("-1", 10.0, True), ("soon", 10.0, True), ("nan", 10.0, True),
    ("1e9", 10.0, True)])
def test_the_time_limit_setting(monkeypatch: pytest.MonkeyPatch, text: str | None,
                                expected: float, complaint: bool) -> None:
    if text is None:
        monkeypatch.delenv(discovery_probe.TIMEOUT_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(discovery_probe.TIMEOUT_ENV_VAR, text)
    value, problem = discovery_probe.timeout_from_environment()
    assert value == expected and (problem is not None) == complaint
    if complaint:
        assert problem.startswith(f"{discovery_probe.TIMEOUT_ENV_VAR}={text!r} is not")


def test_the_probe_process_runs_no_discovery() -> None:
    environment = discovery_probe._child_environment()
    assert "MXNET_ACC_LIBRARIES" not in environment and "MXNET_ACC_TRACE" not in environment
    assert (environment["MXNET_ACC_BUNDLED"], environment["MXNET_ACC_ENTRY_POINTS"],
            environment[discovery_probe.PROBE_ENV_VAR]) == ("0", "0", "0")


# ---- trust checks at discovery -------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o757])
def test_a_directory_others_can_write_is_refused_whole(hostile, tmp_path: Path,
                                                       mode: int) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"))
    accs.chmod(mode)
    mark = tmp_path / "marks"
    done = host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs),
                HOSTILE_MARK_FILE=str(mark))
    result = report(done)
    assert result["names"] == []
    record = result["by_file"]["libcalm.so"]
    assert record["error"].startswith(f"not trusted: directory {accs} is writable by everyone")
    assert record["probe"] is None and marks(mark) == []  # not even probed
    assert (f"AccLibraryWarning: acc_host: skipped every library in MXNET_ACC_LIBRARIES="
            f"'{accs}': not trusted: directory {accs} is writable by everyone") in done.stderr
    assert done.stderr.count("AccLibraryWarning") == 1

    # The explicit opt-out.
    opted = report(host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs),
                        MXNET_ACC_STRICT_MODES="0"))
    assert opted["names"] == ["calm"]


def test_a_library_others_can_write_is_refused(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"), mode=0o666)
    install(accs, hostile("steady"))
    mark = tmp_path / "marks"
    done = host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs),
                HOSTILE_MARK_FILE=str(mark))
    result = report(done)
    assert result["names"] == ["steady"]
    assert result["by_file"]["libcalm.so"]["error"].startswith(
        f"not trusted: library {accs / 'libcalm.so'} is writable by everyone (mode -rw-rw-rw-)")
    assert "set MXNET_ACC_STRICT_MODES=0 to load it anyway" in done.stderr
    assert {name for _, name in marks(mark)} == {"steady"}


@ROOT_ONLY
def test_a_library_owned_by_another_user_is_refused(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    os.chown(install(accs, hostile("calm")), 65534, -1)
    result = report(host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs)))
    assert result["names"] == []
    assert f"library {accs / 'libcalm.so'} is owned by " in result["by_file"]["libcalm.so"][
        "error"]


def test_symlinks_are_resolved_checked_and_reported(hostile, tmp_path: Path) -> None:
    real = install(tmp_path / "vendor", hostile("calm"))
    loose = install(tmp_path / "loose", hostile("steady"), mode=0o666)
    accs = tmp_path / "accs"
    accs.mkdir()
    (accs / "libalias.so").symlink_to("../vendor/libcalm.so")
    (accs / "libloose.so").symlink_to(loose)
    code = REPORT + "import acc_host.cli as cli\ncli.main(['list'])\n"
    done = host(code, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[0])
    by_link = {record["link"]: record for record in result["records"]}
    alias = by_link[str(accs / "libalias.so")]
    assert alias["loaded"] and alias["name"] == "calm"
    assert alias["target"] == alias["path"] == str(real)
    refused = by_link[str(accs / "libloose.so")]
    assert refused["target"] == str(loose) and not refused["loaded"]
    assert refused["error"].startswith(f"not trusted: library {loose} is writable by everyone")
    table = done.stdout.splitlines()[1:]
    row = next(line for line in table if line.startswith("calm"))
    assert row.endswith(f"MXNET_ACC_LIBRARIES  {accs / 'libalias.so'} -> {real}")
    assert f"  {accs / 'libloose.so'} -> {loose} (MXNET_ACC_LIBRARIES): not trusted" in table[-1]


def test_entries_that_are_not_library_files_are_reported(hostile, tmp_path: Path) -> None:
    """Entries of MXNET_ACC_LIBRARIES named like libraries that are not
    library files (a dangling symlink, a symlink loop, a FIFO, a directory,
    a link to /dev/zero) are skipped with a warning naming each and its
    reason, and `acc-host list` shows them (docs/robustness.md, row
    discovery-not-a-file); the good library beside them loads."""
    accs = tmp_path / "accs"
    install(accs, hostile("beside"))
    (accs / "libdangling.so").symlink_to(tmp_path / "nowhere.so")
    (accs / "libloop.so").symlink_to(accs / "libloop.so")
    os.mkfifo(accs / "libfifo.so")
    (accs / "libdir.so").mkdir()
    (accs / "libzero.so").symlink_to("/dev/zero")
    code = REPORT + "import acc_host.cli as cli\ncli.main(['list'])\n"
    done = host(code, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[0])
    assert result["names"] == ["beside"]
    errors = {Path(record["link"] or record["path"]).name: record.get("error")
              for record in result["records"] if record["path"]}
    expected = {"libdangling.so": "a dangling symlink (its target does not exist)",
                "libloop.so": "a symlink loop", "libfifo.so": "a FIFO, not a library file",
                "libdir.so": "a directory, not a library file",
                "libzero.so": "a character device (through a symlink to /dev/zero), not a "
                              "library file"}
    for name, reason in expected.items():
        assert errors[name] == f"not loaded: {reason}", (name, errors[name])
        assert f"skipped accelerator library {accs / name} (from MXNET_ACC_LIBRARIES): " \
               f"not loaded: {reason}" in done.stderr
        assert str(accs / name) in done.stdout.split("\n", 1)[1]


# ---- entry points, explicit loads, switches ------------------------------------------------


def test_entry_point_libraries_are_checked_and_probed(hostile, tmp_path: Path) -> None:
    site = tmp_path / "site"
    install(site, hostile("epcalm"))
    install(site, hostile("epsegv", HOSTILE_SEGV=True))
    install(site, hostile("eploose"), mode=0o666)
    (site / "acc_safe_vendor.py").write_text(textwrap.dedent("""
        from pathlib import Path

        HERE = Path(__file__).resolve().parent


        def libraries():
            return [HERE / name for name in ("libepcalm.so", "libepsegv.so", "libeploose.so")]
        """))
    info = site / "safe_vendor-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: safe-vendor\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[acc_host.plugins]\naccs = acc_safe_vendor:libraries\n")
    result = report(host(REPORT, tmp_path / "cache.json", MXNET_ACC_ENTRY_POINTS="1",
                         PYTHONPATH=os.pathsep.join([str(site), str(SRC)])))
    assert result["names"] == ["epcalm"]
    records = result["by_file"]
    assert {record["source"] for record in records.values()} == {
        "entry point safe-vendor:accs"}
    assert records["libepcalm.so"]["probe"]["outcome"] == "ok"
    assert "killed by SIGSEGV in initialize()" in records["libepsegv.so"]["error"]
    assert records["libeploose.so"]["error"].startswith("not trusted: library ")


def test_explicit_loads_are_not_probed_but_can_be(hostile, tmp_path: Path) -> None:
    calm = install(tmp_path / "libs", hostile("calm"))
    segv = install(tmp_path / "libs", hostile("segv_init", HOSTILE_SEGV=True))
    mark = tmp_path / "marks"
    code = textwrap.dedent(f"""
        import os, acc_host as mx
        from acc_host.plugins.probe import probe
        print(os.getpid(), mx.load_acc({str(calm)!r}), probe({str(segv)!r}).outcome)
        """)
    done = host(code, tmp_path / "cache.json", HOSTILE_MARK_FILE=str(mark))
    assert done.returncode == 0, done.stderr
    pid, context, outcome = done.stdout.split()
    assert (context, outcome) == ("calm(0)", "crashed")
    assert [entry for entry in marks(mark) if entry[1] == "calm"] == [(int(pid), "calm")]


def test_probing_can_be_turned_off(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"))
    mark = tmp_path / "marks"
    result = report(host(REPORT, tmp_path / "cache.json", MXNET_ACC_LIBRARIES=str(accs),
                         MXNET_ACC_PROBE="0", HOSTILE_MARK_FILE=str(mark)))
    assert result["names"] == ["calm"] and result["by_file"]["libcalm.so"]["probe"] is None
    assert marks(mark) == [(result["pid"], "calm")]
    assert not (tmp_path / "cache.json").exists()


def test_import_survives_every_bad_setting_at_once(hostile, tmp_path: Path) -> None:
    accs = tmp_path / "accs"
    install(accs, hostile("calm"))
    install(accs, hostile("segv_init", HOSTILE_SEGV=True))
    (accs / "libjunk.so").write_text("junk")
    (accs / "libdangling.so").symlink_to(tmp_path / "nowhere.so")
    done = host(REPORT, tmp_path, MXNET_ACC_LIBRARIES=str(accs),  # the cache "file": a directory
                MXNET_ACC_PROBE_TIMEOUT="soon", MXNET_ACC_STRICT_MODES="maybe")
    result = report(done)
    assert result["names"] == ["calm"]
    assert "MXNET_ACC_PROBE_TIMEOUT='soon' is not a number of seconds" in done.stderr
    assert "killed by SIGSEGV" in result["by_file"]["libsegv_init.so"]["error"]
    assert "not a loadable library" in result["by_file"]["libjunk.so"]["error"]
    assert result["by_file"]["libdangling.so"]["error"] == (  # reported, never opened
        "not loaded: a dangling symlink (its target does not exist)")
