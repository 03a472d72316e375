"""The proposal's performance plan: the cost of the dynamically loaded path.

Usage: python benchmarks/accelerator_overhead.py [--repeat N] [--json out.json]

1. Per-forward host overhead of a one-operator subgraph on cpu_ref (relu on
   16 floats, so the plugin's own work is negligible), three ways, in one
   run: the raw cffi call of infer() with prebuilt arguments (the floor),
   LoadedModel.infer() (the host's marshalling), and a bound executor's
   forward() (everything a user pays).
2. The shared models on cpu_ref against the host CPU path, same run.
Medians over repeated runs; ratios are taken within this run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"


def median_seconds(function: Callable[[], object], repeat: int, inner: int = 1) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            function()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def overhead(repeat: int) -> dict[str, float]:
    library = mx.get_library("cpu_ref")
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    graph = annotate_symbol(relu, {"data": (1, 16)}, weights=[])
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    out = np.empty_like(x)
    model = LoadedModel(library, graph, {})
    model.infer({"data": x}, {"relu_output": out})
    # The floor: infer() through cffi with every argument built beforehand.
    model._inputs.set_host_array(0, x)
    model._outputs.set_host_array(0, out, writable=True)
    raw_args = (model._model_id_text, model._in_names.pointer, model._out_names.pointer,
                model._inputs.pointer, model._outputs.pointer, 1, 1)
    infer = library.lib.infer
    raw = median_seconds(lambda: infer(*raw_args), repeat, 2000)
    loaded = median_seconds(lambda: model.infer({"data": x}, {"relu_output": out}), repeat, 500)
    exe = relu.simple_bind(mx.cpu_ref(0), data=(1, 16))
    # forward() is pushed to the engine: wait for the output, so the time is
    # push to completion.
    executor = median_seconds(lambda: exe.forward(data=x)[0].wait_to_read(), repeat, 200)
    return {"raw_cffi_us": raw * 1e6, "loaded_model_us": loaded * 1e6,
            "executor_forward_us": executor * 1e6}


def model_latency(name: str, ctx: mx.Context, repeat: int) -> float:
    folder = MODELS / name
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    image = np.load(folder / "input_0.npy")
    exe = sym.simple_bind(ctx, data=image.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    exe.forward(data=image)[0].wait_to_read()
    return median_seconds(lambda: exe.forward(data=image)[0].wait_to_read(), repeat) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    figures = overhead(args.repeat)
    print("one-operator subgraph on cpu_ref, median microseconds per forward:")
    for key, value in figures.items():
        print(f"  {key:<22}{value:9.2f}")
    print(f"  host overhead above the raw call: LoadedModel "
          f"{figures['loaded_model_us'] - figures['raw_cffi_us']:.2f} us, executor "
          f"{figures['executor_forward_us'] - figures['raw_cffi_us']:.2f} us")
    print("\nshared models, batch 1, median ms per forward:")
    print(f"  {'model':<26}{'cpu path':>10}{'cpu_ref':>10}{'ratio':>8}")
    rows = []
    for name in sorted(path.name for path in MODELS.iterdir() if path.is_dir()):
        cpu = model_latency(name, mx.cpu(), args.repeat)
        acc = model_latency(name, mx.cpu_ref(0), args.repeat)
        print(f"  {name:<26}{cpu:>10.2f}{acc:>10.2f}{acc / cpu:>8.2f}")
        rows.append({"model": name, "cpu_ms": cpu, "cpu_ref_ms": acc})
    if args.json:
        args.json.write_text(json.dumps({"overhead": figures, "models": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
