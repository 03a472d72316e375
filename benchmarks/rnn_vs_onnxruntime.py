"""Latency of cpu_ref's RNN next to onnxruntime's LSTM/GRU, same run, one
thread (issue 35's acceptance: within 1.5x).

Usage: python benchmarks/rnn_vs_onnxruntime.py [--repeat N] [--warmup N]
       [--steps 100] [--batch 1] [--hidden 128] [--input 128]
       [--threads 1] [--json out.json]

Each model is one ONNX node (LSTM, or GRU with linear_before_reset=1, the
form PyTorch exports) with constant W, R, B and the initial states as graph
inputs. acc-host imports it (mx.onnx.import_model: MXNet's RNN operator,
the weights repacked into its vector) and cpu_ref runs it as one loaded
model (loadModel then infer, infer timed); onnxruntime runs the same file
in an InferenceSession of the CPUExecutionProvider with intra_op_num_threads
set to the same count. Each figure is the median of --repeat calls after
--warmup, the engines measured alternately in blocks so that load from
other processes hits both alike. The reference kernels' time is shown for
scale. onnxruntime is only a reference: acc-host does not use it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import settle

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel

SETTLE_S = 0.06
TARGET = 1.5


def make_model(kind: str, steps: int, batch: int, features: int, hidden: int,
               path: Path) -> dict[str, np.ndarray]:
    """One kind node saved at path; returns the feeds."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    gates = 4 if kind == "LSTM" else 3
    scale = 1.0 / np.sqrt(hidden)
    inits = [numpy_helper.from_array(
        rng.uniform(-scale, scale, shape).astype(np.float32), name)
        for name, shape in (("W", (1, gates * hidden, features)),
                            ("R", (1, gates * hidden, hidden)), ("B", (1, 2 * gates * hidden)))]
    states = ["initial_h"] + (["initial_c"] if kind == "LSTM" else [])
    feeds = {"X": rng.standard_normal((steps, batch, features)).astype(np.float32)}
    feeds.update({name: (0.1 * rng.standard_normal((1, batch, hidden))).astype(np.float32)
                  for name in states})
    inputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, value.shape)
              for name, value in feeds.items()]
    attrs: dict[str, Any] = {"hidden_size": hidden}
    if kind == "GRU":
        attrs["linear_before_reset"] = 1
    outputs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, ["X", "W", "R", "B", "", *states], outputs, **attrs)
    graph = helper.make_graph([node], kind.lower(), inputs,
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
                               for name in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    save(model, str(path))
    return feeds


def _times(fn: Callable[[], Any], count: int) -> list[float]:
    result = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        result.append(time.perf_counter() - start)
    return result


def measure(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import onnxruntime as ort

    path = workdir / f"{kind}.onnx"
    feeds = make_model(kind, args.steps, args.batch, args.input, args.hidden, path)
    sym, arg_params, aux_params = mx.onnx.import_model(str(path))
    ops = {node["op"] for node in json.loads(sym.tojson())["nodes"]}
    assert "RNN" in ops, f"{kind} did not import to MXNet's RNN: {sorted(ops)}"
    weights = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
    graph = annotate_symbol(sym, {key: value.shape for key, value in feeds.items()},
                            weights=weights)
    library = mx.get_library("cpu_ref")
    mx.cpu_ref(0).configure(num_threads=args.threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ours_times: list[float] = []
    ort_times: list[float] = []
    with LoadedModel(library, graph, weights) as model:
        ours = list(model.infer(feeds).values())
        theirs = session.run(None, feeds)
        max_diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
        for _ in range(args.warmup):
            model.infer(feeds)
            session.run(None, feeds)
        block = max(1, args.repeat // 5)
        while len(ours_times) < args.repeat:
            settle(lambda: model.infer(feeds), SETTLE_S)
            ours_times += _times(lambda: model.infer(feeds), block)
            settle(lambda: session.run(None, feeds), SETTLE_S)
            ort_times += _times(lambda: session.run(None, feeds), block)
    library.configure(0, {"kernels": "reference"})
    try:
        with LoadedModel(library, graph, weights) as model:
            model.infer(feeds)
            reference_ms = statistics.median(_times(lambda: model.infer(feeds), 3)) * 1e3
    finally:
        library.configure(0, {"kernels": "fast"})
        mx.cpu_ref(0).configure(num_threads=1)
    ours_ms = statistics.median(ours_times) * 1e3
    ort_ms = statistics.median(ort_times) * 1e3
    return {"model": kind, "steps": args.steps, "batch": args.batch, "hidden": args.hidden,
            "input": args.input, "threads": args.threads, "cpu_ref_ms": ours_ms,
            "ort_ms": ort_ms, "ratio": ours_ms / ort_ms, "target": TARGET,
            "reference_ms": reference_ms, "max_abs_diff": max_diff}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--input", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", nargs="+", default=["LSTM", "GRU"], choices=["LSTM", "GRU"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median ms per infer of {args.repeat} after {args.warmup} warm-ups; "
          f"{os.cpu_count()} CPUs, load average at start {load:.2f}")
    print("| model | T x N x I -> H | threads | cpu_ref ms | onnxruntime ms | ratio | target | "
          "reference kernels ms | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.models:
            row = measure(kind, args, Path(tmp))
            rows.append(row)
            print(f"| {kind} | {args.steps} x {args.batch} x {args.input} -> {args.hidden} | "
                  f"{args.threads} | {row['cpu_ref_ms']:.3f} | {row['ort_ms']:.3f} | "
                  f"{row['ratio']:.2f} | {TARGET} | {row['reference_ms']:.2f} | "
                  f"{row['max_abs_diff']:.1e} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(row["ratio"] <= TARGET for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
