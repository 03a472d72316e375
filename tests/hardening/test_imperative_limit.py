"""Each imperative call checked against the allocation limit before
anything is allocated for it (issue 34, item 4; docs/robustness.md, row
``limit-imperative-call-planned``): its outputs, and on an accelerator
context one copy of every input. Binds and import-time folding have their
own planned totals (tests/test_hardening.py)."""

from __future__ import annotations

import numpy as np
import pytest

import acc_host as mx
from acc_host.errors import AllocationTooLargeError

MEGA = 10**6


@pytest.mark.parametrize("ctx", [mx.cpu(), mx.cpu_ref(0), mx.mlu(0)], ids=str)
def test_a_huge_result_is_refused_before_allocating(ctx: mx.Context, engine_kind: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """broadcast_to of one element to 10^10 float32 (40 GB) under a 1 GB
    limit: refused at the call (in the calling thread, under either
    engine), with the planned bytes and the limit, before numpy or mx_alloc
    is asked for the memory."""
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(1000 * MEGA))
    one = mx.nd.ones((1, 1), ctx=ctx)
    copies = 4 if ctx.is_accelerator else 0
    with pytest.raises(AllocationTooLargeError, match=(
            rf"broadcast_to: the planned memory of the call \(40000000000 bytes of outputs, "
            rf"{copies} of input copies\) would take 37.3 GiB \({40000000000 + copies} bytes\), "
            r"more than MXNET_ACC_MAX_ALLOC_BYTES=1000000000; refused before allocating")
    ) as caught:
        mx.nd.broadcast_to(one, shape=(100000, 100000))
    assert caught.value.nbytes == 40000000000 + copies and caught.value.limit == 1000 * MEGA


@pytest.mark.parametrize("ctx", [mx.cpu(), mx.cpu_ref(0), mx.mlu(0)], ids=str)
def test_outputs_and_input_copies_are_planned_together(ctx: mx.Context, engine_kind: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """relu of a 4 MB array under a 6 MB limit: each array fits, and on the
    CPU (no copy) the call runs; on an accelerator its output and the copy
    of its input plan 8 MB, refused; under 8 MB it runs there too."""
    values = np.linspace(-1, 1, MEGA, dtype=np.float32)
    monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(6 * MEGA))
    data = mx.nd.array(values, ctx=ctx)
    if ctx.is_accelerator:
        with pytest.raises(AllocationTooLargeError, match=(
                r"relu: the planned memory of the call \(4000000 bytes of outputs, 4000000 of "
                r"input copies\) would take 7.6 MiB \(8000000 bytes\), more than "
                r"MXNET_ACC_MAX_ALLOC_BYTES=6000000")):
            mx.nd.relu(data)
        monkeypatch.setenv("MXNET_ACC_MAX_ALLOC_BYTES", str(8 * MEGA))
    assert np.array_equal(mx.nd.relu(data).asnumpy(), np.maximum(values, 0))
