"""The dependency engine: per-operation cost, and overlap across devices.

Usage: python benchmarks/engine_throughput.py [--ops N] [--repeat N] [--json out.json]

1. Throughput: N no-op operations pushed (each mutating one of 64 vars, in
   turn) and waited for with wait_for_all(), on NaiveEngine and on
   ThreadedEngine (one CPU worker): operations per second, push to
   completion.
2. Latency: one no-op operation pushed and waited for (wait_for_var), again
   and again: the median round trip per operation on each engine.
3. Overlap: the same convolutional network bound on mx.mlu(0) and mx.mlu(1)
   (mlu_sim; each executor's subgraph runs on its device's worker, and
   cffi releases the GIL during infer()): both forwards pushed, then waited
   for, against one forward waited for after the other. Reported: serial
   time over overlapped time (2 = perfect overlap on two devices; the
   machine's free cores cap it), next to the same ratio for two plain
   threads of GIL-free hashing, measured in the same run.
4. One graph with two independent branches (mx.AttrScope ctx groups):
   both groups on mx.mlu(0), one device worker, against group2ctx placing
   them on mx.mlu(0) and mx.mlu(1): the ratio of the two times.
Medians over --repeat runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_common import conv_relu_network, in_threads

import acc_host as mx
from acc_host.engine import Engine, NaiveEngine, ThreadedEngine


def median(function: Callable[[], float], repeat: int) -> float:
    return statistics.median(function() for _ in range(repeat))


def _noop(_run_ctx: Any) -> None:
    pass


def throughput(engine: Engine, ops: int) -> float:
    variables = [engine.new_var() for _ in range(64)]
    start = time.perf_counter()
    for index in range(ops):
        engine.push_sync(_noop, None, (), (variables[index & 63],))
    engine.wait_for_all()
    return ops / (time.perf_counter() - start)


def latency(engine: Engine, ops: int) -> float:
    var = engine.new_var()
    samples = []
    for _ in range(ops):
        start = time.perf_counter()
        engine.push_sync(_noop, None, (), (var,))
        engine.wait_for_var(var)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def overlap(repeat: int, forwards: int) -> dict[str, float]:
    symbol, shape = conv_relu_network(), (1, 32, 48, 48)
    rng = np.random.default_rng(0)
    arg_shapes = symbol.infer_shape(data=shape)[0]
    values = {name: rng.standard_normal(s).astype(np.float32) * 0.1
              for name, s in zip(symbol.list_arguments(), arg_shapes)}
    executors = []
    for dev_id in (0, 1):
        ctx = mx.Context("mlu", dev_id)
        args = {name: mx.nd.array(value, ctx=ctx) for name, value in values.items()}
        executors.append(symbol.bind(ctx, args))
    for exe in executors:
        exe.forward()[0].wait_to_read()  # compile

    def serial() -> float:
        start = time.perf_counter()
        for exe in executors:
            for _ in range(forwards):
                exe.forward()
            exe.outputs[0].wait_to_read()
        return time.perf_counter() - start

    def overlapped() -> float:
        start = time.perf_counter()
        for _ in range(forwards):
            for exe in executors:
                exe.forward()
        mx.nd.waitall()
        return time.perf_counter() - start

    serial_s, overlapped_s = median(serial, repeat), median(overlapped, repeat)
    first, second = (exe.outputs[0].asnumpy() for exe in executors)
    assert np.array_equal(first, second), "the two devices disagree"
    return {"serial_s": serial_s, "overlapped_s": overlapped_s,
            "ratio": serial_s / overlapped_s}


def two_branch_graph() -> mx.sym.Symbol:
    """Two independent branches of network()'s convolutions, in ctx groups
    "a" and "b", summed at the end."""
    data = mx.sym.Variable("data")
    branches = []
    for group in ("a", "b"):
        with mx.AttrScope(ctx_group=group):
            x = data
            for k in range(4):
                x = mx.sym.Convolution(x, num_filter=32, kernel=(3, 3), pad=(1, 1),
                                       name=f"{group}_c{k}")
                x = mx.sym.Activation(x, act_type="relu", name=f"{group}_r{k}")
            branches.append(x)
    return mx.sym.elemwise_add(*branches, name="sum")


def graph_overlap(repeat: int, forwards: int) -> dict[str, float]:
    """One graph, two independent accelerator subgraphs: both groups on
    mlu(0) (one device worker: serial) against group2ctx placing them on
    mlu(0) and mlu(1) (two workers)."""
    symbol, shape = two_branch_graph(), (1, 32, 48, 48)
    rng = np.random.default_rng(0)
    arg_shapes = symbol.infer_shape(data=shape)[0]
    values = {name: rng.standard_normal(s).astype(np.float32) * 0.1
              for name, s in zip(symbol.list_arguments(), arg_shapes)}
    placements = {"one_device": {"a": mx.mlu(0), "b": mx.mlu(0)},
                  "two_devices": {"a": mx.mlu(0), "b": mx.mlu(1)}}
    times, outputs = {}, {}
    for label, group2ctx in placements.items():
        # Arguments in host memory (ctx = cpu, MXNet's model-parallel
        # style): a subgraph never waits for another device to read them.
        exe = symbol.simple_bind(mx.cpu(), data=shape, group2ctx=group2ctx)
        for name, value in values.items():
            exe.arg_dict[name][:] = value
        exe.forward()[0].wait_to_read()  # compile

        def run(exe: Any = exe) -> float:
            start = time.perf_counter()
            for _ in range(forwards):
                exe.forward()
            exe.outputs[0].wait_to_read()
            return time.perf_counter() - start

        times[label] = median(run, repeat)
        outputs[label] = exe.outputs[0].asnumpy()
        exe.close()
    assert np.array_equal(outputs["one_device"], outputs["two_devices"])
    return {"one_device_s": times["one_device"], "two_devices_s": times["two_devices"],
            "ratio": times["one_device"] / times["two_devices"]}


def hashing_reference(repeat: int) -> float:
    """Serial over concurrent time of two GIL-free hashing jobs: what this
    machine allows two threads right now."""
    block = os.urandom(1 << 20)

    def job() -> None:
        for _ in range(40):
            hashlib.sha256(block).digest()

    def serial() -> float:
        start = time.perf_counter()
        job()
        job()
        return time.perf_counter() - start

    def concurrent() -> float:
        return in_threads([job, job])

    return median(serial, repeat) / median(concurrent, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=50_000)
    parser.add_argument("--latency-ops", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--forwards", type=int, default=4)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results: dict[str, Any] = {"cpus": os.cpu_count()}
    for engine in (NaiveEngine(), ThreadedEngine(cpu_threads=1)):
        ops_per_s = median(lambda engine=engine: throughput(engine, args.ops), args.repeat)
        per_op = median(lambda engine=engine: latency(engine, args.latency_ops), args.repeat)
        engine.shutdown()
        results[engine.name] = {"ops_per_s": ops_per_s, "latency_us": per_op * 1e6}
        print(f"{engine.name:15s} throughput {ops_per_s:12,.0f} ops/s   "
              f"latency {per_op * 1e6:8.1f} us/op (push + wait)")
    if mx.engine.engine_type() == "ThreadedEngine" and mx.get_library("mlu").num_devices >= 2:
        figures = overlap(args.repeat, args.forwards)
        figures["hashing_threads_ratio"] = hashing_reference(args.repeat)
        results["two_mlu_devices"] = figures
        print(f"two executors on mlu(0) and mlu(1), {args.forwards} forwards each: serial "
              f"{figures['serial_s'] * 1e3:.1f} ms, overlapped {figures['overlapped_s'] * 1e3:.1f} "
              f"ms, ratio {figures['ratio']:.2f}x; two hashing threads: "
              f"{figures['hashing_threads_ratio']:.2f}x ({os.cpu_count()} CPUs)")
        graph = graph_overlap(args.repeat, args.forwards)
        results["two_branch_graph"] = graph
        print(f"one graph, two independent subgraphs (group2ctx), {args.forwards} forwards: "
              f"both on mlu(0) {graph['one_device_s'] * 1e3:.1f} ms, on mlu(0) and mlu(1) "
              f"{graph['two_devices_s'] * 1e3:.1f} ms, ratio {graph['ratio']:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
