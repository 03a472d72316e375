"""Latency of the PyTorch-exported ONNX models (tests/onnx_models) on acc-host
next to onnxruntime.

Usage: python benchmarks/onnx_pytorch_latency.py [--repeat N] [--warmup N]
       [--models NAME ...] [--json out.json]

For each model, with its shipped sample input (batch 2): the median host wall
time of one forward on acc-host's CPU path, on cpu_ref and on the mlu
simulator (``onnx.backend.prepare(model, accelerator=...)`` then ``run``;
the time includes copying the inputs in and the outputs out), and for mlu
also the simulated device time per forward (``configure(query="stats")``'s
``sim_time_ns`` over the timed forwards). Next to them, onnxruntime's
CPUExecutionProvider with one intra-op thread and with its default thread
count. onnxruntime is only a reference here; acc-host does not use it.
Each figure is the median of --repeat forwards after --warmup untimed ones;
"ops on acc" is how many operator nodes the partition placed on the
accelerator. Set OPENBLAS_NUM_THREADS / OMP_NUM_THREADS before starting to
fix numpy's BLAS threads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx

MODELS = Path(__file__).resolve().parent.parent / "tests" / "onnx_models"
NAMES = ("resnet_small", "dwsep_small", "vit_small", "bert_small")


def median_ms(fn: Callable[[], Any], repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def onnxruntime_ms(path: Path, feeds: dict[str, np.ndarray], threads: int, repeat: int,
                   warmup: int) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: onnxruntime's default
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return median_ms(lambda: session.run(None, feeds), repeat, warmup)


def measure(name: str, repeat: int, warmup: int) -> dict[str, Any]:
    import onnx

    from acc_host.onnx.backend import prepare

    path = MODELS / f"{name}.onnx"
    model = onnx.load(str(path))
    data = np.load(MODELS / f"{name}.npz")
    feeds = {value.name: data[value.name] for value in model.graph.input}
    row: dict[str, Any] = {"model": name}
    for label, ctx in (("cpu", mx.cpu()), ("cpu_ref", mx.cpu_ref(0)), ("mlu", mx.mlu(0))):
        rep = prepare(model, accelerator=ctx)
        executor = rep.executor
        assert executor is not None  # static input shapes: bound at prepare
        placement = list(executor.placement().values())
        row[f"{label}_on_acc"] = f"{sum(d != 'cpu(0)' for d in placement)}/{len(placement)}"

        def forward(rep: Any = rep) -> Any:
            return rep.run(feeds)

        if label == "mlu":
            for _ in range(warmup):
                forward()
            ctx.configure(reset_stats=1)
            row[f"{label}_ms"] = median_ms(forward, repeat, 0)
            stats = ctx.configure(query="stats")
            row["mlu_sim_ms"] = float(stats["sim_time_ns"]) / repeat / 1e6
        else:
            row[f"{label}_ms"] = median_ms(forward, repeat, warmup)
    row["ort1_ms"] = onnxruntime_ms(path, feeds, 1, repeat, warmup)
    row["ort_ms"] = onnxruntime_ms(path, feeds, 0, repeat, warmup)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=list(NAMES), choices=NAMES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"median ms per forward (batch 2) of {args.repeat} after {args.warmup} warm-ups; "
          f"{os.cpu_count()} CPUs, BLAS threads: {threads}")
    header = (f"| {'model':<13}| {'acc-host cpu':>12} | {'cpu_ref':>8} | {'mlu (host)':>10} | "
              f"{'mlu simulated':>13} | {'ORT 1 thread':>12} | {'ORT default':>11} | "
              f"{'ops on cpu_ref':>14} | {'ops on mlu':>10} |")
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    rows = []
    for name in args.models:
        row = measure(name, args.repeat, args.warmup)
        rows.append(row)
        print(f"| {name:<13}| {row['cpu_ms']:>12.2f} | {row['cpu_ref_ms']:>8.2f} | "
              f"{row['mlu_ms']:>10.2f} | {row['mlu_sim_ms']:>13.3f} | {row['ort1_ms']:>12.3f} | "
              f"{row['ort_ms']:>11.3f} | {row['cpu_ref_on_acc']:>14} | {row['mlu_on_acc']:>10} |",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
