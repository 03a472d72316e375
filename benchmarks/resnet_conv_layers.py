"""ResNet-50's convolution layers, one thread, cpu_ref's kernels next to
onnxruntime's Conv, timed by the calling thread's CPU time.

Usage: python benchmarks/resnet_conv_layers.py [--batch N] [--rounds N]
       [--json out.json]

Each distinct convolution of ResNet-50 (torchvision's layout: the 7 x 7
stem, 1 x 1 and 3 x 3 layers on 56 x 56 to 7 x 7 planes, the strided
shortcuts and 3 x 3 layers) runs through benchmarks/c/bench_kernels.c
(`conv`, filters pre-packed as at loadModel, bias added) and as a one-node
onnxruntime model (intra_op_num_threads = 1), alternately for --rounds
rounds. The figure per side is the fastest call, timed as CPU time of the
thread that runs it (bench_kernels with BENCH_CPU_TIME=1,
time.thread_time() around session.run), so that the time other processes
hold the core on a shared machine is not counted. onnxruntime's one-node
model converts its input to and its output from the channel-blocked
layout around the convolution, which a whole model does only at its
edges: its figures here are an upper bound on what its layers cost inside
the model. GFLOP/s count 2 flops per multiply-add.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cpu_ref_kernels import build  # noqa: E402

# C, H, W -> O, kernel, stride, padding
LAYERS = [(3, 224, 224, 64, 7, 2, 3),
          (64, 56, 56, 64, 1, 1, 0), (64, 56, 56, 64, 3, 1, 1), (64, 56, 56, 256, 1, 1, 0),
          (256, 56, 56, 64, 1, 1, 0), (256, 56, 56, 128, 1, 1, 0),
          (128, 56, 56, 128, 3, 2, 1), (256, 56, 56, 512, 1, 2, 0),
          (128, 28, 28, 128, 3, 1, 1), (128, 28, 28, 512, 1, 1, 0), (512, 28, 28, 128, 1, 1, 0),
          (256, 28, 28, 256, 3, 2, 1), (512, 28, 28, 1024, 1, 2, 0),
          (256, 14, 14, 256, 3, 1, 1), (256, 14, 14, 1024, 1, 1, 0),
          (1024, 14, 14, 256, 1, 1, 0), (512, 14, 14, 512, 3, 2, 1),
          (1024, 14, 14, 2048, 1, 2, 0), (512, 7, 7, 512, 3, 1, 1), (512, 7, 7, 2048, 1, 1, 0),
          (2048, 7, 7, 512, 1, 1, 0)]


def ort_session(batch: int, layer: tuple) -> tuple:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    c, h, w, o, k, stride, pad = layer
    rng = np.random.default_rng(0)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            strides=[stride, stride], pads=[pad] * 4)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(rng.standard_normal((o, c, k, k), dtype=np.float32), "w"),
         onnx.numpy_helper.from_array(rng.standard_normal(o, dtype=np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session, rng.standard_normal((batch, c, h, w), dtype=np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    env = {**os.environ, "BENCH_CPU_TIME": "1"}
    print(f"batch {args.batch}, 1 thread, fastest of {args.rounds} rounds (thread CPU time)")
    print("| layer | cpu_ref ms | GFLOP/s | onnxruntime ms | GFLOP/s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        for layer in LAYERS:
            c, h, w, o, k, stride, pad = layer
            session, x = ort_session(args.batch, layer)
            ours = theirs = float("inf")
            for _ in range(args.rounds):
                for _ in range(3):
                    start = time.thread_time()
                    session.run(None, {"x": x})
                    theirs = min(theirs, time.thread_time() - start)
                out = subprocess.run([str(binary), "avx512", "1", "3", "conv", str(args.batch),
                                      str(c), str(h), str(w), str(o), str(k), str(k),
                                      str(stride), str(pad), "1"],
                                     capture_output=True, text=True, env=env, check=True)
                ours = min(ours, float(out.stdout.split()[1]))
            out_hw = ((h + 2 * pad - k) // stride + 1) * ((w + 2 * pad - k) // stride + 1)
            flops = 2.0 * args.batch * o * out_hw * c * k * k
            label = f"{c}x{h}x{w} -> {o}, {k}x{k}/{stride}"
            rows.append({"layer": label, "cpu_ref_s": ours, "onnxruntime_s": theirs})
            print(f"| {label} | {ours * 1e3:.3f} | {flops / ours / 1e9:.1f} | "
                  f"{theirs * 1e3:.3f} | {flops / theirs / 1e9:.1f} | {ours / theirs:.3f} |",
                  flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
