"""Hardening against hostile plugins, torn results and exhausted memory
(issue 34; docs/robustness.md, section "Hostile plugins and limits").

Each test is one row of that section's table (ROWS: row id -> test, here
or "module:test" in another file of tests/).
"""

from __future__ import annotations

import resource
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import settle_engine

import acc_host as mx
from acc_host.errors import ContextError, LibraryError, PluginContractError
from acc_host.isolate import wire
from acc_host.library import MAX_DEVICES

ROWS = {
    "plugin-num-acc-huge": "test_a_huge_device_count_is_refused_at_load",
    "isolated-reply-length-huge": "test_a_made_up_reply_length_kills_the_child",
    "isolated-output-overrun": "test_an_output_overrun_is_caught_in_the_guard",
    "plugin-output-overrun-checked": "test_an_output_overrun_is_caught_in_checked_mode",
    "executor-concurrent-output-reads":
        "test_concurrency:test_unlocked_output_reads_see_whole_forwards",
    "executor-weights-written-during-forward":
        "test_concurrency:test_weights_written_during_forwards_are_whole",
}


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


# ---- item 3: writes past an output ----------------------------------------------------------------


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
