"""Loading the accelerator subgraphs of the shared models on mlu_sim: a cold
compile versus the compiled-model cache (MXNET_ACC_CACHE_DIR), with where
the time goes on both paths.

Usage: python benchmarks/compile_cache.py [--repeat N] [--models NAME ...]
       [--no-c] [--json out.json]

Each model of tests/models is bound on mx.mlu(0) and run once; then, per
repeat and in turn (so that the ratios compare figures of the same moment
on a shared machine), every accelerator subgraph is loaded again exactly as
SubgraphOperator._load does it (``load_seconds``), summed over the model's
subgraphs:

* cold: no cache, loadModel() compiles;
* cache, first load: the whole import path (the key, weights digest
  included, the entry's checks, import_model, adopting the model) with the
  remembered weight digests forgotten, as in a fresh process;
* cache, same weights: the same with the digests remembered (binding or
  reloading NDArrays whose versions did not change).

The breakdown (medians, summed over subgraphs) times the parts of the cache
path separately: the graph JSON and its SHA-256, copying device weights to
the host, the weights digest (SHA-256 per 1 MiB chunk in threads; the
remembered one; a single serial SHA-256 as the cache did before), the
entry's checks (metadata, size, last bytes; the whole-file SHA-256 it did
before), the plugin's import_model and adopting the model; and on the
plugin's side loadModel versus import_model. Unless --no-c, it also builds
benchmarks/c/bench_model_file.c with the plugins' release flags and times,
inside the plugin, reading a model file, its XXH64 checksum (and the
byte-wise FNV-1a of format version 2), the checked load, the whole import
and a cold loadModel of the same graph and weights. Every figure is a median
over --repeat runs, in milliseconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import acc_host as mx  # noqa: E402
import build_plugins  # noqa: E402
from acc_host.abi.loaded_model import LoadedModel  # noqa: E402
from acc_host.runtime import model_cache  # noqa: E402
from acc_host.runtime.model_cache import ENV_VAR, ModelCache  # noqa: E402
from acc_host.runtime.subgraph import to_host  # noqa: E402

MODELS = ROOT / "tests" / "models"
SHARED = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]
C_SOURCES = ["benchmarks/c/bench_model_file.c", *sorted(
    str(path.relative_to(ROOT)) for directory in ("plugins/mlu_sim", "plugins/common")
    for path in (ROOT / directory).glob("*.c"))]


def build_c(out_dir: Path) -> Path:
    flags = [f for f in build_plugins.BASE_FLAGS if f not in ("-shared", "-fPIC")]
    flags += build_plugins.RELEASE_FLAGS
    binary = out_dir / "bench_model_file"
    command = [build_plugins.compiler(), *flags, *(f"-I{ROOT / d}" for d in
                                                  ("include", "plugins/common", "plugins/mlu_sim")),
               *(str(ROOT / s) for s in C_SOURCES), "-o", str(binary), "-lm"]
    subprocess.run(command, check=True)
    return binary


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def bind(name: str):
    folder = MODELS / name
    image = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    exe = sym.simple_bind(mx.mlu(0), data=image.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    exe.forward(is_train=False, data=image)
    operators = exe.subgraphs
    return exe, operators, {**exe.arg_dict, **exe.aux_dict}


def load_all(operators, weights, cache_dir: str | None, forget_digests: bool,
             expected: str | None = None) -> float:
    """Reloads every subgraph as SubgraphOperator does; the summed load_seconds."""
    if cache_dir is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = cache_dir
        # The cost records (runtime/cache_costs.py) would send a model whose
        # cached load was slower than its compile to the compiler: this
        # benchmark measures both paths, so it forgets them.
        for record in Path(cache_dir).glob("*.cost"):
            record.unlink()
    total = 0.0
    for op in operators:
        op.close()
        if forget_digests:
            model_cache._memo.clear()
        op._load(weights)
        want = expected or ("compiled" if cache_dir is None else "cache")
        assert op.load_source == want, (op.load_source, want)
        total += op.load_seconds
    return total


def load_times(operators, weights, directory: str, repeat: int) -> dict[str, float]:
    """Median ms to load every subgraph: cold, from the cache as a new
    process would (digests forgotten), from the cache with the same weights."""
    load_all(operators, weights, directory, True, "compiled")  # compiles, exports
    runs: dict[str, list[float]] = {"cold": [], "cache_first": [], "cache_same": []}
    for _ in range(repeat):
        runs["cold"].append(load_all(operators, weights, None, False))
        runs["cache_first"].append(load_all(operators, weights, directory, True))
        runs["cache_same"].append(load_all(operators, weights, directory, False))
    os.environ.pop(ENV_VAR, None)
    return {key: 1e3 * statistics.median(values) for key, values in runs.items()}


def measure(name: str, repeat: int) -> dict[str, float]:
    """The load times of one shared model (for benchmarks/suite.py)."""
    exe, operators, weights = bind(name)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cache-") as directory:
            ms = load_times(operators, weights, directory, repeat)
    finally:
        exe.close()
    return {"model": name, "subgraphs": len(operators), "cold_ms": ms["cold"],
            "cache_ms": ms["cache_first"], "cache_same_weights_ms": ms["cache_same"]}


def breakdown(operators, weights, cache: ModelCache, repeat: int) -> dict[str, float]:
    parts: dict[str, float] = {}
    for op in operators:
        for key, value in breakdown_one(op, weights, cache, repeat).items():
            parts[key] = parts.get(key, 0.0) + value
    return parts


def breakdown_one(op, weights, cache: ModelCache, repeat: int) -> dict[str, float]:
    library = mx.get_library("mlu")
    values = {name: op._weight_value(weights[name]) for name in op.spec.weights}
    host = {name: to_host(value) for name, value in values.items()}
    arrays = {name: weights[name] for name in values}
    graph_json = json.dumps(op.spec.graph, sort_keys=True)
    entry = cache.entry(library, graph_json, host, op.dev_id)
    assert cache.valid(entry), "the cache holds no entry for this subgraph"
    parts = {"weights_mb": sum(array.nbytes for array in host.values()) / 1e6,
             "file_mb": entry.model_path.stat().st_size / 1e6}
    parts["graph_json"] = median_ms(lambda: hashlib.sha256(
        json.dumps(op.spec.graph, sort_keys=True).encode()).hexdigest(), repeat)
    parts["to_host"] = median_ms(lambda: {n: to_host(v) for n, v in values.items()}, repeat)

    def digest_first():
        model_cache._memo.clear()
        model_cache._weights_digest(host, arrays)

    parts["digest_threads"] = median_ms(digest_first, repeat)
    model_cache._weights_digest(host, arrays)
    parts["digest_remembered"] = median_ms(lambda: model_cache._weights_digest(host, arrays),
                                           repeat)

    def digest_serial():  # the previous scheme: one SHA-256 over everything
        digest = hashlib.sha256()
        for name in sorted(host):
            digest.update(np.ascontiguousarray(host[name]).data.cast("B"))
        digest.hexdigest()

    parts["digest_serial_before"] = median_ms(digest_serial, repeat)
    parts["entry_checks"] = median_ms(lambda: cache.valid(entry), repeat)
    parts["file_sha256_before"] = median_ms(
        lambda: hashlib.sha256(entry.model_path.read_bytes()).hexdigest(), repeat)
    imported, adopted = [], []
    for _ in range(repeat):
        model_id = LoadedModel.new_id()
        start = time.perf_counter()
        library.configure(op.dev_id, {"import_model": model_id, "path": str(entry.model_path)})
        middle = time.perf_counter()
        model = LoadedModel.adopt(library, op.spec.graph, model_id, op.dev_id)
        adopted.append(time.perf_counter() - middle)
        imported.append(middle - start)
        model.close()
    parts["import_model"] = 1e3 * statistics.median(imported)
    parts["adopt"] = 1e3 * statistics.median(adopted)
    compiled = []
    for _ in range(repeat):  # loadModel alone, as import_model above (unloading not timed)
        start = time.perf_counter()
        model = LoadedModel(library, op.spec.graph, values, op.dev_id)
        compiled.append(time.perf_counter() - start)
        model.close()
    parts["loadmodel"] = 1e3 * statistics.median(compiled)
    return parts


def c_breakdown(binary: Path, operators, folder: Path, repeat: int) -> dict[str, float]:
    library = mx.get_library("mlu")
    parts: dict[str, float] = {}
    for index, op in enumerate(operators):
        path = folder / f"subgraph{index}.model"
        library.configure(op.dev_id, {"export_model": op.model.model_id, "path": str(path)})
        out = subprocess.run([str(binary), str(path), str(repeat)], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            key, value = line.split()
            if key not in ("bytes", "checksums"):
                parts[key] = parts.get(key, 0.0) + float(value)
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--models", nargs="+", default=SHARED)
    parser.add_argument("--no-c", action="store_true", help="skip the in-plugin breakdown")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    binary = None if args.no_c else build_c(Path(tempfile.mkdtemp(prefix="bench-cache-")))
    results = {}
    for name in args.models:
        exe, operators, weights = bind(name)
        with tempfile.TemporaryDirectory(prefix="bench-cache-") as directory:
            ms = load_times(operators, weights, directory, args.repeat)
            os.environ[ENV_VAR] = directory  # the breakdown reads through the cache
            parts = breakdown(operators, weights, ModelCache(directory), args.repeat)
            c_parts = (c_breakdown(binary, operators, Path(directory), args.repeat)
                       if binary is not None else {})
        os.environ.pop(ENV_VAR, None)
        exe.close()
        results[name] = {"subgraphs": len(operators), **ms,
                         "ratio_first": ms["cold"] / ms["cache_first"],
                         "ratio_same": ms["cold"] / ms["cache_same"],
                         "ratio_plugin": parts["loadmodel"] / parts["import_model"],
                         "breakdown": parts, "plugin_c": c_parts}
        if c_parts:
            results[name]["ratio_plugin_c"] = c_parts["loadmodel"] / c_parts["import"]
        print_model(name, results[name])
    if args.json:
        args.json.write_text(json.dumps({"repeat": args.repeat, "models": results}, indent=1))


def print_model(name: str, r: dict) -> None:
    b, c = r["breakdown"], r["plugin_c"]
    print(f"\n{name}: {r['subgraphs']} subgraph(s), {b['weights_mb']:.2f} MB of weights, "
          f"{b['file_mb']:.2f} MB of model files")
    print(f"  host load (SubgraphOperator): cold {r['cold']:.3f} ms | cache, first load "
          f"{r['cache_first']:.3f} ms (x{r['ratio_first']:.2f}) | cache, same weights "
          f"{r['cache_same']:.3f} ms (x{r['ratio_same']:.2f})")
    print(f"  cache path: graph JSON {b['graph_json']:.3f} | device->host {b['to_host']:.3f} | "
          f"weights digest {b['digest_threads']:.3f} (remembered {b['digest_remembered']:.3f}; "
          f"serial SHA-256 before {b['digest_serial_before']:.3f}) | entry checks "
          f"{b['entry_checks']:.3f} (file SHA-256 before {b['file_sha256_before']:.3f}) | "
          f"import_model {b['import_model']:.3f} | adopt {b['adopt']:.3f}")
    print(f"  plugin through the ABI: loadModel {b['loadmodel']:.3f} ms, import_model "
          f"{b['import_model']:.3f} ms (x{r['ratio_plugin']:.2f})")
    if c:
        print(f"  inside the plugin (C): read {c['read']:.3f} | XXH64 {c['xxh64']:.3f} (FNV-1a "
              f"{c['fnv1a']:.3f}) | checked load {c['load']:.3f} | import {c['import']:.3f} "
              f"(parse, verify, rebuild {c['import'] - c['load']:.3f}) | loadModel "
              f"{c['loadmodel']:.3f} (x{r['ratio_plugin_c']:.2f})")


if __name__ == "__main__":
    main()
