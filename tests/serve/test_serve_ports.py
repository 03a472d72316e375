"""A busy HTTP or gRPC port is a PortInUseError naming it, raised before
anything starts: also where the process holding it bound it with
SO_REUSEPORT, as gRPC servers do (gRPC's own bind would then share the
port and start without an error)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.paths import ONNX_MODELS
from support.serving import free_port

from acc_host.cli import main
from acc_host.errors import AccHostError, PortInUseError
from acc_host.serve.ports import check_ports_free, port_in_use


@contextlib.contextmanager
def _listener(reuse_port: bool, family: socket.AddressFamily = socket.AF_INET
              ) -> Iterator[int]:
    """A socket listening on a free port (with SO_REUSEPORT, as a gRPC
    server's); yields the port."""
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("reuse_port", [False, True], ids=["plain", "reuseport"])
def test_a_listened_port_is_in_use(reuse_port: bool) -> None:
    with _listener(reuse_port) as port:
        assert port_in_use(port)
        with pytest.raises(PortInUseError) as raised:
            check_ports_free({"HTTP": free_port(), "gRPC": port})
    message = str(raised.value)
    assert f"gRPC port {port} is in use" in message and "--grpc-port" in message
    assert isinstance(raised.value, AccHostError) and isinstance(raised.value, OSError)


def test_an_ipv6_listener_counts_too() -> None:
    try:
        with _listener(True, socket.AF_INET6) as port:
            assert port_in_use(port)
    except OSError as error:
        pytest.skip(f"cannot listen on ::1 here: {error}")


def test_free_ports_and_servers_not_run_pass() -> None:
    port = free_port()
    assert not port_in_use(port)
    check_ports_free({"HTTP": port, "gRPC": None})
    check_ports_free({"HTTP": 0, "gRPC": free_port()})


def test_a_closed_listener_leaves_the_port_free() -> None:
    with _listener(False) as port:
        pass
    assert not port_in_use(port)


def test_the_cli_refuses_a_busy_grpc_port_before_loading(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with _listener(True) as port:
        status = main(["serve", str(ONNX_MODELS / "resnet_small.onnx"), "--acc", "cpu_ref",
                       "--http-port", str(free_port()), "--grpc-port", str(port)])
    assert status == 3  # the environment's
    assert f"gRPC port {port} is in use" in capsys.readouterr().err


@pytest.mark.serve
def test_serve_refuses_a_port_a_grpc_server_holds() -> None:
    """The case gRPC's bind lets through: a running gRPC server holds the
    port (with SO_REUSEPORT); a second gRPC server binds it too, and
    acc_host's serve() refuses it. serve() runs in a subprocess: KServe's
    protocol modules and tritonclient's (the other serving tests) cannot
    share one process's descriptor pool."""
    from concurrent import futures

    import grpc

    holder = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = holder.add_insecure_port("[::]:0")
    holder.start()
    try:
        second = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        assert second.add_insecure_port(f"[::]:{port}") == port  # shared, no error
        second.stop(None)
        code = ("from acc_host.errors import PortInUseError\n"
                "from acc_host.serve.server import serve\n"
                "try:\n"
                f"    serve([], http_port={free_port()}, grpc_port={port}, json_logs=False)\n"
                "except PortInUseError as error:\n"
                "    print('REFUSED', error)\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120)
    finally:
        holder.stop(None)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"REFUSED gRPC port {port} is in use" in result.stdout
