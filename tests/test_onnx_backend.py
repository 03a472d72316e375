"""The official ONNX backend test suite (onnx.backend.test) against acc-host.

Node cases, the light real models (shipped inside the onnx package, with their
reference outputs), the simple models, and the pytorch-converted and
pytorch-operator sets run on the host CPU path (AccHostBackend). Every case
that fails is an explicit expected failure (strict: a case that starts passing
fails the suite until it is removed from the list), with its reason, from
tests/onnx_expected_failures.py; nothing is skipped. Counts per backend:
``python benchmarks/onnx_counts.py``.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("onnx", reason="the ONNX backend suite needs the onnx test extra")

import onnx.backend.test  # noqa: E402
from onnx_expected_failures import EXPECTED_FAILURES  # noqa: E402

from acc_host.onnx.backend import AccHostBackend  # noqa: E402


def build_suite(backend: type, name: str, expected: dict[str, str],
                include: str | None = None) -> dict[str, type]:
    """The suite's unittest classes for backend, "_cpu" variants only (acc-host's
    backend serves the ONNX device "CPU"; accelerators are picked with its
    accelerator option, so the generated "_cuda" variants are dropped), with
    every case of expected marked xfail(strict) with its reason. With include
    (a regular expression), only the matching cases are generated: the others
    are left out, not skipped."""
    suite = onnx.backend.test.BackendTest(backend, name)
    cases = suite.test_cases  # a property that builds new classes on every access
    for case in cases.values():
        for attr in list(vars(case)):
            if not attr.startswith("test_"):
                continue
            if not attr.endswith("_cpu") or (include and not re.search(include, attr)):
                delattr(case, attr)
                continue
            reason = expected.get(attr[: -len("_cpu")])
            if reason is not None:
                strict = not reason.startswith(("flaky:", "machine:"))
                setattr(case, attr, pytest.mark.xfail(reason=reason, strict=strict)(
                    getattr(case, attr)))
    return cases


globals().update(build_suite(AccHostBackend, __name__, EXPECTED_FAILURES))
