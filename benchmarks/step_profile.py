"""Per-step time of a model run as one cpu_ref model (its kernels alone).

Usage: python benchmarks/step_profile.py MODEL [BATCH] [--steps] [--runs N]
       [--threads N]

Runs MODEL (a model of tests/models or tests/onnx_models, as in
benchmarks/suite.py) as one loaded cpu_ref model, 1 thread unless
--threads says otherwise, with
ACC_CPU_REF_PROFILE=1, which makes cpu_ref print each step's time and
shapes to stderr, and prints the median over the runs (the first quarter
dropped as warm-up) per operator, or per step with --steps. A model cpu_ref
runs image by image (docs/cpu_ref_performance.md) prints each step once per
image, with a batch of 1: a step's time per forward is then its median
times the images, and --steps says "x N".
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"cpu_ref profile: step (\d+) (\S+) ([\d.]+) us in(.*)")


def _run(model: str, batch: int, runs: int, threads: int) -> None:
    """The child: loads the model and runs it (cpu_ref prints the steps)."""
    sys.path.insert(0, str(HERE))
    from bench_common import load_model
    from suite import _loaded_model

    import acc_host as mx

    bench = load_model(model, batch, Path(tempfile.mkdtemp()))
    mx.cpu_ref(0).configure(num_threads=threads)
    loaded = _loaded_model(bench)
    if loaded is None:
        raise SystemExit(f"{model}: cannot be loaded as one cpu_ref model")
    for _ in range(runs):
        loaded.infer(bench.feeds)
    loaded.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("batch", type=int, nargs="?", default=1)
    parser.add_argument("--steps", action="store_true", help="one line per step")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _run(args.model, args.batch, args.runs, args.threads)
        return 0
    done = subprocess.run([sys.executable, __file__, args.model, str(args.batch), "--runs",
                           str(args.runs), "--threads", str(args.threads), "--child"],
                          capture_output=True, text=True,
                          env={**os.environ, "ACC_CPU_REF_PROFILE": "1"}, check=False)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return done.returncode
    times: dict[tuple[int, str, str], list[float]] = collections.defaultdict(list)
    for line in done.stderr.splitlines():
        match = LINE.match(line)
        if match:
            step, op, us, shapes = match.groups()
            times[(int(step), op, shapes.strip())].append(float(us))
    per_op: dict[str, float] = collections.defaultdict(float)
    total = 0.0
    for (step, op, shapes), values in sorted(times.items()):
        per_run = max(1, round(len(values) / args.runs))  # images run one by one
        median = statistics.median(values[len(values) // 4:]) * per_run
        total += median
        per_op[op] += median
        if args.steps:
            images = f"  x {per_run}" if per_run > 1 else ""
            print(f"{step:4d} {op:24s} {median:8.1f} us  in {shapes}{images}")
    if not args.steps:
        for op, us in sorted(per_op.items(), key=lambda item: -item[1]):
            print(f"{op:24s} {us:8.1f} us")
    print(f"all steps {total:.1f} us per forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
