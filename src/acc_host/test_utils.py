"""Helpers in the spirit of ``mxnet.test_utils``."""

from __future__ import annotations

from .context import Context
from .errors import ContextError

__all__ = ["list_acc"]


def list_acc(ctx: Context) -> list[int]:
    """Device ids of the accelerator of ctx: [0, ..., getNumAcc() - 1], as
    ``mx.test_utils.list_gpus()`` lists GPUs."""
    if not isinstance(ctx, Context) or ctx.library is None:
        raise ContextError(f"list_acc() needs an accelerator context, got {ctx!r}")
    return list(range(ctx.library.num_devices))
