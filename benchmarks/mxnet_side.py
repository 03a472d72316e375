"""Latency of one model under MXNet 1.9.1 itself, for benchmarks/suite.py;
blocks of any statement timed on request, for benchmarks/public_path.py.

Runs in a side environment that has MXNet (it never imports acc_host):
    python mxnet_side.py MODEL_DIR BATCH REPEAT
prints {"ms": median ms per forward, "mxnet": version} as JSON. The thread
count comes from OMP_NUM_THREADS, set by the caller before MXNet starts.
The timed call is a symbolic executor's forward followed by reading the
output, as for acc-host.

    python mxnet_side.py --serve
reads one JSON request a line from stdin and answers each with one JSON
line: {"setup": code} runs code once (``mx`` and ``np`` are imported);
{"stmt": code, "calls": n} runs code n times and answers {"us": the mean
microseconds per run}, so that the caller can alternate blocks of its own
with MXNet's in one run. The engine is MXNet's MXNET_ENGINE_TYPE.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def timed_function(stmt: str, scope: dict[str, object]) -> Any:
    """A function of n that runs stmt n times in scope (a loop compiled
    around it: no per-run overhead but the loop's). benchmarks/public_path.py
    times its own side with the same function."""
    body = "\n".join("        " + line for line in stmt.splitlines())
    names = ", ".join(name for name in scope if name.isidentifier() and not name.startswith("_"))
    declared = f"    global {names}\n" if names else ""  # so that `a += 1` rebinds the global
    exec(f"def _timed(_n):\n{declared}    for _i in range(_n):\n{body}\n", scope)  # noqa: S102
    return scope["_timed"]


def serve() -> int:
    """The --serve loop (see the module documentation)."""
    import mxnet as mx
    import numpy as np

    scope: dict[str, object] = {"mx": mx, "np": np}
    print(json.dumps({"mxnet": mx.__version__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "setup" in request:
            exec(request["setup"], scope)  # noqa: S102  (the benchmark's own code)
            print(json.dumps({"ok": True}), flush=True)
            continue
        timed = timed_function(request["stmt"], scope)
        calls = int(request["calls"])
        start = time.perf_counter()
        timed(calls)
        elapsed = time.perf_counter() - start
        print(json.dumps({"us": elapsed / calls * 1e6}), flush=True)
    return 0


def main() -> int:
    if sys.argv[1:] == ["--serve"]:
        return serve()
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
