"""benchmarks/public_path.py keeps working: its --quick run checks every
public call against numpy and writes every figure (no timing is asserted:
figures come from full runs, as ratios within one run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT


@pytest.mark.slow
def test_quick_public_path_run_writes_every_figure(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the one-node reference runs on onnxruntime")
    out = tmp_path / "public_path.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "public_path.py"),
                           "--quick", "--no-mxnet", "--json", str(out)], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(out.read_text())
    for kind in ("ThreadedEngine", "NaiveEngine"):
        rows = results["one_op"][kind]
        assert rows["onnxruntime run"]["vs_onnxruntime"] == 1.0
        for name in ("executor forward + asnumpy", "executor predict", "Module predict",
                     "ONNX backend run"):
            assert rows[name]["us"] > 0 and rows[name]["vs_onnxruntime"] > 0, name
        imperative = results["imperative"][kind]
        assert set(imperative) == {"a += 1", "a + b", "relu(a)", "a * 2", "dot(a, b)",
                                   "a.sum()", "a[1:3]"}
        for row in imperative.values():
            assert row["cpu(0)"] > 0 and row["cpu_ref(0)"] > 0
