"""Running the checks: in this process, or in child processes that a
crashing plugin can take down without taking the caller with it.

In-process, every check runs in order and an exception becomes a FAIL. The
isolated mode runs the same sequence in a child (``python -m
acc_host.conformance.worker``), which reports each check as it starts and
ends through a pipe of its own. If the child dies (a segmentation fault, an
abort from a double free inside the plugin) or a check hangs, the check it
was running is a FAIL naming the signal, and a new child carries on after
it, skipping the checks already done. The check's detail then carries the
first report the crash printed (an AddressSanitizer, UndefinedBehaviorSanitizer
or glibc abort report with its stack frames; see :mod:`.crash_report`), and a
library built with the sanitizers gets their runtimes preloaded in the child.

``only`` selects checks by id with shell patterns (``symbolic.*``,
``threads.concurrent``): the others are neither run nor reported, except
abi.load, which later checks need and which runs silently.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from ..abi.loaded_model import CHECK_OUTPUTS_VARIABLE
from . import (
    checks_abi,
    checks_config,
    checks_header,
    checks_memory,
    checks_sparse,
    checks_symbolic,
    checks_threads,
)
from .crash_report import crash_summary, is_sanitized, sanitizer_environment
from .report import FAIL, PASS, SKIP, CheckFailed, CheckResult, CheckSkipped, Report
from .session import Session

__all__ = ["iter_checks", "run_check", "run_in_process", "run_isolated", "STATEFUL_CHECKS",
           "selector"]

# Module order is the run order: abi (loads the library) first, threads last.
_MODULES = (checks_abi, checks_memory, checks_symbolic, checks_config, checks_threads,
            checks_header, checks_sparse)
# Checks whose side effect later checks need: rerun (silently) after a crash.
STATEFUL_CHECKS = frozenset({"abi.load"})
_DETAIL_MAX = 600
_MAX_CRASHES = 8


def iter_checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    """(id, function) of every check, lazily: ids of later checks may
    depend on what earlier ones found (the claimed operators)."""
    for module in _MODULES:
        yield from module.checks(session)


def selector(only: Sequence[str] | None) -> Callable[[str], bool]:
    """A predicate on check ids: every id when only is None or empty, else
    the ids matching one of its shell patterns (a pattern without a wildcard
    also selects the checks under it: "symbolic" selects "symbolic.graphs")."""
    patterns = [pattern for pattern in (only or ()) if pattern]
    if not patterns:
        return lambda check_id: True

    def selected(check_id: str) -> bool:
        return any(fnmatchcase(check_id, pattern) or check_id.startswith(pattern + ".")
                   for pattern in patterns)

    return selected


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _DETAIL_MAX else line[:_DETAIL_MAX - 3] + "..."


def run_check(check_id: str, function: Callable[[], str]) -> CheckResult:
    """Runs one check: a returned detail is a PASS, CheckFailed a FAIL,
    CheckSkipped a SKIP, any other exception a FAIL with its text."""
    start = time.perf_counter()
    try:
        status, detail = PASS, function() or ""
    except CheckFailed as failure:
        status, detail = FAIL, str(failure)
    except CheckSkipped as skipped:
        status, detail = SKIP, str(skipped)
    except Exception as error:  # noqa: BLE001  (a check that raises is a FAIL)
        status, detail = FAIL, f"{type(error).__name__}: {error}"
    return CheckResult(check_id, status, _one_line(detail), time.perf_counter() - start)


def run_in_process(path: str, devices: Sequence[int] | None = None,
                   skip: Iterable[str] = (), crashed: Iterable[str] = (),
                   on_start: Callable[[str], None] | None = None,
                   on_result: Callable[[CheckResult], None] | None = None,
                   only: Sequence[str] | None = None) -> Report:
    """Every check in this process (or those only selects). Checks named in
    skip or not selected are not run (nor reported), except the stateful
    ones not named in crashed, which run silently (later checks need what
    they do)."""
    skipped, crashed_ids = set(skip), set(crashed)
    selected = selector(only)
    session = Session(path, devices)
    report = Report(session.path)
    try:
        for check_id, function in iter_checks(session):
            if check_id in skipped or not selected(check_id):
                if check_id in STATEFUL_CHECKS and check_id not in crashed_ids:
                    run_check(check_id, function)
                continue
            if on_start is not None:
                on_start(check_id)
            result = run_check(check_id, function)
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        report.devices = list(session.devices)
        session.cleanup()
    return report


# ---- isolated ------------------------------------------------------------------------


def _child_env(library: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(sanitizer_environment(library, env))
    if not is_sanitized(library):
        # Without a sanitizer, the host's guard bytes around every output
        # (acc_host.abi.loaded_model) catch a plugin writing past one; with
        # one, the outputs stay exact allocations, so the sanitizer reports
        # the overrun with the plugin's stack instead.
        env.setdefault(CHECK_OUTPUTS_VARIABLE, "1")
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    env["MXNET_ACC_BUNDLED"] = "0"  # the child loads only the library under test
    env["MXNET_ACC_ENTRY_POINTS"] = "0"
    env.pop("MXNET_ACC_LIBRARIES", None)
    return env


def _signal_text(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


def _output(path: str) -> str:
    """What the child printed: its first crash report, else its last lines."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return crash_summary(text)


def run_isolated(path: str, devices: Sequence[int] | None = None,
                 check_timeout: float = 300.0, only: Sequence[str] | None = None) -> Report:
    """Every check (or those only selects) in child processes; a crash or
    a hang fails the check it happened in, and the run goes on in a new
    child."""
    report = Report(os.path.realpath(os.fspath(path)))
    done: set[str] = set()
    crashed: set[str] = set()
    for _ in range(_MAX_CRASHES + 1):
        outcome = _run_child(path, devices, done, crashed, report, check_timeout, only)
        if outcome is None:
            return report
        crashed.add(outcome)
    report.results.append(CheckResult("kit.crashes", FAIL, f"the plugin crashed the checking "
                                      f"process {_MAX_CRASHES + 1} times; the rest was not run"))
    return report


def _run_child(path: str, devices: Sequence[int] | None, done: set[str], crashed: set[str],
               report: Report, check_timeout: float,
               only: Sequence[str] | None = None) -> str | None:
    """One child process. Returns None when it finished the run, else the id
    of the check it died (or hung) in, after recording that FAIL."""
    read_fd, write_fd = os.pipe()
    command = [sys.executable, "-m", "acc_host.conformance.worker", os.fspath(path),
               "--report-fd", str(write_fd)]
    if devices is not None:
        command += ["--devices", ",".join(str(int(dev)) for dev in devices)]
    for pattern in only or ():
        command += ["--only", pattern]
    skip = sorted(done | crashed)
    with tempfile.NamedTemporaryFile("w+", suffix=".json", delete=False) as skip_file:
        json.dump({"skip": skip, "crashed": sorted(crashed)}, skip_file)
    command += ["--skip-file", skip_file.name]
    with tempfile.NamedTemporaryFile("w+b", suffix=".log", delete=False) as log:
        log_path = log.name
        try:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, pass_fds=(write_fd,),
                                       env=_child_env(os.fspath(path)))
        finally:
            os.close(write_fd)
    current: str | None = None
    finished = False
    buffer = b""
    try:
        with os.fdopen(read_fd, "rb", buffering=0) as pipe, selectors.DefaultSelector() as sel:
            sel.register(pipe, selectors.EVENT_READ)
            deadline = time.monotonic() + check_timeout
            while True:
                if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    process.kill()
                    process.wait()
                    if current is None:
                        current = "kit.start"
                    report.results.append(CheckResult(
                        current, FAIL, f"did not finish within {check_timeout:g} s (killed)",
                        check_timeout))
                    done.add(current)
                    return current
                chunk = pipe.read(65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if "start" in message:
                        current = message["start"]
                        deadline = time.monotonic() + check_timeout
                    elif "result" in message:
                        result = CheckResult.from_json(message["result"])
                        report.results.append(result)
                        done.add(result.id)
                        current = None
                    elif "end" in message:
                        report.devices = list(message["end"].get("devices", []))
                        finished = True
        returncode = process.wait()
        if finished and returncode == 0:
            return None
        if current is None:
            # Died outside any check (start-up, or after the last one).
            report.results.append(CheckResult(
                "kit.worker", FAIL, f"the checking process ended with "
                f"{_signal_text(returncode)} outside any check. Output: {_output(log_path)}"))
            return None
        report.results.append(CheckResult(
            current, FAIL, f"the checking process died with {_signal_text(returncode)} during "
            f"this check (a crash in the plugin); later checks ran in a new process. Output: "
            f"{_output(log_path)}"))
        done.add(current)
        return current
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for leftover in (skip_file.name, log_path):
            try:
                os.unlink(leftover)
            except OSError:
                pass

