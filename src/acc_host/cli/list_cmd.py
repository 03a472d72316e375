"""``acc-host list``: every accelerator library discovery found, loaded or
not, with why not."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .errors import OK

__all__ = ["add_parser", "run", "records"]

HELP = "list every accelerator found (bundled, MXNET_ACC_LIBRARIES, entry points)"
DESCRIPTION = """\
List every accelerator library acc_host found when it was imported, in the
order discovery looked at them: the plugins bundled with the package
(unless MXNET_ACC_BUNDLED=0), every shared library in the directory named by
MXNET_ACC_LIBRARIES, and the libraries installed packages register through
the acc_host.plugins entry-point group (unless MXNET_ACC_ENTRY_POINTS=0;
SOURCE is then 'entry point DISTRIBUTION:NAME'). For each: its path (as
'LINK -> TARGET' when it goes through a symlink), name, ABI version, device
count and execution modes, or the reason it was refused (the trust checks,
or a crash, abort, exit or hang in the probe process) or could not be
loaded. Exit status 0, even when some failed."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("list", help=HELP, description=DESCRIPTION)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def _modes(library: Any) -> list[str]:
    return ["imperative", "symbolic"] if library.supports_imperative else ["symbolic"]


def records() -> list[dict[str, Any]]:
    """One dict per library discovery looked at (and per library loaded
    some other way in this process). ``link`` and ``target``: the path found
    and the real file, when the path goes through a symlink (else None);
    ``probe``: how loading it in a probe process went (None: not probed)."""
    # The subcommand's imports, made when it runs (the CLI loads lazily).
    from ..abi import header
    from ..plugins.discovery import report
    from ..plugins.registry import libraries

    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in report():
        library = item.library
        links = {"link": None if item.target is None else str(item.path),
                 "target": None if item.target is None else str(item.target),
                 "probe": None if item.probe is None else _probe(item.probe)}
        if library is None:  # path None: an entry point that gave no path
            found.append({"path": None if item.path is None else str(item.path),
                          "source": item.source, "loaded": False, "error": item.error, **links})
            continue
        seen.add(library.path)
        found.append({**_loaded(library, item.source, header), **links})
    for library in libraries():
        if library.path not in seen:
            found.append({**_loaded(library, "load_acc", header), "link": None, "target": None,
                          "probe": None})
    return found


def _probe(result: Any) -> dict[str, Any]:
    return {"outcome": result.outcome, "stage": result.stage, "cached": result.cached}


def _loaded(library: Any, source: str, abi: Any) -> dict[str, Any]:
    return {"path": library.path, "source": source, "loaded": True, "name": library.name,
            "api_version": library.api_version,
            "api_version_text": abi.version_text(library.api_version),
            "devices": library.num_devices, "modes": _modes(library)}


def _path(record: dict[str, Any]) -> str:
    """The path, as ``LINK -> TARGET`` when it goes through a symlink."""
    if record.get("link") and record.get("target"):
        return f"{record['link']} -> {record['target']}"
    return str(record["path"])


def format_table(found: list[dict[str, Any]]) -> str:
    """The records as aligned text."""
    if not found:
        return ("no accelerator libraries found (bundled plugins missing or MXNET_ACC_BUNDLED=0,"
                " MXNET_ACC_LIBRARIES not set, and no acc_host.plugins entry point)")
    rows = [("NAME", "ABI", "DEVICES", "MODES", "SOURCE", "PATH")]
    failures = []
    for record in found:
        if record["loaded"]:
            rows.append((record["name"], record["api_version_text"], str(record["devices"]),
                         "+".join(record["modes"]), record["source"], _path(record)))
        elif record["path"] is None:  # the error starts with the entry point's label
            failures.append(f"  {record['error']}")
        else:
            failures.append(f"  {_path(record)} ({record['source']}): {record['error']}")
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[5]
             for row in rows]
    if failures:
        lines += ["", f"failed to load ({len(failures)}):", *failures]
    return "\n".join(line.rstrip() for line in lines)


def run(args: argparse.Namespace) -> int:
    found = records()
    print(json.dumps(found, indent=2) if args.json else format_table(found))
    return OK
