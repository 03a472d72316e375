"""plugins/template, the plugin a vendor copies: it is built on request only
(never bundled, never loaded at import), warning-free (-Werror), passes the
conformance kit on both its devices, and runs a real model (SqueezeNet 1.1)
symbolically, with the operators it lacks on the CPU, and imperatively,
matching the host's CPU path and MXNet's own outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx
import build_plugins
from acc_host.conformance import PASS, SKIP, check_library
from acc_host.ndarray import dispatch
from acc_host.plugins import registry

MODEL = MODELS / "squeezenet1_1"
SANITIZE = os.environ.get("ACC_HOST_SANITIZE") == "1"
# The template's loops sum in float32 in another order than the CPU path.
RTOL, ATOL = 1e-4, 1e-5
TEMPLATE_OPS = {"Convolution", "Activation", "elemwise_add", "Flatten"}


@pytest.fixture(scope="module")
def library_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """plugins/template built as CI builds it: build_plugins.py --plugin
    template --werror (sanitized in a sanitized session)."""
    out = tmp_path_factory.mktemp("template")
    return build_plugins.build_named(["template"], out, sanitize=SANITIZE, werror=True,
                                     log=lambda message: None)[0]


@pytest.fixture(scope="module")
def library(library_path: Path) -> registry.AccLibrary:
    """The template registered in this process (not made the default
    accelerator, so tests after this module see the same default)."""
    return registry.register(library_path)


def test_template_is_built_on_request_only() -> None:
    assert "template" in build_plugins.NOT_BUNDLED
    assert all(path.name != "template" for path in build_plugins.plugin_dirs())
    assert not (build_plugins.DEFAULT_OUT / build_plugins.library_name("template")).exists()
    with pytest.raises(build_plugins.BuildError, match="not bundled"):
        build_plugins.build_named(["template"], build_plugins.DEFAULT_OUT)


def test_template_passes_the_conformance_kit(library_path: Path) -> None:
    report = check_library(library_path, isolate=False)
    assert report.passed, report.format_text()
    assert report.devices == [0, 1]
    ids = report.by_id()
    checked = ["imperative.numerics", "symbolic.graphs", "threads.concurrent", "errors.per_thread",
               "memory.balance", *(f"symbolic.numerics.{op}.float32" for op in TEMPLATE_OPS)]
    for check_id in checked:
        assert ids[check_id].status == PASS, ids[check_id]
    assert not [result.id for result in report.results if result.status == SKIP]


def _load_model() -> tuple[Any, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    symbol, arg_params, aux_params = mx.model.load_checkpoint(str(MODEL / "model"), 0)
    params = {key: value.asnumpy() for key, value in {**arg_params, **aux_params}.items()}
    return symbol, params, np.load(MODEL / "input_0.npy"), np.load(MODEL / "expected_0.npy")


def _run_symbolic(ctx: mx.Context, symbol: Any, params: dict[str, np.ndarray],
                  data: np.ndarray) -> tuple[np.ndarray, dict[str, str]]:
    exe = symbol.simple_bind(ctx, data=data.shape)
    for key, value in params.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    output = exe.forward(data=data)[0].asnumpy()
    placement = exe.placement()
    exe.close()
    return output, placement


@pytest.mark.parametrize("device", [0, 1])
def test_squeezenet_runs_partitioned_on_the_template(library: registry.AccLibrary,
                                                     device: int) -> None:
    symbol, params, data, expected = _load_model()
    cpu, _ = _run_symbolic(mx.cpu(), symbol, params, data)
    output, placement = _run_symbolic(mx.Context(library.name, device), symbol, params, data)
    np.testing.assert_allclose(output, cpu, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(output, expected, rtol=1e-3, atol=1e-5)
    ops = {node["name"]: node["op"] for node in json.loads(symbol.tojson())["nodes"]}
    here = f"{library.name}({device})"
    on_template = {ops[name] for name, ctx in placement.items() if ctx == here}
    on_cpu = {ops[name] for name, ctx in placement.items() if ctx != here}
    assert on_template == {"Convolution", "Activation", "Flatten"}
    assert on_cpu == {"Concat", "Pooling", "Dropout"}  # the template has none of them


def test_squeezenet_runs_imperatively_on_the_template(library: registry.AccLibrary) -> None:
    """Every node of the graph as one mx.nd call on template(1): executors
    for its operators, the CPU for the others (arrays move as needed)."""
    symbol, params, data, _ = _load_model()
    graph = json.loads(symbol.tojson())
    ctx = mx.Context(library.name, 1)
    dispatch.clear_cache(ctx)
    before = dispatch.stats(ctx)
    values: dict[int, Any] = {}
    for index, node in enumerate(graph["nodes"]):
        if node["op"] == "null":
            value = data if node["name"] == "data" else params[node["name"]]
            values[index] = mx.nd.array(value, ctx=ctx)
            continue
        inputs = [values[entry[0]] for entry in node["inputs"]]
        attrs = {key: value for key, value in node.get("attrs", {}).items()
                 if not key.startswith("__")}
        values[index] = getattr(mx.nd, node["op"])(*inputs, **attrs)
    output = values[graph["heads"][0][0]].asnumpy()
    cpu, _ = _run_symbolic(mx.cpu(), symbol, params, data)
    np.testing.assert_allclose(output, cpu, rtol=RTOL, atol=ATOL)
    after = dispatch.stats(ctx)
    convolutions = sum(node["op"] == "Convolution" for node in graph["nodes"])
    # 26 convolutions + 26 relus + 1 flatten ran on the template; the 13
    # others (Concat, Pooling, Dropout) fell back to the CPU.
    assert after["accelerator_calls"] - before["accelerator_calls"] == 2 * convolutions + 1
    assert after["fallbacks"] - before["fallbacks"] == 8 + 4 + 1
    dispatch.clear_cache(ctx)


@pytest.mark.parametrize("attrs", [{"num_group": 2}, {"dilate": (2, 2)}])
def test_grouped_and_dilated_convolutions_fall_back_to_the_cpu(library: registry.AccLibrary,
                                                               attrs: dict[str, Any]) -> None:
    """The template refuses them (MX_ACC_ERR_UNSUPPORTED): the host runs them
    on the CPU, with the same result as on mx.cpu()."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 4, 7, 7)).astype(np.float32)
    weight = rng.standard_normal((6, 4 // attrs.get("num_group", 1), 3, 3)).astype(np.float32)
    ctx = mx.Context(library.name, 0)
    dispatch.clear_cache(ctx)
    before = dispatch.stats(ctx)
    args = dict(kernel=(3, 3), num_filter=6, no_bias=True, **attrs)
    output = mx.nd.Convolution(mx.nd.array(data, ctx=ctx), mx.nd.array(weight, ctx=ctx), **args)
    expected = mx.nd.Convolution(mx.nd.array(data), mx.nd.array(weight), **args)
    np.testing.assert_allclose(output.asnumpy(), expected.asnumpy(), rtol=RTOL, atol=ATOL)
    after = dispatch.stats(ctx)
    assert after["fallbacks"] - before["fallbacks"] == 1
    assert after["accelerator_calls"] == before["accelerator_calls"]
    dispatch.clear_cache(ctx)


def test_configure_answers_its_queries_and_refuses_other_keys(library: registry.AccLibrary) -> None:
    assert library.configure(0, {"query": "keys"}) == {"keys": "query"}
    assert library.configure(1, {"query": "ops"}) == {
        "ops": "Activation:1,Convolution:1,Flatten:1,elemwise_add:1"}
    with pytest.raises(mx.errors.PluginError, match="unknown key memory_limit"):
        library.configure(0, {"memory_limit": 4096})
