"""The child process of an isolated conformance run.

``python -m acc_host.conformance.worker LIB --report-fd N [--devices 0,1]
[--only PATTERN]... [--skip-file F]`` runs the checks in order and writes one JSON object per
line to file descriptor N: ``{"start": id}`` before a check,
``{"result": {...}}`` after it and ``{"end": {"devices": [...]}}`` at the
end. The plugin's own output goes to stdout/stderr, never into that pipe.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .report import CheckResult
from .runner import run_in_process

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acc_host.conformance.worker")
    parser.add_argument("library")
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--devices", default=None, help="comma-separated device ids")
    parser.add_argument("--only", action="append", default=None,
                        help="run only the checks matching this pattern (repeatable)")
    parser.add_argument("--skip-file", default=None,
                        help='JSON {"skip": [ids], "crashed": [ids]}')
    args = parser.parse_args(argv)
    devices = None if args.devices is None else [int(d) for d in args.devices.split(",") if d]
    skip: list[str] = []
    crashed: list[str] = []
    if args.skip_file:
        with open(args.skip_file, encoding="utf-8") as handle:
            state: dict[str, Any] = json.load(handle)
        skip, crashed = list(state.get("skip", [])), list(state.get("crashed", []))
    with os.fdopen(args.report_fd, "w", encoding="utf-8", buffering=1) as pipe:

        def send(message: dict[str, Any]) -> None:
            pipe.write(json.dumps(message) + "\n")
            pipe.flush()

        def on_result(result: CheckResult) -> None:
            send({"result": result.to_json()})

        report = run_in_process(args.library, devices, skip=skip, crashed=crashed,
                                on_start=lambda check_id: send({"start": check_id}),
                                on_result=on_result, only=args.only)
        send({"end": {"devices": report.devices}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
