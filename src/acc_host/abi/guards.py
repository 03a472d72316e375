"""Guard bytes around the memory a plugin writes into, in checked mode
(``MXNET_ACC_CHECK_OUTPUTS=1``).

A plugin that writes past the end of an output corrupts whatever lies
after it: in this process, the host's heap or another buffer of the
plugin's device. Checked mode puts GUARD_BYTES of GUARD_PATTERN after
each such region and checks them after the call that may have written
there:

- host outputs of infer() and host arrays that copyFromAcc() fills lie
  inside a scratch buffer with a guard on each side (:func:`scratch`);
- device buffers the host allocates (``DeviceBuffer``: arguments,
  outputs, every array of an accelerator context) are allocated
  2 * GUARD_BYTES longer (the guard after the buffer's bytes, then slack
  for the host's own copies of bytes and guard), the guard written at
  allocation and read back after every infer(), executor forward and
  copyToAcc() that wrote the buffer.
  The guard is after the buffer only: the ABI gives a plugin only
  addresses its mx_alloc() returned, so the host cannot place a buffer
  inside a larger allocation, and the guard after it is read by copying
  the whole allocation back (a plugin's copyFromAcc() reads from the
  address it handed out, nowhere else).

A changed guard byte is a :class:`~acc_host.errors.PluginContractError`
naming the call and the buffer. Checked mode costs these copies, which is
why it is off by default (docs/robustness.md).
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["CHECK_OUTPUTS_VARIABLE", "GUARD_BYTES", "GUARD_PATTERN", "check_outputs_enabled",
           "scratch", "overwritten"]

CHECK_OUTPUTS_VARIABLE = "MXNET_ACC_CHECK_OUTPUTS"
GUARD_BYTES = 64
GUARD_PATTERN = np.frombuffer(bytes([0x3C, 0xC3, 0x5A, 0xA5]) * (GUARD_BYTES // 4), np.uint8)


def check_outputs_enabled() -> bool:
    """Whether MXNET_ACC_CHECK_OUTPUTS asks for checked outputs."""
    return os.environ.get(CHECK_OUTPUTS_VARIABLE, "0") not in ("", "0")


def scratch(nbytes: int) -> np.ndarray:
    """A uint8 buffer of nbytes with a guard before and after them (the
    nbytes in between left uninitialized)."""
    buffer = np.empty(nbytes + 2 * GUARD_BYTES, np.uint8)
    buffer[:GUARD_BYTES] = GUARD_PATTERN
    buffer[GUARD_BYTES + nbytes:] = GUARD_PATTERN
    return buffer


def overwritten(guard: np.ndarray) -> int:
    """How many of a guard's GUARD_BYTES no longer hold GUARD_PATTERN."""
    return int(np.count_nonzero(guard != GUARD_PATTERN))
