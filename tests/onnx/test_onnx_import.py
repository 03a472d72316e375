"""mx.onnx.import_model and the ONNX backend, directly (the official suite is in
test_onnx_backend*.py). onnxruntime serves only as an oracle here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.paths import ONNX_MODELS

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import acc_host as mx  # noqa: E402


def small_cnn(opset: int = 13) -> onnx.ModelProto:
    """Conv + Relu + MaxPool + Flatten + Gemm + Softmax."""
    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
               "B": rng.standard_normal(4).astype(np.float32),
               "G": rng.standard_normal((5, 64)).astype(np.float32),
               "C": rng.standard_normal(5).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "G", "C"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"])]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # what onnxruntime (the oracle) reads
    return model


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_import_model_matches_onnxruntime(tmp_path):
    model = small_cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    path = tmp_path / "small.onnx"
    onnx.save(model, str(path))
    for source in (model, str(path)):
        sym, arg_params, aux_params = mx.onnx.import_model(source)
        assert sym.list_arguments()[0] == "x"
        assert sorted(arg_params) == ["B", "C", "G", "W"] and aux_params == {}
        ops = {node["op"] for node in json.loads(sym.tojson())["nodes"]}
        assert {"Convolution", "Activation", "Pooling", "FullyConnected"} <= ops
        executor = sym.bind(mx.cpu(), {"x": mx.nd.array(x), **arg_params}, data_names=["x"])
        out = executor.forward()[0].asnumpy()
        np.testing.assert_allclose(out, onnxruntime_outputs(model, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_module_runs_imported_model():
    model = small_cnn()
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    sym, arg_params, aux_params = mx.onnx.import_model(model)
    mod = mx.mod.Module(symbol=sym, data_names=["x"], label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("x", x.shape)], for_training=False)
    mod.set_params(arg_params, aux_params)
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]))
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(),
                               onnxruntime_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_unsupported_operators_reported_at_once():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("TfIdfVectorizer", ["a"], ["b"], mode="TF"),
             helper.make_node("StringNormalizer", ["b"], ["y"]),
             helper.make_node("StringNormalizer", ["b"], ["z"])]
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 2])
                       for n in ("x", "w", "r")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(mx.UnsupportedOnnxOperatorError) as info:
        mx.onnx.import_model(model)
    message = str(info.value)
    for op in ("TfIdfVectorizer", "StringNormalizer"):
        assert f"{op} (domain ai.onnx, opset 17)" in message
    assert message.count("StringNormalizer") == 1  # listed once per (op, opset)
    assert [u[1] for u in info.value.unsupported] == ["TfIdfVectorizer", "StringNormalizer"]
    assert isinstance(info.value, mx.OperatorError)


def test_dynamic_attribute_input_imports_and_runs_on_the_host_path():
    from acc_host.onnx.backend import AccHostBackend

    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    sym, _, _ = mx.onnx.import_model(model)  # the shape is data: resolved when it runs
    assert '"op": "_dyn_reshape"' in sym.tojson()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    rep = AccHostBackend.prepare(model)
    (y,) = rep.run([x, np.array([3, 2], dtype=np.int64)])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = rep.run([x, np.array([1, 6], dtype=np.int64)])
    np.testing.assert_array_equal(y, x.reshape(1, 6))


def test_constants_fold_into_attributes():
    shape = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(
        np.array([0, -1], dtype=np.int64)))
    nodes = [shape, helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(
        nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    sym, arg_params, _ = mx.onnx.import_model(model)
    assert sym.list_arguments() == ["x"] and arg_params == {}
    assert '"shape": "(0, -1)"' in sym.tojson()


def test_backend_api_and_contexts():
    from acc_host.onnx import backend

    model = small_cnn()
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = onnxruntime_outputs(model, {"x": x})[0]
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    np.testing.assert_allclose(backend.run_model(model, [x])[0], expected, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(backend.prepare(model).run({"x": x})[0], expected,
                               rtol=1e-5, atol=1e-6)
    (out,) = backend.run_node(helper.make_node("Relu", ["a"], ["b"]), [x])
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    try:
        ctx = mx.cpu_ref(0)
    except AttributeError:
        pytest.skip("the bundled cpu_ref plugin is not loaded")
    for accelerator in ("cpu_ref", ctx):
        rep = backend.prepare(model, accelerator=accelerator)
        np.testing.assert_allclose(rep.run([x])[0], expected, rtol=1e-4, atol=1e-5)
        assert any("cpu_ref" in str(device) for device in rep.executor.placement().values())


def test_backend_rep_rebinds_for_new_shapes_and_keeps_its_inputs_checked():
    """A prepared model with a free batch dimension, run on cpu_ref: each
    new batch binds an executor for it, and going back reuses the right
    one (the inputs as numpy arrays, lists and nested lists)."""
    from acc_host.onnx import backend

    model = small_cnn()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    rng = np.random.default_rng(7)
    images = {n: rng.standard_normal((n, 3, 8, 8)).astype(np.float32) for n in (1, 3)}
    rep = backend.prepare(model, accelerator="cpu_ref")
    for n in (1, 3, 1, 3):
        x = images[n]
        expected = onnxruntime_outputs(model, {"x": x})[0]
        for feed in ({"x": x}, [x], {"x": x.tolist()}):
            (got,) = rep.run(feed)
            assert got.shape == (n, 5)
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        assert rep._key == (("x", (n, 3, 8, 8), np.dtype(np.float32)),)
        # A dict of arrays as bound goes to the bound executor as it is.
        assert rep._plain
        # ... and one not C-contiguous is converted on the way.
        (got,) = rep.run({"x": np.asfortranarray(x)})
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="takes 1 inputs"):
        rep.run([images[1], images[1]])


def test_import_does_not_load_onnx():
    code = "import sys, acc_host as mx; mx.onnx.import_model; print('onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().endswith("False")


def test_backend_module_imports_by_name_in_a_fresh_process():
    """`from acc_host.onnx import backend` as a process's first use of it
    (it once recursed: the lazy attribute imported itself by that form)."""
    code = ("from acc_host.onnx import backend; import acc_host as mx; "
            "print(mx.onnx.backend is backend and hasattr(backend, 'prepare'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().endswith("True")


def test_reading_needs_no_onnx_package(monkeypatch):
    """acc_host.onnx.reader reads a model where onnx cannot be imported;
    the exporter, which writes with onnx, says it is missing."""
    from acc_host.onnx import _onnx

    data = small_cnn().SerializeToString()
    monkeypatch.setitem(sys.modules, "onnx", None)  # import fails
    sym, arg_params, _ = mx.onnx.import_model(data)
    assert len(sym.list_outputs()) == 1 and arg_params
    with pytest.raises(_onnx.OnnxMissingError, match="needs the 'onnx' package"):
        mx.onnx.export_model(sym, arg_params, in_shapes=[(1, 3, 8, 8)])
    assert issubclass(_onnx.OnnxMissingError, mx.AccHostError)


@pytest.mark.slow
def test_no_oracle_computes_anything() -> None:
    """acc-host's own operators compute every result: a light real model
    and a PyTorch-exported one import and run through the backend (CPU path
    and cpu_ref) in a process where onnxruntime and onnx.reference cannot be
    imported."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        sys.modules["onnxruntime"] = None      # import fails
        sys.modules["onnx.reference"] = None
        import onnx
        from acc_host.onnx.backend import AccHostBackend, CpuRefBackend
        for backend in (AccHostBackend, CpuRefBackend):
            for path in sys.argv[1:]:
                model = onnx.load(path)
                rep = backend.prepare(model)
                (name,) = rep.input_names
                value = [v for v in model.graph.input if v.name == name][0]
                shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
                rep.run([np.ones(shape, np.float32)])
        assert "onnxruntime" not in {m for m in sys.modules if sys.modules[m] is not None}
        print("ok")
    """)
    model = ONNX_MODELS / "resnet_small.onnx"
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    result = subprocess.run([sys.executable, "-c", script, str(light / "light_squeezenet.onnx"),
                             str(model)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_failed_import_leaves_no_failure_for_a_later_waitall() -> None:
    """Constant folding runs through an executor; when it fails (a Gather
    index out of range), the import raises, and nothing of that failure is
    left on the engine for an unrelated mx.nd.waitall() to raise later."""
    data = helper.make_tensor("d", TensorProto.FLOAT, [3], [0, 1, 2])
    index = helper.make_tensor("i", TensorProto.INT64, [1], [256])
    graph = helper.make_graph([helper.make_node("Gather", ["d", "i"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              initializer=[data, index])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    try:
        mx.nd.waitall()  # start from an engine that holds no failure of another test
    except Exception:  # whatever an earlier test left
        pass
    with pytest.raises(mx.errors.OperatorError, match="out of range"):
        mx.onnx.import_model(model)
    mx.nd.waitall()
