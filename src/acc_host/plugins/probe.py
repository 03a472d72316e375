"""Loading a library in a child process first, so that one that crashes,
aborts, exits or hangs while it is loaded or initialized cannot take the
host down with it (docs/security.md).

:func:`probe_many` starts one child per library (a few at a time). The
child loads the library with the host's own code path (:class:`AccLibrary`:
dlopen, the symbol checks, ``getAccApiVersion``, ``initialize``,
``getAccName``, ``getNumAcc``, ``supportsImperative``), writing the stage
it enters to a file before each step, then exits. The parent reads how it
ended:

* ``ok``: everything succeeded; ``error``: the load failed with an acc_host
  error (a missing symbol, a refused version), which the host will report
  itself when it loads the library. Both are safe to load in the host.
* ``crashed`` (killed by a signal: SIGSEGV, SIGABRT...), ``exited`` (the
  process ended without finishing), ``timeout`` (killed after the time
  limit): not safe; discovery skips the library.
* ``unavailable``: the probe itself could not run (the child never reached
  the library); not cached.

The child is started with ``sys.executable -c`` and a bootstrap that makes
``acc_host`` a bare namespace, so the package's ``__init__`` (and with it
discovery) never runs there; the discovery switches are also set off in its
environment. It runs in a session of its own: on a timeout, and after it
ends, its whole process group is killed (a library that forked a helper
leaves nothing behind).

Results are cached (:data:`CACHE_ENV_VAR`) by the library's real path and
its device, inode, size, mtime and ctime, so a child runs only the first
time a file is seen or after it changed. A cached timeout counts only while
the time limit is not longer than the one it was probed with.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..abi import header
from ..abi.library import AccLibrary
from ..errors import LibraryError

__all__ = ["PROBE_ENV_VAR", "TIMEOUT_ENV_VAR", "CACHE_ENV_VAR", "DEFAULT_TIMEOUT", "SAFE",
           "ProbeResult", "ProbeFailedError", "enabled", "timeout_from_environment",
           "cache_path", "probe", "probe_many", "child_main"]

PROBE_ENV_VAR = "MXNET_ACC_PROBE"  # "0": load discovered libraries without probing them
TIMEOUT_ENV_VAR = "MXNET_ACC_PROBE_TIMEOUT"  # seconds a probe may take (default 10)
CACHE_ENV_VAR = "MXNET_ACC_PROBE_CACHE"  # the cache file; "0": no cache
DEFAULT_TIMEOUT = 10.0
SAFE = ("ok", "error")
_FORMAT = 1
_MAX_ENTRIES = 256
_MAX_PARALLEL = 8  # probe processes at once (at most one per CPU)
_LAST_WORDS = 200  # characters of the child's output quoted in a failure
_STAGES = {
    "load": "while being loaded (dlopen, its constructors, getAccApiVersion)",
    "initialize": "in initialize()",
    "getAccName": "in getAccName()",
    "getNumAcc": "in getNumAcc()",
    "supportsImperative": "in supportsImperative()",
    "exit": "at exit, after loading and initializing (its destructors or atexit handlers)",
}
# The child: acc_host as a bare package, so that its __init__ (discovery) never runs.
_BOOTSTRAP = ("import sys, types; package = types.ModuleType('acc_host'); "
              "package.__path__ = [sys.argv[1]]; sys.modules['acc_host'] = package; "
              "from acc_host.plugins.probe import child_main; sys.exit(child_main(sys.argv[2:]))")


class ProbeFailedError(LibraryError):
    """The probe found a library unsafe to load: ``outcome`` is ``crashed``,
    ``exited``, ``timeout`` or ``unavailable``; ``stage`` where it happened."""

    def __init__(self, message: str, path: str, outcome: str, stage: str | None) -> None:
        super().__init__(message, path)
        self.outcome = outcome
        self.stage = stage


@dataclass(frozen=True)
class ProbeResult:
    """How loading ``path`` (the real path) went in a probe process.

    ``detail`` says it in words; ``name``, ``devices`` and ``api_version``
    are the library's answers when ``outcome`` is ``ok``; ``cached``: from
    the cache, not a new child; ``timeout``: the limit it was probed with.
    """

    path: str
    outcome: str
    stage: str | None
    detail: str
    cached: bool = False
    timeout: float = DEFAULT_TIMEOUT
    name: str | None = None
    devices: int | None = None
    api_version: int | None = None

    @property
    def safe(self) -> bool:
        """Whether the host may load the library: it loaded (or failed
        cleanly) in the probe."""
        return self.outcome in SAFE

    def check(self) -> None:
        """Raises ProbeFailedError unless the result is safe."""
        if not self.safe:
            raise ProbeFailedError(self.detail, self.path, self.outcome, self.stage)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---- configuration ----------------------------------------------------------------------


def enabled() -> bool:
    """Whether discovery probes libraries (unless ``MXNET_ACC_PROBE=0``)."""
    return os.environ.get(PROBE_ENV_VAR, "1") != "0"


def timeout_from_environment() -> tuple[float, str | None]:
    """The time limit in seconds, and why the variable was ignored if it was."""
    text = os.environ.get(TIMEOUT_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_TIMEOUT, None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 86400:
        return DEFAULT_TIMEOUT, (f"{TIMEOUT_ENV_VAR}={text!r} is not a number of seconds in "
                                 f"(0, 86400); using {DEFAULT_TIMEOUT:g}")
    return value, None


def cache_path() -> Path | None:
    """The cache file: ``$MXNET_ACC_PROBE_CACHE`` (``0``: none), else
    ``acc_host/probe-cache.json`` under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    configured = os.environ.get(CACHE_ENV_VAR, "")
    if configured == "0":
        return None
    if configured:
        return Path(configured).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry
            return None
    return Path(base) / "acc_host" / "probe-cache.json"


# ---- the cache ------------------------------------------------------------------------------


def _identity(path: str) -> list[int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns]


def _host_tag() -> str:
    version = getattr(sys.modules.get("acc_host"), "__version__", "?")
    return (f"acc_host {version}; ABI {header.API_VERSION}; {sys.implementation.name} "
            f"{sys.version_info[0]}.{sys.version_info[1]}; {sys.platform}")


def _read_cache(path: Path | None) -> dict[str, dict[str, Any]]:
    """The entries of the cache file; {} when there is none, it is corrupt,
    of another host version, or could have been written by another user."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            status = os.fstat(handle.fileno())
            if hasattr(os, "geteuid") and (status.st_uid != os.geteuid()
                                           or status.st_mode & 0o022):
                return {}
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    if not (isinstance(data, dict) and data.get("format") == _FORMAT
            and data.get("host") == _host_tag() and isinstance(data.get("entries"), dict)):
        return {}
    return {key: value for key, value in data["entries"].items() if isinstance(value, dict)}


def _write_cache(path: Path | None, new: dict[str, dict[str, Any]]) -> None:
    """Merges new into the cache file, atomically; failures are ignored (the
    next import probes again)."""
    if path is None or not new:
        return
    entries = {**_read_cache(path), **new}
    live = {key: value for key, value in entries.items() if value.get("id") == _identity(key)}
    newest = sorted(live.items(), key=lambda item: item[1].get("probed_at", 0))[-_MAX_ENTRIES:]
    text = json.dumps({"format": _FORMAT, "host": _host_tag(), "entries": dict(newest)},
                      indent=1, sort_keys=True)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".probe-cache.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError:
        pass


def _from_cache(entry: dict[str, Any] | None, identity: list[int] | None,
                timeout: float) -> ProbeResult | None:
    if entry is None or identity is None or entry.get("id") != identity:
        return None
    try:
        result = ProbeResult(**{**entry["result"], "cached": True})
    except (KeyError, TypeError):
        return None
    if result.outcome == "timeout" and timeout > result.timeout:
        return None  # a longer limit now: give it another chance
    return result


# ---- running probes -----------------------------------------------------------------------


def probe(path: str | os.PathLike[str], timeout: float | None = None,
          use_cache: bool = True) -> ProbeResult:
    """Loads the library at path in a probe process (or finds the result
    in the cache) and says how it went. Use before ``mx.load_acc(path)`` for
    a library you do not trust to load cleanly."""
    return probe_many([path], timeout, use_cache)[0]


def probe_many(paths: Sequence[str | os.PathLike[str]], timeout: float | None = None,
               use_cache: bool = True) -> list[ProbeResult]:
    """One result per path, in order. Paths reaching the same file are
    probed once; probes run a few at a time (one per CPU, at most 8)."""
    limit = timeout_from_environment()[0] if timeout is None else timeout
    real = [os.path.realpath(os.fspath(path)) for path in paths]
    cache_file = cache_path() if use_cache else None
    cached = _read_cache(cache_file)
    results: dict[str, ProbeResult] = {}
    identities: dict[str, list[int] | None] = {}
    for target in real:
        if target in results or target in identities:
            continue
        identities[target] = _identity(target)
        hit = _from_cache(cached.get(target), identities[target], limit)
        if hit is not None:
            results[target] = hit
    missing = [target for target in identities if target not in results]
    fresh = _run_all(missing, limit)
    results.update(fresh)
    _write_cache(cache_file, {
        target: {"id": identities[target], "probed_at": time.time(), "result": result.to_json()}
        for target, result in fresh.items()
        if result.outcome != "unavailable" and identities[target] is not None
        and identities[target] == _identity(target)})  # not changed while it was probed
    return [results[target] for target in real]


@dataclass
class _Child:
    path: str
    process: subprocess.Popen[bytes]
    deadline: float
    stages: Path
    output: Path


def _run_all(paths: list[str], timeout: float) -> dict[str, ProbeResult]:
    if not paths:
        return {}
    results: dict[str, ProbeResult] = {}
    width = max(1, min(len(paths), os.cpu_count() or 1, _MAX_PARALLEL))
    waiting = list(paths)
    running: list[_Child] = []
    numbers = itertools.count()
    with tempfile.TemporaryDirectory(prefix="acc_host_probe.") as scratch:
        try:
            delay = 0.001
            while waiting or running:
                while waiting and len(running) < width:
                    path = waiting.pop(0)
                    child = _start(path, Path(scratch), next(numbers), timeout)
                    if isinstance(child, ProbeResult):
                        results[path] = child
                    else:
                        running.append(child)
                for child in list(running):
                    result = _finish_if_done(child, timeout)
                    if result is not None:
                        running.remove(child)
                        results[child.path] = result
                        delay = 0.001
                if running:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
        finally:
            for child in running:  # only after an exception (KeyboardInterrupt)
                _kill_group(child.process)
                child.process.wait()
    return results


def _child_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("MXNET_ACC_LIBRARIES", "MXNET_ACC_TRACE")}
    # No faulthandler report in the probe: its last line of output is what
    # the verdict quotes (the probe reports a crash itself).
    env.update({"MXNET_ACC_BUNDLED": "0", "MXNET_ACC_ENTRY_POINTS": "0", PROBE_ENV_VAR: "0",
                "MXNET_ACC_FAULT_HANDLER": "0"})
    return env


def _start(path: str, scratch: Path, index: int, timeout: float) -> _Child | ProbeResult:
    stages = scratch / f"{index}.stages"
    output = scratch / f"{index}.out"
    package = str(Path(__file__).resolve().parents[1])  # acc_host/
    if not sys.executable:
        return _unavailable(path, timeout, "sys.executable is not set, so no Python can be "
                            "started to probe it")
    try:
        with open(output, "wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, package, path, str(stages)],
                stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, env=_child_environment(),
                start_new_session=True, close_fds=True)
    except OSError as error:
        return _unavailable(path, timeout, f"starting {sys.executable} failed: {error}")
    return _Child(path, process, time.monotonic() + timeout, stages, output)


def _unavailable(path: str, timeout: float, why: str) -> ProbeResult:
    return ProbeResult(path, "unavailable", None,
                       f"could not be probed: {why} (set {PROBE_ENV_VAR}=0 to load libraries "
                       "without probing them)", timeout=timeout)


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the child ended, leaving it unreaped, so its process group
    cannot be another's yet when it is killed."""
    if not hasattr(os, "waitid"):
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)


def _finish_if_done(child: _Child, timeout: float) -> ProbeResult | None:
    timed_out = False
    if not _exited(child.process):
        if time.monotonic() < child.deadline:
            return None
        timed_out = True
    _kill_group(child.process)  # the child, or what it left running
    code = child.process.wait()
    return _verdict(child, code, timed_out, timeout)


def _read_stages(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """The last stage the child entered, and its final record if it wrote one."""
    stage = None
    final = None
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None, None
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            if "outcome" in record:
                final = record
            elif isinstance(record.get("stage"), str):
                stage = record["stage"]
    return stage, final


def _last_words(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= _LAST_WORDS else last[:_LAST_WORDS - 3] + "..."


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _verdict(child: _Child, code: int, timed_out: bool, timeout: float) -> ProbeResult:
    stage, final = _read_stages(child.stages)
    words = _last_words(child.output)
    quote = f"; its last output: {words!r}" if words else ""
    if final is not None and code == 0 and final.get("outcome") in SAFE:
        return ProbeResult(child.path, final["outcome"], "done", str(final.get("detail", "")),
                           timeout=timeout, name=final.get("name"), devices=final.get("devices"),
                           api_version=final.get("api_version"))
    if final is not None:
        stage = "exit"
    if stage is None:
        why = (f"the probe process did not start within {timeout:g} s" if timed_out else
               f"the probe process ended (status {code}) before loading it{quote}")
        return _unavailable(child.path, timeout, why)
    where = _STAGES.get(stage, f"in {stage}")
    if timed_out:
        outcome, what = "timeout", f"timed out after {timeout:g} s"
    elif code < 0:
        outcome, what = "crashed", f"killed by {_signal_name(-code)}"
    else:
        outcome, what = "exited", f"exited with status {code}"
    detail = f"{what} {where} in a probe process, so it was not loaded{quote}"
    return ProbeResult(child.path, outcome, stage, detail, timeout=timeout)


# ---- the child ------------------------------------------------------------------------------


def child_main(argv: Sequence[str]) -> int:
    """The probe process: loads argv[0], writing stages to argv[1]."""
    path, stages_file = argv[0], argv[1]
    out = os.open(stages_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def write(record: dict[str, Any]) -> None:
        os.write(out, (json.dumps(record) + "\n").encode("utf-8"))

    class Probed(AccLibrary):
        """AccLibrary, saying which step it is in before each one."""

        def _open(self) -> Any:
            write({"stage": "load"})
            return super()._open()

        def _initialize(self) -> None:
            write({"stage": "initialize"})
            super()._initialize()

        def _read_name(self) -> str:
            write({"stage": "getAccName"})
            name = super()._read_name()
            write({"stage": "getNumAcc"})
            return name

        def _read_imperative(self) -> bool:
            write({"stage": "supportsImperative"})
            return super()._read_imperative()

    try:
        library = Probed(path)
    except Exception as error:  # AccHostError, or an odd library: either way not a crash
        write({"outcome": "error", "detail": f"{type(error).__name__}: {error}"})
        return 0
    write({"outcome": "ok", "detail": "loaded and initialized", "name": library.name,
           "devices": library.num_devices, "api_version": library.api_version})
    return 0
