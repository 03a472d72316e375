"""CSR across the ABI against the dense path, on cpu_ref (ABI 1.2).

Usage: python benchmarks/sparse_dot.py [--batch 64] [--features 10000]
       [--hidden 32] [--densities 0.001 0.01 0.1] [--rounds 15] [--calls 20]
       [--json out.json]

The operator is the wide part of a wide-and-deep model: FullyConnected of a
batch of `features` columns into `hidden` units. For each density two
models are loaded on cpu_ref from the same weights: one whose data input is
annotated CSR (loadModel/infer receive a SparseTensor; cpu_ref runs
ops_sparse.c, work proportional to the nonzeros) and one dense (the same
matrix as a dense array; cpu_ref's fast GEMM). Each round times `calls`
infer() calls of one, then of the other, alternating which goes first, so
that both sides see the same machine load; the figure per density is the
median over rounds of the per-call time of each side and the median of the
per-round ratios sparse / dense (below 1: the CSR path is faster). The
dense side is given a matrix already dense: densifying it per call, as a
host with only a CSR array would have to, is not counted against it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.sparse import CsrParts


def csr_batch(rng: np.random.Generator, rows: int, cols: int,
              density: float) -> tuple[CsrParts, np.ndarray]:
    """A float32 batch with about density nonzeros per row, as CSR and dense."""
    dense = np.where(rng.random((rows, cols)) < density, rng.random((rows, cols)), 0.0)
    dense = dense.astype(np.float32)
    row_ids, col_ids = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row_ids, minlength=rows))])
    return CsrParts.checked(dense[row_ids, col_ids], col_ids, indptr, dense.shape), dense


def _per_call(model: LoadedModel, inputs: dict[str, Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        model.infer(inputs)
    return (time.perf_counter() - start) / calls


def measure(batch: int, features: int, hidden: int, density: float, rounds: int, calls: int,
            seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    csr, dense = csr_batch(rng, batch, features, density)
    weights = {"fc_weight": rng.standard_normal((hidden, features)).astype(np.float32),
               "fc_bias": rng.standard_normal(hidden).astype(np.float32)}
    out = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=hidden, name="fc")
    library = mx.get_library("cpu_ref")
    sparse_graph = annotate_symbol(out, {"x": dense.shape}, weights, stypes={"x": "csr"})
    dense_graph = annotate_symbol(out, {"x": dense.shape}, weights)
    with LoadedModel(library, sparse_graph, weights) as sparse_model, \
            LoadedModel(library, dense_graph, weights) as dense_model:
        got = sparse_model.infer({"x": csr})["fc_output"]
        want = dense_model.infer({"x": dense})["fc_output"]
        error = float(np.abs(got - want).max())
        sparse_s, dense_s, ratios = [], [], []
        for round_index in range(rounds):
            sides = [("sparse", sparse_model, {"x": csr}), ("dense", dense_model, {"x": dense})]
            if round_index % 2:
                sides.reverse()
            times = {name: _per_call(model, inputs, calls) for name, model, inputs in sides}
            sparse_s.append(times["sparse"])
            dense_s.append(times["dense"])
            ratios.append(times["sparse"] / times["dense"])
    return {"density": density, "nnz": int(csr.data.size), "batch": batch,
            "features": features, "hidden": hidden, "rounds": rounds, "calls": calls,
            "sparse_us": statistics.median(sparse_s) * 1e6,
            "dense_us": statistics.median(dense_s) * 1e6,
            "ratio_sparse_over_dense": statistics.median(ratios),
            "max_abs_diff": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--features", type=int, default=10000)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--densities", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", default=None, help="also write the results there")
    args = parser.parse_args()
    results = [measure(args.batch, args.features, args.hidden, density, args.rounds, args.calls)
               for density in args.densities]
    print(f"FullyConnected {args.batch}x{args.features} -> {args.hidden} on cpu_ref, median of "
          f"{args.rounds} alternated rounds of {args.calls} calls")
    print(f"{'density':>8} {'nnz':>7} {'csr us':>9} {'dense us':>9} {'csr/dense':>10}")
    for row in results:
        print(f"{row['density']:>8.3%} {row['nnz']:>7} {row['sparse_us']:>9.1f} "
              f"{row['dense_us']:>9.1f} {row['ratio_sparse_over_dense']:>10.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
