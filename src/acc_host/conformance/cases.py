"""The standard operator set: small one-operator graphs (and a few
multi-operator ones) that the kit offers to supportedOps(), with inputs, the
host's CPU result, and dtype-aware comparison.

Each :class:`OpCase` is one operator with fixed attributes and input shapes,
tried in every dtype it lists. Its first input is the graph's "data"
variable; the other inputs are "weight" variables (as parameters are in a
real model, and as plugins that fold parameters at compile time require).
The reference is the host's CPU path: the operator's numpy definition in
:mod:`acc_host.ops`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import ops
from .. import symbol as sym
from ..abi.annotate import annotate_symbol, output_name
from ..compare import mismatch

__all__ = ["OpCase", "Instance", "OP_CASES", "GRAPH_CASES", "GraphCase", "instances",
           "compare", "TOLERANCES", "NONFINITE_OPS", "BIAS_OPS"]

FLOATS = ("float32", "float16", "float64")
INTEGERS = ("int8", "uint8", "int32", "int64")
ALL = (*FLOATS, *INTEGERS)

# (rtol, atol) per output dtype for acc_host.compare.mismatch; atol is scaled
# by max(1, largest |reference|).
# float16: about ten float16 roundings (a plugin may compute in float32 and
# round once, the host in float16 or float64); float32: accumulation order;
# float64: the same, in double. Integers must be equal.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-7, 1e-9),
}


@dataclass(frozen=True)
class OpCase:
    """One operator with attributes and input shapes, in several dtypes.

    ``inputs``: "random" (normal, scaled), "positive" (for sqrt, log),
    "indices" (Embedding's first input: valid row numbers)."""

    op: str
    attrs: dict[str, Any]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...] = FLOATS
    inputs: str = "random"
    # Dtypes of the inputs after the first, when they differ from it
    # (BatchNorm's float32 statistics for float16 data).
    other_dtypes: dict[str, str] = field(default_factory=dict)

    def input_dtypes(self, dtype: str) -> list[np.dtype]:
        first = np.dtype(dtype)
        other = np.dtype(self.other_dtypes.get(dtype, dtype))
        return [first] + [other] * (len(self.shapes) - 1)

    def label(self) -> str:
        attrs = ",".join(f"{key}={value}" for key, value in self.attrs.items())
        return f"{self.op}({attrs})" if attrs else self.op


def _c(op: str, attrs: dict[str, Any], *shapes: tuple[int, ...], dtypes: tuple[str, ...] = FLOATS,
       inputs: str = "random", other_dtypes: dict[str, str] | None = None) -> OpCase:
    return OpCase(op, attrs, tuple(shapes), dtypes, inputs, other_dtypes or {})


OP_CASES: tuple[OpCase, ...] = (
    _c("Convolution", {"kernel": (3, 3), "num_filter": 4}, (2, 3, 7, 6), (4, 3, 3, 3), (4,)),
    _c("Convolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 2, "pad": (1, 1),
                       "stride": (2, 2), "no_bias": True}, (1, 4, 7, 7), (6, 2, 3, 3)),
    _c("FullyConnected", {"num_hidden": 7}, (3, 2, 2, 3), (7, 12), (7,)),
    _c("FullyConnected", {"num_hidden": 5, "flatten": False, "no_bias": True}, (2, 3, 4),
       (5, 4)),
    *[_c("Activation", {"act_type": act}, (2, 3, 4)) for act in
      ("relu", "sigmoid", "tanh", "softrelu")],
    _c("LeakyReLU", {"act_type": "leaky", "slope": 0.1}, (5, 7)),
    _c("Pooling", {"kernel": (2, 2), "stride": (2, 2)}, (2, 3, 6, 7)),
    _c("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"},
       (1, 2, 7, 7)),
    _c("Pooling", {"global_pool": True, "pool_type": "avg", "kernel": (1, 1)}, (2, 3, 5, 4)),
    _c("BatchNorm", {"fix_gamma": False, "eps": 1e-5}, (2, 3, 4, 5), (3,), (3,), (3,), (3,),
       inputs="batchnorm", other_dtypes={"float16": "float32"}),
    _c("softmax", {"axis": -1}, (3, 10)),
    _c("log_softmax", {"axis": 1}, (2, 5, 3)),
    _c("LayerNorm", {}, (2, 5, 6), (6,), (6,)),
    _c("Dropout", {"p": 0.5}, (2, 3, 4)),
    *[_c(op, {}, (2, 3, 4), (2, 3, 4), dtypes=ALL) for op in
      ("elemwise_add", "elemwise_sub", "elemwise_mul")],
    *[_c(op, {}, (2, 3, 4), (3, 1), dtypes=ALL) for op in ("broadcast_add", "broadcast_mul")],
    _c("_plus_scalar", {"scalar": 2.5}, (3, 4)),
    _c("_mul_scalar", {"scalar": 0.5}, (3, 4)),
    _c("clip", {"a_min": -1.5, "a_max": 2.0}, (4, 6)),
    _c("exp", {}, (3, 5)),
    _c("sqrt", {}, (3, 5), inputs="positive"),
    _c("abs", {}, (3, 5)),
    _c("Flatten", {}, (2, 3, 4, 5), dtypes=ALL),
    _c("Reshape", {"shape": (0, -1)}, (2, 3, 4), dtypes=ALL),
    _c("transpose", {"axes": (0, 2, 1)}, (2, 3, 4), dtypes=ALL),
    _c("expand_dims", {"axis": 1}, (3, 4), dtypes=ALL),
    _c("Concat", {"num_args": 2, "dim": 1}, (2, 3, 4), (2, 5, 4), dtypes=ALL),
    _c("SliceChannel", {"num_outputs": 3, "axis": -1}, (2, 4, 6), dtypes=ALL),
    _c("sum", {"axis": 1}, (2, 3, 4)),
    _c("mean", {"axis": (1, 2), "keepdims": True}, (2, 3, 4)),
    _c("max", {"axis": 0}, (3, 4, 2)),
    _c("dot", {}, (3, 4), (4, 5)),
    _c("batch_dot", {"transpose_b": True}, (2, 3, 4), (2, 5, 4)),
    _c("Embedding", {"input_dim": 10, "output_dim": 4}, (2, 5), (10, 4), dtypes=("float32",),
       inputs="indices"),
)


# The operators whose result for NaN and Inf inputs IEEE arithmetic fixes
# element by element (or which only move data): symbolic.nonfinite gives
# them NaN, +Inf and -Inf. Reductions, convolutions and normalizations are
# left out: how far a NaN spreads there depends on the summation order.
NONFINITE_OPS = frozenset({
    "Activation", "LeakyReLU", "elemwise_add", "elemwise_sub", "elemwise_mul", "broadcast_add",
    "broadcast_mul", "_plus_scalar", "_mul_scalar", "clip", "abs", "exp", "sqrt", "Flatten",
    "Reshape", "transpose", "expand_dims", "Concat", "SliceChannel", "Dropout"})

# Operators whose last input is a bias unless no_bias is set.
BIAS_OPS = frozenset({"Convolution", "FullyConnected", "Deconvolution"})


@dataclass(frozen=True)
class GraphCase:
    """A small multi-operator float32 network, built by a function of the
    data variable; its weights get random values of their inferred shapes."""

    name: str
    data_shape: tuple[int, ...]

    def build(self) -> Any:
        data = sym.Variable("data")
        if self.name == "cnn":
            net = sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
            net = sym.BatchNorm(net, fix_gamma=False, name="bn")
            net = sym.Activation(net, act_type="relu", name="relu")
            net = sym.Pooling(net, kernel=(2, 2), stride=(2, 2), name="pool")
            net = sym.Flatten(net, name="flat")
            net = sym.FullyConnected(net, num_hidden=5, name="fc")
            return sym.softmax(net, name="prob")
        if self.name == "residual":
            branch = sym.FullyConnected(data, num_hidden=6, name="fc1")
            branch = sym.Activation(branch, act_type="relu", name="act")
            return sym.elemwise_add(branch, data, name="add")
        if self.name == "relu_chain":
            net = sym.Activation(data, act_type="relu", name="relu0")
            return sym.Activation(net, act_type="relu", name="relu1")
        raise ValueError(self.name)


GRAPH_CASES: tuple[GraphCase, ...] = (
    GraphCase("relu_chain", (2, 3)),
    GraphCase("residual", (3, 6)),
    GraphCase("cnn", (2, 3, 8, 8)),
)


@dataclass
class Instance:
    """One case in one dtype: the annotated graph, its values (data and
    weights) and the CPU reference outputs (named by the ABI's head rule)."""

    case: OpCase
    dtype: str
    graph: dict[str, Any]
    data: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]
    reference: dict[str, np.ndarray] | None
    reference_error: str = ""

    @property
    def op_node(self) -> int:
        return len(self.graph["nodes"]) - 1

    @property
    def check_id(self) -> str:
        return f"symbolic.numerics.{self.case.op}.{self.dtype}"


def _values(case: OpCase, dtype: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays: list[np.ndarray] = []
    for shape, input_dtype in zip(case.shapes, case.input_dtypes(dtype)):
        value: np.ndarray
        if input_dtype.kind == "u":
            value = rng.integers(0, 20, shape)
        elif input_dtype.kind == "i":
            value = rng.integers(-20, 20, shape)
        else:
            value = rng.standard_normal(shape) * 2
        arrays.append(np.asarray(value).astype(input_dtype))
    if case.inputs == "positive":
        arrays[0] = np.abs(arrays[0]) + np.array(0.25, arrays[0].dtype)
    elif case.inputs == "indices":
        arrays[0] = rng.integers(0, case.attrs["input_dim"], case.shapes[0]).astype(arrays[0].dtype)
    elif case.inputs == "batchnorm":
        arrays[4] = rng.uniform(0.5, 2.0, case.shapes[4]).astype(arrays[4].dtype)
    return arrays


def reference(op: str, attrs: dict[str, Any], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The host's CPU result of one operator (every visible output)."""
    definition = ops.get(op)
    return [np.asarray(value) for value in definition.run(definition.parse(attrs), list(inputs))]


def _instance(case: OpCase, dtype: str, seed: int) -> Instance | None:
    values = _values(case, dtype, seed)
    names = ["data"] + [f"arg{index}" for index in range(1, len(values))]
    try:
        node = getattr(sym, case.op)(*[sym.Variable(name) for name in names], name="node",
                                     **case.attrs)
        graph = annotate_symbol(node, {n: v.shape for n, v in zip(names, values)},
                                weights=names[1:],
                                dtypes={n: v.dtype for n, v in zip(names, values)})
    except Exception:  # noqa: BLE001  (the host has no such dtype variant: not offered)
        return None
    outputs = len(graph["heads"])
    try:
        results = reference(case.op, case.attrs, values)
        expected: dict[str, np.ndarray] | None = {
            output_name("node", index, outputs): result for index, result in enumerate(results)}
        error = ""
    except Exception as exc:  # noqa: BLE001
        expected, error = None, f"{type(exc).__name__}: {exc}"
    return Instance(case, dtype, graph, {"data": values[0]}, dict(zip(names[1:], values[1:])),
                    expected, error)


@functools.lru_cache(maxsize=4)
def instances(seed: int = 0) -> tuple[Instance, ...]:
    """Every case of OP_CASES in every dtype the host can annotate."""
    found = []
    for case in OP_CASES:
        for dtype in case.dtypes:
            instance = _instance(case, dtype, seed)
            if instance is not None:
                found.append(instance)
    return tuple(found)


def new_values(instance: Instance, seed: int) -> tuple[dict[str, np.ndarray],
                                                       dict[str, np.ndarray],
                                                       dict[str, np.ndarray]]:
    """Fresh data and weights of the instance's shapes, with their reference."""
    values = _values(instance.case, instance.dtype, seed)
    names = ["data", *instance.weights]
    outputs = len(instance.graph["heads"])
    results = reference(instance.case.op, instance.case.attrs, values)
    return ({"data": values[0]}, dict(zip(names[1:], values[1:])),
            {output_name("node", index, outputs): result for index, result in enumerate(results)})


def compare(name: str, result: np.ndarray, expected: np.ndarray) -> str | None:
    """None when result matches expected within the tolerance of its dtype
    (integers: equal; NaN where NaN is expected), else a description."""
    if result.shape != expected.shape:
        return f"{name}: shape {result.shape}, expected {expected.shape}"
    if result.dtype != expected.dtype:
        return f"{name}: dtype {result.dtype}, expected {expected.dtype}"
    rtol, atol = (0.0, 0.0) if expected.dtype.kind in "iub" else \
        TOLERANCES.get(expected.dtype.name, TOLERANCES["float32"])
    difference = mismatch(result, expected, rtol, atol, scale_floor=1.0)
    return None if difference is None else f"{name}: {difference}"


def max_error(result: np.ndarray, expected: np.ndarray) -> float:
    """The largest absolute difference (0 for an exact match)."""
    if result.size == 0:
        return 0.0
    diff = np.abs(result.astype(np.float64) - expected.astype(np.float64))
    return float(np.nanmax(diff)) if np.any(np.isfinite(diff)) else 0.0
