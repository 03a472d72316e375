"""The serving tests' pieces (tests/serve): whether the serve extra is
installed, ``acc-host serve`` as a subprocess on free ports, Triton's
client (HTTP and gRPC) around it, and the in-process outputs the served
ones must equal, computed with acc_host's own API."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SERVE_EXTRA", "MISSING_REASON", "free_port", "free_ports", "ServerProcess",
           "infer_http", "infer_grpc", "in_process_outputs"]

_NEEDED = ("kserve", "ray", "tritonclient", "prometheus_client")
_MISSING = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
SERVE_EXTRA = not _MISSING
MISSING_REASON = (f"needs the serve extra ({', '.join(_MISSING)} missing): "
                  "pip install -e '.[test,serve]'")


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    return free_ports(1)[0]


def free_ports(count: int) -> tuple[int, ...]:
    """count distinct TCP ports on the loopback interface that nothing
    listens on now: the probes stay bound until all are chosen, so the
    kernel cannot hand one port out twice (two free_port() calls in a row
    may return the same port, and a server's second bind then fails)."""
    probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return tuple(int(probe.getsockname()[1]) for probe in probes)
    finally:
        for probe in probes:
            probe.close()


class ServerProcess:
    """``python -m acc_host serve ARGS --http-port P --grpc-port Q`` in a
    subprocess, its output in log; ``stop()`` sends SIGTERM and returns the
    exit status."""

    def __init__(self, args: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
                 ready_timeout: float = 120.0, command: Sequence[str] | None = None,
                 ports: tuple[int, int] | None = None, cwd: Path | None = None) -> None:
        """command (with its ports) replaces ``python -m acc_host serve
        ARGS --http-port P --grpc-port Q`` on free ports."""
        self.http_port, self.grpc_port = ports or free_ports(2)
        self.http_url = f"127.0.0.1:{self.http_port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.log = log
        if command is None:
            command = [sys.executable, "-m", "acc_host", "serve", *args,
                       "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port)]
        with open(log, "wb") as out:
            self.process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT,
                                            env={**os.environ, **(env or {})}, cwd=cwd,
                                            start_new_session=True)
        self._wait_ready(ready_timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def _wait_ready(self, timeout: float) -> None:
        import tritonclient.http as http

        client = http.InferenceServerClient(self.http_url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"acc-host serve exited with {self.process.returncode}:\n"
                                   f"{self.output()[-4000:]}")
            try:
                if client.is_server_ready():
                    client.close()
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"acc-host serve was not ready within {timeout} s:\n"
                           f"{self.output()[-4000:]}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 90.0) -> int:
        """SIGTERM, then the exit status (SIGKILL to its group past timeout)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return int(self.process.returncode)


def infer_http(url: str, model: str, arrays: Mapping[str, np.ndarray], binary: bool = True
               ) -> dict[str, np.ndarray]:
    """The outputs by name of one inference over HTTP (binary tensor data,
    or JSON with binary=False)."""
    import tritonclient.http as http

    client = http.InferenceServerClient(url, network_timeout=120.0)
    try:
        metadata = client.get_model_metadata(model)
        inputs = []
        for name, array in arrays.items():
            tensor = http.InferInput(name, list(array.shape), _v2(array.dtype))
            tensor.set_data_from_numpy(array, binary_data=binary)
            inputs.append(tensor)
        names = [output["name"] for output in metadata["outputs"]]
        requested = [http.InferRequestedOutput(name, binary_data=binary) for name in names]
        # KServe reads a body without binary data as JSON only when it says so
        headers = None if binary else {"Content-Type": "application/json"}
        result = client.infer(model, inputs, outputs=requested, headers=headers)
        return {name: result.as_numpy(name) for name in names}
    finally:
        client.close()


def infer_grpc(url: str, model: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs by name of one inference over gRPC (raw tensor contents)."""
    import tritonclient.grpc as grpc

    client = grpc.InferenceServerClient(url)
    try:
        metadata = client.get_model_metadata(model, as_json=True)
        inputs = []
        for name, array in arrays.items():
            tensor = grpc.InferInput(name, list(array.shape), _v2(array.dtype))
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        result = client.infer(model, inputs)
        return {output["name"]: result.as_numpy(output["name"])
                for output in metadata["outputs"]}
    finally:
        client.close()


def _v2(dtype: np.dtype) -> str:
    from tritonclient.utils import np_to_triton_dtype

    return str(np_to_triton_dtype(dtype))


def in_process_outputs(source: str | Path, ctx: Any, arrays: Mapping[str, np.ndarray]
                       ) -> list[np.ndarray]:
    """The model's outputs for arrays run in this process on ctx, through
    acc_host's own API (load_checkpoint or onnx.import_model, simple_bind,
    forward), not through acc_host.serve."""
    import acc_host as mx

    source = str(source)
    shapes = {name: array.shape for name, array in arrays.items()}
    if source.endswith(".onnx"):
        sym, arg, aux = mx.onnx.import_model(source, shapes)
    else:
        sym, arg, aux = mx.model.load_checkpoint(source, 0)
    exe = sym.simple_bind(ctx, **shapes)
    for name, value in {**arg, **aux}.items():
        value.copyto((exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name])
    outputs = [out.asnumpy() for out in exe.forward(**arrays)]
    exe.close()
    return outputs
