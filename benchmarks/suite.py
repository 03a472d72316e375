"""acc-host's benchmark suite: every performance figure of the project in one run.

Usage:
    python benchmarks/suite.py [--out docs/benchmarks] [--repeat N] [--quick]
                               [--models NAME ...] [--mxnet-python PATH]

Writes ``suite.json`` (every figure, with the machine and versions),
``suite.md`` (the tables) and ``models.png`` (the model table as a plot) into
--out, and prints the tables as it goes. Sections:

1. Models: each model of tests/models and tests/onnx_models at batch 1 and 8
   (the two ONNX transformers at their fixed batch of 2), with 1 and 2
   threads: acc-host's CPU path (numpy, BLAS limited to the thread count),
   cpu_ref through an executor (what a user pays) and as one loaded model
   (loadModel/infer: the plugin's kernels), mlu_sim (host wall time and the
   simulated card's time), onnxruntime (CPUExecutionProvider,
   intra_op_num_threads = threads) and MXNet 1.9.1 when a side environment
   has it (--mxnet-python, or ACC_HOST_BENCH_MXNET_PYTHON; MXNet models only).
   Medians of --repeat calls, engines measured alternately in blocks within
   one run, each block after at least SETTLE_S seconds of untimed calls
   (onnxruntime's workers spin on for about 50 ms after a run, OpenBLAS's
   for about 200 ms, and take a core from whatever runs next); ratios are
   to onnxruntime in the same run: the ratio of the medians, and paired, the
   median over the rounds of each round's ratio of block medians.
2. Host overhead per forward of a one-operator subgraph (relu of 16 floats on
   cpu_ref): the raw cffi infer() call with prebuilt arguments, LoadedModel,
   a bound executor under both engines (forward and wait; predict, numpy in
   and out), next to onnxruntime's run() and io_binding on a one-node model.
3. Partitioner time for 10k/100k/1M-node graphs.
4. Engine throughput and push-to-done latency, both engines.
5. Compile time on mlu_sim, cold and from the compiled-model cache.
6. The public path per call (benchmarks/public_path.py): the one-operator
   graph through the executor (forward + reading the output, predict),
   Module and the ONNX backend next to onnxruntime's run(), under both
   engines; small imperative operators on the CPU and cpu_ref next to
   MXNet 1.9.1 (when a side environment has it), paired ratios.
7. The PyTorch zoo (ResNet-18/-50, MobileNetV2/V3, EfficientNet-B0, ViT-S/16,
   BERT-base) on cpu_ref through the ONNX backend next to onnxruntime, at
   batch 1 and 8 and 1 and 2 threads (benchmarks/zoo/zoo_vs_onnxruntime.py),
   when benchmarks/zoo/export_torch_zoo.py has exported them (--zoo-repeat;
   0 leaves the section out).
8. Time to first inference of ResNet-50 on cpu_ref from the ONNX file and
   from an MXNet checkpoint, cold and with the compiled-model cache warm,
   next to onnxruntime's, in fresh processes (benchmarks/first_inference.py,
   --first-starts; 0 leaves the section out), when the zoo has the models.

--quick runs a small subset (for the test that keeps this script working);
its figures are not meant to be quoted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import (
    FIXED_BATCH,
    MX_MODELS,
    ONNX_MODELS,
    ROOT,
    TRANSFORMERS,
    BenchModel,
    blocks_median,
    interleaved,
    interleaved_blocks,
    load_model,
    ort_session,
    paired_ratio,
)

import acc_host as mx
from acc_host import engine
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.loaded_model import LoadedModel
from acc_host.errors import InvalidArgumentError

MXNET_ENV = "ACC_HOST_BENCH_MXNET_PYTHON"
# Untimed calls before each block of a model row (bench_common.interleaved).
SETTLE_S = 0.25
ENGINES = ("cpu", "cpu_ref", "cpu_ref_model", "mlu_host", "mlu_sim", "onnxruntime", "mxnet")
LABELS = {"cpu": "acc-host CPU path", "cpu_ref": "cpu_ref (executor)",
          "cpu_ref_model": "cpu_ref (loaded model)", "mlu_host": "mlu_sim host wall",
          "mlu_sim": "mlu_sim simulated", "onnxruntime": "onnxruntime", "mxnet": "MXNet 1.9.1"}


# ---- 1. models -------------------------------------------------------------------------



def _runner(model: BenchModel, ctx: mx.Context) -> Callable[[], list[np.ndarray]]:
    """A forward of model on ctx that returns its outputs as numpy arrays:
    an executor's predict() (forward, then the outputs as numpy: the
    synchronous inference, like onnxruntime's run()) for MXNet models, the
    ONNX backend (which binds an executor and runs its predict()) for ONNX
    models."""
    if model.kind == "onnx":
        import onnx

        from acc_host.onnx.backend import prepare

        rep = prepare(onnx.load(str(model.onnx_path)), accelerator=ctx)
        return lambda: list(rep.run(model.feeds))
    exe = model.symbol.simple_bind(ctx, **{key: value.shape for key, value in model.feeds.items()})
    for key, value in model.params.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    return lambda: exe.predict(**model.feeds)


def _loaded_model(model: BenchModel) -> LoadedModel | None:
    """The whole graph as one cpu_ref model (None if the annotator cannot
    infer its shapes; the weights' own shapes and dtypes are given)."""
    try:
        graph = annotate_symbol(model.symbol, {k: v.shape for k, v in model.feeds.items()},
                                weights=model.params,
                                dtypes={k: v.dtype for k, v in model.feeds.items()})
    except InvalidArgumentError:
        return None
    return LoadedModel(mx.get_library("cpu_ref"), graph, model.params)


def _mxnet_ms(python: str, name: str, batch: int, threads: int, repeat: int) -> float | None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MXNET_ENGINE_TYPE": "NaiveEngine",
           "OPENBLAS_NUM_THREADS": str(threads)}
    folder = ROOT / "tests" / "models" / name
    done = subprocess.run([python, str(Path(__file__).with_name("mxnet_side.py")), str(folder),
                           str(batch), str(repeat)], capture_output=True, text=True, env=env,
                          timeout=600)
    if done.returncode != 0:
        print(f"  MXNet side run failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return float(json.loads(done.stdout.strip().splitlines()[-1])["ms"])


def measure_model(model: BenchModel, threads: int, repeat: int,
                  mxnet_python: str | None) -> dict[str, Any]:
    from threadpoolctl import threadpool_limits

    mx.cpu_ref(0).configure(num_threads=threads)
    mx.mlu(0).configure(num_threads=threads)  # the simulator's host threads (docs/mlu_sim.md)
    session = ort_session(model.onnx_path, threads)
    feeds = {value.name: model.feeds[value.name] for value in session.get_inputs()}
    cpu, cpu_ref, mlu = (_runner(model, ctx) for ctx in (mx.cpu(), mx.cpu_ref(0), mx.mlu(0)))
    loaded = _loaded_model(model)
    expected = session.run(None, feeds)
    mlu_calls = [0]

    def mlu_counted() -> list[np.ndarray]:
        mlu_calls[0] += 1
        return mlu()

    functions: dict[str, Callable[[], object]] = {
        "cpu": cpu, "cpu_ref": cpu_ref, "mlu_host": mlu_counted,
        "onnxruntime": lambda: session.run(None, feeds)}
    if loaded is not None:
        functions["cpu_ref_model"] = lambda: loaded.infer(model.feeds)
    worst = 0.0
    for label in ("cpu", "cpu_ref", "mlu_host"):
        for ours, theirs in zip(functions[label](), expected):  # type: ignore[call-overload]
            scale = float(np.abs(theirs).max()) or 1.0
            worst = max(worst, float(np.abs(ours - theirs).max()) / scale)
    with threadpool_limits(limits=threads, user_api="blas"):
        mx.mlu(0).configure(reset_stats=1)
        mlu_calls[0] = 0
        blocks = interleaved_blocks(functions, repeat, settle_s=SETTLE_S)
    stats = mx.mlu(0).configure(query="stats")
    if loaded is not None:
        loaded.close()
    mx.cpu_ref(0).configure(num_threads=1)
    mx.mlu(0).configure(num_threads=1)
    row: dict[str, Any] = {"model": model.name, "batch": model.batch, "threads": threads,
                           "max_rel_error_vs_onnxruntime": worst}
    row.update({f"{label}_ms": blocks_median(timed) * 1e3 for label, timed in blocks.items()})
    # The simulated card's time per forward (its clock, not the host's);
    # None when nothing of the model ran on the card.
    simulated = float(stats["sim_time_ns"])
    row["mlu_sim_ms"] = simulated / mlu_calls[0] / 1e6 if simulated else None
    if mxnet_python and model.kind == "mxnet":
        row["mxnet_ms"] = _mxnet_ms(mxnet_python, model.name, model.batch, threads, repeat)
    ort_ms = row["onnxruntime_ms"]
    for label in ("cpu", "cpu_ref", "cpu_ref_model", "mlu_host", "mxnet"):
        if row.get(f"{label}_ms"):
            row[f"{label}_vs_ort"] = row[f"{label}_ms"] / ort_ms
    for label in ("cpu_ref", "cpu_ref_model"):
        if label in blocks:
            row[f"{label}_vs_ort_paired"] = paired_ratio(blocks[label], blocks["onnxruntime"])
    row["target_vs_ort"] = 1.5 if model.name in TRANSFORMERS else 1.3
    return row


def models_section(names: list[str], batches: list[int], threads_list: list[int], repeat: int,
                   mxnet_python: str | None) -> list[dict[str, Any]]:
    rows = []
    print("\n## 1. Models: median ms per forward (ratio to onnxruntime, same run)")
    print(_model_header())
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for batch in ([FIXED_BATCH[name]] if name in FIXED_BATCH else batches):
                model = load_model(name, batch, Path(tmp))
                for threads in threads_list:
                    row = measure_model(model, threads, repeat, mxnet_python)
                    rows.append(row)
                    print(_model_line(row), flush=True)
    return rows


def _model_header() -> str:
    columns = ["model", "batch", "threads", *(LABELS[e] for e in ENGINES), "cpu_ref / ort",
               "paired", "target"]
    return "| " + " | ".join(columns) + " |\n|" + "---|" * 3 + "---:|" * (len(columns) - 3)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _ratio_cell(row: dict[str, Any], suffix: str) -> str:
    """cpu_ref through an executor / onnxruntime, the loaded model's in
    parentheses; suffix "_paired": the median of the rounds' ratios."""
    cell = f"{row.get('cpu_ref_vs_ort' + suffix, float('nan')):.2f}"
    if f"cpu_ref_model_vs_ort{suffix}" in row:
        cell += f" ({row['cpu_ref_model_vs_ort' + suffix]:.2f})"
    return cell


def _model_line(row: dict[str, Any]) -> str:
    cells = [row["model"], str(row["batch"]), str(row["threads"]),
             *(_fmt(row.get(f"{engine_}_ms")) for engine_ in ENGINES),
             *(_ratio_cell(row, suffix) for suffix in ("", "_paired")),
             f"{row['target_vs_ort']:.1f}"]
    return "| " + " | ".join(cells) + " |"


# ---- 2. one-op overhead ------------------------------------------------------------------


def overhead_section(repeat: int) -> dict[str, float]:
    import onnx
    from onnx import TensorProto, helper

    library = mx.get_library("cpu_ref")
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    graph = annotate_symbol(relu, {"data": (1, 16)}, weights=[])
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    out = np.empty_like(x)
    model = LoadedModel(library, graph, {})
    model.infer({"data": x}, {"relu_output": out})
    raw_model = LoadedModel(library, graph, {})  # its descriptors are set once, by hand
    raw_model._inputs.set_host_array(0, x)
    raw_model._outputs.set_host_array(0, out, writable=True)
    raw_args = (raw_model._model_id_text, raw_model._in_names.pointer,
                raw_model._out_names.pointer, raw_model._inputs.pointer,
                raw_model._outputs.pointer, 1, 1)
    infer = library.lib.infer

    node = helper.make_node("Relu", ["x"], ["y"])
    onnx_graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 16])])
    onnx_model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", 17)],
                                   ir_version=8)
    session = ort_session(onnx_model.SerializeToString())
    binding = session.io_binding()
    y = np.empty_like(x)
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, y.shape, y.ctypes.data)
    del onnx

    def many(function: Callable[[], object], inner: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(inner):
                function()
        return run

    inner = 200
    figures = {}
    timed = {"raw_cffi": many(lambda: infer(*raw_args), inner),
             "loaded_model": many(lambda: model.infer({"data": x}, {"relu_output": out}), inner),
             "onnxruntime_run": many(lambda: session.run(None, {"x": x}), inner),
             "onnxruntime_io_binding": many(lambda: session.run_with_iobinding(binding), inner)}
    # The executor's own subgraph operator, called as a forward step calls it:
    # input and output in device buffers (cpu_ref keeps its own memory).
    bound = relu.simple_bind(mx.cpu_ref(0), data=(1, 16))
    bound.forward(data=x)[0].wait_to_read()
    (step,) = bound.plan.steps
    (operator,) = bound.subgraphs
    entries = {entry: bound.arg_dict["data"]._storage.device for entry in step.inputs}
    targets = {step.outputs[0]: bound.outputs[0]._storage.device}
    timed["subgraph_operator"] = many(lambda: operator.forward(entries, {}, targets), inner)
    # What the executor's step runs once the model is loaded (the step on
    # fixed buffers: its checks that the buffers and weights are current,
    # then the plugin call with descriptors built once).
    fixed = bound.bound_step(operator)
    assert fixed is not None
    timed["bound_step"] = many(
        lambda: fixed.current() and operator.weights_current() and fixed.infer.run(), inner)
    for kind in ("ThreadedEngine", "NaiveEngine"):
        engine.set_engine_type(kind)
        exe = relu.simple_bind(mx.cpu_ref(0), data=(1, 16))
        timed[f"executor_{kind}"] = many(lambda exe=exe: exe.forward(data=x)[0].wait_to_read(),
                                         inner // 4)
        # The synchronous inference, numpy in and out, as onnxruntime's run():
        # the executor's direct path once the model is loaded.
        sync = relu.simple_bind(mx.cpu_ref(0), data=(1, 16))
        sync.predict(data=x)
        timed[f"executor_predict_{kind}"] = many(lambda exe=sync: exe.predict(data=x), inner // 4)
    # The calls without an engine alternate in one run, so that load from
    # other processes hits them alike (their differences are the figures
    # that matter); each engine's executor is measured with its engine.
    results = interleaved({label: function for label, function in timed.items()
                           if not label.startswith("executor_")}, repeat)
    for label, function in timed.items():
        if label.startswith("executor_"):
            engine.set_engine_type(label.rsplit("_", 1)[1])
            results[label] = interleaved({label: function}, repeat)[label]
    engine.set_engine_type("ThreadedEngine")
    for label, seconds in results.items():
        per_call = inner // 4 if label.startswith("executor_") else inner
        figures[f"{label}_us"] = seconds / per_call * 1e6
    for label in ("loaded_model", "subgraph_operator", "bound_step"):
        figures[f"{label}_above_raw_us"] = figures[f"{label}_us"] - figures["raw_cffi_us"]
    model.close()
    raw_model.close()
    print("\n## 2. One-operator subgraph: median microseconds per forward")
    for key, value in figures.items():
        print(f"  {key:<34}{value:9.2f}")
    return figures



# ---- 3. partitioner, 4. engine, 5. compile cache ----------------------------------------


def partition_section(sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    from partition_scaling import segment, synthetic

    rows = []
    print("\n## 3. Partitioner")
    for size in sizes:
        predecessors, classes = synthetic(size)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            segments = segment(size, predecessors, classes)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        rows.append({"nodes": size, "segments": len(segments), "seconds": seconds,
                     "us_per_node": seconds / size * 1e6})
        print(f"  {size:>9} nodes: {seconds:.3f} s ({seconds / size * 1e6:.2f} us/node)")
    return rows


def engine_section(ops: int) -> dict[str, float]:
    from engine_throughput import latency, throughput

    from acc_host.engine.naive import NaiveEngine
    from acc_host.engine.threaded import ThreadedEngine

    figures = {}
    print("\n## 4. Engine")
    for label, maker in (("naive", NaiveEngine), ("threaded", ThreadedEngine)):
        instance = maker()
        figures[f"{label}_ops_per_s"] = statistics.median(throughput(instance, ops)
                                                          for _ in range(3))
        figures[f"{label}_latency_us"] = latency(instance, max(ops // 10, 100)) * 1e6
        instance.shutdown()
        print(f"  {label:<9}{figures[f'{label}_ops_per_s']:>12,.0f} ops/s"
              f"{figures[f'{label}_latency_us']:>9.1f} us push-to-done")
    return figures


def cache_section(names: list[str], repeat: int) -> list[dict[str, Any]]:
    try:
        from compile_cache import measure as measure_cache
    except ImportError:
        print("\n## 5. mlu_sim compile cache: benchmarks/compile_cache.py is missing")
        return []

    print("\n## 5. mlu_sim compile: cold and from the cache")
    rows = []
    for name in names:
        row = measure_cache(name, repeat)
        rows.append(row)
        print(f"  {name:<26}cold {row['cold_ms']:8.2f} ms  cache {row['cache_ms']:7.2f} ms"
              f" ({row['cold_ms'] / row['cache_ms']:.2f}x), same weights "
              f"{row['cache_same_weights_ms']:.2f} ms "
              f"({row['cold_ms'] / row['cache_same_weights_ms']:.2f}x)")
    return rows


# ---- 6. the public path -------------------------------------------------------------------


def public_path_section(quick: bool, mxnet_python: str | None) -> dict[str, Any]:
    import public_path

    rounds, calls = (3, 20) if quick else (15, 200)
    return public_path.measure(rounds, calls, public_path.mxnet_python(mxnet_python))


def _public_path_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "## 6. Public path", "",
             "Microseconds per call (median over rounds of blocks of calls, the functions "
             "alternating within each round) and the paired ratio to onnxruntime's run() of "
             "the one-node model (benchmarks/public_path.py).", "",
             "| call (relu of 16 floats, cpu_ref) | engine | us | / onnxruntime |",
             "|---|---|---:|---:|"]
    for kind, rows in results["one_op"].items():
        lines += [f"| {name} | {kind} | {row['us']:.2f} | {row['vs_onnxruntime']:.2f} |"
                  for name, row in rows.items()]
    imperative = results["imperative"]
    lines += ["", "Imperative operators on 8x8 float32 arrays, each followed by "
              "wait_to_read(): us per call, paired ratio to MXNet "
              f"{imperative.get('mxnet', '(not measured)')} on its CPU context with the "
              "same engine type.", "",
              "| operator | engine | cpu(0) | cpu_ref(0) | MXNet | cpu / MXNet "
              "| cpu_ref / MXNet |", "|---|---|---:|---:|---:|---:|---:|"]
    for kind in ("ThreadedEngine", "NaiveEngine"):
        for label, row in imperative.get(kind, {}).items():
            mxnet_cells = (f"{row['mxnet']:.2f} | {row['cpu(0)_vs_mxnet']:.2f} | "
                           f"{row['cpu_ref(0)_vs_mxnet']:.2f}") if "mxnet" in row else "- | - | -"
            lines.append(f"| `{label}` | {kind} | {row['cpu(0)']:.2f} | "
                         f"{row['cpu_ref(0)']:.2f} | {mxnet_cells} |")
    return lines


# ---- 7. the PyTorch zoo --------------------------------------------------------------------


def zoo_section(batches: list[int], threads_list: list[int], repeat: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "zoo"))
    import zoo_vs_onnxruntime as zoo

    folder = Path(zoo.__file__).resolve().parent / "models"
    rows: list[dict[str, Any]] = []
    for name in zoo.MODELS:
        if (folder / f"{name}.onnx").exists():
            rows += zoo.measure_model(name, folder, batches, threads_list, repeat, warmup=2)
        else:
            print(f"zoo: {name} not exported (benchmarks/zoo/export_torch_zoo.py)")
    return rows


def _zoo_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## 7. PyTorch zoo", "",
             "Median ms per run through the public ONNX backend on cpu_ref and onnxruntime "
             "(CPUExecutionProvider, intra_op_num_threads = threads), measured interleaved in "
             "blocks (benchmarks/zoo/zoo_vs_onnxruntime.py); target ratio <= 1.15.", "",
             "| model | batch | threads | cpu_ref ms | onnxruntime ms | ratio | paired "
             "| max abs diff |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['batch']} | {r['threads']} | {r['cpu_ref_ms']:.2f} | "
              f"{r['ort_ms']:.2f} | {r['ratio']:.2f} | {r['paired_ratio']:.2f} | "
              f"{r['max_abs_diff']:.1e} |" for r in rows]
    return lines


# ---- 8. first inference -------------------------------------------------------------------


def first_inference_section(starts: int) -> dict[str, Any] | None:
    """benchmarks/first_inference.py in a child process (its own fresh
    processes per start); None where the zoo lacks the models."""
    script = Path(__file__).resolve().parent / "first_inference.py"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "first.json"
        done = subprocess.run([sys.executable, str(script), "--starts", str(starts),
                               "--json", str(out)], check=False)
        if done.returncode != 0 or not out.exists():
            print("first inference: not measured (benchmarks/first_inference.py failed or the "
                  "zoo's ResNet-50 files are missing)")
            return None
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def _first_inference_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "## 8. First inference", "",
             f"ResNet-50, batch 1, cpu_ref: seconds from before the first import to the "
             f"output in numpy, medians of {results['starts']} fresh processes per side, the "
             "sides interleaved start by start (benchmarks/first_inference.py); target "
             "<= 1.5x onnxruntime.", "",
             "| side | first inference s | whole process s | / onnxruntime |",
             "|---|---:|---:|---:|"]
    lines += [f"| {name} | {row['child_s']:.3f} | {row['process_s']:.3f} | "
              f"{row['ratio']:.2f}x |" for name, row in results["sides"].items()]
    if results.get("phases"):
        keys = list(next(iter(results["phases"].values())))
        lines += ["", "Phases (`acc-host run --json`), medians, seconds:", "",
                  "| side | " + " | ".join(key.removesuffix("_s") for key in keys) + " |",
                  "|---|" + "---:|" * len(keys)]
        lines += [f"| {name} | " + " | ".join(f"{row[key]:.3f}" for key in keys) + " |"
                  for name, row in results["phases"].items()]
    return lines


# ---- output ------------------------------------------------------------------------------


def _cpu_model() -> str:
    """The CPU's model name and widest vector extension cpu_ref can use
    (its kernels differ by ISA), from /proc/cpuinfo; "" where it is absent."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    fields = {key.strip(): value.strip() for key, value in
              (line.split(":", 1) for line in text.splitlines()[:40] if ":" in line)}
    name = fields.get("model name", "")
    flags = set(fields.get("flags", "").split())
    isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
    return f"{name} ({isa})" if name else isa


def markdown(results: dict[str, Any]) -> str:
    lines = ["# acc-host benchmark results", "",
             f"Machine: {results['machine']['cpus']} CPUs, {results['machine']['processor']}"
             f"{', ' + results['machine']['cpu'] if results['machine'].get('cpu') else ''}; "
             f"load average at start {results['machine']['load_average']:.2f}; "
             f"repeat {results['repeat']}. Generated by `python benchmarks/suite.py`.", "",
             "## 1. Models", "", "Median ms per forward; last columns: cpu_ref through an "
             "executor / onnxruntime (as one loaded model in parentheses): the ratio of the "
             "medians, then paired (the median over the rounds of each round's ratio, the two "
             "measured back to back), and the target.", "",
             _model_header()]
    lines += [_model_line(row) for row in results["models"]]
    lines += ["", "![model latency](models.png)", "", "## 2. One-operator subgraph overhead",
              "", "| what | us per forward |", "|---|---:|"]
    lines += [f"| {key.removesuffix('_us')} | {value:.2f} |"
              for key, value in results["overhead"].items()]
    lines += ["", "## 3. Partitioner", "", "| nodes | seconds | us/node |", "|---:|---:|---:|"]
    lines += [f"| {row['nodes']} | {row['seconds']:.3f} | {row['us_per_node']:.2f} |"
              for row in results["partition"]]
    lines += ["", "## 4. Engine", "", "| engine | ops/s | push-to-done us |", "|---|---:|---:|"]
    for label in ("naive", "threaded"):
        lines.append(f"| {label} | {results['engine'][f'{label}_ops_per_s']:,.0f} | "
                     f"{results['engine'][f'{label}_latency_us']:.1f} |")
    if results.get("cache"):
        lines += ["", "## 5. mlu_sim compile, cold and from the cache", "",
                  "Loading every accelerator subgraph of the model: cold (loadModel "
                  "compiles), from the cache as a new process (weights hashed), and from "
                  "the cache with weights whose digests are remembered.", "",
                  "| model | subgraphs | cold ms | from cache ms | ratio | same weights ms "
                  "| ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {row['model']} | {row['subgraphs']} | {row['cold_ms']:.2f} | "
                  f"{row['cache_ms']:.2f} | {row['cold_ms'] / row['cache_ms']:.2f}x | "
                  f"{row['cache_same_weights_ms']:.2f} | "
                  f"{row['cold_ms'] / row['cache_same_weights_ms']:.2f}x |"
                  for row in results["cache"]]
    if results.get("public_path"):
        lines += _public_path_lines(results["public_path"])
    if results.get("zoo"):
        lines += _zoo_lines(results["zoo"])
    if results.get("first_inference"):
        lines += _first_inference_lines(results["first_inference"])
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [engine_ for engine_ in ENGINES if engine_ != "cpu_ref_model"]
    one_thread = [row for row in rows if row["threads"] == 1]
    panels = [("batch 1", [r for r in one_thread if r["batch"] in (1, 2)]),
              ("batch 8", [r for r in one_thread if r["batch"] == 8])]
    panels = [(title, panel) for title, panel in panels if panel]
    figure, axes = plt.subplots(len(panels), 1, figsize=(12, 4.2 * len(panels)), squeeze=False)
    width = 0.8 / len(shown)
    for axis, (title, panel) in zip(axes[:, 0], panels):
        for index, engine_ in enumerate(shown):
            values = [row.get(f"{engine_}_ms") or np.nan for row in panel]
            axis.bar(np.arange(len(panel)) + index * width, values, width, label=LABELS[engine_])
        axis.set_xticks(np.arange(len(panel)) + 0.4 - width / 2)
        axis.set_xticklabels([f"{row['model']}\n(batch {row['batch']})" for row in panel],
                             fontsize=8)
        axis.set_yscale("log")
        axis.set_ylabel("ms per forward (log)")
        axis.set_title(f"{title}, 1 thread")
        axis.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=4)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--models", nargs="+", default=[*MX_MODELS, *ONNX_MODELS],
                        choices=[*MX_MODELS, *ONNX_MODELS])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--mxnet-python", default=os.environ.get(MXNET_ENV),
                        help=f"python of a side environment with mxnet==1.9.1 (or ${MXNET_ENV})")
    parser.add_argument("--zoo-repeat", type=int, default=7,
                        help="runs per block of the PyTorch zoo section (0: leave it out)")
    parser.add_argument("--first-starts", type=int, default=5,
                        help="fresh processes per side of the first-inference section "
                             "(0: leave it out)")
    parser.add_argument("--quick", action="store_true",
                        help="a small subset, to check the script works")
    args = parser.parse_args(argv)
    sizes = [10_000, 100_000, 1_000_000]
    engine_ops = 20_000
    cache_models = list(MX_MODELS)
    if args.quick:
        args.models, args.batch, args.threads, args.repeat = (["transformer_enc"], [1], [1],
                                                              min(args.repeat, 3))
        sizes, engine_ops, cache_models = [1_000, 10_000], 1_000, ["transformer_enc"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                    "cpu": _cpu_model(), "python": platform.python_version(),
                    "load_average": load},
        "repeat": args.repeat, "quick": args.quick}
    print(f"acc-host benchmark suite: {os.cpu_count()} CPUs, load average {load:.2f}, "
          f"repeat {args.repeat}")
    results["models"] = models_section(args.models, args.batch, args.threads, args.repeat,
                                       args.mxnet_python)
    results["overhead"] = overhead_section(args.repeat)
    results["partition"] = partition_section(sizes, 3)
    results["engine"] = engine_section(engine_ops)
    results["cache"] = cache_section(cache_models, max(3, args.repeat // 3))
    results["public_path"] = public_path_section(args.quick, args.mxnet_python)
    if args.zoo_repeat > 0 and not args.quick:
        results["zoo"] = zoo_section(args.batch, args.threads, args.zoo_repeat)
    if args.first_starts > 0 and not args.quick:
        results["first_inference"] = first_inference_section(args.first_starts)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "suite.json").write_text(json.dumps(results, indent=1))
    (args.out / "suite.md").write_text(markdown(results))
    plot(results["models"], args.out / "models.png")
    print(f"\nwrote {args.out / 'suite.json'}, suite.md and models.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
