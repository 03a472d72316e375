"""What ABI 1.1 settles and adds (mxnet_acc.h sections 1, 8 and 11), where a
plugin's side of it can be checked.

* header.any_thread: a model loaded on one thread is run (giving what it
  gives on the loading thread) and unloaded on others; an executor made on
  one thread runs and is released on others; memory allocated on one
  thread is freed on another (the header: any call may come from any
  thread).
* header.device_weights: loadModel with its weights in accelerator memory
  gives what it gives with them in host memory (the header: weights may
  live in either; imperative plugins only).
* header.weights_untouched: the plugin never writes the weights given to
  loadModel and infer (borrowed or retained, they are read-only).
* header.retained_weights: retainsWeights() answers 0 or 1, the same each
  time; a retaining plugin gives the right results once the caller's own
  references to the weights are gone and the allocator has reused memory.
* supported_ops.reasons: supportedOpsReasons() answers the ids
  supportedOps() does, writes reasons only for declined operator nodes,
  each NUL-terminated within its slot, and nothing past the buffer.

The host-side guarantees (configure serialized with the device's calls,
device pointers at the start of their allocation, outputs aliasing no
input) constrain the host, not the plugin: nothing of the plugin's can be
checked there, and tests/ check the host.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..abi import cdata, header
from ..abi.annotate import signature
from ..abi.loaded_model import LoadedModel
from ..abi.memory import DeviceBuffer
from ..abi.operator_executor import OperatorExecutor
from ..abi.tensor import CStrings, TensorArray, TensorSpec, contiguous
from ..errors import PluginUnsupportedError
from . import cases
from .checks_symbolic import claims, first_runnable, on_device, supported_ids
from .report import CheckFailed, CheckSkipped
from .session import Session

__all__ = ["checks"]

_REASONS_GUARD = 32


def _on_thread(work: Callable[[], Any], name: str) -> Any:
    """work() on a new thread; its result, or its exception raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name=f"acc-conformance-{name}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _compare(label: str, outputs: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
    for (name, got), want in zip(outputs.items(), reference.values()):
        error = cases.compare(name, np.asarray(got), np.asarray(want))
        if error:
            raise CheckFailed(f"{label}: {error}")


def check_any_thread(session: Session) -> str:
    """Loaded on one thread, run on a second, unloaded on a third (and the
    imperative counterparts): every call may come from any thread."""
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session)
    assert instance.reference is not None
    graph = on_device(instance.graph, dev)
    with LoadedModel(library, graph, instance.weights, dev) as model:
        own = model.infer(instance.data)  # the plugin's own answer, on this thread
    model = _on_thread(lambda: LoadedModel(library, graph, instance.weights, dev), "load")
    outputs = _on_thread(lambda: model.infer(instance.data), "infer")
    _compare(f"{instance.case.label()} {instance.dtype}, infer on another thread than the "
             "load", outputs, own)
    _on_thread(model.close, "unload")
    done = [f"{instance.case.label()}: loadModel, infer and unloadModel on three threads"]
    if library.supports_imperative:
        done.append(_imperative_threads(session, instance))
    return "; ".join(done)


def _imperative_threads(session: Session, instance: cases.Instance) -> str:
    library = session.require_imperative()
    dev = session.devices[0]
    values = [instance.data["data"], *instance.weights.values()]
    inputs = [TensorSpec.of(np.asarray(value)) for value in values]
    assert instance.reference is not None
    outputs = [TensorSpec.of(value) for value in instance.reference.values()]
    attrs = {key: value for key, value in
             instance.graph["nodes"][instance.op_node]["attrs"].items()
             if not (key.startswith("__") and key.endswith("__"))}
    buffers = _on_thread(lambda: [DeviceBuffer(library, dev, spec) for spec in inputs + outputs],
                         "alloc")
    try:
        for buffer, value in zip(buffers, values):
            buffer.copy_from_host(np.asarray(value))
        try:
            executor = _on_thread(lambda: OperatorExecutor(library, instance.case.op, inputs,
                                                           outputs, attrs, dev), "executor")
        except PluginUnsupportedError:
            return "mx_alloc and mx_free on two threads (the executor was declined)"
        results = buffers[len(inputs):]
        executor.forward(buffers[:len(inputs)], results)
        own = {name: buffer.to_host() for name, buffer in zip(instance.reference, results)}
        _on_thread(lambda: executor.forward(buffers[:len(inputs)], results), "forward")
        _compare(f"{instance.case.label()} {instance.dtype}, forward on another thread than "
                 "accGetExecutor", {name: buffer.to_host() for name, buffer in
                                    zip(instance.reference, results)}, own)
        _on_thread(executor.close, "release")
    finally:
        _on_thread(lambda: [buffer.free() for buffer in buffers], "free")
    return "accGetExecutor, forward, release, mx_alloc and mx_free across threads"


def check_device_weights(session: Session) -> str:
    """loadModel with every weight in accelerator memory of the device
    gives what it gives with the same weights in host memory."""
    library = session.require_imperative()
    dev = session.devices[0]
    instance = first_runnable(session, with_weights=True)
    with LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev) as model:
        own = model.infer(instance.data)  # with host weights
    buffers = {}
    try:
        for name, value in instance.weights.items():
            host = contiguous(np.asarray(value))
            buffers[name] = DeviceBuffer(library, dev, TensorSpec.of(host))
            buffers[name].copy_from_host(host)
        with LoadedModel(library, on_device(instance.graph, dev), buffers, dev) as model:
            outputs = model.infer(instance.data)
    finally:
        for buffer in buffers.values():
            buffer.free()
    _compare(f"{instance.case.label()} {instance.dtype} with device weights (against host "
             "weights)", outputs, own)
    return f"{instance.case.label()} {instance.dtype}: {len(buffers)} weight(s) in device memory"


def check_weights_untouched(session: Session) -> str:
    """The bytes of the weights given to loadModel and to infer are the
    same after load, infer and unload: the plugin only reads them."""
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session, with_weights=True)
    given = {name: contiguous(np.array(value, copy=True))
             for name, value in instance.weights.items()}
    _, fresh, _ = cases.new_values(instance, seed=31)
    update = {name: contiguous(np.array(value, copy=True)) for name, value in fresh.items()}
    before = {name: value.tobytes() for name, value in given.items()}
    before_update = {name: value.tobytes() for name, value in update.items()}
    with LoadedModel(library, on_device(instance.graph, dev), given, dev) as model:
        model.infer(instance.data)
        model.infer(instance.data, weights=update)
        model.infer(instance.data)
    changed = [name for name, value in given.items() if value.tobytes() != before[name]]
    changed += [f"{name} (given to infer)" for name, value in update.items()
                if value.tobytes() != before_update[name]]
    if changed:
        raise CheckFailed(f"the plugin wrote into the weights it was given: {', '.join(changed)}")
    return f"{instance.case.label()}: {len(given)} weight(s) unchanged by load, infer and unload"


def check_retained_weights(session: Session) -> str:
    """retainsWeights(): 0 or 1, the same each time; with 1, results stay
    right after the caller dropped its weights and memory was reused."""
    raw = session.raw
    if not raw.has("retainsWeights"):
        raise CheckSkipped("retainsWeights is not exported (optional, ABI 1.1): weights are "
                           "borrowed")
    answers = {int(raw.unchecked("retainsWeights")) for _ in range(3)}
    if not answers <= {0, 1} or len(answers) != 1:
        raise CheckFailed(f"retainsWeights() answered {sorted(answers)}, not one of 0 or 1")
    if answers == {0}:
        return "retainsWeights() is 0: weights are borrowed"
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session, with_weights=True)
    assert instance.reference is not None
    model = LoadedModel(library, on_device(instance.graph, dev),
                        {name: np.array(value, copy=True)
                         for name, value in instance.weights.items()}, dev)
    try:
        gc.collect()
        churn = [np.full(np.shape(value), 1e30, np.asarray(value).dtype)
                 for value in instance.weights.values() for _ in range(4)]
        del churn
        _compare(f"{instance.case.label()} {instance.dtype}, weights retained", model.infer(
            instance.data), instance.reference)
        retained = model.retained_bytes
    finally:
        model.close()
    return (f"retainsWeights() is 1; {instance.case.label()} reads {retained} retained bytes "
            "correctly")


def check_reasons(session: Session) -> str:
    """supportedOpsReasons agrees with supportedOps and keeps to its slots."""
    raw = session.raw
    if not raw.has("supportedOpsReasons"):
        raise CheckSkipped("supportedOpsReasons is not exported (optional, ABI 1.1): declined "
                           "nodes carry no reason")
    library = session.require_library()
    dev = session.devices[0]
    found = claims(session)
    graphs = [graph for _, graph, _ in found.graphs] + [item.graph for item in found.instances]
    size = header.REASON_MAX
    problems: list[str] = []
    given = 0
    for graph in graphs:
        moved = on_device(graph, dev)
        expected = supported_ids(library, moved, dev)
        nodes = len(moved["nodes"])
        sig = signature(moved)
        variables = {**sig.data, **sig.weights}
        names = CStrings(list(variables))
        tensors = TensorArray(list(variables.values()))
        ids = cdata.new("int[]", max(nodes, 1))
        count = cdata.new("int *", -1)
        reasons = cdata.new("char[]", nodes * size + _REASONS_GUARD)
        cdata.memmove(cdata.cast("char *", reasons) + nodes * size, b"\x5a" * _REASONS_GUARD,
                      _REASONS_GUARD)
        with library.device_lock(dev):
            status = int(library.unchecked(
                "supportedOpsReasons", cdata.new("char[]", json.dumps(moved).encode()),
                names.pointer, tensors.pointer, names.count, dev, ids, nodes, count, reasons,
                size))
        raw_bytes = cdata.read(reasons, nodes * size + _REASONS_GUARD)
        answer = list(ids[0:max(0, min(count[0], nodes))])
        if (status, answer) != (expected.status, expected.ids):
            problems.append(f"status {status} and ids {answer}, where supportedOps answers "
                            f"{expected.status} and {expected.ids}")
        if raw_bytes[nodes * size:] != b"\x5a" * _REASONS_GUARD:
            problems.append("wrote past the end of reasons")
        for k in range(nodes):
            slot = raw_bytes[k * size:(k + 1) * size]
            if slot[:1] == b"\0":
                continue
            given += 1
            if b"\0" not in slot:
                problems.append(f"node {k}: a reason without a NUL within {size} bytes")
            elif k in answer or moved["nodes"][k]["op"] == "null":
                problems.append(f"node {k}: a reason for a node that is not declined")
    if problems:
        raise CheckFailed("; ".join(problems[:3]) + (f"; and {len(problems) - 3} more"
                                                     if len(problems) > 3 else ""))
    return f"{len(graphs)} graphs: same ids as supportedOps, {given} reason(s) within their slots"


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    yield "header.any_thread", lambda: check_any_thread(session)
    yield "header.device_weights", lambda: check_device_weights(session)
    yield "header.weights_untouched", lambda: check_weights_untouched(session)
    yield "header.retained_weights", lambda: check_retained_weights(session)
    yield "supported_ops.reasons", lambda: check_reasons(session)
