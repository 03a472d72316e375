"""The PyTorch model zoo through acc-host's public ONNX backend on cpu_ref,
next to onnxruntime, same run, same inputs, same thread count.

Usage: python benchmarks/zoo/zoo_vs_onnxruntime.py [--models NAME ...]
       [--batch 1 8] [--threads 1 2] [--repeat N] [--warmup N]
       [--models-dir DIR] [--json out.json]

The models are those benchmarks/zoo/export_torch_zoo.py writes (default folder
benchmarks/zoo/models; a missing model is reported and skipped). Each model is
prepared once with ``acc_host.onnx.backend.prepare(model, accelerator="cpu_ref")``
(its batch axis is symbolic, so the one prepared representation serves every
batch) and timed through ``rep.run(feeds)``, the call users make; cpu_ref's
thread count is set with ``mx.cpu_ref(0).configure(num_threads=N)``, which the
plugin reads at each run. onnxruntime runs the same file in an
InferenceSession of the CPUExecutionProvider with intra_op_num_threads = N
(inter-op parallelism off). The inputs are the exporter's sample (batch 2),
repeated to the batch with a small perturbation per copy.

The two sides are measured alternately in blocks (bench_common.interleaved_blocks,
with untimed settling calls before each block so that onnxruntime's spinning
workers stop and cpu_ref's wake up); the figures are the medians over all
timed calls, the ratio of the two medians and the paired ratio (the median over
rounds of the ratio of the two block medians of the round). The outputs of
both sides are compared first: max abs diff and max relative diff
(|a - b| / (1e-3 + |b|)) over every output. onnxruntime is only a reference:
acc-host does not use it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench_common
from bench_common import blocks_median, interleaved_blocks, ort_session, paired_ratio  # noqa: E402

import acc_host as mx  # noqa: E402

CNNS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0")
TRANSFORMERS = ("vit_s16", "bert_base")
MODELS = (*CNNS, *TRANSFORMERS)
# Untimed calls before each block (onnxruntime's workers spin ~50 ms after a run).
SETTLE_S = 0.06
TARGET = 1.15


def batched_feeds(samples: Any, names: list[str], batch: int) -> dict[str, np.ndarray]:
    """The exporter's sample inputs repeated to `batch` rows; float copies
    perturbed slightly so that no two images of a batch are alike."""
    rng = np.random.default_rng(0)
    feeds = {}
    for name in names:
        array = samples[name]
        reps = -(-batch // array.shape[0])
        base = np.concatenate([array] * reps)[:batch]
        if np.issubdtype(base.dtype, np.floating):
            base = (base + 0.01 * rng.standard_normal(base.shape)).astype(array.dtype)
        feeds[name] = np.ascontiguousarray(base)
    return feeds



def measure_model(name: str, folder: Path, batches: list[int], threads_list: list[int],
                  repeat: int, warmup: int) -> list[dict[str, Any]]:
    import onnx

    from acc_host.onnx.backend import prepare

    path = folder / f"{name}.onnx"
    start = time.perf_counter()
    rep = prepare(onnx.load(str(path)), accelerator="cpu_ref")
    prepare_s = time.perf_counter() - start
    samples = np.load(folder / f"{name}.npz")
    rows = []
    for threads in threads_list:
        session = ort_session(path, threads)
        names = [value.name for value in session.get_inputs()]
        mx.cpu_ref(0).configure(num_threads=threads)
        try:
            for batch in batches:
                feeds = batched_feeds(samples, names, batch)
                ours = rep.run(feeds)
                theirs = session.run(None, feeds)
                abs_diff = max(float(np.max(np.abs(np.asarray(a) - b)))
                               for a, b in zip(ours, theirs))
                rel_diff = max(float(np.max(np.abs(np.asarray(a) - b) / (1e-3 + np.abs(b))))
                               for a, b in zip(ours, theirs))
                blocks = interleaved_blocks(
                    {"cpu_ref": lambda f=feeds: rep.run(f),
                     "ort": lambda s=session, f=feeds: s.run(None, f)},
                    repeat, warmup=warmup, settle_s=SETTLE_S)
                ours_ms = blocks_median(blocks["cpu_ref"]) * 1e3
                ort_ms = blocks_median(blocks["ort"]) * 1e3
                rows.append({"model": name, "batch": batch, "threads": threads,
                             "cpu_ref_ms": ours_ms, "ort_ms": ort_ms,
                             "ratio": ours_ms / ort_ms,
                             "paired_ratio": paired_ratio(blocks["cpu_ref"], blocks["ort"]),
                             "max_abs_diff": abs_diff, "max_rel_diff": rel_diff,
                             "prepare_s": prepare_s})
                print_row(rows[-1])
        finally:
            mx.cpu_ref(0).configure(num_threads=1)
    return rows


def print_row(row: dict[str, Any]) -> None:
    mark = "" if row["ratio"] <= TARGET else " (over)"
    print(f"| {row['model']} | {row['batch']} | {row['threads']} | {row['cpu_ref_ms']:.2f} | "
          f"{row['ort_ms']:.2f} | {row['ratio']:.2f}{mark} | {row['paired_ratio']:.2f} | "
          f"{row['max_abs_diff']:.2e} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--models-dir", type=Path, default=HERE / "models")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median ms per run of {args.repeat} after {args.warmup} warm-ups, interleaved "
          f"in blocks; {os.cpu_count()} CPUs, load average at start {load:.2f}; "
          f"target ratio <= {TARGET}")
    print("| model | batch | threads | cpu_ref ms | onnxruntime ms | ratio | paired | "
          "max abs diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows: list[dict[str, Any]] = []
    for name in args.models:
        if not (args.models_dir / f"{name}.onnx").exists():
            print(f"| {name} | missing: run benchmarks/zoo/export_torch_zoo.py |", flush=True)
            continue
        rows += measure_model(name, args.models_dir, args.batch, args.threads,
                              args.repeat, args.warmup)
    if hasattr(os, "getloadavg"):
        print(f"load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
