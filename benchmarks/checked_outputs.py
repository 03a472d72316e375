"""The cost of checked mode (MXNET_ACC_CHECK_OUTPUTS=1, docs/robustness.md)
on a plugin with device memory: one relu bound on cpu_ref, NaiveEngine,
forward + wait, unchecked against checked, in one run.

Checked mode fills each output with a canary before infer() and scans it
after, and reads back the guard after every device buffer the call wrote
(acc_host.abi.guards): for a device output, that is a copy of the canary
in, a copy of the whole allocation back for its guard, and one more for
the guard after the canary's own copy.

Usage: python benchmarks/checked_outputs.py [--repeat N]
Medians of N runs (default 9) of the mean of 20 forwards each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import acc_host as mx

SHAPES = ((1, 1000), (1, 64, 56, 56))


def _time_forward(shape: tuple[int, ...], checked: bool, repeat: int) -> float:
    """Median microseconds of forward + wait of relu on cpu_ref(0)."""
    os.environ["MXNET_ACC_CHECK_OUTPUTS"] = "1" if checked else "0"
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu")
    exe = relu.simple_bind(mx.cpu_ref(0), data=shape)
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    exe.forward(data=data)[0].wait_to_read()  # compiles; buffers made under the setting
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(20):
            exe.forward()[0].wait_to_read()
        runs.append((time.perf_counter() - start) / 20 * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    mx.engine.set_engine_type("NaiveEngine")
    print(f"{'plugin':<28}{'output':<14}{'unchecked':>10}{'checked':>11}")
    for shape in SHAPES:
        plain = _time_forward(shape, False, args.repeat)
        checked = _time_forward(shape, True, args.repeat)
        label = "x".join(map(str, shape))
        print(f"{'cpu_ref (device memory)':<28}{label:<14}{plain:>7.1f} us{checked:>8.1f} us")


if __name__ == "__main__":
    main()
