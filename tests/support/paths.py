"""The folders the tests read: the checkout and the test data of tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
# MXNet 1.9.1 checkpoints with MXNet's own outputs (tests/models/README.md).
MODELS = TESTS / "models"
# PyTorch-exported ONNX models with their sample outputs (make_pytorch_models.py).
ONNX_MODELS = TESTS / "onnx_models"
# What MXNet 1.9.1 computed or wrote (tools/mxnet_compat/make_*_expected.py).
MXNET_EXPECTED = TESTS / "mxnet_expected"
# The C sources of the deliberately broken test plugins (conftest.py's builders).
TEST_PLUGINS = TESTS / "plugins"
# The C test programs (support/c_programs.py builds them).
C_TESTS = TESTS / "c"
