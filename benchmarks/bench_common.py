"""What several benchmarks share. The scripts are run as
``python benchmarks/<name>.py``, which puts this folder on ``sys.path``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import acc_host as mx


def conv_relu_network() -> mx.sym.Symbol:
    """Four 3x3 convolutions of 32 filters, each followed by relu: a network
    whose time is spent in its accelerator subgraph (input (1, 32, H, W))."""
    x = mx.sym.Variable("data")
    for k in range(4):
        x = mx.sym.Convolution(x, num_filter=32, kernel=(3, 3), pad=(1, 1), name=f"c{k}")
        x = mx.sym.Activation(x, act_type="relu", name=f"r{k}")
    return x


def in_threads(work: list[Callable[[], None]]) -> float:
    """Runs each callable of work in a thread of its own, all at once; the
    wall seconds until the last finished."""
    threads = [threading.Thread(target=job) for job in work]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start
