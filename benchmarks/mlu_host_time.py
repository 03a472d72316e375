"""Host time of a forward on the mlu simulator against cpu_ref, same run.

Usage: python benchmarks/mlu_host_time.py [--repeat N] [--models a,b] [--batches 1,8]
                                          [--threads 1,2]

For each model (the shared CNNs of tests/models, the transformer encoder,
and the PyTorch-exported models of tests/onnx_models), batch and thread
count: the same graph bound with ``simple_bind`` on cpu_ref and on the
simulated MLU (partitioned as a user's executor would be), weights set,
``predict`` timed alternately in blocks (benchmarks/bench_common.py). The
simulator gets the same number of host threads as cpu_ref
(``configure(num_threads=...)`` on both). Reported: the median host ms per
forward of each, the ratio of the medians and the paired ratio (the median
over rounds of each round's ratio), the simulated ms per forward and the
largest difference between the two outputs relative to cpu_ref's largest
magnitude. The goal (issue 38): the simulator's host time at most 4x
cpu_ref's on the shared CNNs.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import (
    ONNX_MODELS,
    ROOT,
    BenchModel,
    batched,
    blocks_median,
    interleaved_blocks,
    load_model,
    paired_ratio,
)

import acc_host as mx

SHARED = ("squeezenet1_1", "squeezenet_biased", "mobilenetv2_1_0", "transformer_enc")
MLU_CARD = 0


def shared_model(name: str, batch: int) -> BenchModel:
    """A model of tests/models without the ONNX export load_model makes."""
    folder = ROOT / "tests" / "models" / name
    sym, args, aux = mx.model.load_checkpoint(str(folder / "model"), 0)
    params = {key: value.asnumpy() for key, value in {**args, **aux}.items()}
    data = batched(np.load(folder / "input_0.npy"), batch)
    return BenchModel(name, "mxnet", batch, sym, params, {"data": data}, folder)


def runner(model: BenchModel, ctx: Any) -> tuple[Callable[[], list[np.ndarray]], Any]:
    exe = model.symbol.simple_bind(ctx, **{k: v.shape for k, v in model.feeds.items()})
    for key, value in model.params.items():
        target = exe.arg_dict[key] if key in exe.arg_dict else exe.aux_dict[key]
        target[()] = value
    return (lambda: exe.predict(**model.feeds)), exe


def measure(model: BenchModel, threads: int, repeat: int) -> dict[str, Any]:
    mx.cpu_ref(0).configure(num_threads=threads)
    mx.mlu(MLU_CARD).configure(num_threads=threads)
    try:
        cpu_ref, cpu_exe = runner(model, mx.cpu_ref(0))
        mlu, mlu_exe = runner(model, mx.mlu(MLU_CARD))
        expected, got = cpu_ref(), mlu()
        scale = max(float(np.abs(out).max()) for out in expected) or 1.0
        error = max(float(np.abs(a - b).max()) for a, b in zip(got, expected)) / scale
        blocks = interleaved_blocks({"cpu_ref": cpu_ref, "mlu": mlu}, repeat)
        mx.mlu(MLU_CARD).configure(reset_stats=1)
        mlu()
        simulated = float(mx.mlu(MLU_CARD).configure(query="stats")["sim_time_ns"]) / 1e6
        cpu_exe.close()
        mlu_exe.close()
    finally:
        mx.cpu_ref(0).configure(num_threads=1)
        mx.mlu(MLU_CARD).configure(num_threads=1)
    cpu_ms, mlu_ms = (blocks_median(blocks[k]) * 1e3 for k in ("cpu_ref", "mlu"))
    return {"model": model.name, "batch": model.batch, "threads": threads, "cpu_ref_ms": cpu_ms,
            "mlu_ms": mlu_ms, "ratio": mlu_ms / cpu_ms,
            "paired": paired_ratio(blocks["mlu"], blocks["cpu_ref"]),
            "simulated_ms": simulated, "max_rel_diff": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--models", default=",".join((*SHARED, *ONNX_MODELS)))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    threads_list = [int(t) for t in args.threads.split(",")]
    print(f"medians of {args.repeat} forwards, cpu_ref and mlu({MLU_CARD}) alternated")
    print("| model | batch | threads | cpu_ref ms | mlu_sim host ms | ratio | paired | "
          "simulated ms | max rel diff |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            seen: set[int] = set()
            for batch in batches:
                model = shared_model(name, batch) if name in SHARED else \
                    load_model(name, batch, Path(tmp))
                if model.batch in seen:  # a model fixed at its exported batch
                    continue
                seen.add(model.batch)
                for threads in threads_list:
                    r = measure(model, threads, args.repeat)
                    print(f"| {r['model']} | {r['batch']} | {r['threads']} | "
                          f"{r['cpu_ref_ms']:.2f} | {r['mlu_ms']:.2f} | {r['ratio']:.2f} | "
                          f"{r['paired']:.2f} | {r['simulated_ms']:.3f} | "
                          f"{r['max_rel_diff']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
