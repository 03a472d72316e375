"""Symbolic (fused) against imperative mode on the simulated MLU.

Usage: python benchmarks/mlu_fusion.py [--repeat N]

For SqueezeNet 1.1 and MobileNetV2 1.0 (tests/models, MXNet's own files) and
the ResNet-18-style network of tests/support/mlu_nets.py (built with mx.sym,
widths 16-128, 1x3x64x64), on one card:

* symbolic: the whole graph loaded once with loadModel (fusion segments,
  one FusionOp each), then one infer() per forward;
* imperative: acc_host.abi.operator_executor.run_graph, the seed's imperative mode:
  every operator through its own executor (one BaseOp compiled and
  launched per operator, intermediates in device memory).

Reported per network: simulated time, launches and DRAM bytes per forward
(card statistics, deterministic) and the host wall-clock median of each mode
over --repeat forwards, with the imperative / fused ratios. The imperative
wall time includes its per-operator compilation, which is what that mode
costs on every forward; the fused load (compile) time is shown apart.
SqueezeNet's Dropout, the one operator the MLU does not take, is an identity
at inference and is removed from the graph here so that both modes run the
whole network on the card.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.operator_executor import run_graph

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import mlu_nets  # noqa: E402

CARD = 1
STATS = ("sim_time_ns", "launches", "dram_bytes")


def without_dropout(symbol: Any) -> Any:
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    source = {k: node["inputs"][0] for k, node in enumerate(nodes) if node["op"] == "Dropout"}

    def follow(entry: list[int]) -> list[int]:
        while entry[0] in source:
            entry = source[entry[0]]
        return entry

    for node in nodes:
        node["inputs"] = [follow(entry) for entry in node["inputs"]]
    graph["heads"] = [follow(entry) for entry in graph["heads"]]
    return mx.sym.load_json(json.dumps(graph))  # Dropout nodes left unreachable


def shared_model(name: str) -> tuple[Any, dict[str, np.ndarray], np.ndarray]:
    folder = ROOT / "tests" / "models" / name
    symbol, args, aux = mx.model.load_checkpoint(str(folder / "model"), 0)
    symbol = without_dropout(symbol)
    used = set(symbol.list_arguments()) | set(symbol.list_auxiliary_states())
    weights = {key: value.asnumpy() for key, value in {**args, **aux}.items() if key in used}
    return symbol, weights, np.load(folder / "input_0.npy")


def resnet18_style() -> tuple[Any, dict[str, np.ndarray], np.ndarray]:
    symbol, shape = mlu_nets.resnet18_style(), (1, 3, 64, 64)
    image = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    return symbol, mlu_nets.net_weights(symbol, shape, seed=3), image


def stats() -> dict[str, float]:
    answer = mx.mlu(CARD).configure(query="stats")
    return {key: float(answer[key]) for key in STATS}


def measure(name: str, symbol: Any, weights: dict[str, np.ndarray], image: np.ndarray,
            repeat: int) -> dict[str, Any]:
    library = mx.get_library("mlu")
    graph = annotate_symbol(symbol, {"data": image.shape}, weights=list(weights), dev_id=CARD)
    start = time.perf_counter()
    model = LoadedModel(library, graph, weights, CARD)
    load = time.perf_counter() - start
    with model:
        mx.mlu(CARD).configure(reset_stats=1)
        fused_out = list(model.infer({"data": image}).values())[0]
        fused = stats()
        fused_wall = []
        for _ in range(repeat):
            start = time.perf_counter()
            model.infer({"data": image})
            fused_wall.append(time.perf_counter() - start)
    mx.mlu(CARD).configure(reset_stats=1)
    (imperative_out,) = run_graph(library, graph, {"data": image, **weights}, CARD)
    imperative = stats()
    imperative_wall = []
    for _ in range(repeat):
        start = time.perf_counter()
        run_graph(library, graph, {"data": image, **weights}, CARD)
        imperative_wall.append(time.perf_counter() - start)
    return {"network": name, "fused": fused, "imperative": imperative,
            "fused_wall_s": statistics.median(fused_wall),
            "imperative_wall_s": statistics.median(imperative_wall), "load_s": load,
            "max_abs_diff": float(np.abs(fused_out - imperative_out).max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    networks = {"squeezenet1_1": lambda: shared_model("squeezenet1_1"),
                "mobilenetv2_1_0": lambda: shared_model("mobilenetv2_1_0"),
                "resnet18-style": resnet18_style}
    print(f"card mlu({CARD}), default parameters; host wall: medians of {args.repeat}")
    print("| network | sim time fused / imperative | ratio | launches | ratio | "
          "DRAM MB | ratio | host wall ms | ratio | fused load ms | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, build in networks.items():
        r = measure(name, *build(), repeat=args.repeat)
        f, i = r["fused"], r["imperative"]
        print(f"| {name} | {f['sim_time_ns'] / 1e3:.1f} / {i['sim_time_ns'] / 1e3:.1f} us | "
              f"{i['sim_time_ns'] / f['sim_time_ns']:.1f} | "
              f"{f['launches']:.0f} / {i['launches']:.0f} | {i['launches'] / f['launches']:.0f} | "
              f"{f['dram_bytes'] / 1e6:.2f} / {i['dram_bytes'] / 1e6:.2f} | "
              f"{i['dram_bytes'] / f['dram_bytes']:.1f} | "
              f"{r['fused_wall_s'] * 1e3:.1f} / {r['imperative_wall_s'] * 1e3:.1f} | "
              f"{r['imperative_wall_s'] / r['fused_wall_s']:.1f} | {r['load_s'] * 1e3:.0f} | "
              f"{r['max_abs_diff']:.1e} |")


if __name__ == "__main__":
    main()
