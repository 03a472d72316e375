"""The ONNX backend suite on the cpu_ref accelerator (CpuRefBackend): every
graph is partitioned, the operators cpu_ref supports (the importer's
``_onnx_*`` operators among them, for the dtypes it runs) run in the plugin,
the rest on the host CPU path.

Runs the light real models, the pytorch-converted and pytorch-operator sets,
the simple models and the node cases. The expected failures are the CPU
path's plus CPU_REF_EXTRA (tests/support/onnx_expected_failures.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="the ONNX backend suite needs the onnx test extra")

from support.onnx_expected_failures import CPU_REF_EXTRA, EXPECTED_FAILURES  # noqa: E402
from support.onnx_suite import build_suite  # noqa: E402

from acc_host.onnx.backend import CpuRefBackend  # noqa: E402

globals().update({f"CpuRef{name}": case for name, case in build_suite(
    CpuRefBackend, __name__, {**EXPECTED_FAILURES, **CPU_REF_EXTRA}).items()})
