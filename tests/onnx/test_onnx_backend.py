"""The official ONNX backend test suite (onnx.backend.test) against acc-host.

Node cases, the light real models (shipped inside the onnx package, with their
reference outputs), the simple models, and the pytorch-converted and
pytorch-operator sets run on the host CPU path (AccHostBackend). Every case
that fails is an explicit expected failure (strict: a case that starts passing
fails the suite until it is removed from the list), with its reason, from
tests/support/onnx_expected_failures.py; nothing is skipped. Counts per backend:
``python benchmarks/onnx_counts.py``.

The default run (tests/conftest.py) takes a sample of the cases expected to
pass (support/onnx_suite.py): per operator, the first NODE_SAMPLE node cases; the simple models, the
pytorch-operator models and every third pytorch-converted one; the light
models of DEFAULT_REAL_MODELS. Every other case (the expected failures among
them) carries the onnx_full marker and runs in the full run (``--run-all``,
as CI runs it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="the ONNX backend suite needs the onnx test extra")

from support.onnx_expected_failures import EXPECTED_FAILURES  # noqa: E402
from support.onnx_suite import build_suite  # noqa: E402

from acc_host.onnx.backend import AccHostBackend  # noqa: E402

globals().update(build_suite(AccHostBackend, __name__, EXPECTED_FAILURES))
