"""cpu_ref's symbolic mode folds BatchNorm into convolution filters, fuses
bias, residual elemwise_add and relu/clip into the producing Convolution or
FullyConnected step, and pre-packs weights at loadModel (again when infer()
passes new weights): results match the host's unfused CPU path. The
portable (generic) GEMM path runs the real models too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.paths import ROOT
from support.symbol_weights import assert_matches_host as _assert_matches_host
from support.symbol_weights import assert_new_weights_used, loaded_on_cpu_ref
from support.symbol_weights import random_weights as _weights

import acc_host as mx


def _graph() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    stem = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = mx.sym.Activation(stem, act_type="relu", name="stem_relu")
    # Conv -> BatchNorm -> + residual -> relu: all four fold into one step.
    body = mx.sym.Convolution(stem, num_filter=8, kernel=(3, 3), pad=(1, 1), name="body")
    body = mx.sym.BatchNorm(body, fix_gamma=False, eps=1e-3, name="body_bn")
    body = mx.sym.elemwise_add(body, stem, name="add")
    body = mx.sym.Activation(body, act_type="relu", name="body_relu")
    # Depthwise with relu6 (clip), strided pointwise without bias.
    dw = mx.sym.Convolution(body, num_filter=8, num_group=8, kernel=(3, 3), pad=(1, 1),
                            name="dw")
    dw = mx.sym.clip(dw, a_min=0.0, a_max=6.0, name="dw_clip")
    pw = mx.sym.Convolution(dw, num_filter=16, kernel=(1, 1), stride=(2, 2), no_bias=True,
                            name="pw")
    fc = mx.sym.FullyConnected(pw, num_hidden=10, name="fc")
    fc = mx.sym.Activation(fc, act_type="relu", name="fc_relu")
    # A second head reads an intermediate entry: that step must stay unfused.
    return mx.sym.Group([fc, mx.sym.Activation(pw, act_type="relu", name="pw_relu")])


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_graph_matches_host(threads: int) -> None:
    sym = _graph()
    data = np.random.default_rng(0).standard_normal((2, 3, 12, 12)).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=1)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        assert_new_weights_used(model, sym, data, weights,
                                _weights(sym, {"data": data.shape}, seed=2))


def _blocked_graph() -> mx.sym.Symbol:
    """3 x 3 convolutions the AVX2 build runs channel-blocked
    (conv_blocked.c: channels a multiple of 8, outputs of 16) with each
    fusion: BatchNorm and relu, a residual, stride 2 with relu6, no bias,
    and 48 input channels (two chunks of the kernel's 32)."""
    data = mx.sym.Variable("data")
    stem = mx.sym.Convolution(data, num_filter=16, kernel=(3, 3), pad=(1, 1), name="stem")
    stem = mx.sym.BatchNorm(stem, fix_gamma=False, eps=1e-3, name="stem_bn")
    stem = mx.sym.Activation(stem, act_type="relu", name="stem_relu")
    body = mx.sym.Convolution(stem, num_filter=16, kernel=(3, 3), pad=(1, 1), name="body")
    body = mx.sym.elemwise_add(body, stem, name="add")
    body = mx.sym.Activation(body, act_type="relu", name="body_relu")
    down = mx.sym.Convolution(body, num_filter=48, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                              name="down")
    down = mx.sym.clip(down, a_min=0.0, a_max=6.0, name="down_clip")
    deep = mx.sym.Convolution(down, num_filter=16, kernel=(3, 3), pad=(1, 1), no_bias=True,
                              name="deep")
    return mx.sym.FullyConnected(deep, num_hidden=10, name="fc")


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_convolutions_match_host(threads: int) -> None:
    """Odd and even sizes (11 x 9 -> 6 x 5 at stride 2), two images."""
    sym = _blocked_graph()
    data = np.random.default_rng(3).standard_normal((2, 8, 11, 9)).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=4)
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        _assert_matches_host(model.infer({"data": data}), sym, data, weights)


def test_models_on_the_generic_path() -> None:
    """The real models with the GEMM capped at its portable C micro-kernel
    (ACC_CPU_REF_ISA=generic), in a fresh process: the ISA is chosen once."""
    env = dict(os.environ, ACC_CPU_REF_ISA="generic")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(Path(__file__).with_name("test_cpu_ref_models.py")),
         f"{__file__}::test_fused_graph_matches_host"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def _fire(axis: int = 1, second_head: bool = False, same_input: bool = False,
          pooled: bool = False) -> mx.sym.Symbol:
    """A squeezenet fire module: a 1x1 squeeze, then 1x1 and 3x3 expands
    joined by Concat, read by a last 1x1 convolution (pooled: the 1x1
    expand followed by a 3x3 max pooling of stride 1, so that a Pooling
    step, not a convolution, computes that input)."""
    data = mx.sym.Variable("data")
    squeeze = mx.sym.Activation(mx.sym.Convolution(data, num_filter=4, kernel=(1, 1),
                                                   name="squeeze"), act_type="relu", name="sq_r")
    left = mx.sym.Activation(mx.sym.Convolution(squeeze, num_filter=6, kernel=(1, 1),
                                                name="e1"), act_type="relu", name="e1_r")
    right = mx.sym.Activation(mx.sym.Convolution(squeeze, num_filter=6, kernel=(3, 3),
                                                 pad=(1, 1), name="e3"), act_type="relu",
                              name="e3_r")
    if pooled:
        left = mx.sym.Pooling(left, kernel=(3, 3), pad=(1, 1), pool_type="max", name="pool")
    joined = mx.sym.Concat(left, left if same_input else right, dim=axis, name="join")
    out = mx.sym.Convolution(joined, num_filter=5, kernel=(1, 1), name="last")
    return mx.sym.Group([out, left]) if second_head else out


@pytest.mark.parametrize(("batch", "threads", "options", "in_place"), [
    (1, 1, {}, True),                      # channels of one image: written in place
    (3, 1, {}, True),                      # a batch: each convolution writes its slices
    (3, 2, {}, True),                      # ... with the images shared out
    (1, 1, {"pooled": True}, True),        # one image: any step writes in place
    (3, 1, {"pooled": True}, False),       # a batch: only convolutions write slices
    (1, 1, {"axis": 2}, False),            # along height: channels come before it
    (1, 1, {"second_head": True}, False),  # an input is also a graph output
    (3, 1, {"second_head": True}, False),
    (1, 1, {"same_input": True}, False),   # one entry twice
])
def test_concat_inputs_written_in_place(batch: int, threads: int, options: dict, in_place: bool,
                                        capfd: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Concat of channels copies nothing: the steps that compute its
    inputs write them into its output, image by image for a batch (no
    Concat step runs, as ACC_CPU_REF_PROFILE shows); otherwise the Concat
    runs. Same results as the host either way."""
    sym = _fire(**options)
    # With threads, images large enough for the pool to share them out.
    size = (7, 9) if threads == 1 else (40, 44)
    data = np.random.default_rng(3).standard_normal((batch, 3, *size)).astype(np.float32)
    weights = _weights(sym, {"data": data.shape}, seed=4)
    monkeypatch.setenv("ACC_CPU_REF_PROFILE", "1")
    with loaded_on_cpu_ref(sym, data, weights, threads) as model:
        capfd.readouterr()
        got = model.infer({"data": data})
        profile = capfd.readouterr().err
    assert "cpu_ref profile: step" in profile
    assert (" Concat " not in profile) == in_place, profile
    _assert_matches_host(got, sym, data, weights)
