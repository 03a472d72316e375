"""The zoo CNNs' depthwise convolutions, one ONNX node each, through
acc-host's public ONNX backend on cpu_ref next to onnxruntime, same run,
same thread count, interleaved (medians of per-round ratios).

Usage: python benchmarks/zoo/depthwise_vs_onnxruntime.py [--threads 1 2]
       [--rounds N] [--inner N]

Each layer is a Conv with group = channels, bias, pads (K - 1) / 2, as
EfficientNet-B0 and MobileNetV2/V3 have them (SiLU or ReLU after it is a
step of its own on both sides and not timed here).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

# (channels, height/width, kernel, stride)
LAYERS = [
    (32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1),
    (240, 28, 3, 2), (480, 14, 3, 1), (672, 14, 5, 1), (672, 14, 5, 2), (1152, 7, 5, 1),
    (1152, 7, 3, 1), (72, 56, 5, 2), (120, 28, 5, 1), (960, 7, 5, 1),
]


def depthwise_model(channels: int, size: int, kernel: int, stride: int) -> Any:
    """A one-node ONNX model: the depthwise Conv of that shape, bias, random
    weights."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(channels * 1000 + size * 10 + kernel)
    w = rng.standard_normal((channels, 1, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    pad = (kernel - 1) // 2
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=channels,
                            kernel_shape=[kernel, kernel], pads=[pad] * 4,
                            strides=[stride, stride])
    out = (size + 2 * pad - kernel) // stride + 1
    graph = helper.make_graph(
        [node], "dw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out, out])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--inner", type=int, default=20)
    args = parser.parse_args(argv)

    import onnxruntime as ort

    import acc_host as mx
    from acc_host.onnx.backend import prepare

    print("| layer | threads | cpu_ref us | onnxruntime us | paired |")
    print("|---|---:|---:|---:|---:|")
    for channels, size, kernel, stride in LAYERS:
        model = depthwise_model(channels, size, kernel, stride)
        x = np.random.default_rng(1).standard_normal((1, channels, size, size)).astype(np.float32)
        rep = prepare(model, accelerator="cpu_ref")
        for threads in args.threads:
            mx.cpu_ref(0).configure(num_threads=threads)
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            session = ort.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
            ours_out = rep.run([x])[0]
            theirs_out = session.run(None, {"x": x})[0]
            np.testing.assert_allclose(ours_out, theirs_out, rtol=1e-4, atol=1e-4)
            ours, theirs = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                for _ in range(args.inner):
                    rep.run([x])
                ours.append((time.perf_counter() - start) / args.inner * 1e6)
                start = time.perf_counter()
                for _ in range(args.inner):
                    session.run(None, {"x": x})
                theirs.append((time.perf_counter() - start) / args.inner * 1e6)
            paired = statistics.median(a / b for a, b in zip(ours, theirs))
            name = f"{channels} x {size} x {size}, {kernel} x {kernel} / {stride}"
            print(f"| {name} | {threads} | {statistics.median(ours):.1f} | "
                  f"{statistics.median(theirs):.1f} | {paired:.2f} |", flush=True)
        mx.cpu_ref(0).configure(num_threads=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
