"""ONNX HardSwish and HardSigmoid fused into the convolution or Gemm that
feeds them on cpu_ref, as relu and clip are: the GEMM (3 x 3 by im2col,
1 x 1 with edge tiles), the channel-blocked 3 x 3 kernels, the depthwise
kernels (3 x 3 at stride 1 and 2, 5 x 5), the matrix-vector product of a
1 x 1 image and a Gemm. No _onnx_unary step runs for them (the profile
lists the steps), except where the convolution's output has a second
reader. The fused values are those of the standalone kernel bit for bit
(the same graph with every activation's input also an output, so that
nothing fuses), and within float rounding of onnxruntime's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.paths import ROOT

import acc_host as mx

pytestmark = pytest.mark.needs_onnx

RTOL, ATOL = 1e-4, 1e-5
CHANNELS = 32
# (activation output, the node that feeds it): each fuses unless kept apart.
HEADS = ("blocked_s1", "blocked_s2", "gemm3x3", "dw_s1", "dw_s2", "dw_5x5", "pw", "gate",
         "fc", "shared")


def _build(path: str, unfused: bool, seed: int = 5) -> None:
    """A graph of every convolution family with a hard activation after
    it; unfused: each activation's input is a graph output too. The
    output "shared_in" always reads the input of "shared"."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    inits = []

    def weight(name: str, shape: tuple[int, ...]) -> str:
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.3).astype(np.float32), name))
        return name

    c = CHANNELS
    nodes = []
    acts = {}

    def conv(name: str, src: str, out: int, k: int, stride: int = 1, group: int = 1) -> str:
        ins = [src, weight(f"{name}_w", (out, c // group, k, k)), weight(f"{name}_b", (out,))]
        nodes.append(helper.make_node("Conv", ins, [f"{name}_c"], pads=[k // 2] * 4,
                                      strides=[stride, stride], group=group))
        return f"{name}_c"

    def act(name: str, src: str, kind: str, **attrs: float) -> None:
        node = helper.make_node(kind, [src], [name])
        node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
        nodes.append(node)
        acts[name] = src

    act("blocked_s1", conv("blocked_s1", "x", 32, 3), "HardSwish")
    act("blocked_s2", conv("blocked_s2", "x", 32, 3, stride=2), "HardSigmoid", alpha=0.25,
        beta=0.4)
    act("gemm3x3", conv("gemm3x3", "x", 24, 3), "HardSwish")
    act("dw_s1", conv("dw_s1", "x", c, 3, group=c), "HardSwish")
    act("dw_s2", conv("dw_s2", "x", c, 3, stride=2, group=c), "HardSigmoid")
    act("dw_5x5", conv("dw_5x5", "x", c, 5, group=c), "HardSwish")
    act("pw", conv("pw", "x", 40, 1), "HardSwish")
    act("shared", conv("shared", "x", 8, 1), "HardSwish")
    nodes.append(helper.make_node("GlobalAveragePool", ["x"], ["pooled"]))
    gate_w = weight("gate_w", (c, c, 1, 1))
    nodes.append(helper.make_node("Conv", ["pooled", gate_w, weight("gate_b", (c,))],
                                  ["gate_c"]))
    act("gate", "gate_c", "HardSigmoid")
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    nodes.append(helper.make_node("Gemm", ["flat", weight("fc_w", (10, c)),
                                           weight("fc_b", (10,))], ["fc_c"], transB=1))
    act("fc", "fc_c", "HardSwish")
    outputs = list(HEADS) + ["shared_c"]
    if unfused:
        outputs += [acts[name] for name in HEADS if name != "shared"]
    graph = helper.make_graph(
        nodes, "hard_fusion",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, "h", "w"])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def _run(path: str, x: np.ndarray, threads: int,
         capfd: pytest.CaptureFixture[str]) -> tuple[list[np.ndarray], int]:
    """The outputs on cpu_ref, and the _onnx_unary steps its profile lists
    (a batch split between threads lists a step once per share)."""
    import onnx

    from acc_host.onnx.backend import prepare

    rep = prepare(onnx.load(path), accelerator="cpu_ref")
    mx.cpu_ref(0).configure(num_threads=threads)
    os.environ["ACC_CPU_REF_PROFILE"] = "1"
    try:
        capfd.readouterr()
        got = [np.asarray(v) for v in rep.run({"x": x})]
        profile = capfd.readouterr().err
    finally:
        del os.environ["ACC_CPU_REF_PROFILE"]
        mx.cpu_ref(0).configure(num_threads=1)
    assert "cpu_ref profile: step" in profile
    return got, len(set(re.findall(r"step (\d+) _onnx_unary ", profile)))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 7, 7), (1, 28, 28), (2, 19, 23)])
def test_hard_activations_fused_as_standalone(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                              shape: tuple[int, int, int],
                                              threads: int) -> None:
    """7 x 7: the small-plane depthwise kernel; 28 x 28 the row kernels;
    19 x 23, two images: odd edges and the batch."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle")
    fused, unfused = str(tmp_path / "fused.onnx"), str(tmp_path / "unfused.onnx")
    _build(fused, unfused=False)
    _build(unfused, unfused=True)
    n, h, w = shape
    # Spread so that both clamps of the hard sigmoids are reached.
    x = (2 * np.random.default_rng(h).standard_normal((n, CHANNELS, h, w))).astype(np.float32)
    got, fused_steps = _run(fused, x, threads, capfd)
    apart, unfused_steps = _run(unfused, x, threads, capfd)
    assert fused_steps == 1  # "shared": its convolution's output is read twice
    assert unfused_steps == len(HEADS)
    want = ort.InferenceSession(fused, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for name, ours, alone, theirs in zip((*HEADS, "shared_c"), got, apart, want):
        np.testing.assert_array_equal(ours, alone, err_msg=name)
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=name)
        if name in ("blocked_s1", "gemm3x3", "dw_s1", "pw"):  # HardSwish: both clamps met
            assert (ours == 0).any() and (ours > 0).any() and (ours < 0).any(), name


@pytest.mark.parametrize("isa", ["avx2", "generic"])
def test_hard_activations_fused_under_other_isas(isa: str) -> None:
    """The AVX2 kernels (the channel-blocked 3 x 3 convolutions, the AVX2
    depthwise rows and stride-2 planes) and the portable epilogue, in a
    fresh process: the ISA is chosen once."""
    env = dict(os.environ, ACC_CPU_REF_ISA=isa)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_hard_activations_fused_as_standalone"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def _standalone(path: str, shape: tuple[int, ...]) -> None:
    """HardSwish and HardSigmoid of a graph input: nothing to fuse into."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("HardSwish", ["x"], ["swish"]),
             helper.make_node("HardSigmoid", ["x"], ["gate"], alpha=0.25, beta=0.4)]
    graph = helper.make_graph(
        nodes, "hard_alone", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
         for name in ("swish", "gate")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_standalone_hard_activations_on_threads(tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    """MobileNetV3's largest plane (802 KB, shared between threads by
    cr_fast_hard_sigmoid): the same values on 1 and 2 threads, each the
    float formula's as numpy computes it (alpha x + beta, the clamp, x c)."""
    shape = (1, 16, 112, 112)
    path = str(tmp_path / "alone.onnx")
    _standalone(path, shape)
    x = (4 * np.random.default_rng(8).standard_normal(shape)).astype(np.float32)
    one, steps = _run(path, x, 1, capfd)
    two, _ = _run(path, x, 2, capfd)
    assert steps == 2
    f = np.float32
    swish_gate = np.minimum(np.maximum(x * f(1.0 / 6.0) + f(0.5), f(0)), f(1))
    want = [x * swish_gate, np.minimum(np.maximum(x * f(0.25) + f(0.4), f(0)), f(1))]
    for ours, alone, theirs in zip(one, two, want):
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(alone, ours)
