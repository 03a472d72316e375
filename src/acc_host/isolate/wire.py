"""Framing of the messages between the host and an isolated plugin's process.

A message is an 8-byte little-endian length and a pickle of plain data
(tuples, lists, dicts, str, bytes, int, float, bool, None); file
descriptors (shared-memory segments, new channels) travel beside it as
``SCM_RIGHTS`` on its first byte. The host reads the child's messages with
:func:`loads_plain`, which refuses anything but plain data, so a plugin that
writes into the socket cannot make the host run code.

This module is imported by the child process as a plain file (it must not
import acc_host).
"""

from __future__ import annotations

import array
import io
import os
import pickle
import socket
import struct
import time
from typing import Any

__all__ = ["HEADER", "MAX_FDS", "MAX_REPLY_BYTES", "Closed", "TooLarge", "encode", "send",
           "recv", "loads_plain"]

HEADER = struct.Struct("<Q")
# The most bytes one reply of a plugin process may hold. Replies carry
# statuses, messages, names, configure() answers and supportedOps() ids;
# tensors travel in shared memory, never in a message. The largest a real
# plugin sends is supportedOps()'s ids (about 5 bytes a node: 1.3 MB for
# a graph of 262,144 nodes), so 64 MiB leaves ample room while a length
# the child makes up (8 GiB, 2**40) is refused before anything is
# allocated for it.
MAX_REPLY_BYTES = 64 << 20
MAX_FDS = 8
_ANCILLARY = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)


class Closed(Exception):
    """The other end closed the socket (or its process died)."""


class TooLarge(Exception):
    """A message announced more bytes than the receiver accepts."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"a message of {length} bytes, more than the {limit} accepted")
        self.length, self.limit = length, limit


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused {module}.{name}: only plain data may cross")


def loads_plain(data: bytes | bytearray) -> Any:
    """Unpickles data that holds only plain values."""
    return _PlainUnpickler(io.BytesIO(data)).load()


def encode(message: Any) -> bytes:
    """The frame of one message."""
    body = pickle.dumps(message, protocol=5)
    return HEADER.pack(len(body)) + body


def send(sock: socket.socket, message: Any, fds: list[int] | tuple[int, ...] = ()) -> None:
    """Sends one message (or a frame from :func:`encode`), with fds attached
    (at most MAX_FDS)."""
    data = memoryview(message if isinstance(message, bytes) else encode(message))
    try:
        if fds:
            sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", fds))])
            data = data[sent:]
        if data:
            sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError) as error:
        raise Closed(str(error)) from None


def _fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    found: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            values = array.array("i")
            values.frombytes(payload[:len(payload) - len(payload) % values.itemsize])
            found.extend(values)
    return found


def _wait(sock: socket.socket, deadline: float | None) -> None:
    if deadline is not None:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))


def recv(sock: socket.socket, deadline: float | None = None,
         loads: Any = pickle.loads, limit: int | None = None) -> tuple[Any, list[int]]:
    """Receives one message and the fds that came with it. Raises Closed at
    end of file, TimeoutError (socket.timeout) past deadline (a
    time.monotonic() value; None waits for ever), TooLarge when the message
    announces more than limit bytes (None: no limit), before reading or
    allocating its body."""
    header = bytearray()
    fds: list[int] = []
    try:
        while len(header) < HEADER.size:
            _wait(sock, deadline)
            chunk, ancillary, _, _ = sock.recvmsg(HEADER.size - len(header), _ANCILLARY)
            fds += _fds(ancillary)
            if not chunk:
                raise Closed("end of file")
            header += chunk
        (length,) = HEADER.unpack(header)
        if limit is not None and length > limit:
            raise TooLarge(length, limit)
        body = bytearray(length)
        view, got = memoryview(body), 0
        while got < length:
            _wait(sock, deadline)
            count = sock.recv_into(view[got:])
            if count == 0:
                raise Closed("end of file")
            got += count
    except BaseException as error:
        for fd in fds:
            os.close(fd)
        if isinstance(error, ConnectionResetError):
            raise Closed(str(error)) from None
        raise
    return loads(body), fds
