"""Writes MXNet 1.9.1's results for the compatibility tests.

Runs in a side environment that has MXNet (it never imports acc_host)::

    mxenv/bin/python tools/mxnet_compat/make_expected.py tests/mxnet_expected

Writes ndarray_methods.json (the calls) with ndarray_methods.npz (their
inputs and MXNet's outputs) and metrics.json (each metric's get() and
get_global() after two updates with the inputs stored in metrics.npz).
tests/frontend/test_mxnet_compat_features.py makes the same calls on acc_host.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

# (method, positional arguments, keyword arguments); {"array": name} is an input array
METHOD_CASES = [
    ("sum", [], {}), ("sum", [], {"axis": 1}), ("sum", [1, True], {}),
    ("sum", [], {"axis": (0, 2), "keepdims": True}), ("sum", [], {"axis": 1, "exclude": True}),
    ("max", [], {"axis": 2}), ("min", [], {}), ("mean", [], {"axis": 0}),
    ("prod", [], {"axis": 1}), ("nansum", [], {"axis": 2}),
    ("argmax", [], {"axis": 1}), ("argmin", [], {"axis": 2}), ("argmax", [], {}),
    ("clip", [-0.5, 0.5], {}), ("clip", [], {"a_min": 0.0, "a_max": 1.0}),
    ("astype", ["int32"], {}), ("astype", ["float16"], {}),
    ("reshape", [(0, -1)], {}), ("reshape", [(-3, 5)], {}), ("reshape", [(4, -1)], {}),
    ("reshape", [], {"shape": (-1, 0), "reverse": True}), ("reshape", [12, 5], {}),
    ("reshape_like", [{"array": "shape_6_10"}], {}),
    ("slice", [], {"begin": (0, 1, None), "end": (2, 3, None)}),
    ("slice", [(1, None, 0), (3, None, 5)], {}),
    ("slice_axis", [], {"axis": 2, "begin": 1, "end": 4}),
    ("take", [{"array": "indices"}], {}), ("take", [{"array": "indices"}], {"axis": 1}),
    ("one_hot", [5], {}), ("topk", [], {"k": 2}), ("topk", [], {"k": 3, "ret_typ": "value"}),
    ("topk", [], {"axis": 1, "k": 2, "ret_typ": "both", "is_ascend": True}),
    ("sort", [], {}), ("sort", [], {"axis": 1, "is_ascend": False}), ("argsort", [], {"axis": 0}),
    ("pick", [{"array": "pick_index"}], {"axis": 1}),
    ("pick", [{"array": "pick_index"}], {"axis": 1, "keepdims": True}),
    ("flip", [], {"axis": 1}), ("norm", [], {}), ("norm", [], {"ord": 1, "axis": 2}),
    ("swapaxes", [0, 2], {}), ("expand_dims", [], {"axis": 1}),
    ("transpose", [], {"axes": (2, 0, 1)}), ("tile", [], {"reps": (1, 2, 1)}),
    ("repeat", [], {"repeats": 2, "axis": 0}), ("flatten", [], {}),
    ("softmax", [], {"axis": -1}), ("log_softmax", [], {}), ("abs", [], {}), ("exp", [], {}),
    ("square", [], {}), ("sign", [], {}), ("round", [], {}), ("relu", [], {}),
    ("sigmoid", [], {}), ("split", [], {"num_outputs": 2, "axis": 1}),
    ("shape_array", [], {}), ("size_array", [], {}), ("zeros_like", [], {}),
    ("broadcast_to", [], {"shape": (2, 3, 4, 5)}), ("expand_dims", [0], {}),
    ("__gt__", [0.0], {}), ("__le__", [0.1], {}), ("__eq__", [{"array": "other"}], {}),
    ("__ne__", [{"array": "other"}], {}), ("__lt__", [{"array": "other"}], {}),
    ("__ge__", [{"array": "other"}], {}),
]
# the array each method is called on ("x" unless listed)
METHOD_SUBJECT = {"one_hot": "labels", "swapaxes": "x", "__eq__": "ints", "__ne__": "ints",
                  "__lt__": "ints", "__ge__": "ints"}


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(7)
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(np.float32)
    x[0, 0, 0] = x[0, 0, 1]  # a tie for sort/topk/argmax
    return {
        "x": x,
        "shape_6_10": np.zeros((6, 10), np.float32),
        "indices": np.array([2, 0, 1, 2], np.float32),
        "labels": np.array([[0, 4, 2], [1, 7, -1]], np.float32),
        "pick_index": np.array([[0, 3, 1, 2, 3], [1, 1, 0, 2, 3], [3, 0, 0, 1, 2]], np.float32),
        "ints": rng.randint(0, 3, (3, 4, 5)).astype(np.float32),
        "other": rng.randint(0, 3, (3, 4, 5)).astype(np.float32),
    }


def metric_inputs() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(11)
    probs = rng.uniform(0.05, 1.0, (2, 8, 5)).astype(np.float32)
    probs /= probs.sum(axis=-1, keepdims=True)
    binary = rng.uniform(0.0, 1.0, (2, 8, 2)).astype(np.float32)
    return {
        "probs": probs,                                           # 2 updates of 8 x 5
        "labels": rng.randint(0, 5, (2, 8)).astype(np.float32),
        "binary": binary,
        "binary_labels": rng.randint(0, 2, (2, 8)).astype(np.float32),
        "regression": rng.standard_normal((2, 8)).astype(np.float32),
        "targets": rng.standard_normal((2, 8)).astype(np.float32),
    }


# (name, constructor, keyword arguments, prediction input, label input)
METRIC_CASES = [
    ("accuracy", "Accuracy", {}, "probs", "labels"),
    ("top3", "TopKAccuracy", {"top_k": 3}, "probs", "labels"),
    ("f1_macro", "F1", {}, "binary", "binary_labels"),
    ("f1_micro", "F1", {"average": "micro"}, "binary", "binary_labels"),
    ("mae", "MAE", {}, "regression", "targets"),
    ("mse", "MSE", {}, "regression", "targets"),
    ("rmse", "RMSE", {}, "regression", "targets"),
    ("cross_entropy", "CrossEntropy", {}, "probs", "labels"),
    ("nll", "NegativeLogLikelihood", {}, "probs", "labels"),
    ("perplexity", "Perplexity", {"ignore_label": None}, "probs", "labels"),
    ("perplexity_ignore", "Perplexity", {"ignore_label": 0}, "probs", "labels"),
    ("composite", "CompositeEvalMetric", {"metrics": ["acc", "ce", "nll_loss"]},
     "probs", "labels"),
    ("loss", "Loss", {}, "regression", "targets"),
]


def main() -> int:
    import mxnet as mx

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    arrays = inputs()
    saved = {f"input_{name}": value for name, value in arrays.items()}
    cases = []
    for number, (method, args, kwargs) in enumerate(METHOD_CASES):
        subject = METHOD_SUBJECT.get(method, "x")

        def value(arg):  # noqa: ANN001, ANN202
            return mx.nd.array(arrays[arg["array"]]) if isinstance(arg, dict) else arg

        result = getattr(mx.nd.array(arrays[subject]), method)(*map(value, args), **kwargs)
        results = result if isinstance(result, list) else [result]
        for k, item in enumerate(results):
            saved[f"case{number}_{k}"] = item.asnumpy()
        cases.append({"method": method, "subject": subject, "args": args, "kwargs": kwargs,
                      "outputs": len(results)})
    np.savez(out / "ndarray_methods.npz", **saved)
    (out / "ndarray_methods.json").write_text(json.dumps(
        {"mxnet": mx.__version__, "cases": cases}, indent=1) + "\n", encoding="utf-8")

    metric_arrays = metric_inputs()
    np.savez(out / "metrics.npz", **metric_arrays)
    metrics = []
    for name, constructor, kwargs, pred, label in METRIC_CASES:
        metric = getattr(mx.metric, constructor)(**kwargs)
        for update in range(2):
            metric.update([mx.nd.array(metric_arrays[label][update])],
                          [mx.nd.array(metric_arrays[pred][update])])
        metrics.append({"name": name, "constructor": constructor, "kwargs": kwargs,
                        "pred": pred, "label": label, "get": list(metric.get()),
                        "get_global": list(metric.get_global()),
                        "name_value": metric.get_name_value()})
    (out / "metrics.json").write_text(json.dumps(
        {"mxnet": mx.__version__, "metrics": metrics}, indent=1, default=float) + "\n",
        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
