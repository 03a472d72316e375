"""An MXNet 1.x NDArray script: creation, fluent methods, operators.

    python ndarray_script.py MODULE CONTEXT

MODULE is the package to use as mx (mxnet or acc_host), CONTEXT a context
name (cpu, cpu_ref, mlu: device 0). Prints its results as JSON.
"""

import importlib
import json
import sys

import numpy as np

mx = importlib.import_module(sys.argv[1])
ctx = mx.cpu() if sys.argv[2] == "cpu" else getattr(mx, sys.argv[2])(0)

x = mx.nd.array(np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4), ctx=ctx)
w = mx.nd.ones((4, 5), ctx=ctx) * 0.5
results = {
    "sum": x.sum(axis=2).asnumpy(),
    "mean_keepdims": x.mean(axis=(0, 2), keepdims=True).asnumpy(),
    "argmax": x.argmax(axis=1).asnumpy(),
    "clip_square": (x.clip(-1, 1) ** 2).asnumpy(),
    "dot": mx.nd.dot(x.reshape((-1, 4)), w).asnumpy(),
    "softmax": mx.nd.softmax(x, axis=-1).asnumpy(),
    "topk": x.reshape((6, 4)).topk(k=2, ret_typ="value").asnumpy(),
    "one_hot": mx.nd.one_hot(mx.nd.array([0, 2, 1], ctx=ctx), depth=3).asnumpy(),
    "compare": ((x > 0) * (x < 1.5)).asnumpy(),
    "slice": x.slice(begin=(0, 1, 0), end=(2, 3, 2)).asnumpy(),
    "concat": mx.nd.concat(x, x, dim=1).shape,
    "astype": x.astype("int32").asnumpy(),
}
print(json.dumps({key: np.asarray(value).tolist() for key, value in results.items()}))
