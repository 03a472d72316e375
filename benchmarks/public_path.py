"""What users run, per call: the public path of a one-operator graph and of
small imperative operators, next to onnxruntime and MXNet 1.9.1 in the
same run.

Usage:
    python benchmarks/public_path.py [--rounds N] [--calls N] [--mxnet-python PATH]
                                     [--json out.json] [--quick] [--section one_op|imperative]
                                     [--clock wall|thread]

1. One-operator graph (relu of 16 floats, cpu_ref), under ThreadedEngine
   and NaiveEngine: ``exe.forward(data=x)`` then ``exe.outputs[0].asnumpy()``,
   the same without new inputs, ``exe.predict(data=x)``, ``Module.forward``
   then reading its output, ``Module.predict`` of one batch, the ONNX
   backend's ``prepare(model).run([x])``, next to onnxruntime's ``run()``
   on the one-node ONNX model. Each figure is the median over rounds of the
   mean of a block of calls; the blocks of every
   function alternate within a round (load from other processes hits them
   alike) and the ratio to onnxruntime is the median over rounds of the
   ratio of the two blocks of that round.
2. Imperative operators on 8x8 float32 arrays (``a += 1; a.wait_to_read()``,
   ``a + b``, ``mx.nd.relu(a)``, ``a * 2``, ``mx.nd.dot(a, b)``,
   ``a.sum()``, ``a[1:3]``, each followed by ``wait_to_read()``), on the CPU
   context and on cpu_ref, under both engines, next to MXNet 1.9.1's CPU
   context under the same engine type (a side environment running
   benchmarks/mxnet_side.py --serve: --mxnet-python, else
   $ACC_HOST_BENCH_MXNET_PYTHON; without one, or with --no-mxnet, the
   operators are timed
   without the reference). Blocks alternate with
   MXNet's as in section 1; ratios are paired the same way.

--quick: few rounds (for the test that keeps this script working); its
figures are not meant to be quoted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import ort_session
from mxnet_side import timed_function

import acc_host as mx
from acc_host import engine

HERE = Path(__file__).resolve().parent
MXNET_ENV = "ACC_HOST_BENCH_MXNET_PYTHON"
ENGINES = ("ThreadedEngine", "NaiveEngine")
SHAPE = (8, 8)
# label -> statement; `mx`, `np`, `a` and `b` (SHAPE float32 arrays of ones
# on the context measured) are defined in both processes.
IMPERATIVE = {
    "a += 1": "a += 1\na.wait_to_read()",
    "a + b": "(a + b).wait_to_read()",
    "relu(a)": "mx.nd.relu(a).wait_to_read()",
    "a * 2": "(a * 2).wait_to_read()",
    "dot(a, b)": "mx.nd.dot(a, b).wait_to_read()",
    "a.sum()": "a.sum().wait_to_read()",
    "a[1:3]": "a[1:3].wait_to_read()",
}
SETUP = (f"a = mx.nd.ones({SHAPE}, ctx=CTX)\nb = mx.nd.ones({SHAPE}, ctx=CTX)\n"
         "a.wait_to_read()\nb.wait_to_read()\n")


def paired(ours: list[float], theirs: list[float]) -> float:
    """The median over rounds of the ratio of the two blocks of a round."""
    return statistics.median(a / b for a, b in zip(ours, theirs))


# Section 1's clock: wall time (time.perf_counter), or with --clock thread
# the calling thread's CPU time (time.thread_time), which leaves out the
# time a shared virtual machine's CPU was taken away (steal), which hits
# blocks at random and made paired wall-time ratios jump between runs.
# Every call of section 1 runs on the calling thread (onnxruntime with one
# intra-op thread, the engines granting the direct path on the caller).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter,
                                          "thread": time.thread_time}
_clock = CLOCKS["wall"]


def alternate(functions: dict[str, Callable[[int], object]], rounds: int,
              calls: int) -> dict[str, list[float]]:
    """Microseconds per call of each function(n) (which makes n calls), one
    block of calls per function per round, alternating within the round."""
    for function in functions.values():
        function(max(1, calls // 4))  # warm-up
    blocks: dict[str, list[float]] = {name: [] for name in functions}
    clock = _clock
    for _ in range(rounds):
        for name, function in functions.items():
            start = clock()
            function(calls)
            blocks[name].append((clock() - start) / calls * 1e6)
    return blocks


def repeated(function: Callable[[], object]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            function()
    return run


# ---- 1. one-operator graph -------------------------------------------------------------


def _relu_onnx() -> Any:
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["data"], ["y"])
    graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info(
        "data", TensorProto.FLOAT, [1, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)



def one_op_functions(x: np.ndarray) -> dict[str, Callable[[], object]]:
    """The public calls of section 1 on cpu_ref (and onnxruntime's), each
    checked against numpy once."""
    from acc_host.onnx.backend import prepare

    ctx = mx.cpu_ref(0)
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    exe = relu.simple_bind(ctx, data=x.shape)
    sync = relu.simple_bind(ctx, data=x.shape)
    module = mx.mod.Module(relu, data_names=["data"], label_names=None, context=ctx)
    module.bind(data_shapes=[("data", x.shape)], for_training=False)
    module.init_params()
    onnx_model = _relu_onnx()
    rep = prepare(onnx_model, accelerator=ctx)
    session = ort_session(onnx_model.SerializeToString())
    batch = mx.io.DataBatch([mx.nd.array(x)])

    def forward_read() -> np.ndarray:
        exe.forward(data=x)
        return exe.outputs[0].asnumpy()

    def forward_again_read() -> np.ndarray:
        exe.forward()
        return exe.outputs[0].asnumpy()

    def module_forward_read() -> np.ndarray:
        module.forward(batch, is_train=False)
        return module.get_outputs()[0].asnumpy()

    functions: dict[str, Callable[[], object]] = {
        "executor forward + asnumpy": forward_read,
        "executor forward (same inputs) + asnumpy": forward_again_read,
        "executor predict": lambda: sync.predict(data=x)[0],
        "Module forward + asnumpy": module_forward_read,
        "Module predict": lambda: module.predict(x).asnumpy(),
        "ONNX backend run": lambda: rep.run([x])[0],
        "onnxruntime run": lambda: session.run(None, {"data": x})[0],
    }
    expected = np.maximum(x, 0)
    for name, function in functions.items():
        function()
        if name == "executor forward (same inputs) + asnumpy":
            continue  # the inputs of the call before
        got = function()
        assert np.array_equal(np.asarray(got), expected), name
    return functions


def one_op_section(rounds: int, calls: int) -> dict[str, Any]:
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    results: dict[str, Any] = {}
    print("\n## One-operator graph on cpu_ref: us per call (ratio to onnxruntime run, paired)")
    for kind in ENGINES:
        engine.set_engine_type(kind)
        functions = one_op_functions(x)
        blocks = alternate({name: repeated(function) for name, function in functions.items()},
                           rounds, calls)
        ort = blocks["onnxruntime run"]
        rows = {name: {"us": statistics.median(timed), "vs_onnxruntime": paired(timed, ort)}
                for name, timed in blocks.items()}
        results[kind] = rows
        print(f"\n{kind}")
        for name, row in rows.items():
            print(f"  {name:<44}{row['us']:8.2f} us  {row['vs_onnxruntime']:5.2f}x")
    engine.set_engine_type("ThreadedEngine")
    return results


# ---- 2. imperative operators ------------------------------------------------------------


class MXNetSide:
    """benchmarks/mxnet_side.py --serve in the side environment."""

    def __init__(self, python: str, engine_type: str) -> None:
        env = {**os.environ, "MXNET_ENGINE_TYPE": engine_type, "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1"}
        self._process = subprocess.Popen(
            [python, str(HERE / "mxnet_side.py"), "--serve"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.version = self._answer()["mxnet"]

    def _answer(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError("the MXNet side process ended")
        return dict(json.loads(line))

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)


def imperative_section(python: str | None, rounds: int, calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    print(f"\n## Imperative operators on {SHAPE} float32: us per call "
          "(ratio to MXNet 1.9.1's CPU context, paired)")
    for kind in ENGINES:
        engine.set_engine_type(kind)
        side = MXNetSide(python, kind) if python else None
        if side is not None:
            side.ask(setup=SETUP.replace("CTX", "mx.cpu()"))
            results["mxnet"] = side.version
        scopes = {}
        for ctx in (mx.cpu(), mx.cpu_ref(0)):
            scope: dict[str, Any] = {"mx": mx, "np": np, "CTX": ctx}
            exec(SETUP, scope)  # noqa: S102  (the benchmark's own code)
            scopes[str(ctx)] = scope
        rows: dict[str, Any] = {}
        for label, stmt in IMPERATIVE.items():
            functions: dict[str, Callable[[int], object]] = {
                where: timed_function(stmt, scope) for where, scope in scopes.items()}
            if side is not None:
                functions["mxnet"] = _side_function(side, stmt)
            blocks = _alternate_with_side(functions, rounds, calls)
            row: dict[str, Any] = {where: statistics.median(timed)
                                   for where, timed in blocks.items()}
            if "mxnet" in blocks:
                for where in scopes:
                    row[f"{where}_vs_mxnet"] = paired(blocks[where], blocks["mxnet"])
            rows[label] = row
        results[kind] = rows
        if side is not None:
            side.close()
        print(f"\n{kind}")
        print(f"  {'operator':<12}{'cpu(0)':>10}{'cpu_ref(0)':>12}{'MXNet':>10}"
              f"{'cpu/MXNet':>11}{'cpu_ref/MXNet':>15}")
        for label, row in rows.items():
            mxnet_us = row.get("mxnet")
            print(f"  {label:<12}{row['cpu(0)']:10.2f}{row['cpu_ref(0)']:12.2f}"
                  + (f"{mxnet_us:10.2f}{row['cpu(0)_vs_mxnet']:10.2f}x"
                     f"{row['cpu_ref(0)_vs_mxnet']:14.2f}x" if mxnet_us else ""))
    engine.set_engine_type("ThreadedEngine")
    return results


def _side_function(side: MXNetSide, stmt: str) -> Callable[[int], object]:
    def run(n: int) -> object:
        return side.ask(stmt=stmt, calls=n)["us"]
    return run


def _alternate_with_side(functions: dict[str, Callable[[int], object]], rounds: int,
                         calls: int) -> dict[str, list[float]]:
    """alternate(), where the MXNet side reports its own time per call
    (the round trip to it is not counted)."""
    for function in functions.values():
        function(max(1, calls // 4))  # warm-up
    blocks: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            if name == "mxnet":
                blocks[name].append(float(function(calls)))  # type: ignore[arg-type]
                continue
            start = time.perf_counter()
            function(calls)
            blocks[name].append((time.perf_counter() - start) / calls * 1e6)
    return blocks


def mxnet_python(given: str | None) -> str | None:
    if given:
        return given
    return os.environ.get(MXNET_ENV) or None


SECTIONS = ("one_op", "imperative")


def measure(rounds: int, calls: int, python: str | None,
            sections: tuple[str, ...] = SECTIONS) -> dict[str, Any]:
    """The sections asked for (both: what benchmarks/suite.py reports)."""
    results: dict[str, Any] = {}
    if "one_op" in sections:
        results["one_op"] = one_op_section(rounds, calls)
    if "imperative" in sections:
        results["imperative"] = imperative_section(python, rounds, max(1, calls // 2))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--mxnet-python", default=None,
                        help=f"python of a side environment with mxnet==1.9.1 (or ${MXNET_ENV})")
    parser.add_argument("--no-mxnet", action="store_true",
                        help="leave MXNet out (the imperative figures without the reference)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="a few rounds, to check it works")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="section 1's clock: wall time, or the calling thread's CPU "
                             "time (steady where a shared VM's steal time hits blocks)")
    parser.add_argument("--section", choices=SECTIONS, action="append",
                        help="only this section (1: one_op, the executor, Module and ONNX "
                             "backend calls; 2: imperative); repeatable; default both")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls = 3, 20
    global _clock
    _clock = CLOCKS[args.clock]
    results = {"cpus": os.cpu_count(), "rounds": args.rounds, "calls": args.calls,
               "clock": args.clock,
               **measure(args.rounds, args.calls,
                         None if args.no_mxnet else mxnet_python(args.mxnet_python),
                         tuple(args.section or SECTIONS))}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
