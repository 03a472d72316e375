"""A batch of small planes through 1 x 1 layers on several threads: where the
batch's positions outnumber the outputs, the product is shared out by
images (each thread packs and computes its own images' columns) rather
than by outputs. The batch runs whole (ACC_CPU_REF_IMAGE_SPLIT=0: on
several threads the model would otherwise run image by image, where the
planes' last columns take another tile). The outputs equal the one-thread
outputs bit for bit and the host's unfused CPU path within float rounding,
with the fused clip and the residual added to the project layer."""

from __future__ import annotations

import numpy as np
import pytest
from support.symbol_weights import host_outputs, outputs_on_cpu_ref, random_weights

import acc_host as mx

RTOL, ATOL = 1e-4, 1e-5


def _block(channels: int, expanded: int) -> mx.sym.Symbol:
    """1 x 1 expand with relu6, 1 x 1 project, plus the block's input."""
    data = mx.sym.Variable("data")
    expand = mx.sym.Convolution(data, num_filter=expanded, kernel=(1, 1), name="expand")
    expand = mx.sym.clip(expand, a_min=0.0, a_max=6.0, name="expand_relu6")
    project = mx.sym.Convolution(expand, num_filter=channels, kernel=(1, 1), name="project")
    return mx.sym.elemwise_add(project, data, name="residual")


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(
    ("batch", "channels", "expanded", "side"),
    [(5, 32, 128, 7),   # images in groups of 2 and 3 (2 threads)
     (4, 24, 160, 9),   # 81 positions an image: groups that do not fill tiles
     (2, 40, 256, 6)],  # as many groups as images
)
def test_batch_column_groups_equal_one_thread(threads: int, batch: int, channels: int,
                                              expanded: int, side: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACC_CPU_REF_IMAGE_SPLIT", "0")
    sym = _block(channels, expanded)
    rng = np.random.default_rng(batch * side)
    data = rng.standard_normal((batch, channels, side, side)).astype(np.float32)
    weights = random_weights(sym, {"data": data.shape}, seed=channels)
    one = outputs_on_cpu_ref(sym, data, weights, 1)[0]
    several = outputs_on_cpu_ref(sym, data, weights, threads)[0]
    np.testing.assert_array_equal(several, one)
    np.testing.assert_allclose(several, host_outputs(sym, data, weights)[0], rtol=RTOL,
                               atol=ATOL)
