"""Why a node was declined (issue 37, item 1): supportedOpsReasons (ABI
1.1) gives the plugin's reason per declined node, which explain keeps in
NodeReason.plugin_reason and at the end of its text, and which `acc-host
partition`, the `run` summary and the trace show. cpu_ref, mlu_sim and a
test plugin (tests/plugins/failing_relu.c) give them; the host guards the
reason slots against overruns and unterminated text."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx
from acc_host import trace
from acc_host.cli.run_cmd import declined_nodes
from acc_host.plugins import registry

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = ROOT / "tests" / "models" / "transformer_enc"


def _reasons(exe: mx.executor.Executor) -> dict[str, tuple[str, str | None]]:
    return {item.name: (item.kind, item.plugin_reason) for item in exe.partition.explain().nodes}


@pytest.fixture(scope="module")
def failrelu(build_test_plugin: Callable[..., Path]) -> mx.Context:
    return mx.Context(registry.register(build_test_plugin("failing_relu.c", "failrelu"),
                                        "failrelu").name, 0)


def _mixed() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    relu = mx.sym.Activation(data, act_type="relu", name="relu")
    sigmoid = mx.sym.Activation(relu, act_type="sigmoid", name="sigmoid")
    return mx.sym.FullyConnected(sigmoid, num_hidden=3, name="fc")


def test_a_plugins_reasons_reach_explain(failrelu: mx.Context) -> None:
    exe = _mixed().simple_bind(failrelu, data=(2, 4))
    reasons = _reasons(exe)
    assert reasons["relu"] == ("offloaded", None)
    assert reasons["sigmoid"] == ("unsupported", "act_type=sigmoid not implemented (relu only)")
    assert reasons["fc"] == ("unsupported", "only Activation runs here, not FullyConnected")
    text = exe.partition.explain().format_text()
    assert ("supportedOps on failrelu(0) did not accept FullyConnected (float32); failrelu "
            "says: only Activation runs here, not FullyConnected") in text
    assert [row["node"] for row in declined_nodes(exe.partition)] == ["sigmoid", "fc"]
    data = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    got = exe.forward(data=data)[0].asnumpy()
    cpu = _mixed().simple_bind(mx.cpu(), data=(2, 4))
    for name, array in exe.arg_dict.items():
        if name != "data":
            cpu.arg_dict[name][:] = array
    np.testing.assert_allclose(got, cpu.forward(data=data)[0].asnumpy(), rtol=1e-6)
    exe.close()


def test_the_trace_records_the_reasons(failrelu: mx.Context, tmp_path: Path) -> None:
    path = tmp_path / "reasons.trace"
    trace.start(path)
    try:
        _mixed().simple_bind(failrelu, data=(2, 4)).close()
    finally:
        trace.stop()
    calls = [record for record in trace.read_trace(path).calls()
             if record["fn"] == "supportedOpsReasons"]
    assert calls and calls[0]["out"]["ids"] == [1]
    assert calls[0]["out"]["reasons"] == {
        "2": "act_type=sigmoid not implemented (relu only)",
        "5": "only Activation runs here, not FullyConnected"}


@pytest.mark.parametrize(("option", "words"), [
    ("FAILRELU_OVERRUN_REASONS", "wrote past the end of reasons"),
    ("FAILRELU_NO_NUL", "without a NUL within its 128 bytes")])
def test_reason_slots_are_guarded(build_test_plugin: Callable[..., Path], option: str,
                                  words: str) -> None:
    name = f"failrelu_{option.lower().split('_', 1)[1]}"
    context = mx.Context(registry.register(
        build_test_plugin("failing_relu.c", name, **{option: True}), name).name, 0)
    with pytest.raises(mx.PluginContractError, match=words):
        _mixed().simple_bind(context, data=(2, 4))


def test_cpu_ref_says_which_dtypes_an_operator_runs() -> None:
    data = mx.sym.Variable("data")
    topk = mx.sym.topk(data, k=2, name="tk")
    exe = topk.simple_bind(mx.cpu_ref(0), data=(2, 5), type_dict={"data": np.int32})
    assert _reasons(exe)["tk"] == ("unsupported",
                                   "input 0 has dtype int32; topk runs only float32 and float16")
    exe.close()


def test_mlu_sim_says_which_attribute_values_it_runs() -> None:
    data = mx.sym.Variable("data")
    out = mx.sym.Activation(mx.sym.Activation(data, act_type="softrelu", name="soft"),
                            act_type="relu", name="relu")
    exe = out.simple_bind(mx.mlu(0), data=(2, 5))
    assert _reasons(exe)["soft"] == ("unsupported", 'act_type="softrelu" does not run on the MLU')
    exe.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acc_host", *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_acc_host_partition_shows_mlu_reasons_on_a_shared_model() -> None:
    done = _cli("partition", str(TRANSFORMER / "model"), "--acc", "mlu", "--input",
                str(TRANSFORMER / "input_0.npy"), "--format", "json")
    assert done.returncode == 0, done.stderr
    nodes = json.loads(done.stdout)["explain"]["nodes"]
    said = {node["op"]: node["plugin_reason"] for node in nodes if node["plugin_reason"]}
    assert said["LayerNorm"] == "operator LayerNorm does not run on the MLU"
    assert said["batch_dot"] == "operator batch_dot does not run on the MLU"
    text = _cli("partition", str(TRANSFORMER / "model"), "--acc", "mlu", "--input",
                str(TRANSFORMER / "input_0.npy"))
    assert "mlu says: operator LayerNorm does not run on the MLU" in text.stdout


def test_acc_host_run_summary_lists_declined_nodes() -> None:
    done = _cli("run", str(TRANSFORMER / "model"), "--acc", "mlu", "--input",
                str(TRANSFORMER / "input_0.npy"), "--repeat", "0")
    assert done.returncode == 0, done.stderr
    summary = done.stdout[done.stdout.index("declined by the plugin:"):]
    assert ("  LayerNorm x4 on mlu(0): operator LayerNorm does not run on the MLU "
            "[tfenc_hybridsequential0_encoderlayer0_layernorm0_layernorm0, ") in summary
    assert "tfenc_hybridsequential0_encoderlayer1_layernorm0_layernorm0 and 1 more]" in summary
    declined = json.loads(_cli("run", str(TRANSFORMER / "model"), "--acc", "mlu", "--input",
                               str(TRANSFORMER / "input_0.npy"), "--repeat", "0",
                               "--json").stdout)["where"]["declined"]
    assert sum(row["op"] == "LayerNorm" for row in declined) == 4


def test_the_template_says_why_on_squeezenet(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`acc-host partition` of the shared SqueezeNet 1.1 with plugins/template:
    Pooling, Concat and Dropout are declined, each with the template's words."""
    import build_plugins

    library = build_plugins.build_named(["template"], tmp_path_factory.mktemp("template"),
                                        werror=True, log=lambda message: None)[0]
    squeezenet = ROOT / "tests" / "models" / "squeezenet1_1"
    done = _cli("partition", str(squeezenet / "model"), "--acc", str(library), "--input",
                str(squeezenet / "input_0.npy"), "--format", "json")
    assert done.returncode == 0, done.stderr
    said = {node["op"]: node["plugin_reason"]
            for node in json.loads(done.stdout)["explain"]["nodes"] if node["plugin_reason"]}
    assert said == {op: f"{op}: the template has no such operator or version"
                    for op in ("Pooling", "Concat", "Dropout")}


def test_the_template_names_the_convolution_limit(tmp_path_factory: pytest.TempPathFactory
                                                  ) -> None:
    import build_plugins

    path = build_plugins.build_named(["template"], tmp_path_factory.mktemp("template_conv"),
                                     werror=True, log=lambda message: None)[0]
    context = mx.Context(registry.register(path, "template_reasons").name, 0)
    data = mx.sym.Variable("data")
    grouped = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, num_group=2, name="grouped")
    dilated = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, dilate=(2, 2), name="dilated")
    exe = mx.sym.Group([grouped, dilated]).simple_bind(context, data=(1, 4, 8, 8))
    reasons = _reasons(exe)
    assert reasons["grouped"][1] == "Convolution: num_group > 1 not implemented"
    assert reasons["dilated"][1] == "Convolution: dilate unsupported"
    exe.close()


def test_isolated_libraries_forward_the_reasons(build_test_plugin: Callable[..., Path]) -> None:
    from acc_host.abi.annotate import annotate_symbol, signature
    from acc_host.isolate import IsolatedLibrary

    sym = _mixed()
    arg_shapes, _, _ = sym.infer_shape(data=(2, 4))
    shapes = dict(zip(sym.list_arguments(), arg_shapes))
    graph = annotate_symbol(sym, shapes, weights={name for name in shapes if name != "data"},
                            dtypes={name: np.float32 for name in shapes})
    text, data = json.dumps(graph), signature(graph).data
    library = IsolatedLibrary(build_test_plugin("failing_relu.c", "failrelu"),
                              acc_name="failrelu_iso")
    broken = IsolatedLibrary(build_test_plugin("failing_relu.c", "failrelu_overrun_iso",
                                               FAILRELU_OVERRUN_REASONS=True),
                             acc_name="failrelu_iso_overrun")
    try:
        assert library.gives_reasons and not library.retains_weights
        ids, reasons = library.supported_ops_reasons(text, data, len(graph["nodes"]), 0)
        assert ids == [1] and reasons == {
            2: "act_type=sigmoid not implemented (relu only)",
            5: "only Activation runs here, not FullyConnected"}
        with pytest.raises(mx.PluginContractError, match="wrote past the end of reasons"):
            broken.supported_ops_reasons(text, data, len(graph["nodes"]), 0)
    finally:
        library.close()
        broken.close()
