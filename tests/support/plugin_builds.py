"""Building plugins for a test session: the bundled ones before acc_host is
imported (build_bundled, called by conftest.py's pytest_sessionstart), and
variants of the test plugins on demand (plugin_builder, behind conftest.py's
session fixtures).

With ACC_HOST_SANITIZE=1 (SANITIZE) every plugin is built with
AddressSanitizer and UndefinedBehaviorSanitizer; run the suite that way with
the sanitizer runtimes preloaded (.ci/run shows how).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import build_plugins

__all__ = ["SANITIZE", "StaleImportError", "build_bundled", "plugin_builder"]

SANITIZE = os.environ.get("ACC_HOST_SANITIZE") == "1"


class StaleImportError(RuntimeError):
    """acc_host was imported before the bundled plugins were brought up to
    date, and the build changed them: its discovery loaded the old ones."""


def _libraries(directory: Path) -> dict[str, tuple[int, int]]:
    """The shared libraries of directory: name -> (mtime in ns, size)."""
    if not directory.is_dir():
        return {}
    return {path.name: (path.stat().st_mtime_ns, path.stat().st_size)
            for path in directory.iterdir() if path.name.startswith("lib")
            and path.suffix == build_plugins.SHARED_SUFFIX}


def build_bundled() -> list[Path]:
    """Builds the bundled plugins into src/acc_host/_bundled (build_plugins
    recompiles only what changed, or what was built the other way: release
    or sanitized) and returns their paths.

    Importing acc_host discovers and loads what _bundled holds at that
    moment, so this must run before the first import of acc_host in the
    session. Raises StaleImportError when acc_host was imported before and
    the build changed a library: that process would test the old build."""
    before = _libraries(build_plugins.DEFAULT_OUT)
    built = build_plugins.build_all(sanitize=SANITIZE, log=lambda message: None)
    if "acc_host" in sys.modules and _libraries(build_plugins.DEFAULT_OUT) != before:
        raise StaleImportError(
            "acc_host was imported before the bundled plugins were rebuilt, so it loaded "
            f"the previous build of {build_plugins.DEFAULT_OUT}; run the tests again (the "
            "plugins are current now) and keep acc_host out of what loads before the session "
            "starts")
    return built


def plugin_builder(out_dir: Path, sources: Callable[..., list[Path]],
                   include_dirs: Sequence[Path] = ()) -> Callable[..., Path]:
    """A function (*source_args, label, NAME=value, ...) -> library path that
    compiles sources(*source_args) with -DNAME=value for each macro (a bare
    -DNAME for True) into lib<label>.so, once per label."""
    built: dict[str, Path] = {}

    def build(*args: Any, **macros: object) -> Path:
        *source_args, label = args
        if label not in built:
            flags = [f"-D{name}" if value is True else f"-D{name}={value}"
                     for name, value in macros.items()]
            built[label] = build_plugins.compile_library(
                sources(*source_args), out_dir / build_plugins.library_name(label),
                sanitize=SANITIZE, werror=True, extra_flags=flags, include_dirs=include_dirs)
        return built[label]

    return build
