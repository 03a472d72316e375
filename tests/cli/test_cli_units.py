"""The pieces of the ``acc-host`` command in process: help texts, exit
codes, the check command against a stand-in conformance kit, the progress
bar, output summaries, input parsing, and Partition.explain()."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import acc_host as mx
from acc_host.cli import main
from acc_host.cli.errors import USAGE, CliError
from acc_host.cli.models import parse_shapes, read_inputs
from acc_host.cli.progress import Progress, enabled
from acc_host.cli.summary import format_summary, summarize
from acc_host.partition.offload import MIN_SIZE, NOT_PAYING, KeptOnCpu

COMMANDS = ("list", "inspect", "run", "partition", "check", "demo")


# ---- help, version, exit codes ---------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: acc-host {command}")
    assert len(out.split("\n\n")[1]) > 100  # a description, not just the usage line


def test_version_and_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"acc-host {mx.__version__}"
    assert main(["frobnicate"]) == USAGE
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_errors_are_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "nosuchacc"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("acc-host: error: no accelerator called 'nosuchacc'")
    assert main(["inspect", "mlu", "--dtypes", "float32,notatype"]) == USAGE
    assert "'notatype' is not a dtype" in capsys.readouterr().err


# ---- check, with a stand-in for acc_host.conformance --------------------------------------------


class _Report:
    def __init__(self, passed: bool, path: str, devices: Any) -> None:
        self.passed, self.path, self.devices = passed, path, devices

    def format_text(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.path} devices={self.devices}"

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "path": self.path}


@pytest.mark.parametrize("passed, code", [(True, 0), (False, 1)])
def test_check_reports_the_kit_and_exits_by_its_verdict(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], passed: bool,
        code: int) -> None:
    kit = types.ModuleType("acc_host.conformance")
    kit.check_library = lambda path, devices=None: _Report(passed, path, devices)  # type: ignore
    monkeypatch.setitem(sys.modules, "acc_host.conformance", kit)
    assert main(["check", "cpu_ref", "--device", "0"]) == code
    out = capsys.readouterr().out
    assert out.startswith("PASS " if passed else "FAIL ")
    assert mx.get_library("cpu_ref").path in out and "devices=[0]" in out
    assert main(["check", "cpu_ref", "--json"]) == code
    assert json.loads(capsys.readouterr().out)["passed"] is passed


def test_check_without_the_kit_exits_3(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "acc_host.conformance", None)  # import fails
    assert main(["check", "cpu_ref"]) == 3
    assert "conformance kit (acc_host.conformance) is not installed" in capsys.readouterr().err


# ---- progress bar, summaries, arguments ---------------------------------------------------


def test_the_progress_bar_draws_only_when_asked() -> None:
    stream = io.StringIO()
    assert enabled(None, stream) is False and enabled(True, stream) is True
    with Progress("compiling", 4, show=True, stream=stream) as bar:
        bar.advance()
        bar.advance(3, label="running")
    text = stream.getvalue()
    assert "\rcompiling [" + "." * 28 + "] 0/4" in text
    assert "\rrunning [" + "#" * 28 + "] 4/4" in text and text.endswith("\n")
    silent = io.StringIO()
    with Progress("x", 2, show=False, stream=silent) as bar:
        bar.advance()
    assert silent.getvalue() == ""


def test_summaries() -> None:
    scores = np.zeros((1, 1000), np.float32)
    scores[0, [7, 3, 999, 5, 42, 1]] = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    info = summarize("prob", scores)
    assert info["top5"] == [[7, pytest.approx(0.9)], [3, pytest.approx(0.8)],
                            [999, pytest.approx(0.7)], [5, pytest.approx(0.6)],
                            [42, pytest.approx(0.5)]]
    assert info["shape"] == [1, 1000] and info["max"] == pytest.approx(0.9)
    text = format_summary(info)
    assert text.startswith("  prob: 1x1000 float32  min 0  max 0.9") and "top-5: 7 (0.9)" in text
    assert "top5" not in summarize("batch", np.ones((2, 10)))
    assert summarize("empty", np.zeros((0,)))["shape"] == [0]


def test_shapes_and_inputs(tmp_path: Path) -> None:
    assert parse_shapes(["1,3,224,224", "mask=2x16"]) == {"": (1, 3, 224, 224),
                                                          "mask": (2, 16)}
    for bad in ("1,a", "0,3", ""):
        with pytest.raises(CliError) as error:
            parse_shapes([bad])
        assert error.value.code == USAGE
    np.savez(tmp_path / "inputs.npz", ids=np.arange(4), mask=np.ones(4))
    np.save(tmp_path / "x.npy", np.zeros(3))
    arrays = read_inputs([str(tmp_path / "inputs.npz"), f"data={tmp_path / 'x.npy'}"])
    assert sorted(arrays) == ["data", "ids", "mask"]
    with pytest.raises(CliError) as error:
        read_inputs([str(tmp_path / "missing.npy")])
    assert error.value.code == 3


# ---- Partition.explain ---------------------------------------------------------------------------


def _kinds(exe: Any) -> dict[str, str]:
    return {item.name: item.kind for item in exe.partition.explain().nodes}


def test_explain_placement_and_dtypes_the_abi_lacks(offload_everything: None) -> None:
    data = mx.sym.Variable("data")
    with mx.AttrScope(ctx_group="second"):
        first = mx.sym.Activation(data, act_type="relu", name="on_mlu1")
    with mx.AttrScope(ctx_group="host"):
        middle = mx.sym.Activation(first, act_type="tanh", name="on_host")
    as_bool = mx.sym.Cast(middle, dtype="bool", name="to_bool")
    net = mx.sym.Activation(mx.sym.Cast(as_bool, dtype="float32", name="back"),
                            act_type="sigmoid", name="last")
    exe = net.simple_bind(mx.mlu(0), data=(2, 3),
                          group2ctx={"second": mx.mlu(1), "host": mx.cpu()})
    explanation = exe.partition.explain()
    reasons = {item.name: item for item in explanation.nodes}
    assert reasons["on_mlu1"].kind == "placed" and reasons["on_mlu1"].where == "mlu(1)"
    assert "'second'" in reasons["on_mlu1"].reason
    assert reasons["on_host"].kind == "placed_cpu"
    assert reasons["to_bool"].kind == reasons["back"].kind == "no_abi_dtype"
    assert "bool" in reasons["to_bool"].reason
    assert reasons["last"].kind == "placed" and "executor's context" in reasons["last"].reason
    assert explanation.totals()["copies"] == 4


def test_explain_cost_verdicts_and_the_partition_stays_hashable() -> None:
    x = mx.sym.LeakyReLU(mx.sym.Variable("data"), slope=0.1, name="leaky")
    net = mx.sym.Activation(x, act_type="relu", name="tiny")
    exe = net.simple_bind(mx.mlu(0), data=(1, 8))
    assert _kinds(exe) == {"leaky": "unsupported", "tiny": NOT_PAYING}
    (kept,) = exe.partition.kept_on_cpu
    assert kept.kind == NOT_PAYING and kept.cost_s > kept.gain_s and kept.bytes_moved == 64
    assert hash(exe.partition) == hash(exe.partition)
    assert KeptOnCpu((1,), 0, "few", MIN_SIZE).kind == MIN_SIZE
    text = exe.partition.explain().format_text()
    assert "nothing runs on the accelerator" in text


def test_explain_finds_the_node_that_forces_a_cut(offload_everything: None) -> None:
    data = mx.sym.Variable("data")
    a = mx.sym.Activation(data, act_type="relu", name="a")
    leaky = mx.sym.LeakyReLU(a, slope=0.1, name="leaky")
    b = mx.sym.elemwise_add(a, leaky, name="b")  # reads a directly and through leaky
    side = mx.sym.Activation(data, act_type="tanh", name="side")  # independent of a and b
    net = mx.sym.Group([b, side])
    exe = net.simple_bind(mx.mlu(0), data=(2, 3))
    kinds = _kinds(exe)
    assert kinds["leaky"] == "unsupported" and kinds["b"] == "cycle_cut"
    assert kinds["a"] == kinds["side"] == "offloaded"
    cut = next(item for item in exe.partition.explain().nodes if item.name == "b")
    assert "through leaky (cpu(0))" in cut.reason
    dot = exe.partition.to_dot(exe.partition.explain())
    assert "(unsupported)" in dot and '[label="24 B"]' in dot
