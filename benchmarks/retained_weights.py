"""Host memory saved by retained weights (mxnet_acc.h retainsWeights, ABI
1.1): cpu_ref reading the host's weight buffers in place against a build
of the same cpu_ref that copies them (-DCR_RETAIN_WEIGHTS=0).

Usage: python benchmarks/retained_weights.py [--models NAME ...] [--repeat N]
       [--json out.json]

Each model of /work/shared/models (default: the largest, mobilenetv2_1_0)
is bound on the accelerator and run once in a fresh child process per
build, repeat times in turn; the child reports its resident memory (VmRSS)
after the first forward, the bytes of its weights and the bytes the plugin
retains (LoadedModel.retained_bytes). The saving is the median of the
copying build's RSS minus the retaining build's, next to the weight bytes:
the copy of every weight the copying build holds (packed convolution
weights and folded BatchNorms are made by both).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = Path(os.environ.get("ACC_HOST_SHARED_MODELS", "/work/shared/models"))
LOCAL_MODELS = ROOT / "tests" / "models"


def model_dir(name: str) -> Path:
    """The shared model's folder, else the tests' copy."""
    for base in (SHARED_MODELS, LOCAL_MODELS):
        if (base / name / "model-symbol.json").is_file():
            return base / name
    raise FileNotFoundError(f"model {name} is neither in {SHARED_MODELS} nor {LOCAL_MODELS}")


def build_copying_cpu_ref(out_dir: Path) -> Path:
    """cpu_ref built with -DCR_RETAIN_WEIGHTS=0 under the name cpu_ref_copy."""
    sys.path.insert(0, str(ROOT))
    import build_plugins

    source = build_plugins.PLUGINS_DIR / "cpu_ref"
    sources = [*build_plugins.plugin_sources(source), *sorted(build_plugins.COMMON_DIR.glob("*.c"))]
    return build_plugins.compile_library(
        sources, out_dir / build_plugins.library_name("cpu_ref_copy"),
        extra_flags=["-DCR_RETAIN_WEIGHTS=0", "-DCR_NAME=\"cpu_ref_copy\""],
        include_dirs=build_plugins.plugin_include_dirs(source))


def _rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(library: str | None, name: str) -> dict[str, Any]:
    """Binds model name on library (None: the bundled cpu_ref), runs one
    forward, and reports the memory."""
    import gc

    import numpy as np

    import acc_host as mx
    from acc_host.plugins import registry

    ctx = mx.cpu_ref(0) if library is None else mx.Context(registry.register(library).name, 0)
    folder = model_dir(name)
    symbol, args, aux = mx.model.load_checkpoint(str(folder / "model"), 0)
    data = np.load(folder / "input_0.npy")
    exe = symbol.simple_bind(ctx, data=data.shape)
    exe.copy_params_from(args, aux)
    del args, aux
    out = exe.forward(data=data)[0].asnumpy()
    gc.collect()
    weights = sum(array.size * array.dtype.itemsize for key, array in
                  {**exe.arg_dict, **exe.aux_dict}.items() if key != "data")
    retained = sum(op.model.retained_bytes for op in exe.subgraphs if op.model is not None)
    expected = np.load(folder / "expected_0.npy")
    return {"rss": _rss_bytes(), "weights": weights, "retained": retained,
            "max_abs_error": float(np.max(np.abs(out - expected)))}


def _child_environment() -> dict[str, str]:
    """This environment without the settings that change how a model is
    loaded (the compile cache, checked outputs, isolation, cpu_ref's kernel
    choice): both builds are measured on the plain load path."""
    return {**{key: value for key, value in os.environ.items()
               if key == "MXNET_ACC_PROBE_CACHE"
               or not key.startswith(("MXNET_ACC_", "ACC_HOST_", "ACC_CPU_REF_"))},
            "PYTHONPATH": str(ROOT / "src")}


def measure(library: str | None, name: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", library or "", name],
                          capture_output=True, text=True, check=True, timeout=600,
                          env=_child_environment())
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(name: str, repeat: int, copying: Path) -> dict[str, Any]:
    """Median RSS of each build over repeat alternated child runs."""
    runs: dict[str, list[dict[str, Any]]] = {"retaining": [], "copying": []}
    for _ in range(repeat):
        runs["retaining"].append(measure(None, name))
        runs["copying"].append(measure(str(copying), name))
    rss = {build: statistics.median(run["rss"] for run in results)
           for build, results in runs.items()}
    first = runs["retaining"][0]
    return {"model": name, "weights_bytes": first["weights"],
            "retained_bytes": first["retained"],
            "copying_retained_bytes": runs["copying"][0]["retained"],
            "rss_retaining": rss["retaining"], "rss_copying": rss["copying"],
            "saved_bytes": rss["copying"] - rss["retaining"],
            "max_abs_error": max(run["max_abs_error"] for results in runs.values()
                                 for run in results), "repeat": repeat}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mobilenetv2_1_0"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0] or None, args.child[1])))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        copying = build_copying_cpu_ref(Path(scratch))
        results = [compare(name, args.repeat, copying) for name in args.models]
    for result in results:
        mib = 1 << 20
        print(f"{result['model']}: weights {result['weights_bytes'] / mib:.2f} MiB, retained "
              f"{result['retained_bytes'] / mib:.2f} MiB; RSS after the first forward "
              f"{result['rss_copying'] / mib:.1f} MiB copying, {result['rss_retaining'] / mib:.1f} "
              f"MiB retaining: {result['saved_bytes'] / mib:.2f} MiB saved (median of "
              f"{result['repeat']})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
