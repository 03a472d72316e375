"""CPU-path latency of the real MXNet models in tests/models.

Usage: python benchmarks/model_latency.py [--repeat N] [--batch 1 8] [--json out.json]

Runs each model through an executor (simple_bind + forward) and prints the
median milliseconds per forward next to MXNet 1.9.1's own figures from
tests/models/README.md (measured on this kind of machine, 1 thread). Set
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS before starting to fix the thread
count of numpy's BLAS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import acc_host as mx

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
# MXNet 1.9.1's symbolic executor, 1 thread, ms per forward (batch 1, batch 8).
MXNET_MS = {"squeezenet1_1": (6.15, 47.3), "mobilenetv2_1_0": (5.77, 48.1),
            "transformer_enc": (0.77, 3.28), "transformer_enc_mxcodes": (0.71, 3.35)}


def measure(name: str, batch: int, repeat: int) -> float:
    folder = MODELS / name
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    image = np.load(folder / "input_0.npy")
    data = np.concatenate([image] * batch)
    exe = sym.simple_bind(mx.cpu(), data=data.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    exe.forward(data=data)[0].wait_to_read()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe.forward(data=data)[0].wait_to_read()  # forward() only pushes to the engine
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"acc-host CPU path, median of {args.repeat} forwards, BLAS threads: {threads}")
    print(f"{'model':<26}{'batch':>6}{'acc-host ms':>13}{'MXNet ms':>10}{'ratio':>8}")
    rows = []
    for name, reference in MXNET_MS.items():
        for batch in args.batch:
            ms = measure(name, batch, args.repeat)
            mxnet = reference[0] if batch == 1 else reference[1] if batch == 8 else None
            ratio = f"{ms / mxnet:.2f}" if mxnet else "-"
            print(f"{name:<26}{batch:>6}{ms:>13.2f}{mxnet or '-':>10}{ratio:>8}")
            rows.append({"model": name, "batch": batch, "ms": ms, "mxnet_ms": mxnet})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
