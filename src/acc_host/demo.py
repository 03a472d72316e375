"""The main job: load the bundled cpu_ref plugin and run a small CNN through
both execution modes of the proposal, checked against the numpy reference.

Run with ``python -m acc_host.demo`` (or ``python -m acc_host``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import reference
from .annotate import annotate
from .context import Context
from .graph_builder import GraphBuilder
from .imperative import run_graph as run_imperative
from .registry import get_library
from .symbolic import LoadedModel
from .tensor import TensorSpec

__all__ = ["small_cnn", "main"]

RTOL, ATOL = 1e-4, 1e-5


def small_cnn(seed: int = 0, batch: int = 1) -> tuple[dict[str, Any], dict[str, np.ndarray],
                                                      np.ndarray]:
    """A residual CNN using every operator cpu_ref has: (graph, weights, input)."""
    g = GraphBuilder()
    data = g.var("data")
    conv0 = g.op("Convolution", "conv0", [data, g.var("conv0_weight"), g.var("conv0_bias")],
                 kernel=(3, 3), pad=(1, 1), num_filter=8)
    bn0 = g.op("BatchNorm", "bn0", [conv0, g.var("bn0_gamma"), g.var("bn0_beta"),
                                    g.var("bn0_moving_mean"), g.var("bn0_moving_var")],
               fix_gamma=False, eps=1e-5)
    relu0 = g.op("Activation", "relu0", [bn0], act_type="relu")
    pool0 = g.op("Pooling", "pool0", [relu0], kernel=(3, 3), stride=(2, 2), pool_type="max",
                 pooling_convention="full")
    conv1 = g.op("Convolution", "conv1", [pool0, g.var("conv1_weight"), g.var("conv1_bias")],
                 kernel=(3, 3), pad=(1, 1), num_filter=8, num_group=2)
    tanh1 = g.op("Activation", "tanh1", [conv1], act_type="tanh")
    add0 = g.op("elemwise_add", "add0", [pool0, tanh1])
    pool1 = g.op("Pooling", "pool1", [add0], global_pool=True, pool_type="avg", kernel=(1, 1))
    flat = g.op("Flatten", "flatten0", [pool1])
    fc = g.op("FullyConnected", "fc0", [flat, g.var("fc0_weight"), g.var("fc0_bias")],
              num_hidden=10)
    prob = g.op("softmax", "prob", [fc])
    graph = g.graph([prob])

    rng = np.random.default_rng(seed)
    shapes = {"conv0_weight": (8, 3, 3, 3), "conv0_bias": (8,), "bn0_gamma": (8,),
              "bn0_beta": (8,), "bn0_moving_mean": (8,), "conv1_weight": (8, 4, 3, 3),
              "conv1_bias": (8,), "fc0_weight": (10, 8), "fc0_bias": (10,)}
    weights = {name: rng.standard_normal(shape).astype(np.float32)
               for name, shape in shapes.items()}
    weights["bn0_moving_var"] = rng.uniform(0.5, 2.0, 8).astype(np.float32)
    image = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    return graph, weights, image


def _median_ms(function: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _report(mode: str, result: np.ndarray, expected: np.ndarray, ms: float) -> bool:
    error = float(np.max(np.abs(result - expected)))
    ok = bool(np.allclose(result, expected, rtol=RTOL, atol=ATOL))
    print(f"  {mode:<34} {ms:8.3f} ms   max |diff| {error:.2e}   {'OK' if ok else 'MISMATCH'}")
    return ok


def main(repeat: int = 20) -> int:
    ctx = Context("cpu_ref", 0)
    library = get_library("cpu_ref")
    print(f"acc-host demo: loaded {library.name!r} from {library.path}")
    print(f"  ABI {library.api_version // 100}.{library.api_version % 100}, "
          f"{library.num_devices} device(s), imperative={library.supports_imperative}, "
          f"version {ctx.configure(query='version')['version']}")

    graph, weights, image = small_cnn()
    values = {"data": image, **weights}
    node_values = reference.run_graph(graph, values)
    expected = node_values[graph["heads"][0][0]][0]
    annotated = annotate(graph, [[TensorSpec.of(v) for v in outputs] for outputs in node_values],
                         weights=weights)
    operators = [i for i, node in enumerate(graph["nodes"]) if node["op"] != "null"]
    supported = set(library.supported_ops(
        _dumps(annotated), {"data": TensorSpec.of(image)}, len(graph["nodes"]), ctx.device_id))

    print(f"\nsmall CNN: {len(graph['nodes'])} nodes, {len(operators)} operators, input "
          f"{image.shape}; supportedOps accepts {len(supported)} of {len(operators)}")
    print(f"  {'node':<10} {'operator':<15} {'output shape':<18} runs on")
    for index in operators:
        node = graph["nodes"][index]
        where = str(ctx) if index in supported else "cpu(0) (unsupported)"
        shape = str(node_values[index][0].shape)
        print(f"  {node['name']:<10} {node['op']:<15} {shape:<18} {where}")

    print("\nresults against the numpy reference (median of "
          f"{repeat} runs, rtol {RTOL}, atol {ATOL}):")
    start = time.perf_counter()
    model = LoadedModel(library, annotated, weights, ctx.device_id)
    compile_ms = (time.perf_counter() - start) * 1e3
    with model:
        symbolic = np.asarray(model.infer({"data": image})["prob_output"])
        symbolic_ms = _median_ms(lambda: model.infer({"data": image}), repeat)
    imperative = run_imperative(library, annotated, values, ctx.device_id)[0]
    imperative_ms = _median_ms(lambda: run_imperative(library, annotated, values), repeat)
    reference_ms = _median_ms(lambda: reference.run_graph(graph, values), max(repeat // 4, 3))
    ok = _report(f"symbolic (loadModel {compile_ms:.2f} ms, infer)", symbolic, expected,
                 symbolic_ms)
    ok &= _report("imperative (accGetExecutor per op)", imperative, expected, imperative_ms)
    print(f"  {'numpy reference (host CPU)':<34} {reference_ms:8.3f} ms")
    print(f"\ntop class: {int(np.argmax(expected))} (p = {float(expected.max()):.4f})")
    print("demo passed: both modes match the reference" if ok else "demo FAILED")
    return 0 if ok else 1


def _dumps(graph: dict[str, Any]) -> str:
    import json

    return json.dumps(graph)


if __name__ == "__main__":
    sys.exit(main())
