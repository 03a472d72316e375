"""Many threads running forward at once (docs/isolation.md, "Threads"):
on separate executors (spread over the devices) and on one shared executor,
on cpu_ref and mlu_sim (in this process, and cpu_ref isolated), under the
NaiveEngine and the ThreadedEngine. Every result equals the single-thread
reference; nothing deadlocks: each test runs its threads under a deadline
and fails, naming the stuck threads and their stacks, instead of hanging.

A shared executor's forward() calls are serialized (each runs whole, on the
inputs it was given); a thread that reads the outputs of its own forward
holds ``executor.lock`` over the forward and the read.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import acc_host as mx

THREADS = 8
ROUNDS = 3
DEADLINE = 60.0  # seconds for all the threads of one test
SHAPE = (1, 3, 12, 12)


def _network() -> mx.sym.Symbol:
    """Convolution, relu, square, pooling, a second convolution, a fully
    connected layer and softmax: all on cpu_ref; on mlu_sim, which lacks
    square, two subgraphs around a CPU operator."""
    x = mx.sym.Variable("data")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="c1")
    x = mx.sym.Activation(x, act_type="relu", name="r1")
    x = mx.sym.square(x, name="sq")
    x = mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="p1")
    x = mx.sym.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), name="c2")
    x = mx.sym.Activation(x, act_type="relu", name="r2")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x), num_hidden=10, name="fc")
    return mx.sym.softmax(x, name="out")


SYMBOL = _network()
_weights_rng = np.random.default_rng(5)
WEIGHTS = {name: (_weights_rng.standard_normal(shape) * 0.3).astype(np.float32)
           for name, shape in zip(SYMBOL.list_arguments(),
                                  SYMBOL.infer_shape(data=SHAPE)[0]) if name != "data"}
INPUTS = [np.random.default_rng(100 + k).standard_normal(SHAPE).astype(np.float32)
          for k in range(THREADS)]


def _bind(ctx: mx.Context) -> mx.runtime.executor.Executor:
    exe = SYMBOL.simple_bind(ctx, data=SHAPE)
    for name, value in WEIGHTS.items():
        exe.arg_dict[name][:] = value
    if ctx.is_accelerator:  # the plugin runs (most of) it
        assert str(ctx) in exe.placement().values()
    return exe


def _run_threads(work: Callable[[int], None], count: int = THREADS,
                 deadline: float = DEADLINE) -> float:
    """Runs work(0) .. work(count - 1) in threads; fails, naming the stuck
    threads with their stacks, if they are not all done by the deadline;
    re-raises the first error of a thread. Returns the wall seconds."""
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            work(index)
        except BaseException as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=target, args=(k,), daemon=True, name=f"worker-{k}")
               for k in range(count)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(start + deadline - time.monotonic(), 0.0))
    stuck = [thread for thread in threads if thread.is_alive()]
    if stuck:
        frames = sys._current_frames()
        stacks = "\n".join(
            f"--- {thread.name}\n" + "".join(traceback.format_stack(frames[thread.ident]))
            for thread in stuck if thread.ident in frames)
        pytest.fail(f"{len(stuck)} threads still running after {deadline} s (deadlock?):\n"
                    f"{stacks}")
    if errors:
        raise errors[0]
    return time.monotonic() - start


@pytest.fixture(autouse=True)
def offload(offload_everything: None) -> None:
    """Every supported operator on the accelerator, however small the graph."""


@pytest.fixture(scope="module")
def isolated_cpu_ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[mx.Context]:
    copy = tmp_path_factory.mktemp("concurrency") / "libcpu_ref_concurrency.so"
    shutil.copy(mx.get_library("cpu_ref").path, copy)
    ctx = mx.load_acc(copy, acc_name="conc_cpu_ref", isolate=True)
    yield ctx
    ctx.library.close()


@pytest.fixture(params=["cpu_ref", "mlu", "isolated_cpu_ref"])
def plugin(request: pytest.FixtureRequest) -> str:
    if request.param == "isolated_cpu_ref":
        request.getfixturevalue("isolated_cpu_ref")
        return "conc_cpu_ref"
    return str(request.param)


@pytest.fixture(scope="module")
def references() -> dict[str, list[np.ndarray]]:
    """Single-thread outputs for every input, by plugin (filled lazily)."""
    return {}


def _references(references: dict[str, list[np.ndarray]], plugin: str) -> list[np.ndarray]:
    if plugin not in references:
        exe = _bind(mx.Context(plugin, 0))
        references[plugin] = [exe.forward(data=x)[0].asnumpy() for x in INPUTS]
        exe.close()
        cpu = _bind(mx.cpu())
        for x, expected in zip(INPUTS, references[plugin]):
            np.testing.assert_allclose(expected, cpu.forward(data=x)[0].asnumpy(), rtol=1e-4,
                                       atol=1e-6)
    return references[plugin]


def test_separate_executors(plugin: str, engine_kind: str,
                            references: dict[str, list[np.ndarray]]) -> None:
    """Each thread binds its own executor (on device k % devices: the
    bindings, compilations and forwards of several devices overlap) and runs
    it; every result equals the reference."""
    expected = _references(references, plugin)
    devices = mx.get_library(plugin).num_devices

    def work(k: int) -> None:
        exe = _bind(mx.Context(plugin, k % devices))
        for _ in range(ROUNDS):
            out = exe.forward(data=INPUTS[k])[0].asnumpy()
            assert np.array_equal(out, expected[k]), f"thread {k}"
        exe.close()

    _run_threads(work)


def test_shared_executor(plugin: str, engine_kind: str,
                         references: dict[str, list[np.ndarray]]) -> None:
    """All threads forward one executor. Holding exe.lock over forward and
    read, each thread gets the result of its own input; without it, every
    forward still computes on its own input (the forwards are serialized),
    and the outputs read (under the lock) are one of the forwards' results."""
    expected = _references(references, plugin)
    exe = _bind(mx.Context(plugin, 0))
    valid = {out.tobytes() for out in expected}

    def paired(k: int) -> None:
        for _ in range(ROUNDS):
            with exe.lock:
                out = exe.forward(data=INPUTS[k])[0].asnumpy()
            assert np.array_equal(out, expected[k]), f"thread {k}"

    def unpaired(k: int) -> None:
        for _ in range(2 * ROUNDS):
            exe.forward(data=INPUTS[k])
            with exe.lock:  # no forward runs or is pushed meanwhile: a whole result
                assert exe.outputs[0].asnumpy().tobytes() in valid, f"thread {k}"

    _run_threads(paired)
    _run_threads(unpaired)
    assert exe.outputs[0].asnumpy().tobytes() in valid
    exe.close()


def _fc_net(ctx: mx.Context, rng: np.random.Generator) -> mx.executor.Executor:
    """data (4, 512) -> FullyConnected(1024) -> relu -> FullyConnected(1024),
    with random weights: outputs of 16 KiB, weights of 2 MiB."""
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1024, name="fc1")
    net = mx.sym.FullyConnected(mx.sym.Activation(net, act_type="relu", name="r"),
                                num_hidden=1024, name="fc2")
    exe = net.simple_bind(ctx, data=(4, 512))
    for name in exe.arg_dict:
        exe.arg_dict[name][:] = (rng.standard_normal(exe.arg_dict[name].shape) * 0.05
                                 ).astype(np.float32)
    return exe


@pytest.mark.parametrize("where", ["cpu", "cpu_ref", "mlu"])
def test_unlocked_output_reads_see_whole_forwards(where: str, engine_kind: str) -> None:
    """Two threads forward one executor (each forward under exe.lock) while
    six others read its output without the lock: every read is one
    forward's whole result (docs/robustness.md, row
    executor-concurrent-output-reads). Readers copying one device buffer
    out at once used to share its host descriptor: one of them returned an
    array the plugin never wrote."""
    rng = np.random.default_rng(21)
    exe = _fc_net(mx.cpu() if where == "cpu" else mx.Context(where, 0), rng)
    inputs = [rng.standard_normal((4, 512)).astype(np.float32) for _ in range(2)]
    valid = {exe.forward(data=x)[0].asnumpy().tobytes() for x in inputs}
    done = threading.Event()
    reads: list[bool] = []

    def work(k: int) -> None:
        if k < 2:
            for _ in range(10 * ROUNDS):
                with exe.lock:
                    exe.forward(data=inputs[k])
            done.set()
        else:
            while not done.is_set() or len(reads) < 200:
                reads.append(exe.outputs[0].asnumpy().tobytes() in valid)

    _run_threads(work)
    assert all(reads), f"{reads.count(False)} reads of {len(reads)} matched no forward"
    exe.close()


@pytest.mark.parametrize("where", ["cpu", "cpu_ref", "mlu"])
def test_weights_written_during_forwards_are_whole(where: str, engine_kind: str) -> None:
    """Four threads forward one executor while four others overwrite a
    weight, without exe.lock, with one of two versions: every forward
    computes with one whole version (docs/robustness.md, row
    executor-weights-written-during-forward; under NaiveEngine on the CPU
    a forward read a weight while it was being copied into)."""
    rng = np.random.default_rng(22)
    exe = _fc_net(mx.cpu() if where == "cpu" else mx.Context(where, 0), rng)
    x = rng.standard_normal((4, 512)).astype(np.float32)
    versions = [(rng.standard_normal((1024, 512)) * 0.05).astype(np.float32) for _ in range(2)]
    expected = set()
    for version in versions:
        exe.arg_dict["fc1_weight"][:] = version
        expected.add(exe.forward(data=x)[0].asnumpy().tobytes())
    done = threading.Event()
    results: list[bool] = []

    def work(k: int) -> None:
        if k % 2:
            for _ in range(10 * ROUNDS):
                with exe.lock:
                    results.append(exe.forward(data=x)[0].asnumpy().tobytes() in expected)
            done.set()
        else:
            flip = k
            while not done.is_set():
                exe.arg_dict["fc1_weight"][:] = versions[flip % 2]
                flip += 1

    _run_threads(work)
    assert all(results), (f"{results.count(False)} forwards of {len(results)} used a weight "
                          "that was half written")
    exe.close()


def test_mixed_plugins_and_imperative(engine_kind: str,
                                      references: dict[str, list[np.ndarray]]) -> None:
    """Threads on both plugins at once, half of them also running imperative
    operators on device arrays (dispatch's executor cache, shared by all)."""
    expected = {plugin: _references(references, plugin) for plugin in ("cpu_ref", "mlu")}
    shared = {plugin: _bind(mx.Context(plugin, 0)) for plugin in ("cpu_ref", "mlu")}
    a = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)

    def work(k: int) -> None:
        plugin = ("cpu_ref", "mlu")[k % 2]
        ctx = mx.Context(plugin, 0)
        for _ in range(ROUNDS):
            with shared[plugin].lock:
                out = shared[plugin].forward(data=INPUTS[k])[0].asnumpy()
            assert np.array_equal(out, expected[plugin][k])
            if k % 4 < 2:
                x = mx.nd.array(a * (k + 1), ctx=ctx)
                got = mx.nd.Activation(x, act_type="relu").asnumpy()
                assert np.array_equal(got, np.maximum(a * (k + 1), 0))

    _run_threads(work)
    for exe in shared.values():
        exe.close()


def test_bounded_time() -> None:
    """The deadline helper itself: a stuck thread fails the test quickly."""
    release = threading.Event()
    with pytest.raises(pytest.fail.Exception, match="worker-0"):
        _run_threads(lambda k: release.wait(), count=1, deadline=0.2)
    release.set()
    with contextlib.suppress(Exception):
        _run_threads(lambda k: None, count=2, deadline=5)


@pytest.mark.parametrize("devices", [2])
def test_isolated_library_from_many_threads(isolated_cpu_ref: mx.Context, devices: int,
                                            tmp_path: Path) -> None:
    """Calls from many threads into one isolated library at once: each gets
    a channel of its own, and the results are right."""
    library = isolated_cpu_ref.library
    values = [np.full((64, 64), k - 3.5, np.float32) for k in range(THREADS)]

    def work(k: int) -> None:
        x = mx.nd.array(values[k], ctx=isolated_cpu_ref)
        for _ in range(ROUNDS * 3):
            assert np.array_equal(mx.nd.Activation(x, act_type="relu").asnumpy(),
                                  np.maximum(values[k], 0))

    _run_threads(work)
    assert library.alive
