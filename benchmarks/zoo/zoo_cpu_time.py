"""The zoo models at batch 1 on one thread, acc-host's public ONNX backend on
cpu_ref next to onnxruntime, timed in process CPU time rather than wall
time.

Usage: python benchmarks/zoo/zoo_cpu_time.py [--models M ...] [--rounds N]

On a machine shared with other jobs, wall time counts the time slices
others take (with the load average at 9-10 on 2 cores the zoo's wall-clock
ratios moved by 0.3 from run to run); on one thread the CPU time of the
process is the work of the run itself, and the ratio of the two sides'
CPU times, paired round by round (each round runs both sides twice,
interleaved), moved by about 0.02. It still counts what other jobs do to
the caches, and says nothing of several threads (their waits), for which
benchmarks/zoo/zoo_vs_onnxruntime.py on a quiet machine is the figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CNNS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0"]


def measure(name: str, folder: Path, rounds: int) -> tuple[float, float, float]:
    """Median CPU ms per run of cpu_ref and onnxruntime, and the median of
    the per-round ratios."""
    import onnx
    import onnxruntime as ort

    import acc_host as mx
    from acc_host.onnx.backend import prepare

    model = onnx.load(str(folder / f"{name}.onnx"))
    samples = np.load(folder / f"{name}.npz")
    feeds = {v.name: samples[v.name][:1] for v in model.graph.input if v.name in samples.files}
    rep = prepare(model, accelerator="cpu_ref")
    mx.cpu_ref(0).configure(num_threads=1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(folder / f"{name}.onnx"), options,
                                   providers=["CPUExecutionProvider"])
    inputs = list(feeds.values())
    for _ in range(3):
        rep.run(inputs)
        session.run(None, feeds)
    ours, theirs = [], []
    for _ in range(rounds):
        start = time.process_time()
        rep.run(inputs)
        rep.run(inputs)
        ours.append((time.process_time() - start) / 2 * 1e3)
        start = time.process_time()
        session.run(None, feeds)
        session.run(None, feeds)
        theirs.append((time.process_time() - start) / 2 * 1e3)
    paired = statistics.median(a / b for a, b in zip(ours, theirs))
    return statistics.median(ours), statistics.median(theirs), paired


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=CNNS)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--models-dir", type=Path, default=HERE / "models")
    args = parser.parse_args(argv)
    print("| model | cpu_ref CPU ms | onnxruntime CPU ms | paired |")
    print("|---|---:|---:|---:|")
    for name in args.models:
        ours, theirs, paired = measure(name, args.models_dir, args.rounds)
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {paired:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
