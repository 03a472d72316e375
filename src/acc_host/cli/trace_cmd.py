"""``acc-host replay TRACE`` and ``acc-host timeline TRACE OUT``: the call
traces of acc_host.trace (recorded with MXNET_ACC_TRACE=path or
``acc-host run --trace path``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .errors import FAILURE, OK, USAGE, CliError, environment

__all__ = ["add_parsers", "replay", "timeline"]

REPLAY_DESCRIPTION = """\
Re-issue the ABI calls of a trace against plugin builds and report the
first call whose result differs (status, name, supportedOps ids, or the
bytes a plugin wrote into host memory). Exit status 0 when nothing
diverged, 1 at a divergence, 3 when the trace or a library cannot be read."""

TIMELINE_DESCRIPTION = """\
Write a trace as a Chrome trace event file (open it in chrome://tracing or
ui.perfetto.dev): one row per device, categories compile, copy, infer,
memory, query and cpu_op."""


def add_parsers(commands: Any) -> None:
    parser = commands.add_parser("replay", help="replay a call trace against a plugin build",
                                 description=REPLAY_DESCRIPTION)
    parser.add_argument("trace", metavar="TRACE", help="trace file (MXNET_ACC_TRACE=...)")
    parser.add_argument("--lib", action="append", default=[], metavar="NAME=PATH",
                        help="replay the traced accelerator NAME against the library at PATH "
                        "(repeatable; default: the traced files)")
    parser.add_argument("--only", metavar="NAME", help="replay the calls of NAME alone")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=replay)
    parser = commands.add_parser("timeline", help="export a call trace as a Chrome trace",
                                 description=TIMELINE_DESCRIPTION)
    parser.add_argument("trace", metavar="TRACE", help="trace file")
    parser.add_argument("out", metavar="OUT", help="Chrome trace JSON file to write")
    parser.set_defaults(handler=timeline)


def _libraries(specs: list[str]) -> dict[str, str]:
    libraries = {}
    for spec in specs:
        name, separator, path = spec.partition("=")
        if not separator or not name or not path:
            raise CliError(f"--lib wants NAME=PATH, got {spec!r}", USAGE)
        libraries[name] = path
    return libraries


def replay(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import os

    from ..errors import TraceError
    from ..trace import replay as replay_trace

    if not os.path.exists(args.trace):
        raise environment(f"trace not found: {args.trace}")
    try:
        report = replay_trace(args.trace, _libraries(args.lib), only=args.only)
    except TraceError as error:
        raise environment(str(error)) from None
    if args.json:
        divergence = report.divergence
        print(json.dumps({"trace": str(report.trace), "libraries": report.libraries,
                          "calls": report.calls, "notes": report.notes,
                          "divergence": None if divergence is None else vars(divergence)},
                         indent=2))
    else:
        print(report.format_text())
    return OK if report.matched else FAILURE


def timeline(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import os

    from ..errors import TraceError
    from ..trace import export_chrome

    if not os.path.exists(args.trace):
        raise environment(f"trace not found: {args.trace}")
    try:
        out = export_chrome(args.trace, args.out)
    except TraceError as error:
        raise environment(str(error)) from None
    print(f"wrote {out}")
    return OK
