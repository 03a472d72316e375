"""Whether the servers' TCP ports are free, checked before anything starts.

gRPC binds its port with ``SO_REUSEPORT`` (grpcio's default on Linux):
where the process holding the port set it too (another gRPC server, a
second ``acc-host serve``), the bind succeeds and the kernel splits the
connections between the two servers, so a server started on a busy gRPC
port would run without an error and answer only some of the calls. A
probe bound without ``SO_REUSEPORT`` fails on any port some socket
listens on, reuse or not; uvicorn (HTTP) fails on a busy port too, but
only after the models are loaded, with a traceback.

The probe sets ``SO_REUSEADDR``, as the servers do, so a port left in
TIME_WAIT by a server that just stopped is free. It binds the wildcard
address the servers bind (``[::]`` dual-stack, or ``0.0.0.0`` where the
host has no IPv6), which conflicts with a listener on any address.
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterator

from ..errors import PortInUseError

__all__ = ["check_ports_free", "port_in_use"]


@contextlib.contextmanager
def _probe() -> Iterator[socket.socket]:
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:  # no IPv6 on this host
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with sock:
        if sock.family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        yield sock


def port_in_use(port: int) -> bool:
    """Whether a socket is bound to TCP port (on any address) so that a
    server could not take it alone."""
    with _probe() as sock:
        address = "::" if sock.family == socket.AF_INET6 else "0.0.0.0"
        try:
            sock.bind((address, port))
        except OSError as error:
            # Anything else (a privileged port, say) is the server's own
            # bind's to report.
            return error.errno == errno.EADDRINUSE
    return False


def check_ports_free(ports: dict[str, int | None]) -> None:
    """Raises PortInUseError for the first of ports (by server name, e.g.
    {"HTTP": 8080, "gRPC": 8081}; None: that server does not run) that is
    in use; 0 (any free port) always passes."""
    for server, port in ports.items():
        if port and port_in_use(port):
            raise PortInUseError(
                f"{server} port {port} is in use: another process listens on it (another "
                f"server?); stop it or choose another port (--{server.lower()}-port)")
