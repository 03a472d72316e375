"""Exports the MXNet checkpoint that benchmarks/first_inference.py loads: a
Gluon ResNet-50 v1 with random weights, as MXNet 1.9.1 writes it.

Run it with a Python that has MXNet 1.x (not a dependency of acc-host, and
the project's own interpreter must not have it):

    python3 -m venv /path/to/mxenv
    /path/to/mxenv/bin/pip install mxnet==1.9.1 'numpy<1.24'
    /path/to/mxenv/bin/python benchmarks/zoo/export_mxnet_zoo.py [--out DIR]

It writes into --out (default: benchmarks/zoo/models, which git ignores; the
parameters are about 100 MB and are not shipped):

* ``resnet50_v1-symbol.json`` and ``resnet50_v1-0000.params``: the checkpoint
  (``mx.model.load_checkpoint(prefix, 0)`` reads it), made by
  ``gluon.model_zoo.vision.resnet50_v1()``, initialised with Xavier weights
  (seed 0), run once, hybridized, run again and exported by ``HybridBlock.export``;
* ``resnet50_v1.npz``: a sample input ``data`` of shape (1, 3, 224, 224) and
  MXNet's output for it (``output_0``).

BatchNorm layers get non-trivial running statistics, so they are not
identities.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mxnet as mx
import numpy as np

HERE = Path(__file__).resolve().parent
NAME = "resnet50_v1"


def export(out: Path) -> Path:
    """Writes the checkpoint and its sample into out; returns the prefix."""
    mx.random.seed(0)
    rng = np.random.default_rng(0)
    net = mx.gluon.model_zoo.vision.resnet50_v1()
    net.initialize(mx.init.Xavier())
    data = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    net(mx.nd.array(data))  # the deferred initialisation gives every parameter its shape
    for name, param in net.collect_params().items():
        if name.endswith("running_mean"):
            param.set_data(mx.nd.array(rng.normal(0.0, 0.1, param.shape)))
        elif name.endswith("running_var"):
            param.set_data(mx.nd.array(rng.uniform(0.5, 1.5, param.shape)))
    net.hybridize()
    output = net(mx.nd.array(data)).asnumpy()
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / NAME
    net.export(str(prefix), epoch=0)
    np.savez(out / f"{NAME}.npz", data=data, output_0=output)
    return prefix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "models",
                        help="output folder (default: benchmarks/zoo/models)")
    args = parser.parse_args()
    prefix = export(args.out)
    print(f"wrote {prefix}-symbol.json, {prefix}-0000.params and {prefix}.npz")


if __name__ == "__main__":
    main()
