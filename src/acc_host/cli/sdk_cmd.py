"""``acc-host sdk``: where the header and the SDK's C sources are, for
building a plugin against an installed acc-host (``acc_host.plugins.sdk``)."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import OK, USAGE, CliError, environment

__all__ = ["add_parser", "run", "BUILD_EXAMPLE", "build_example"]

HELP = "compiler flags and paths to build a plugin against the installed mxnet_acc.h"


def build_example(platform: str | None = None) -> str:
    """The suggested build command: warnings are errors, and on Linux an
    unresolved symbol fails the link (-Wl,-z,defs) instead of dlopen later
    (macOS's linker refuses unresolved symbols by default and has no -z)."""
    import sys

    linux = (platform or sys.platform).startswith("linux")
    defs = "-Wl,-z,defs " if linux else ""
    return ("cc -std=c11 -O2 -Wall -Wextra -Werror -pthread -fPIC -shared -fvisibility=hidden "
            f"\\\n   {defs}$(acc-host sdk --cflags) myacc.c $(acc-host sdk --sources) "
            "-o libmyacc.so -lm")


BUILD_EXAMPLE = build_example()
DESCRIPTION = f"""\
Print what a plugin is compiled against: the ABI header mxnet_acc.h (the copy
this acc_host reads itself) and the SDK, the C helpers the bundled plugins
compile in (JSON and graph parsing, attributes, status messages, tensors).
Without an option, a summary and a build command; with one, only that value,
for use in $(...). --abi MAJOR.MINOR serves the header of an earlier
published ABI version instead (to build a plugin as it was built against an
older acc-host, and test version skew); --list-abi lists them. Exit status
0, 2 for an ABI version never published, 3 when the SDK sources are not
installed.
To build a plugin from myacc.c:

{BUILD_EXAMPLE}"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("sdk", help=HELP, description=DESCRIPTION,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--cflags", dest="show", action="store_const", const="cflags",
                      help="the -I flags of the header's and the SDK's directories")
    what.add_argument("--include-dir", dest="show", action="store_const", const="include_dir",
                      help="the directory holding mxnet_acc.h")
    what.add_argument("--header", dest="show", action="store_const", const="header",
                      help="the path of mxnet_acc.h")
    what.add_argument("--source-dir", dest="show", action="store_const", const="source_dir",
                      help="the directory of the SDK's C sources and headers")
    what.add_argument("--sources", dest="show", action="store_const", const="sources",
                      help="the SDK's C files, space-separated (compile them into the plugin)")
    what.add_argument("--abi-version", dest="show", action="store_const", const="abi_version",
                      help="the header's ABI version, MAJOR.MINOR")
    what.add_argument("--wheel-tag", dest="show", action="store_const", const="wheel_tag",
                      help="the tag of a plugin wheel for this platform, py3-none-<platform> "
                           "(docs/packaging.md)")
    what.add_argument("--exports", dest="show", action="store_const", const="exports",
                      help="the functions a plugin exports, space-separated (the last six "
                           "only with imperative mode)")
    what.add_argument("--list-abi", dest="show", action="store_const", const="list_abi",
                      help="the ABI versions whose header this acc-host serves")
    parser.add_argument("--abi", default=None, metavar="MAJOR.MINOR",
                        help="the header of this published ABI version (default: the host's)")
    parser.set_defaults(handler=run, show=None)


def _value(show: str, abi: str | None) -> str:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi import header
    from ..plugins import sdk

    if show == "cflags":
        return " ".join(sdk.cflags(abi))
    if show == "include_dir":
        return str(sdk.include_dir(abi))
    if show == "header":
        return str(sdk.header(abi))
    if show == "source_dir":
        return str(sdk.source_dir())
    if show == "sources":
        return " ".join(map(str, sdk.sources()))
    if show == "wheel_tag":
        return sdk.wheel_tag()
    if show == "exports":
        return " ".join(sdk.abi_functions(imperative=True))
    if show == "list_abi":
        return " ".join(header.version_text(version) for version in sdk.abi_versions())
    return header.version_text(sdk.abi_version(abi))


def _summary(abi: str | None) -> str:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi import header
    from ..plugins import sdk

    version = sdk.abi_version(abi)
    names = " ".join(path.name for path in sdk.sources())
    note = "" if version == header.API_VERSION else \
        f"; an earlier version: this host is {header.version_text(header.API_VERSION)}"
    rows = [("ABI version",
             f"{header.version_text(version)} (MX_ACC_API_VERSION {version}){note}"),
            ("header", str(sdk.header(abi))),
            ("SDK sources", f"{sdk.source_dir()}: {names}"),
            ("cflags", " ".join(sdk.cflags(abi)))]
    lines = [f"  {label:<12} {value}" for label, value in rows]
    example = BUILD_EXAMPLE if abi is None else BUILD_EXAMPLE.replace(
        "acc-host sdk --cflags", f"acc-host sdk --abi {header.version_text(version)} --cflags")
    return "\n".join(["acc-host SDK", *lines, "", "build a plugin (docs/plugin_guide.md):",
                      example])


def run(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi.versions import AbiVersionError
    from ..plugins.sdk import SdkNotFoundError

    try:
        print(_summary(args.abi) if args.show is None else _value(args.show, args.abi))
    except SdkNotFoundError as error:
        raise environment(str(error)) from None
    except AbiVersionError as error:
        raise CliError(str(error), USAGE) from None
    return OK
