"""The proposal's user example on cpu_ref: real MXNet models partitioned by
supportedOps, the unsupported operators on the CPU, results equal to the
CPU path and to MXNet's own outputs."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
from support.paths import MODELS

import acc_host as mx

NAMES = ["squeezenet1_1", "mobilenetv2_1_0", "transformer_enc", "transformer_enc_mxcodes"]
RTOL, ATOL = 1e-4, 1e-5
BUNDLED = Path(mx.__file__).parent / "_bundled" / "libcpu_ref.so"


@pytest.mark.parametrize("name", NAMES)
def test_proposal_example_on_cpu_ref(name: str) -> None:
    folder = MODELS / name
    image = np.load(folder / "input_0.npy")
    expected = [np.load(path) for path in sorted(folder.glob("expected_*.npy"))]

    # As the proposal writes it.
    ctx = mx.load_acc(BUNDLED)
    assert ctx == mx.acc() == mx.acc(0)
    ctx_list = [mx.acc(i) for i in mx.test_utils.list_acc(mx.acc())]
    assert ctx_list[0] == ctx
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    mod = mx.mod.Module(symbol=sym, context=ctx)
    mod.bind(data_shapes=[("data", image.shape)], label_shapes=mod.label_shapes)
    mod.set_params(arg_params, aux_params, allow_missing=True)
    mx_img = mx.nd.array(image, ctx=ctx)
    Batch = namedtuple("Batch", ["data"])
    mod.forward(Batch([mx_img]))

    outputs = mod.get_outputs()
    assert len(outputs) == len(expected)
    for output, reference in zip(outputs, expected):
        assert output.context == ctx
        np.testing.assert_allclose(output.asnumpy(), reference, rtol=RTOL, atol=ATOL)
    placement = mod.executor.placement()
    assert "cpu_ref(0)" in placement.values()  # something really ran on the accelerator
    partition = mod.executor.partition
    assert partition is not None and partition.subgraphs


def _small_net():
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    act = mx.sym.Activation(conv, act_type="relu", name="relu")
    # cpu_ref computes in float32 and float16 only: float64 arithmetic is
    # declined, so this node runs on the CPU.
    wide = mx.sym.Cast(act, dtype="float64", name="wide")
    bent = mx.sym.Cast(mx.sym.arcsinh(wide, name="bent"), dtype="float32", name="narrow")
    pooled = mx.sym.sum(bent, axis=(2, 3), name="pooled")
    return mx.sym.FullyConnected(pooled, num_hidden=3, name="fc")


def _bind(ctx, weights, shape=(2, 3, 6, 6)):
    exe = _small_net().simple_bind(ctx, data=shape)
    for name, value in weights.items():
        exe.arg_dict[name][:] = value
    return exe


BUNDLED_ACCELERATORS = sorted(library.name for library in mx.libraries()
                              if Path(library.path).parent == BUNDLED.parent)


@pytest.mark.usefixtures("offload_everything")
@pytest.mark.parametrize("accelerator", BUNDLED_ACCELERATORS)
def test_changed_weights_reach_the_compiled_subgraph(accelerator: str) -> None:
    rng = np.random.default_rng(0)
    shapes = _small_net().infer_shape(data=(2, 3, 6, 6))[0]
    weights = {name: rng.standard_normal(shape).astype(np.float32)
               for name, shape in zip(_small_net().list_arguments(), shapes) if name != "data"}
    image = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    ctx = mx.Context(accelerator, 0)
    on_acc, on_cpu = _bind(ctx, weights), _bind(mx.cpu(), weights)
    placement = on_acc.placement()
    assert placement["conv"] == str(ctx) and placement["bent"] == "cpu(0)"
    np.testing.assert_allclose(on_acc.forward(data=image)[0].asnumpy(),
                               on_cpu.forward(data=image)[0].asnumpy(), rtol=RTOL, atol=ATOL)
    for exe in (on_acc, on_cpu):
        exe.arg_dict["conv_weight"][:] = exe.arg_dict["conv_weight"].asnumpy() * -2.0
        exe.arg_dict["fc_bias"] += 1.0
    after_acc = on_acc.forward(data=image)[0].asnumpy()
    np.testing.assert_allclose(after_acc, on_cpu.forward(data=image)[0].asnumpy(),
                               rtol=RTOL, atol=ATOL)
    operators = on_acc.subgraphs
    assert all(op.loads == 1 for op in operators)  # refreshed, never recompiled
    assert all(op.weight_refreshes == 1 for op in operators if op.spec.weights)
    refreshes = [op.weight_refreshes for op in operators]
    on_acc.forward(data=image)
    assert [op.weight_refreshes for op in operators] == refreshes  # unchanged: nothing sent
    on_acc.close()
    assert all(op.model is None for op in operators)


def test_two_devices_hold_models_at_once() -> None:
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import numpy as np
        import acc_host as mx
        prefix = {str(MODELS / 'transformer_enc' / 'model')!r}
        image = np.load({str(MODELS / 'transformer_enc' / 'input_0.npy')!r})
        expected = np.load({str(MODELS / 'transformer_enc' / 'expected_0.npy')!r})
        sym, arg, aux = mx.model.load_checkpoint(prefix, 0)
        executors = []
        for dev_id in mx.test_utils.list_acc(mx.cpu_ref()):
            exe = sym.simple_bind(mx.cpu_ref(dev_id), data=image.shape)
            for name, value in {{**arg, **aux}}.items():
                (exe.arg_dict if name in exe.arg_dict else exe.aux_dict)[name][:] = value
            executors.append(exe)
        for exe in executors:  # both compiled and alive before either is used again
            exe.forward(data=image)
        for exe in executors:
            out = exe.forward(data=image)[0]
            assert out.context.device_id == executors.index(exe)
            np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-4, atol=1e-5)
        print(len(executors))
    """)
    env = dict(os.environ, CPU_REF_NUM_DEVICES="2")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"


@pytest.mark.slow  # builds a variant of cpu_ref (18 CPU seconds)
@pytest.mark.parametrize("name", NAMES)
def test_a_plugin_with_two_operators_splits_models_and_stays_right(
        name: str, build_cpu_ref_variant) -> None:
    """cpu_ref built to support only Convolution and Activation: real models
    break into many subgraphs around the CPU's operators, same answers."""
    ctx = mx.load_acc(build_cpu_ref_variant("convact", CR_NAME='"convact"',
                                            CPU_REF_ONLY_OPS='"Convolution,Activation"'))
    assert ctx.configure(query="ops")["ops"] == "Activation:1,Convolution:1"
    folder = MODELS / name
    image = np.load(folder / "input_0.npy")
    sym, arg_params, aux_params = mx.model.load_checkpoint(str(folder / "model"), 0)
    exe = sym.simple_bind(ctx, data=image.shape)
    for key, value in {**arg_params, **aux_params}.items():
        (exe.arg_dict if key in exe.arg_dict else exe.aux_dict)[key][:] = value
    outputs = exe.forward(data=image)
    for output, path in zip(outputs, sorted(folder.glob("expected_*.npy"))):
        np.testing.assert_allclose(output.asnumpy(), np.load(path), rtol=RTOL, atol=ATOL)
    placement = exe.placement()
    on_acc = {node for node, where in placement.items() if where == "convact(0)"}
    ops = {node.name: node.op for node in sym.graph.nodes if not node.is_variable}
    assert on_acc == {node for node, op in ops.items() if op in ("Convolution", "Activation")}
    if name in ("squeezenet1_1", "mobilenetv2_1_0"):  # many subgraphs between CPU operators
        assert len(exe.partition.subgraphs) >= 5
    else:  # the encoders have one Activation: one subgraph, the rest on the CPU
        assert len(on_acc) == len(exe.partition.subgraphs) == 1
