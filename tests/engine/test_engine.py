"""The dependency engine (acc_host.engine): ordering guarantees, failures,
the worker topology, engine selection, and NDArray/executor integration.

Engines under test are made directly (ThreadedEngine(...), NaiveEngine())
so a test never disturbs the engine the rest of the suite uses, except the
NDArray tests, which run on the process engine (ThreadedEngine unless
MXNET_ENGINE_TYPE says otherwise).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import acc_host as mx
from acc_host.engine import Engine, NaiveEngine, ThreadedEngine, WriteWatch

ENGINES = ("naive", "threaded")


class FakeDevice:
    """A context routed to a device worker: (library, device id)."""

    def __init__(self, library: object, device_id: int) -> None:
        self.library = library
        self.device_id = device_id

    def __str__(self) -> str:
        return f"fake({self.device_id})"


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    made: Engine = NaiveEngine() if request.param == "naive" else ThreadedEngine(cpu_threads=2)
    yield made
    try:
        made.wait_for_all()
    finally:
        made.shutdown()


@pytest.fixture
def threaded() -> Iterator[ThreadedEngine]:
    made = ThreadedEngine(cpu_threads=3)
    yield made
    try:
        made.wait_for_all()
    finally:
        made.shutdown()


# ---- ordering ------------------------------------------------------------------------------


def test_writes_run_in_push_order_and_bump_the_version(engine: Engine) -> None:
    var, seen = engine.new_var(), []
    for index in range(50):
        engine.push_sync(lambda _ctx, index=index: seen.append(index), None, [], [var])
    engine.wait_for_var(var)
    assert seen == list(range(50)) and var.version == 50


def test_reads_see_the_last_preceding_write(engine: Engine) -> None:
    var, box, seen = engine.new_var(), [0], []

    def write(value: int) -> Any:
        def run(_ctx: Any) -> None:
            time.sleep(0.001)
            box[0] = value
        return run

    for value in range(1, 6):
        engine.push_sync(write(value), None, [], [var])
        engine.push_sync(lambda _ctx, value=value: seen.append((value, box[0])), None, [var], [])
    engine.wait_for_all()
    assert seen == [(value, value) for value in range(1, 6)]


def test_a_var_both_const_and_mutate_counts_as_mutate(engine: Engine) -> None:
    var, seen = engine.new_var(), []
    for index in range(10):
        engine.push_sync(lambda _ctx, index=index: seen.append(index), None, [var], [var])
    engine.wait_for_var(var)
    assert seen == list(range(10)) and var.version == 10


def test_push_async_finishes_only_at_the_callback(engine: Engine) -> None:
    var, seen = engine.new_var(), []

    def later(_ctx: Any, on_complete: Any) -> None:
        def finish() -> None:
            time.sleep(0.05)
            seen.append("async")
            on_complete()
        threading.Thread(target=finish).start()

    engine.push_async(later, None, [], [var])
    engine.push_sync(lambda _ctx: seen.append("next"), None, [var], [])
    engine.wait_for_all()
    assert seen == ["async", "next"] and var.version == 1


def test_pre_created_operators(engine: Engine) -> None:
    var, seen = engine.new_var(), []
    op = engine.new_operator(lambda _ctx, done: (seen.append(len(seen)), done()), [], [var])
    for _ in range(5):
        engine.push(op)
    engine.wait_for_var(var)
    assert seen == [0, 1, 2, 3, 4] and var.version == 5
    engine.delete_operator(op)
    with pytest.raises(mx.EngineError, match="deleted"):
        engine.push(op)


def test_deleted_vars_cannot_be_pushed(engine: Engine) -> None:
    var = engine.new_var()
    engine.push_sync(lambda _ctx: None, None, [], [var])
    engine.push_delete(var)
    with pytest.raises(mx.DeletedVarError):
        engine.push_sync(lambda _ctx: None, None, [var], [])
    with pytest.raises(mx.EngineError, match="engine vars"):
        engine.push_sync(lambda _ctx: None, None, ["not a var"], [])  # type: ignore[list-item]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 3), max_size=3),
                          st.sets(st.integers(0, 3), max_size=2),
                          st.integers(0, 3)), min_size=1, max_size=40))
def test_random_programs_match_sequential_execution(
        program: list[tuple[set[int], set[int], int]]) -> None:
    """Each operation reads some vars, records what it saw, and writes a
    value computed from what it read into the vars it mutates; the threaded
    engine (3 CPU workers and 2 device workers) must reproduce the
    sequential run exactly."""
    library = object()
    places = [None, FakeDevice(library, 0), FakeDevice(library, 1), None]

    def body(index: int, reads: set[int], writes: set[int], state: list[int],
             log: dict[int, tuple[int, ...]]) -> None:
        seen = tuple(state[var] for var in sorted(reads | writes))
        log[index] = seen
        if index % 3 == 0:
            time.sleep(0)  # invite a thread switch mid-operation
        for var in writes:
            state[var] = (sum(seen) * 31 + index + var) % 1_000_003

    expected_state, expected_log = [1, 2, 3, 4], {}
    for index, (reads, writes, _) in enumerate(program):
        body(index, reads, writes, expected_state, expected_log)

    made = ThreadedEngine(cpu_threads=3)
    try:
        variables = [made.new_var() for _ in range(4)]
        state, log = [1, 2, 3, 4], {}
        for index, (reads, writes, place) in enumerate(program):
            made.push_sync(lambda _ctx, i=index, r=reads, w=writes: body(i, r, w, state, log),
                           places[place], [variables[var] for var in reads],
                           [variables[var] for var in writes])
        made.wait_for_all()
    finally:
        made.shutdown()
    assert state == expected_state and log == expected_log


def test_a_hundred_thousand_small_operations_complete(threaded: ThreadedEngine) -> None:
    variables = [threaded.new_var() for _ in range(8)]
    counts = [0] * 8

    def bump(slot: int) -> Any:
        def run(_ctx: Any) -> None:
            counts[slot] += 1
        return run

    functions = [bump(slot) for slot in range(8)]
    for index in range(100_000):
        slot = index % 8
        threaded.push_sync(functions[slot], None, [variables[(slot + 1) % 8]], [variables[slot]])
    threaded.wait_for_all()
    assert counts == [12_500] * 8 and [var.version for var in variables] == [12_500] * 8


# ---- workers -------------------------------------------------------------------------------


def test_different_devices_overlap_and_one_device_stays_serial(threaded: ThreadedEngine) -> None:
    """time.sleep releases the GIL as a plugin call does: two devices run
    their 0.2 s operations at once, one device runs them one after the
    other, in push order."""
    library, order = object(), []

    def nap(tag: str) -> Any:
        def run(_ctx: Any) -> None:
            time.sleep(0.2)
            order.append(tag)
        return run

    start = time.perf_counter()
    threaded.push_sync(nap("a"), FakeDevice(library, 0), [], [threaded.new_var()])
    threaded.push_sync(nap("b"), FakeDevice(library, 1), [], [threaded.new_var()])
    threaded.wait_for_all()
    parallel = time.perf_counter() - start
    start = time.perf_counter()
    threaded.push_sync(nap("c"), FakeDevice(library, 0), [], [threaded.new_var()])
    threaded.push_sync(nap("d"), FakeDevice(library, 0), [], [threaded.new_var()])
    threaded.wait_for_all()
    serial = time.perf_counter() - start
    assert parallel < 0.35 and serial >= 0.4 and order[2:] == ["c", "d"]


def test_run_context_names_the_worker(threaded: ThreadedEngine) -> None:
    seen = []
    threaded.push_sync(lambda ctx: seen.append(ctx.stream), None)
    threaded.push_sync(lambda ctx: seen.append(ctx.stream), FakeDevice(object(), 1))
    threaded.wait_for_all()
    assert sorted(seen) == ["cpu", "fake(1)"]


def test_a_finished_operation_keeps_nothing_its_function_holds(engine: Engine) -> None:
    """Once an operation has run, neither its block nor the worker that ran
    it (idle now, waiting for the next) keeps its function: what the
    closure holds (arrays, device buffers) goes with its last user. An
    idle device worker once kept a closed executor's last step, and with it
    54 buffers on the card, which then refused to change its memory size."""

    class Held:
        pass

    held = Held()
    alive = weakref.ref(held)

    def step(obj: Held) -> Any:
        def run(_ctx: Any) -> None:
            assert obj is not None
        return run

    def step_async(obj: Held) -> Any:
        def run(_ctx: Any, on_complete: Any) -> None:
            assert obj is not None
            on_complete()
        return run

    for ctx in (None, FakeDevice(object(), 0)):
        engine.push_sync(step(held), ctx, [], [engine.new_var()])
        engine.push_async(step_async(held), ctx, [], [engine.new_var()])
    engine.wait_for_all()
    del held
    gc.collect()
    assert alive() is None


# ---- failures ------------------------------------------------------------------------------


def _fails(_ctx: Any) -> None:
    raise ValueError("the pushed function failed")


def test_naive_engine_raises_at_push(engine: Engine) -> None:
    if not isinstance(engine, NaiveEngine):
        pytest.skip("NaiveEngine only")
    var = engine.new_var()
    with pytest.raises(ValueError, match="pushed function failed"):
        engine.push_sync(_fails, None, [], [var])
    engine.wait_for_var(var)  # delivered at the push: nothing stored
    engine.push_sync(lambda _ctx: None, None, [], [var])
    assert var.version == 1


def test_threaded_failures_reach_the_next_wait_with_their_traceback(
        threaded: ThreadedEngine) -> None:
    var, derived, seen = threaded.new_var(), threaded.new_var(), []
    threaded.push_sync(_fails, None, [], [var])
    threaded.push_sync(lambda _ctx: seen.append("ran"), None, [var], [derived])
    with pytest.raises(ValueError, match="pushed function failed") as raised:
        threaded.wait_for_var(var)
    assert "_fails" in "".join(traceback.format_tb(raised.value.__traceback__))
    # the reader was skipped and inherited the same exception
    with pytest.raises(ValueError) as inherited:
        threaded.wait_to_read(derived)
    assert inherited.value is raised.value and seen == []
    # delivered once; the engine and the var work again
    threaded.wait_for_var(var)
    threaded.push_sync(lambda _ctx: seen.append("after"), None, [var], [derived])
    threaded.wait_for_var(derived)
    assert seen == ["after"]


def test_wait_for_all_reports_then_clears_failures(threaded: ThreadedEngine) -> None:
    first, second = threaded.new_var(), threaded.new_var()
    threaded.push_sync(_fails, None, [], [first])
    threaded.push_sync(lambda _ctx: (_ for _ in ()).throw(KeyError("second")), None, [], [second])
    threaded.push_sync(_fails, None, [first], [])  # mutates nothing: still not lost
    with pytest.raises(ValueError):
        threaded.wait_for_all()
    threaded.wait_for_all()
    threaded.wait_for_var(second)


def test_async_failures_and_double_callbacks(threaded: ThreadedEngine) -> None:
    var, problems = threaded.new_var(), []

    def reports(_ctx: Any, on_complete: Any) -> None:
        on_complete(RuntimeError("reported by the callback"))
        try:
            on_complete()
        except mx.EngineError as error:
            problems.append(error)

    threaded.push_async(reports, None, [], [var])
    with pytest.raises(RuntimeError, match="reported by the callback"):
        threaded.wait_for_var(var)
    assert len(problems) == 1


def test_waiting_inside_a_pushed_function_is_refused(engine: Engine) -> None:
    var, other = engine.new_var(), engine.new_var()
    if isinstance(engine, NaiveEngine):
        with pytest.raises(mx.EngineError, match="deadlock"):
            engine.push_sync(lambda _ctx: engine.wait_for_var(other), None, [], [var])
        return
    engine.push_sync(lambda _ctx: engine.wait_for_var(other), None, [], [var])
    with pytest.raises(mx.EngineError, match="deadlock"):
        engine.wait_for_var(var)


def test_shutdown_waits_for_pending_work() -> None:
    made, seen = ThreadedEngine(), []
    made.push_sync(lambda _ctx: (time.sleep(0.1), seen.append(1)), None, [], [made.new_var()])
    made.shutdown()
    assert seen == [1]
    with pytest.raises(mx.EngineError, match="shut down"):
        made.push_sync(lambda _ctx: None)


# ---- selection -------------------------------------------------------------------------------


def _engine_in_subprocess(value: str | None, code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MXNET_ENGINE_TYPE", None)
    if value is not None:
        env["MXNET_ENGINE_TYPE"] = value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("value, expected", [(None, "ThreadedEngine"),
                                             ("NaiveEngine", "NaiveEngine"),
                                             ("ThreadedEnginePerDevice", "ThreadedEngine")])
def test_mxnet_engine_type_picks_the_engine(value: str | None, expected: str) -> None:
    code = ("import acc_host as mx\n"
            "a = mx.nd.ones((2, 2)) * 3\n"
            "assert (a + 1).asnumpy().sum() == 16\n"
            "print(mx.engine.engine_type())\n")
    result = _engine_in_subprocess(value, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_an_unknown_engine_type_is_a_clear_error() -> None:
    result = _engine_in_subprocess("WarpEngine", "import acc_host as mx\nmx.nd.ones(2) + 1\n")
    assert result.returncode != 0 and "EngineError" in result.stderr
    assert "unknown engine type 'WarpEngine'" in result.stderr


# ---- NDArray and executors --------------------------------------------------------------------


def test_ndarrays_own_vars_and_views_share_them() -> None:
    a = mx.nd.arange(12).reshape((3, 4))
    view = a[1:2]
    assert view._var is a._var and a._var is not (a + 1)._var


def test_a_failed_write_reaches_asnumpy_and_the_arrays_computed_from_it() -> None:
    if mx.engine.engine_type() != "ThreadedEngine":
        pytest.skip("deferred failures need the threaded engine")
    a = mx.nd.ones((2, 2))
    mx.engine.push_sync(_fails, None, [], [a._var])
    b = a * 2
    with pytest.raises(ValueError, match="pushed function failed"):
        b.asnumpy()
    with pytest.raises(ValueError, match="pushed function failed"):
        mx.nd.waitall()  # a's copy of the failure was not delivered yet
    mx.nd.waitall()
    np.testing.assert_array_equal((mx.nd.ones(2) + 1).asnumpy(), [2, 2])


def test_operations_chain_without_waiting_and_read_in_order() -> None:
    a = mx.nd.zeros((64,))
    for _ in range(200):
        a += 1
    b = a * 2
    a[:] = 0
    assert b.asnumpy()[0] == 400 and a.asnumpy().sum() == 0
    mx.nd.waitall()


def test_copies_across_contexts_are_pushed_and_ordered() -> None:
    ctx = mx.Context("cpu_ref", 0)
    host = mx.nd.arange(6)
    on_device = host.as_in_context(ctx)
    host[:] = 0  # after the copy was pushed: the copy still sees the old values
    back = (on_device + 1).copyto(mx.cpu())
    np.testing.assert_array_equal(back.asnumpy(), np.arange(6) + 1)


def test_independent_executors_on_two_devices_give_the_serial_results() -> None:
    data = mx.sym.Variable("data")
    net = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name="fc"),
                            act_type="relu", name="act")
    rng = np.random.default_rng(1)
    weights = {"fc_weight": rng.standard_normal((8, 16)).astype(np.float32),
               "fc_bias": rng.standard_normal(8).astype(np.float32)}
    image = rng.standard_normal((4, 16)).astype(np.float32)
    executors = []
    for ctx in (mx.cpu(), mx.Context("mlu", 0), mx.Context("mlu", 1)):
        args = {"data": mx.nd.array(image, ctx=ctx),
                **{name: mx.nd.array(value, ctx=ctx) for name, value in weights.items()}}
        executors.append(net.bind(ctx, args))
    expected = executors[0].forward()[0].asnumpy()
    outputs = [exe.forward()[0] for exe in executors[1:] for _ in range(3)]
    for output in outputs:
        np.testing.assert_allclose(output.asnumpy(), expected, rtol=1e-4, atol=1e-4)


def test_push_sync_now_runs_on_the_caller_only_when_it_could_start_at_once(
        threaded: ThreadedEngine) -> None:
    var, order, release = threaded.new_var(), [], threading.Event()
    caller = threading.current_thread()
    threaded.push_sync_now(lambda _ctx: order.append(("free", threading.current_thread())),
                           None, [], [var])
    assert order == [("free", caller)]  # ran at once, on this thread
    threaded.push_sync(lambda _ctx: (release.wait(5), order.append(("slow", None))), None, [],
                       [var])
    threaded.push_sync_now(lambda _ctx: order.append(("queued", threading.current_thread())),
                           None, [var], [])
    assert [name for name, _ in order] == ["free"]  # queued behind the pending write
    release.set()
    threaded.wait_for_var(var)
    assert [name for name, _ in order] == ["free", "slow", "queued"]
    # The queued one ran once "slow" was done: on the worker, or on this
    # thread while it waited (Worker.help), whichever came first.
    assert var.version == 2


def test_run_now_watching_runs_on_the_caller_and_is_granted_like_a_push(
        threaded: ThreadedEngine) -> None:
    watched, written, other = threaded.new_var(), threaded.new_var(), threaded.new_var()
    caller = threading.current_thread()
    ran: list[Any] = []
    assert threaded.run_now_watching(lambda ctx: ran.append((ctx.ctx, threading.current_thread())),
                                     "here", (watched,), (written,))
    assert ran == [("here", caller)]
    assert (watched.version, written.version) == (0, 1)  # watched: read, not written
    # A write queued on a watched var: declined, nothing run.
    release = threading.Event()
    threaded.push_sync(lambda _ctx: release.wait(5), None, [], [watched])
    assert not threaded.run_now_watching(lambda _ctx: ran.append("no"), None, (watched,),
                                         (other,))
    release.set()
    threaded.wait_for_var(watched)
    assert len(ran) == 1 and other.version == 0
    # A write pushed while it runs waits behind it and runs after it.
    started, order = threading.Event(), []

    def slow(_ctx: Any) -> None:
        started.set()
        time.sleep(0.05)
        order.append("direct")

    pusher = threading.Thread(target=lambda: (started.wait(5), threaded.push_sync(
        lambda _ctx: order.append("pushed"), None, [], [written])))
    pusher.start()
    assert threaded.run_now_watching(slow, None, (), (written,))
    pusher.join()
    threaded.wait_for_var(written)
    assert order == ["direct", "pushed"] and written.version == 3
    # A failure is stored on the written vars and raised by the next wait.
    assert threaded.run_now_watching(lambda _ctx: 1 / 0, None, (), (other,))
    with pytest.raises(ZeroDivisionError):
        threaded.wait_for_var(other)
    assert other.version == 0
    # Inside an operation it declines (the caller is already granted).
    inner: list[bool] = []
    threaded.push_sync(lambda _ctx: inner.append(threaded.run_now_watching(
        lambda _ctx: None, None, (), (other,))), None, [], [])
    threaded.wait_for_all()
    assert inner == [False]


def test_a_write_watch_tells_whether_any_of_its_vars_was_written(engine: Engine) -> None:
    first, second, elsewhere = engine.new_var(), engine.new_var(), engine.new_var()
    watch = WriteWatch([first, second])
    assert watch.written  # made written: its owner compares once
    watch.written = False
    engine.push_sync(lambda _ctx: None, None, [first], [elsewhere])
    engine.wait_for_all()
    assert not watch.written  # read and other vars' writes do not count
    engine.push_sync(lambda _ctx: None, None, [], [second])
    engine.wait_for_all()
    assert watch.written
    # Two watches on one var both learn of a write; a dropped one is pruned.
    again = WriteWatch([second])
    watch.written = again.written = False
    engine.push_sync(lambda _ctx: None, None, [], [second])
    engine.wait_for_all()
    assert watch.written and again.written
    del watch
    WriteWatch([second])
    assert len(second._watches) == 2


def test_a_waiting_thread_helps_but_keeps_a_workers_order_and_width() -> None:
    """Worker.help runs queued blocks on the calling thread, in queue order,
    never while the worker's one thread is running a block."""
    from acc_host.engine.workers import Worker

    started, running, order, overlap = threading.Event(), [], [], []
    gate = threading.Event()

    def run(block: object, _stream: str) -> None:
        running.append(block)
        if len(running) > 1:
            overlap.append(block)
        if block == 0:
            started.set()
            gate.wait(5)
        order.append(block)
        running.remove(block)

    worker = Worker("test", 1, run)
    try:
        worker.put(0)
        assert started.wait(5)
        for block in range(1, 200):
            worker.put(block)
        assert not worker.help()  # the worker's only thread is busy with block 0
        gate.set()
        helped = 0
        while len(order) < 200:
            helped += worker.help()
        assert order == list(range(200)) and not overlap
    finally:
        worker.stop()


@pytest.mark.parametrize("lingering", [True, False])
def test_work_nobody_waits_for_starts_whether_the_worker_lingers_or_sleeps(
        lingering: bool) -> None:
    """A push to a worker that ran a block less than LINGER ago does not
    notify its threads (they poll every POLL), one to a worker idle for
    longer does: either way the block runs without anyone waiting for it,
    within a bounded time."""
    from acc_host.engine import workers

    ran = [threading.Event() for _ in range(2)]
    worker = workers.Worker("test", 1, lambda block, _stream: ran[block].set())
    try:
        worker.put(0)
        assert ran[0].wait(5)
        if not lingering:
            time.sleep(workers.LINGER * 3)
            assert worker._asleep == 1  # the idle thread sleeps until notified
        start = time.monotonic()
        worker.put(1)
        assert ran[1].wait(5)
        # bounded by POLL when lingering; generous for a loaded machine
        assert time.monotonic() - start < 1.0
    finally:
        worker.stop()


def test_at_exit_only_failures_no_wait_raised_are_reported() -> None:
    """One failure is stored on every var its operation wrote; once a wait
    raised it through one of them, what is left to report at exit
    (never_raised) leaves it out. A failure nobody waited for is kept."""
    if mx.engine.engine_type() != "ThreadedEngine":
        pytest.skip("deferred failures need the threaded engine")
    current = mx.engine.get()
    a, b = mx.engine.new_var(), mx.engine.new_var()
    mx.engine.push_sync(_fails, None, [], [a, b])
    with pytest.raises(ValueError, match="pushed function failed"):
        mx.engine.wait_to_read(a)
    assert current.never_raised() == []
    mx.engine.push_sync(_fails, None, [], [a])
    [failure] = current.never_raised()
    assert isinstance(failure, ValueError)
    mx.nd.waitall()
