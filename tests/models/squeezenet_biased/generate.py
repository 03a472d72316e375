"""Generates this folder: a SqueezeNet-1.1-class checkpoint whose 26
convolution biases are random and non-zero, and MXNet 1.9.1's outputs for it.

The model zoo's SqueezeNet initialises every bias to zero (Xavier for the
weights, zeros for the biases), so a plugin whose convolution drops its
bias still matches MXNet on it. This network has SqueezeNet 1.1's
structure (a strided 3x3 convolution, eight fire modules of squeeze 1x1 and
expand 1x1 + 3x3 concatenated, three max poolings, dropout, a 1x1
classifier convolution, relu, global average pooling, flatten: 26
Convolution, 26 Activation, 8 Concat, 4 Pooling) with a quarter of the
channels and 10 classes, so the files stay small, and biases drawn from
N(0, 0.2) so that they move every output (the test checks that they do).

Run with MXNet 1.9.1 (numpy < 1.24), from this folder:

    /path/to/mxnet-env/bin/python generate.py

It writes model-symbol.json, model-0000.params, input_0.npy (a batch of 2),
expected_0.npy (MXNet's symbolic executor, inference mode, one thread) and
meta.json.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 37
INPUT_SHAPE = (2, 3, 64, 64)
CLASSES = 10
# (squeeze, expand) channels of the eight fire modules: SqueezeNet 1.1's / 4.
FIRES = [(4, 16), (4, 16), (8, 32), (8, 32), (12, 48), (12, 48), (16, 64), (16, 64)]


def fire(data: mx.sym.Symbol, index: int, squeeze: int, expand: int) -> mx.sym.Symbol:
    name = f"fire{index}"
    net = mx.sym.Convolution(data, kernel=(1, 1), num_filter=squeeze, name=f"{name}_squeeze")
    net = mx.sym.Activation(net, act_type="relu", name=f"{name}_squeeze_relu")
    left = mx.sym.Convolution(net, kernel=(1, 1), num_filter=expand, name=f"{name}_expand1x1")
    left = mx.sym.Activation(left, act_type="relu", name=f"{name}_expand1x1_relu")
    right = mx.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=expand,
                               name=f"{name}_expand3x3")
    right = mx.sym.Activation(right, act_type="relu", name=f"{name}_expand3x3_relu")
    return mx.sym.Concat(left, right, dim=1, name=f"{name}_concat")


def network() -> mx.sym.Symbol:
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), stride=(2, 2), num_filter=16, name="conv0")
    net = mx.sym.Activation(net, act_type="relu", name="conv0_relu")
    for index, (squeeze, expand) in enumerate(FIRES):
        if index in (0, 2, 4):
            net = mx.sym.Pooling(net, kernel=(3, 3), stride=(2, 2), pool_type="max",
                                 pooling_convention="full", name=f"pool{index // 2}")
        net = fire(net, index, squeeze, expand)
    net = mx.sym.Dropout(net, p=0.5, name="drop")
    net = mx.sym.Convolution(net, kernel=(1, 1), num_filter=CLASSES, name="classifier")
    net = mx.sym.Activation(net, act_type="relu", name="classifier_relu")
    net = mx.sym.Pooling(net, kernel=(1, 1), global_pool=True, pool_type="avg", name="gap")
    return mx.sym.Flatten(net, name="flatten")


def stats(array: np.ndarray) -> dict[str, float]:
    return {"min": float(array.min()), "max": float(array.max()),
            "mean": float(array.mean()), "std": float(array.std())}


def main() -> None:
    symbol = network()
    rng = np.random.RandomState(SEED)
    arg_shapes, _, _ = symbol.infer_shape(data=INPUT_SHAPE)
    params = {}
    for name, shape in zip(symbol.list_arguments(), arg_shapes):
        if name == "data":
            continue
        if name.endswith("_bias"):
            value = rng.normal(0.0, 0.2, shape)
        else:  # Xavier (uniform, fan_in + fan_out, magnitude 3), as gluon's init
            fan_in = int(np.prod(shape[1:]))
            fan_out = shape[0] * int(np.prod(shape[2:]))
            bound = np.sqrt(6.0 / (fan_in + fan_out))
            value = rng.uniform(-bound, bound, shape)
        params[name] = mx.nd.array(value.astype(np.float32))
    biases = [name for name in params if name.endswith("_bias")]
    assert len(biases) == 26 and all(np.all(params[name].asnumpy() != 0) for name in biases)
    symbol.save(str(HERE / "model-symbol.json"))
    mx.nd.save(str(HERE / "model-0000.params"), {f"arg:{k}": v for k, v in params.items()})
    data = rng.standard_normal(INPUT_SHAPE).astype(np.float32)
    executor = symbol.simple_bind(mx.cpu(), data=INPUT_SHAPE, grad_req="null")
    for name, value in params.items():
        executor.arg_dict[name][:] = value
    executor.arg_dict["data"][:] = data
    output = executor.forward(is_train=False)[0].asnumpy()
    np.save(HERE / "input_0.npy", data)
    np.save(HERE / "expected_0.npy", output)
    histogram: dict[str, int] = {}
    for node in json.loads(symbol.tojson())["nodes"]:
        if node["op"] != "null":
            histogram[node["op"]] = histogram.get(node["op"], 0) + 1
    meta = {
        "name": "squeezenet_biased",
        "source": "generate.py in this folder (SqueezeNet 1.1's structure at a quarter of the "
                  "channels, 10 classes)",
        "writer": f"mxnet {mx.__version__} Symbol.save + nd.save",
        "expected_by": f"mxnet {mx.__version__} symbolic executor (simple_bind, "
                       "forward(is_train=False)), OMP_NUM_THREADS=1",
        "init": f"numpy RandomState({SEED}): weights Xavier uniform, biases N(0, 0.2), "
                "every one non-zero",
        "epoch": 0,
        "op_histogram": histogram,
        "num_biases": len(biases),
        "num_params": int(sum(value.size for value in params.values())),
        "inputs": [{"name": "data", "file": "input_0.npy", "shape": list(INPUT_SHAPE),
                    "dtype": "float32", "stats": stats(data)}],
        "outputs": [{"name": "flatten_output", "file": "expected_0.npy",
                     "shape": list(output.shape), "dtype": "float32", "stats": stats(output),
                     "sha256_16": hashlib.sha256(output.tobytes()).hexdigest()[:16]}],
        "tolerance": {"rtol": 1e-4, "atol": 1e-5},
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta["outputs"], indent=1))


if __name__ == "__main__":
    main()
