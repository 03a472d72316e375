"""``acc-host demo``: the README's main job (acc_host.demo)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]

HELP = "run the demo: the bundled plugins on a small CNN and a real MXNet model"
DESCRIPTION = """\
Run the main job of the README (the same as 'python -m acc_host.demo'): load
the bundled plugins, run a small CNN through both execution modes on
cpu_ref against the host CPU path, then a real MXNet 1.9.1 SqueezeNet
checkpoint on the CPU and every accelerator. Exit status 0 when every
result matches, 1 otherwise."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("demo", help=HELP, description=DESCRIPTION)
    parser.add_argument("--repeat", type=int, default=20,
                        help="timed runs per measurement (default 20)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..demo import main

    return main(repeat=args.repeat)
