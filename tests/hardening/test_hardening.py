"""Hardening against hostile plugins, torn results and exhausted memory
(issue 34; docs/robustness.md, section "Hostile plugins and limits").

Each test is one row of that section's table (support/robustness_rows.py's
HARDENING_ROWS: row id -> test, here or "module:test" in another file of
tests/).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from support.engines import settle_engine
from support.paths import ROOT

import acc_host as mx
from acc_host.abi.library import MAX_DEVICES
from acc_host.errors import (
    AllocationTooLargeError,
    ContextError,
    LibraryError,
    PluginContractError,
    ShapeError,
)
from acc_host.isolate import wire


@pytest.fixture(scope="module")
def crashacc_copy(build_test_plugin: Callable[..., Path],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copy(build_test_plugin("crashing_acc.c", "crashacc"),
                            tmp_path_factory.mktemp("hardening") / "libcrashacc_hardening.so"))


@pytest.fixture
def crashacc(crashacc_copy: Path) -> Iterator[Callable[[str], mx.Context]]:
    """crashacc(fail): tests/plugins/crashing_acc.c (a copy of this
    module's) in a new isolated process armed with configure(fail=fail)."""
    loaded: list[mx.Context] = []

    def load(fail: str) -> mx.Context:
        for ctx in loaded:
            ctx.library.close()
        ctx = mx.load_acc(crashacc_copy, acc_name="crash_hard", isolate=True)
        loaded.append(ctx)
        ctx.configure(fail=fail)
        return ctx

    yield load
    settle_engine()
    for ctx in loaded:
        ctx.library.close()


def _two_relus() -> mx.sym.Symbol:
    return mx.sym.Group([
        mx.sym.Activation(mx.sym.Variable("a"), act_type="relu", name="ra"),
        mx.sym.Activation(mx.sym.Variable("b"), act_type="relu", name="rb")])


# ---- item 1: the device count -------------------------------------------------------------------


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_a_huge_device_count_is_refused_at_load(build_fake: Callable[..., Path],
                                                 isolate: bool) -> None:
    """getNumAcc() answering INT_MAX is refused at load with a typed error
    (not one lock per device: the host's memory stays flat); MAX_DEVICES
    itself loads, and its per-device state is made only for the devices
    used."""
    huge = build_fake("num_acc_huge", FAKE_NAME='"hugeacc"', FAKE_NUM_ACC="2147483647")
    with pytest.raises(LibraryError, match=r"getNumAcc\(\) returned 2147483647, more than the "
                       rf"{MAX_DEVICES} devices"):
        mx.load_acc(huge, isolate=isolate)
    most = build_fake(f"num_acc_max_{isolate}", FAKE_NAME=f'"maxacc{int(isolate)}"',
                      FAKE_NUM_ACC=str(MAX_DEVICES))
    ctx = mx.load_acc(most, isolate=isolate)
    library = ctx.library
    assert library.num_devices == MAX_DEVICES
    assert library.used_devices() == []
    library.device_lock(MAX_DEVICES - 1)
    assert library.used_devices() == [MAX_DEVICES - 1]
    with pytest.raises(ContextError):
        library.device_lock(MAX_DEVICES)
    if isolate:
        library.close()


# ---- item 2: the length of an isolated reply ----------------------------------------------------


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("claim", ["claim8g", "claim2p40"])
def test_a_made_up_reply_length_kills_the_child(crashacc: Callable[[str], mx.Context],
                                               claim: str) -> None:
    """A child that announces a reply of 8 GiB or 2**40 bytes breaks the
    protocol: the host allocates nothing for it, kills the child, raises
    PluginCrashedError, and the library is dead (not left alive to fail
    the same way on every call); a reload works."""
    ctx = crashacc(f"infer:{claim}")
    data = np.linspace(-1, 1, 6, dtype=np.float32)
    exe = _two_relus().simple_bind(ctx, a=data.shape, b=data.shape)
    before = _peak_rss()
    with pytest.raises(mx.PluginCrashedError, match=rf"broke the protocol: it sent a message "
                       rf"of {8 << 30 if claim == 'claim8g' else 1 << 40} bytes, more than the "
                       rf"{wire.MAX_REPLY_BYTES} accepted"):
        exe.forward(a=data, b=data)[0].asnumpy()
    assert _peak_rss() - before < 256 << 20
    assert not ctx.library.alive
    with pytest.raises(mx.LibraryDeadError):
        ctx.configure(query="stats")
    settle_engine()
    again = crashacc("none")
    exe = _two_relus().simple_bind(again, a=data.shape, b=data.shape)
    out = exe.forward(a=data, b=-data)
    assert np.array_equal(out[0].asnumpy(), np.maximum(data, 0))
    assert np.array_equal(out[1].asnumpy(), np.maximum(-data, 0))


# ---- item 3: writes past an output -------------------------------------------------------------


@pytest.fixture(scope="module")
def misbehave_copy(build_test_plugin: Callable[..., Path],
                   tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """misbehave_copy(label): a copy of tests/plugins/misbehaving_acc.c's
    host-memory build (a file is loaded once: one copy per use)."""
    directory = tmp_path_factory.mktemp("misbehave_copies")

    def copy(label: str) -> Path:
        return Path(shutil.copy(build_test_plugin("misbehaving_acc.c", "misbehave"),
                                directory / f"lib{label}.so"))
    return copy


def _overrun_then_recover(ctx: mx.Context) -> None:
    data = np.linspace(-1, 1, 6, dtype=np.float32)
    exe = _two_relus().simple_bind(ctx, a=data.shape, b=data.shape)
    ctx.configure(mode="infer_overrun")
    with pytest.raises(PluginContractError, match=r"wrote past the end of output 'ra_output': "
                       r"64 of the 64 guard bytes"):
        exe.forward(a=data, b=-data)[0].asnumpy()
    settle_engine()
    ctx.configure(mode="good")
    out = exe.forward(a=data, b=-data)
    assert np.array_equal(out[0].asnumpy(), np.maximum(data, 0))
    assert np.array_equal(out[1].asnumpy(), np.maximum(-data, 0))


def test_an_output_overrun_is_caught_in_the_guard(misbehave_copy: Callable[[str], Path]) -> None:
    """Isolated: a plugin that writes 16 floats past its first output (in
    the staging segment, into the next output) fails the forward with a
    PluginContractError naming the output, with no corrupted value copied
    back; the process lives on and the next good forward is right."""
    ctx = mx.load_acc(misbehave_copy("misbehave_overrun_iso"), acc_name="overrun_iso",
                      isolate=True)
    try:
        _overrun_then_recover(ctx)
        assert ctx.library.alive
    finally:
        settle_engine()
        ctx.library.close()


def test_an_output_overrun_is_caught_in_checked_mode(misbehave_copy: Callable[[str], Path],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process, under MXNET_ACC_CHECK_OUTPUTS=1, each host output
    lies between guards: the same overrun is a PluginContractError naming
    the output (unchecked, it would corrupt the host's heap)."""
    monkeypatch.setenv("MXNET_ACC_CHECK_OUTPUTS", "1")
    _overrun_then_recover(mx.load_acc(misbehave_copy("misbehave_overrun"),
                                      acc_name="overrun_checked"))


# ---- item 4: memory limits on planned totals ----------------------------------------------------

GIGA = 10**9


def test_a_bind_is_checked_against_its_planned_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """An input of 1000 x 1000 x 1000 float32 (4 GB) passes the check of
    one array under a 6 GB limit, but binding it and running a forward
    plans 16 GB (the input, the output, and the operator's input and output
    copies): refused before anything is allocated, with the planned bytes
    and the limit in the message, on the CPU, cpu_ref and mlu."""
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(6 * GIGA))
    relu = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="relu")
    before = _peak_rss()
    for ctx in (mx.cpu(), mx.cpu_ref(0), mx.mlu(0)):
        with pytest.raises(AllocationTooLargeError, match=(
                r"simple_bind: the planned memory of the bind and a forward \(4000000000 bytes "
                r"of arguments and auxiliary states, 4000000000 of outputs, 0 of intermediate "
                r"results at the plan's peak, 8000000000 for the largest operator's inputs and "
                r"outputs\) would take 14.9 GiB \(16000000000 bytes\), more than "
                r"MXNET_ACC_MAX_ALLOC_BYTES=6000000000")) as caught:
            relu.simple_bind(ctx, data=(1000, 1000, 1000))
        assert caught.value.nbytes == 16 * GIGA and caught.value.limit == 6 * GIGA
    assert _peak_rss() - before < 256 << 20
    exe = relu.simple_bind(mx.cpu_ref(0), data=(100, 100))  # one that fits runs
    report = exe.memory_report()
    assert report["planned_total"] == 4 * 40000 and report["transient"] == 2 * 40000
    data = np.linspace(-1, 1, 10000, dtype=np.float32).reshape(100, 100)
    assert np.array_equal(exe.forward(data=data)[0].asnumpy(), np.maximum(data, 0))


def test_a_model_that_fits_runs_and_reports_its_plan(tmp_path: Path) -> None:
    """acc-host run --json reports the plan (planned_peak, planned_total)
    and the limit; with the limit just above the planned total the model
    still runs."""
    model = str(ROOT / "tests" / "models" / "squeezenet1_1" / "model")
    env = {key: value for key, value in os.environ.items()
           if key not in ("MXNET_ACC_LIBRARIES", "MXNET_ACC_CACHE_DIR")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    env["MXNET_ACC_CACHE_DIR"] = str(tmp_path / "cache")

    def run(limit: int | None) -> subprocess.CompletedProcess[str]:
        extra = {} if limit is None else {"MXNET_ACC_MAX_ALLOC_BYTES": str(limit)}
        return subprocess.run([sys.executable, "-m", "acc_host", "run", model, "--acc",
                               "cpu_ref", "--shape", "data=1,3,224,224", "--repeat", "0",
                               "--json"], capture_output=True,
                              text=True, env={**env, **extra}, timeout=300, check=False)

    done = run(None)
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["memory"]
    assert memory["bound"] > 0 and 0 <= memory["planned_peak"] <= memory["unplanned"]
    assert memory["planned_total"] == (memory["bound"] + memory["outputs"]
                                       + memory["planned_peak"] + memory["transient"])
    assert run(memory["planned_total"] + (1 << 20)).returncode == 0
    refused = run(memory["planned_total"] // 2)
    assert refused.returncode != 0 and "planned memory" in refused.stderr


def _onnx_one_node(op: str, inputs: dict[str, np.ndarray]) -> bytes:
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    node = onnx.helper.make_node(op, list(inputs), ["y"])
    graph = onnx.helper.make_graph(
        [node], "g", [], [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in inputs.items()])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    return bytes(model.SerializeToString())


@pytest.mark.parametrize("op, inputs, limit, planned", [
    ("ConstantOfShape", {"shape": np.array([5 * GIGA], np.int64)}, 30 * GIGA, 20 * GIGA),
    ("Range", {"a": np.array(0, np.int64), "b": np.array(GIGA, np.int64),
               "c": np.array(1, np.int64)}, 20 * GIGA, 8 * GIGA),
], ids=["ConstantOfShape-5e9-float32", "Range-1e9-int64"])
def test_import_time_folding_is_checked_with_its_copies(
        monkeypatch: pytest.MonkeyPatch, op: str, inputs: dict[str, np.ndarray], limit: int,
        planned: int) -> None:
    """A ConstantOfShape of 5e9 float32 (20 GB) under a 30 GB limit, a
    Range of 1e9 int64 (8 GB) under 20 GB: each array fits, but folding it
    holds it with two copies: refused before allocating, with the bytes."""
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(limit))
    before = _peak_rss()
    with pytest.raises(AllocationTooLargeError, match=(
            rf"{op}: folding it at import \({planned} bytes, held with its two copies on the "
            rf"way to a parameter, after 0 bytes of constants folded before\) would take .* "
            rf"\({3 * planned} bytes\), more than MXNET_ACC_MAX_ALLOC_BYTES={limit}")):
        mx.onnx.import_model(_onnx_one_node(op, inputs))
    assert _peak_rss() - before < 256 << 20


# ---- item 8: axes and splits ------------------------------------------------------------------


def _onnx_model_bytes(node_args: tuple, inputs: list[tuple[str, list[int] | None]],
                      constants: dict[str, np.ndarray]) -> bytes:
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    op, node_inputs, extra = node_args
    node = onnx.helper.make_node(op, node_inputs, ["y"], **extra)
    graph = onnx.helper.make_graph(
        [node], "g",
        [onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)
         for name, shape in inputs],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(value, name) for name, value in constants.items()])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    return bytes(model.SerializeToString())


CASES = {
    "Split-axis-5": (("Split", ["x"], {"axis": 5}), {},
                     r"axis 5 is out of range for the 2 dimensions"),
    "CumSum-axis-99": (("CumSum", ["x", "axis"], {}), {"axis": np.array(99, np.int64)},
                       r"axis 99 is out of range for the 2 dimensions"),
    "Split-sizes-1-1-of-3": (("Split", ["x", "split"], {"axis": 1}),
                             {"split": np.array([1, 1], np.int64)},
                             r"split \(1, 1\) does not add up to the extent 3"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("where", ["cpu", "cpu_ref", "mlu"])
def test_out_of_range_axes_and_splits_are_refused(case: str, where: str) -> None:
    """ONNX Split with axis=5 and CumSum with axis=99 on a 2-D input, and a
    split of (1, 1) over an extent of 3, used to run (the axis wrapped, the
    split padded): with the input's shape declared they are refused at
    import, without it at shape inference when bound, on every context."""
    node, constants, message = CASES[case]
    with pytest.raises(ShapeError, match=message):
        mx.onnx.import_model(_onnx_model_bytes(node, [("x", [2, 3])], constants))
    symbol, arg, _ = mx.onnx.import_model(_onnx_model_bytes(node, [("x", None)], constants))
    ctx = mx.cpu() if where == "cpu" else mx.Context(where, 0)
    with pytest.raises(ShapeError, match=message.replace("the 2 dimensions", "2 dimensions")
                       .replace("extent 3", "extent 3 of axis")):
        symbol.simple_bind(ctx, x=(2, 3))


# ---- item 12: raw exceptions -------------------------------------------------------------------


def _relu_json(edit: Callable[[str], str]) -> Callable[[Path], object]:
    text = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="r").tojson()
    return lambda _tmp: mx.sym.load_json(edit(text)).infer_shape()


def _deep_shape(text: str) -> str:
    document = json.loads(text)
    document["nodes"][0].setdefault("attrs", {})["__shape__"] = "-" * 100000 + "1"
    return json.dumps(document)


def _onnx_run(op: str, attrs: dict, shape: list[int]) -> Callable[[Path], object]:
    def run(_tmp: Path) -> object:
        symbol, _, _ = mx.onnx.import_model(_onnx_model_bytes((op, ["x"], attrs),
                                                              [("x", shape)], {}))
        exe = symbol.simple_bind(mx.cpu(), x=tuple(shape))
        return exe.forward(x=np.ones(shape, np.float32))[0].asnumpy()
    return run


def _assign_wrong_shape(_tmp: Path) -> None:
    exe = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu").simple_bind(
        mx.cpu(), data=(2, 3))
    exe.arg_dict["data"][:] = np.ones((4, 5), np.float32)


def _backend_shadowed(_tmp: Path) -> object:
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    from acc_host.onnx import backend

    node = onnx.helper.make_node("Relu", ["x"], ["y"])
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [node], "g", [info("x", onnx.TensorProto.FLOAT, [3])],
        [info("y", onnx.TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([1, -2, 3], np.float32), "x")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    prepared = backend.prepare(model)
    assert np.array_equal(prepared.run([])[0], [1, 0, 3])  # the initializer's value
    return prepared.run([np.ones(3, np.float32)])


TYPED = {
    "json-integer-too-long": (
        _relu_json(lambda text: text.replace('"relu"', '"relu", "x": ' + "1" * 5000, 1)),
        mx.errors.GraphError,
        "not valid JSON: Exceeds the limit (4300 digits)"),
    "json-shape-hint-too-deep": (_relu_json(_deep_shape), Exception,
                                 "bad __shape__"),
    "onnx-depth-to-space-zero": (_onnx_run("DepthToSpace", {"blocksize": 0}, [1, 4, 2, 2]),
                                 Exception, "expected an integer of at least 1, got '0'"),
    "onnx-lrn-size-zero": (_onnx_run("LRN", {"size": 0}, [1, 4, 2, 2]), Exception,
                           "attribute size='0': expected a count from 1"),
    "ndarray-load-directory": (lambda tmp: mx.nd.load(tmp), Exception,
                               "is a directory, not a model or parameter file"),
    "ndarray-load-missing": (lambda tmp: mx.nd.load(tmp / "none.params"), FileNotFoundError,
                             "none.params: no such file"),
    "ndarray-load-not-a-path": (lambda tmp: mx.nd.load(42), Exception,
                                "expected a path (str or os.PathLike) or bytes, got int"),
    "onnx-import-directory": (lambda tmp: mx.onnx.import_model(tmp), Exception,
                              "is a directory, not a model or parameter file"),
    "arg-assign-wrong-shape": (_assign_wrong_shape, Exception,
                               "cannot assign a value of shape (4, 5) to [slice(None, None, "
                               "None)] of an array of shape (2, 3)"),
    "onnx-backend-initializer-input": (_backend_shadowed, Exception,
                                       "'x' also listed as graph input(s) have an initializer"),
}


@pytest.mark.parametrize("row", list(TYPED))
def test_raw_exceptions_are_typed(row: str, tmp_path: Path) -> None:
    """Each of these used to raise a builtin exception (ValueError,
    MemoryError, ZeroDivisionError, IsADirectoryError, TypeError...): now
    an acc_host error naming what was wrong."""
    run, also, fragment = TYPED[row]
    with pytest.raises(mx.errors.AccHostError) as raised:
        run(tmp_path)
    assert isinstance(raised.value, also)
    assert fragment in str(raised.value), str(raised.value)


def _indexed_model(op: str) -> tuple[bytes, dict[str, np.ndarray]]:
    """An ONNX model of op whose index (or target) input is a graph input,
    and inputs with an index out of range."""
    onnx = pytest.importorskip("onnx")
    info = onnx.helper.make_tensor_value_info
    f, i = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    cases = {
        "Gather": (["x", "i"], {"axis": 1}, {"i": np.array([0, 5], np.int64)}, [2, 3]),
        "GatherElements": (["x", "i"], {"axis": 1}, {"i": np.array([[0, 7], [1, 2]], np.int64)},
                           [2, 2]),
        "GatherND": (["x", "i"], {}, {"i": np.array([[1, 9]], np.int64)}, [1]),
        "ScatterElements": (["x", "i", "u"], {"axis": 1},
                            {"i": np.array([[0, 3]], np.int64), "u": np.ones((1, 2), np.float32)},
                            [2, 3]),
        "ScatterND": (["x", "i", "u"], {}, {"i": np.array([[4, 0]], np.int64),
                                            "u": np.ones(1, np.float32)}, [2, 3]),
        "NegativeLogLikelihoodLoss": (["x", "i"], {"reduction": "none"},
                                      {"i": np.array([1, 8], np.int64)}, [2]),
        "SoftmaxCrossEntropyLoss": (["x", "i"], {"reduction": "none"},
                                    {"i": np.array([1, 8], np.int64)}, [2]),
    }
    names, attrs, values, out_shape = cases[op]
    inputs = [info("x", f, [2, 3])] + [
        info(name, i if values[name].dtype == np.int64 else f, list(values[name].shape))
        for name in names[1:]]
    graph = onnx.helper.make_graph([onnx.helper.make_node(op, names, ["y"], **attrs)], "g",
                                   inputs, [info("y", f, out_shape)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    return bytes(model.SerializeToString()), {"x": x, **values}


@pytest.mark.parametrize("op", ["Gather", "GatherElements", "GatherND", "ScatterElements",
                                "ScatterND", "NegativeLogLikelihoodLoss",
                                "SoftmaxCrossEntropyLoss"])
def test_out_of_range_indices_are_typed_on_the_cpu_path(op: str) -> None:
    """Out-of-range indices reaching the CPU path were numpy IndexErrors
    without the node's name (cpu_ref already refused them): now an
    OperatorError naming the node and the index."""
    model, feed = _indexed_model(op)
    symbol, _, _ = mx.onnx.import_model(model)
    exe = symbol.simple_bind(mx.cpu(), **{name: value.shape for name, value in feed.items()})
    with pytest.raises(mx.errors.OperatorError, match=r"node '.*' \(_onnx_\w+\): _onnx_\w+: "
                       r".*-?\d+.* (out of range|is not a class index)"):
        exe.forward(**feed)[0].asnumpy()


# ---- item 10: duplicate names in .params -------------------------------------------------------


def test_duplicate_names_warn_on_read_and_are_refused_on_write(tmp_path: Path) -> None:
    """A .params file naming two arrays alike (MXNet can write one) still
    loads, as in MXNet the later array wins, but with a warning naming
    both; acc_host refuses to write one."""
    from acc_host.ndarray import params_file as ndarray_format
    from acc_host.ndarray.params_file import DuplicateNameWarning

    first, second = np.zeros(2, np.float32), np.ones(2, np.float32)
    with pytest.raises(mx.errors.InvalidArgumentError,
                       match=r"names 0 and 1 are both 'arg:w'"):
        ndarray_format.dumps([first, second], ["arg:w", "arg:w"])
    with pytest.raises(mx.errors.InvalidArgumentError, match="are both 'w'"):
        ndarray_format.save(tmp_path / "refused.params", [first, second], ["w", "w"])
    assert not (tmp_path / "refused.params").exists()
    # A file as MXNet writes it: both arrays under one name.
    data = ndarray_format.dumps([first, second], ["arg:w", "arg:v"]).replace(b"arg:v", b"arg:w")
    path = tmp_path / "dup.params"
    path.write_bytes(data)
    with pytest.warns(DuplicateNameWarning, match=r"dup.params: the name 'arg:w' is given to "
                      r"arrays 0, 1; as in MXNet, loading it as a dict keeps array 1"):
        loaded = mx.nd.load(str(path))
    assert list(loaded) == ["arg:w"] and np.array_equal(loaded["arg:w"].asnumpy(), second)


# ---- item 14: crashes and exits in this process --------------------------------------------------

_CRASH_SCRIPT = """
import sys, numpy as np, acc_host as mx
ctx = mx.load_acc(sys.argv[1], acc_name="crashy")
sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", name="r")
exe = sym.simple_bind(ctx, data=(2, 3))
exe.forward(data=np.ones((2, 3), np.float32))[0].asnumpy()
ctx.configure(mode=sys.argv[2])
print("forwarding", flush=True)
exe.forward(data=np.ones((2, 3), np.float32))[0].asnumpy()
print("survived", flush=True)
"""


def _run_crash_script(library: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("MXNET_ACC_FAULT_HANDLER", "PYTHONFAULTHANDLER")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    env["MXNET_ENGINE_TYPE"] = "NaiveEngine"
    return subprocess.run([sys.executable, "-c", _CRASH_SCRIPT, str(library), mode],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_an_in_process_crash_names_the_plugin_call(misbehave_copy: Callable[[str], Path]
                                                   ) -> None:
    """A plugin that segfaults in this process still kills it (nothing can
    continue safely), but loading a library turns on faulthandler, and the
    innermost frame of its report names the library, the entry point and
    the model, and suggests isolated mode; without python -X faulthandler."""
    done = _run_crash_script(misbehave_copy("misbehave_crash_report"), "crash")
    assert done.returncode in (-11, 139) or done.returncode != 0, done
    assert "forwarding" in done.stdout and "survived" not in done.stdout
    assert "Fatal Python error: Segmentation fault" in done.stderr, done.stderr
    innermost = done.stderr.split("most recent call first):", 1)[1].strip().splitlines()[0]
    assert innermost.startswith('File "<in-process plugin call: crashy infer(acc_host.'), innermost
    assert "libmisbehave_crash_report.so; a crash here is the plugin's: mx.load_acc(path, " \
           "isolate=True) runs it in a process of its own" in innermost
    assert innermost.endswith(" in infer")


def test_an_exit_inside_infer(misbehave_copy: Callable[[str], Path]) -> None:
    """A plugin that calls _exit(0) inside infer ends this process with
    status 0: no handler runs, so nothing in this process can report it
    (documented); isolated, the same plugin is a PluginCrashedError with
    the exit status and the call."""
    path = misbehave_copy("misbehave_exit0")
    done = _run_crash_script(path, "exit0")
    assert done.returncode == 0 and "forwarding" in done.stdout
    assert "survived" not in done.stdout
    ctx = mx.load_acc(path, acc_name="exit0_iso", isolate=True)
    try:
        exe = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu").simple_bind(
            ctx, data=(2, 3))
        ctx.configure(mode="exit0")
        with pytest.raises(mx.PluginCrashedError, match=r"exited with status 0 during infer\("):
            exe.forward(data=np.ones((2, 3), np.float32))[0].asnumpy()
    finally:
        settle_engine()
        ctx.library.close()
