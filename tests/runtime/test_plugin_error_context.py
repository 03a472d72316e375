"""Errors that say where (issue 37, item 2): a PluginError from infer names
the subgraph, its device, its first and last operators and their count,
and the executor's node names, and so does the in-process crash marker;
a long plugin message is cut at a word, never inside one. The plugin is
tests/plugins/failing_relu.c, built to fail."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from support.plugin_builds import SANITIZE

import acc_host as mx
from acc_host.abi.loaded_model import describe_graph
from acc_host.plugins import registry


def _relu_chain(count: int) -> mx.sym.Symbol:
    out = mx.sym.Variable("data")
    for index in range(count):
        out = mx.sym.Activation(out, act_type="relu", name=f"relu{index}")
    return out


@pytest.fixture(scope="module")
def failing(build_test_plugin: Callable[..., Path]) -> mx.Context:
    path = build_test_plugin("failing_relu.c", "failrelu_fails", FAILRELU_INFER_FAILS=True)
    return mx.Context(registry.register(path, "failrelu_fails").name, 0)


def test_infer_error_names_the_subgraph_its_operators_and_nodes(failing: mx.Context) -> None:
    exe = _relu_chain(3).simple_bind(failing, data=(2, 3))
    with pytest.raises(mx.PluginError) as caught:
        exe.forward(data=np.ones((2, 3), np.float32))[0].asnumpy()
    message = str(caught.value)
    assert caught.value.function == "infer" and caught.value.code_name == "MX_ACC_ERR_INTERNAL"
    assert ("subgraph 0 on failrelu_fails(0): 3 operators from relu0 (Activation) to relu2 "
            "(Activation); nodes relu0, relu1, relu2") in message
    assert re.search(r"acc_host\.\d+\.model\d+: subgraph 0", message)  # the id is kept too
    exe.close()


def test_a_long_plugin_message_is_cut_at_a_word(failing: mx.Context) -> None:
    exe = _relu_chain(1).simple_bind(failing, data=(4,))
    with pytest.raises(mx.PluginError) as caught:
        exe.forward(data=np.ones(4, np.float32))[0].asnumpy()
    plugin = caught.value.plugin_message
    # 1,500 characters of whole words do not fit the 1,024 bytes the common
    # status helpers keep: the message ends with a whole word and "...".
    assert plugin.startswith("model acc_host.") and "is not loaded on the card" in plugin
    assert len(plugin) <= 1023 and plugin.endswith("...")
    words = plugin[:-3].split(" ")
    assert words[-1] in {"the", "device", "lost", "its", "work"}, words[-1]
    exe.close()


def test_describe_graph_bounds_the_node_names() -> None:
    nodes = [{"op": "null", "name": "data"}] + [
        {"op": "Activation", "name": f"relu{index}"} for index in range(11)]
    text = describe_graph({"nodes": nodes}, "subgraph 4 on x(1)")
    assert text == ("subgraph 4 on x(1): 11 operators from relu0 (Activation) to relu10 "
                    "(Activation); nodes relu0, relu1, relu2, relu3, relu4, relu5, relu6, "
                    "relu7 and 3 more")
    assert describe_graph({"nodes": nodes[:2]}) == "1 operator relu0 (Activation); nodes relu0"


@pytest.mark.skipif(SANITIZE, reason="AddressSanitizer handles SIGSEGV itself, before "
                    "faulthandler can print the marked frame")
def test_in_process_crash_report_names_the_same(build_test_plugin: Callable[..., Path],
                                                tmp_path: Path) -> None:
    path = build_test_plugin("failing_relu.c", "failrelu_crash", FAILRELU_CRASH=True)
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        import acc_host as mx
        from acc_host.plugins import registry
        ctx = mx.Context(registry.register({str(path)!r}, "failrelu_crash").name, 0)
        out = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="first")
        out = mx.sym.Activation(out, act_type="relu", name="second")
        exe = out.simple_bind(ctx, data=(2,))
        exe.forward(data=np.ones(2, np.float32))[0].asnumpy()
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert ("failrelu_crash infer(acc_host." in done.stderr
            and "subgraph 0 on failrelu_crash(0): 2 operators from first (Activation) to "
                "second (Activation); nodes first, second" in done.stderr), done.stderr[-2000:]
