"""N models on N simulated MLU cards at once, against one model alone.

Usage: python benchmarks/mlu_concurrency.py [--repeat N] [--cards 1,2,4]

Each card gets its own bound executor of the same convolutional network
(four 3x3 convolutions with 32 filters and ReLU on 1x32x48x48); each executor
runs `--forwards` forwards in its own host thread. Every card has its own
cnrtQueue worker, and cffi releases the GIL during infer(), so the cards
compute in parallel up to the number of host CPUs. Reported per N: the median
wall time of N executors at once over the median of one alone (N = perfectly
serial, 1 = perfectly parallel), and, for scale, the same ratio for N plain
threads of GIL-free hashing on this machine, measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
from collections.abc import Callable

import numpy as np
from bench_common import conv_relu_network, in_threads

import acc_host as mx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--forwards", type=int, default=4)
    parser.add_argument("--cards", default="1,2,4")
    args = parser.parse_args()
    counts = [int(n) for n in args.cards.split(",")]
    available = mx.get_library("mlu").num_devices
    if max(counts) > available:
        parser.error(f"{max(counts)} cards asked for, mlu_sim has {available} "
                     "(MLU_SIM_NUM_CARDS)")
    symbol, shape = conv_relu_network(), (1, 32, 48, 48)
    rng = np.random.default_rng(0)
    image = rng.standard_normal(shape).astype(np.float32)
    executors = []
    for dev_id in range(max(counts)):
        exe = symbol.simple_bind(mx.mlu(dev_id), data=shape)
        for name, array in exe.arg_dict.items():
            if name != "data":
                array[:] = (rng.standard_normal(array.shape) * 0.1).astype(np.float32)
        exe.forward(data=image)[0].asnumpy()  # compiled before timing
        executors.append(exe)

    def model_job(exe: mx.runtime.executor.Executor) -> Callable[[], None]:
        def run() -> None:
            for _ in range(args.forwards):
                exe.forward(data=image)[0].asnumpy()
        return run

    block = bytes(16 << 20)

    def hashing() -> None:
        for _ in range(6):
            hashlib.sha256(block).digest()

    print(f"host CPUs: {os.cpu_count()}; {args.forwards} forwards per card; "
          f"medians of {args.repeat}")
    print("| cards | one alone (ms) | all at once (ms) | at once / alone | "
          "plain threads at once / alone |")
    print("|---|---|---|---|---|")
    for n in counts:
        alone = statistics.median(in_threads([model_job(executors[0])])
                                  for _ in range(args.repeat))
        together = statistics.median(in_threads([model_job(exe) for exe in executors[:n]])
                                     for _ in range(args.repeat))
        plain_one = statistics.median(in_threads([hashing]) for _ in range(args.repeat))
        plain_n = statistics.median(in_threads([hashing] * n) for _ in range(args.repeat))
        print(f"| {n} | {alone * 1e3:.1f} | {together * 1e3:.1f} | {together / alone:.2f} | "
              f"{plain_n / plain_one:.2f} |")
    for exe in executors:
        exe.close()


if __name__ == "__main__":
    main()
