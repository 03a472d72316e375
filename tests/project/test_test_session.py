"""The session's plugin build (tests/conftest.py's docstring): it runs
before anything imports acc_host, and a build that changes a library
acc_host already loaded stops the session instead of testing the old one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import plugin_builds
from support.paths import ROOT, TESTS

import build_plugins


def test_loading_conftest_does_not_import_acc_host() -> None:
    """pytest loads conftest.py before pytest_sessionstart builds the
    plugins: importing acc_host there would discover the previous build."""
    script = ("import sys; import conftest; "
              "assert 'acc_host' not in sys.modules, 'conftest imported acc_host'")
    done = subprocess.run([sys.executable, "-c", script], cwd=TESTS, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": f"{TESTS}:{ROOT}",
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_a_build_after_acc_host_was_imported_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import acc_host  # noqa: F401  (this process imported it at collection)

    library = tmp_path / f"libfake{build_plugins.SHARED_SUFFIX}"
    library.write_bytes(b"old")
    monkeypatch.setattr(build_plugins, "DEFAULT_OUT", tmp_path)
    monkeypatch.setattr(build_plugins, "build_all", lambda **kwargs: [library])
    assert plugin_builds.build_bundled() == [library]  # up to date: nothing changed

    def rebuild(**kwargs: object) -> list[Path]:
        library.write_bytes(b"new build")
        return [library]

    monkeypatch.setattr(build_plugins, "build_all", rebuild)
    with pytest.raises(plugin_builds.StaleImportError, match="imported before"):
        plugin_builds.build_bundled()
