"""``acc-host inspect LIB``: what one accelerator library is and can do."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .errors import OK, USAGE, CliError
from .progress import Progress, enabled

__all__ = ["add_parser", "run", "describe"]

HELP = "show an accelerator's versions, devices, modes, operators, dtypes and configure keys"
DESCRIPTION = """\
Load one accelerator library (LIB: a path, or the name of an accelerator
'acc-host list' shows) and print its name, ABI and plugin versions, device
count, execution modes (imperative: the plugin keeps its own memory and
runs single operators; symbolic: supportedOps/loadModel/infer), the
configure keys it answers (configure(query=keys)), the operators it declares
(query=ops), and which operators and dtypes supportedOps accepts, probed on
a standard set of one-operator graphs."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("inspect", help=HELP, description=DESCRIPTION)
    parser.add_argument("lib", metavar="LIB", help="library path or accelerator name")
    parser.add_argument("--device", type=int, default=0, help="device to probe (default 0)")
    parser.add_argument("--dtypes", default=None,
                        help="comma-separated dtypes to probe (default float32,float16,int8,"
                             "int32)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    parser.set_defaults(handler=run)


def _query(library: Any, dev_id: int, what: str) -> str | None:
    """configure(query=what)'s answer under the key what, or None."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..errors import AccHostError

    try:
        return library.configure(dev_id, {"query": what}).get(what)
    except AccHostError:
        return None


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [item for item in text.split(",") if item]


def describe(library: Any, dev_id: int, dtypes: list[str], show_progress: bool) -> dict[str, Any]:
    """Everything inspect prints, as a dict."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi import header
    from .probe import DEFAULT_DTYPES, STANDARD_CASES, probe

    dtypes = dtypes or list(DEFAULT_DTYPES)
    with Progress("probing supportedOps", len(STANDARD_CASES), show_progress) as bar:
        results = probe(library, dtypes, STANDARD_CASES, dev_id, lambda label: bar.advance())
    return {
        "name": library.name, "path": library.path,
        "library_name": library.library_name,
        "version": _query(library, dev_id, "version"),
        "api_version": library.api_version,
        "api_version_text": header.version_text(library.api_version),
        "host_api_version_text": header.version_text(header.API_VERSION),
        "devices": library.num_devices,
        "imperative": library.supports_imperative, "symbolic": True,
        "configure_keys": _split(_query(library, dev_id, "keys")),
        "declared_ops": _split(_query(library, dev_id, "ops")),
        "probe_device": dev_id, "probe_dtypes": dtypes,
        "supported": [{"op": result.label, **result.answers} for result in results],
    }


def format_text(info: dict[str, Any]) -> str:
    """The description as text."""
    modes = "imperative + symbolic" if info["imperative"] else "symbolic only"
    keys = info["configure_keys"]
    declared = info["declared_ops"]
    lines = [
        f"{info['name']}  {info['path']}",
        f"  plugin version    {info['version'] or '(does not answer query=version)'}",
        f"  ABI version       {info['api_version_text']} ({info['api_version']}); host "
        f"{info['host_api_version_text']}",
        f"  devices           {info['devices']}",
        f"  modes             {modes}",
        f"  configure keys    {', '.join(keys) if keys else '(does not answer query=keys)'}",
        "  declared ops      " + (f"{len(declared)} (query=ops)" if declared is not None
                                   else "(does not answer query=ops)"),
        "",
        f"supportedOps on one-operator graphs (device {info['probe_device']}):",
    ]
    dtypes = info["probe_dtypes"]
    width = max(len(row["op"]) for row in info["supported"])
    lines.append((f"  {'operator':<{width}}  " + "  ".join(f"{d:<8}" for d in dtypes)).rstrip())
    for row in info["supported"]:
        cells = ["n/a" if row[d].startswith("n/a") else row[d] for d in dtypes]
        lines.append(f"  {row['op']:<{width}}  " + "  ".join(f"{c:<8}" for c in cells).rstrip())
    accepted = sum(1 for row in info["supported"] if any(row[d] == "yes" for d in dtypes))
    lines.append(f"  ({accepted} of {len(info['supported'])} operators accepted in at least one "
                 "dtype; n/a: the host cannot build that graph)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from .libraries import open_library

    library = open_library(args.lib)
    if not 0 <= args.device < library.num_devices:
        raise CliError(f"{library.name} has {library.num_devices} device(s); --device "
                       f"{args.device} does not exist", USAGE)
    dtypes = _split(args.dtypes) or []
    _check_dtypes(dtypes)
    info = describe(library, args.device, dtypes, enabled(args.progress))
    print(json.dumps(info, indent=2) if args.json else format_text(info))
    return OK


def _check_dtypes(dtypes: list[str]) -> None:
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    import numpy as np

    for dtype in dtypes:
        try:
            np.dtype(dtype)
        except TypeError:
            raise CliError(f"--dtypes: {dtype!r} is not a dtype", USAGE) from None
