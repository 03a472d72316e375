"""The cost of isolated mode (docs/isolation.md): cpu_ref in this process
against the same library file (a copy, loaded under another name) in a
child process, in one run.

Usage: python benchmarks/isolation_overhead.py [--repeat N] [--json out.json]

1. Per call, with negligible work in the plugin (relu on 16 floats):
   LoadedModel.infer() on host arrays, a DeviceBuffer copy to the device,
   a bound executor's forward() (copy in, infer, copy out, through the
   engine) and one imperative operator (mx.nd.Activation on device arrays).
2. Per megabyte, for 1, 16 and 64 MB of float32: copyToAcc and
   copyFromAcc (DeviceBuffer), and infer() of identity (the plugin copies
   its input to its output) from host array to host array: staged (the
   host arrays are copied into shared memory and the output back) and from
   arrays in shared memory (isolate.shared_empty: no copy).
Medians of repeated runs; ratios and differences are taken within this run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx
from acc_host import isolate
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.library import AccLibrary
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.memory import DeviceBuffer
from acc_host.abi.tensor import TensorSpec

SIZES_MB = (1, 16, 64)


def medians(functions: dict[str, Callable[[], object]], repeat: int,
            inner: int = 1) -> dict[str, float]:
    """The median seconds of one call of each function; samples of the
    functions alternate, so that a busy machine slows them alike."""
    samples: dict[str, list[float]] = {name: [] for name in functions}
    for function in functions.values():
        function()  # warm
    for _ in range(repeat):
        for name, function in functions.items():
            start = time.perf_counter()
            for _ in range(inner):
                function()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def relu_model(library: AccLibrary, shape: tuple[int, ...]) -> LoadedModel:
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    return LoadedModel(library, annotate_symbol(relu, {"data": shape}, weights=[]), {})


def copy_model(library: AccLibrary, shape: tuple[int, ...]) -> LoadedModel:
    """identity: the plugin's work is one copy, input to output."""
    copy = mx.sym.identity(mx.sym.Variable("data"), name="copy")
    return LoadedModel(library, annotate_symbol(copy, {"data": shape}, weights=[]), {})


def per_call(contexts: dict[str, mx.Context], repeat: int) -> dict[str, dict[str, float]]:
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    out = np.empty_like(x)
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    paths: dict[str, dict[str, Callable[[], object]]] = {}
    keep: list[Any] = []
    for mode, ctx in contexts.items():
        library = ctx.library
        model = relu_model(library, x.shape)
        buffer = DeviceBuffer(library, 0, TensorSpec.of(x))
        exe = relu.simple_bind(ctx, data=x.shape)
        on_device = mx.nd.array(x, ctx=ctx)
        keep += [model, buffer, exe, on_device]
        paths[mode] = {
            "infer": lambda m=model: m.infer({"data": x}, {"relu_output": out}),
            "copy_to_device": lambda b=buffer: b.copy_from_host(x),
            "executor_forward": lambda e=exe: e.forward(data=x)[0].wait_to_read(),
            "imperative_op": lambda a=on_device: mx.nd.Activation(
                a, act_type="relu").wait_to_read(),
        }
    inner = {"infer": 200, "copy_to_device": 200, "executor_forward": 50, "imperative_op": 50}
    results: dict[str, dict[str, float]] = {mode: {} for mode in contexts}
    for path, count in inner.items():
        found = medians({mode: paths[mode][path] for mode in contexts}, repeat, count)
        for mode, seconds in found.items():
            results[mode][path] = seconds
    for item in keep:
        if hasattr(item, "close"):
            item.close()
    return results


def _size_paths(library: AccLibrary, x: np.ndarray, out: np.ndarray,
                shared: tuple[np.ndarray, np.ndarray]) -> tuple[dict[str, Any], list[Any]]:
    """What is timed for one library and one size, and what to free after."""
    buffer = DeviceBuffer(library, 0, TensorSpec.of(x))
    model = copy_model(library, x.shape)
    paths: dict[str, Callable[[], object]] = {
        "copy_to_device": lambda: buffer.copy_from_host(x),
        "copy_from_device": lambda: buffer.to_host(out),
        "infer": lambda: model.infer({"data": x}, {"copy_output": out}),
    }
    if library.isolated:
        paths["infer_shared"] = lambda: model.infer({"data": shared[0]},
                                                    {"copy_output": shared[1]})
    return paths, [buffer.free, model.close]


def per_megabyte(contexts: dict[str, mx.Context], repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for megabytes in SIZES_MB:
        shape = (megabytes * 1024 * 1024 // 4,)
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        shared = (isolate.shared_array(x), isolate.shared_empty(shape))
        functions: dict[str, Callable[[], object]] = {}
        cleanup: list[Callable[[], object]] = []
        for mode, ctx in contexts.items():
            paths, frees = _size_paths(ctx.library, x, np.empty_like(x), shared)
            functions.update({f"{mode}.{path}": function for path, function in paths.items()})
            cleanup += frees
        results[f"{megabytes}MB"] = medians(functions, repeat)
        for free in cleanup:
            free()
    return results


def report(calls: dict[str, dict[str, float]], sizes: dict[str, Any]) -> str:
    lines = ["Per call (relu on 16 floats): microseconds, median",
             f"{'path':<18}{'in-process':>12}{'isolated':>12}{'extra':>10}{'ratio':>8}"]
    for key in calls["in_process"]:
        base, iso = calls["in_process"][key] * 1e6, calls["isolated"][key] * 1e6
        lines.append(f"{key:<18}{base:>12.1f}{iso:>12.1f}{iso - base:>10.1f}{iso / base:>8.2f}")
    lines += ["", "Per size: milliseconds, median; extra per MB in microseconds",
              f"{'size':<6}{'path':<18}{'in-process':>12}{'isolated':>12}{'shared':>10}"
              f"{'extra/MB':>10}"]
    for size, row in sizes.items():
        megabytes = int(size[:-2])
        for key in ("copy_to_device", "copy_from_device", "infer"):
            base, iso = row[f"in_process.{key}"] * 1e3, row[f"isolated.{key}"] * 1e3
            shared_ms = row.get(f"isolated.{key}_shared")
            shared_text = f"{shared_ms * 1e3:>10.2f}" if shared_ms is not None else f"{'-':>10}"
            lines.append(f"{size:<6}{key:<18}{base:>12.2f}{iso:>12.2f}{shared_text}"
                         f"{(iso - base) * 1e3 / megabytes:>10.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="isolation_bench"))
    try:
        copy = directory / "libcpu_ref_isolated.so"
        shutil.copy(mx.get_library("cpu_ref").path, copy)
        contexts = {"in_process": mx.cpu_ref(0),
                    "isolated": mx.load_acc(copy, acc_name="cpu_ref_isolated", isolate=True)}
        calls = per_call(contexts, args.repeat)
        sizes = per_megabyte(contexts, args.repeat)
        print(report(calls, sizes))
        if args.json is not None:
            args.json.write_text(json.dumps({"per_call_s": calls, "per_size_s": sizes},
                                            indent=2) + "\n")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
