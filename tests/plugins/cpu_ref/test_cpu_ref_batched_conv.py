"""cpu_ref's convolutions that run a batch's images together: 1 x 1 layers
on planes under 96 positions as one product over every image's columns,
and channel-blocked 3 x 3 layers whose filters exceed 1 MiB with each
chunk of filters read once for several images (docs/cpu_ref_performance.md,
"Convolution"). A ResNet-style block on 7 x 7 planes, with the residual and
relu fused into the 1 x 1 layer, matches the host's CPU path at batch 1 and
3, and gives the same values bit for bit on 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import host_outputs, outputs_on_cpu_ref, random_weights

import acc_host as mx

# Deep sums (4,608 terms into "down") of values up to about 100: the
# absolute tolerance scales with the output's largest value.
RTOL, ATOL_SCALE = 1e-4, 1e-5


def _block() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    # 3 x 3, 64 -> 512 channels: 1.2 MB of filters (blocked, images together)
    wide = mx.sym.Convolution(data, num_filter=512, kernel=(3, 3), pad=(1, 1), name="wide")
    wide = mx.sym.Activation(wide, act_type="relu", name="wide_relu")
    # the same at stride 2 on the 7 x 7 planes (phase planes, 4 x 4 out)
    down = mx.sym.Convolution(wide, num_filter=64, kernel=(3, 3), pad=(1, 1), stride=(2, 2),
                              name="down")
    # 1 x 1, 512 -> 64 on 7 x 7 planes, residual and relu fused
    narrow = mx.sym.Convolution(wide, num_filter=64, kernel=(1, 1), name="narrow")
    out = mx.sym.Activation(mx.sym.elemwise_add(narrow, data, name="residual"),
                            act_type="relu", name="out_relu")
    # 1 x 1 on 4 x 4 planes without a residual
    small = mx.sym.Convolution(down, num_filter=48, kernel=(1, 1), name="small")
    return mx.sym.Group([out, small])


def _run(batch: int, threads: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    sym = _block()
    data = np.random.default_rng(batch).standard_normal((batch, 64, 7, 7)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=5)
    return outputs_on_cpu_ref(sym, data, weights, threads), host_outputs(sym, data, weights)


@pytest.mark.parametrize("batch", [1, 3])
def test_batched_block_matches_host_and_threads(batch: int) -> None:
    one, want = _run(batch, 1)
    two, _ = _run(batch, 2)
    assert len(one) == len(two) == len(want) == 2
    for ours, theirs, other in zip(one, want, two):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=RTOL,
                                   atol=ATOL_SCALE * float(np.abs(theirs).max()))
        np.testing.assert_array_equal(ours, other)
