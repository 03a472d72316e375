"""The ``acc-host`` command, run as a subprocess (``python -m acc_host``)
the way users and scripts run it: output and exit codes, including the
failure cases (missing files, broken plugins, unsupported operators)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import TESTS

import acc_host as mx

SRC = Path(mx.__file__).resolve().parent.parent
SQUEEZENET = TESTS / "models" / "squeezenet1_1"
RESNET_ONNX = TESTS / "onnx_models" / "resnet_small.onnx"


def cli(*args: str, env: Mapping[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """acc-host args, with the acc_host of this source tree."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("MXNET_ACC_LIBRARIES", "MXNET_ACC_CACHE_DIR")}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "acc_host", *args], capture_output=True,
                          text=True, env=environment, timeout=timeout, check=False)


def assert_error(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    """The command failed with code and one clean error line, no traceback."""
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "acc-host: error: " in done.stderr
    for fragment in fragments:
        assert fragment in done.stderr


# ---- models made for these tests ---------------------------------------------------------


def _islands() -> mx.sym.Symbol:
    """Convolution blocks mlu_sim runs, LeakyReLUs it does not, and one tiny
    relu not worth offloading; the second block reads the first directly
    and through a LeakyReLU, so they cannot be one subgraph."""
    s = mx.sym
    relu0 = s.Activation(s.Convolution(s.Variable("data"), num_filter=64, kernel=(3, 3),
                                       pad=(1, 1), name="conv0"), act_type="relu", name="relu0")
    leaky0 = s.LeakyReLU(relu0, slope=0.1, name="leaky0")
    add0 = s.elemwise_add(relu0, leaky0, name="add0")
    relu1 = s.Activation(s.Convolution(add0, num_filter=64, kernel=(3, 3), pad=(1, 1),
                                       name="conv1"), act_type="relu", name="relu1")
    tiny = s.Activation(s.LeakyReLU(relu1, slope=0.1, name="leaky1"), act_type="relu",
                        name="tiny_relu")
    return s.LeakyReLU(tiny, slope=0.1, name="leaky2")


def _float64_net() -> mx.sym.Symbol:
    s = mx.sym
    conv = s.Convolution(s.Variable("data"), num_filter=4, kernel=(3, 3), name="conv")
    return s.FullyConnected(s.Flatten(conv, name="flat"), num_hidden=3, name="fc")


def _save(net: mx.sym.Symbol, prefix: Path, shape: tuple[int, ...], dtype: type) -> str:
    rng = np.random.default_rng(0)
    arg_shapes, _, _ = net.infer_shape_partial(data=shape)
    args = {name: mx.nd.array((rng.standard_normal(s) * 0.1).astype(dtype))
            for name, s in zip(net.list_arguments(), arg_shapes) if name != "data"}
    mx.model.save_checkpoint(str(prefix), 0, net, args, {})
    return str(prefix)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("cli_models")
    np.save(folder / "f64_input.npy", np.ones((1, 2, 6, 6)))
    return {"islands": _save(_islands(), folder / "islands", (1, 64, 32, 32), np.float32),
            "f64": _save(_float64_net(), folder / "f64", (1, 2, 6, 6), np.float64),
            "f64_input": str(folder / "f64_input.npy")}


@pytest.fixture(scope="module")
def plugins(build_fake: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    """A directory for MXNET_ACC_LIBRARIES with one good and one broken
    fake plugin, and each plugin's path."""
    folder = tmp_path_factory.mktemp("cli_plugins")
    good = build_fake("cli_good", FAKE_NAME='"clifake"', FAKE_NUM_ACC=3)
    broken = build_fake("cli_missing", FAKE_NAME='"climissing"', FAKE_OMIT_SYMBOLS=True)
    bad_ids = build_fake("cli_bad_ids", FAKE_NAME='"clibadids"', FAKE_IDS="0,1")
    for path in (good, broken):
        shutil.copy(path, folder / path.name)
    return {"dir": folder, "good": folder / good.name, "broken": folder / broken.name,
            "bad_ids": bad_ids}


# ---- help and usage -----------------------------------------------------------------------


def test_without_a_command_it_prints_help_and_exits_2() -> None:
    done = cli()
    assert done.returncode == 2
    for command in ("list", "inspect", "run", "partition", "check", "demo"):
        assert command in done.stderr
    assert "exit status" in done.stderr and done.stdout == ""


def test_a_usage_error_exits_2() -> None:
    done = cli("partition", str(RESNET_ONNX))  # --acc is required
    assert done.returncode == 2 and "--acc" in done.stderr and "Traceback" not in done.stderr


# ---- list -------------------------------------------------------------------------------------


def test_list_shows_every_library_and_why_one_failed(plugins: dict[str, Path]) -> None:
    env = {"MXNET_ACC_LIBRARIES": str(plugins["dir"])}
    done = cli("list", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "ABI", "DEVICES", "MODES", "SOURCE", "PATH"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line and line[0] != " "}
    assert rows["cpu_ref"][1:5] == ["1.2", "1", "imperative+symbolic", "bundled"]
    assert rows["mlu"][2] == "4"
    assert rows["clifake"][1:5] == ["1.2", "3", "symbolic", "MXNET_ACC_LIBRARIES"]
    assert "failed to load (1):" in done.stdout
    assert f"{plugins['broken'].name}" in done.stdout
    assert "required symbols are missing: loadModel, infer, configure" in done.stdout

    records = json.loads(cli("list", "--json", env=env).stdout)
    by_path = {Path(record["path"]).name: record for record in records}
    assert by_path[plugins["good"].name]["modes"] == ["symbolic"]
    assert by_path[plugins["broken"].name]["loaded"] is False
    assert "missing" in by_path[plugins["broken"].name]["error"]


# ---- inspect ---------------------------------------------------------------------------------


def test_inspect_probes_operators_dtypes_and_configure_keys() -> None:
    done = cli("inspect", "mlu")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("mlu  ") and "libmlu_sim" in out.splitlines()[0]
    assert "devices           4" in out and "imperative + symbolic" in out
    assert "precision" in out and "host_bandwidth" in out  # configure keys
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.startswith("  ") and len(line.split()) == 5}
    assert rows["operator"] == ["float32", "float16", "int8", "int32"]
    assert rows["Convolution"][:2] == ["yes", "yes"]
    assert rows["LeakyReLU"] == ["no", "no", "no", "no"]  # mlu_sim does not run it


def test_inspect_by_path_as_json() -> None:
    path = mx.get_library("cpu_ref").path
    done = cli("inspect", path, "--json", "--dtypes", "float32,float64")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["name"] == "cpu_ref" and info["path"] == path
    assert info["imperative"] is True and info["devices"] == 1
    assert "num_threads" in info["configure_keys"] and "Convolution:1" in info["declared_ops"]
    rows = {row["op"]: row for row in info["supported"]}
    assert rows["LeakyReLU"]["float32"] == "yes" and rows["Convolution"]["float64"] == "no"


def test_inspect_failures(plugins: dict[str, Path]) -> None:
    assert_error(cli("inspect", str(plugins["broken"])), 3,
                 "required symbols are missing: loadModel, infer, configure")
    assert_error(cli("inspect", "/no/such/libacc.so"), 3, "not found: /no/such/libacc.so")
    assert_error(cli("inspect", "nosuchacc"), 3, "no accelerator called 'nosuchacc'",
                 "cpu_ref, mlu")


# ---- run ---------------------------------------------------------------------------------------


def test_run_a_checkpoint_on_the_mlu() -> None:
    expected = np.load(SQUEEZENET / "expected_0.npy")
    done = cli("run", str(SQUEEZENET / "model"), "--acc", "mlu", "--input",
               str(SQUEEZENET / "input_0.npy"), "--repeat", "2")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "inputs: data 1x3x224x224 float32" in out
    assert "squeezenet0_flatten0_flatten0_output: 1x1000 float32" in out
    top = out.split("top-5: ", 1)[1].split(",")[0]
    assert int(top.split()[0]) == int(np.argmax(expected))
    assert "65/66 operators on mlu(0) in 2 subgraph(s), 1 on cpu(0)" in out
    assert "segment 1: cpu(0): 1 operators [Dropout]" in out
    assert "compile " in out and "forward median " in out and "over 2 runs" in out
    assert done.stderr == ""  # no progress bar when stderr is not a terminal


@pytest.mark.needs_onnx
def test_run_onnx_as_json_with_a_batch_and_a_forced_progress_bar() -> None:
    done = cli("run", str(RESNET_ONNX), "--acc", "cpu_ref", "--batch", "3", "--repeat", "1",
               "--json", "--progress")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == "onnx" and report["inputs"]["input"]["shape"] == [3, 3, 32, 32]
    (output,) = report["outputs"]
    assert output["shape"] == [3, 10] and output["dtype"] == "float32" and "top5" not in output
    assert report["where"]["offloaded"] == report["where"]["operators"] == 22
    assert report["compile_s"] > 0 and report["run_median_s"] > 0
    assert "[" in done.stderr and "2/2" in done.stderr  # the bar: first forward + 1 run


@pytest.mark.needs_onnx
def test_run_on_the_host_cpu_by_default() -> None:
    done = cli("run", str(RESNET_ONNX), "--repeat", "0")
    assert done.returncode == 0, done.stderr
    assert "on cpu(0)" in done.stdout and "0/22 operators" in done.stdout


def test_run_failures(plugins: dict[str, Path]) -> None:
    model = str(SQUEEZENET / "model")
    assert_error(cli("run", "/no/such/model", "--acc", "mlu"), 3, "model not found",
                 "/no/such/model-symbol.json")
    assert_error(cli("run", model, "--acc", "mlu"), 2, "--shape data=")
    # An input shape or dtype the model does not take is bad input (docs/cli.md): 2.
    assert_error(cli("run", model, "--acc", "mlu", "--shape", "1,3,224"), 2,
                 "Convolution: data must be 4-D, got shape (1, 3, 224)")
    assert_error(cli("run", model, "--acc", "nosuchacc", "--shape", "1,3,224,224"), 3,
                 "no accelerator called 'nosuchacc'")
    assert_error(cli("run", model, "--acc", "mlu", "--device", "9", "--shape", "1,3,224,224"),
                 2, "--device 9 does not exist")
    assert_error(cli("run", model, "--acc", str(plugins["broken"]), "--shape", "1,3,224,224"),
                 3, "required symbols are missing")
    # A plugin whose supportedOps() breaks the contract: the run itself fails.
    assert_error(cli("run", model, "--acc", str(plugins["bad_ids"]), "--shape", "1,3,224,224"),
                 1, "clibadids: supportedOps() listed variable nodes")


# ---- partition ----------------------------------------------------------------------------------


def _reasons(text: str) -> dict[str, str]:
    """Operator name -> its line of the explain table."""
    table = text.split("why each operator runs where it does:\n", 1)[1].split("\n  (", 1)[0]
    return {line.split()[0]: line for line in table.splitlines()}


def test_partition_explains_every_operator(models: dict[str, str]) -> None:
    done = cli("partition", models["islands"], "--acc", "mlu", "--shape", "1,64,32,32")
    assert done.returncode == 0, done.stderr
    reasons = _reasons(done.stdout)
    assert list(reasons) == ["conv0", "relu0", "leaky0", "add0", "conv1", "relu1", "leaky1",
                             "tiny_relu", "leaky2"]
    assert "5/9 operators on mlu in 2 subgraph(s)" in done.stdout
    assert "offloaded: supportedOps on mlu(0) accepted it" in reasons["conv0"]
    assert "unsupported_op: supportedOps on mlu(0) does not accept LeakyReLU" in reasons["leaky0"]
    assert "cycle_cut:" in reasons["conv1"] and "through leaky0 (cpu(0))" in reasons["conv1"]
    assert "not_paying:" in reasons["tiny_relu"] and "> gain" in reasons["tiny_relu"]
    # boundaries: the data in, relu0's output passed on the device, bytes per forward
    assert "in  data" in done.stdout and "262144 B  copy   graph input" in done.stdout
    assert "device from subgraph 0 (relu0)" in done.stdout
    assert "per forward: 524288 B in, 524288 B out in 4 transfers" in done.stdout


def test_partition_without_cost_model_and_as_json(models: dict[str, str]) -> None:
    done = cli("partition", models["islands"], "--acc", "mlu", "--shape", "1,64,32,32",
               "--format", "json", env={"MXNET_ACC_OFFLOAD_COST": "0"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    nodes = {item["name"]: item for item in report["explain"]["nodes"]}
    assert nodes["tiny_relu"]["kind"] == "cycle_cut" and nodes["tiny_relu"]["subgraph"] == 2
    assert report["explain"]["counts"] == {"offloaded": 2, "cycle_cut": 4, "unsupported_op": 3}
    assert [segment["where"] for segment in report["segments"]][:2] == ["mlu(0)", "cpu(0)"]
    assert report["graph"]["nodes"][-1]["op"] == "LeakyReLU"
    boundary = report["explain"]["boundaries"][0]
    assert boundary == {**boundary, "name": "data", "shape": [1, 64, 32, 32],
                        "dtype": "float32", "nbytes": 262144, "transfer": "copy"}


def test_partition_names_an_unsupported_dtype(models: dict[str, str]) -> None:
    done = cli("partition", models["f64"], "--acc", "cpu_ref", "--input", models["f64_input"])
    assert done.returncode == 0, done.stderr
    assert "unsupported_dtype: cpu_ref(0) runs Convolution in float32, not in float64" \
        in done.stdout
    assert "flat Flatten        cpu_ref(0) sg0 offloaded" in done.stdout


def test_partition_as_dot_and_svg(models: dict[str, str], tmp_path: Path) -> None:
    args = ("partition", models["islands"], "--acc", "mlu", "--shape", "1,64,32,32")
    dot = cli(*args, "--format", "dot")
    assert dot.returncode == 0, dot.stderr
    assert dot.stdout.startswith("digraph partition {")
    assert "(unsupported_op)" in dot.stdout and '[label="262144 B"]' in dot.stdout
    if shutil.which("dot") is not None:
        target = tmp_path / "partition.svg"
        done = cli(*args, "--format", "svg", "--renderer", "graphviz", "--output", str(target))
        assert done.returncode == 0, done.stderr
        assert "<svg" in target.read_text() and "leaky0" in target.read_text()


def test_svg_without_graphviz_and_with_a_failing_one(models: dict[str, str],
                                                     tmp_path: Path) -> None:
    args = ("partition", models["islands"], "--acc", "mlu", "--shape", "1,64,32,32",
            "--format", "svg", "--renderer", "graphviz")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_error(cli(*args, env={"PATH": str(empty)}), 3, "graphviz needs Graphviz",
                 "'dot' program is not on PATH")
    fake = tmp_path / "broken_graphviz"
    fake.mkdir()
    script = fake / "dot"
    script.write_text("#!/bin/sh\necho 'syntax error in line 1' >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    assert_error(cli(*args, env={"PATH": str(fake)}), 1, "Graphviz 'dot'",
                 "syntax error in line 1")


# ---- check and demo --------------------------------------------------------------------------


def test_check_passes_a_good_plugin_and_fails_a_broken_one(build_fake: Any) -> None:
    done = cli("check", "mlu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout and "FAIL" not in done.stdout.replace("0 failed", "")
    broken = build_fake("cli_check_version", FAKE_REFUSE_VERSION=True)
    failed = cli("check", str(broken))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL" in failed.stdout and "abi.load" in failed.stdout
    assert_error(cli("check", "/no/such/libx.so"), 3, "not found")


# ---- run --check, --trace, replay and timeline -------------------------------------------


@pytest.mark.slow
def test_run_check_trace_replay_and_timeline(tmp_path: Path, perturbed_cpu_ref: Path) -> None:
    trace = tmp_path / "run.trace"
    done = cli("run", str(SQUEEZENET / "model"), "--acc", "cpu_ref", "--input",
               str(SQUEEZENET / "input_0.npy"), "--repeat", "1", "--check", "--trace", str(trace))
    assert done.returncode == 0, done.stderr
    assert "all within tolerance" in done.stdout
    same = cli("replay", str(trace))
    assert same.returncode == 0 and "no divergence" in same.stdout, same.stdout + same.stderr
    changed = cli("replay", str(trace), "--lib", f"cpu_ref={perturbed_cpu_ref}", "--only",
                  "cpu_ref", "--json")
    assert changed.returncode == 1, changed.stdout + changed.stderr
    divergence = json.loads(changed.stdout)["divergence"]
    assert divergence["library"] == "cpu_ref" and "differs" in divergence["what"]
    timeline = cli("timeline", str(trace), str(tmp_path / "timeline.json"))
    assert timeline.returncode == 0, timeline.stderr
    events = json.loads((tmp_path / "timeline.json").read_text())["traceEvents"]
    assert any(event.get("cat") == "infer" for event in events)
    assert_error(cli("replay", str(tmp_path / "missing.trace")), 3, "trace not found")
    (tmp_path / "bad.trace").write_text("{}\n")
    assert_error(cli("replay", str(tmp_path / "bad.trace")), 3, "not an acc-host trace")
    assert_error(cli("replay", str(trace), "--lib", "cpu_ref"), 2, "NAME=PATH")


@pytest.mark.slow
def test_run_check_fails_on_a_changed_kernel_and_names_the_node(perturbed_cpu_ref: Path) -> None:
    done = cli("run", str(SQUEEZENET / "model"), "--acc", str(perturbed_cpu_ref), "--input",
               str(SQUEEZENET / "input_0.npy"), "--repeat", "0", "--check",
               env={"MXNET_ACC_BUNDLED": "0"})  # the bundled cpu_ref would hold the name
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MISMATCH" in done.stdout and "first diverging node" in done.stdout
    assert "(Pooling)" in done.stdout


def test_demo_runs_the_main_job() -> None:
    done = cli("demo", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    assert "acc-host demo: loaded 'cpu_ref'" in done.stdout
    assert "demo passed" in done.stdout
