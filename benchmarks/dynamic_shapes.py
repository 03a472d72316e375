"""Dynamic-shape models on cpu_ref next to onnxruntime, one thread each.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/dynamic_shapes.py
       [--repeat N] [--warmup N] [--json out.json]

For each model of tests/onnx_models/dynamic (a CNN with dynamic batch,
height and width, a transformer encoder with a dynamic sequence length),
imported once and prepared once (``onnx.backend.prepare(model,
accelerator="cpu_ref")``), at each input shape of its .npz:

* ``first ms``: the first forward at that shape, which plans it (shape
  inference with the shape arithmetic worked out on the host, partition,
  memory plan, cpu_ref's loadModel) and runs it;
* ``steady ms``: the median of --repeat forwards at that shape after
  --warmup, once planned (the plan cache holds it);
* ``again ms``: the first forward at that shape after the model ran at
  every other shape (a plan cache hit: no re-planning);
* ``ORT ms``: onnxruntime's CPUExecutionProvider (one intra-op and one
  inter-op thread), median of --repeat after --warmup, and the ratio
  steady / ORT.

cpu_ref runs with ``configure(num_threads=1)``; set OPENBLAS_NUM_THREADS=1
so that numpy (the host path) uses one thread too.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import acc_host as mx
from acc_host.onnx.backend import CpuRefBackend

MODELS = Path(__file__).resolve().parent.parent / "tests" / "onnx_models" / "dynamic"
NAMES = ("cnn_dynamic", "encoder_dynamic")


def median_ms(fn, repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def once_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    mx.cpu_ref(0).configure(num_threads=1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    rows = []
    print(f"{'model':16} {'input shape':18} {'first ms':>9} {'steady ms':>9} {'again ms':>9} "
          f"{'ORT ms':>8} {'ratio':>6}")
    for name in NAMES:
        path = MODELS / f"{name}.onnx"
        data = np.load(MODELS / f"{name}.npz")
        inputs = [data[key] for key in sorted(k for k in data.files if k.startswith("input_"))]
        rep = CpuRefBackend.prepare(onnx.load(str(path)))
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feed_name = session.get_inputs()[0].name
        for x in inputs:
            run = functools.partial(rep.run, [x])
            first = once_ms(run)
            steady = median_ms(run, args.repeat, args.warmup)
            ort_ms = median_ms(functools.partial(session.run, None, {feed_name: x}),
                               args.repeat, args.warmup)
            rows.append({"model": name, "shape": list(x.shape), "first_ms": first,
                         "steady_ms": steady, "ort_ms": ort_ms, "ratio": steady / ort_ms})
        for row, x in zip(rows[-len(inputs):], inputs):
            row["again_ms"] = once_ms(functools.partial(rep.run, [x]))
            print(f"{name:16} {str(tuple(x.shape)):18} {row['first_ms']:9.2f} "
                  f"{row['steady_ms']:9.3f} {row['again_ms']:9.3f} {row['ort_ms']:8.3f} "
                  f"{row['ratio']:6.2f}")
        stats = rep.plans.stats()
        print(f"{name}: imports {rep.imports}, plan cache hits {stats.hits}, "
              f"misses {stats.misses}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
