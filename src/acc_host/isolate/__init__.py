"""Isolated mode: an accelerator library in a child process of its own.

``mx.load_acc(path, isolate=True)`` (or ``MXNET_ACC_ISOLATE=1``) loads the
plugin in a child process; a crash, an abort or a hang in the plugin
becomes an exception in the host (:class:`~acc_host.errors.PluginCrashedError`,
:class:`~acc_host.errors.PluginTimeoutError`), which keeps running and can
load the library again. See docs/isolation.md.

Modules: ``settings`` (environment), ``wire`` (framing), ``shared``
(shared-memory segments, zero-copy arrays), ``arguments`` (cffi arguments
to plain data), ``process`` (the child and its channels), ``remote`` (the
stand-in cffi library), ``library`` (:class:`IsolatedLibrary`), ``child``
(the child's program).
"""

from __future__ import annotations

from .library import IsolatedLibrary
from .settings import (
    ISOLATE_ENV_VAR,
    LOAD_TIMEOUT_ENV_VAR,
    TIMEOUT_ENV_VAR,
    Timeouts,
    isolate_by_default,
    timeouts_from_environment,
)
from .shared import is_shared, shared_array, shared_empty

__all__ = ["IsolatedLibrary", "Timeouts", "ISOLATE_ENV_VAR", "TIMEOUT_ENV_VAR",
           "LOAD_TIMEOUT_ENV_VAR", "isolate_by_default", "timeouts_from_environment",
           "shared_empty", "shared_array", "is_shared"]
