"""One image's 3 x 3 stride-1 depthwise layer on several threads, shared out
by output rows where its planes are large next to its channel count (the
1 x 1 layers around it then split their columns too): each share reads one
row above and below its own, the rows outside the plane are padding, and
the planes of a share are taken in parts a late thread can hand over. The
outputs equal the one-thread outputs bit for bit (the same kernel computes
each row) and the host's unfused CPU path within float rounding, with the
fused BatchNorm, clip and residual."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import host_outputs, outputs_on_cpu_ref, random_weights

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5


def _block(channels: int, residual: bool) -> mx.sym.Symbol:
    """MobileNetV2's inverted residual: 1 x 1 expand, 3 x 3 depthwise with
    BatchNorm and relu6, 1 x 1 project, and optionally a depthwise layer
    whose output adds the block's input (a residual fused into it)."""
    data = mx.sym.Variable("data")
    expand = mx.sym.Convolution(data, num_filter=channels, kernel=(1, 1), name="expand")
    expand = mx.sym.clip(expand, a_min=0.0, a_max=6.0, name="expand_relu6")
    dw = mx.sym.Convolution(expand, num_filter=channels, num_group=channels, kernel=(3, 3),
                            pad=(1, 1), name="dw")
    dw = mx.sym.BatchNorm(dw, fix_gamma=False, eps=1e-3, name="dw_bn")
    dw = mx.sym.clip(dw, a_min=0.0, a_max=6.0, name="dw_relu6")
    out = mx.sym.Convolution(dw, num_filter=16, kernel=(1, 1), name="project")
    if residual:
        again = mx.sym.Convolution(out, num_filter=16, num_group=16, kernel=(3, 3), pad=(1, 1),
                                   name="dw_residual")
        out = mx.sym.elemwise_add(again, out, name="residual")
    return out


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(
    ("channels", "height", "width", "residual"),
    [(16, 50, 47, False),   # rows split 25 / 25, a masked tail in each row
     (26, 41, 64, True),    # an odd row count, planes in parts of 6 and 7
     (40, 7, 130, False)],  # few rows: 3 and 4 per share at 2 threads
)
def test_depthwise_rows_equal_one_thread(threads: int, channels: int, height: int, width: int,
                                         residual: bool) -> None:
    sym = _block(channels, residual)
    data = np.random.default_rng(channels).standard_normal((1, 3, height, width))
    data = data.astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=height)
    one = outputs_on_cpu_ref(sym, data, weights, 1)[0]
    several = outputs_on_cpu_ref(sym, data, weights, threads)[0]
    np.testing.assert_array_equal(several, one)
    np.testing.assert_allclose(several, host_outputs(sym, data, weights)[0], rtol=RTOL,
                               atol=ATOL)
