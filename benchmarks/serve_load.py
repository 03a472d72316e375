"""A load test of ``acc-host serve`` (docs/serving.md): concurrent clients
speaking the Open Inference Protocol (Triton's client, gRPC or HTTP) to a
server started as a subprocess, for each configuration in turn:

* cpu_ref in one process (KServe's server, no Ray);
* cpu_ref on Ray Serve, 1 replica (cpu_ref has 1 device), without and with
  dynamic batching;
* the MLU simulator on Ray Serve, 4 replicas on its 4 devices, without and
  with dynamic batching.

Each client sends its share of the requests one after another (one
resnet_small image, tests/onnx_models, batch 1); after a warm-up (which
binds the executors of the batch sizes batching forms) the timed run counts
errors and measures the throughput and the p50/p99 latency. Every
configuration runs in the same invocation, so the ratios between them are
taken on one machine state.

Usage: python benchmarks/serve_load.py [--requests 2000] [--clients 32]
       [--protocol grpc|http] [--max-batch 8] [--only NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "onnx_models" / "resnet_small.onnx"
SAMPLES = ROOT / "tests" / "onnx_models" / "resnet_small.npz"


def configurations(max_batch: int, wait_ms: float) -> dict[str, list[str]]:
    batching = ["--max-batch", str(max_batch), "--batch-wait-ms", str(wait_ms)]
    return {
        "cpu_ref, one process": ["--acc", "cpu_ref"],
        "cpu_ref, Ray, 1 replica": ["--acc", "cpu_ref", "--ray", "--max-batch", "1"],
        "cpu_ref, Ray, 1 replica, batching": ["--acc", "cpu_ref", "--ray", *batching],
        "mlu, Ray, 4 replicas": ["--acc", "mlu", "--ray", "--devices", "0,1,2,3",
                                 "--max-batch", "1"],
        "mlu, Ray, 4 replicas, batching": ["--acc", "mlu", "--ray", "--devices", "0,1,2,3",
                                           *batching],
    }


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """acc-host serve MODEL ARGS on free ports, until stop()."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.http, self.grpc = _port(), _port()
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "acc_host", "serve", str(MODEL), *args,
                 "--http-port", str(self.http), "--grpc-port", str(self.grpc)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        import tritonclient.http as http

        client = http.InferenceServerClient(f"127.0.0.1:{self.http}")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text()[-3000:]}")
            try:
                if client.is_model_ready("resnet_small"):
                    return
            except Exception:
                pass
            time.sleep(0.5)
        raise RuntimeError("the server did not become ready in 300 s")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()


def _sender(protocol: str, url_http: str, url_grpc: str, image: np.ndarray) -> Any:
    """A function sending one request; raises on an error response."""
    if protocol == "grpc":
        import tritonclient.grpc as grpc

        client = grpc.InferenceServerClient(url_grpc)
        tensor = grpc.InferInput("input", list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer("resnet_small", [tensor]).as_numpy("logits")
    else:
        import tritonclient.http as http

        client = http.InferenceServerClient(url_http, network_timeout=120)
        tensor = http.InferInput("input", list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer("resnet_small", [tensor]).as_numpy("logits")
    return send


def load(server: Server, protocol: str, requests: int, clients: int) -> dict[str, Any]:
    """requests spread over clients threads; latencies, errors, wall time."""
    images = np.load(SAMPLES)["input"]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    shares = [requests // clients + (k < requests % clients) for k in range(clients)]

    def client(k: int) -> None:
        send = _sender(protocol, f"127.0.0.1:{server.http}", f"127.0.0.1:{server.grpc}",
                       np.ascontiguousarray(images[k % len(images)][None]))
        mine = []
        for _ in range(shares[k]):
            start = time.perf_counter()
            try:
                send()
            except Exception as error:
                with lock:
                    errors.append(str(error)[:200])
                continue
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    latencies.sort()
    return {"requests": requests, "errors": len(errors), "first_errors": errors[:3],
            "seconds": wall, "throughput": len(latencies) / wall,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
            if latencies else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=256)
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--only", action="append", default=[],
                        help="run the configurations whose name contains this (repeatable)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    logs = Path(tempfile.mkdtemp(prefix="serve_load_"))
    for k, (name, server_args) in enumerate(configurations(args.max_batch,
                                                          args.batch_wait_ms).items()):
        if args.only and not any(part in name for part in args.only):
            continue
        server = Server(server_args, logs / f"server{k}.log")
        try:
            load(server, args.protocol, args.warmup, args.clients)
            results[name] = load(server, args.protocol, args.requests, args.clients)
        finally:
            results.setdefault(name, {})["exit_status"] = server.stop()
        row = results[name]
        print(f"{name:36s} {row['requests']} requests, {row['errors']} errors: "
              f"{row['throughput']:7.1f} req/s, p50 {row['p50_ms']:6.1f} ms, "
              f"p99 {row['p99_ms']:6.1f} ms", flush=True)
    for device in ("cpu_ref", "mlu"):
        plain = [row for name, row in results.items()
                 if name.startswith(device) and "Ray" in name and "batching" not in name]
        batched = [row for name, row in results.items()
                   if name.startswith(device) and "batching" in name]
        if plain and batched:
            ratio = batched[0]["throughput"] / plain[0]["throughput"]
            print(f"{device}: dynamic batching x{ratio:.2f} throughput", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"protocol": args.protocol, "clients": args.clients,
                                         "max_batch": args.max_batch,
                                         "batch_wait_ms": args.batch_wait_ms,
                                         "results": results}, indent=1))
    return 1 if any(row.get("errors") for row in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
