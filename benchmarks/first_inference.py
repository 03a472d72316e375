"""Time to first inference of ResNet-50 on cpu_ref, next to onnxruntime's.

Every start is a fresh process (subprocess), and the sides are interleaved
start by start, so a busy machine slows them alike; the figures are medians
over --starts starts (default 7). The sides:

* ``onnxruntime``: ``import onnxruntime``, ``InferenceSession(file)``, one
  ``run``: the bar (the acceptance is at most 1.5x its time);
* ``acc-host onnx``: ``import acc_host``, ``acc_host.onnx.backend.prepare(
  file, accelerator="cpu_ref")``, one ``run``;
* ``acc-host mxnet``: ``import acc_host``, ``mx.model.load_checkpoint``,
  ``simple_bind`` on cpu_ref, ``copy_params_from``, one ``forward``;

each ``cold`` (no compiled-model cache) and ``warm`` (MXNET_ACC_CACHE_DIR
holding the model, as on a second start). A side's time is measured in the
child, from before its first import to its output in numpy (the same
interpreter start-up precedes every side), and in the parent around the
whole process (``process``).

The phases (``--phases``, on by default) come from ``acc-host run --json``
in further fresh processes: import, read, translate (ONNX), shape
inference, partition, the rest of the bind, loadModel and the rest of the
first forward, as medians.

The models are the zoo's (benchmarks/zoo: ``resnet50.onnx`` exported by
export_torch_zoo.py, ``resnet50_v1-*`` by export_mxnet_zoo.py).

``--baseline SRC`` adds the two cold acc-host sides run from another
source tree (``SRC`` is its ``src`` folder, with its plugins built), for a
before/after in the same run. Every side runs compiled byte-code, each
tree's in a private cache (PYTHONPYCACHEPREFIX) filled by untimed first
starts.

``--sides onnx`` (or ``mxnet``) runs only that model's acc-host sides.

    python benchmarks/first_inference.py [--starts 7] [--json PATH] [--baseline SRC]
                                         [--sides all|onnx|mxnet]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODELS = HERE / "zoo" / "models"
ONNX_FILE = MODELS / "resnet50.onnx"
CHECKPOINT = MODELS / "resnet50_v1"
SHAPE = (1, 3, 224, 224)

_CLOCK = "import time; _t0 = time.perf_counter()\n"
_DONE = "print('SECONDS', time.perf_counter() - _t0)\n"
_INPUT = f"np.random.default_rng(0).standard_normal({SHAPE}).astype(np.float32)"

SCRIPTS = {
    "onnxruntime": _CLOCK + f"""
import numpy as np
import onnxruntime
session = onnxruntime.InferenceSession({str(ONNX_FILE)!r}, providers=["CPUExecutionProvider"])
out = session.run(None, {{session.get_inputs()[0].name: {_INPUT}}})[0]
""" + _DONE,
    "acc-host onnx": _CLOCK + f"""
import numpy as np
import acc_host
from acc_host.onnx import backend
rep = backend.prepare({str(ONNX_FILE)!r}, accelerator="cpu_ref")
out = rep.run([{_INPUT}])[0]
""" + _DONE,
    "acc-host mxnet": _CLOCK + f"""
import numpy as np
import acc_host as mx
sym, args, aux = mx.model.load_checkpoint({str(CHECKPOINT)!r}, 0)
exe = sym.simple_bind(mx.Context("cpu_ref", 0), data={SHAPE})
exe.copy_params_from(args, aux)
out = exe.forward(data=mx.nd.array({_INPUT}))[0].asnumpy()
""" + _DONE,
}

RUN_ARGS = {
    "acc-host onnx": [str(ONNX_FILE), "--batch", "1"],
    "acc-host mxnet": [str(CHECKPOINT), "--shape", "data=" + ",".join(map(str, SHAPE))],
}


def _child(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(seconds the child measured, seconds of the whole process)."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=600)
    process = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"child failed:\n{result.stderr[-3000:]}")
    line = [line for line in result.stdout.splitlines() if line.startswith("SECONDS ")][-1]
    return float(line.split()[1]), process


def _phases(side: str, env: dict[str, str]) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-m", "acc_host", "run", *RUN_ARGS[side],
                             "--acc", "cpu_ref", "--repeat", "0", "--json"],
                            capture_output=True, text=True, env=env, timeout=600)
    if result.returncode:
        raise RuntimeError(f"acc-host run failed:\n{result.stderr[-3000:]}")
    report = json.loads(result.stdout)
    return {**report["phases"], "cache": ",".join(report["compiled_from"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=7, help="fresh processes per side")
    parser.add_argument("--no-phases", dest="phases", action="store_false",
                        help="skip the acc-host run --json phase table")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--baseline", type=Path, metavar="SRC",
                        help="another tree's src folder: its cold acc-host sides too")
    parser.add_argument("--sides", choices=("all", "onnx", "mxnet"), default="all",
                        help="the acc-host sides to run (onnxruntime always runs)")
    args = parser.parse_args()
    run_args = {side: value for side, value in RUN_ARGS.items()
                if args.sides == "all" or side.endswith(args.sides)}
    missing = [str(path) for path in (ONNX_FILE, Path(f"{CHECKPOINT}-0000.params"))
               if not path.is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: run benchmarks/zoo/export_torch_zoo.py and "
                 "export_mxnet_zoo.py first")
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        # Every side runs compiled byte-code, this tree's as the baseline's:
        # a private cache, written by the untimed starts below (so that
        # PYTHONDONTWRITEBYTECODE in the caller's environment does not
        # leave one side compiling its sources at every start).
        base = {key: value for key, value in os.environ.items()
                if key not in ("MXNET_ACC_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
        base["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "pyc")
        warm = {**base, "MXNET_ACC_CACHE_DIR": cache}
        _child(SCRIPTS["onnxruntime"], base)  # compiles its byte-code, untimed
        for side in run_args:  # fill the cache: the warm starts find their model there
            _child(SCRIPTS[side], warm)
        sides: list[tuple[str, str, dict[str, str]]] = [("onnxruntime", "", base)]
        for side in run_args:
            sides += [(side, "cold", base), (side, "warm", warm)]
        if args.baseline is not None:
            other = dict(base)
            other.update(PYTHONPATH=str(args.baseline.resolve()),
                         PYTHONPYCACHEPREFIX=os.path.join(cache, "baseline-pyc"))
            for side in run_args:
                _child(SCRIPTS[side], other)  # compiles its byte-code, untimed
                sides.append((side, "cold, baseline", other))
        times: dict[str, list[tuple[float, float]]] = {f"{s} {m}".strip(): [] for s, m, _ in sides}
        phases: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.starts):
            for side, mode, env in sides:
                times[f"{side} {mode}".strip()].append(_child(SCRIPTS[side], env))
                if args.phases and side in RUN_ARGS and "baseline" not in mode:
                    phases.setdefault(f"{side} {mode}", []).append(_phases(side, env))
    result: dict[str, Any] = {"starts": args.starts, "sides": {}, "phases": {}}
    bar = statistics.median(child for child, _ in times["onnxruntime"])
    print(f"time to first inference, ResNet-50, batch 1, cpu_ref; medians of {args.starts} "
          "fresh processes\n")
    print("| side | first inference (in the child) | whole process | / onnxruntime |")
    print("|---|---|---|---|")
    for name, runs in times.items():
        child = statistics.median(c for c, _ in runs)
        process = statistics.median(p for _, p in runs)
        result["sides"][name] = {"child_s": child, "process_s": process, "ratio": child / bar}
        print(f"| {name} | {child:.3f} s | {process:.3f} s | {child / bar:.2f}x |")
    if phases:
        keys = [key for key in next(iter(phases.values()))[0] if key != "cache"]
        print("\nphases (acc-host run --json), medians, seconds\n")
        print("| side | " + " | ".join(key.removesuffix("_s") for key in keys) + " | loaded from |")
        print("|---|" + "---|" * (len(keys) + 1))
        for name, rows in phases.items():
            medians = {key: statistics.median(row.get(key, 0.0) for row in rows) for key in keys}
            result["phases"][name] = medians
            print(f"| {name} | " + " | ".join(f"{medians[key]:.3f}" for key in keys)
                  + f" | {rows[-1]['cache']} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
