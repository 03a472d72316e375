"""A small convolution -> relu -> fully connected network that every
bundled accelerator runs whole, with its weights, images and executors:
shared by the tests of the executor's bound step and of predict()."""

from __future__ import annotations

import numpy as np

import acc_host as mx

SHAPE = (2, 3, 5, 5)


def conv_fc_net(with_activation_head: bool = False) -> mx.sym.Symbol:
    """The network; with_activation_head adds the relu's output as a second
    head (the same arguments either way)."""
    data = mx.sym.Variable("data")
    conv = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv")
    act = mx.sym.Activation(conv, act_type="relu", name="relu")
    fc = mx.sym.FullyConnected(mx.sym.flatten(act), num_hidden=3, name="fc")
    return mx.sym.Group([fc, act]) if with_activation_head else fc


def weights(seed: int) -> dict[str, np.ndarray]:
    """Random weights of every argument but "data"."""
    rng = np.random.default_rng(seed)
    net = conv_fc_net()
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=SHAPE)[0]))
    return {name: np.asarray(rng.standard_normal(shape), np.float32)
            for name, shape in shapes.items() if name != "data"}


def bind(ctx: mx.Context, values: dict[str, np.ndarray],
         with_activation_head: bool = False) -> mx.runtime.executor.Executor:
    """An executor of the network on ctx holding the weights values."""
    exe = conv_fc_net(with_activation_head).simple_bind(ctx, data=SHAPE)
    for name, value in values.items():
        exe.arg_dict[name][:] = value
    return exe


def image(seed: int) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(SHAPE), np.float32)
