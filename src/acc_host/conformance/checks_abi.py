"""Checks of the library as a whole: exported symbols, version
negotiation, loading through acc_host's loader, its name and its devices.

Ids: abi.symbols, abi.version, abi.load, abi.name, abi.initialize_repeat,
abi.version_refused, abi.version_minor, devices.count, devices.out_of_range.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..abi import cdata, header
from ..abi.library import IMPERATIVE_SYMBOLS, OPTIONAL_SYMBOLS, REQUIRED_SYMBOLS, validate_acc_name
from .report import CheckFailed, CheckSkipped
from .session import ERR_DEVICE, Session, status_text

__all__ = ["checks"]

_PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_version_probe.py")
_PROBE_TIMEOUT_S = 60


def check_symbols(session: Session) -> str:
    """Every required function of the header is exported; the imperative set
    is all or nothing; the optional accGetLastError is noted."""
    try:
        handle = session.raw
    except OSError as error:
        raise CheckFailed(f"the loader refuses the file: {error}".split(
            "  Additionally, ctypes.util", 1)[0]) from None
    missing = [symbol for symbol in REQUIRED_SYMBOLS if not handle.has(symbol)]
    if missing:
        raise CheckFailed(f"required functions missing: {', '.join(missing)}")
    imperative = [symbol for symbol in IMPERATIVE_SYMBOLS if handle.has(symbol)]
    if 0 < len(imperative) < len(IMPERATIVE_SYMBOLS):
        absent = sorted(set(IMPERATIVE_SYMBOLS) - set(imperative))
        imperative_text = f"partial imperative set (missing {', '.join(absent)})"
    else:
        imperative_text = "imperative set " + ("exported" if imperative else "absent")
    optional = [symbol for symbol in OPTIONAL_SYMBOLS if handle.has(symbol)]
    optional_text = ", ".join(optional) if optional else "no accGetLastError (optional)"
    return (f"{len(REQUIRED_SYMBOLS)} required functions exported; {imperative_text}; "
            f"{optional_text}")


def check_version(session: Session) -> str:
    """getAccApiVersion() (callable before initialize) has the host's major."""
    try:
        handle = session.raw
    except OSError:
        raise CheckSkipped("the file does not load (see abi.symbols)") from None
    if not handle.has("getAccApiVersion"):
        raise CheckSkipped("getAccApiVersion is not exported (see abi.symbols)")
    version = int(handle.unchecked("getAccApiVersion"))
    text = f"{header.version_text(version)} ({version})"
    if version // 100 != header.API_VERSION_MAJOR:
        raise CheckFailed(f"built for ABI {text}; host ABI "
                          f"{header.version_text(header.API_VERSION)}: "
                          f"{header.skew_advice(version)}")
    if version != header.API_VERSION:
        return f"built for ABI {text}; {header.skew_advice(version)}"
    return f"built for ABI {text}; host ABI {header.version_text(header.API_VERSION)}"


def check_load(session: Session) -> str:
    """acc_host's loader accepts the library: initialize(host version), the
    name, getNumAcc() >= 1, supportsImperative() in {0, 1} with its functions."""
    library = session.load()
    modes = "imperative and symbolic" if library.supports_imperative else "symbolic only"
    note = f"; {session.load_note}" if session.load_note else ""
    return (f"{library.library_name!r}: {library.num_devices} device(s), {modes}, "
            f"ABI {header.version_text(library.api_version)}{note}")


def check_name(session: Session) -> str:
    """getAccName() writes a valid context type name."""
    library = session.require_library()
    name = validate_acc_name(library.library_name, session.path)
    # A too-small buffer must be refused, not overrun.
    small = cdata.new("char[]", 2 + 8)
    for index in range(2, len(small)):
        small[index] = b"\xaa"
    status = library.unchecked("getAccName", small, 2)
    if status == header.OK and len(name) >= 2:
        raise CheckFailed(f"getAccName(buffer, 2) returned MX_ACC_OK for the name {name!r} "
                          "(expected MX_ACC_ERR_INVALID_ARG)")
    if any(small[index] != b"\xaa" for index in range(2, len(small))):
        raise CheckFailed("getAccName(buffer, 2) wrote past the 2 bytes it was given")
    return f"{name!r}; a 2-byte buffer is refused with {status_text(status)}"


def check_initialize_repeat(session: Session) -> str:
    """A repeated initialize(host version) is harmless and returns MX_ACC_OK."""
    library = session.require_library()
    status = library.unchecked("initialize", header.API_VERSION)
    session.expect_status("a second initialize(host version)", status, header.OK)
    if int(library.unchecked("getNumAcc")) != library.num_devices:
        raise CheckFailed("getNumAcc() changed after a second initialize()")
    return "second initialize() returned MX_ACC_OK; getNumAcc() unchanged"


def _probe(session: Session, version: int, label: str) -> dict[str, Any]:
    """initialize(version) on a fresh copy in a child process."""
    copy = session.private_copy(f"probe_{label}")
    try:
        result = subprocess.run([sys.executable, _PROBE, copy, str(version)],
                                capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S,
                                check=False)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"initialize({version}) did not return within "
                          f"{_PROBE_TIMEOUT_S} s") from None
    if result.returncode != 0:
        raise CheckFailed(f"initialize({version}) crashed the probe process (exit status "
                          f"{result.returncode}): {result.stderr.strip()[-300:]}")
    lines = result.stdout.strip().splitlines()
    answer: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": "no output"}
    if "error" in answer:
        raise CheckSkipped(f"the probe could not call initialize(): {answer['error']}")
    return answer


def check_version_refused(session: Session) -> str:
    """initialize() refuses host versions of another major with
    MX_ACC_ERR_VERSION (each tried on a fresh instance)."""
    major, minor = header.API_VERSION_MAJOR, header.API_VERSION % 100
    versions = [(major + 1) * 100 + minor, (major + 1) * 100 + 7]
    if major > 0:
        versions.append((major - 1) * 100 + minor)
    seen = []
    for version in versions:
        answer = _probe(session, version, f"v{version}")
        status = int(answer["status"])
        if status != header.ERR_VERSION:
            raise CheckFailed(f"initialize({version}) (ABI {header.version_text(version)}) "
                              f"returned {status_text(status)}, expected MX_ACC_ERR_VERSION")
        seen.append(f"{header.version_text(version)}"
                    + (f" ({answer['message']!r})" if answer["message"] else ""))
    return "refused " + ", ".join(seen)


def check_version_minor(session: Session) -> str:
    """initialize() accepts a newer minor of its major (a host of any minor
    loads a plugin of any minor)."""
    version = header.API_VERSION + 1
    answer = _probe(session, version, f"v{version}")
    status = int(answer["status"])
    if status != header.OK:
        message = f": {answer['message']}" if answer["message"] else ""
        raise CheckFailed(f"initialize({version}) (ABI {header.version_text(version)}) returned "
                          f"{status_text(status)}, expected MX_ACC_OK{message}")
    return f"accepted host ABI {header.version_text(version)}"


def check_device_count(session: Session) -> str:
    """getNumAcc() is at least 1 and constant; the requested devices exist."""
    library = session.require_library()
    counts = {int(library.unchecked("getNumAcc")) for _ in range(3)}
    if counts != {library.num_devices}:
        raise CheckFailed(f"getNumAcc() is not constant: {sorted(counts)}")
    modes = {int(library.unchecked("supportsImperative")) for _ in range(3)}
    if len(modes) != 1:
        raise CheckFailed(f"supportsImperative() is not constant: {sorted(modes)}")
    requested = session.requested_devices
    if requested is not None:
        absent = [dev for dev in requested if dev not in session.devices]
        if absent:
            raise CheckFailed(f"requested device(s) {absent} do not exist (getNumAcc() = "
                              f"{library.num_devices})")
    return f"{library.num_devices} device(s); testing {session.devices}"


def check_devices_out_of_range(session: Session) -> str:
    """Calls naming a device outside 0 .. getNumAcc()-1 fail with
    MX_ACC_ERR_DEVICE."""
    library = session.require_library()
    tried = []
    for dev in (library.num_devices, -1):
        out_keys = cdata.new("const char *const **")
        out_vals = cdata.new("const char *const **")
        count = cdata.new("int *")
        keys = [cdata.new("char[]", b"query")]
        vals = [cdata.new("char[]", b"version")]
        key_array = cdata.new("const char *[]", keys)
        val_array = cdata.new("const char *[]", vals)
        session.expect_status(f"configure(query=version, dev_id={dev})",
                              library.unchecked("configure",
                                                key_array, val_array, 1, dev, out_keys, out_vals,
                                            count), ERR_DEVICE)
        graph = cdata.new("char[]", _TINY_GRAPH.encode())
        ids = cdata.new("int[]", 4)
        num = cdata.new("int *")
        session.expect_status(f"supportedOps(dev_id={dev})",
                              library.unchecked("supportedOps",
                                                graph, cdata.NULL, cdata.NULL, 0, dev, ids, 2, num),
                              ERR_DEVICE)
        tried += ["configure", "supportedOps"]
        if library.supports_imperative:
            pointer = cdata.new("void **")
            session.expect_status(f"mx_alloc(dev_id={dev}, 16)",
                                  library.unchecked("mx_alloc", dev, 16, pointer), ERR_DEVICE)
            tried.append("mx_alloc")
    return (f"{', '.join(sorted(set(tried)))} refuse devices {library.num_devices} and -1 with "
            "MX_ACC_ERR_DEVICE")


# data -> relu, annotated as the host would.
_TINY_GRAPH = json.dumps({
    "nodes": [
        {"op": "null", "name": "data", "inputs": [],
         "attrs": {"__out_shapes__": "[[2,3]]", "__out_dtypes__": "[0]", "__kind__": "data"}},
        {"op": "Activation", "name": "relu0", "inputs": [[0, 0, 0]],
         "attrs": {"act_type": "relu", "__out_shapes__": "[[2,3]]", "__out_dtypes__": "[0]",
                   "__op_version__": "1", "__dev_id__": "0"}},
    ],
    "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
    "attrs": {"mxnet_version": ["int", 10901]},
})


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    """The checks of this module, in order (abi.load must run before the
    checks of the other modules)."""
    yield "abi.symbols", lambda: check_symbols(session)
    yield "abi.version", lambda: check_version(session)
    yield "abi.load", lambda: check_load(session)
    yield "abi.name", lambda: check_name(session)
    yield "abi.initialize_repeat", lambda: check_initialize_repeat(session)
    yield "abi.version_refused", lambda: check_version_refused(session)
    yield "abi.version_minor", lambda: check_version_minor(session)
    yield "devices.count", lambda: check_device_count(session)
    yield "devices.out_of_range", lambda: check_devices_out_of_range(session)
