"""What several benchmarks share. The scripts are run as
``python benchmarks/<name>.py``, which puts this folder on ``sys.path``."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


# ---- the benchmark models ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
MX_MODELS = ("squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes")
ONNX_MODELS = ("resnet_small", "dwsep_small", "vit_small", "bert_small")
# Their graphs reshape with constant shapes that hold the batch of 2 they were
# exported with, so they run at that batch only.
FIXED_BATCH = {"vit_small": 2, "bert_small": 2}
TRANSFORMERS = frozenset({"transformer_enc", "transformer_enc_mxcodes", "vit_small", "bert_small"})


@dataclass
class BenchModel:
    """One benchmark model at one batch size: its MXNet symbol and weights
    (for acc-host), its inputs, and an ONNX file of the same graph (for
    onnxruntime, and for acc-host's ONNX backend when kind is "onnx")."""

    name: str
    kind: str  # "mxnet" (tests/models) or "onnx" (tests/onnx_models)
    batch: int
    symbol: Any
    params: dict[str, np.ndarray]
    feeds: dict[str, np.ndarray]
    onnx_path: Path


def batched(array: np.ndarray, batch: int) -> np.ndarray:
    """batch copies of the first sample, floats slightly perturbed per copy."""
    base = np.concatenate([array[:1]] * batch)
    if np.issubdtype(array.dtype, np.floating):
        rng = np.random.default_rng(0)
        return (base + 0.01 * rng.standard_normal(base.shape)).astype(array.dtype)
    return base


def load_model(name: str, batch: int, workdir: Path) -> BenchModel:
    """A model of tests/models (exported to ONNX with mx.onnx.export_model)
    or of tests/onnx_models (imported with mx.onnx.import_model)."""
    if name in MX_MODELS:
        folder = ROOT / "tests" / "models" / name
        sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
        data = batched(np.load(folder / "input_0.npy"), batch)
        path = workdir / f"{name}_b{batch}.onnx"
        if not path.exists():
            mx.onnx.export_model(sym, [arg_params, aux_params], [data.shape], data.dtype,
                                 onnx_file_path=str(path))
        params = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
        return BenchModel(name, "mxnet", batch, sym, params, {"data": data}, path)
    import onnx

    model = onnx.load(str(ROOT / "tests" / "onnx_models" / f"{name}.onnx"))
    batch = FIXED_BATCH.get(name, batch)
    samples = np.load(ROOT / "tests" / "onnx_models" / f"{name}.npz")
    feeds = {value.name: batched(samples[value.name], batch) for value in model.graph.input}
    for value in [*model.graph.input, *model.graph.output]:  # fix the batch of this run
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_param")
            dims[0].dim_value = batch
    path = workdir / f"{name}_b{batch}.onnx"
    onnx.save(model, str(path))
    sym, arg_params, aux_params = mx.onnx.import_model(str(path))
    params = {key: (value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value))
              for key, value in {**arg_params, **aux_params}.items()}
    return BenchModel(name, "onnx", batch, sym, params, feeds, path)


def settle(function: Callable[[], object], seconds: float) -> None:
    """Calls function, untimed, until at least `seconds` have passed (once
    at least): onnxruntime's workers keep spinning for about 50 ms after a
    run with 2 threads or more, OpenBLAS's (the CPU path) for about 200 ms
    (measured, docs/performance.md), taking a core from whatever runs
    next, and a pool that slept while another function ran needs its
    threads woken again."""
    start = time.perf_counter()
    function()
    while time.perf_counter() - start < seconds:
        function()


def interleaved_blocks(functions: dict[str, Callable[[], object]], repeat: int,
                       warmup: int = 2, settle_s: float = 0.0) -> dict[str, list[list[float]]]:
    """Seconds per call of each function, measured alternately in blocks of
    a few calls so that load from other processes hits them alike, as a
    list of blocks (block i of every function taken in round i, one after
    the other). Each block starts with untimed calls, one at least and for
    at least `settle_s` seconds (see settle()), so that every figure is
    taken with the function's data in the caches, not evicted by the one
    before, and without the previous function's spinning threads."""
    for function in functions.values():
        for _ in range(warmup):
            function()
    blocks: dict[str, list[list[float]]] = {name: [] for name in functions}
    size = max(1, repeat // 5)
    while min(sum(len(block) for block in timed) for timed in blocks.values()) < repeat:
        for name, function in functions.items():
            settle(function, settle_s)
            block = []
            for _ in range(size):
                start = time.perf_counter()
                function()
                block.append(time.perf_counter() - start)
            blocks[name].append(block)
    return blocks


def interleaved(functions: dict[str, Callable[[], object]], repeat: int,
                warmup: int = 2, settle_s: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each function over interleaved_blocks."""
    blocks = interleaved_blocks(functions, repeat, warmup, settle_s)
    return {name: blocks_median(timed) for name, timed in blocks.items()}


def blocks_median(blocks: list[list[float]]) -> float:
    """The median of every time in blocks."""
    return statistics.median(t for block in blocks for t in block)


def paired_ratio(ours: list[list[float]], theirs: list[list[float]]) -> float:
    """The median over rounds of the ratio of the two functions' block
    medians in that round (measured back to back): a slower phase of the
    machine that lasts a round slows both sides of that round's ratio,
    where it would shift one side's overall median more than the other's."""
    return statistics.median(statistics.median(a) / statistics.median(b)
                             for a, b in zip(ours, theirs))


def ort_session(model: Path | bytes, threads: int = 1) -> Any:
    """onnxruntime's CPUExecutionProvider on a model file or serialized model,
    intra_op_num_threads = threads, sequential: the peer every comparison
    of the suite measures against (onnxruntime is a benchmark extra, never
    a dependency of acc-host)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

