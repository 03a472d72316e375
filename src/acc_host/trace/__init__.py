"""Recording, replaying and viewing the host's calls into plugins.

With ``MXNET_ACC_TRACE=path`` in the environment when acc_host is imported,
or after ``acc_host.trace.start(path)``, every ABI call the host makes is
recorded to path (:mod:`.format` describes the file): the function, its
arguments (shapes, dtypes, devices; the bytes of host tensors the plugin
reads or writes, stored once each by hash; graph JSON), the status, the
plugin's error message, the duration and the thread; operators the host
runs on the CPU are recorded as spans for the timeline. Then:

* :func:`replay` re-issues the calls against a plugin build and reports the
  first call whose result differs;
* :func:`export_chrome` writes the timeline for chrome://tracing / Perfetto.

Tracing costs a hash of every host tensor crossing the ABI and a line of
JSON per call: it is a debugging tool, off by default. Models loaded before
tracing started keep calling ``infer`` untraced.
"""

from __future__ import annotations

import os

from .chrome import export_chrome
from .format import Trace, read_trace
from .recorder import Tracer, current, start, stop
from .replay import Divergence, ReplayReport, replay

__all__ = ["ENV_VAR", "Divergence", "ReplayReport", "Trace", "Tracer", "current",
           "export_chrome", "read_trace", "replay", "start", "start_from_environment", "stop"]

ENV_VAR = "MXNET_ACC_TRACE"


def start_from_environment() -> Tracer | None:
    """Starts the trace named by MXNET_ACC_TRACE, if it is set."""
    path = os.environ.get(ENV_VAR)
    return start(path) if path else None
