"""The conformance kit for accelerator plugins (``acc_host.conformance``).

Runs a fixed list of checks against any library built on
``include/mxnet_acc.h`` and reports PASS, FAIL or SKIP per check::

    from acc_host.conformance import check_library
    report = check_library("path/libmyacc.so")
    print(report.format_text())
    assert report.passed

The checks cover the exported symbols, version negotiation (including the
refusal of another major version), devices, device memory, the
supportedOps contract, loadModel/infer numerics against the host's CPU
operators for every operator and dtype the plugin claims from a standard
set, model lifetimes, configure, error messages, and repeated and
concurrent calls. docs/conformance.md describes each check.

By default the checks run in child processes, so that a plugin that
crashes fails the check it crashed in instead of taking the caller down
(``isolate=False`` runs them in this process). It is also a pytest plugin:
``pytest --acc-lib=path/libx.so`` (see :mod:`acc_host.conformance.pytest_plugin`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .report import FAIL, PASS, SKIP, CheckResult, Report
from .runner import run_in_process, run_isolated

__all__ = ["check_library", "CheckResult", "Report", "PASS", "FAIL", "SKIP"]


def check_library(path: str | os.PathLike[str], devices: Sequence[int] | None = None, *,
                  isolate: bool = True, check_timeout: float = 300.0,
                  only: Sequence[str] | None = None) -> Report:
    """Runs every conformance check against the library at path.

    devices: the device ids to test (default: all of getNumAcc()); memory,
    numerics and thread checks run on each of them. isolate: run in child
    processes (a crash or a hang in the plugin fails the check it happened
    in; check_timeout seconds per check). Never raises for a bad plugin: a
    check that raises is a FAIL carrying the exception's text. only: shell
    patterns of the check ids to run (``"symbolic.*"``, ``"threads"``);
    abi.load still runs, silently, when not selected. A check that crashed
    the isolated process carries the first sanitizer or abort report the
    crash printed, with its stack frames."""
    device_list = None if devices is None else [int(dev) for dev in devices]
    selection = None if only is None else [str(pattern) for pattern in only]
    if isolate:
        return run_isolated(os.fspath(path), device_list, check_timeout=check_timeout,
                            only=selection)
    return run_in_process(os.fspath(path), device_list, only=selection)
