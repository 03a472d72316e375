"""Networks the mlu_sim tests and benchmarks/mlu_fusion.py build with
mx.sym, and their random weights."""

from __future__ import annotations

from typing import Any

import numpy as np

import acc_host as mx

__all__ = ["net_weights", "resnet18_style"]


def net_weights(symbol: Any, shape: tuple, seed: int) -> dict[str, np.ndarray]:
    """Random weights for symbol at input shape: arguments N(0, 0.2), BatchNorm
    variances in [0.5, 1.5), other auxiliary states N(0, 0.1)."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = symbol.infer_shape(data=shape)
    weights = {name: (rng.standard_normal(s) * 0.2).astype(np.float32)
               for name, s in zip(symbol.list_arguments(), arg_shapes) if name != "data"}
    for name, s in zip(symbol.list_auxiliary_states(), aux_shapes):
        weights[name] = (rng.random(s) + 0.5).astype(np.float32) if "var" in name else \
            rng.standard_normal(s).astype(np.float32) * 0.1
    return weights


def resnet18_style(widths: tuple[int, ...] = (16, 32, 64, 128)) -> Any:
    """ResNet-18's layout (a 7x7 stem, four stages of two basic blocks with
    projection shortcuts where the shape changes, global pooling, a
    classifier) at reduced widths so that the test stays fast."""
    def conv_bn(x: Any, name: str, channels: int, kernel: int, stride: int,
                relu: bool) -> Any:
        x = mx.sym.Convolution(x, num_filter=channels, kernel=(kernel, kernel),
                               stride=(stride, stride), pad=(kernel // 2, kernel // 2),
                               no_bias=True, name=f"{name}_conv")
        x = mx.sym.BatchNorm(x, fix_gamma=False, name=f"{name}_bn")
        return mx.sym.Activation(x, act_type="relu", name=f"{name}_relu") if relu else x

    x = conv_bn(mx.sym.Variable("data"), "stem", widths[0], 7, 2, True)
    x = mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max",
                       name="stem_pool")
    channels = widths[0]
    for stage, width in enumerate(widths):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"s{stage}b{block}"
            y = conv_bn(x, f"{name}_a", width, 3, stride, True)
            y = conv_bn(y, f"{name}_b", width, 3, 1, False)
            shortcut = x if stride == 1 and channels == width else \
                conv_bn(x, f"{name}_proj", width, 1, stride, False)
            x = mx.sym.Activation(mx.sym.elemwise_add(y, shortcut, name=f"{name}_add"),
                                  act_type="relu", name=f"{name}_out")
            channels = width
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x, name="flat"), num_hidden=10, name="fc")
    return mx.sym.softmax(x, name="prob")
