"""Cost of one element-wise operator on cpu_ref, per call.

Usage: python benchmarks/op_chain.py [--shape 2 4 17 16] [--repeat N]

Times a loaded cpu_ref model made of 1 and of 21 chained operators of each
kind (1 thread, medians of --repeat calls) and prints the single model's
time and the cost of each operator added to the chain: the kernel with
its per-step overhead, without the host's per-call cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel

OPS: dict[str, Callable[[mx.sym.Symbol], mx.sym.Symbol]] = {
    "_mul_scalar": lambda y: y * 0.5,
    "elemwise_add": lambda y: y + y,
    "relu": lambda y: mx.sym.Activation(y, act_type="relu"),
    "softmax": lambda y: mx.sym.softmax(y, axis=-1),
}


def _median_us(op: Callable[[mx.sym.Symbol], mx.sym.Symbol], count: int,
               shape: tuple[int, ...], repeat: int) -> float:
    out = mx.sym.Variable("data")
    for _ in range(count):
        out = op(out)
    graph = annotate_symbol(out, {"data": shape}, weights={}, dtypes={"data": np.float32})
    model = LoadedModel(mx.get_library("cpu_ref"), graph, {})
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for _ in range(50):
        model.infer({"data": x})
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        model.infer({"data": x})
        times.append(time.perf_counter() - start)
    model.close()
    return statistics.median(times) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs="+", default=[2, 4, 17, 16])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args(argv)
    shape = tuple(args.shape)
    mx.cpu_ref(0).configure(num_threads=1)
    print(f"shape {shape}: us per model call, and per operator added")
    for name, op in OPS.items():
        one = _median_us(op, 1, shape, args.repeat)
        many = _median_us(op, 21, shape, args.repeat)
        print(f"  {name:14s} one op {one:7.2f}   per extra op {(many - one) / 20:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
