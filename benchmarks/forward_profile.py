"""Where a forward's host time goes: a small model on cpu_ref, profiled.

Usage: python benchmarks/forward_profile.py [--model transformer_enc] [--repeat N]
       [--engine ThreadedEngine|NaiveEngine]

Runs the model through a bound executor (forward, then reading the output)
and splits the median wall time per forward into: the plugin's infer()
(the C call itself, timed around the cffi call), host<->device copies
(copyToAcc / copyFromAcc), and the rest, which is the host: engine,
executor, marshalling. Then prints cProfile's top host functions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx
from acc_host import engine
from acc_host.abi.memory import DeviceBuffer

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"


def _timed(function: Any, spent: list[float]) -> Any:
    """function, adding the seconds spent in it to spent[0] (a plain
    function, so it binds like a method when set on a class)."""

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args)
        finally:
            spent[0] += time.perf_counter() - start

    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="transformer_enc")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--engine", default="ThreadedEngine")
    args = parser.parse_args(argv)
    engine.set_engine_type(args.engine)
    folder = MODELS / args.model
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    data = np.load(folder / "input_0.npy")
    exe = sym.simple_bind(mx.cpu_ref(0), data=data.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value

    def forward() -> None:
        for output in exe.forward(data=data):
            output.asnumpy()

    forward()  # compiles
    infer_spent, copy_spent = [0.0], [0.0]
    for subgraph in exe.subgraphs:
        if subgraph.model is not None:
            model = subgraph.model
            model._infer = _timed(model._infer, infer_spent)
    for name in ("copy_from_host", "to_host"):
        setattr(DeviceBuffer, name, _timed(getattr(DeviceBuffer, name), copy_spent))
    walls = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        forward()
        walls.append(time.perf_counter() - start)
    wall = statistics.median(walls)
    infer = infer_spent[0] / args.repeat
    copies = copy_spent[0] / args.repeat
    print(f"{args.model} on cpu_ref, {args.engine}, {len(exe.plan.steps)} steps, "
          f"median of {args.repeat} forwards (mean for the parts):")
    print(f"  forward + read    {wall * 1e6:9.1f} us")
    print(f"  plugin infer()    {infer * 1e6:9.1f} us")
    print(f"  copies in/out     {copies * 1e6:9.1f} us (copyToAcc/copyFromAcc, C included)")
    print(f"  host (the rest)   {(wall - infer - copies) * 1e6:9.1f} us")
    profile = cProfile.Profile()
    profile.runcall(lambda: [forward() for _ in range(args.repeat)])
    print("\ncProfile, top host functions by own time:")
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
