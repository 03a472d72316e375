"""benchmarks/suite.py keeps working: its --quick run writes every section
(no timing is asserted: figures come from full runs on a quiet machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT


@pytest.mark.slow
def test_quick_suite_writes_json_markdown_and_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs matplotlib (the bench extra)")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite.py"), "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads((tmp_path / "suite.json").read_text())
    (row,) = results["models"]
    assert row["model"] == "transformer_enc" and row["max_rel_error_vs_onnxruntime"] < 1e-3
    for key in ("cpu_ms", "cpu_ref_ms", "cpu_ref_model_ms", "mlu_host_ms", "mlu_sim_ms",
                "onnxruntime_ms"):
        assert row[key] > 0, key
    overhead = results["overhead"]
    assert 0 < overhead["raw_cffi_us"] < overhead["loaded_model_us"]
    assert overhead["raw_cffi_us"] < overhead["bound_step_us"]
    for kind in ("ThreadedEngine", "NaiveEngine"):
        assert overhead[f"executor_predict_{kind}_us"] > overhead["raw_cffi_us"]
    assert [entry["nodes"] for entry in results["partition"]] == [1_000, 10_000]
    assert results["engine"]["naive_ops_per_s"] > 0
    assert results["cache"] and results["cache"][0]["cold_ms"] > 0
    public = results["public_path"]["one_op"]
    for kind in ("ThreadedEngine", "NaiveEngine"):
        assert public[kind]["executor forward + asnumpy"]["us"] > 0
    markdown = (tmp_path / "suite.md").read_text()
    assert "| transformer_enc | 1 | 1 |" in markdown and "models.png" in markdown
    assert "## 6. Public path" in markdown
    assert (tmp_path / "models.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
