"""GFLOP/s of cpu_ref's GEMM and convolution kernels next to OpenBLAS
(numpy's sgemm) and onnxruntime's convolution, one thread each.

Usage: python benchmarks/cpu_ref_kernels.py [--repeat N] [--threads N]
       [--isa avx512 avx2 generic] [--json out.json]

Builds benchmarks/c/bench_kernels.c with the plugins' release flags (see
build_plugins.py: -O2, no -march) together with the cpu_ref kernel sources,
and runs it once per shape and ISA (the GEMM's run-time dispatch capped with
cr_gemm_set_isa). Each figure is the median of --repeat calls. "gemm" shapes
are C (M x N) = A (M x K) . B (K x N) with the weight operand pre-packed (as
cpu_ref packs weights at loadModel); numpy's figure is ``a @ b`` on float32 arrays, which
numpy hands to its bundled OpenBLAS sgemm (set OPENBLAS_NUM_THREADS=1, as
this script does before importing numpy). "conv" shapes are N, C, H, W ->
O with a KH x KW kernel, stride, padding and groups, bias included, filters
pre-packed; onnxruntime's figure is a one-node Conv model. GFLOP/s counts 2
flops per multiply-add of the direct definition (padding taps included).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import build_plugins  # noqa: E402

CPU_REF = ROOT / "plugins" / "cpu_ref"
# The harness and cpu_ref's kernels (reference and fast), which need nothing
# else of the plugin.
SOURCES = [ROOT / "benchmarks" / "c" / "bench_kernels.c",
           *build_plugins.plugin_sources(CPU_REF / "kernels")]

# (label, M, N, K, pre-packed operand): square products with A pre-packed
# (as convolution filters are), and FullyConnected layers of the transformer
# models (rows = batch x sequence) and a classifier, with the weights, B,
# pre-packed.
GEMMS = [("square 256", 256, 256, 256, "a"), ("square 512", 512, 512, 512, "a"),
         ("square 1024", 1024, 1024, 1024, "a"), ("fc 32x128->384", 32, 384, 128, "b"),
         ("fc 256x128->512", 256, 512, 128, "b"), ("fc 256x512->128", 256, 128, 512, "b"),
         ("fc 1x1280->1000", 1, 1000, 1280, "b")]
# (label, N, C, H, W, O, KH, KW, stride, pad, groups): layers of the test models.
CONVS = [("squeezenet conv0 3x3/2", 1, 3, 224, 224, 64, 3, 3, 2, 0, 1),
         ("squeezenet expand 3x3", 1, 16, 55, 55, 64, 3, 3, 1, 1, 1),
         ("squeezenet expand 1x1", 1, 16, 55, 55, 64, 1, 1, 1, 0, 1),
         ("squeezenet conv10 1x1", 1, 512, 13, 13, 1000, 1, 1, 1, 0, 1),
         ("mobilenet conv0 3x3/2", 1, 3, 224, 224, 32, 3, 3, 2, 1, 1),
         ("mobilenet expand 1x1", 1, 24, 56, 56, 144, 1, 1, 1, 0, 1),
         ("mobilenet project 1x1", 1, 960, 7, 7, 320, 1, 1, 1, 0, 1),
         ("mobilenet depthwise 3x3", 1, 144, 56, 56, 144, 3, 3, 1, 1, 144),
         ("mobilenet depthwise 3x3/2", 1, 144, 56, 56, 144, 3, 3, 2, 1, 144),
         ("resnet 3x3 64", 1, 64, 32, 32, 64, 3, 3, 1, 1, 1),
         ("resnet 3x3 64, batch 8", 8, 64, 32, 32, 64, 3, 3, 1, 1, 1)]


def build(out_dir: Path) -> Path:
    flags = [f for f in build_plugins.BASE_FLAGS if f not in ("-shared", "-fPIC")]
    cc = build_plugins.compiler()
    flags += build_plugins.RELEASE_FLAGS
    flags += [] if build_plugins.is_clang(cc) else build_plugins.GCC_RELEASE_FLAGS
    binary = out_dir / "bench_kernels"
    command = [cc, *flags, f"-I{ROOT / 'include'}",
               *(f"-I{d}" for d in build_plugins.plugin_include_dirs(CPU_REF)),
               *map(str, SOURCES),
               "-o", str(binary), "-lm"]
    subprocess.run(command, check=True)
    return binary


def run(binary: Path, isa: str, threads: int, repeat: int, *args: object) -> tuple[str, float]:
    out = subprocess.run([str(binary), isa, str(threads), str(repeat), *map(str, args)],
                         check=True, capture_output=True, text=True).stdout.split()
    return out[0], float(out[2])


def numpy_gflops(m: int, n: int, k: int, repeat: int) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    times = []
    for _ in range(repeat + 2):
        start = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - start)
    return 2.0 * m * n * k / statistics.median(times[2:]) / 1e9


def ort_conv_gflops(shape: tuple, repeat: int, threads: int) -> float | None:
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    n, c, h, w, o, kh, kw, stride, pad, groups = shape
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((o, c // groups, kh, kw), dtype=np.float32)
    bias = rng.standard_normal(o, dtype=np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kh, kw],
                            strides=[stride, stride], pads=[pad] * 4, group=groups)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(weight, "w"), onnx.numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what this onnxruntime reads
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    times = []
    for _ in range(repeat + 2):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    return 2.0 * n * o * oh * ow * (c // groups) * kh * kw / statistics.median(times[2:]) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--isa", nargs="+", default=["avx512", "avx2", "generic"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"GFLOP/s, median of {args.repeat}; {args.threads} thread(s); "
              f"load average at start {load:.2f}")
        isas = " | ".join(f"cpu_ref {isa}" for isa in args.isa)
        print(f"| kernel | shape | {isas} | reference |")
        print("|---|---|" + "---:|" * len(args.isa) + "---:|")
        for label, m, n, k, packed in GEMMS:
            figures = {}
            for isa in args.isa:
                used, gflops = run(binary, isa, args.threads, args.repeat, "gemm", m, n, k,
                                   packed)
                figures[used] = gflops
            blas = numpy_gflops(m, n, k, args.repeat)
            rows.append({"kind": "gemm", "label": label, "m": m, "n": n, "k": k,
                         **figures, "openblas": blas})
            cells = " | ".join(f"{figures.get(isa, float('nan')):.1f}" for isa in args.isa)
            print(f"| gemm {label} | {m}x{n}x{k} | {cells} | OpenBLAS {blas:.1f} |",
                  flush=True)
        for label, *shape in CONVS:
            figures = {}
            for isa in args.isa:
                used, gflops = run(binary, isa, args.threads, args.repeat, "conv", *shape)
                figures[used] = gflops
            reference = ort_conv_gflops(tuple(shape), args.repeat, args.threads)
            rows.append({"kind": "conv", "label": label, "shape": shape, **figures,
                         "onnxruntime": reference})
            cells = " | ".join(f"{figures.get(isa, float('nan')):.1f}" for isa in args.isa)
            ref = f"onnxruntime {reference:.1f}" if reference is not None else "-"
            print(f"| conv {label} | {'x'.join(map(str, shape[:5]))} k{shape[5]}x{shape[6]} "
                  f"s{shape[7]} p{shape[8]} g{shape[9]} | {cells} | {ref} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
