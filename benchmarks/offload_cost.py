"""Cost-aware partitioning on mlu_sim: offering every supported operator
against keeping the islands that do not pay on the CPU.

Usage: python benchmarks/offload_cost.py [--repeat N]

The network alternates LeakyReLU (which mlu_sim does not run) with small
element-wise islands it does run (relu, elemwise_add), and has one real
convolution block in the middle; input 1x64x32x32. For both settings
(MXNET_ACC_OFFLOAD_COST=0: everything supported is offloaded; default: the
partitioner weighs mlu_sim's reported copy and launch costs) it prints the
subgraphs, launches, host-device copies and bytes per forward, the
simulated device + copy time (mlu_sim's cost model), and the host wall time
(median of --repeat forwards), in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

import acc_host as mx


def network(islands: int = 6) -> Any:
    x = mx.sym.Variable("data")
    for k in range(islands):
        x = mx.sym.LeakyReLU(x, slope=0.1, name=f"leaky{k}")
        y = mx.sym.Activation(x, act_type="relu", name=f"relu{k}")
        x = mx.sym.elemwise_add(x, y, name=f"add{k}")
        if k == islands // 2:
            x = mx.sym.Convolution(x, num_filter=64, kernel=(3, 3), pad=(1, 1), name="conv")
            x = mx.sym.Activation(x, act_type="relu", name="conv_relu")
    return x


def measure(symbol: Any, image: np.ndarray, repeat: int) -> dict[str, float]:
    ctx = mx.mlu(3)
    exe = symbol.simple_bind(ctx, data=image.shape)
    rng = np.random.default_rng(1)
    for name, array in exe.arg_dict.items():
        if name != "data":
            array[:] = rng.standard_normal(array.shape).astype(np.float32) * 0.05
    exe.forward(data=image)[0].asnumpy()  # compile
    ctx.configure(reset_stats=1)
    exe.forward(data=image)[0].asnumpy()
    stats = {key: float(value) for key, value in ctx.configure(query="stats").items()}
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe.forward(data=image)[0].asnumpy()
        samples.append(time.perf_counter() - start)
    result = {"subgraphs": len(exe.partition.subgraphs),
              "kept_on_cpu": len(exe.partition.kept_on_cpu),
              "launches": stats["launches"], "copies": stats["host_device_copies"],
              "copy_bytes": stats["host_device_bytes"],
              "simulated_us": (stats["sim_time_ns"] + stats["host_device_time_ns"]) / 1e3,
              "host_ms": statistics.median(samples) * 1e3,
              "output": exe.outputs[0].asnumpy()}
    exe.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    symbol = network()
    image = np.random.default_rng(0).standard_normal((1, 64, 32, 32)).astype(np.float32)
    rows = {}
    for label, switch in (("everything offered", "0"), ("cost-aware (default)", "1")):
        os.environ["MXNET_ACC_OFFLOAD_COST"] = switch
        rows[label] = measure(symbol, image, args.repeat)
    first, second = (row.pop("output") for row in rows.values())
    np.testing.assert_allclose(first, second, rtol=1e-4, atol=1e-5)
    print("| partitioning | subgraphs | kept on CPU | launches | copies | copied MB | "
          "simulated device + copies (us) | host wall (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for label, row in rows.items():
        print(f"| {label} | {row['subgraphs']} | {row['kept_on_cpu']} | {row['launches']:.0f} | "
              f"{row['copies']:.0f} | {row['copy_bytes'] / 1e6:.2f} | {row['simulated_us']:.1f} | "
              f"{row['host_ms']:.2f} |")


if __name__ == "__main__":
    main()
