"""Shared fixtures: the bundled plugins are built once per session, and the
deliberately broken test plugins are built on demand.

With ACC_HOST_SANITIZE=1 every plugin is built with AddressSanitizer and
UndefinedBehaviorSanitizer; run the suite that way with the sanitizer
runtimes preloaded (.ci/run shows how).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_PLUGINS = Path(__file__).resolve().parent / "plugins"
sys.path.insert(0, str(ROOT))

import build_plugins  # noqa: E402

# Plugins are (re)built before acc_host is first imported, so discovery at
# import finds the current cpu_ref.
SANITIZE = os.environ.get("ACC_HOST_SANITIZE") == "1"
build_plugins.build_all(sanitize=SANITIZE, log=lambda message: None)

@pytest.fixture(scope="session")
def build_fake(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_fake(label, NAME=value, ...) compiles tests/plugins/fake_acc.c
    with -DNAME=value for each macro (value True for a bare -DNAME) into a
    library named after label."""
    out_dir = tmp_path_factory.mktemp("fake_plugins")
    built: dict[str, Path] = {}

    def build(label: str, **macros: object) -> Path:
        if label not in built:
            flags = [f"-D{name}" if value is True else f"-D{name}={value}"
                     for name, value in macros.items()]
            built[label] = build_plugins.compile_library(
                [TEST_PLUGINS / "fake_acc.c"], out_dir / build_plugins.library_name(label),
                sanitize=SANITIZE, werror=True, extra_flags=flags)
        return built[label]

    return build


@pytest.fixture(scope="session")
def build_test_plugin(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """build_test_plugin(source, label, NAME=value, ...) compiles
    tests/plugins/<source> together with the sources of plugins/common, with
    -DNAME=value for each macro (value True for a bare -DNAME), into a
    library named after label."""
    out_dir = tmp_path_factory.mktemp("test_plugins")
    built: dict[str, Path] = {}

    def build(source: str, label: str, **macros: object) -> Path:
        if label not in built:
            flags = [f"-D{name}" if value is True else f"-D{name}={value}"
                     for name, value in macros.items()]
            sources = [TEST_PLUGINS / source, *sorted(build_plugins.COMMON_DIR.glob("*.c"))]
            built[label] = build_plugins.compile_library(
                sources, out_dir / build_plugins.library_name(label), sanitize=SANITIZE,
                werror=True, extra_flags=flags)
        return built[label]

    return build
