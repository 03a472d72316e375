"""mlu_sim's int8 mode against fp32 on the shared MXNet models.

Usage: python benchmarks/mlu_int8_accuracy.py [--card N] [--json out.json]

Each model of tests/models runs with ``simple_bind(mx.mlu(N), ...)`` (MLU
operators on the simulated card, the rest on the CPU) twice: with the card's
``precision=fp32`` (the default) and ``precision=int8`` (convolution and
fully connected layers in int8, see docs/mlu_sim.md, "int8 mode"). Printed
per model and precision, against MXNet 1.9.1's own fp32 output
(``expected_0.npy``):

* max abs error and relative error ``||y - y_mxnet|| / ||y_mxnet||``;
* top-1 agreement (argmax over the last axis: the class for the classifiers,
  per token for the transformer encoders' 128 features), top-5 overlap;
* simulated time of one forward on the card (``sim_time_ns``), DRAM bytes,
  and the programs' constant bytes (``model_info`` ``const_bytes``) with the
  number of kernels compiled to int8.
The simulator is deterministic: the figures repeat exactly from run to run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import acc_host as mx

MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"
NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]


def model_infos(exe: Any, ctx: Any) -> dict[str, int]:
    """model_info summed over the executor's MLU subgraphs' loaded models."""
    total: dict[str, int] = {}
    for subgraph in exe.subgraphs:
        model = subgraph.model
        if model is None:
            continue
        for key, value in ctx.configure(model_info=model.model_id).items():
            total[key] = total.get(key, 0) + int(value)
    return total


def run(name: str, precision: str, card: int) -> dict[str, Any]:
    folder = MODELS / name
    data = np.load(folder / "input_0.npy")
    expected = np.load(folder / "expected_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    ctx = mx.mlu(card)
    ctx.configure(precision=precision)
    try:
        exe = sym.simple_bind(ctx, data=data.shape)
        for key, value in {**arg_params, **aux_params}.items():
            (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
        exe.forward(data=data)  # loads and compiles
        ctx.configure(reset_stats=1)
        output = exe.forward(data=data)[0].asnumpy()
        stats = ctx.configure(query="stats")
        info = model_infos(exe, ctx)
        exe.close()
    finally:
        ctx.configure(precision="fp32")
    return {"output": output, "expected": expected, "sim_time_ns": float(stats["sim_time_ns"]),
            "dram_bytes": int(stats["dram_bytes"]), "const_bytes": info.get("const_bytes", 0),
            "int8_kernels": info.get("int8_kernels", 0), "kernels": info.get("kernels", 0)}


def compare(output: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    out = output.reshape(-1, output.shape[-1]).astype(np.float64)
    ref = reference.reshape(-1, reference.shape[-1]).astype(np.float64)
    top5 = [len(set(np.argsort(-o)[:5]) & set(np.argsort(-r)[:5])) / 5 for o, r in zip(out, ref)]
    return {"max_abs": float(np.abs(out - ref).max()),
            "rel_norm": float(np.linalg.norm(out - ref) / np.linalg.norm(ref)),
            "top1": float(np.mean(out.argmax(-1) == ref.argmax(-1))),
            "top5": float(np.mean(top5))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("models", nargs="*", default=NAMES)
    args = parser.parse_args()
    rows = []
    header = (f"{'model':26} {'prec':5} {'max abs err':>11} {'rel err':>9} {'top-1':>6} "
              f"{'top-5':>6} {'sim us':>8} {'DRAM MB':>8} {'const KB':>9} {'int8 k':>7}")
    print(header)
    print("-" * len(header))
    for name in args.models:
        results = {precision: run(name, precision, args.card) for precision in ("fp32", "int8")}
        for precision, r in results.items():
            row = {"model": name, "precision": precision, **compare(r["output"], r["expected"]),
                   **{key: r[key] for key in ("sim_time_ns", "dram_bytes", "const_bytes",
                                               "int8_kernels", "kernels")}}
            if precision == "int8":
                row["vs_fp32"] = compare(r["output"], results["fp32"]["output"])
            rows.append(row)
            print(f"{name:26} {precision:5} {row['max_abs']:11.3g} {row['rel_norm']:9.3g} "
                  f"{row['top1']:6.3f} {row['top5']:6.3f} {row['sim_time_ns'] / 1e3:8.1f} "
                  f"{row['dram_bytes'] / 1e6:8.2f} {row['const_bytes'] / 1e3:9.1f} "
                  f"{row['int8_kernels']:>3}/{row['kernels']:<3}")
        f32, i8 = results["fp32"], results["int8"]
        print(f"{'':26} int8/fp32: sim time x{i8['sim_time_ns'] / f32['sim_time_ns']:.3f}, "
              f"DRAM bytes x{i8['dram_bytes'] / f32['dram_bytes']:.3f}, "
              f"const bytes x{i8['const_bytes'] / max(f32['const_bytes'], 1):.3f}; "
              f"int8 vs fp32 output: rel err {rows[-1]['vs_fp32']['rel_norm']:.3g}, "
              f"top-1 {rows[-1]['vs_fp32']['top1']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
