"""Comparing a plugin's array with the one it should equal.

One rule for every tool that judges a plugin's numbers (the conformance
kit against numpy references, differential checks against the CPU path,
trace replay against the recording): element by element,

    |got - want| <= rtol * |want| + atol * max(scale_floor, max |want|)

over the finite values of want, NaN matching NaN; integer and boolean arrays
must be equal. Each caller picks its tolerances (the kit's one-operator
graphs are tighter than a whole subgraph's accumulated rounding; a replay
is exact).
"""

from __future__ import annotations

import numpy as np

__all__ = ["mismatch"]


def mismatch(got: np.ndarray, want: np.ndarray, rtol: float = 0.0, atol: float = 0.0,
             scale_floor: float = 0.0) -> str | None:
    """None when got matches want (same shape and dtype) under the rule
    above, else a description: how many elements are off, the largest
    absolute difference and where, and the tolerance."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    if want.dtype.kind in "iub":
        bad = np.asarray(got != want).ravel()
        a, b = got.ravel().astype(np.float64), want.ravel().astype(np.float64)
        error = np.abs(a - b)
        allowed = 0.0
    else:
        a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
        with np.errstate(invalid="ignore"):  # Inf - Inf: NaN, judged just below
            error = np.abs(a - b)
        error[np.isnan(a) & np.isnan(b)] = 0.0
        error[np.isnan(error)] = np.inf
        finite = np.abs(b[np.isfinite(b)])
        allowed = atol * max(scale_floor, float(finite.max()) if finite.size else 0.0)
        bad = error > rtol * np.abs(b) + allowed
    if not bad.any():
        return None
    worst = int(np.argmax(np.where(bad, error, -1.0)))
    return (f"{int(bad.sum())} of {b.size} elements off; largest absolute difference "
            f"{error[worst]:.3g} at flat index {worst} ({a[worst]:.6g} against "
            f"{b[worst]:.6g}); rtol {rtol:g}, atol {allowed:.3g}")
