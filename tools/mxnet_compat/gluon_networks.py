"""Small Gluon networks defined identically for MXNet and acc-host.

``build(nn, name)`` takes the ``gluon.nn`` module of either (MXNet's or
acc_host's) and returns the network, so the test defines exactly what
make_gluon_expected.py exported. Inputs are fixed by INPUT_SHAPES.
"""

from __future__ import annotations

from typing import Any

INPUT_SHAPES = {"conv2d": (2, 3, 8, 8), "embedding": (2, 5), "conv3d": (2, 1, 4, 6, 6),
                "conv1d": (2, 2, 12)}
NETWORKS = tuple(INPUT_SHAPES)


def build(nn: Any, name: str) -> Any:
    net = nn.HybridSequential(prefix=f"{name}_")
    with net.name_scope():
        if name == "conv2d":
            net.add(nn.Conv2D(4, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"),
                    nn.MaxPool2D(2), nn.Conv2D(8, 3, strides=2, activation="relu"),
                    nn.AvgPool2D(pool_size=1), nn.GlobalAvgPool2D(), nn.Flatten(),
                    nn.Dense(16, activation="tanh"), nn.Dropout(0.5), nn.LayerNorm(),
                    nn.Dense(5))
        elif name == "embedding":
            net.add(nn.Embedding(20, 6), nn.Flatten(), nn.Dense(7, activation="sigmoid"),
                    nn.Dense(3, use_bias=False))
        elif name == "conv3d":
            net.add(nn.Conv3D(3, (2, 3, 3), padding=(0, 1, 1)), nn.BatchNorm(axis=1),
                    nn.MaxPool3D((1, 2, 2)), nn.GlobalMaxPool3D(), nn.Dense(4))
        elif name == "conv1d":
            net.add(nn.Conv1D(5, 3, dilation=2), nn.Activation("softrelu"), nn.AvgPool1D(2),
                    nn.GlobalMaxPool1D(), nn.Flatten(), nn.Dense(2, in_units=5))
        else:
            raise KeyError(name)
    return net
