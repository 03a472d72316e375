"""docs/quickstart.md works as written.

The plugin source and the Python usage example are taken verbatim from the
page: the C block is compiled with the build command the page shows (plus
-Werror), loaded into this process, and exercised through the host API; the
usage block runs in a child process next to the library it built.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.paths import ROOT
from support.quickstart import (
    BUILD_FLAGS,
    C_FIRST_LINE,
    COMMON,
    COMMON_SOURCES,
    DOC,
    FENCE,
    INCLUDE,
    PYTHON_FIRST_LINE,
    build_command,
    compile_or_fail,
    page_blocks,
)

import acc_host as mx
import build_plugins
from acc_host.abi import header
from acc_host.abi.annotate import annotate_symbol
from acc_host.abi.header import ffi
from acc_host.abi.loaded_model import LoadedModel
from acc_host.abi.tensor import CStrings, TensorArray, TensorSpec

LIBRARY_LINE = 'LIBRARY = "./libmyacc.so"'
ABI_FUNCTIONS = {"getAccApiVersion", "initialize", "getAccName", "getNumAcc",
                 "supportsImperative", "supportedOps", "loadModel", "unloadModel", "infer",
                 "configure", "accGetLastError"}
F32 = np.dtype(np.float32)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    blocks = page_blocks("c", C_FIRST_LINE)
    assert len(blocks) == 1, f"expected one ```c block starting with {C_FIRST_LINE!r}"
    path = tmp_path_factory.mktemp("quickstart") / "myacc.c"
    path.write_text(blocks[0], encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def library_path(source: Path) -> Path:
    output = source.parent / "libmyacc.so"
    compile_or_fail(build_command(source, output, ["-Werror"]), source.parent)
    return output


@pytest.fixture(scope="module")
def ctx(library_path: Path) -> mx.Context:
    # The name "myacc" can be registered once per process: load it once.
    return mx.load_acc(library_path)


@pytest.fixture(scope="module")
def library(ctx: mx.Context):
    return ctx.library


def _graph(*activations: tuple[str, str], shape=(2, 3), dtype=F32) -> dict:
    """data -> Activation -> Activation ..., each (node name, act_type),
    annotated; the last node is the head."""
    entry = mx.sym.Variable("data")
    for name, act_type in activations:
        entry = mx.sym.Activation(entry, act_type=act_type, name=name)
    return annotate_symbol(entry, {"data": shape}, weights=[], dtypes={"data": dtype})


def _status(library, function: str, *args) -> tuple[str, str]:
    code = getattr(library.lib, function)(*args)
    return header.status_name(code), library.last_error()


# ---- the page itself --------------------------------------------------------------


def test_page_has_one_plugin_block_and_one_usage_block() -> None:
    text = DOC.read_text(encoding="utf-8")
    languages = [language for language, _ in FENCE.findall(text)]
    assert languages.count("c") == len(page_blocks("c", C_FIRST_LINE)) == 1
    assert languages.count("python") == len(page_blocks("python", PYTHON_FIRST_LINE)) == 1
    assert " ".join(["cc", *BUILD_FLAGS]) in text, "the page's build command changed"
    for path in COMMON_SOURCES:
        assert f'"$ACC_HOST/{path.relative_to(ROOT)}"' in text


def test_source_builds_clean_with_pedantic_warnings_and_sanitizers(source: Path) -> None:
    output = source.parent / "libmyacc_sanitized.so"
    command = [build_plugins.compiler(), "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
               "-fsanitize=address,undefined", "-pthread", "-fPIC", "-shared", f"-I{INCLUDE}",
               f"-I{COMMON}", str(source), *map(str, COMMON_SOURCES), "-o", str(output)]
    compile_or_fail(command, source.parent)
    assert output.is_file()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the ELF symbol table")
def test_exports_exactly_the_abi_functions(library_path: Path) -> None:
    result = subprocess.run(["nm", "-D", "--defined-only", str(library_path)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"nm failed: {result.stderr.strip()}")
    exported = {line.split()[-1] for line in result.stdout.splitlines()
                if line.split()[1:2] == ["T"]}
    assert exported == ABI_FUNCTIONS


def test_usage_block_runs(library_path: Path) -> None:
    (code,) = page_blocks("python", PYTHON_FIRST_LINE)
    assert code.count(LIBRARY_LINE) == 1
    code = code.replace(LIBRARY_LINE, f"LIBRARY = {str(library_path)!r}")
    result = subprocess.run([sys.executable, "-c", code], cwd=library_path.parent,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "{'ops': 'Activation:1'}" in result.stdout
    assert "MX_ACC_ERR_NOT_FOUND" in result.stdout


# ---- identification and configure ------------------------------------------------


def test_identification(ctx: mx.Context, library) -> None:
    assert ctx == mx.myacc(0)
    assert library.name == library.library_name == "myacc"
    assert library.api_version == mx.API_VERSION
    assert library.num_devices == 1 and not library.supports_imperative


def test_initialize_refuses_another_major_version(library) -> None:
    # A second initialize() is harmless for myacc, which keeps no state there.
    code, message = _status(library, "initialize", (header.API_VERSION_MAJOR + 1) * 100)
    assert code == "MX_ACC_ERR_VERSION" and "cannot work with host ABI 2.0" in message
    assert _status(library, "initialize", header.API_VERSION + 7)[0] == "MX_ACC_OK"


def test_configure_answers_the_reserved_queries(ctx: mx.Context) -> None:
    assert ctx.configure(query="keys") == {"keys": "query"}
    assert ctx.configure(query="ops") == {"ops": "Activation:1"}
    assert ctx.configure(query="version") == {"version": "0.1.0"}
    assert ctx.configure() == {}


def test_configure_unknown_key_raises_with_the_plugin_message(ctx: mx.Context) -> None:
    with pytest.raises(mx.PluginError, match='unknown key "colour"') as error:
        ctx.configure(colour="blue")
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND"
    assert error.value.function == "configure" and "myacc knows: query" in str(error.value)
    with pytest.raises(mx.PluginError, match='unknown query "memory"') as error:
        ctx.configure(query="memory")
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND"


def test_plugin_checks_the_device(library) -> None:
    count = ffi.new("int *")
    graph = ffi.new("char[]", json.dumps(_graph(("r", "relu"))).encode())
    code, message = _status(library, "supportedOps", graph, ffi.NULL, ffi.NULL, 0, 1,
                            ffi.new("int[]", 2), 2, count)
    assert code == "MX_ACC_ERR_DEVICE" and "device 1 does not exist" in message


# ---- supportedOps ---------------------------------------------------------------------


def test_supported_ops_claims_only_relu(library) -> None:
    graph = _graph(("relu0", "relu"), ("sig0", "sigmoid"))
    assert library.supported_ops(json.dumps(graph), {}, 3) == [1]
    graph = _graph(("sig0", "sigmoid"), ("relu0", "relu"), ("relu1", "relu"))
    assert library.supported_ops(json.dumps(graph), {}, 4) == [2, 3]


def test_supported_ops_declines_other_versions_and_dtypes(library) -> None:
    graph = _graph(("relu0", "relu"))
    graph["nodes"][1]["attrs"]["__op_version__"] = "2"
    assert library.supported_ops(json.dumps(graph), {}, 2) == []
    del graph["nodes"][1]["attrs"]["__op_version__"]  # missing means version 1
    assert library.supported_ops(json.dumps(graph), {}, 2) == [1]
    assert library.supported_ops(json.dumps(_graph(("r", "relu"), dtype=np.float64)), {}, 2) == []


def test_supported_ops_rejects_bad_json_and_respects_capacity(library) -> None:
    with pytest.raises(mx.PluginError, match="graph json") as error:
        library.supported_ops('{"nodes": [', {}, 1)
    assert error.value.code_name == "MX_ACC_ERR_INVALID_ARG"
    ids, count = ffi.new("int[]", 1), ffi.new("int *", -1)
    graph = ffi.new("char[]", json.dumps(_graph(("a", "relu"), ("b", "relu"))).encode())
    code, message = _status(library, "supportedOps", graph, ffi.NULL, ffi.NULL, 0, 0, ids, 1,
                            count)
    assert code == "MX_ACC_ERR_INVALID_ARG" and "holds only 1" in message
    assert count[0] == -1


# ---- loadModel, infer, unloadModel ---------------------------------------------------


def test_relu_model_matches_numpy(library) -> None:
    x = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)
    with LoadedModel(library, _graph(("relu0", "relu"), shape=x.shape), {}) as model:
        y = model.infer({"data": x})["relu0_output"]
        np.testing.assert_array_equal(y, np.maximum(x, 0))
        out = np.full(x.shape, np.nan, np.float32)
        model.infer({"data": -x}, outputs={"relu0_output": out})
        np.testing.assert_array_equal(out, np.maximum(-x, 0))


def test_empty_and_scalar_models(library) -> None:
    x = np.zeros((0, 3), np.float32)
    with LoadedModel(library, _graph(("r", "relu"), shape=(0, 3)), {}) as model:
        assert model.infer({"data": x})["r_output"].shape == (0, 3)
    # A scalar goes through the raw call: LoadedModel.infer passes inputs
    # through np.ascontiguousarray, which turns a 0-d array into shape (1,).
    spec = TensorSpec((), F32)
    x, y = np.array(-2.5, np.float32), np.array(7.0, np.float32)
    inputs, outputs = TensorArray([spec]), TensorArray([spec])
    inputs.set_host_array(0, x)
    outputs.set_host_array(0, y, writable=True)
    in_names, out_names = CStrings(["data"]), CStrings(["r_output"])
    with LoadedModel(library, _graph(("r", "relu"), shape=()), {}) as model:
        assert _status(library, "infer", ffi.new("char[]", model.model_id.encode()),
                       in_names.pointer, out_names.pointer, inputs.pointer, outputs.pointer,
                       1, 1) == ("MX_ACC_OK", "")
    assert y == 0.0


def test_load_model_refuses_other_graphs(library) -> None:
    with pytest.raises(mx.PluginUnsupportedError, match="compiles only") as error:
        LoadedModel(library, _graph(("relu0", "relu"), ("sig0", "sigmoid")), {})
    assert error.value.code_name == "MX_ACC_ERR_UNSUPPORTED"
    with pytest.raises(mx.PluginUnsupportedError, match="compiles only"):
        LoadedModel(library, _graph(("relu0", "relu"), dtype=np.float64), {})


def test_model_ids_are_unique_and_unloaded_once(library) -> None:
    graph = _graph(("relu0", "relu"))
    with LoadedModel(library, graph, {}, model_id="quickstart.dup"):
        with pytest.raises(mx.PluginError, match='"quickstart.dup" is already loaded') as error:
            LoadedModel(library, graph, {}, model_id="quickstart.dup")
        assert error.value.code_name == "MX_ACC_ERR_STATE"
    with pytest.raises(mx.PluginError, match="is not loaded") as error:
        library.unload_model("quickstart.dup", 0)
    assert error.value.code_name == "MX_ACC_ERR_NOT_FOUND"


def test_infer_checks_names_and_tensors(library) -> None:
    spec = TensorSpec((2, 3), F32)
    x, y = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    model_id = ffi.new("char[]", b"quickstart.checks")
    with LoadedModel(library, _graph(("relu0", "relu")), {}, model_id="quickstart.checks"):

        def call(in_name: str, out_name: str, in_spec: TensorSpec = spec) -> tuple[str, str]:
            inputs, outputs = TensorArray([in_spec]), TensorArray([spec])
            if in_spec == spec:
                inputs.set_host_array(0, x)
            outputs.set_host_array(0, y, writable=True)
            in_names, out_names = CStrings([in_name]), CStrings([out_name])
            return _status(library, "infer", model_id, in_names.pointer, out_names.pointer,
                           inputs.pointer, outputs.pointer, 1, 1)

        assert call("data", "relu0_output") == ("MX_ACC_OK", "")
        code, message = call("nope", "relu0_output")
        assert code == "MX_ACC_ERR_INVALID_ARG" and 'input must be "data"' in message
        code, message = call("data", "relu0_output0")
        assert code == "MX_ACC_ERR_INVALID_ARG" and 'output must be "relu0_output"' in message
        code, message = call("data", "relu0_output", TensorSpec((3, 2), F32))
        assert code == "MX_ACC_ERR_INVALID_ARG" and "model's shape" in message
        code, message = call("data", "relu0_output", TensorSpec((2, 3), np.int32))
        assert code == "MX_ACC_ERR_INVALID_ARG" and "dense float32" in message
        code, message = call("data", "relu0_output", TensorSpec((6,), F32))
        assert code == "MX_ACC_ERR_INVALID_ARG" and "model's shape" in message
    code, message = _status(library, "infer", model_id, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL,
                            0, 0)
    assert code == "MX_ACC_ERR_NOT_FOUND" and "is not loaded" in message
