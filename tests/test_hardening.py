"""Hardening against hostile plugins, torn results and exhausted memory
(issue 34; docs/robustness.md, section "Hostile plugins and limits").

Each test is one row of that section's table (ROWS: row id -> test).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import acc_host as mx
from acc_host.errors import ContextError, LibraryError
from acc_host.library import MAX_DEVICES

ROWS = {
    "plugin-num-acc-huge": "test_a_huge_device_count_is_refused_at_load",
}


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
