"""Symbolic execution (mxnet_acc.h section 8) and the imperative
executors: the supportedOps contract on the standard graph set, loadModel /
infer numerics against the host's CPU path for every operator and dtype the
plugin claims, model lifetimes, weight updates.

Ids: supported_ops.valid_ids, supported_ops.stable, supported_ops.op_version,
symbolic.numerics.<op>.<dtype> (one per claimed operator and dtype),
symbolic.nonfinite, symbolic.graphs, symbolic.unload_reload, symbolic.duplicate_id,
symbolic.weight_update, imperative.unknown_op, imperative.numerics.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abi import cdata, header
from ..abi.annotate import annotate_symbol, output_name, signature
from ..abi.library import AccLibrary
from ..abi.loaded_model import LoadedModel
from ..abi.memory import DeviceBuffer
from ..abi.operator_executor import OperatorExecutor
from ..abi.operator_versions import OP_VERSION_ATTR, op_version
from ..abi.tensor import CStrings, TensorArray, TensorSpec
from ..errors import PluginError, PluginUnsupportedError
from . import cases
from .report import CheckFailed, CheckSkipped
from .session import ERR_NOT_FOUND, ERR_STATE, Session

__all__ = ["checks", "supported_ids"]

_GUARD = 8  # ints past the capacity that supportedOps must not touch
_SENTINEL = -0x5A5A


def on_device(graph: Mapping[str, Any], dev: int) -> dict[str, Any]:
    """A copy of an annotated graph whose operators are assigned to dev."""
    moved = copy.deepcopy(dict(graph))
    for node in moved["nodes"]:
        if node["op"] != "null":
            node["attrs"]["__dev_id__"] = str(dev)
    return moved


@dataclass
class Answer:
    """What one supportedOps() call returned, and what is wrong with it."""

    status: int
    ids: list[int]
    problem: str = ""


def supported_ids(library: AccLibrary, graph: Mapping[str, Any], dev: int) -> Answer:
    """supportedOps() called as the host calls it (capacity = node count),
    with guard entries past the capacity, and its answer validated."""
    nodes = graph["nodes"]
    sig = signature(graph)
    variables = {**sig.data, **sig.weights}
    names = CStrings(list(variables))
    tensors = TensorArray(list(variables.values()))
    capacity = len(nodes)
    ids = cdata.new("int[]", capacity + _GUARD)
    for index in range(capacity + _GUARD):
        ids[index] = _SENTINEL
    count = cdata.new("int *", -1)
    text = cdata.new("char[]", json.dumps(graph).encode("utf-8"))
    with library.device_lock(dev):
        status = library.unchecked("supportedOps",
                                   text, names.pointer, tensors.pointer, names.count, dev,
                                          ids, capacity, count)
        message = library.last_error() if status != header.OK else ""
    if status != header.OK:
        return Answer(status, [], f"failed with {header.status_name(status)} on a well-formed "
                                  f"graph: {message}".rstrip(": "))
    if any(ids[index] != _SENTINEL for index in range(capacity, capacity + _GUARD)):
        return Answer(status, [], f"wrote past ids_capacity ({capacity})")
    found = count[0]
    if not 0 <= found <= capacity:
        return Answer(status, [], f"reported {found} ids for a capacity of {capacity}")
    answer = [int(ids[index]) for index in range(found)]
    out_of_range = [node for node in answer if not 0 <= node < capacity]
    if out_of_range:
        return Answer(status, answer, f"ids {out_of_range} are not node ids (0..{capacity - 1})")
    if answer != sorted(set(answer)):
        return Answer(status, answer, f"ids {answer} are not ascending and unique")
    variables_listed = [node for node in answer if nodes[node]["op"] == "null"]
    if variables_listed:
        return Answer(status, answer, f"lists variable nodes {variables_listed}")
    return Answer(status, answer)


# ---- the graph set and what the plugin claims ------------------------------------------


def _graph_case_instance(case: cases.GraphCase, seed: int) -> tuple[dict[str, Any],
                                                                     dict[str, np.ndarray],
                                                                     dict[str, np.ndarray]]:
    """The annotated graph of a multi-operator case, its data and weights."""
    symbol = case.build()
    names = [node.name for node in symbol.graph.nodes if node.is_variable]
    weight_names = [name for name in names if name != "data"]
    graph = annotate_symbol(symbol, {"data": case.data_shape}, weights=weight_names)
    rng = np.random.default_rng(seed)
    values = {}
    for spec_name, spec in {**signature(graph).data, **signature(graph).weights}.items():
        if spec_name.endswith("moving_var"):
            values[spec_name] = rng.uniform(0.5, 2.0, spec.shape).astype(spec.dtype)
        else:
            values[spec_name] = (rng.standard_normal(spec.shape) * 0.5).astype(spec.dtype)
    return graph, {"data": values.pop("data")}, values


def evaluate_on_cpu(graph: Mapping[str, Any], values: Mapping[str, np.ndarray]
                    ) -> dict[str, np.ndarray]:
    """The heads of an annotated graph computed node by node by the host's
    CPU operators, named by the ABI's rule."""
    results: list[list[np.ndarray]] = []
    for node in graph["nodes"]:
        if node["op"] == "null":
            results.append([values[node["name"]]])
            continue
        inputs = [results[entry[0]][entry[1]] for entry in node["inputs"]]
        attrs = {key: value for key, value in node.get("attrs", {}).items()
                 if not (key.startswith("__") and key.endswith("__"))}
        results.append(cases.reference(node["op"], attrs, inputs))
    nodes = graph["nodes"]
    return {output_name(nodes[head[0]]["name"], head[1], len(results[head[0]])):
            results[head[0]][head[1]] for head in graph["heads"]}


@dataclass
class Claims:
    """supportedOps' answers on the first device for every standard graph."""

    instances: list[cases.Instance]
    answers: list[Answer]
    graphs: list[tuple[cases.GraphCase, dict[str, Any], Answer]]

    def claimed(self) -> list[cases.Instance]:
        return [instance for instance, answer in zip(self.instances, self.answers)
                if instance.op_node in answer.ids]


def claims(session: Session) -> Claims:
    """Asks (once per run) which standard graphs the plugin claims."""
    if "claims" not in session.cache:
        library = session.require_library()
        dev = session.require_devices()[0]
        instances = list(cases.instances())
        answers = [supported_ids(library, on_device(item.graph, dev), dev) for item in instances]
        graphs = []
        for case in cases.GRAPH_CASES:
            graph = _graph_case_instance(case, seed=0)[0]
            graphs.append((case, graph, supported_ids(library, on_device(graph, dev), dev)))
        session.cache["claims"] = Claims(instances, answers, graphs)
    result: Claims = session.cache["claims"]
    return result


def _describe(problems: list[str], limit: int = 3) -> str:
    shown = "; ".join(problems[:limit])
    return shown + (f"; and {len(problems) - limit} more" if len(problems) > limit else "")


def check_valid_ids(session: Session) -> str:
    """On every standard graph and device: MX_ACC_OK, a count within the
    capacity, ascending unique operator-node ids, nothing written past the
    capacity."""
    library = session.require_library()
    found = claims(session)
    problems = []
    graphs = [(item.case.label() + f" {item.dtype}", item.graph) for item in found.instances]
    graphs += [(case.name, graph) for case, graph, _ in found.graphs]
    first = session.devices[0]
    for dev in session.devices:
        for index, (label, graph) in enumerate(graphs):
            if dev == first:
                answer = (found.answers[index] if index < len(found.answers)
                          else found.graphs[index - len(found.answers)][2])
            else:
                answer = supported_ids(library, on_device(graph, dev), dev)
            if answer.problem:
                problems.append(f"device {dev}, {label}: {answer.problem}")
    if problems:
        raise CheckFailed(f"{len(problems)} bad answers: {_describe(problems)}")
    claimed = found.claimed()
    return (f"{len(graphs)} graphs x {len(session.devices)} device(s); claims "
            f"{len(claimed)} of {len(found.instances)} one-operator cases")


def check_stable(session: Session) -> str:
    """Asking again gives the same answer: every graph is asked twice more,
    back to back, in reverse order."""
    library = session.require_library()
    found = claims(session)
    dev = session.devices[0]
    problems = []
    pairs = [(item.case.label() + f" {item.dtype}", item.graph, answer)
             for item, answer in zip(found.instances, found.answers)]
    pairs += [(case.name, graph, answer) for case, graph, answer in found.graphs]
    for label, graph, first in reversed(pairs):
        moved = on_device(graph, dev)
        answers = [supported_ids(library, moved, dev) for _ in range(2)]
        different = [again.ids for again in answers
                     if (again.status, again.ids) != (first.status, first.ids)]
        if different:
            problems.append(f"{label}: {first.ids} then {different[0]}")
    if problems:
        raise CheckFailed(f"{len(problems)} graphs answered differently when asked again: "
                          f"{_describe(problems)}")
    return f"{len(pairs)} graphs asked three times, same answers"


def check_op_version(session: Session) -> str:
    """An operator at a version the host has not defined yet is not claimed
    (the header's rule for versions a plugin does not implement)."""
    library = session.require_library()
    dev = session.require_devices()[0]
    seen: dict[str, cases.Instance] = {}
    for instance in claims(session).claimed():
        seen.setdefault(instance.case.op, instance)
    if not seen:
        raise CheckSkipped("the plugin claims none of the standard cases")
    problems = []
    for op, instance in seen.items():
        graph = on_device(instance.graph, dev)
        graph["nodes"][instance.op_node]["attrs"][OP_VERSION_ATTR] = str(op_version(op) + 1)
        answer = supported_ids(library, graph, dev)
        if answer.problem or instance.op_node in answer.ids:
            problems.append(f"{op} at version {op_version(op) + 1}: "
                            + (answer.problem or "claimed"))
    if problems:
        raise CheckFailed(_describe(problems))
    return f"{len(seen)} claimed operators declined at an unknown version"


# ---- numerics ------------------------------------------------------------------------


def _run(library: AccLibrary, instance: cases.Instance, dev: int
         ) -> tuple[dict[str, Any], dict[str, Any], dict[str, np.ndarray]]:
    """Loads the case on dev and runs it twice: on its data, then on fresh
    data with the same weights (no state may carry over between calls).
    Returns both outputs and the reference of the second call."""
    assert instance.reference is not None
    fresh = cases.new_values(instance, seed=11)[0]
    values = [fresh["data"], *instance.weights.values()]
    expected_again = dict(zip(instance.reference,
                              cases.reference(instance.case.op, instance.case.attrs, values)))
    with LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev) as model:
        first = model.infer(instance.data)
        again = model.infer(fresh)
    return first, again, expected_again


def _bias_hint(instance: cases.Instance, result: np.ndarray, name: str) -> str:
    """A note when result is the CPU result with the bias input left out
    (an operator with a bias whose plugin drops it), else ""."""
    if instance.case.op not in cases.BIAS_OPS or instance.case.attrs.get("no_bias"):
        return ""
    values = [instance.data["data"], *instance.weights.values()]
    values[-1] = np.zeros_like(values[-1])
    without = dict(zip(instance.reference or {},
                       cases.reference(instance.case.op, instance.case.attrs, values)))
    if name in without and cases.compare(name, result, without[name]) is None:
        return (" (the output equals the CPU result with the bias left out: the plugin "
                "drops the bias)")
    return ""


def check_numerics(session: Session, group: list[cases.Instance]) -> str:
    """loadModel + infer of every claimed case of one operator and dtype, on
    every device, against the host's CPU operator (twice: fresh data on the
    second call). A case supportedOps claimed that loadModel declines on
    every device is a FAIL naming the dtype: the host would offer it and
    fall back to the CPU on every model."""
    library = session.require_library()
    problems, declined, ran, worst = [], 0, 0, 0.0
    decline_messages: list[str] = []
    for instance in group:
        if instance.reference is None:
            problems.append(f"{instance.case.label()}: the host cannot compute it "
                            f"({instance.reference_error})")
            continue
        for dev in session.devices:
            try:
                first, again, expected_again = _run(library, instance, dev)
            except PluginUnsupportedError as refused:
                declined += 1
                decline_messages.append(refused.plugin_message or str(refused))
                continue
            ran += 1
            for name, expected in instance.reference.items():
                for label, result, want in (("", first.get(name), expected),
                                            (" (second call)", again.get(name),
                                             expected_again.get(name))):
                    if result is None or want is None:
                        problems.append(f"{instance.case.label()}: no output {name}")
                        continue
                    error = cases.compare(name, np.asarray(result), want)
                    if error:
                        hint = "" if label else _bias_hint(instance, np.asarray(result), name)
                        problems.append(f"device {dev}, {instance.case.label()}{label}: "
                                        f"{error}{hint}")
                    else:
                        worst = max(worst, cases.max_error(np.asarray(result), want))
    if problems:
        raise CheckFailed(_describe(problems, 2))
    if ran == 0:
        dtype = group[0].dtype
        message = f": {decline_messages[0]}" if decline_messages else ""
        raise CheckFailed(f"supportedOps claims {group[0].case.op} in {dtype}, but loadModel "
                          f"declines it ({declined} of {declined} loads, "
                          f"MX_ACC_ERR_UNSUPPORTED{message}): a plugin must not claim a dtype "
                          f"it does not load ({dtype} claimed but declined)")
    note = f", {declined} declined by loadModel" if declined else ""
    rtol, atol = cases.TOLERANCES.get(group[0].dtype, (0.0, 0.0))
    tolerance = "exact" if group[0].dtype not in cases.TOLERANCES else f"rtol {rtol:g}"
    return (f"{len(group)} case(s) x {len(session.devices)} device(s) match the CPU path "
            f"({tolerance}, max abs error {worst:.3g}){note}")


def _nonfinite_values(instance: cases.Instance, seed: int) -> dict[str, np.ndarray]:
    """The instance's data with NaN, +Inf and -Inf at a few places each."""
    data = np.array(instance.data["data"], copy=True)
    flat = data.reshape(-1)
    rng = np.random.default_rng(seed)
    places = rng.permutation(flat.size)
    per_kind = max(1, flat.size // 8)
    for index, special in enumerate((np.nan, np.inf, -np.inf)):
        flat[places[index * per_kind:(index + 1) * per_kind]] = special
    return {"data": data}


def _nonfinite_problem(name: str, result: np.ndarray, want: np.ndarray) -> str | None:
    """What differs between result and want at the elements where either is
    not finite, named plainly (NaN swallowed, Inf lost, NaN or Inf out of
    finite values), else None. The finite elements are the numerics checks'
    business."""
    if result.shape != want.shape or result.dtype != want.dtype:
        return cases.compare(name, result, want)
    got, expected = result.ravel(), want.ravel()
    nan_lost = np.isnan(expected) & ~np.isnan(got)
    if nan_lost.any():
        where = int(np.argmax(nan_lost))
        return (f"{name}: NaN swallowed: {int(nan_lost.sum())} of "
                f"{int(np.isnan(expected).sum())} NaN outputs came back as numbers "
                f"(e.g. {got[where]:.6g} at flat index {where})")
    inf_lost = np.isinf(expected) & (got != expected)
    if inf_lost.any():
        where = int(np.argmax(inf_lost))
        return (f"{name}: Inf lost: {int(inf_lost.sum())} infinite outputs came back "
                f"otherwise (e.g. {got[where]:.6g} for {expected[where]:.6g} at flat "
                f"index {where})")
    appeared = np.isfinite(expected) & ~np.isfinite(got)
    if appeared.any():
        where = int(np.argmax(appeared))
        return (f"{name}: {int(appeared.sum())} outputs are {got[where]:.6g} where the CPU "
                f"path has finite values (e.g. {expected[where]:.6g} at flat index {where})")
    return None


def check_nonfinite(session: Session) -> str:
    """Every claimed element-wise or data-movement case in a floating-point
    dtype, given data with NaN, +Inf and -Inf, on every device: the outputs
    are NaN where the CPU path's are NaN, the same infinities, and finite
    where it is finite (IEEE arithmetic: a relu keeps NaN; one written as
    x > 0 ? x : 0 turns NaN into 0 and fails). The finite values are the
    numerics checks' business."""
    library = session.require_library()
    session.require_devices()
    problems, ran, declined = [], 0, 0
    for instance in claims(session).claimed():
        if (instance.case.op not in cases.NONFINITE_OPS or instance.reference is None
                or np.dtype(instance.dtype).kind != "f"):
            continue
        data = _nonfinite_values(instance, seed=31)
        values = [data["data"], *instance.weights.values()]
        with np.errstate(all="ignore"):
            expected = dict(zip(instance.reference,
                                cases.reference(instance.case.op, instance.case.attrs, values)))
        for dev in session.devices:
            try:
                with LoadedModel(library, on_device(instance.graph, dev), instance.weights,
                                 dev) as model:
                    results = model.infer(data)
            except PluginUnsupportedError:
                declined += 1
                continue
            ran += 1
            for name, want in expected.items():
                error = _nonfinite_problem(name, np.asarray(results[name]), want)
                if error:
                    problems.append(f"device {dev}, {instance.case.label()} {instance.dtype} "
                                    f"with NaN and Inf inputs: {error}")
    if problems:
        raise CheckFailed(_describe(problems, 2))
    if ran == 0:
        raise CheckSkipped("the plugin claims no element-wise or data-movement case in a "
                           "floating-point dtype" + (f" that loads ({declined} declined)"
                                                     if declined else ""))
    return (f"{ran} runs (cases x devices) with NaN, +Inf and -Inf inputs: NaN and Inf "
            "where the CPU path has them"
            + (f", {declined} declined" if declined else ""))


def check_graphs(session: Session) -> str:
    """Multi-operator networks the plugin claims whole compile and match the
    CPU path (loadModel may decline with MX_ACC_ERR_UNSUPPORTED)."""
    library = session.require_library()
    dev = session.require_devices()[0]
    notes, problems, ran = [], [], 0
    for case, _, answer in claims(session).graphs:
        graph, data, weights = _graph_case_instance(case, seed=0)
        operators = [index for index, node in enumerate(graph["nodes"]) if node["op"] != "null"]
        if answer.ids != operators:
            notes.append(f"{case.name}: {len(answer.ids)} of {len(operators)} operators claimed")
            continue
        try:
            with LoadedModel(library, on_device(graph, dev), weights, dev) as model:
                results = model.infer(data)
        except PluginUnsupportedError:
            notes.append(f"{case.name}: declined by loadModel")
            continue
        ran += 1
        expected = evaluate_on_cpu(graph, {**data, **weights})
        for name, want in expected.items():
            error = cases.compare(name, np.asarray(results[name]), want)
            if error:
                problems.append(f"{case.name}: {error}")
    if problems:
        raise CheckFailed(_describe(problems))
    if ran == 0:
        raise CheckSkipped("no standard network is claimed whole and compiled ("
                           + "; ".join(notes) + ")")
    return f"{ran} network(s) match the CPU path" + (f" ({'; '.join(notes)})" if notes else "")


def first_runnable(session: Session, with_weights: bool = False) -> cases.Instance:
    """A claimed case (float32 first) whose model loads, for lifetime checks."""
    library = session.require_library()
    dev = session.require_devices()[0]
    claimed = [item for item in claims(session).claimed() if item.reference is not None
               and (item.weights or not with_weights)]
    claimed.sort(key=lambda item: item.dtype != "float32")
    for instance in claimed:
        try:
            LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev).close()
        except PluginUnsupportedError:
            continue
        return instance
    raise CheckSkipped("no claimed standard case " + ("with weights " if with_weights else "")
                       + "loads")


def _load_raw(session: Session, instance: cases.Instance, model_id: str, dev: int) -> int:
    library = session.require_library()
    sig = signature(instance.graph)
    names = [*sig.weights, *sig.data]
    tensors = TensorArray([*sig.weights.values(), *sig.data.values()])
    keep = []
    for index, name in enumerate(sig.weights):
        value = np.ascontiguousarray(instance.weights[name])
        keep.append(value)
        tensors.set_host_array(index, value)
    c_names = CStrings(names)
    with library.device_lock(dev):
        return int(library.unchecked("loadModel",
            cdata.new("char[]", model_id.encode()),
            cdata.new("char[]", json.dumps(on_device(instance.graph, dev)).encode()),
            c_names.pointer, tensors.pointer, len(names), dev))


def _unload_raw(session: Session, model_id: str, dev: int) -> int:
    library = session.require_library()
    with library.device_lock(dev):
        return int(library.unchecked("unloadModel", cdata.new("char[]", model_id.encode())))


def check_unload_reload(session: Session) -> str:
    """unloadModel frees the id: a second unload and an infer are refused,
    and loading the same id again works and computes the same result."""
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session)
    model_id = "acc_conformance.reload"
    graph = on_device(instance.graph, dev)
    with LoadedModel(library, graph, instance.weights, dev, model_id=model_id) as model:
        first = model.infer(instance.data)
        infer = model._call
    session.expect_status("unloadModel of an unloaded id", _unload_raw(session, model_id, dev),
                          ERR_NOT_FOUND)
    if infer is not None:
        with library.device_lock(dev):
            status = int(library.unchecked("infer", *infer))
        if status == header.OK:
            raise CheckFailed("infer on an unloaded model id returned MX_ACC_OK")
    with LoadedModel(library, graph, instance.weights, dev, model_id=model_id) as model:
        second = model.infer(instance.data)
    for name, value in first.items():
        if not np.array_equal(np.asarray(value), np.asarray(second[name]), equal_nan=True):
            raise CheckFailed(f"after unload and reload, {name} differs from the first load")
    return (f"{instance.case.label()} {instance.dtype}: unload, second unload "
            "MX_ACC_ERR_NOT_FOUND, infer refused, reload gives the same output")


def check_duplicate_id(session: Session) -> str:
    """loadModel with an id that is loaded already fails with MX_ACC_ERR_STATE."""
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session)
    model_id = "acc_conformance.duplicate"
    with LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev,
                     model_id=model_id):
        status = _load_raw(session, instance, model_id, dev)
        if status == header.OK:
            _unload_raw(session, model_id, dev)
        session.expect_status("a second loadModel of a loaded id", status, ERR_STATE)
    return "a second loadModel of a loaded id is MX_ACC_ERR_STATE"


def check_weight_update(session: Session) -> str:
    """Weights given to infer replace the compiled ones from then on."""
    library = session.require_library()
    dev = session.devices[0]
    instance = first_runnable(session, with_weights=True)
    data, weights, _ = cases.new_values(instance, seed=23)
    values = [instance.data["data"], *weights.values()]
    expected = cases.reference(instance.case.op, instance.case.attrs, values)
    with LoadedModel(library, on_device(instance.graph, dev), instance.weights, dev) as model:
        updated = model.infer(instance.data, weights=weights)
        later = model.infer(instance.data)
    for label, outputs in (("with new weights", updated), ("on the next call", later)):
        for (name, result), want in zip(outputs.items(), expected):
            error = cases.compare(name, np.asarray(result), want)
            if error:
                raise CheckFailed(f"{instance.case.label()} {instance.dtype} {label}: {error}")
    return f"{instance.case.label()} {instance.dtype}: new weights used, and kept"


def check_unknown_op(session: Session) -> str:
    """accGetExecutor of an operator nobody has is MX_ACC_ERR_UNSUPPORTED."""
    library = session.require_imperative()
    dev = session.require_devices()[0]
    spec = TensorSpec((2, 3), np.dtype(np.float32))
    try:
        executor = OperatorExecutor(library, "AccConformanceNoSuchOp", [spec], [spec], {}, dev)
    except PluginUnsupportedError:
        return "refused with MX_ACC_ERR_UNSUPPORTED"
    except PluginError as error:
        raise CheckFailed(f"refused with {error.code_name}, expected MX_ACC_ERR_UNSUPPORTED: "
                          f"{error.plugin_message}") from None
    executor.close()
    raise CheckFailed("accGetExecutor(\"AccConformanceNoSuchOp\") returned MX_ACC_OK")


def check_imperative_numerics(session: Session) -> str:
    """accGetExecutor + forward on device memory for every standard case
    supportedOps claims (an executor may still be declined), against the
    CPU path."""
    library = session.require_imperative()
    dev = session.require_devices()[0]
    problems, ran, declined = [], 0, 0
    for instance in claims(session).claimed():
        if instance.reference is None:
            continue
        values = [instance.data["data"], *instance.weights.values()]
        inputs = [TensorSpec.of(np.asarray(value)) for value in values]
        outputs = [TensorSpec.of(value) for value in instance.reference.values()]
        attrs = {key: value for key, value in
                 instance.graph["nodes"][instance.op_node]["attrs"].items()
                 if not (key.startswith("__") and key.endswith("__"))}
        try:
            executor = OperatorExecutor(library, instance.case.op, inputs, outputs, attrs, dev)
        except PluginUnsupportedError:
            declined += 1
            continue
        buffers = [DeviceBuffer(library, dev, spec) for spec in inputs]
        results = [DeviceBuffer(library, dev, spec) for spec in outputs]
        try:
            for buffer, value in zip(buffers, values):
                buffer.copy_from_host(np.asarray(value))
            executor.forward(buffers, results)
            ran += 1
            for (name, want), buffer in zip(instance.reference.items(), results):
                error = cases.compare(name, buffer.to_host(), want)
                if error:
                    problems.append(f"{instance.case.label()} {instance.dtype}: {error}")
        finally:
            executor.close()
            for buffer in (*buffers, *results):
                buffer.free()
    if problems:
        raise CheckFailed(_describe(problems))
    if ran == 0:
        raise CheckSkipped(f"no claimed case runs imperatively ({declined} declined)")
    return f"{ran} executors match the CPU path" + (f", {declined} declined" if declined else "")


def checks(session: Session) -> Iterator[tuple[str, Callable[[], str]]]:
    yield "supported_ops.valid_ids", lambda: check_valid_ids(session)
    yield "supported_ops.stable", lambda: check_stable(session)
    yield "supported_ops.op_version", lambda: check_op_version(session)
    groups: dict[str, list[cases.Instance]] = {}
    if session.library is not None and session.devices:
        try:
            for instance in claims(session).claimed():
                groups.setdefault(instance.check_id, []).append(instance)
        except Exception:  # noqa: BLE001  (supported_ops.valid_ids reports it)
            groups = {}
    if not groups:
        yield "symbolic.numerics", lambda: _no_numerics(session)
    for check_id, group in groups.items():
        yield check_id, functools.partial(check_numerics, session, group)
    yield "symbolic.nonfinite", lambda: check_nonfinite(session)
    yield "symbolic.graphs", lambda: check_graphs(session)
    yield "symbolic.unload_reload", lambda: check_unload_reload(session)
    yield "symbolic.duplicate_id", lambda: check_duplicate_id(session)
    yield "symbolic.weight_update", lambda: check_weight_update(session)
    yield "imperative.unknown_op", lambda: check_unknown_op(session)
    yield "imperative.numerics", lambda: check_imperative_numerics(session)


def _no_numerics(session: Session) -> str:
    session.require_devices()
    raise CheckSkipped("the plugin claims none of the standard one-operator cases")
