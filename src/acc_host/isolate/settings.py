"""The environment switches of isolated mode, read when a library is loaded.

``MXNET_ACC_ISOLATE=1`` makes :func:`acc_host.load_acc` (and discovery at
import, which loads through the same registry) isolate every library whose
call does not say otherwise; ``MXNET_ACC_ISOLATE_TIMEOUT`` (seconds, default
60) bounds each call into an isolated plugin and
``MXNET_ACC_ISOLATE_LOAD_TIMEOUT`` (default 600) the calls that may compile
(starting the process and ``initialize``, ``loadModel``, ``configure``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..errors import InvalidArgumentError

__all__ = ["ISOLATE_ENV_VAR", "TIMEOUT_ENV_VAR", "LOAD_TIMEOUT_ENV_VAR", "DEFAULT_TIMEOUT",
           "DEFAULT_LOAD_TIMEOUT", "LOAD_FUNCTIONS", "Timeouts", "isolate_by_default",
           "timeouts_from_environment"]

ISOLATE_ENV_VAR = "MXNET_ACC_ISOLATE"
TIMEOUT_ENV_VAR = "MXNET_ACC_ISOLATE_TIMEOUT"
LOAD_TIMEOUT_ENV_VAR = "MXNET_ACC_ISOLATE_LOAD_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
DEFAULT_LOAD_TIMEOUT = 600.0
# The calls bounded by the load timeout ("start": the process and dlopen).
LOAD_FUNCTIONS = frozenset({"start", "initialize", "loadModel", "configure"})
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class Timeouts:
    """Seconds one call may take: ``call`` for every call, ``load`` for
    those that may compile (``LOAD_FUNCTIONS``)."""

    call: float = DEFAULT_TIMEOUT
    load: float = DEFAULT_LOAD_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("call", "load"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InvalidArgumentError(f"timeout {name}={value!r} must be a positive number "
                                           "of seconds")

    def of(self, function: str) -> float:
        return self.load if function in LOAD_FUNCTIONS else self.call


def isolate_by_default() -> bool:
    """Whether ``MXNET_ACC_ISOLATE`` asks for isolated libraries."""
    value = os.environ.get(ISOLATE_ENV_VAR, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidArgumentError(f"{ISOLATE_ENV_VAR}={value!r}: expected 1 or 0")


def _seconds(variable: str, default: float) -> float:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgumentError(f"{variable}={text!r}: expected a positive number of seconds")
    return value


def timeouts_from_environment() -> Timeouts:
    """The timeouts ``MXNET_ACC_ISOLATE_TIMEOUT`` and
    ``MXNET_ACC_ISOLATE_LOAD_TIMEOUT`` set (defaults 60 s, and 600 s or
    the call timeout if that is longer)."""
    call = _seconds(TIMEOUT_ENV_VAR, DEFAULT_TIMEOUT)
    return Timeouts(call, _seconds(LOAD_TIMEOUT_ENV_VAR, max(DEFAULT_LOAD_TIMEOUT, call)))
