"""``acc-host check LIB``: the conformance kit (``acc_host.conformance``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .errors import FAILURE, OK, environment

__all__ = ["add_parser", "run"]

HELP = "run the conformance kit against a plugin library"
DESCRIPTION = """\
Run the conformance kit (acc_host.conformance) against LIB (a library path,
or the name of a discovered accelerator) and print a pass/fail report per
check. Each check runs in a child process, so that a crash fails the check
it happened in (with the first sanitizer or abort report it printed);
--no-isolate runs them here. --only selects checks by id. Exit status 0
when every check passed, 1 when one failed, 3 when the library cannot be
found, no check matches --only, or the kit is not installed."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("check", help=HELP, description=DESCRIPTION)
    parser.add_argument("lib", metavar="LIB", help="library path or accelerator name")
    parser.add_argument("--device", type=int, action="append", default=None,
                        help="device to check (repeatable; default: the kit's choice)")
    parser.add_argument("--only", metavar="PATTERN", action="append", default=None,
                        help="run only the checks whose id matches this shell pattern, e.g. "
                             "'symbolic.*' or threads.concurrent (repeatable)")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run the checks in this process instead of child processes (a "
                             "crash in the plugin then ends the run)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def _library_path(spec: str) -> str:
    """The file to check: spec itself when it is a path, else the file of
    the discovered accelerator of that name."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import os

    from .libraries import is_path, open_library

    if is_path(spec):
        if not os.path.exists(spec):
            raise environment(f"accelerator library not found: {spec}")
        return spec
    return str(open_library(spec).path)


def run(args: argparse.Namespace) -> int:
    try:
        # The subcommand's imports, made when it runs (the CLI loads lazily).
        from ..conformance import check_library
    except ImportError as error:
        raise environment("the conformance kit (acc_host.conformance) is not installed in this "
                          f"acc_host: {error}") from None
    report = check_library(_library_path(args.lib), devices=args.device,
                           isolate=not args.no_isolate, only=args.only)
    if args.only and not report.results:
        raise environment(f"no check id matches {', '.join(args.only)} (acc-host check LIB "
                          "lists them)")
    print(json.dumps(report.to_json(), indent=2) if args.json else report.format_text())
    return OK if report.passed else FAILURE
