"""Latency of one model under MXNet 1.9.1 itself, for benchmarks/suite.py.

Runs in a side environment that has MXNet (it never imports acc_host):
    python mxnet_side.py MODEL_DIR BATCH REPEAT
prints {"ms": median ms per forward, "mxnet": version} as JSON. The thread
count comes from OMP_NUM_THREADS, set by the caller before MXNet starts.
The timed call is a symbolic executor's forward followed by reading the
output, as for acc-host.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    import mxnet as mx
    import numpy as np

    folder, batch, repeat = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    sample = np.load(folder / "input_0.npy")
    data = np.concatenate([sample[:1]] * batch)
    exe = sym.simple_bind(mx.cpu(), data=data.shape, grad_req="null")
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    for _ in range(3):
        exe.forward(is_train=False, data=data)[0].asnumpy()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe.forward(is_train=False, data=data)[0].asnumpy()
        times.append(time.perf_counter() - start)
    print(json.dumps({"ms": statistics.median(times) * 1e3, "mxnet": mx.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
