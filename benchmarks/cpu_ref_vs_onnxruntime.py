"""Latency of cpu_ref's symbolic mode next to onnxruntime, same run, same
thread count.

Usage: python benchmarks/cpu_ref_vs_onnxruntime.py [--repeat N] [--warmup N]
       [--batch 1 8] [--threads 1 2] [--models NAME ...] [--json out.json]

Models: the MXNet models of tests/models (exported to ONNX with
``mx.onnx.export_model`` for onnxruntime) and the PyTorch-exported ONNX
models of tests/onnx_models (imported with ``mx.onnx.import_model`` for
cpu_ref). cpu_ref runs the whole graph as one loaded model (loadModel then
infer, the timed part being infer alone; the graph is annotated with the
weight arrays, whose shapes and dtypes cover the imported models' scalar
constants; a graph whose shapes still cannot be inferred would run through
the ONNX backend's executor on cpu_ref instead, labelled so, which adds the
host executor's time); onnxruntime runs the same graph in
an InferenceSession of the CPUExecutionProvider with intra_op_num_threads set
to the same thread count (and inter-op parallelism off). Each figure is the
median of --repeat calls after --warmup untimed ones; the two engines are
measured alternately in blocks so that load from other processes hits both
alike. onnxruntime is only a reference: acc-host does not use it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import settle

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parent.parent
MX_MODELS = ("squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes")
ONNX_MODELS = ("resnet_small", "dwsep_small", "vit_small", "bert_small")
# Their graphs reshape with constant shapes that hold the batch of 2 they were
# exported with, so they run at that batch only.
FIXED_BATCH = {"vit_small": 2, "bert_small": 2}
# Untimed calls before each block (no OpenBLAS here: onnxruntime's 50 ms).
SETTLE_S = 0.06
TRANSFORMERS = {"transformer_enc", "transformer_enc_mxcodes", "vit_small", "bert_small"}


def _batched(array: np.ndarray, batch: int) -> np.ndarray:
    if np.issubdtype(array.dtype, np.floating):
        rng = np.random.default_rng(0)
        base = np.concatenate([array[:1]] * batch)
        return (base + 0.01 * rng.standard_normal(base.shape)).astype(array.dtype)
    return np.concatenate([array[:1]] * batch)


def _mxnet_model(name: str, batch: int, workdir: Path) -> tuple[Any, dict, dict, Path]:
    folder = ROOT / "tests" / "models" / name
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    data = _batched(np.load(folder / "input_0.npy"), batch)
    onnx_path = workdir / f"{name}_b{batch}.onnx"
    if not onnx_path.exists():
        mx.onnx.export_model(sym, [arg_params, aux_params], [data.shape], data.dtype,
                             onnx_file_path=str(onnx_path))
    return sym, {"data": data}, {**arg_params, **aux_params}, onnx_path


def _onnx_model(name: str, batch: int, workdir: Path) -> tuple[Any, dict, dict, Path]:
    import onnx

    path = ROOT / "tests" / "onnx_models" / f"{name}.onnx"
    model = onnx.load(str(path))
    batch = FIXED_BATCH.get(name, batch)
    samples = np.load(ROOT / "tests" / "onnx_models" / f"{name}.npz")
    feeds = {value.name: _batched(samples[value.name], batch) for value in model.graph.input}
    # Fix the batch of the graph inputs and outputs for this run.
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = batch
    onnx_path = workdir / f"{name}_b{batch}.onnx"
    onnx.save(model, str(onnx_path))
    sym, arg_params, aux_params = mx.onnx.import_model(str(onnx_path))
    return sym, feeds, {**arg_params, **aux_params}, onnx_path


class _NullContext:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


def _median_ms(fn: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def measure(name: str, batch: int, threads: int, repeat: int, warmup: int,
            workdir: Path) -> dict[str, Any]:
    import onnxruntime as ort

    maker = _mxnet_model if name in MX_MODELS else _onnx_model
    sym, feeds, params, onnx_path = maker(name, batch, workdir)
    shapes = {key: value.shape for key, value in feeds.items()}
    weights = {key: (value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value))
               for key, value in params.items()}
    library = mx.get_library("cpu_ref")
    mx.cpu_ref(0).configure(num_threads=threads)
    try:
        graph = annotate_symbol(sym, shapes, weights=weights,
                                dtypes={key: value.dtype for key, value in feeds.items()})
        via = "loaded model"
    except InvalidArgumentError:
        # Shapes that inference cannot resolve: run the ONNX backend's
        # executor on cpu_ref instead; the time then includes the host's
        # executor and any CPU fallback.
        graph = None
        via = "onnx backend"

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(onnx_path), options,
                                   providers=["CPUExecutionProvider"])
    ort_feeds = {value.name: feeds[value.name] for value in session.get_inputs()}

    cpu_ref_times: list[float] = []
    ort_times: list[float] = []
    if graph is None:
        import onnx

        from acc_host.onnx.backend import prepare

        rep = prepare(onnx.load(str(onnx_path)), accelerator=mx.cpu_ref(0))

        class _Backend:
            def infer(self, inputs: dict) -> dict:
                return dict(enumerate(rep.run(inputs)))

        model_context: Any = _NullContext(_Backend())
    else:
        model_context = LoadedModel(library, graph, weights)
    with model_context as model:
        ours = list(model.infer(feeds).values())
        theirs = session.run(None, ort_feeds)
        max_error = max(float(np.max(np.abs(a - b) / (1e-3 + np.abs(b))))
                        for a, b in zip(ours, theirs))
        for _ in range(warmup):
            model.infer(feeds)
            session.run(None, ort_feeds)
        block = max(1, repeat // 5)
        while len(cpu_ref_times) < repeat:
            # Untimed calls first (bench_common.settle: the other engine's
            # spinning workers stop, ours wake up).
            settle(lambda: model.infer(feeds), SETTLE_S)
            cpu_ref_times += _median_ms(lambda: model.infer(feeds), block)
            settle(lambda: session.run(None, ort_feeds), SETTLE_S)
            ort_times += _median_ms(lambda: session.run(None, ort_feeds), block)
    mx.cpu_ref(0).configure(num_threads=1)
    ours_ms = statistics.median(cpu_ref_times) * 1e3
    ort_ms = statistics.median(ort_times) * 1e3
    target = 1.5 if name in TRANSFORMERS else 1.3
    batch = FIXED_BATCH.get(name, batch)
    return {"model": name, "batch": batch, "threads": threads, "via": via, "cpu_ref_ms": ours_ms,
            "ort_ms": ort_ms, "ratio": ours_ms / ort_ms, "target": target,
            "max_rel_diff": max_error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--models", nargs="+", default=[*MX_MODELS, *ONNX_MODELS],
                        choices=[*MX_MODELS, *ONNX_MODELS])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median ms per infer of {args.repeat} after {args.warmup} warm-ups; "
          f"{os.cpu_count()} CPUs, load average at start {load:.2f}")
    header = ("| model | batch | threads | cpu_ref ms | onnxruntime ms | ratio | target |")
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            batches = [FIXED_BATCH[name]] if name in FIXED_BATCH else args.batch
            for batch in batches:
                for threads in args.threads:
                    row = measure(name, batch, threads, args.repeat, args.warmup, Path(tmp))
                    rows.append(row)
                    mark = "" if row["ratio"] <= row["target"] else " (over)"
                    label = name if row["via"] == "loaded model" else f"{name} (onnx backend)"
                    print(f"| {label} | {batch} | {threads} | {row['cpu_ref_ms']:.2f} | "
                          f"{row['ort_ms']:.2f} | {row['ratio']:.2f}{mark} | "
                          f"{row['target']:.1f} |", flush=True)
    if hasattr(os, "getloadavg"):
        print(f"load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
