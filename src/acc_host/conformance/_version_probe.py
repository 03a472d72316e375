"""Child-process probe for initialize(): ``python _version_probe.py LIB VERSION``.

initialize() may be called once per loaded instance, so each host version
the kit offers goes to a fresh copy of the library in a fresh process (a
plugin that crashes in initialize() takes only this process down). Prints
one JSON object: the status initialize(VERSION) returned, the plugin's
message and its getAccApiVersion(). Needs nothing but the standard library.
"""

from __future__ import annotations

import ctypes
import json
import sys


def probe(path: str, version: int) -> dict[str, object]:
    """Loads path, calls initialize(version) and reads the last error."""
    library = ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_LOCAL", 0))
    library.getAccApiVersion.restype = ctypes.c_int
    library.initialize.argtypes = [ctypes.c_int]
    library.initialize.restype = ctypes.c_int
    plugin_version = int(library.getAccApiVersion())
    status = int(library.initialize(version))
    message = ""
    last_error = getattr(library, "accGetLastError", None)
    if last_error is not None:
        last_error.restype = ctypes.c_char_p
        text = last_error()
        message = text.decode("utf-8", "replace") if text else ""
    return {"status": status, "message": message, "plugin_version": plugin_version}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: _version_probe.py LIBRARY VERSION", file=sys.stderr)
        return 2
    try:
        answer = probe(argv[1], int(argv[2]))
    except (OSError, AttributeError, ValueError) as error:
        answer = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
