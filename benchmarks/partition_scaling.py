"""Partitioner cost on synthetic graphs of 10k, 100k and 1M operator nodes.

Usage: python benchmarks/partition_scaling.py [--sizes 10000 100000 1000000] [--repeat 3]

Each graph is a random DAG in which every node reads one to three of the
64 nodes before it (the shape of real networks: mostly local edges), and a
random 70% of the nodes are supported by the accelerator. Prints the median
time of acc_host.partition.segment.segment() per size and the time per node, whose
flatness across sizes is the near-linear scaling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from acc_host.partition.segment import segment


def synthetic(size: int, seed: int = 0) -> tuple[list[list[int]], list[int]]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 4, size)
    offsets = rng.integers(1, 65, (size, 3))
    predecessors = [[node - int(offset) for offset in offsets[node, :counts[node]]
                     if node - offset >= 0] for node in range(size)]
    classes = (rng.random(size) < 0.7).astype(int).tolist()
    return predecessors, classes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(f"{'nodes':>10}{'segments':>10}{'median s':>11}{'us/node':>10}")
    rows = []
    for size in args.sizes:
        predecessors, classes = synthetic(size)
        times, segments = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            segments = segment(size, predecessors, classes)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        print(f"{size:>10}{len(segments):>10}{seconds:>11.3f}{seconds / size * 1e6:>10.2f}")
        rows.append({"nodes": size, "segments": len(segments), "seconds": seconds})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
