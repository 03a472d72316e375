"""The mlu simulator's cost counters for a fixed set of workloads: the shared
models and PyTorch-exported ONNX models through the public executor
(partitioned, fused), single-operator graphs fused (one loaded model) and
imperative (one executor per operator), in fp32, fp16 and int8.

The counters are what ``configure(query="stats")`` reports for one forward
after a warm-up forward: every statistic but ``compile_time_ns`` (wall
time). They depend on the compiled programs and the cost model only, never
on how the host computes the kernels' numbers, so a change to the
functional kernels must leave every one of them as it was.

``python tests/support/mlu_counters.py`` writes them to
tests/plugins/mlu_sim/mlu_counters.json; test_mlu_sim_counters.py measures
them again and compares.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.operator_executor import run_graph

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
EXPECTED = TESTS / "plugins" / "mlu_sim" / "mlu_counters.json"
CARD = 2  # the card every workload runs on (precision set per case, then restored)
COUNTERS = ("sim_time_ns", "sim_cycles", "launches", "instructions", "dram_bytes",
            "host_device_bytes", "host_device_copies", "host_device_time_ns", "compiles")
# Workloads that take more than a second or so each (the default run stays short).
SLOW = frozenset({"model-mobilenetv2_1_0-b8", "model-squeezenet1_1-b8",
                  "model-squeezenet_biased-b8", "model-squeezenet1_1-b1-int8",
                  "onnx-vit_small", "onnx-bert_small", "model-transformer_enc-b1",
                  "model-mobilenetv2_1_0-b1"})


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[], dict[str, float]]


def _stats() -> dict[str, float]:
    answer = mx.mlu(CARD).configure(query="stats")
    return {key: float(answer[key]) for key in COUNTERS}


def _steady(forward: Callable[[], list[np.ndarray]]) -> dict[str, float]:
    """The counters of one forward after a warm-up one, and two summaries
    of its outputs (``output_abs_sum``, ``output_abs_max``, over every
    output) that the numbers must keep within the tests' tolerances."""
    forward()
    mx.mlu(CARD).configure(reset_stats=1)
    outputs = [np.asarray(out, dtype=np.float64) for out in forward()]
    result = _stats()
    result["output_abs_sum"] = float(sum(np.abs(out).sum() for out in outputs))
    result["output_abs_max"] = float(max(np.abs(out).max() for out in outputs))
    return result


def with_threads(threads: int, work: Callable[[], dict[str, float]]) -> dict[str, float]:
    """work() with the card's host threads set to threads (restored after)."""
    before = mx.mlu(CARD).configure(query="params")["num_threads"]
    mx.mlu(CARD).configure(num_threads=threads)
    try:
        return work()
    finally:
        mx.mlu(CARD).configure(num_threads=before)


def _with_precision(precision: str, work: Callable[[], dict[str, float]]) -> dict[str, float]:
    before = mx.mlu(CARD).configure(query="params")["precision"]
    mx.mlu(CARD).configure(precision=precision)
    try:
        return work()
    finally:
        mx.mlu(CARD).configure(precision=before)


def _bound(symbol: Any, params: dict[str, np.ndarray],
           feeds: dict[str, np.ndarray]) -> dict[str, float]:
    exe = symbol.simple_bind(mx.mlu(CARD), **{k: v.shape for k, v in feeds.items()},
                             type_dict={k: v.dtype for k, v in {**params, **feeds}.items()})
    for key, value in params.items():
        target = exe.arg_dict[key] if key in exe.arg_dict else exe.aux_dict[key]
        target[()] = value  # [()] also assigns 0-d arrays
    try:
        return _steady(lambda: [out.asnumpy() for out in exe.forward(**feeds)])
    finally:
        exe.close()


def _batched(array: np.ndarray, batch: int) -> np.ndarray:
    base = np.concatenate([array[:1]] * batch)
    if np.issubdtype(array.dtype, np.floating):
        base = base + 0.01 * np.random.default_rng(0).standard_normal(base.shape)
    return base.astype(array.dtype)


def _shared_model(name: str, batch: int) -> dict[str, float]:
    folder = TESTS / "models" / name
    symbol, args, aux = mx.model.load_checkpoint(str(folder / "model"), 0)
    params = {key: value.asnumpy() for key, value in {**args, **aux}.items()}
    data = _batched(np.load(folder / "input_0.npy"), batch)
    return _bound(symbol, params, {"data": data})


def _onnx_model(name: str) -> dict[str, float]:
    folder = TESTS / "onnx_models"
    symbol, args, aux = mx.onnx.import_model(str(folder / f"{name}.onnx"))
    params = {key: (value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value))
              for key, value in {**args, **aux}.items()}
    samples = np.load(folder / f"{name}.npz")
    feeds = {key: samples[key] for key in symbol.list_arguments() if key in samples.files}
    return _bound(symbol, params, feeds)


# ---- single operators -------------------------------------------------------------------


def _op_symbol(op: str, attrs: dict[str, Any], inputs: int) -> Any:
    data = [mx.sym.Variable("data")] + [mx.sym.Variable(f"in{k}") for k in range(1, inputs)]
    if op in ("elemwise_add", "elemwise_mul"):
        return getattr(mx.sym, op)(*data, name="node")
    return getattr(mx.sym, op)(data[0], name="node", **attrs)


def _op_arrays(symbol: Any, shape: tuple, dtype: Any, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = symbol.infer_shape(data=shape)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    arrays = {}
    for name, s in zip(names, arg_shapes + aux_shapes):
        value = rng.standard_normal(s)
        if name.endswith(("_var", "moving_var")):
            value = np.abs(value) + 0.5
        kept = np.float32 if "_moving_" in name or name.endswith(("_gamma", "_beta")) else dtype
        arrays[name] = value.astype(kept)
    return arrays


def single_op(op: str, attrs: dict[str, Any], shape: tuple, dtype: Any = np.float32,
              inputs: int = 1) -> tuple[Callable[[], dict[str, float]],
                                         Callable[[], dict[str, float]]]:
    """(fused, imperative) counters of one operator."""
    symbol = _op_symbol(op, attrs, inputs)
    arrays = _op_arrays(symbol, shape, dtype, seed=len(op) + len(attrs))
    feeds = {key: value for key, value in arrays.items()
             if key == "data" or key.startswith("in")}
    params = {key: value for key, value in arrays.items() if key not in feeds}

    def graph() -> dict[str, Any]:
        return annotate_symbol(symbol, {k: v.shape for k, v in feeds.items()},
                               weights=list(params), dev_id=CARD,
                               dtypes={k: v.dtype for k, v in arrays.items()})

    def fused() -> dict[str, float]:
        # One loaded model: the host's cost-aware partitioning would keep
        # most single operators on its CPU.
        with LoadedModel(mx.get_library("mlu"), graph(), params, CARD) as model:
            return _steady(lambda: list(model.infer(feeds).values()))

    def imperative() -> dict[str, float]:
        library, annotated = mx.get_library("mlu"), graph()
        return _steady(lambda: run_graph(library, annotated, arrays, CARD))

    return fused, imperative


F16 = np.float16
OPS: list[tuple[str, str, dict[str, Any], tuple, Any, int]] = [
    ("conv3x3", "Convolution", {"kernel": (3, 3), "pad": (1, 1), "num_filter": 16},
     (2, 8, 20, 18), np.float32, 1),
    ("conv7x7s2", "Convolution", {"kernel": (7, 7), "stride": (2, 2), "pad": (3, 3),
                                  "num_filter": 8}, (1, 3, 40, 40), np.float32, 1),
    ("conv_dilated", "Convolution", {"kernel": (3, 3), "dilate": (2, 2), "pad": (2, 2),
                                     "num_filter": 6, "no_bias": True},
     (1, 4, 15, 13), np.float32, 1),
    ("conv_grouped", "Convolution", {"kernel": (3, 3), "pad": (1, 1), "num_filter": 12,
                                     "num_group": 3}, (1, 6, 12, 12), np.float32, 1),
    ("conv_depthwise_s2", "Convolution", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                                          "num_filter": 32, "num_group": 32, "no_bias": True},
     (1, 32, 28, 28), np.float32, 1),
    ("conv1x1", "Convolution", {"kernel": (1, 1), "num_filter": 64},
     (2, 32, 14, 14), np.float32, 1),
    ("pool_max", "Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "max",
                             "pooling_convention": "full"}, (1, 16, 27, 27), np.float32, 1),
    ("pool_avg_pad", "Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                                 "pool_type": "avg", "count_include_pad": False},
     (2, 8, 15, 15), np.float32, 1),
    ("pool_global", "Pooling", {"global_pool": True, "pool_type": "avg", "kernel": (1, 1)},
     (2, 64, 7, 7), np.float32, 1),
    ("fc", "FullyConnected", {"num_hidden": 40}, (4, 300), np.float32, 1),
    ("softmax", "softmax", {"axis": 1}, (3, 10, 7), np.float32, 1),
    ("relu", "Activation", {"act_type": "relu"}, (2, 16, 9, 9), np.float32, 1),
    ("sigmoid", "Activation", {"act_type": "sigmoid"}, (2, 700), np.float32, 1),
    ("batchnorm", "BatchNorm", {"fix_gamma": False}, (2, 6, 8, 8), np.float32, 1),
    ("add", "elemwise_add", {}, (3, 5, 11), np.float32, 2),
    ("mul", "elemwise_mul", {}, (3, 5, 11), np.float32, 2),
    ("conv3x3_fp16", "Convolution", {"kernel": (3, 3), "pad": (1, 1), "num_filter": 8},
     (1, 4, 16, 16), F16, 1),
    ("fc_fp16", "FullyConnected", {"num_hidden": 12}, (3, 50), F16, 1),
    ("pool_avg_fp16", "Pooling", {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg"},
     (1, 4, 10, 10), F16, 1),
    ("add_fp16", "elemwise_add", {}, (4, 33), F16, 2),
]
INT8_OPS = ("conv3x3", "conv_depthwise_s2", "conv1x1", "fc")


def _int8(work: Callable[[], dict[str, float]]) -> Callable[[], dict[str, float]]:
    return lambda: _with_precision("int8", work)


def shared_model(name: str, batch: int) -> Callable[[], dict[str, float]]:
    return functools.partial(_shared_model, name, batch)


def onnx_model(name: str) -> Callable[[], dict[str, float]]:
    return functools.partial(_onnx_model, name)


def cases() -> list[Case]:
    """Every workload, named as in the json."""
    found: list[Case] = []
    for name, batches in (("squeezenet1_1", (1, 8)), ("squeezenet_biased", (1, 8)),
                          ("mobilenetv2_1_0", (1, 8)), ("transformer_enc", (1,))):
        for batch in batches:
            found.append(Case(f"model-{name}-b{batch}",
                              functools.partial(_shared_model, name, batch)))
    found.append(Case("model-squeezenet1_1-b1-int8",
                      _int8(functools.partial(_shared_model, "squeezenet1_1", 1))))
    for name in ("resnet_small", "dwsep_small", "vit_small", "bert_small"):
        found.append(Case(f"onnx-{name}", functools.partial(_onnx_model, name)))
    for name, op, attrs, shape, dtype, inputs in OPS:
        fused, imperative = single_op(op, attrs, shape, dtype, inputs)
        found.append(Case(f"op-{name}-fused", fused))
        found.append(Case(f"op-{name}-imperative", imperative))
        if name in INT8_OPS:
            found.append(Case(f"op-{name}-int8-fused", _int8(fused)))
            found.append(Case(f"op-{name}-int8-imperative", _int8(imperative)))
    return found


def main() -> None:
    """Writes the counters of every case to EXPECTED (run on the simulator
    whose counters are the reference)."""
    result = {case.name: case.run() for case in cases()}
    EXPECTED.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(result)} workloads to {EXPECTED}", file=sys.stderr)


if __name__ == "__main__":
    main()
