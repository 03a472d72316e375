"""The ``acc-host`` command (also ``python -m acc_host``).

``main(argv) -> int`` parses the command line, runs one command and returns
the exit status (see :mod:`acc_host.cli.errors` and docs/cli.md). Each
command lives in a module of its own and imports what it needs from
acc_host when it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import (
    check_cmd,
    demo_cmd,
    inspect_cmd,
    list_cmd,
    partition_cmd,
    run_cmd,
    sdk_cmd,
    serve_cmd,
    trace_cmd,
)
from .errors import FAILURE, USAGE, CliError, exit_code

__all__ = ["main", "build_parser", "PROG"]

PROG = "acc-host"
COMMANDS = (list_cmd, inspect_cmd, run_cmd, partition_cmd, check_cmd, demo_cmd, sdk_cmd,
            serve_cmd)
EPILOG = """\
exit status: 0 success; 1 the thing asked failed (a check failed, a run
raised an acc_host error); 2 usage error; 3 environment problem (a missing
file, a library that cannot load, Graphviz, the conformance kit or the SDK
sources missing).
See docs/cli.md."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Load accelerator plugins, inspect them, and run and partition "
        "MXNet and ONNX models on them.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    trace_cmd.add_parsers(commands)
    return parser


def _version() -> str:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .. import __version__

    return __version__


def _error(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _silence_stdout() -> None:
    """Points stdout at /dev/null, so that flushing it at exit cannot fail
    again once the reader of a pipe has gone."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line argv (default sys.argv[1:]); returns the exit
    status. Without a command it prints the help and returns 2."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..errors import AccHostError

    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        parser.print_help(sys.stderr)
        return USAGE
    try:
        args = parser.parse_args(arguments)
    except SystemExit as stop:  # argparse: --help, --version (0) or a usage error (2)
        return stop.code if isinstance(stop.code, int) else USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    try:
        return int(args.handler(args))
    except CliError as error:
        _error(str(error))
        return error.code
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        _silence_stdout()
        return FAILURE
    except (AccHostError, OSError) as error:
        _error(str(error))
        return exit_code(error)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
