"""A load test of ``acc-host serve`` (docs/serving.md): concurrent clients
speaking the Open Inference Protocol (Triton's client, gRPC or HTTP) to a
server started as a subprocess, for each configuration in turn:

* cpu_ref in one process (KServe's server, no Ray);
* cpu_ref on Ray Serve, 1 replica (cpu_ref has 1 device), without and with
  dynamic batching;
* the MLU simulator on Ray Serve, 4 replicas on its 4 devices, without and
  with dynamic batching.

Each client sends its share of the requests one after another (one image,
batch 1: mobilenetv2_1_0 of tests/models on cpu_ref, resnet_small of
tests/onnx_models on the simulator, see configurations()); after a
warm-up (which binds the executors of the batch sizes batching forms) the
timed run counts
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Model:
    """A served model: its files, the name it is served under, its input
    and output, and one sample (batch 1)."""

    args: tuple[str, ...]
    name: str
    input: str
    output: str
    sample: Path
    sample_key: str | None = None

    def image(self, k: int) -> np.ndarray:
        values = np.load(self.sample)
        values = values[self.sample_key] if self.sample_key else values
        return np.ascontiguousarray(values[k % len(values)][None])


MOBILENET = Model((str(ROOT / "tests/models/mobilenetv2_1_0/model"), "--shape",
                   "data=1,3,224,224"), "mobilenetv2_1_0", "data",
                  "mobilenetv20_output_flatten0_flatten0_output",
                  ROOT / "tests/models/mobilenetv2_1_0/input_0.npy")
RESNET = Model((str(ROOT / "tests/onnx_models/resnet_small.onnx"),), "resnet_small", "input",
               "logits", ROOT / "tests/onnx_models/resnet_small.npz", "input")


def configurations(max_batch: int, wait_ms: float) -> dict[str, tuple[Model, list[str]]]:
    """cpu_ref serves mobilenetv2_1_0 (224x224, 13 ms a forward here); the
    MLU simulator, whose forward of it takes 170 ms of simulation, serves
    resnet_small (32x32, 3.5 ms)."""
    batching = ["--max-batch", str(max_batch), "--batch-wait-ms", str(wait_ms)]
    mlu = ["--acc", "mlu", "--ray", "--devices", "0,1,2,3"]
    return {
        "cpu_ref, one process": (MOBILENET, ["--acc", "cpu_ref"]),
        "cpu_ref, Ray, 1 replica": (MOBILENET, ["--acc", "cpu_ref", "--ray", "--max-batch",
                                                "1"]),
        "cpu_ref, Ray, 1 replica, batching": (MOBILENET, ["--acc", "cpu_ref", "--ray",
                                                          *batching]),
        "mlu, Ray, 4 replicas": (RESNET, [*mlu, "--max-batch", "1"]),
        "mlu, Ray, 4 replicas, batching": (RESNET, [*mlu, *batching]),
    }


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """acc-host serve MODEL ARGS on free ports, until stop()."""

    def __init__(self, model: Model, args: list[str], log: Path) -> None:
        self.http, self.grpc = _port(), _port()
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "acc_host", "serve", *model.args, *args,
                 "--http-port", str(self.http), "--grpc-port", str(self.grpc)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        import tritonclient.http as http

        client = http.InferenceServerClient(f"127.0.0.1:{self.http}")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text()[-3000:]}")
            try:
                if client.is_model_ready(model.name):
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


def _sender(protocol: str, url_http: str, url_grpc: str, model: Model, image: np.ndarray
            ) -> Any:
    """A function sending one request; raises on an error response."""
    if protocol == "grpc":
        import tritonclient.grpc as grpc

        client = grpc.InferenceServerClient(url_grpc)
        tensor = grpc.InferInput(model.input, list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer(model.name, [tensor]).as_numpy(model.output)
    else:
        import tritonclient.http as http

        client = http.InferenceServerClient(url_http, network_timeout=120)
        tensor = http.InferInput(model.input, list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer(model.name, [tensor]).as_numpy(model.output)
    return send


def load(server: Server, model: Model, protocol: str, requests: int, clients: int
         ) -> dict[str, Any]:
    """requests spread over clients threads; latencies, errors, wall time."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    shares = [requests // clients + (k < requests % clients) for k in range(clients)]

    def client(k: int) -> None:
        send = _sender(protocol, f"127.0.0.1:{server.http}", f"127.0.0.1:{server.grpc}",
                       model, model.image(k))
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
    for k, (name, (model, server_args)) in enumerate(configurations(args.max_batch,
                                                                   args.batch_wait_ms).items()):
        if args.only and not any(part in name for part in args.only):
            continue
        server = Server(model, server_args, logs / f"server{k}.log")
        try:
            load(server, model, args.protocol, args.warmup, args.clients)
            results[name] = load(server, model, args.protocol, args.requests, args.clients)
            results[name]["model"] = model.name
        finally:
            results.setdefault(name, {})["exit_status"] = server.stop()
        row = results[name]
        print(f"{name:36s} {model.name:16s} {row['requests']} requests, {row['errors']} errors: "
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
