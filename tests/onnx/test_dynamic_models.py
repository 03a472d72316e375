"""Models with symbolic dimensions, against onnxruntime (an independent
oracle) and PyTorch's own outputs: the PyTorch exports of
tests/onnx_models/dynamic (make_dynamic_models.py) at several shapes on the
CPU path, cpu_ref and mlu_sim, imported once (no re-import between shapes:
``rep.imports`` and the plan cache's stats say so); hand-built ONNX graphs
whose shape arithmetic (Shape, Gather, Concat, Range, Resize by computed
sizes, ConstantOfShape) is worked out at bind time; data-dependent shapes
(NonZero, a Reshape by input values) on the host path, refused by name for
offload; ``acc-host run`` with --shape."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX models need the onnx test extra")
ort = pytest.importorskip("onnxruntime", reason="the oracle is onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import acc_host as mx  # noqa: E402
from acc_host.onnx.backend import AccHostBackend, CpuRefBackend, MluBackend  # noqa: E402

DYNAMIC = Path(__file__).resolve().parent.parent / "onnx_models" / "dynamic"
BACKENDS = {"cpu": AccHostBackend, "cpu_ref": CpuRefBackend, "mlu": MluBackend}
MODELS = {"cnn_dynamic": "image", "encoder_dynamic": "tokens"}


def samples(name: str) -> list[tuple[np.ndarray, list[np.ndarray]]]:
    data = np.load(DYNAMIC / f"{name}.npz")
    result = []
    k = 0
    while f"input_{k}" in data.files:
        outputs = []
        while f"output_{k}_{len(outputs)}" in data.files:
            outputs.append(data[f"output_{k}_{len(outputs)}"])
        result.append((data[f"input_{k}"], outputs))
        k += 1
    return result


def onnxruntime_run(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = model if isinstance(model, (str, Path)) else model.SerializeToString()
    session = ort.InferenceSession(str(source) if isinstance(source, Path) else source,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.mark.parametrize("target", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_pytorch_dynamic_export_matches_onnxruntime_at_every_shape(name, target):
    path = DYNAMIC / f"{name}.onnx"
    rep = BACKENDS[target].prepare(onnx.load(str(path)))
    cases = samples(name)
    assert len({x.shape for x, _ in cases}) == len(cases) >= 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # mlu_sim's fallback of operators it lacks
        for _ in range(2):
            for x, torch_outputs in cases:
                outputs = rep.run([x])
                expected = onnxruntime_run(path, {MODELS[name]: x})
                assert len(outputs) == len(expected) == len(torch_outputs)
                for got, want, torch_out in zip(outputs, expected, torch_outputs):
                    assert got.shape == want.shape
                    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
                    np.testing.assert_allclose(got, torch_out, rtol=1e-4, atol=1e-5)
    stats = rep.plans.stats()
    assert rep.imports == 1  # imported once, planned per shape
    assert stats.misses == len(cases) and stats.hits == len(cases) and stats.evictions == 0


def test_cpu_ref_runs_each_dynamic_model_as_one_subgraph():
    for name, data_name in MODELS.items():
        rep = CpuRefBackend.prepare(onnx.load(str(DYNAMIC / f"{name}.onnx")))
        for x, _ in samples(name)[:2]:
            rep.run([x])
            executor = rep.plans.peek(((data_name, x.shape, x.dtype),))
            assert executor.plan.single_subgraph
            ops = {node.op for node in executor._graph.nodes}
            # the shape arithmetic was worked out at bind: none of it is left
            assert not ops & {"_onnx_shape", "_onnx_size", "_onnx_gather", "_dyn_reshape",
                              "_dyn_slice", "_dyn_resize", "_onnx_unsqueeze"}, ops


@pytest.mark.parametrize("name", sorted(MODELS))
def test_imported_symbol_keeps_symbolic_dimensions_and_rebinds(name):
    sym, arg_params, aux_params = mx.onnx.import_model(str(DYNAMIC / f"{name}.onnx"))
    data_name = MODELS[name]
    variable = json.loads(sym.tojson())["nodes"][0]
    assert variable["name"] == data_name
    hint = variable["attrs"]["__shape__"]
    assert hint.startswith("(0,") and " 0" in hint  # batch (and more) stay unknown
    cases = samples(name)
    first, _ = cases[0]
    args = {**arg_params, data_name: mx.nd.array(first)}
    executor = sym.bind(mx.cpu(), args, aux_states=aux_params, data_names=[data_name])
    seen = []
    for x, torch_outputs in cases:
        executor = executor.reshape(allow_up_sizing=True, **{data_name: x.shape})
        outputs = executor.predict(**{data_name: x})
        for got, want in zip(outputs, torch_outputs):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        seen.append(executor)
    again = executor.reshape(allow_up_sizing=True, **{data_name: cases[1][0].shape})
    assert again is seen[1]  # planned before: the family's plan cache hands it back
    stats = executor.plan_cache_stats()
    assert stats.hits >= 1 and stats.misses == len(cases) - 1


def test_simple_bind_at_another_batch_and_input_shapes_override():
    sym, arg_params, aux_params = mx.onnx.import_model(str(DYNAMIC / "cnn_dynamic.onnx"))
    executor = sym.simple_bind(mx.cpu(), image=(5, 3, 20, 12))
    executor.copy_params_from(arg_params, aux_params)
    x = np.random.default_rng(0).standard_normal((5, 3, 20, 12)).astype(np.float32)
    expected = onnxruntime_run(DYNAMIC / "cnn_dynamic.onnx", {"image": x})
    for got, want in zip(executor.predict(image=x), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # a model exported with a fixed batch of 2: input_shapes replaces it
    resnet = Path(__file__).resolve().parent.parent / "onnx_models" / "resnet_small.onnx"
    fixed, _, _ = mx.onnx.import_model(str(resnet))
    with pytest.raises(mx.ShapeError, match="__shape__"):
        fixed.simple_bind(mx.cpu(), input=(1, 3, 32, 32))
    rebatched, args, aux = mx.onnx.import_model(str(resnet), input_shapes={"input": (1, 3, 32, 32)})
    executor = rebatched.simple_bind(mx.cpu(), input=(1, 3, 32, 32))
    executor.copy_params_from(args, aux)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(executor.predict(input=x)[0],
                               onnxruntime_run(resnet, {"input": np.repeat(x, 2, 0)})[0][:1],
                               rtol=1e-4, atol=1e-5)
    # a symbolic dimension is never pinned by input_shapes
    sym, _, _ = mx.onnx.import_model(str(DYNAMIC / "cnn_dynamic.onnx"),
                                     input_shapes={"image": (4, 3, 16, 16)})
    assert json.loads(sym.tojson())["nodes"][0]["attrs"]["__shape__"] == "(0, 3, 0, 0)"
    with pytest.raises(mx.ShapeError, match="dimensions"):
        mx.onnx.import_model(str(DYNAMIC / "cnn_dynamic.onnx"), input_shapes={"image": (4, 3)})


# ---- hand-built shape arithmetic -------------------------------------------------------------

def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "dynamic", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _int64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def shape_chain_model():
    """y = Reshape(x, [batch, -1]) + Range(0, rows*cols) * ConstantOfShape;
    z = Resize(x, sizes = Shape(x)[2:] * 2) (nearest); all from Shape(x)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axis0"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus1"], ["flat"], axis=0),
        helper.make_node("Reshape", ["x", "flat"], ["r"]),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Div", ["n", "b"], ["per"]),
        helper.make_node("Range", ["zero", "per", "one"], ["steps"]),
        helper.make_node("Cast", ["steps"], ["stepsf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["per", "axis0"], ["per1"]),
        helper.make_node("Concat", ["b1", "per1"], ["full"], axis=0),
        helper.make_node("ConstantOfShape", ["full"], ["ones"],
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Mul", ["stepsf", "ones"], ["ramp"]),
        helper.make_node("Add", ["r", "ramp"], ["y"]),
        helper.make_node("Slice", ["s", "two", "four"], ["hw"]),
        helper.make_node("Mul", ["hw", "twos"], ["hw2"]),
        helper.make_node("Slice", ["s", "zero1", "two"], ["nc"]),
        helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["z"], mode="nearest"),
    ]
    inits = [_int64("zero", 0), _int64("one", 1), _int64("axis0", [0]), _int64("minus1", [-1]),
             _int64("two", [2]), _int64("four", [4]), _int64("twos", [2, 2]),
             _int64("zero1", [0])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                        ["n", 3, "h", "w"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)


@pytest.mark.parametrize("target", sorted(BACKENDS))
def test_shape_arithmetic_is_worked_out_at_bind_for_each_shape(target):
    model = shape_chain_model()
    rep = BACKENDS[target].prepare(model)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for shape in ((1, 3, 4, 5), (2, 3, 6, 2), (3, 3, 1, 7), (1, 3, 4, 5)):
            x = rng.standard_normal(shape).astype(np.float32)
            got = rep.run([x])
            for a, b in zip(got, onnxruntime_run(model, {"x": x})):
                assert a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=1e-6)
    assert rep.imports == 1 and rep.plans.stats().hits == 1


def test_acc_host_run_takes_the_shape_of_a_symbolic_model():
    for shape, acc in (("1,3,20,30", "cpu_ref"), ("2,3,9,17", "cpu")):
        done = subprocess.run([sys.executable, "-m", "acc_host", "run",
                               str(DYNAMIC / "cnn_dynamic.onnx"), "--acc", acc,
                               "--shape", f"image={shape}", "--json", "--repeat", "1",
                               "--no-progress"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        dims = tuple(int(d) for d in shape.split(","))
        assert [tuple(o["shape"]) for o in report["outputs"]] == [(dims[0], 10),
                                                                   (dims[0], 4, *dims[2:])]
        if acc == "cpu_ref":
            assert report["where"]["on_cpu"] == 0 and report["where"]["subgraphs"] == 1


# ---- data-dependent shapes -------------------------------------------------------------------

def nonzero_model():
    nodes = [helper.make_node("NonZero", ["x"], ["idx"]),
             helper.make_node("Transpose", ["idx"], ["t"], perm=[1, 0]),
             helper.make_node("Shape", ["t"], ["s"]),
             helper.make_node("Relu", ["x"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                  [helper.make_tensor_value_info("t", TensorProto.INT64, None),
                   helper.make_tensor_value_info("s", TensorProto.INT64, None),
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def reshape_by_data_model():
    nodes = [helper.make_node("Cast", ["v"], ["vi"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "vi"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                          helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


@pytest.mark.parametrize("target", ["cpu", "cpu_ref"])
def test_data_dependent_shapes_run_on_the_host_and_are_refused_for_offload(target):
    rng = np.random.default_rng(3)
    model = nonzero_model()
    rep = BACKENDS[target].prepare(model)
    for _ in range(3):
        x = (rng.standard_normal((3, 4)) > 0.3).astype(np.float32) * rng.standard_normal((3, 4))
        got = rep.run([x.astype(np.float32)])
        for a, b in zip(got, onnxruntime_run(model, {"x": x.astype(np.float32)})):
            np.testing.assert_array_equal(a, b)
    model = reshape_by_data_model()
    rep = BACKENDS[target].prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for target_shape in ((3, 4), (12, 1), (-1, 2)):
        v = np.array(target_shape, np.float32)
        (y,) = rep.run([x, v])
        np.testing.assert_array_equal(y, onnxruntime_run(model, {"x": x, "v": v})[0])
    executor = rep.executor
    assert executor.data_dependent
    if target == "cpu_ref":
        assert "data-dependent shapes" in executor.offload_refused
        assert "_dyn_reshape" in executor.offload_refused


def test_offload_refusal_names_the_data_dependent_operator(tmp_path):
    path = tmp_path / "nonzero.onnx"
    onnx.save(nonzero_model(), str(path))
    sym, args, aux = mx.onnx.import_model(str(path))
    x = np.eye(3, 4, dtype=np.float32)
    with pytest.warns(UserWarning, match="not offloaded to cpu_ref.*_onnx_nonzero"):
        executor = sym.bind(mx.cpu_ref(0), {**args, "x": mx.nd.array(x)}, aux_states=aux,
                            data_names=["x"])
    outputs = executor.predict(x=x)
    np.testing.assert_array_equal(outputs[0], np.argwhere(x))
    done = subprocess.run([sys.executable, "-m", "acc_host", "partition", str(path), "--acc",
                           "cpu_ref"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not offloaded: data-dependent shapes" in done.stdout  # the static part is
    assert "_onnx_nonzero" in done.stdout
