"""configure() (mxnet_acc.h section 9) and error reporting (section 10).

Ids: configure.queries, configure.unknown_key, configure.unknown_query,
errors.message, errors.per_thread.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..abi import cdata, header
from ..abi.tensor import CStrings
from ..errors import PluginContractError, PluginError
from .report import CheckFailed, CheckSkipped
from .session import ERR_NOT_FOUND, Session, status_text

__all__ = ["checks", "raw_configure"]

UNKNOWN_KEY = "acc_conformance_no_such_key"
UNKNOWN_QUERY = "acc_conformance_no_such_query"
UNKNOWN_MODEL = "acc_conformance.never_loaded"
_OP_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*:[0-9]+\Z")


def raw_configure(session: Session, dev: int, settings: dict[str, str]) -> tuple[int, str]:
    """configure() without the host's exception: (status, last error)."""
    library = session.require_library()
    keys, values = CStrings(list(settings)), CStrings(list(settings.values()))
    out_keys = cdata.new("const char *const **")
    out_vals = cdata.new("const char *const **")
    count = cdata.new("int *")
    with library.device_lock(dev):
        status = int(library.unchecked("configure", keys.pointer, values.pointer, keys.count, dev,
                                           out_keys, out_vals, count))
        message = library.last_error() if status != header.OK else ""
    return status, message


def check_queries(session: Session) -> str:
    """query=keys, query=ops and query=version are answered on every device,
    under their own output key; "keys" lists "query"; "ops" entries are
    name:version."""
    library = session.require_library()
    notes = []
    for dev in session.require_devices():
        answers: dict[str, dict[str, str]] = {}
        for query in ("keys", "ops", "version"):
            try:
                answer = library.configure(dev, {"query": query})
            except (PluginError, PluginContractError) as error:
                raise CheckFailed(f"device {dev}: query={query}: {error}") from None
            if not answer.get(query):
                raise CheckFailed(f"device {dev}: query={query} answered {answer!r}, without a "
                                  f"non-empty {query!r}")
            answers[query] = answer
        keys = answers["keys"]["keys"].split(",")
        if "query" not in keys:
            raise CheckFailed(f"device {dev}: query=keys does not list 'query': {keys}")
        entries = answers["ops"]["ops"].split(",")
        bad = [entry for entry in entries if not _OP_ENTRY.match(entry)]
        if bad:
            raise CheckFailed(f"device {dev}: query=ops entries are not name:version: {bad[:3]}")
        notes.append(f"{len(entries)} ops, {len(keys)} keys, version "
                     f"{answers['version']['version']!r}")
    return f"devices {session.devices}: " + notes[0]


def check_unknown_key(session: Session) -> str:
    """An unknown key fails cleanly with MX_ACC_ERR_NOT_FOUND, alone or next
    to a valid query, and the device still answers afterwards."""
    library = session.require_library()
    for dev in session.require_devices():
        for settings in ({UNKNOWN_KEY: "1"}, {"query": "version", UNKNOWN_KEY: "1"}):
            status, message = raw_configure(session, dev, settings)
            if status != ERR_NOT_FOUND:
                raise CheckFailed(f"device {dev}: configure({', '.join(settings)}) returned "
                                  f"{status_text(status)}, expected MX_ACC_ERR_NOT_FOUND"
                                  + (f": {message}" if message else ""))
        library.configure(dev, {"query": "version"})
    return f"refused with MX_ACC_ERR_NOT_FOUND on devices {session.devices}"


def check_unknown_query(session: Session) -> str:
    """query=<an unknown query> fails with MX_ACC_ERR_NOT_FOUND."""
    for dev in session.require_devices():
        status, message = raw_configure(session, dev, {"query": UNKNOWN_QUERY})
        if status != ERR_NOT_FOUND:
            raise CheckFailed(f"device {dev}: query={UNKNOWN_QUERY} returned "
                              f"{status_text(status)}, expected MX_ACC_ERR_NOT_FOUND"
                              + (f": {message}" if message else ""))
    return "refused with MX_ACC_ERR_NOT_FOUND"


def _failing_unload(session: Session, model_id: str = UNKNOWN_MODEL) -> tuple[int, str]:
    """unloadModel of an id never loaded: (status, the calling thread's message)."""
    library = session.require_library()
    dev = session.require_devices()[0]
    with library.device_lock(dev):
        status = int(library.unchecked("unloadModel", cdata.new("char[]", model_id.encode())))
        return status, library.last_error() if status != header.OK else ""


def _failing_supported_ops(session: Session) -> tuple[int, str]:
    """supportedOps on malformed JSON: (status, the calling thread's message)."""
    library = session.require_library()
    dev = session.require_devices()[0]
    ids, count = cdata.new("int[]", 4), cdata.new("int *", -1)
    with library.device_lock(dev):
        status = int(library.unchecked("supportedOps",
                                       cdata.new("char[]", b'{"nodes": ['), cdata.NULL,
                                              cdata.NULL, 0, dev, ids, 4, count))
        return status, library.last_error() if status != header.OK else ""


def check_message(session: Session) -> str:
    """Failing calls leave a message for accGetLastError() on the calling
    thread: unloadModel of an unknown id (which must be
    MX_ACC_ERR_NOT_FOUND) and supportedOps on malformed JSON (which must
    fail)."""
    status, unload_message = _failing_unload(session)
    session.expect_status(f"unloadModel({UNKNOWN_MODEL!r})", status, ERR_NOT_FOUND)
    status, json_message = _failing_supported_ops(session)
    if status == header.OK:
        raise CheckFailed("supportedOps accepted malformed graph JSON ('{\"nodes\": [')")
    if not session.has_last_error():
        raise CheckSkipped("accGetLastError is not exported (optional): failures carry only "
                           "their status code")
    empty = [call for call, message in (("unloadModel", unload_message),
                                        ("supportedOps", json_message)) if not message.strip()]
    if empty:
        raise CheckFailed(f"accGetLastError() is empty after a failing {' and '.join(empty)}")
    return (f"unloadModel: {_at_a_word(unload_message)!r}; "
            f"supportedOps({header.status_name(status)}): {_at_a_word(json_message)!r}")


def _at_a_word(message: str, limit: int = 120) -> str:
    """message, or its longest start of at most limit characters that ends
    at a word, followed by "..." (a plugin's words are never cut inside)."""
    message = message.strip()
    if len(message) <= limit:
        return message
    cut = message.rfind(" ", 0, limit - 2)
    head = message[:cut] if cut > 0 else message[:limit - 3]
    return head.rstrip(" ,;:") + "..."


def check_per_thread(session: Session) -> str:
    """The message belongs to the thread whose call failed: another thread
    that has made no failing call reads "" (or NULL), and its own failure
    does not replace the first thread's message."""
    library = session.require_library()
    if not session.has_last_error():
        raise CheckSkipped("accGetLastError is not exported (optional)")
    first_status, first_message = _failing_unload(session, UNKNOWN_MODEL + ".first")
    if first_status == header.OK or not first_message:
        raise CheckSkipped("unloadModel of an unknown id left no message (see errors.message)")
    seen: dict[str, Any] = {}

    def other_thread() -> None:
        try:
            seen["before"] = library.last_error()
            seen["status"], seen["message"] = _failing_unload(session,
                                                              UNKNOWN_MODEL + ".other")
        except Exception as error:  # noqa: BLE001
            seen["error"] = error

    thread = threading.Thread(target=other_thread, name="acc-conformance-errors")
    thread.start()
    thread.join()
    if "error" in seen:
        raise CheckFailed(f"the second thread failed: {seen['error']}")
    if seen["before"]:
        raise CheckFailed(f"a new thread reads the other thread's message: {seen['before']!r}")
    after = library.last_error()
    if after != first_message:
        raise CheckFailed(f"another thread's failure replaced this thread's message: "
                          f"{first_message!r} became {after!r}")
    return "messages are kept per thread"


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    yield "configure.queries", lambda: check_queries(session)
    yield "configure.unknown_key", lambda: check_unknown_key(session)
    yield "configure.unknown_query", lambda: check_unknown_query(session)
    yield "errors.message", lambda: check_message(session)
    yield "errors.per_thread", lambda: check_per_thread(session)
