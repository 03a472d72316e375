"""The host's CSR dot against the dense one (acc_host.ndarray.sparse_ops).

Usage: python benchmarks/host_sparse.py [--rows N] [--cols N] [--out-cols N]
       [--repeat N] [--json out.json]

For each density (0.1 %, 1 %, 10 %) a rows x cols float32 matrix X of that
density is multiplied by a dense cols x out-cols W on the CPU context in
three ways, interleaved repeat times so that the machine's noise falls on
all of them alike: ``mx.nd.sparse.dot(csr, W)`` (the sparse path),
``mx.nd.dot(dense, W)`` (the CPU path's numpy matmul) and
``mx.nd.sparse.dot(csr, W2, transpose_a=True)`` (csr.T x dense to
row_sparse, W2 rows x out-cols). Reported: the median milliseconds of each
and the same-run ratio dense / csr (above 1: the sparse path is faster), and
the bytes each form of X holds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

import acc_host as mx


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _timed(fn: Callable[[], mx.nd.NDArray]) -> float:
    start = time.perf_counter()
    fn().wait_to_read()
    return time.perf_counter() - start


def _cases(csr: mx.nd.NDArray, dense: mx.nd.NDArray, weight: mx.nd.NDArray,
           weight_t: mx.nd.NDArray) -> dict[str, Callable[[], mx.nd.NDArray]]:
    return {
        "csr_dot_ms": lambda: mx.nd.sparse.dot(csr, weight),
        "dense_dot_ms": lambda: mx.nd.dot(dense, weight),
        "csr_t_dot_ms": lambda: mx.nd.sparse.dot(csr, weight_t, transpose_a=True),
    }


def run(rows: int, cols: int, out_cols: int, repeat: int) -> list[dict]:
    rng = np.random.default_rng(39)
    weight = mx.nd.array(rng.standard_normal((cols, out_cols)).astype(np.float32))
    weight_t = mx.nd.array(rng.standard_normal((rows, out_cols)).astype(np.float32))
    results = []
    for density in (0.001, 0.01, 0.1):
        values = rng.standard_normal((rows, cols)).astype(np.float32)
        values *= rng.random((rows, cols)) < density
        dense = mx.nd.array(values)
        csr = dense.tostype("csr")
        cases = _cases(csr, dense, weight, weight_t)
        np.testing.assert_allclose(cases["csr_dot_ms"]().asnumpy(),
                                   cases["dense_dot_ms"]().asnumpy(), rtol=1e-3, atol=1e-3)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeat):
            for name, fn in cases.items():
                samples[name].append(_timed(fn))
        row = {"density": density, "nnz": int(np.count_nonzero(values)),
               **{name: round(_median_ms(times), 3) for name, times in samples.items()}}
        row["dense_over_csr"] = round(row["dense_dot_ms"] / row["csr_dot_ms"], 2)
        row["csr_bytes"] = int(values[values != 0].nbytes) + 8 * (rows + 1) + \
            8 * row["nnz"]  # values, int64 indptr and indices
        row["dense_bytes"] = int(values.nbytes)
        results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=20_000)
    parser.add_argument("--out-cols", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    results = run(args.rows, args.cols, args.out_cols, args.repeat)
    print(f"X {args.rows} x {args.cols} float32, W {args.cols} x {args.out_cols}; "
          f"medians of {args.repeat}")
    print("| density | nnz | csr dot ms | dense dot ms | dense/csr | csr.T dot ms | "
          "csr bytes | dense bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results:
        print(f"| {row['density']:.1%} | {row['nnz']} | {row['csr_dot_ms']} | "
              f"{row['dense_dot_ms']} | {row['dense_over_csr']} | {row['csr_t_dot_ms']} | "
              f"{row['csr_bytes']} | {row['dense_bytes']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
