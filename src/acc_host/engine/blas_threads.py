"""The thread policy of the CPU path's BLAS (numpy's OpenBLAS or MKL).

The CPU path runs matrix products through numpy. OpenBLAS starts one
thread per core and its threads spin while they wait; when another process
holds a core, a forward can take 5-10x longer than with one thread (measured:
SqueezeNet 240-310 ms with 2 threads under load, 30 ms with 1). acc-host
therefore limits BLAS to ``MXNET_CPU_BLAS_THREADS`` threads (default 1) when
its engine starts, unless the user chose a count already through
``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``, which
are then left alone. The limit applies process-wide (BLAS has one setting),
so it also holds for the user's own numpy calls; set the variable to change
it, or call threadpoolctl yourself afterwards.
"""

from __future__ import annotations

import os
import threading

from ..errors import InvalidArgumentError

__all__ = ["ENV_VAR", "apply_policy", "configured_threads"]

ENV_VAR = "MXNET_CPU_BLAS_THREADS"
_USER_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_applied = False
_lock = threading.Lock()


def configured_threads() -> int | None:
    """The BLAS thread count acc-host sets, or None when it leaves BLAS
    alone (the user set one of the BLAS libraries' own variables)."""
    text = os.environ.get(ENV_VAR)
    if text is None:
        if any(os.environ.get(name) for name in _USER_VARIABLES):
            return None
        return 1
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise InvalidArgumentError(f"{ENV_VAR}={text!r}: expected a positive integer")
    return count


def apply_policy() -> None:
    """Limits the BLAS threads once per process (see the module docstring)."""
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
        count = configured_threads()
        if count is None:
            return
        from threadpoolctl import threadpool_limits  # loads the BLAS libraries: only when used

        threadpool_limits(limits=count, user_api="blas")
