"""``acc-host run --json`` reports the phases of a first inference."""

from __future__ import annotations

import json

import pytest
from support.paths import MODELS, ONNX_MODELS

from acc_host.cli import main
from acc_host.cli.run_cmd import PHASES

SQUEEZENET = MODELS / "squeezenet1_1"


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["run", *argv, "--repeat", "0", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _check_phases(phases: dict, expected: list[str]) -> None:
    assert list(phases) == [f"{name}_s" for name in expected] + ["total_s"]
    assert all(value >= 0 for value in phases.values())
    assert phases["total_s"] == pytest.approx(sum(v for k, v in phases.items() if k != "total_s"))
    assert phases["import_s"] > 0 and phases["read_s"] > 0 and phases["load_model_s"] > 0


def test_checkpoint_phases(capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXNET_ACC_CACHE_DIR", raising=False)  # compiled, not from a cache
    report = _report(capsys, str(SQUEEZENET / "model"), "--acc", "cpu_ref",
                     "--shape", "data=1,3,224,224")
    _check_phases(report["phases"], [name for name in PHASES if name != "translate"])
    # the bind's share: its shape inference and partition, and the rest
    phases = report["phases"]
    assert phases["shape_inference_s"] + phases["partition_s"] + phases["bind_other_s"] == \
        pytest.approx(report["bind_s"], rel=0.2, abs=0.05)
    assert report["compiled_from"] == ["compiled"]


def test_onnx_phases(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnx")
    model = ONNX_MODELS / "dwsep_small.onnx"
    report = _report(capsys, str(model), "--acc", "cpu_ref", "--batch", "1")
    _check_phases(report["phases"], list(PHASES))
    assert report["phases"]["translate_s"] > 0


def test_cpu_path_has_no_model_to_load(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(capsys, str(SQUEEZENET / "model"), "--shape", "data=1,3,224,224")
    assert report["phases"]["load_model_s"] == 0
    assert report["phases"]["partition_s"] < 0.05  # (nothing asked of a plugin)


def test_phases_nest_into_the_outer_one_and_cost_nothing_unrecorded() -> None:
    import time

    from acc_host import phases

    with phases.phase("read"):  # no recording: nothing kept anywhere
        pass
    with phases.recording() as times:
        with phases.phase("translate"):
            with phases.phase("shape_inference"):  # inside translate: translate's
                time.sleep(0.01)
        with phases.phase("read"):
            pass
        with phases.phase("read"):
            pass
    assert set(times) == {"translate", "read"}
    assert times["translate"] >= 0.01
    with phases.recording() as again:
        pass
    assert again == {}
