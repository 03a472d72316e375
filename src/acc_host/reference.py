"""numpy implementations of operators with MXNet 1.x semantics.

These are the host's definition of what each operator computes: plugins are
tested against them, and :func:`run_graph` evaluates a whole MXNet symbol
graph with them. They favour clarity and accuracy over speed (they
accumulate in float64 and return the input dtype).

Attributes are MXNet's strings ("(3, 3)", "True", "relu") with MXNet's
defaults.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .errors import InvalidArgumentError

__all__ = ["OPERATORS", "run_operator", "run_graph", "parse_tuple", "parse_bool"]

Attrs = Mapping[str, str]


def parse_tuple(text: str | None, default: tuple[int, ...] = ()) -> tuple[int, ...]:
    """"(3, 3)" / "[3,3]" / "3" -> (3, 3) / (3, 3) / (3,); None or "None" -> default."""
    if text is None or text.strip() == "None":
        return default
    value = ast.literal_eval(text.strip())
    return (int(value),) if isinstance(value, int) else tuple(int(v) for v in value)


def parse_bool(text: str | None, default: bool) -> bool:
    if text is None or text.strip() == "None":
        return default
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise InvalidArgumentError(f"{text!r} is not a boolean")


def _spatial(attrs: Attrs, key: str, ndim: int, fill: int) -> tuple[int, ...]:
    return parse_tuple(attrs.get(key)) or (fill,) * ndim


def _as_result(value: np.ndarray, like: np.ndarray) -> np.ndarray:
    return np.array(value, dtype=like.dtype, order="C")


def convolution(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    kernel = parse_tuple(attrs["kernel"])
    ndim = len(kernel)
    stride, dilate = _spatial(attrs, "stride", ndim, 1), _spatial(attrs, "dilate", ndim, 1)
    pad = _spatial(attrs, "pad", ndim, 0)
    groups = int(attrs.get("num_group", "1"))
    no_bias = parse_bool(attrs.get("no_bias"), False)
    x, weight = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    padded = np.pad(x, [(0, 0), (0, 0), *((p, p) for p in pad)])
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilate)]
    windows = sliding_window_view(padded, spans, axis=tuple(range(2, 2 + ndim)))
    every_other = tuple(slice(None, None, s) for s in stride) + tuple(
        slice(None, None, d) for d in dilate)
    windows = windows[(slice(None), slice(None)) + every_other]
    out_axes, kernel_axes = "xyz"[:ndim], "XYZ"[:ndim]
    formula = f"nc{out_axes}{kernel_axes},fc{kernel_axes}->nf{out_axes}"
    channels, filters = x.shape[1] // groups, weight.shape[0] // groups
    result = np.concatenate([
        np.einsum(formula, windows[:, g * channels:(g + 1) * channels],
                  weight[g * filters:(g + 1) * filters])
        for g in range(groups)], axis=1)
    if not no_bias:
        result += inputs[2].astype(np.float64).reshape((1, -1) + (1,) * ndim)
    return _as_result(result, inputs[0])


def _pool_bounds(size: int, kernel: int, stride: int, pad: int, full: bool) -> list[tuple]:
    """(start, end, clipped_start, clipped_end) of every window along an axis,
    by MXNet's rule: end = min(start + kernel, size + pad)."""
    span = size + 2 * pad - kernel
    steps = -(-span // stride) if full else span // stride
    bounds = []
    for index in range(steps + 1):
        start = index * stride - pad
        end = min(start + kernel, size + pad)
        bounds.append((start, end, max(start, 0), min(end, size)))
    return bounds


def pooling(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0].astype(np.float64)
    ndim = x.ndim - 2
    pool_type = attrs.get("pool_type", "max")
    if parse_bool(attrs.get("global_pool"), False):
        kernel, stride, pad = x.shape[2:], (1,) * ndim, (0,) * ndim
    else:
        kernel = parse_tuple(attrs["kernel"])
        stride, pad = _spatial(attrs, "stride", ndim, 1), _spatial(attrs, "pad", ndim, 0)
    full = attrs.get("pooling_convention", "valid") == "full"
    include_pad = parse_bool(attrs.get("count_include_pad"), True)
    axes = [_pool_bounds(x.shape[2 + i], kernel[i], stride[i], pad[i], full)
            for i in range(ndim)]
    result = np.empty(x.shape[:2] + tuple(len(a) for a in axes))
    for position in itertools.product(*(range(len(a)) for a in axes)):
        windows = [axes[i][p] for i, p in enumerate(position)]
        region = x[(slice(None), slice(None)) + tuple(slice(w[2], w[3]) for w in windows)]
        reduce_axes = tuple(range(2, 2 + ndim))
        if pool_type == "max":
            value = region.max(axis=reduce_axes) if region.size else np.finfo(np.float32).min
        else:
            value = region.sum(axis=reduce_axes)
            if pool_type == "avg":
                sizes = [(w[1] - w[0]) if include_pad else (w[3] - w[2]) for w in windows]
                value = value / np.prod(sizes)
        result[(slice(None), slice(None)) + position] = value
    return _as_result(result, inputs[0])


def fully_connected(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0].astype(np.float64)
    if parse_bool(attrs.get("flatten"), True):
        x = x.reshape(x.shape[0], -1)
    result = x @ inputs[1].astype(np.float64).T
    if not parse_bool(attrs.get("no_bias"), False):
        result += inputs[2].astype(np.float64)
    return _as_result(result, inputs[0])


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softrelu": lambda x: np.logaddexp(0, x),
    "softsign": lambda x: x / (1 + np.abs(x)),
}


def activation(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _as_result(_ACTIVATIONS[attrs["act_type"]](inputs[0].astype(np.float64)), inputs[0])


def batch_norm(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, gamma, beta, mean, var = (array.astype(np.float64) for array in inputs)
    axis = int(attrs.get("axis", "1")) % x.ndim
    if parse_bool(attrs.get("fix_gamma"), True):
        gamma = np.ones_like(gamma)
    shape = [1] * x.ndim
    shape[axis] = -1
    eps = float(attrs.get("eps", "0.001"))
    result = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(
        shape) + beta.reshape(shape)
    return _as_result(result, inputs[0])


def elemwise_add(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _as_result(inputs[0].astype(np.float64) + inputs[1], inputs[0])


def flatten(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return inputs[0].reshape(inputs[0].shape[0], -1).copy()


def softmax(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0].astype(np.float64)
    temperature = attrs.get("temperature")
    if temperature is not None and temperature != "None":
        x = x / float(temperature)
    axis = int(attrs.get("axis", "-1"))
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return _as_result(shifted / shifted.sum(axis=axis, keepdims=True), inputs[0])


OPERATORS: dict[str, Callable[[Sequence[np.ndarray], Attrs], np.ndarray]] = {
    "Activation": activation,
    "BatchNorm": batch_norm,
    "Convolution": convolution,
    "Flatten": flatten,
    "FullyConnected": fully_connected,
    "Pooling": pooling,
    "elemwise_add": elemwise_add,
    "softmax": softmax,
}


def _operator_attrs(node: Mapping[str, Any]) -> dict[str, str]:
    attrs = node.get("attrs") or node.get("attr") or node.get("param") or {}
    return {key: value for key, value in attrs.items() if not key.startswith("__")}


def run_operator(op_name: str, inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    try:
        implementation = OPERATORS[op_name]
    except KeyError:
        raise InvalidArgumentError(f"no reference implementation of operator {op_name}") from None
    return implementation(inputs, attrs)


def run_graph(graph: Mapping[str, Any], values: Mapping[str, np.ndarray]) -> list[list[np.ndarray]]:
    """Evaluates an MXNet symbol graph (a dict); values holds every variable.
    Returns the outputs of every node, in node order."""
    outputs: list[list[np.ndarray]] = []
    for node in graph["nodes"]:
        if node["op"] == "null":
            if node["name"] not in values:
                raise InvalidArgumentError(f"no value for graph input {node['name']!r}")
            outputs.append([values[node["name"]]])
        else:
            arguments = [outputs[entry[0]][entry[1]] for entry in node["inputs"]]
            outputs.append([run_operator(node["op"], arguments, _operator_attrs(node))])
    return outputs
