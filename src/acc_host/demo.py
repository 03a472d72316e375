"""The main job: load the bundled plugins; run a small CNN through both
execution modes of the proposal on cpu_ref, checked against the host's CPU
path (the numpy operator implementations of acc_host.ops); then run a real
MXNet model on the CPU and on every bundled accelerator, showing what ran
where and how fast, checked against MXNet's own output.

Run with ``python -m acc_host.demo`` (or ``acc-host demo``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import symbol as sym
from .abi.annotate import annotate_symbol
from .abi.loaded_model import LoadedModel
from .abi.operator_executor import run_graph as run_imperative
from .abi.tensor import TensorSpec
from .context import Context, cpu
from .model import load_checkpoint
from .plugins.registry import get_library, libraries
from .symbol import Symbol

__all__ = ["small_cnn", "main"]

RTOL, ATOL = 1e-4, 1e-5


def small_cnn(seed: int = 0, batch: int = 1) -> tuple[Symbol, dict[str, np.ndarray],
                                                      np.ndarray]:
    """A residual CNN using every operator cpu_ref has: (symbol, weights,
    input)."""
    data = sym.Variable("data")
    conv0 = sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv0")
    bn0 = sym.BatchNorm(conv0, fix_gamma=False, eps=1e-5, name="bn0")
    relu0 = sym.Activation(bn0, act_type="relu", name="relu0")
    pool0 = sym.Pooling(relu0, kernel=(3, 3), stride=(2, 2), pool_type="max",
                        pooling_convention="full", name="pool0")
    conv1 = sym.Convolution(pool0, kernel=(3, 3), pad=(1, 1), num_filter=8, num_group=2,
                            name="conv1")
    tanh1 = sym.Activation(conv1, act_type="tanh", name="tanh1")
    add0 = sym.elemwise_add(pool0, tanh1, name="add0")
    pool1 = sym.Pooling(add0, global_pool=True, pool_type="avg", kernel=(1, 1), name="pool1")
    flat = sym.Flatten(pool1, name="flatten0")
    fc = sym.FullyConnected(flat, num_hidden=10, name="fc0")
    net = sym.softmax(fc, name="prob")

    image_shape = (batch, 3, 32, 32)
    arg_shapes, _, aux_shapes = net.infer_shape_partial(data=image_shape)
    rng = np.random.default_rng(seed)
    weights = {name: rng.standard_normal(shape).astype(np.float32)
               for name, shape in zip(net.list_arguments(), arg_shapes) if name != "data"}
    weights.update({name: rng.uniform(0.5, 2.0, shape).astype(np.float32)
                    for name, shape in zip(net.list_auxiliary_states(), aux_shapes)})
    image = rng.standard_normal(image_shape).astype(np.float32)
    return net, weights, image


def _cpu_executor(net: Symbol, weights: dict[str, np.ndarray], image: np.ndarray) -> Any:
    exe = net.simple_bind(cpu(), data=image.shape)
    for name, value in weights.items():
        (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
    return exe


def _median_ms(function: Callable[[], object], repeat: int) -> float:
    """Median wall time of function, which must wait for what it starts
    (forward() only pushes its work to the engine)."""
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


def _find_model(name: str) -> Path | None:
    """tests/models/<name> of the source tree (the demo runs from a
    checkout), looked up from the working directory and from this file."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        folder = root / "tests" / "models" / name
        if (folder / "model-symbol.json").is_file():
            return folder
    return None


def real_model(name: str = "squeezenet1_1", repeat: int = 5) -> bool | None:
    """A real MXNet 1.9.1 checkpoint on the CPU and on every bundled
    accelerator: where each operator ran, latency, and the check against the
    output MXNet itself computed. None when the model files are not found."""
    folder = _find_model(name)
    if folder is None:
        print(f"\n(real-model part skipped: tests/models/{name} is not under the working "
              "directory; run the demo from the acc-host checkout)")
        return None
    sym_, arg_params, aux_params = load_checkpoint(str(folder / "model"), 0)
    image = np.load(folder / "input_0.npy")
    expected = np.load(folder / "expected_0.npy")
    print(f"\n{name} (MXNet 1.9.1 checkpoint, {len(sym_.graph.nodes)} nodes), input "
          f"{image.shape}, median of {repeat} forwards, checked against MXNet's own output:")
    ok = True
    # Every accelerator loaded and usable (an isolated library whose process
    # is gone stays registered, for a reload, but cannot run anything).
    for ctx in [cpu(), *(Context(library.name, 0) for library in libraries()
                         if library.alive)]:
        exe = sym_.simple_bind(ctx, data=image.shape)
        for key, value in {**arg_params, **aux_params}.items():
            (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
        if ctx.library is not None and ctx.library.name == "mlu":
            ctx.configure(reset_stats=1)
        output = exe.forward(data=image)[0].asnumpy()

        def forward(exe: Any = exe) -> None:
            exe.forward(data=image)[0].wait_to_read()

        ms = _median_ms(forward, repeat)
        good = bool(np.allclose(output, expected, rtol=RTOL, atol=ATOL))
        ok &= good
        placement = list(exe.placement().values())
        on_cpu = placement.count("cpu(0)")
        where = "all on cpu(0)" if exe.partition is None else (
            f"{len(placement) - on_cpu}/{len(placement)} operators on {ctx} in "
            f"{len(exe.partition.subgraphs)} subgraph(s)"
            + (f", {on_cpu} on cpu(0)" if on_cpu else ""))
        extra = ""
        if ctx.library is not None and ctx.library.name == "mlu":
            stats = ctx.configure(query="stats")
            runs = repeat + 1
            extra = (f"; simulated {float(stats['sim_time_ns']) / runs / 1e6:.2f} ms and "
                     f"{int(float(stats['launches'])) // runs} launches per forward")
        print(f"  {str(ctx):<11} {ms:8.2f} ms  max |diff| "
              f"{float(np.max(np.abs(output - expected))):.1e}  {'OK' if good else 'MISMATCH'}  "
              f"{where}{extra}")
        exe.close()
    return ok


def main(repeat: int = 20) -> int:
    ctx = Context("cpu_ref", 0)
    library = get_library("cpu_ref")
    print(f"acc-host demo: loaded {library.name!r} from {library.path}")
    print(f"  ABI {library.api_version // 100}.{library.api_version % 100}, "
          f"{library.num_devices} device(s), imperative={library.supports_imperative}, "
          f"version {ctx.configure(query='version')['version']}")

    net, weights, image = small_cnn()
    values = {"data": image, **weights}
    reference = _cpu_executor(net, weights, image)
    expected = reference.forward(data=image)[0].asnumpy()
    annotated = annotate_symbol(net, {"data": image.shape}, weights=weights)
    nodes = annotated["nodes"]
    operators = [i for i, node in enumerate(nodes) if node["op"] != "null"]
    supported = set(library.supported_ops(
        json.dumps(annotated), {"data": TensorSpec.of(image)}, len(nodes), ctx.device_id))

    print(f"\nsmall CNN: {len(nodes)} nodes, {len(operators)} operators, input "
          f"{image.shape}; supportedOps accepts {len(supported)} of {len(operators)}")
    print(f"  {'node':<10} {'operator':<15} {'output shape':<18} runs on")
    for index in operators:
        node = nodes[index]
        where = str(ctx) if index in supported else "cpu(0) (unsupported)"
        shape = str(tuple(json.loads(node["attrs"]["__out_shapes__"])[0]))
        print(f"  {node['name']:<10} {node['op']:<15} {shape:<18} {where}")

    print("\nresults against the host's CPU path (median of "
          f"{repeat} runs, rtol {RTOL}, atol {ATOL}):")
    start = time.perf_counter()
    model = LoadedModel(library, annotated, weights, ctx.device_id)
    compile_ms = (time.perf_counter() - start) * 1e3
    with model:
        symbolic = np.asarray(model.infer({"data": image})["prob_output"])
        symbolic_ms = _median_ms(lambda: model.infer({"data": image}), repeat)
    imperative = run_imperative(library, annotated, values, ctx.device_id)[0]
    imperative_ms = _median_ms(lambda: run_imperative(library, annotated, values), repeat)
    reference_ms = _median_ms(lambda: reference.forward(data=image)[0].wait_to_read(), repeat)
    ok = _report(f"symbolic (loadModel {compile_ms:.2f} ms, infer)", symbolic, expected,
                 symbolic_ms)
    ok &= _report("imperative (accGetExecutor per op)", imperative, expected, imperative_ms)
    print(f"  {'host CPU path (numpy executor)':<34} {reference_ms:8.3f} ms")
    print(f"\ntop class: {int(np.argmax(expected))} (p = {float(expected.max()):.4f})")
    real = real_model(repeat=max(3, repeat // 4))
    ok &= real is not False
    if not ok:
        print("\ndemo FAILED")
    elif real is None:
        print("\ndemo passed: both modes match the CPU path (the real model was not run)")
    else:
        print("\ndemo passed: both modes match the CPU path, and the real model matches MXNet")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
