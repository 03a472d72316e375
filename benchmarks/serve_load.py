"""A load test of ``acc-host serve`` (docs/serving.md): concurrent clients
speaking the Open Inference Protocol (Triton's client, gRPC or HTTP) to
servers started as subprocesses. Per accelerator, three ways to serve one
model are up at once and take turns:

* one process (``acc-host serve``, KServe's server, device 0, no Ray);
* Ray Serve, one replica per device (cpu_ref: 1, the MLU simulator: 4),
  without dynamic batching;
* the same replicas' twins with dynamic batching (max batch 8, 5 ms wait).

The two Ray deployments run behind one KServe front (this script's
``--server`` mode, acc_host.serve.ray's API). cpu_ref serves ``mlp``
(make_mlp: three FullyConnected layers, 88 MB of weights, generated here;
a batch of 8 costs 6 ms a sample in one process against 20 ms alone), or
with --cpu-model mobilenetv2_1_0 (tests/models) or resnet_small; the
simulator serves resnet_small (tests/onnx_models, 32x32: mobilenetv2
takes 170 ms of simulation a forward). Each client sends its share of the requests one
after another, one image (batch 1) each. After a warm-up of every variant
(which binds the executors of the batch sizes batching forms), the timed
requests are sent in rounds, each round giving every variant its share in
turn, so that a busy machine slows them alike; the errors, the throughput
(requests answered over the seconds spent on that variant) and the p50/p99
latency are reported per variant, and the ratios within this run.

Usage: python benchmarks/serve_load.py [--requests 2000] [--clients 32]
       [--rounds 4] [--protocol grpc|http] [--max-batch 8] [--only cpu_ref|mlu]
       [--json out.json]
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


def make_mlp(folder: Path) -> Model:
    """mlp: FullyConnected 1024 -> 4096 -> 4096 -> 1000 with relus (88 MB of
    float32 weights, seeded), written as an MXNet checkpoint into folder. A
    forward of one sample reads every weight for little arithmetic; a batch
    reads them once for all its samples, which is where batching pays."""
    import acc_host as mx

    data = mx.sym.Variable("data")
    x = data
    for k, hidden in enumerate((4096, 4096, 1000)):
        x = mx.sym.FullyConnected(x, num_hidden=hidden, name=f"fc{k}")
        if k < 2:
            x = mx.sym.Activation(x, act_type="relu", name=f"relu{k}")
    rng = np.random.default_rng(0)
    shapes = dict(zip(x.list_arguments(), x.infer_shape(data=(1, 1024))[0]))
    weights = {name: mx.nd.array((0.02 * rng.standard_normal(shape)).astype(np.float32))
               for name, shape in shapes.items() if name != "data"}
    prefix = folder / "mlp"
    mx.model.save_checkpoint(str(prefix), 0, x, weights, {})
    np.save(folder / "mlp_input.npy", rng.standard_normal((16, 1024)).astype(np.float32))
    return Model((str(prefix), "--shape", "data=1,1024"), "mlp", "data", "fc2_output",
                 folder / "mlp_input.npy")


def setups(folder: Path, cpu_model: str) -> dict[str, tuple[Model, str]]:
    """accelerator -> (model, devices of the Ray replicas)."""
    cpu = {"mlp": make_mlp, "mobilenetv2": lambda _: MOBILENET,
           "resnet_small": lambda _: RESNET}[cpu_model](folder)
    return {"cpu_ref": (cpu, "0"), "mlu": (RESNET, "0,1,2,3")}


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """A server subprocess on free ports, ready when its models are."""

    def __init__(self, command: list[str], ready: list[str], log: Path) -> None:
        self.http, self.grpc = _port(), _port()
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [*command, "--http-port", str(self.http), "--grpc-port", str(self.grpc)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        import tritonclient.http as http

        client = http.InferenceServerClient(f"127.0.0.1:{self.http}")
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text()[-3000:]}")
            try:
                if all(client.is_model_ready(name) for name in ready):
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


def _sender(protocol: str, url_http: str, url_grpc: str, model: Model, served: str,
            image: np.ndarray) -> Any:
    """A function sending one request; raises on an error response."""
    if protocol == "grpc":
        import tritonclient.grpc as grpc

        client = grpc.InferenceServerClient(url_grpc)
        tensor = grpc.InferInput(model.input, list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer(served, [tensor]).as_numpy(model.output)
    else:
        import tritonclient.http as http

        client = http.InferenceServerClient(url_http, network_timeout=120)
        tensor = http.InferInput(model.input, list(image.shape), "FP32")
        tensor.set_data_from_numpy(image)

        def send() -> None:
            client.infer(served, [tensor]).as_numpy(model.output)
    return send


def load(server: Server, model: Model, served: str, protocol: str, requests: int,
         clients: int) -> dict[str, Any]:
    """requests to the model served as served, spread over clients threads:
    the latencies, errors and wall time."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    shares = [requests // clients + (k < requests % clients) for k in range(clients)]

    def client(k: int) -> None:
        send = _sender(protocol, f"127.0.0.1:{server.http}", f"127.0.0.1:{server.grpc}",
                       model, served, model.image(k))
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
    return {"requests": requests, "errors": errors, "seconds": wall, "latencies": latencies}


def summary(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of one variant together."""
    latencies = sorted(value for part in parts for value in part["latencies"])
    errors = [error for part in parts for error in part["errors"]]
    seconds = sum(part["seconds"] for part in parts)
    return {"requests": sum(part["requests"] for part in parts), "errors": len(errors),
            "first_errors": errors[:3], "seconds": seconds,
            "throughput": len(latencies) / seconds,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
            if latencies else None}


def run_server(argv: list[str]) -> None:
    """--server ACC DEVICES MAX_BATCH WAIT_MS MODEL [--shape N=D,..]
    --http-port P --grpc-port Q: NAME_nobatch and NAME_batch on Ray Serve,
    one replica per device each, behind one KServe front."""
    from acc_host.serve.ray import ReplicaSpec, serve_on_ray
    from acc_host.serve.servable import model_name

    parser = argparse.ArgumentParser()
    for name in ("acc", "devices", "max_batch", "wait_ms", "model"):
        parser.add_argument(name)
    parser.add_argument("--shape", default=None)
    parser.add_argument("--http-port", type=int)
    parser.add_argument("--grpc-port", type=int)
    args = parser.parse_args(argv)
    shapes = {}
    if args.shape:
        name, _, dims = args.shape.partition("=")
        shapes[name] = tuple(int(d) for d in dims.split(","))
    devices = [int(d) for d in args.devices.split(",")]
    base = model_name(args.model)
    specs = [ReplicaSpec(source=args.model, acc=args.acc, name=f"{base}_{kind}", shapes=shapes,
                         devices=devices, max_batch_size=batch,
                         batch_wait_timeout_s=float(args.wait_ms) / 1000)
             for kind, batch in (("nobatch", 1), ("batch", int(args.max_batch)))]
    serve_on_ray(specs, args.http_port, args.grpc_port)


def bench_accelerator(acc: str, model: Model, devices: str, args: argparse.Namespace,
                      logs: Path) -> dict[str, Any]:
    replicas = len(devices.split(","))
    one = Server([sys.executable, "-m", "acc_host", "serve", *model.args, "--acc", acc],
                 [model.name], logs / f"{acc}_one.log")
    servers = [one]
    try:
        ray = Server([sys.executable, __file__, "--server", acc, devices, str(args.max_batch),
                      str(args.batch_wait_ms), *model.args],
                     [f"{model.name}_nobatch", f"{model.name}_batch"], logs / f"{acc}_ray.log")
        servers.append(ray)
        plural = "s" if replicas > 1 else ""
        variants = {f"{acc}, one process": (one, model.name),
                    f"{acc}, Ray, {replicas} replica{plural}": (ray, f"{model.name}_nobatch"),
                    f"{acc}, Ray, {replicas} replica{plural}, batching":
                        (ray, f"{model.name}_batch")}
        for server, served in variants.values():
            load(server, model, served, args.protocol, args.warmup, args.clients)
        parts: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        share = args.requests // args.rounds
        for _ in range(args.rounds):
            for name, (server, served) in variants.items():
                parts[name].append(load(server, model, served, args.protocol, share,
                                        args.clients))
        results = {name: {**summary(rounds), "model": model.name}
                   for name, rounds in parts.items()}
    finally:
        statuses = [server.stop() for server in servers]
    for row in results.values():
        row["exit_statuses"] = statuses
    return results


def main() -> int:
    if sys.argv[1:2] == ["--server"]:
        run_server(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=256)
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--only", choices=["cpu_ref", "mlu"], action="append", default=[])
    parser.add_argument("--cpu-model", choices=["mlp", "mobilenetv2", "resnet_small"],
                        default="mlp", help="the model cpu_ref serves (default mlp)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    logs = Path(tempfile.mkdtemp(prefix="serve_load_"))
    chosen = setups(logs, args.cpu_model)
    for acc in args.only or list(chosen):
        found = bench_accelerator(acc, *chosen[acc], args, logs)
        results.update(found)
        for name, row in found.items():
            print(f"{name:36s} {row['model']:16s} {row['requests']} requests, "
                  f"{row['errors']} errors: {row['throughput']:7.1f} req/s, "
                  f"p50 {row['p50_ms']:7.1f} ms, p99 {row['p99_ms']:7.1f} ms", flush=True)
        one, plain, batched = found.values()
        print(f"{acc}: Ray without batching x{plain['throughput'] / one['throughput']:.2f} the "
              f"one process; dynamic batching x{batched['throughput'] / plain['throughput']:.2f}"
              f" throughput, p99 x{batched['p99_ms'] / plain['p99_ms']:.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"protocol": args.protocol, "clients": args.clients,
                                         "max_batch": args.max_batch,
                                         "batch_wait_ms": args.batch_wait_ms,
                                         "rounds": args.rounds, "cpu_model": args.cpu_model,
                                         "results": results}, indent=1))
    return 1 if any(row["errors"] for row in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
