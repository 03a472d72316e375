"""Exports the networks of gluon_networks.py from MXNet 1.9.1's Gluon.

Runs in a side environment that has MXNet (it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_gluon_expected.py tests/mxnet_expected/gluon

For each network NAME: NAME-symbol.json and NAME-0000.params (export),
NAME.params (save_parameters, structural names), NAME-input.npy and
NAME-output.npy (the hybridized network's output on that input).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gluon_networks import INPUT_SHAPES, NETWORKS, build  # noqa: E402


def main() -> int:
    import mxnet as mx
    from mxnet.gluon import nn

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    mx.random.seed(3)
    rng = np.random.RandomState(5)
    for name in NETWORKS:
        net = build(nn, name)
        net.initialize(mx.init.Xavier())
        shape = INPUT_SHAPES[name]
        if name == "embedding":
            sample = rng.randint(0, 20, shape).astype(np.float32)
        else:
            sample = rng.standard_normal(shape).astype(np.float32)
        net(mx.nd.array(sample))  # finishes the deferred initialization
        # running statistics and affine terms that are not the defaults
        for param_name, param in net.collect_params().items():
            if param_name.endswith(("running_mean", "running_var", "gamma", "beta", "bias")):
                values = rng.uniform(0.5, 1.5, param.shape).astype(np.float32)
                param.set_data(mx.nd.array(values))
        net.hybridize()
        output = net(mx.nd.array(sample)).asnumpy()
        net.export(str(out / name), 0)
        net.save_parameters(str(out / f"{name}.params"))
        np.save(out / f"{name}-input.npy", sample)
        np.save(out / f"{name}-output.npy", output)
        print(name, output.shape, sorted(net.collect_params().keys())[:3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
