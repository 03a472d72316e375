"""Summaries of output arrays: shape, dtype, min/max/mean, and the top-5
classes of a class vector."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["summarize", "format_summary"]

TOP = 5


def summarize(name: str, array: np.ndarray) -> dict[str, Any]:
    """A JSON-ready summary of one output."""
    info: dict[str, Any] = {"name": name, "shape": list(array.shape), "dtype": str(array.dtype)}
    if array.size:
        values = array.astype(np.float64)
        info.update(min=float(values.min()), max=float(values.max()), mean=float(values.mean()))
    vector = np.squeeze(array)
    if vector.ndim == 1 and vector.size > 1 and np.issubdtype(array.dtype, np.number):
        order = np.argsort(-vector.astype(np.float64), kind="stable")[:TOP]
        info["top5"] = [[int(index), float(vector[index])] for index in order]
    return info


def format_summary(info: dict[str, Any]) -> str:
    """One or two lines for an output's summary."""
    shape = "x".join(str(d) for d in info["shape"]) or "scalar"
    line = f"  {info['name']}: {shape} {info['dtype']}"
    if "min" in info:
        line += f"  min {info['min']:.6g}  max {info['max']:.6g}  mean {info['mean']:.6g}"
    if "top5" in info:
        classes = ", ".join(f"{index} ({value:.4g})" for index, value in info["top5"])
        line += f"\n    top-{len(info['top5'])}: {classes}"
    return line
