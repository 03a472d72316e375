"""Cost-aware partitioning: whether offloading a candidate subgraph pays.

Offloading a small island of operators can cost more in copies and launches
than it saves. A plugin that knows its costs answers the optional configure
query ``query=cost_model`` (mxnet_acc.h section 9) with

* ``host_device_bandwidth``: bytes per second between host and device,
* ``host_device_latency_ns``: fixed cost of one copy,
* ``launch_latency_ns``: fixed cost of one ``infer`` of a subgraph,
* ``device_ops_per_s``: operations per second the device sustains,
* ``min_subgraph_ops``: the fewest operators worth a subgraph (optional).

For each candidate subgraph the host estimates

* its **work**: operations of its nodes (:func:`node_ops`: 2 x multiply-adds
  for convolutions and matrix products, one per output element otherwise);
* the **gain**: work / host rate - work / ``device_ops_per_s``, the host rate
  being ``MXNET_ACC_HOST_OPS_PER_S`` (default 2e10, about what this
  project's numpy CPU path sustains on convolutions on one core);
* the **cost**: one launch, plus one copy (latency + bytes / bandwidth) per
  data input read from outside and per output read outside (weights stay on
  the device after loadModel and are not counted).

A candidate with fewer operators than ``min_subgraph_ops``, or whose cost
exceeds its gain, stays on the CPU; the partition records why
(``Partition.kept_on_cpu``, printed by ``summary()``). A plugin that does not
answer the query is offered everything it supports, as before; so is every
plugin when ``MXNET_ACC_OFFLOAD_COST=0``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import AccHostError, PluginContractError
from ..graph import Graph

__all__ = ["OffloadCosts", "KeptOnCpu", "MIN_SIZE", "NOT_PAYING", "costs_of", "node_ops",
           "judge"]

HOST_OPS_VAR = "MXNET_ACC_HOST_OPS_PER_S"
SWITCH_VAR = "MXNET_ACC_OFFLOAD_COST"
_DEFAULT_HOST_OPS = 2e10
_REQUIRED = ("host_device_bandwidth", "host_device_latency_ns", "launch_latency_ns",
             "device_ops_per_s")
_MATRIX_OPS = {"Convolution", "Deconvolution", "FullyConnected", "dot", "batch_dot",
               "_onnx_matmul", "_onnx_gemm"}


@dataclass(frozen=True)
class OffloadCosts:
    """A device's costs as its plugin reports them (seconds, bytes, ops)."""

    bandwidth: float
    copy_latency: float
    launch_latency: float
    device_ops_per_s: float
    min_subgraph_ops: int
    host_ops_per_s: float


MIN_SIZE = "below_min_size"
NOT_PAYING = "not_paying"


@dataclass(frozen=True)
class KeptOnCpu:
    """A candidate subgraph the partitioner left on the CPU, and why.

    ``kind`` is :data:`MIN_SIZE` (fewer operators than the plugin's
    ``min_subgraph_ops``) or :data:`NOT_PAYING` (copies and launch would
    cost more than the gain); for the latter, ``cost_s``, ``gain_s``,
    ``work_ops`` and ``bytes_moved`` are the estimate's figures."""

    nodes: tuple[int, ...]
    device: int
    reason: str
    kind: str = NOT_PAYING
    cost_s: float = 0.0
    gain_s: float = 0.0
    work_ops: float = 0.0
    bytes_moved: int = 0


def costs_of(library: Any, dev_id: int) -> OffloadCosts | None:
    """The device's reported costs, or None when it reports none (or
    MXNET_ACC_OFFLOAD_COST=0)."""
    if os.environ.get(SWITCH_VAR, "1") == "0":
        return None
    return _query(library, dev_id, _host_ops_per_s())


def _query(library: Any, dev_id: int, host_ops_per_s: float) -> OffloadCosts | None:
    try:
        answer = library.configure(dev_id, {"query": "cost_model"})
    except AccHostError:
        return None
    if not any(key in answer for key in _REQUIRED):
        return None  # a plugin that echoes any query reports no costs
    try:
        values = {key: float(answer[key]) for key in _REQUIRED}
        minimum = int(answer.get("min_subgraph_ops", "1"))
    except (KeyError, ValueError) as error:
        raise PluginContractError(f"{library.name}: configure(query=cost_model) answered "
                                  f"{answer}: {error}") from None
    if values["host_device_bandwidth"] <= 0 or values["device_ops_per_s"] <= 0 or any(
            value < 0 for value in values.values()) or minimum < 0:
        raise PluginContractError(f"{library.name}: configure(query=cost_model) answered "
                                  f"{answer}: rates must be positive, latencies non-negative")
    return OffloadCosts(values["host_device_bandwidth"], values["host_device_latency_ns"] * 1e-9,
                        values["launch_latency_ns"] * 1e-9, values["device_ops_per_s"],
                        minimum, host_ops_per_s)


def _host_ops_per_s() -> float:
    text = os.environ.get(HOST_OPS_VAR)
    try:
        rate = float(text) if text else _DEFAULT_HOST_OPS
    except ValueError:
        rate = -1.0
    if not rate > 0:
        raise AccHostError(f"{HOST_OPS_VAR}={text!r}: expected a positive number of operations "
                           "per second")
    return rate


def _size(shape: Sequence[int] | None) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape is not None else 0


def node_ops(graph: Graph, k: int, shapes: Sequence[Any]) -> float:
    """Operations of operator node k: 2 x its multiply-adds for
    convolutions and matrix products, one per output element otherwise."""
    node = graph.nodes[k]
    start = graph.entry_start[k]
    outputs = sum(_size(shapes[start + i]) for i in range(graph.num_visible(k)))
    if node.op not in _MATRIX_OPS:
        return float(outputs)
    inputs = graph.input_entries(k)
    if node.op in ("Convolution", "Deconvolution") and len(inputs) > 1:
        weight = shapes[inputs[1]]  # (filters, channels per group, *kernel)
        return 2.0 * outputs * _size(weight[1:]) if weight else float(outputs)
    data = shapes[inputs[0]] if inputs else None
    reduction = data[-1] if data else 1
    if node.op == "FullyConnected" and node.attrs.get("flatten", "True") in ("True", "true", "1"):
        reduction = _size(data[1:]) if data else 1
    return 2.0 * outputs * reduction


def judge(graph: Graph, nodes: Sequence[int], device: int, costs: OffloadCosts,
          shapes: Sequence[Any], dtypes: Sequence[Any], weight_names: frozenset[str],
          leaving: set[int]) -> KeptOnCpu | None:
    """Why the candidate subgraph of nodes should stay on the CPU, or None
    when offloading it pays."""
    if len(nodes) < costs.min_subgraph_ops:
        return KeptOnCpu(tuple(nodes), device, f"{len(nodes)} operators, fewer than the "
                         f"plugin's min_subgraph_ops {costs.min_subgraph_ops}", MIN_SIZE)
    members = set(nodes)
    inputs: set[int] = set()
    for k in nodes:
        for producer, output, _ in graph.nodes[k].inputs:
            p = graph.index[id(producer)]
            if p in members or (producer.is_variable and producer.name in weight_names):
                continue
            inputs.add(graph.entry(producer, output))
    outputs = {graph.entry_start[k] + i for k in nodes for i in range(graph.num_visible(k))
               if graph.entry_start[k] + i in leaving}
    moved = sum(_size(shapes[e]) * np.dtype(dtypes[e]).itemsize for e in inputs | outputs)
    cost = (costs.launch_latency + len(inputs | outputs) * costs.copy_latency
            + moved / costs.bandwidth)
    work = sum(node_ops(graph, k, shapes) for k in nodes)
    gain = work / costs.host_ops_per_s - work / costs.device_ops_per_s
    if cost <= gain:
        return None
    return KeptOnCpu(tuple(nodes), device, f"estimated copies and launch {cost * 1e6:.1f} us > "
                     f"gain {gain * 1e6:.1f} us ({work:.3g} ops, {moved} bytes moved)",
                     NOT_PAYING, cost, gain, work, int(moved))
